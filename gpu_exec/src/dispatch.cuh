// The GPU engine's dispatch layer (below engine_plan.hpp, above the kernel_*.cuh kernels): sizes
// the grids of one launch sequence, lays out its device scratch (one allocation from the
// context's stream-ordered pool), uploads its descriptors through the context's pinned staging
// (one asynchronous copy per run of adjacent pieces), launches its kernels on the context's
// stream and copies its answers back into pinned memory; RunRound runs a round's sequences and
// synchronizes once.
//   dispatch_round.cu: uploads, the top-k tail every sequence ends with, RunRound;
//   dispatch_and.cu:   the and-sequence and the dense or-sequence;
//   dispatch_or.cu:    the theta round and the pruned or-sequence;
//   dispatch_tree.cu:  the tree-path sequence (trees and counts).
// Thread-safety: everything here works on one GpuContext, used by one thread at a time.
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "engine_desc.hpp"
#include "engine_plan.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/gpu_engine.hpp"

namespace search::gpu {

// A GpuContext's state: its stream, its stream-ordered pool for scratch, and pinned host memory
// for answers (RunRound) and uploads (Stage).
struct GpuContext::Impl {
  Stream stream;
  cudaMemPool_t pool = nullptr;
  PinnedBuffer pinned;
  GpuContextOptions options;
  // Pinned staging for one round's host-to-device uploads: a cudaMemcpyAsync from pageable memory
  // makes the host wait for the stream's earlier work (and goes through the driver's own staging
  // under its locks), which would serialize the launch sequence behind the GPU. Bump-allocated;
  // reset after the round's synchronization, when outgrown buffers (`retired`) are freed too.
  PinnedBuffer staging;
  size_t staged = 0;
  std::vector<PinnedBuffer> retired;

  Result<char*> Stage(size_t bytes) {
    bytes = engine_internal::Align(bytes);
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

}  // namespace search::gpu

namespace search::gpu::engine_internal {

// ---------------------------------------------------------------------------------- grid sizing

inline constexpr uint32_t kMaxGridX = 2048;
// CTAs one launch of a batch may spread over its queries: gridDim.x shrinks with gridDim.y * z
// (the grid-stride loops cover the rest), so a batch of many queries does not queue hundreds of
// thousands of CTAs that mostly find nothing to do (grid.x is sized by the batch's largest query).
inline constexpr uint64_t kMaxCtasPerLaunch = 8192;
inline constexpr uint32_t kMinGridX = 16;

// The grid of a per-query kernel (blockIdx.y = query) for `items` of the largest query.
inline uint32_t GridFor(uint64_t items, uint32_t per_cta, uint64_t queries = 1) {
  const uint64_t g = (items + per_cta - 1) / per_cta;
  const uint64_t cap = std::clamp<uint64_t>(kMaxCtasPerLaunch / std::max<uint64_t>(queries, 1), kMinGridX, kMaxGridX);
  return static_cast<uint32_t>(std::clamp<uint64_t>(g, 1, cap));
}

// A spread kernel's grid (kernel_or.cuh): enough CTAs for `items` (an upper bound on the batch's
// items), at most about one full residency of the device (grid-stride loops do the rest).
inline constexpr uint64_t kSpreadCtas = 1056;
inline uint32_t SpreadGrid(uint64_t items, uint32_t per_cta) {
  return static_cast<uint32_t>(std::clamp<uint64_t>((items + per_cta - 1) / per_cta, 1, kSpreadCtas));
}

// Launches kernel<<<grid, kThreads, 0, stream>>>(args...) and returns the launch's error.
template <class... Params, class... Args>
Status Launch(void (*kernel)(Params...), dim3 grid, cudaStream_t stream, Args&&... args) {
  kernel<<<grid, kThreads, 0, stream>>>(std::forward<Args>(args)...);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

// ------------------------------------------------------------------------------- scratch layout

// Host-to-device uploads of one launch sequence through the context's pinned staging (Impl::Stage):
// Add records a region; Flush packs each run of regions that lie back to back in the scratch (the
// arena's alignment padding between them carried along) into one asynchronous copy.
class Uploads {
 public:
  template <class T>
  void Add(T* d_dst, const T* src, size_t count) {
    if (count > 0)
      regions_.push_back({reinterpret_cast<char*>(d_dst), reinterpret_cast<const char*>(src), count * sizeof(T)});
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

// One launch sequence's scratch: `layout(Arena&)` takes every piece and returns how many bytes
// from the start are to be zeroed. It runs twice, on a measuring arena and then on the allocation
// from the context's pool, so it must take the same pieces both times; the pointers of the second
// run are the real ones. The caller frees the scratch on the stream (cudaFreeAsync) after its
// last launch.
template <class Layout>
Result<void*> AllocateScratch(GpuContext::Impl& ctx, Layout&& layout) {
  Arena measure(0);
  layout(measure);
  void* scratch = nullptr;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&scratch, measure.size(), ctx.pool, ctx.stream.get()));
  Arena arena(reinterpret_cast<uintptr_t>(scratch));
  const size_t zeroed = layout(arena);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(scratch, 0, zeroed, ctx.stream.get()));
  return scratch;
}

// ------------------------------------------------------------------------------------- top-k

// The top-k tail every answering sequence ends with (kernel_topk.cuh): histogram, threshold,
// select, segmented sort, output, and the copy back. Per sequence: PrepareTopk with each query's
// item bound; in the layout, TakeAnswers first, TakeTopkZeroed per query among the zeroed pieces,
// TakeTopkUploads, SetTopkInput per query, TakeTopkRest; AddTopkUploads; then FinishTopk.
struct TopkPlan {
  std::vector<TopkDesc> tk;
  std::vector<int> seg_begin;
  std::vector<uint32_t*> hist, sel;  // per query: histogram, select counter (zeroed)
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

// Key segments for queries of at most caps[a] items each, and the sort's temporary bytes.
Status PrepareTopk(TopkPlan& t, const std::vector<uint64_t>& caps, cudaStream_t stream);
// The sequence's answers: d_out then the hits, laid out as RunRound lays out h_out and h_hits in
// pinned memory, so that one copy brings both back. First in the scratch (zeroed).
QueryOut* TakeAnswers(Arena& a, TopkPlan& t, uint32_t q, uint32_t total_k);
// Query a's zeroed top-k pieces (histogram, select counter).
void TakeTopkZeroed(Arena& a, TopkPlan& t, uint32_t query);
// The top-k descriptors the host uploads (with the sequence's own descriptors); resets tk.
void TakeTopkUploads(Arena& a, TopkPlan& t, uint32_t q);
// Query a's input (TopkDesc): n items at scores (docs == nullptr: dense from doc_begin), *d_count
// of them when d_count is set; its answer goes to out and the phase's hit slots.
void SetTopkInput(TopkPlan& t, const Phase& ph, const std::vector<QState>& st, uint32_t a, const float* scores,
                  const uint32_t* docs, const uint32_t* d_count, uint32_t n, QueryOut* out);
// The rest of the top-k scratch (thresholds, segment ends, keys, sort temporary).
void TakeTopkRest(Arena& a, TopkPlan& t, uint32_t q);
void AddTopkUploads(Uploads& up, const TopkPlan& t, uint32_t q);
// Launches the top-k tail, copies the answers back into ph's pinned memory and frees the scratch.
Status FinishTopk(GpuContext::Impl& ctx, TopkPlan& t, const Phase& ph, QueryOut* d_out, uint32_t doc_begin,
                  void* scratch);

// -------------------------------------------------------------------------------- sequences

// Each enqueues one launch sequence for ph.ids on ctx's stream; the answers land in ph.h_out /
// ph.h_hits once the stream is synchronized.
// and: every term present, n >= 1.
Status EnqueueAnd(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph);
// or on the dense accumulator.
Status EnqueueOr(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph);
// The theta round (kernel_or.cuh); out->theta comes back.
Status EnqueueTheta(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph);
// A one-list top-k in one round (TopBlocksEligible); out->theta (the floor read) comes back.
Status EnqueueTopBlocks(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph);
// or on the pruned path (PlanOr chose it).
Status EnqueueOrPruned(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph);
// The tree path (kTree: scores and top-k; kTreeCount: counts only); out->total comes back.
Status EnqueueTree(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph);

// The engine's process-wide counters behind EngineTimes.
struct EngineCounters {
  std::atomic<uint64_t> calls{0}, rounds{0}, enqueue_ns{0}, wait_ns{0}, total_ns{0};
  std::atomic<uint64_t> or_theta{0}, or_pruned{0}, or_dense{0}, or_overflow{0}, top_blocks{0}, top_blocks_rerun{0};
  std::atomic<uint64_t> tree{0}, tree_count_only{0}, and_bounded{0};
  std::atomic<uint64_t> theta_ratio_ppm{0}, theta_ratio_n{0};
};
EngineCounters& Counters();

// Runs the phases as one round (one synchronization) and folds the answers into st.
Status RunRound(GpuContext::Impl& ctx, const ShardDev& shard, std::vector<Phase>& phases, std::vector<QState>& st);

}  // namespace search::gpu::engine_internal
