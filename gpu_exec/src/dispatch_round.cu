// dispatch.cuh: uploads, the top-k tail of every answering sequence, and RunRound.
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <chrono>
#include <cub/device/device_segmented_sort.cuh>
#include <vector>

#include "dispatch.cuh"
#include "kernel_topk.cuh"

namespace search::gpu::engine_internal {

Status PrepareTopk(TopkPlan& t, const std::vector<uint64_t>& caps, cudaStream_t stream) {
  t.total_keys = 0;
  t.seg_begin.clear();
  t.hist.assign(caps.size(), nullptr);
  t.sel.assign(caps.size(), nullptr);
  for (uint64_t c : caps) {
    t.seg_begin.push_back(static_cast<int>(t.total_keys));
    t.total_keys += c;
    t.max_items = std::max(t.max_items, c);
  }
  if (t.total_keys >= (uint64_t{1} << 31))
    return Status::ResourceExhausted("gpu top-k: too many candidates in one batch");
  // cub::DeviceSegmentedSort, not DeviceSegmentedRadixSort: a batch's few segments (up to 300-500,
  // by CUB's policy; past that it partitions them first, with one stream sync) are sorted in one
  // launch, where the radix sort made 11 passes. The keys are unique: the same order.
  SEARCH_CUDA_RETURN_IF_ERROR(cub::DeviceSegmentedSort::SortKeysDescending(
      nullptr, t.temp_bytes, static_cast<const unsigned long long*>(nullptr), static_cast<unsigned long long*>(nullptr),
      static_cast<int64_t>(std::max<uint64_t>(t.total_keys, 1)), static_cast<int64_t>(caps.size()),
      static_cast<const int*>(nullptr), static_cast<const int*>(nullptr), stream));
  return Status::Ok();
}

QueryOut* TakeAnswers(Arena& a, TopkPlan& t, uint32_t q, uint32_t total_k) {
  QueryOut* d_out = a.Take<QueryOut>(q);
  t.d_hits = a.Take<DevHit>(std::max<uint32_t>(total_k, 1));
  return d_out;
}

void TakeTopkZeroed(Arena& a, TopkPlan& t, uint32_t query) {
  t.hist[query] = a.Take<uint32_t>(kHistBins);
  t.sel[query] = a.Take<uint32_t>(1);
}

void TakeTopkUploads(Arena& a, TopkPlan& t, uint32_t q) {
  t.d_tk = a.Take<TopkDesc>(q);
  t.d_seg_begin = a.Take<int>(q);
  t.tk.assign(q, TopkDesc{});
}

void SetTopkInput(TopkPlan& t, const Phase& ph, const std::vector<QState>& st, uint32_t a, const float* scores,
                  const uint32_t* docs, const uint32_t* d_count, uint32_t n, QueryOut* out) {
  TopkDesc& d = t.tk[a];
  d.scores = scores;
  d.docs = docs;
  d.d_count = d_count;
  d.n = n;
  d.k = st[ph.ids[a]].k;
  d.seg_begin = static_cast<uint32_t>(t.seg_begin[a]);
  d.out_begin = ph.hit_off[a];
  d.hist = t.hist[a];
  d.sel_count = t.sel[a];
  d.out = out;
}

void TakeTopkRest(Arena& a, TopkPlan& t, uint32_t q) {
  for (uint32_t i = 0; i < q && i < t.tk.size(); ++i)  // each query's key segment
    t.tk[i].key_cap =
        static_cast<uint32_t>((i + 1 < t.seg_begin.size() ? static_cast<uint64_t>(t.seg_begin[i + 1]) : t.total_keys) -
                              static_cast<uint64_t>(t.seg_begin[i]));
  t.d_thr = a.Take<uint32_t>(q);
  t.d_seg_end = a.Take<int>(q);
  t.d_keys = a.Take<unsigned long long>(std::max<uint64_t>(t.total_keys, 1));
  t.d_sorted = a.Take<unsigned long long>(std::max<uint64_t>(t.total_keys, 1));
  t.d_temp = a.Take<char>(std::max<size_t>(t.temp_bytes, 1));
  for (uint32_t i = 0; i < q && i < t.tk.size(); ++i) t.tk[i].seg_end = t.d_seg_end + i;
}

void AddTopkUploads(Uploads& up, const TopkPlan& t, uint32_t q) {
  up.Add(t.d_tk, t.tk.data(), q);
  up.Add(t.d_seg_begin, t.seg_begin.data(), q);
}

Status FinishTopk(GpuContext::Impl& ctx, TopkPlan& t, const Phase& ph, QueryOut* d_out, uint32_t doc_begin,
                  void* scratch) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  const dim3 grid(GridFor(t.max_items, kThreads, q), q);
  SEARCH_RETURN_IF_ERROR(Launch(TopkHistogramKernel, grid, stream, t.d_tk, doc_begin));
  SEARCH_RETURN_IF_ERROR(Launch(TopkThresholdKernel, dim3(1, q), stream, t.d_tk, t.d_thr));
  SEARCH_RETURN_IF_ERROR(Launch(TopkSelectKernel, grid, stream, t.d_tk, t.d_thr, doc_begin, t.d_keys));
  size_t temp = t.temp_bytes;
  SEARCH_CUDA_RETURN_IF_ERROR(cub::DeviceSegmentedSort::SortKeysDescending(
      t.d_temp, temp, t.d_keys, t.d_sorted, static_cast<int64_t>(std::max<uint64_t>(t.total_keys, 1)),
      static_cast<int64_t>(q), static_cast<const int*>(t.d_seg_begin), static_cast<const int*>(t.d_seg_end), stream));
  uint32_t max_k = 0;
  for (uint32_t id = 0; id < q; ++id) max_k = std::max(max_k, t.tk[id].k);
  SEARCH_RETURN_IF_ERROR(
      Launch(TopkOutputKernel, dim3(GridFor(max_k, kThreads, q), q), stream, t.d_tk, t.d_sorted, t.d_hits));
  // One copy for the outcomes and the hits: TakeAnswers and RunRound lay them out alike.
  const size_t out_bytes = Align(q * sizeof(QueryOut));
  if (reinterpret_cast<char*>(t.d_hits) != reinterpret_cast<char*>(d_out) + out_bytes ||
      reinterpret_cast<char*>(ph.h_hits) != reinterpret_cast<char*>(ph.h_out) + out_bytes)
    return Status::Internal("gpu top-k: answers laid out differently on the host and the device");
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ph.h_out, d_out, out_bytes + size_t{ph.total_k} * sizeof(DevHit),
                                              cudaMemcpyDeviceToHost, stream));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch, stream));
  return Status::Ok();
}

namespace {
uint64_t NanosSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}
}  // namespace

Status RunRound(GpuContext::Impl& ctx, const ShardDev& shard, std::vector<Phase>& phases, std::vector<QState>& st) {
  if (phases.empty()) return Status::Ok();
  size_t need = 0;
  for (const Phase& p : phases) need += p.PinnedBytes();
  if (ctx.pinned.size() < need) {  // grows geometrically, so steady state allocates nothing
    const size_t grown = std::max(need, ctx.pinned.size() * 2);
    ctx.pinned.Reset();
    SEARCH_ASSIGN_OR_RETURN(ctx.pinned, PinnedBuffer::Allocate(grown));
  }
  char* h = ctx.pinned.as<char>();
  for (Phase& p : phases) {
    p.h_out = reinterpret_cast<QueryOut*>(h);
    h += Align(p.ids.size() * sizeof(QueryOut));
    p.h_hits = reinterpret_cast<DevHit*>(h);
    h += Align(size_t{p.total_k} * sizeof(DevHit));
  }
  const auto enqueue_t0 = std::chrono::steady_clock::now();
  Status launched;
  for (const Phase& p : phases) {
    switch (p.kind) {
      case PhaseKind::kAnd:
        launched = EnqueueAnd(ctx, shard, st, p);
        break;
      case PhaseKind::kOrDense:
        launched = EnqueueOr(ctx, shard, st, p);
        break;
      case PhaseKind::kOrPruned:
        launched = EnqueueOrPruned(ctx, shard, st, p);
        break;
      case PhaseKind::kTheta:
        launched = EnqueueTheta(ctx, shard, st, p);
        break;
      case PhaseKind::kTopBlocks:
        launched = EnqueueTopBlocks(ctx, shard, st, p);
        break;
      case PhaseKind::kTree:
      case PhaseKind::kTreeCount:
        launched = EnqueueTree(ctx, shard, st, p);
        break;
    }
    if (!launched.ok()) break;
  }
  const auto wait_t0 = std::chrono::steady_clock::now();
  const Status synced = ctx.stream.Synchronize();  // also after a failed launch: nothing stays in flight
  Counters().wait_ns.fetch_add(NanosSince(wait_t0), std::memory_order_relaxed);
  Counters().enqueue_ns.fetch_add(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wait_t0 - enqueue_t0).count()),
      std::memory_order_relaxed);
  Counters().rounds.fetch_add(1, std::memory_order_relaxed);
  ctx.EndRound();
  SEARCH_RETURN_IF_ERROR(launched);
  SEARCH_RETURN_IF_ERROR(synced);
  for (const Phase& p : phases) {
    for (size_t a = 0; a < p.ids.size(); ++a) {
      QState& s = st[p.ids[a]];
      const QueryOut& o = p.h_out[a];
      QueryStats& stats = s.result.stats;
      const bool overflow =
          (p.kind == PhaseKind::kOrPruned || p.kind == PhaseKind::kTopBlocks) && o.error == kErrOverflow;
      if (p.kind != PhaseKind::kTheta && !overflow) stats.lists += s.present.size();
      stats.blocks_decoded += o.blocks;
      stats.freq_blocks_decoded += o.freq_blocks;
      stats.postings_decoded += o.postings;
      stats.bytes_touched += o.bytes;
      stats.postings_scored += o.scored;
      if (overflow) {  // the answer is incomplete: ExecuteBatchGpu reruns the query (dense, or theta first)
        s.overflow = true;
        continue;
      }
      if (o.error != 0) {
        s.status = Status::Corruption("posting block failed to decode on the GPU (corrupt or outside the shard)");
        s.done = true;
        continue;
      }
      if (p.kind == PhaseKind::kTheta) {  // a query sampled twice (alt_theta_slot): the higher
        s.theta = std::max(s.theta, o.theta);
        continue;
      }
      if (p.kind == PhaseKind::kTopBlocks) s.theta = o.theta;  // the floor read: TopBlocksExact
      if (p.kind == PhaseKind::kTree || p.kind == PhaseKind::kTreeCount) s.result.total = s.count ? o.total : 0;
      if (p.kind == PhaseKind::kTreeCount) continue;  // no hits (a count_phase query's come from its flat path)
      if (p.kind == PhaseKind::kAnd && s.count) s.result.total = o.scored;  // the survivors: every match
      s.result.hits.resize(o.hits);
      static_assert(sizeof(DevHit) == sizeof(ScoredDoc));
      for (uint32_t i = 0; i < o.hits; ++i) {
        const DevHit& dh = p.h_hits[p.hit_off[a] + i];
        s.result.hits[i] = ScoredDoc{dh.doc, dh.score};
      }
    }
  }
  return Status::Ok();
}

}  // namespace search::gpu::engine_internal
