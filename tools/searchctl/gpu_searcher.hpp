// GpuSearcher: searchctl's GPU path (`bench --engine gpu`). Every shard of an open LocalIndex
// gets a GpuListCache (device copies of its lists, LRU under a byte budget, norms resident); a
// batch of analyzed queries runs shard by shard through gpu::ExecuteBatchGpu, one launch sequence
// per shard for the whole batch (Ao 2011 §3.1), and the shards' top-k are merged as LocalIndex
// merges them (andor decided on the merged and-hits). Trees and counts (Query::tree, ::count) take
// the engine's tree path; the shards' exact totals are summed. A phrase token's positions go to
// the shard's GPU cache too (GpuListCache::AcquireBuilt, gpu_exec/device_positions.hpp).
// Thread-safety: SearchBatch may run on many threads at once, each with its own GpuContext.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/query.hpp"
#include "core/status.hpp"
#include "cpu_exec/local_index.hpp"
#include "gpu_cache/gpu_list_cache.hpp"
#include "gpu_exec/gpu_engine.hpp"

namespace search::cli {

class GpuSearcher {
 public:
  // REQUIRES: index outlives the searcher.
  static Result<std::unique_ptr<GpuSearcher>> Create(const LocalIndex& index, size_t cache_bytes_per_shard);
  ~GpuSearcher();

  // Answers queries[i] into (*out)[i] (queries of several modes run as a batch per mode). A CUDA
  // error fails the whole call.
  Status SearchBatch(gpu::GpuContext& ctx, std::span<const Query> queries, std::vector<Result<SearchResult>>* out) const;

  void DropResident() const;         // empties every shard's GPU cache (a cold start)
  gpu::GpuCacheStats stats() const;  // summed over shards

 private:
  struct Shard;
  GpuSearcher() = default;
  // The queries of one mode (andor over several shards: and everywhere, then or for the queries
  // whose merged and-hits are fewer than k).
  Status SearchMode(gpu::GpuContext& ctx, std::span<const Query> queries, QueryMode mode,
                    std::vector<Result<SearchResult>>* out) const;
  // One mode on every shard for the whole batch; per-query hits merged over shards.
  Status RunAll(gpu::GpuContext& ctx, std::span<const Query> queries, QueryMode mode,
                std::vector<Result<SearchResult>>* out) const;
  const LocalIndex* index_ = nullptr;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace search::cli
