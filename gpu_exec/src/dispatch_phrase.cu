// dispatch_phrase.cuh: the phrase producer's launch sequence: tfs and flags per driver posting,
// an exclusive scan of the flags over the whole batch (cub::DeviceScan), the compaction.
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <cub/device/device_scan.cuh>
#include <limits>

#include "dispatch_phrase.cuh"
#include "kernel_phrase.cuh"

namespace search::gpu::engine_internal {

namespace {
// blockIdx.y strides over the leaves past this.
constexpr uint32_t kMaxGridY = 65535;
}  // namespace

PhraseBatch::~PhraseBatch() {
  if (scratch_ != nullptr) (void)cudaFreeAsync(scratch_, stream_);
}

Status PhraseBatch::Enqueue(GpuContext::Impl& ctx, const std::vector<QState>& st, const Phase& ph) {
  stream_ = ctx.stream.get();
  std::vector<PhraseTok> toks;
  uint64_t items = 0;
  for (uint32_t a = 0; a < ph.ids.size(); ++a) {
    first_.push_back(static_cast<uint32_t>(descs_.size()));
    for (const PhraseLeaf& l : st[ph.ids[a]].phrases) {
      PhraseDesc d;
      d.n = static_cast<uint32_t>(l.tok_of.size());
      d.distinct = static_cast<uint32_t>(l.toks.size());
      d.tok_off = static_cast<uint32_t>(toks.size());
      d.item_begin = static_cast<uint32_t>(items);
      d.query = a;
      d.slot = l.slot;
      std::copy(l.tok_of.begin(), l.tok_of.end(), d.tok_of);
      toks.insert(toks.end(), l.toks.begin(), l.toks.end());
      items += l.toks[0].count;
      max_items_ = std::max(max_items_, l.toks[0].count);
      caps_.push_back(l.toks[0].count);
      descs_.push_back(d);
      if (items >= std::numeric_limits<uint32_t>::max() - 1)
        return Status::ResourceExhausted("a GPU batch of more than 2^32 phrase candidates");
    }
  }
  if (descs_.empty()) return Status::Ok();
  const uint32_t leaves = static_cast<uint32_t>(descs_.size());
  const uint32_t n = static_cast<uint32_t>(items);
  size_t temp_bytes = 0;
  SEARCH_CUDA_RETURN_IF_ERROR(
      cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, static_cast<uint32_t*>(nullptr),
                                    static_cast<uint32_t*>(nullptr), n + 1, stream_));
  uint32_t *d_flags = nullptr, *d_scan = nullptr, *d_tfc = nullptr;
  PhraseTok* d_toks = nullptr;
  void* d_temp = nullptr;
  auto layout = [&](Arena& ar) {
    d_flags = ar.Take<uint32_t>(size_t{n} + 1);  // zeroed: the scan's last item is 0
    const size_t zeroed = ar.size();
    d_descs_ = ar.Take<PhraseDesc>(leaves);
    d_toks = ar.Take<PhraseTok>(toks.size());
    d_scan = ar.Take<uint32_t>(size_t{n} + 1);
    d_tfc = ar.Take<uint32_t>(std::max<uint32_t>(n, 1));
    d_docs_ = ar.Take<uint32_t>(std::max<uint32_t>(n, 1));
    d_tfs_ = ar.Take<uint32_t>(std::max<uint32_t>(n, 1));
    d_lens_ = ar.Take<uint32_t>(leaves);
    d_temp = ar.Take<char>(std::max<size_t>(temp_bytes, 1));
    return zeroed;
  };
  SEARCH_ASSIGN_OR_RETURN(scratch_, AllocateScratch(ctx, layout));
  Uploads up;
  up.Add(d_descs_, descs_.data(), descs_.size());
  up.Add(d_toks, toks.data(), toks.size());
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream_));
  const dim3 grid(GridFor(max_items_, kThreads, leaves), std::min(leaves, kMaxGridY));
  SEARCH_RETURN_IF_ERROR(Launch(PhraseTfKernel, grid, stream_, d_descs_, leaves, d_toks, d_tfc, d_flags));
  SEARCH_CUDA_RETURN_IF_ERROR(cub::DeviceScan::ExclusiveSum(d_temp, temp_bytes, d_flags, d_scan, n + 1, stream_));
  return Launch(PhraseCompactKernel, grid, stream_, d_descs_, leaves, d_toks, d_tfc, d_scan, d_docs_, d_tfs_,
                d_lens_);
}

PhraseOut PhraseBatch::Out(uint32_t a, uint32_t j) const {
  const PhraseDesc& d = descs_[first_[a] + j];
  PhraseOut o;
  o.docs = d_docs_ + d.item_begin;
  o.tfs = d_tfs_ + d.item_begin;
  o.d_len = d_lens_ + first_[a] + j;
  o.cap = caps_[first_[a] + j];
  return o;
}

}  // namespace search::gpu::engine_internal
