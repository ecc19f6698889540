// gpu_engine.hpp: the batch dispatch. Host work per batch: validate each query (k, term count,
// list extents), plan the launch sequences from host metadata (list lengths and block counts bound
// every device-side count), take one scratch allocation per sequence from the context's
// stream-ordered pool, upload the descriptors (packed into the context's pinned staging, one
// asynchronous copy per sequence: a copy from pageable memory would make the host wait for the
// stream), launch, copy the per-query outcomes and hits back into pinned memory (one copy), and
// synchronize once per round (round 2 only for andor queries whose and-part
// found fewer than k hits).
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <limits>
#include <string>
#include <vector>

#include "engine_kernels.cuh"
#include "core/score_slack.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/gpu_engine.hpp"
#include "kernel_or.cuh"

namespace search::gpu {

using namespace engine_internal;  // NOLINT(google-build-using-namespace): this file's kernels

namespace {
// Every scratch and staging piece starts on this boundary (Arena, Impl::Stage, RunRound's pinned
// layout), so that host and device layouts of the same pieces agree.
constexpr size_t kScratchAlign = 256;
constexpr size_t Align(size_t x) {
  return (x + kScratchAlign - 1) & ~(kScratchAlign - 1);
}
}  // namespace

struct GpuContext::Impl {
  Stream stream;
  cudaMemPool_t pool = nullptr;
  PinnedBuffer pinned;
  GpuContextOptions options;
  // Pinned staging for one round's host-to-device uploads: a cudaMemcpyAsync from pageable memory
  // makes the host wait for the stream's earlier work (and goes through the driver's own staging
  // under its locks), which serialized the launch sequence behind the GPU. Bump-allocated; reset
  // after the round's synchronization, when outgrown buffers (`retired`) are freed too.
  PinnedBuffer staging;
  size_t staged = 0;
  std::vector<PinnedBuffer> retired;

  Result<char*> Stage(size_t bytes) {
    bytes = Align(bytes);
    if (staged + bytes > staging.size()) {
      const size_t grown = std::max({bytes, staging.size() * 2, size_t{1} << 20});
      if (staged > 0) retired.push_back(std::move(staging));  // copies from it may still be pending
      staging.Reset();
      SEARCH_ASSIGN_OR_RETURN(staging, PinnedBuffer::Allocate(grown));
      staged = 0;
    }
    char* p = staging.as<char>() + staged;
    staged += bytes;
    return p;
  }
  void EndRound() {  // REQUIRES: the stream is synchronized
    staged = 0;
    retired.clear();
  }
  ~Impl() {
    if (stream.get() != nullptr) (void)cudaStreamSynchronize(stream.get());
    if (pool != nullptr) (void)cudaMemPoolDestroy(pool);
  }
};

GpuContext::GpuContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuContext::~GpuContext() = default;
CUstream_st* GpuContext::stream() const {
  return impl_->stream.get();
}

Result<std::unique_ptr<GpuContext>> GpuContext::Create(const GpuContextOptions& options) {
  if (options.or_candidate_cap == 0 || options.or_candidate_cap > (uint32_t{1} << 30) ||
      options.or_theta_sample > (uint32_t{1} << 24))
    return Status::InvalidArgument(
        "GpuContextOptions: or_candidate_cap must be in [1, 2^30], or_theta_sample at most 2^24");
  if (!GpuAvailable()) return Status::Unavailable("GpuContext: " + GpuDescription());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  int device = 0;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SEARCH_ASSIGN_OR_RETURN(impl->stream, Stream::Create());
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&impl->pool, &props));
  uint64_t keep = std::numeric_limits<uint64_t>::max();  // never give memory back between batches
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(impl->pool, cudaMemPoolAttrReleaseThreshold, &keep));
  if (options.scratch_bytes > 0) {  // reserve: the pool keeps what it grew to
    void* p = nullptr;
    SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&p, options.scratch_bytes, impl->pool, impl->stream.get()));
    SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(p, impl->stream.get()));
    SEARCH_RETURN_IF_ERROR(impl->stream.Synchronize());
  }
  return std::unique_ptr<GpuContext>(new GpuContext(std::move(impl)));
}

namespace {

constexpr uint32_t kMaxGridX = 2048;
// CTAs one launch of a batch may spread over its queries: gridDim.x shrinks with gridDim.y * z
// (the grid-stride loops cover the rest), so a batch of many queries does not queue hundreds of
// thousands of CTAs that mostly find nothing to do (grid.x is sized by the batch's largest query).
constexpr uint64_t kMaxCtasPerLaunch = 8192;
constexpr uint32_t kMinGridX = 16;
constexpr uint32_t kMaxBatchY = 4096;  // queries per launch sequence (gridDim.y)
// A later list is decoded whole when the candidates are at least this many times its block count
// (most blocks would hold a candidate anyway); otherwise only blocks holding candidates.
constexpr uint64_t kDenseFactor = 2;
// Device memory one or-sequence may take for its dense accumulators and keys.
constexpr uint64_t kOrGroupBytes = uint64_t{2} << 30;
// Or-path choice: GpuContextOptions::or_theta_min_postings / or_pruned_divisor (the pruned path
// when the essential lists hold at most num_docs / divisor postings: beyond that the dense
// accumulator's two num_docs-wide passes are about as cheap; small queries skip the theta round,
// whose synchronization would cost more than the pruning saves).

uint32_t GridFor(uint64_t items, uint32_t per_cta, uint64_t queries = 1) {
  const uint64_t g = (items + per_cta - 1) / per_cta;
  const uint64_t cap = std::clamp<uint64_t>(kMaxCtasPerLaunch / std::max<uint64_t>(queries, 1), kMinGridX, kMaxGridX);
  return static_cast<uint32_t>(std::clamp<uint64_t>(g, 1, cap));
}

// A spread kernel's grid (kernel_or.cuh): enough CTAs for `items` (an upper bound on the batch's
// items), at most about one full residency of an H100 (grid-stride loops do the rest).
constexpr uint64_t kSpreadCtas = 1056;
uint32_t SpreadGrid(uint64_t items, uint32_t per_cta) {
  return static_cast<uint32_t>(std::clamp<uint64_t>((items + per_cta - 1) / per_cta, 1, kSpreadCtas));
}

// Host-to-device uploads of one launch sequence through the context's pinned staging (Impl::Stage):
// Add records a region; Flush packs each run of regions that lie back to back in the scratch (the
// arena's alignment padding between them carried along) into one asynchronous copy.
class Uploads {
 public:
  template <class T>
  void Add(T* d_dst, const T* src, size_t count) {
    if (count > 0) regions_.push_back({reinterpret_cast<char*>(d_dst), reinterpret_cast<const char*>(src), count * sizeof(T)});
  }
  Status Flush(GpuContext::Impl& ctx, cudaStream_t stream) {
    std::sort(regions_.begin(), regions_.end(), [](const Region& a, const Region& b) { return a.dst < b.dst; });
    for (size_t i = 0; i < regions_.size();) {
      size_t j = i + 1;
      char* end = regions_[i].dst + regions_[i].bytes;
      while (j < regions_.size() && regions_[j].dst >= end &&
             static_cast<size_t>(regions_[j].dst - end) < kScratchAlign) {
        end = regions_[j].dst + regions_[j].bytes;
        ++j;
      }
      char* begin = regions_[i].dst;
      SEARCH_ASSIGN_OR_RETURN(char* h, ctx.Stage(static_cast<size_t>(end - begin)));
      for (size_t r = i; r < j; ++r) std::memcpy(h + (regions_[r].dst - begin), regions_[r].src, regions_[r].bytes);
      SEARCH_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(begin, h, static_cast<size_t>(end - begin), cudaMemcpyHostToDevice, stream));
      i = j;
    }
    regions_.clear();
    return Status::Ok();
  }

 private:
  struct Region {
    char* dst;
    const char* src;
    size_t bytes;
  };
  std::vector<Region> regions_;
};

// Bump layout over one scratch allocation: pass 1 (base 0) measures, pass 2 hands out pointers.
class Arena {
 public:
  explicit Arena(uintptr_t base) : base_(base) {}
  template <class T>
  T* Take(size_t count) {
    off_ = Align(off_);
    T* p = reinterpret_cast<T*>(base_ + off_);
    off_ += count * sizeof(T);
    return p;
  }
  size_t size() const { return Align(off_); }

 private:
  uintptr_t base_;
  size_t off_ = 0;
};

// The launch sequences (phases) of a round; an or-query's path is one of the kOr kinds.
enum class PhaseKind : uint8_t { kAnd, kOrDense, kOrPruned, kTheta };

// One query's host-side state through the rounds.
struct QState {
  Status status;
  bool done = false;
  QueryMode mode = QueryMode::kAnd;
  uint32_t k = 0;
  uint32_t n = 0;                // terms
  std::vector<DevList> present;  // canonical order, present terms only
  std::vector<float> max_score;  // per present list, sanitized (negative / NaN: +inf)
  // or planning (PlanOr): theta from the theta round (0: none), the list it is taken from, and
  // the pruned plan: essential lists, the other lists' bound per list, the candidate bound.
  float theta = 0.0f;
  uint32_t theta_slot = 0;
  PhaseKind or_path = PhaseKind::kOrDense;
  uint32_t ess_mask = 0;
  std::vector<float> rest;
  uint64_t cap = 0;
  bool overflow = false;  // the pruned attempt overflowed: rerun dense

  SearchResult result;
  std::chrono::steady_clock::time_point t0;
};

// EngineTimes' totals.
std::atomic<uint64_t> g_calls{0}, g_rounds{0}, g_enqueue_ns{0}, g_wait_ns{0}, g_total_ns{0};
std::atomic<uint64_t> g_or_theta{0}, g_or_pruned{0}, g_or_dense{0}, g_or_overflow{0};
std::atomic<uint64_t> g_theta_ratio_ppm{0}, g_theta_ratio_n{0};

uint64_t NanosSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

uint64_t MicrosSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
}

// One launch sequence's host view: which queries, where their answers land in pinned memory.

struct Phase {
  PhaseKind kind = PhaseKind::kAnd;
  std::vector<uint32_t> ids;
  std::vector<uint32_t> hit_off;  // per query, into hits
  uint32_t total_k = 0;
  QueryOut* h_out = nullptr;
  DevHit* h_hits = nullptr;
  size_t PinnedBytes() const { return Align(ids.size() * sizeof(QueryOut)) + Align(size_t{total_k} * sizeof(DevHit)); }
};

Phase MakePhase(PhaseKind kind, std::vector<uint32_t> ids, const std::vector<QState>& st) {
  Phase p;
  p.kind = kind;
  p.ids = std::move(ids);
  for (uint32_t id : p.ids) {
    p.hit_off.push_back(p.total_k);
    if (kind != PhaseKind::kTheta) p.total_k += st[id].k;
  }
  return p;
}

// The top-k tail shared by both sequences: histogram, threshold, select, segmented sort, output,
// and the copies back. `tk` has scores/docs/d_count/n/k/out set; the rest is filled here.
struct TopkPlan {
  std::vector<TopkDesc> tk;
  std::vector<int> seg_begin;
  uint64_t total_keys = 0;
  uint64_t max_items = 0;
  size_t temp_bytes = 0;
  TopkDesc* d_tk = nullptr;
  uint32_t* d_thr = nullptr;
  int *d_seg_begin = nullptr, *d_seg_end = nullptr;
  unsigned long long *d_keys = nullptr, *d_sorted = nullptr;
  DevHit* d_hits = nullptr;
  void* d_temp = nullptr;
};

Status PrepareTopk(TopkPlan& t, const std::vector<uint64_t>& caps, cudaStream_t stream) {
  t.total_keys = 0;
  t.seg_begin.clear();
  for (uint64_t c : caps) {
    t.seg_begin.push_back(static_cast<int>(t.total_keys));
    t.total_keys += c;
    t.max_items = std::max(t.max_items, c);
  }
  if (t.total_keys >= (uint64_t{1} << 31))
    return Status::ResourceExhausted("gpu top-k: too many candidates in one batch");
  SEARCH_CUDA_RETURN_IF_ERROR(cub::DeviceSegmentedRadixSort::SortKeysDescending(
      nullptr, t.temp_bytes, static_cast<const unsigned long long*>(nullptr), static_cast<unsigned long long*>(nullptr),
      static_cast<int>(std::max<uint64_t>(t.total_keys, 1)), static_cast<int>(caps.size()), static_cast<int*>(nullptr),
      static_cast<int*>(nullptr), 0, 64, stream));
  return Status::Ok();
}

// Zeroed part of the top-k scratch (per query: histogram, select counter).
void TakeTopkZeroed(Arena& a, TopkPlan& t, uint32_t q, uint32_t** hist, uint32_t** sel) {
  *hist = a.Take<uint32_t>(size_t{kHistBins} * q);
  *sel = a.Take<uint32_t>(q);
}

// The sequence's answers: d_out then the hits, laid out as RunRound lays out h_out and h_hits in
// pinned memory, so that one copy brings both back. First in the scratch (zeroed).
QueryOut* TakeAnswers(Arena& a, TopkPlan& t, uint32_t q, uint32_t total_k) {
  QueryOut* d_out = a.Take<QueryOut>(q);
  t.d_hits = a.Take<DevHit>(std::max<uint32_t>(total_k, 1));
  return d_out;
}

// The top-k descriptors the host uploads (Uploads, with the sequence's own descriptors).
void TakeTopkUploads(Arena& a, TopkPlan& t, uint32_t q) {
  t.d_tk = a.Take<TopkDesc>(q);
  t.d_seg_begin = a.Take<int>(q);
}
void AddTopkUploads(Uploads& up, const TopkPlan& t, uint32_t q) {
  up.Add(t.d_tk, t.tk.data(), q);
  up.Add(t.d_seg_begin, t.seg_begin.data(), q);
}

void TakeTopkRest(Arena& a, TopkPlan& t, uint32_t q) {
  for (uint32_t i = 0; i < q && i < t.tk.size(); ++i)  // each query's key segment
    t.tk[i].key_cap = static_cast<uint32_t>((i + 1 < t.seg_begin.size() ? static_cast<uint64_t>(t.seg_begin[i + 1])
                                                                          : t.total_keys) -
                                            static_cast<uint64_t>(t.seg_begin[i]));
  t.d_thr = a.Take<uint32_t>(q);
  t.d_seg_end = a.Take<int>(q);
  t.d_keys = a.Take<unsigned long long>(std::max<uint64_t>(t.total_keys, 1));
  t.d_sorted = a.Take<unsigned long long>(std::max<uint64_t>(t.total_keys, 1));
  t.d_temp = a.Take<char>(std::max<size_t>(t.temp_bytes, 1));
}

Status LaunchTopk(TopkPlan& t, const Phase& ph, QueryOut* d_out, uint32_t doc_begin, cudaStream_t stream) {
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  const dim3 grid(GridFor(t.max_items, kThreads, q), q);
  TopkHistogramKernel<<<grid, kThreads, 0, stream>>>(t.d_tk, doc_begin);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  TopkThresholdKernel<<<dim3(1, q), kThreads, 0, stream>>>(t.d_tk, t.d_thr);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  TopkSelectKernel<<<grid, kThreads, 0, stream>>>(t.d_tk, t.d_thr, doc_begin, t.d_keys);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  size_t temp = t.temp_bytes;
  SEARCH_CUDA_RETURN_IF_ERROR(cub::DeviceSegmentedRadixSort::SortKeysDescending(
      t.d_temp, temp, t.d_keys, t.d_sorted, static_cast<int>(std::max<uint64_t>(t.total_keys, 1)), static_cast<int>(q),
      t.d_seg_begin, t.d_seg_end, 0, 64, stream));
  uint32_t max_k = 0;
  for (uint32_t id = 0; id < q; ++id) max_k = std::max(max_k, t.tk[id].k);
  TopkOutputKernel<<<dim3(GridFor(max_k, kThreads, q), q), kThreads, 0, stream>>>(t.d_tk, t.d_sorted, t.d_hits);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  // One copy for the outcomes and the hits: TakeAnswers and RunRound lay them out alike.
  const size_t out_bytes = Align(q * sizeof(QueryOut));
  if (reinterpret_cast<char*>(t.d_hits) != reinterpret_cast<char*>(d_out) + out_bytes ||
      reinterpret_cast<char*>(ph.h_hits) != reinterpret_cast<char*>(ph.h_out) + out_bytes)
    return Status::Internal("gpu top-k: answers laid out differently on the host and the device");
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ph.h_out, d_out, out_bytes + size_t{ph.total_k} * sizeof(DevHit),
                                              cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

// The and launch sequence for ph.ids (every term present, n >= 1).
Status EnqueueAnd(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  std::vector<DevList> lists;
  std::vector<AndDesc> descs(q);
  std::vector<uint64_t> caps(q);
  std::vector<uint64_t> dec_blocks(q, 1), needed_len(q, 1);
  uint32_t max_n = 0;
  uint64_t max_cap = 0;
  std::vector<uint64_t> step_max_nb(kMaxSteps, 0);
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    AndDesc& d = descs[a];
    d.n = s.n;
    d.list_off = static_cast<uint32_t>(lists.size());
    lists.insert(lists.end(), s.present.begin(), s.present.end());
    std::vector<uint32_t> order(s.n);
    for (uint32_t i = 0; i < s.n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t x, uint32_t y) { return s.present[x].count < s.present[y].count; });
    for (uint32_t j = 0; j < s.n; ++j) {
      d.step_slot[j] = static_cast<uint8_t>(order[j]);
      d.slot_step[order[j]] = static_cast<uint8_t>(j);
    }
    d.cap = s.present[order[0]].count;
    caps[a] = d.cap;
    max_cap = std::max<uint64_t>(max_cap, d.cap);
    max_n = std::max(max_n, s.n);
    for (uint32_t j = 0; j < s.n; ++j) {
      const uint64_t nb = s.present[order[j]].num_blocks;
      step_max_nb[j] = std::max(step_max_nb[j], nb);
      if (j == 0) continue;
      if (uint64_t{d.cap} >= kDenseFactor * nb) {
        d.dense_mask |= 1u << j;
        dec_blocks[a] = std::max(dec_blocks[a], nb);
      } else {
        dec_blocks[a] = std::max(dec_blocks[a], std::min<uint64_t>(nb, d.cap));
        needed_len[a] = std::max(needed_len[a], nb);
      }
    }
  }
  TopkPlan tp;
  SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));

  auto build = [&](uintptr_t base, QueryOut** d_out, AndDesc** d_descs,
                   DevList** d_lists) -> std::pair<size_t, size_t> {
    Arena ar(base);
    // Zeroed first.
    *d_out = TakeAnswers(ar, tp, q, ph.total_k);
    std::vector<uint32_t*> hist(q), sel(q);
    for (uint32_t a = 0; a < q; ++a) {
      descs[a].out = *d_out + a;
      descs[a].counters = ar.Take<uint32_t>(2 * kMaxSteps);
      descs[a].needed = ar.Take<uint32_t>(needed_len[a]);
      TakeTopkZeroed(ar, tp, 1, &hist[a], &sel[a]);
    }
    const size_t zeroed = ar.size();
    *d_descs = ar.Take<AndDesc>(q);
    *d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    TakeTopkUploads(ar, tp, q);
    tp.tk.assign(q, TopkDesc{});
    for (uint32_t a = 0; a < q; ++a) {
      AndDesc& d = descs[a];
      for (int b = 0; b < 2; ++b) {
        d.cand_doc[b] = ar.Take<uint32_t>(d.cap);
        d.cand_orig[b] = ar.Take<uint32_t>(d.cap);
      }
      d.cand_block = ar.Take<uint32_t>(d.cap);
      d.posmat = ar.Take<uint32_t>(size_t{d.n - 1} * d.cap + 1);
      d.decoded = ar.Take<uint32_t>(dec_blocks[a] * kBlockSize);
      d.slot_of = ar.Take<uint32_t>(needed_len[a]);
      d.scores = ar.Take<float>(d.cap);
      d.docs = ar.Take<uint32_t>(d.cap);
      TopkDesc& t = tp.tk[a];
      t.scores = d.scores;
      t.docs = d.docs;
      t.d_count = d.counters + (d.n - 1);
      t.n = d.cap;
      t.k = st[ph.ids[a]].k;
      t.seg_begin = static_cast<uint32_t>(tp.seg_begin[a]);
      t.out_begin = ph.hit_off[a];
      t.hist = hist[a];
      t.sel_count = sel[a];
      t.out = d.out;
    }
    TakeTopkRest(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) tp.tk[a].seg_end = tp.d_seg_end + a;
    return {ar.size(), zeroed};
  };
  QueryOut* d_out = nullptr;
  AndDesc* d_descs = nullptr;
  DevList* d_lists = nullptr;
  const size_t bytes = build(0, &d_out, &d_descs, &d_lists).first;
  void* scratch = nullptr;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&scratch, bytes, ctx.pool, stream));
  const size_t zeroed = build(reinterpret_cast<uintptr_t>(scratch), &d_out, &d_descs, &d_lists).second;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch, 0, zeroed, stream));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));

  AndLeadKernel<<<dim3(GridFor(step_max_nb[0], kWarpsPerCta, q), q), kThreads, 0, stream>>>(d_descs, d_lists, shard);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  const uint32_t cand_grid = GridFor(max_cap, kThreads, q);
  for (uint32_t j = 1; j < max_n; ++j) {
    AndLocateKernel<<<dim3(cand_grid, q), kThreads, 0, stream>>>(d_descs, d_lists, j);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    AndDecodeKernel<<<dim3(GridFor(step_max_nb[j], kWarpsPerCta, q), q), kThreads, 0, stream>>>(d_descs, d_lists, shard,
                                                                                             j);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    AndProbeKernel<<<dim3(cand_grid, q), kThreads, 0, stream>>>(d_descs, d_lists, j);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  AndScoreKernel<<<dim3(cand_grid, q), kThreads, 0, stream>>>(d_descs, d_lists, shard);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  SEARCH_RETURN_IF_ERROR(LaunchTopk(tp, ph, d_out, shard.doc_begin, stream));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch, stream));
  return Status::Ok();
}

// Or: bytes of device scratch one query needs.
uint64_t OrQueryBytes(const QState& s, uint32_t num_docs) {
  uint64_t postings = 0;
  for (const DevList& l : s.present) postings += l.count;
  return uint64_t{num_docs} * 4 + 16 * std::min<uint64_t>(num_docs, postings) + kHistBins * 4 + s.k * 8 + 4096;
}

Status EnqueueOr(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  std::vector<DevList> lists;
  std::vector<OrDesc> descs(q);
  std::vector<uint64_t> caps(q);
  uint32_t max_m = 0;
  std::vector<uint64_t> slot_max_nb(kMaxSteps, 0);
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    OrDesc& d = descs[a];
    d.m = static_cast<uint32_t>(s.present.size());
    d.list_off = static_cast<uint32_t>(lists.size());
    lists.insert(lists.end(), s.present.begin(), s.present.end());
    uint64_t postings = 0;
    for (uint32_t i = 0; i < d.m; ++i) {
      postings += s.present[i].count;
      slot_max_nb[i] = std::max<uint64_t>(slot_max_nb[i], s.present[i].num_blocks);
    }
    caps[a] = std::min<uint64_t>(shard.num_docs, postings);
    max_m = std::max(max_m, d.m);
  }
  TopkPlan tp;
  SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));
  tp.max_items = shard.num_docs;  // dense scans

  auto build = [&](uintptr_t base, QueryOut** d_out, OrDesc** d_descs, DevList** d_lists) -> std::pair<size_t, size_t> {
    Arena ar(base);
    *d_out = TakeAnswers(ar, tp, q, ph.total_k);
    std::vector<uint32_t*> hist(q), sel(q);
    for (uint32_t a = 0; a < q; ++a) TakeTopkZeroed(ar, tp, 1, &hist[a], &sel[a]);
    const size_t zeroed = ar.size();
    *d_descs = ar.Take<OrDesc>(q);
    *d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    TakeTopkUploads(ar, tp, q);
    tp.tk.assign(q, TopkDesc{});
    for (uint32_t a = 0; a < q; ++a) {
      OrDesc& d = descs[a];
      d.out = *d_out + a;
      d.acc = ar.Take<float>(std::max<uint32_t>(shard.num_docs, 1));
      TopkDesc& t = tp.tk[a];
      t.scores = d.acc;
      t.docs = nullptr;
      t.d_count = nullptr;
      t.n = shard.num_docs;
      t.k = st[ph.ids[a]].k;
      t.seg_begin = static_cast<uint32_t>(tp.seg_begin[a]);
      t.out_begin = ph.hit_off[a];
      t.hist = hist[a];
      t.sel_count = sel[a];
      t.out = d.out;
    }
    TakeTopkRest(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) tp.tk[a].seg_end = tp.d_seg_end + a;
    return {ar.size(), zeroed};
  };
  QueryOut* d_out = nullptr;
  OrDesc* d_descs = nullptr;
  DevList* d_lists = nullptr;
  const size_t bytes = build(0, &d_out, &d_descs, &d_lists).first;
  void* scratch = nullptr;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&scratch, bytes, ctx.pool, stream));
  const size_t zeroed = build(reinterpret_cast<uintptr_t>(scratch), &d_out, &d_descs, &d_lists).second;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch, 0, zeroed, stream));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  OrFillKernel<<<dim3(GridFor(shard.num_docs, kThreads, q), q), kThreads, 0, stream>>>(d_descs, shard.num_docs);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  for (uint32_t s = 0; s < max_m; ++s) {  // canonical slot order: the float adds of the CPU engine
    OrAccumulateKernel<<<dim3(GridFor(slot_max_nb[s], kWarpsPerCta, q), q), kThreads, 0, stream>>>(d_descs, d_lists, shard,
                                                                                                s);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  SEARCH_RETURN_IF_ERROR(LaunchTopk(tp, ph, d_out, shard.doc_begin, stream));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch, stream));
  return Status::Ok();
}

// Whether a probed list is decoded whole: the candidates outnumber its blocks kDenseFactor times.
bool ProbeDense(uint64_t cap, const DevList& l) {
  return cap >= kDenseFactor * l.num_blocks;
}

// Per-list scratch of the locate/decode/probe kernels for `cap` candidates (zeroed part, rest).
void TakeProbeZeroed(Arena& ar, OrPList& pl, const DevList& l) {
  pl.needed = pl.dense ? nullptr : ar.Take<uint32_t>(l.num_blocks);
}
void TakeProbeRest(Arena& ar, OrPList& pl, const DevList& l, uint64_t cap) {
  const uint64_t slots = pl.dense ? l.num_blocks : std::min<uint64_t>(l.num_blocks, cap);
  pl.decoded = ar.Take<uint32_t>(std::max<uint64_t>(slots, 1) * kBlockSize);
  pl.slot_of = pl.dense ? nullptr : ar.Take<uint32_t>(l.num_blocks);
  pl.need_list = pl.dense ? nullptr : ar.Take<uint32_t>(std::max<uint64_t>(slots, 1));
}
uint64_t ProbeBytes(const DevList& l, uint64_t cap) {
  const uint64_t slots = ProbeDense(cap, l) ? uint64_t{l.num_blocks} : std::min<uint64_t>(l.num_blocks, cap);
  return 2 * 4 * uint64_t{l.num_blocks} + 768 + slots * (kBlockSize + 1) * 4;
}

// The theta sample's buffer: twice the sample (the lowest sampled bin may hold more).
uint64_t SampleCap(uint32_t sample) {
  return uint64_t{2} * sample;
}

// Theta round (kernel_or.cuh): the theta list's contribution histogram, theta and the sampled
// bins; then, with a sample, its documents scored exactly over every list and theta raised.
// out->theta comes back.
Status EnqueueTheta(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  const uint32_t sample = ctx.options.or_theta_sample;
  const uint64_t scap = SampleCap(sample);
  std::vector<ThetaDesc> descs(q);
  std::vector<OrPDesc> sdescs(q);
  std::vector<DevList> lists;
  std::vector<OrPList> plists;
  uint64_t max_nb = 1, sum_all_nb = 0;
  uint32_t max_m = 1;
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    descs[a].list = s.present[s.theta_slot];
    descs[a].slot = s.theta_slot;
    descs[a].k = s.k;
    descs[a].sample = sample;
    descs[a].blocks = std::max(s.k, sample);
    max_nb = std::max<uint64_t>(max_nb, descs[a].list.num_blocks);
    if (sample == 0) continue;
    OrPDesc& d = sdescs[a];
    d.m = static_cast<uint32_t>(s.present.size());
    d.list_off = static_cast<uint32_t>(lists.size());
    d.cap = static_cast<uint32_t>(std::min<uint64_t>(scap, descs[a].list.count));  // drawn from that list
    max_m = std::max(max_m, d.m);
    for (uint32_t i = 0; i < d.m; ++i) {
      const DevList& l = s.present[i];
      lists.push_back(l);
      OrPList pl;
      // The theta list holds every sampled document at a known position: never decoded for them.
      pl.dense = i != s.theta_slot && ProbeDense(d.cap, l) ? 1u : 0u;
      plists.push_back(pl);
      sum_all_nb += std::min<uint64_t>(l.num_blocks, d.cap);  // blocks decoded at most
    }
  }
  auto build = [&](uintptr_t base, QueryOut** d_out, ThetaDesc** d_descs, OrPDesc** d_sdescs, DevList** d_lists,
                   OrPList** d_plists) -> std::pair<size_t, size_t> {
    Arena ar(base);
    // Zeroed first.
    *d_out = ar.Take<QueryOut>(q);
    for (uint32_t a = 0; a < q; ++a) {
      descs[a].out = *d_out + a;
      descs[a].hist = ar.Take<uint32_t>(kHistBins);
      descs[a].block_hist = ar.Take<uint32_t>(kHistBins);
      if (sample == 0) continue;
      OrPDesc& d = sdescs[a];
      d.out = *d_out + a;
      d.counters = ar.Take<uint32_t>(1 + d.m);
      for (uint32_t i = 0; i < d.m; ++i) TakeProbeZeroed(ar, plists[d.list_off + i], lists[d.list_off + i]);
    }
    const size_t zeroed = ar.size();
    *d_descs = ar.Take<ThetaDesc>(q);
    *d_sdescs = ar.Take<OrPDesc>(q);
    *d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    *d_plists = ar.Take<OrPList>(std::max<size_t>(plists.size(), 1));
    for (uint32_t a = 0; a < q; ++a) {
      descs[a].block_bin = ar.Take<uint32_t>(1);
      if (sample == 0) continue;
      descs[a].sample_bin = ar.Take<uint32_t>(1);
      OrPDesc& d = sdescs[a];
      d.cand = ar.Take<uint32_t>(d.cap);
      d.src = ar.Take<uint8_t>(d.cap);
      d.scores = ar.Take<float>(d.cap);
      d.pos = ar.Take<uint32_t>(size_t{d.m} * d.cap);
      for (uint32_t i = 0; i < d.m; ++i) TakeProbeRest(ar, plists[d.list_off + i], lists[d.list_off + i], d.cap);
    }
    return {ar.size(), zeroed};
  };
  QueryOut* d_out = nullptr;
  ThetaDesc* d_descs = nullptr;
  OrPDesc* d_sdescs = nullptr;
  DevList* d_lists = nullptr;
  OrPList* d_plists = nullptr;
  const size_t bytes = build(0, &d_out, &d_descs, &d_sdescs, &d_lists, &d_plists).first;
  void* scratch = nullptr;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&scratch, bytes, ctx.pool, stream));
  const size_t zeroed = build(reinterpret_cast<uintptr_t>(scratch), &d_out, &d_descs, &d_sdescs, &d_lists, &d_plists).second;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch, 0, zeroed, stream));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  if (sample != 0) {
    up.Add(d_sdescs, sdescs.data(), q);
    up.Add(d_lists, lists.data(), lists.size());
    up.Add(d_plists, plists.data(), plists.size());
  }
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  ThetaBlockHistKernel<<<dim3(GridFor(max_nb, kThreads, q), q), kThreads, 0, stream>>>(d_descs);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  ThetaBlockSelectKernel<<<dim3(1, q), kThreads, 0, stream>>>(d_descs);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  ThetaHistKernel<<<dim3(GridFor(max_nb, kWarpsPerCta, q), q), kThreads, 0, stream>>>(d_descs, shard);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  ThetaSelectKernel<<<dim3(1, q), kThreads, 0, stream>>>(d_descs);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  if (sample != 0) {
    SampleGatherKernel<<<dim3(GridFor(max_nb, kWarpsPerCta, q), q), kThreads, 0, stream>>>(d_descs, d_sdescs, shard);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    // Every list at once (z = slot), each spread over the batch.
    const uint32_t cand_grid = SpreadGrid(scap * q, kThreads);
    OrLocateKernel<<<dim3(cand_grid, 1, max_m), kThreads, 0, stream>>>(d_sdescs, q, d_lists, d_plists, kNone);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    OrDecodeKernel<<<dim3(SpreadGrid(sum_all_nb, kWarpsPerCta), 1, max_m), kThreads, 0, stream>>>(
        d_sdescs, q, d_lists, d_plists, shard, kNone);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    OrProbeKernel<<<dim3(cand_grid, 1, max_m), kThreads, 0, stream>>>(d_sdescs, q, d_lists, d_plists, shard, kNone);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    OrScoreKernel<<<dim3(GridFor(scap, kThreads, q), q), kThreads, 0, stream>>>(d_sdescs, d_lists, shard);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    SampleThetaKernel<<<dim3(1, q), kThreads, 0, stream>>>(d_descs, d_sdescs);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ph.h_out, d_out, q * sizeof(QueryOut), cudaMemcpyDeviceToHost, stream));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch, stream));
  return Status::Ok();
}

// The pruned path's probing steps (kernel_or.cuh): the lists by decreasing max_score (fewer
// postings first on ties), and per list (as a candidate's source) and step the bound of the
// lists probed after that step: with `progressive`, their max_scores (candidates are dropped),
// else +inf (none is).
void PlanSteps(const QState& s, OrPDesc& d, OrPList* pl, bool progressive) {
  const uint32_t m = d.m;
  std::vector<uint32_t> order(m);
  for (uint32_t i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    if (s.max_score[x] != s.max_score[y]) return s.max_score[x] > s.max_score[y];
    return s.present[x].count < s.present[y].count;
  });
  for (uint32_t t = 0; t < m; ++t) d.order[t] = static_cast<uint8_t>(order[t]);
  for (uint32_t src = 0; src < m; ++src)
    for (uint32_t t = 0; t < m; ++t) {
      float after = progressive ? 0.0f : std::numeric_limits<float>::infinity();
      for (uint32_t u = t + 1; u < m; ++u)
        if (order[u] != src) after += s.max_score[order[u]];
      pl[src].after[t] = after;
    }
}

// Pruned or: bytes of device scratch one query needs (PlanOr has set its cap).
uint64_t OrPrunedBytes(const QState& s, uint32_t num_docs) {
  const uint64_t m = s.present.size();
  uint64_t b = (uint64_t{num_docs} + 31) / 32 * 4 + s.cap * (4 + 4 + 1 + 4 * m + 16) + kHistBins * 4 + s.k * 8 + 8192;
  for (const DevList& l : s.present) b += ProbeBytes(l, s.cap);
  return b;
}

// Theta round: bytes of device scratch one query needs.
uint64_t ThetaBytes(const QState& s, uint32_t sample) {
  uint64_t b = 2 * kHistBins * 4 + 4096;
  if (sample == 0) return b;
  const uint64_t cap = SampleCap(sample);
  b += cap * (4 + 4 + 1 + 4 * s.present.size());
  for (const DevList& l : s.present) b += ProbeBytes(l, cap);
  return b;
}

Status EnqueueOrPruned(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  std::vector<DevList> lists;
  std::vector<OrPList> plists;
  std::vector<OrPDesc> descs(q);
  std::vector<uint64_t> caps(q);
  uint32_t max_m = 0;
  uint64_t sum_cap = 0, sum_ess_nb = 0, sum_nb = 0;
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    OrPDesc& d = descs[a];
    d.m = static_cast<uint32_t>(s.present.size());
    d.list_off = static_cast<uint32_t>(lists.size());
    d.cap = static_cast<uint32_t>(s.cap);
    d.theta = s.theta;
    d.slack = ScoreSlack(s.n);
    lists.insert(lists.end(), s.present.begin(), s.present.end());
    uint64_t step_nb = 1;
    for (uint32_t i = 0; i < d.m; ++i) {
      OrPList pl;
      pl.essential = (s.ess_mask >> i) & 1u;
      pl.rest = s.rest[i];
      // With theta the candidates are few next to the bound on them: only needed blocks decoded.
      pl.dense = s.theta <= 0.0f && ProbeDense(s.cap, s.present[i]) ? 1u : 0u;
      if (pl.essential) {
        pl.ess_off = d.ess_blocks;
        d.ess_blocks += s.present[i].num_blocks;
      }
      plists.push_back(pl);
      // Blocks decoded for probing: at most one per candidate unless dense (the largest step).
      step_nb = std::max<uint64_t>(step_nb, pl.dense ? s.present[i].num_blocks
                                                     : std::min<uint64_t>(s.present[i].num_blocks, s.cap));
    }
    sum_nb += step_nb;
    sum_ess_nb += d.ess_blocks;
    PlanSteps(s, d, plists.data() + d.list_off, ctx.options.or_progressive && s.theta > 0.0f);
    caps[a] = s.cap;
    sum_cap += s.cap;
    max_m = std::max(max_m, d.m);
  }
  TopkPlan tp;
  SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));
  const size_t bitmap_words = (size_t{shard.num_docs} + 31) / 32;

  auto build = [&](uintptr_t base, QueryOut** d_out, OrPDesc** d_descs, DevList** d_lists,
                   OrPList** d_plists) -> std::pair<size_t, size_t> {
    Arena ar(base);
    // Zeroed first.
    *d_out = TakeAnswers(ar, tp, q, ph.total_k);
    std::vector<uint32_t*> hist(q), sel(q);
    for (uint32_t a = 0; a < q; ++a) {
      OrPDesc& d = descs[a];
      d.out = *d_out + a;
      d.bitmap = ar.Take<uint32_t>(bitmap_words);
      d.counters = ar.Take<uint32_t>(1 + d.m);
      for (uint32_t i = 0; i < d.m; ++i) TakeProbeZeroed(ar, plists[d.list_off + i], lists[d.list_off + i]);
      TakeTopkZeroed(ar, tp, 1, &hist[a], &sel[a]);
    }
    const size_t zeroed = ar.size();
    *d_descs = ar.Take<OrPDesc>(q);
    *d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    *d_plists = ar.Take<OrPList>(std::max<size_t>(plists.size(), 1));
    TakeTopkUploads(ar, tp, q);
    tp.tk.assign(q, TopkDesc{});
    for (uint32_t a = 0; a < q; ++a) {
      OrPDesc& d = descs[a];
      d.cand = ar.Take<uint32_t>(std::max<uint32_t>(d.cap, 1));
      d.src = ar.Take<uint8_t>(std::max<uint32_t>(d.cap, 1));
      d.scores = ar.Take<float>(std::max<uint32_t>(d.cap, 1));
      d.pos = ar.Take<uint32_t>(std::max<size_t>(size_t{d.m} * d.cap, 1));
      for (uint32_t i = 0; i < d.m; ++i) TakeProbeRest(ar, plists[d.list_off + i], lists[d.list_off + i], d.cap);
      TopkDesc& t = tp.tk[a];
      t.scores = d.scores;
      t.docs = d.cand;
      t.d_count = d.counters;
      t.n = d.cap;
      t.k = st[ph.ids[a]].k;
      t.seg_begin = static_cast<uint32_t>(tp.seg_begin[a]);
      t.out_begin = ph.hit_off[a];
      t.hist = hist[a];
      t.sel_count = sel[a];
      t.out = d.out;
    }
    TakeTopkRest(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) tp.tk[a].seg_end = tp.d_seg_end + a;
    return {ar.size(), zeroed};
  };
  QueryOut* d_out = nullptr;
  OrPDesc* d_descs = nullptr;
  DevList* d_lists = nullptr;
  OrPList* d_plists = nullptr;
  const size_t bytes = build(0, &d_out, &d_descs, &d_lists, &d_plists).first;
  void* scratch = nullptr;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&scratch, bytes, ctx.pool, stream));
  const size_t zeroed = build(reinterpret_cast<uintptr_t>(scratch), &d_out, &d_descs, &d_lists, &d_plists).second;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch, 0, zeroed, stream));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  up.Add(d_plists, plists.data(), plists.size());
  AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  OrGatherKernel<<<SpreadGrid(sum_ess_nb, kWarpsPerCta), kThreads, 0, stream>>>(d_descs, q, d_lists, d_plists, shard);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  // A step per list (PlanSteps' order), each kernel spread over the batch.
  const uint32_t cand_grid = SpreadGrid(sum_cap, kThreads);
  const uint32_t decode_grid = SpreadGrid(sum_nb, kWarpsPerCta);
  for (uint32_t t = 0; t < max_m; ++t) {
    OrLocateKernel<<<cand_grid, kThreads, 0, stream>>>(d_descs, q, d_lists, d_plists, t);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    OrDecodeKernel<<<decode_grid, kThreads, 0, stream>>>(d_descs, q, d_lists, d_plists, shard, t);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    OrProbeKernel<<<cand_grid, kThreads, 0, stream>>>(d_descs, q, d_lists, d_plists, shard, t);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  OrScoreKernel<<<dim3(GridFor(sum_cap / q, kThreads, q), q), kThreads, 0, stream>>>(d_descs, d_lists, shard);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  SEARCH_RETURN_IF_ERROR(LaunchTopk(tp, ph, d_out, shard.doc_begin, stream));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch, stream));
  return Status::Ok();
}

// Whether an or-query takes the theta round first: several lists, enough postings, and a list of
// at least k postings to take the k-th best contribution from (else theta would be 0). Sets
// theta_slot: the list of the highest max_score among those (fewer postings on ties).
bool NeedTheta(QState& s, uint64_t min_postings) {
  const size_t m = s.present.size();
  if (m < 2) return false;
  uint64_t postings = 0;
  for (const DevList& l : s.present) postings += l.count;
  if (postings < min_postings) return false;
  bool found = false;
  for (uint32_t i = 0; i < m; ++i) {
    if (s.present[i].count < s.k) continue;
    if (!found || s.max_score[i] > s.max_score[s.theta_slot] ||
        (s.max_score[i] == s.max_score[s.theta_slot] && s.present[i].count < s.present[s.theta_slot].count))
      s.theta_slot = i;
    found = true;
  }
  return found;
}

// Plans an or-query given s.theta (0 when there was no theta round): lists taken by increasing
// max_score whose running sum times the slack stays below theta are non-essential (no document
// only they hold can reach theta <= the k-th best score; strict, so bounds of 0 never prune
// against theta 0); the rest are essential. The pruned path when theta > 0 (at most
// or_candidate_cap candidates) or the essential lists' postings are few, else the dense path.
void PlanOr(QState& s, uint32_t num_docs, const GpuContextOptions& o) {
  const uint32_t divisor = o.or_pruned_divisor;
  s.or_path = PhaseKind::kOrDense;
  if (divisor == 0 || num_docs == 0) return;
  const uint32_t m = static_cast<uint32_t>(s.present.size());
  const float slack = ScoreSlack(s.n);
  std::vector<uint32_t> order(m);
  for (uint32_t i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return s.max_score[x] < s.max_score[y]; });
  uint32_t first_ess = 0;
  float ub = 0.0f;
  while (first_ess < m) {
    ub += s.max_score[order[first_ess]];
    if (!(ub * slack < s.theta)) break;
    ++first_ess;
  }
  if (first_ess == m) return;  // inconsistent bounds (a corrupt header): the dense path needs none
  s.ess_mask = 0;
  s.cap = 0;
  s.rest.assign(m, std::numeric_limits<float>::infinity());
  for (uint32_t j = first_ess; j < m; ++j) {
    const uint32_t e = order[j];
    s.ess_mask |= 1u << e;
    s.cap += s.present[e].count;
    float rest = 0.0f;
    for (uint32_t i = 0; i < m; ++i)
      if (order[i] != e) rest += s.max_score[order[i]];
    s.rest[e] = rest;
  }
  const uint64_t ess = s.cap;
  if (s.theta > 0.0f) s.cap = std::min<uint64_t>(s.cap, o.or_candidate_cap);
  if ((s.theta > 0.0f || ess <= uint64_t{num_docs} / divisor) && s.cap < (uint64_t{1} << 30))
    s.or_path = PhaseKind::kOrPruned;
}

// Phases for `ids`: chunks of at most kMaxBatchY queries (kMaxSpreadQueries for the pruned kinds);
// or-phases also bounded in memory.
void AddPhases(PhaseKind kind, const std::vector<uint32_t>& ids, const std::vector<QState>& st, uint32_t num_docs,
               const GpuContextOptions& o, std::vector<Phase>* phases) {
  std::vector<uint32_t> cur;
  uint64_t cur_bytes = 0;
  for (uint32_t id : ids) {
    const uint64_t b = kind == PhaseKind::kOrDense    ? OrQueryBytes(st[id], num_docs)
                       : kind == PhaseKind::kOrPruned ? OrPrunedBytes(st[id], num_docs)
                       : kind == PhaseKind::kTheta    ? ThetaBytes(st[id], o.or_theta_sample)
                                                      : 0;
    // The pruned kernels spread a launch's work over at most kMaxSpreadQueries queries.
    const size_t max_q = kind == PhaseKind::kOrPruned || kind == PhaseKind::kTheta ? kMaxSpreadQueries : kMaxBatchY;
    if (!cur.empty() && (cur.size() >= max_q || cur_bytes + b > kOrGroupBytes)) {
      phases->push_back(MakePhase(kind, std::move(cur), st));
      cur.clear();
      cur_bytes = 0;
    }
    cur.push_back(id);
    cur_bytes += b;
  }
  if (!cur.empty()) phases->push_back(MakePhase(kind, std::move(cur), st));
}

// Runs the phases as one round (one synchronization) and folds the answers into st.
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
    }
    if (!launched.ok()) break;
  }
  const auto wait_t0 = std::chrono::steady_clock::now();
  const Status synced = ctx.stream.Synchronize();  // also after a failed launch: nothing stays in flight
  g_wait_ns.fetch_add(NanosSince(wait_t0), std::memory_order_relaxed);
  g_enqueue_ns.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wait_t0 - enqueue_t0).count()),
                         std::memory_order_relaxed);
  g_rounds.fetch_add(1, std::memory_order_relaxed);
  ctx.EndRound();
  SEARCH_RETURN_IF_ERROR(launched);
  SEARCH_RETURN_IF_ERROR(synced);
  for (const Phase& p : phases) {
    for (size_t a = 0; a < p.ids.size(); ++a) {
      QState& s = st[p.ids[a]];
      const QueryOut& o = p.h_out[a];
      QueryStats& stats = s.result.stats;
      const bool overflow = p.kind == PhaseKind::kOrPruned && o.error == kErrOverflow;
      if (p.kind != PhaseKind::kTheta && !overflow) stats.lists += s.present.size();
      stats.blocks_decoded += o.blocks;
      stats.freq_blocks_decoded += o.freq_blocks;
      stats.postings_decoded += o.postings;
      stats.bytes_touched += o.bytes;
      stats.postings_scored += o.scored;
      if (overflow) {  // the answer is incomplete: ExecuteBatchGpu reruns the query dense
        s.overflow = true;
        continue;
      }
      if (o.error != 0) {
        s.status = Status::Corruption("posting block failed to decode on the GPU (corrupt or outside the shard)");
        s.done = true;
        continue;
      }
      if (p.kind == PhaseKind::kTheta) {
        s.theta = o.theta;
        continue;
      }
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

// Validates one query and fills its state; false when it is already answered.
bool Prepare(const GpuShardView& shard, const GpuQueryInput& in, QState* s) {
  s->mode = in.mode;
  s->k = in.k;
  s->n = static_cast<uint32_t>(in.terms.size());
  s->status = ValidateK(in.k);
  if (!s->status.ok()) return false;
  if (in.terms.size() > kGpuMaxTerms) {
    s->status = GpuUnimplemented("query of " + std::to_string(in.terms.size()) + " terms (the GPU engine takes " +
                                 std::to_string(kGpuMaxTerms) + ")");
    return false;
  }
  const uint64_t doc_end = uint64_t{shard.doc_begin} + shard.num_docs;
  for (const GpuTermInput& t : in.terms) {
    if (t.list == nullptr) continue;
    if (t.list->count() == 0 || t.list->num_blocks() == 0) {
      s->status = Status::Corruption("empty posting list");
      return false;
    }
    const uint32_t last = t.list->block(t.list->num_blocks() - 1).last_doc;
    if (last == 0xffffffffu || uint64_t{last} >= doc_end) {
      s->status = Status::Corruption("posting list docID " + std::to_string(last) + " outside the shard's documents [" +
                                     std::to_string(shard.doc_begin) + ", " + std::to_string(doc_end) + ")");
      return false;
    }
    if (t.d_blob == nullptr) {
      s->status = Status::InvalidArgument("GpuTermInput with a list but no device blob");
      return false;
    }
    DevList l;
    l.meta = reinterpret_cast<const BlockMeta*>(t.d_blob + sizeof(ListHeader));
    l.payload = t.d_blob + sizeof(ListHeader) + sizeof(BlockMeta) * size_t{t.list->num_blocks()};
    l.count = t.list->count();
    l.num_blocks = t.list->num_blocks();
    l.base_doc = t.list->base_doc();
    l.idf = t.idf;
    s->present.push_back(l);
    s->max_score.push_back(SanitizeBoundHD(t.list->max_score()));
  }
  return !in.terms.empty();
}

}  // namespace

Status GpuUnimplemented(std::string what) {
  return Status::InvalidArgument(std::string(kGpuUnimplementedPrefix) + what);
}

bool IsGpuUnimplemented(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument && s.message().rfind(kGpuUnimplementedPrefix, 0) == 0;
}

Status ExecuteBatchGpu(GpuContext& ctx, const GpuShardView& shard, std::span<const GpuQueryInput> queries,
                       std::vector<Result<SearchResult>>* out) {
  const auto t0 = std::chrono::steady_clock::now();
  out->clear();
  const size_t nq = queries.size();
  std::vector<QState> st(nq);
  std::vector<uint32_t> and_ids, or_ids;
  for (uint32_t i = 0; i < nq; ++i) {
    QState& s = st[i];
    s.t0 = t0;
    if (!Prepare(shard, queries[i], &s)) {
      s.done = true;
      continue;
    }
    const bool all = s.present.size() == s.n;
    if (s.mode == QueryMode::kOr) {
      if (s.present.empty())
        s.done = true;
      else
        or_ids.push_back(i);
    } else if (all) {
      and_ids.push_back(i);
    } else {
      // and with a term absent here matches nothing; andor then runs or.
      s.result.stats.lists += s.present.size();
      if (s.mode == QueryMode::kAnd || s.present.empty())
        s.done = true;
      else
        or_ids.push_back(i);
    }
  }
  // A floor that is not a positive finite number bounds nothing: no tf-only bounds.
  const float floor = std::isfinite(shard.norm_floor) && shard.norm_floor > 0.0f ? shard.norm_floor : 0.0f;
  const ShardDev dev{shard.d_norms, shard.doc_begin, shard.num_docs, shard.params.k1, floor};
  const GpuContextOptions& opt = ctx.impl().options;
  // Or-queries: those that need theta wait one round for it (`wait`); the others are planned now.
  auto plan_or = [&](const std::vector<uint32_t>& ids, bool may_wait, std::vector<uint32_t>* wait,
                     std::vector<Phase>* phases) {
    std::vector<uint32_t> dense, pruned;
    for (uint32_t id : ids) {
      QState& s = st[id];
      if (!s.status.ok()) continue;
      if (may_wait && opt.or_pruned_divisor != 0 && NeedTheta(s, opt.or_theta_min_postings)) {
        wait->push_back(id);
        continue;
      }
      PlanOr(s, shard.num_docs, opt);
      (s.or_path == PhaseKind::kOrPruned ? pruned : dense).push_back(id);
    }
    g_or_theta.fetch_add(wait != nullptr ? wait->size() : 0, std::memory_order_relaxed);
    g_or_pruned.fetch_add(pruned.size(), std::memory_order_relaxed);
    g_or_dense.fetch_add(dense.size(), std::memory_order_relaxed);
    AddPhases(PhaseKind::kOrDense, dense, st, shard.num_docs, opt, phases);
    AddPhases(PhaseKind::kOrPruned, pruned, st, shard.num_docs, opt, phases);
    if (wait != nullptr) AddPhases(PhaseKind::kTheta, *wait, st, shard.num_docs, opt, phases);
  };
  // Pruned attempts of the last round that overflowed their candidates: dense in this one.
  auto rerun_overflow = [&](std::vector<Phase>* phases) {
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < nq; ++i)
      if (st[i].overflow && st[i].status.ok()) {
        st[i].overflow = false;
        st[i].or_path = PhaseKind::kOrDense;
        ids.push_back(i);
      }
    g_or_overflow.fetch_add(ids.size(), std::memory_order_relaxed);
    g_or_dense.fetch_add(ids.size(), std::memory_order_relaxed);
    AddPhases(PhaseKind::kOrDense, ids, st, shard.num_docs, opt, phases);
  };
  auto run = [&](std::vector<Phase>& phases) -> Status {
    Status r = RunRound(ctx.impl(), dev, phases, st);
    if (!r.ok()) {
      out->clear();
      for (size_t i = 0; i < nq; ++i) out->emplace_back(r);
    }
    return r;
  };
  // or_theta_pair: beside the theta round, an and-query over the two lists of the highest
  // max_score with >= k postings each (a state appended past nq); the k-th best of its scores is
  // the or-score lower bound of k real documents (each of their or-scores adds non-negative terms
  // to the same two contributions, and float rounding is monotone).
  std::vector<std::pair<uint32_t, uint32_t>> pairs;  // (query, its pair's state)
  auto add_pairs = [&](const std::vector<uint32_t>& wait, std::vector<Phase>* phases) {
    if (!opt.or_theta_pair) return;
    std::vector<uint32_t> ids;
    for (uint32_t id : wait) {
      const QState& s = st[id];
      uint32_t a = kNone, b = kNone;
      for (uint32_t i = 0; i < s.present.size(); ++i) {
        if (s.present[i].count < s.k) continue;
        if (a == kNone || s.max_score[i] > s.max_score[a]) {
          b = a;
          a = i;
        } else if (b == kNone || s.max_score[i] > s.max_score[b]) {
          b = i;
        }
      }
      if (b == kNone) continue;
      QState p;
      p.mode = QueryMode::kAnd;
      p.k = s.k;
      p.n = 2;
      for (uint32_t i : {std::min(a, b), std::max(a, b)}) {  // canonical order
        p.present.push_back(s.present[i]);
        p.max_score.push_back(s.max_score[i]);
      }
      pairs.emplace_back(id, static_cast<uint32_t>(st.size()));
      ids.push_back(static_cast<uint32_t>(st.size()));
      st.push_back(std::move(p));
    }
    AddPhases(PhaseKind::kAnd, ids, st, shard.num_docs, opt, phases);
  };
  auto fold_pairs = [&] {
    for (auto [id, pi] : pairs) {
      QState& p = st[pi];
      QState& s = st[id];
      QueryStats& to = s.result.stats;
      const QueryStats& from = p.result.stats;
      to.blocks_decoded += from.blocks_decoded;
      to.freq_blocks_decoded += from.freq_blocks_decoded;
      to.postings_decoded += from.postings_decoded;
      to.bytes_touched += from.bytes_touched;
      to.postings_scored += from.postings_scored;
      if (p.status.ok() && p.result.hits.size() == p.k) s.theta = std::max(s.theta, p.result.hits.back().score);
    }
    pairs.clear();
  };
  // Round 1: and (and the and-part of andor), or planned without theta, theta for the rest of or.
  std::vector<Phase> phases;
  std::vector<uint32_t> wait1, wait2;
  AddPhases(PhaseKind::kAnd, and_ids, st, shard.num_docs, opt, &phases);
  plan_or(or_ids, true, &wait1, &phases);
  add_pairs(wait1, &phases);
  SEARCH_RETURN_IF_ERROR(run(phases));
  fold_pairs();
  // Round 2: the or-queries that waited for theta; andor's or-part (and found fewer than k).
  phases.clear();
  rerun_overflow(&phases);
  plan_or(wait1, false, nullptr, &phases);
  std::vector<uint32_t> or2;
  for (uint32_t id : and_ids)
    if (st[id].mode == QueryMode::kAndOr && st[id].status.ok() && st[id].result.hits.size() < st[id].k) {
      st[id].result.hits.clear();
      or2.push_back(id);
    }
  plan_or(or2, true, &wait2, &phases);
  add_pairs(wait2, &phases);
  SEARCH_RETURN_IF_ERROR(run(phases));
  fold_pairs();
  // Round 3: andor's or-part that waited for theta (and round 2's overflows).
  phases.clear();
  rerun_overflow(&phases);
  plan_or(wait2, false, nullptr, &phases);
  SEARCH_RETURN_IF_ERROR(run(phases));
  // Round 4, only when round 3 overflowed.
  phases.clear();
  rerun_overflow(&phases);
  SEARCH_RETURN_IF_ERROR(run(phases));
  const uint64_t micros = MicrosSince(t0);
  g_calls.fetch_add(1, std::memory_order_relaxed);
  g_total_ns.fetch_add(NanosSince(t0), std::memory_order_relaxed);
  out->reserve(nq);
  for (size_t i = 0; i < nq; ++i) {
    QState& s = st[i];
    if (s.status.ok() && s.theta > 0.0f && s.result.hits.size() == s.k && s.result.hits.back().score > 0.0f) {
      g_theta_ratio_ppm.fetch_add(static_cast<uint64_t>(1e6 * s.theta / s.result.hits.back().score),
                                  std::memory_order_relaxed);
      g_theta_ratio_n.fetch_add(1, std::memory_order_relaxed);
    }
    if (!s.status.ok()) {
      out->emplace_back(s.status);
      continue;
    }
    s.result.stats.micros = micros;
    out->emplace_back(std::move(s.result));
  }
  return Status::Ok();
}

GpuEngineTimes EngineTimes() {
  GpuEngineTimes t;
  t.calls = g_calls.load(std::memory_order_relaxed);
  t.rounds = g_rounds.load(std::memory_order_relaxed);
  t.enqueue_ns = g_enqueue_ns.load(std::memory_order_relaxed);
  t.wait_ns = g_wait_ns.load(std::memory_order_relaxed);
  t.total_ns = g_total_ns.load(std::memory_order_relaxed);
  t.or_theta = g_or_theta.load(std::memory_order_relaxed);
  t.or_pruned = g_or_pruned.load(std::memory_order_relaxed);
  t.or_dense = g_or_dense.load(std::memory_order_relaxed);
  t.or_overflow = g_or_overflow.load(std::memory_order_relaxed);
  t.theta_ratio_ppm = g_theta_ratio_ppm.load(std::memory_order_relaxed);
  t.theta_ratio_n = g_theta_ratio_n.load(std::memory_order_relaxed);
  return t;
}

Result<SearchResult> ExecuteQueryGpu(GpuContext& ctx, const GpuShardView& shard, std::span<const GpuTermInput> terms,
                                     QueryMode mode, uint32_t k) {
  GpuQueryInput q;
  q.terms = terms;
  q.mode = mode;
  q.k = k;
  std::vector<Result<SearchResult>> out;
  SEARCH_RETURN_IF_ERROR(ExecuteBatchGpu(ctx, shard, std::span<const GpuQueryInput>(&q, 1), &out));
  return std::move(out[0]);
}

}  // namespace search::gpu
