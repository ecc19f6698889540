// GpuExecutorAdapter: the shard node's GPU executor. A query's lists are looked up as CpuExecutor
// looks them up (term metadata, main-memory list cache; idf from the global df), made resident
// in the GPU list cache on a worker's GpuContext stream, and run by gpu::ExecuteQueryGpu; hits
// come back with external ids and Processor::kGpu.
//
// Never a wrong or lost answer: on ANY GPU-side failure (a CUDA error, device memory exhausted in
// the list cache or the engine, a query the engine does not run such as more than kGpuMaxTerms
// terms, a Corruption reported by the engine) the query reruns on the CPU (CpuExecutorAdapter; the
// CPU reports Corruption itself if the bytes are bad) and is counted in
// search_gpu_fallbacks_total{reason} (and search_fallback_cpu_total). Host-side lookup errors
// (the CPU would hit them too) are returned as they are.
// Query trees of terms and phrases and counts run on the GPU engine (gpu::GpuQueryInput::tree/count;
// k 0 with count: the count alone). A phrase token's positions go to the GPU list cache too, in
// the engine's layout (gpu_exec/device_positions.hpp, GpuListCache::AcquireBuilt under the
// lists' budget); when they do not fit, the query falls back (out_of_memory) as for a list. A
// shape it does not run (GpuUnsupported: a phrase tree past the program's slots): Execute runs it
// on the CPU and counts it in search_node_gpu_unsupported_total{reason}; in a batch it is a GPU
// failure (retry_on_cpu; the node's scheduler never sends one).
// Flags: kFlagForceCpu runs on the CPU; kFlagForceGpu runs on the GPU or returns the GPU's error
// (no fallback; Unavailable for an unsupported shape); both at once is InvalidArgument.
// Contexts: a mutex-guarded free list of gpu::GpuContext, created on demand, so there are at most
// as many as worker threads running queries at once; a context that saw a CUDA error is dropped.
// Metrics: the GPU list cache's counters are published by a scrape hook (search_gpu_cache_*, the
// families gpu_cache's GpuCacheMetrics registers), and
// with them the CPU and wall time of the batches by part (search_gpu_batch_cpu_seconds_total{part},
// search_gpu_batch_seconds_total{part}).
// Thread-safety: Execute may be called from many threads at once.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu_cache/gpu_list_cache.hpp"
#include "gpu_exec/gpu_engine.hpp"
#include "metrics/metrics.hpp"
#include "node/executor.hpp"
#include "node/gpu_executor_metrics.hpp"

namespace search {

// What GpuExecutorAdapter::Preload made resident.
struct GpuPreloadStats {
  size_t lists = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  bool cache_full = false;  // stopped early: the list cache had no room left
};

struct GpuExecutorOptions {
  // Device bytes for cached posting lists; 0 = SizeGpuListCache (core/cache_sizing.hpp) at Create.
  size_t cache_bytes = 0;
  size_t staging_bytes = size_t{64} << 20;  // pinned staging buffers of the list cache
  gpu::GpuContextOptions context;           // per worker context
};

class GpuExecutorAdapter final : public Executor, public BatchExecutor {
 public:
  // Unavailable when there is no usable GPU; the list cache's or the first context's error
  // otherwise. REQUIRES: shard (and metrics, which may be nullptr) outlive the adapter.
  static Result<std::unique_ptr<GpuExecutorAdapter>> Create(const ShardReader* shard, Metrics* metrics,
                                                            const GpuExecutorOptions& options = {});
  ~GpuExecutorAdapter() override;
  GpuExecutorAdapter(const GpuExecutorAdapter&) = delete;
  GpuExecutorAdapter& operator=(const GpuExecutorAdapter&) = delete;

  std::string_view name() const override { return "gpu"; }
  bool has_gpu() const override { return true; }
  Result<ExecOutput> Execute(const Query& query, Deadline deadline, uint32_t flags) override;

  // BatchExecutor: the items' queries in one gpu::ExecuteBatchGpu launch sequence; GPU-side
  // failures are counted as fallbacks and flagged retry_on_cpu (the caller reruns them).
  std::string_view batch_name() const override { return "gpu"; }
  void ExecuteBatch(std::span<BatchItem> items) override;
  uint64_t NonResidentBytes(const Query& query) override;
  // Griffin's GPU steps: the lists (made resident) decoded on the GPU and intersected shortest
  // first (merge path when the next list is at most 8x the running intersection of 2^20 or more,
  // else binary search: bench/gpu_exec/gpu_intersect_bench), in stream-ordered memory.
  Result<Prefix> IntersectPrefix(const Query& query, double crossover) override;

  // Makes the shard's longest lists resident in the GPU list cache, longest first: those of at
  // least min_postings postings whose encoded bytes sum to at most max_bytes (capped at 90% of the
  // cache's capacity, so queries still find room). A node calls it at start (--gpu-preload-mb) so
  // its first queries do not wait for PCIe copies. Stops early, without an error, when the cache
  // has no room left; returns a read or CUDA error as it is (nothing is lost: the lists are then
  // copied on first use). Safe while queries run.
  Result<GpuPreloadStats> Preload(uint64_t max_bytes, uint32_t min_postings = 1024);

  gpu::GpuListCache& cache() { return *cache_; }
  // Queries rerun on the CPU for `reason` since Create (also exported as metrics).
  uint64_t fallbacks(GpuFallbackReason reason) const { return fallbacks_[static_cast<size_t>(reason)].load(); }
  uint64_t fallbacks_total() const;

 private:
  GpuExecutorAdapter(const ShardReader* shard, Metrics* metrics, std::unique_ptr<gpu::GpuListCache> cache,
                     const GpuExecutorOptions& options);

  struct Prepared;
  // The batch on the GPU: host-side lookups (their errors are the queries' own), then one launch
  // sequence; GPU-side failures set retry_on_cpu (and are counted when count_fallbacks).
  void RunBatch(std::span<BatchItem> items, bool count_fallbacks);
  // The query's term metadata and lists: `prepared` (BatchItem::prepared) when given, else looked up.
  Status PrepareHost(const Query& query, const std::vector<PreparedTerm>* prepared, Prepared* p);
  Result<ExecOutput> ToOutput(const SearchResult& r, size_t fetched, uint64_t micros, bool resolve_ids) const;
  void CountFallback(GpuFallbackReason reason, const Status& why);
  Result<std::unique_ptr<gpu::GpuContext>> TakeContext();
  void GiveContext(std::unique_ptr<gpu::GpuContext> ctx);
  void PublishBatchTimes();

  const ShardReader* shard_;
  Metrics* metrics_;
  std::unique_ptr<GpuExecutorMetrics> gpu_metrics_;  // set with metrics_
  GpuExecutorOptions options_;
  std::unique_ptr<gpu::GpuListCache> cache_;
  gpu::GpuShardView view_;
  CpuExecutorAdapter cpu_;
  std::mutex contexts_mu_;
  std::vector<std::unique_ptr<gpu::GpuContext>> contexts_;  // GUARDED_BY(contexts_mu_), idle ones
  std::array<std::atomic<uint64_t>, kNumGpuFallbackReasons> fallbacks_{};
  std::array<std::atomic<uint64_t>, kNumGpuBatchParts> batch_cpu_ns_{};   // RunBatch's thread CPU by part
  std::array<std::atomic<uint64_t>, kNumGpuBatchParts> batch_wall_ns_{};  // and its wall time
  int hook_id_ = 0;
};

}  // namespace search
