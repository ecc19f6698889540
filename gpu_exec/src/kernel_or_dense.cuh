// The GPU engine's dense or-kernels (dispatch_and.cu launches them): a per-query accumulator
// over the shard's documents. OrFillKernel writes -0.0f ("no posting yet"); OrAccumulateKernel
// runs once per canonical term slot (a list's docIDs are distinct, so a plain read-add-write;
// slots run in order, so the float adds are the CPU engine's). blockIdx.y is the query.
// Thread-safety: kernels touch only their query's accumulator.
#pragma once

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "engine_device.cuh"

namespace search::gpu::engine_internal {

__global__ void __launch_bounds__(kThreads) OrFillKernel(const OrDesc* descs, uint32_t num_docs) {
  float* acc = descs[blockIdx.y].acc;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < num_docs; i += gridDim.x * kThreads) acc[i] = -0.0f;
}

// Adds canonical slot s of every query: acc[doc] += contribution (float adds in slot order).
__global__ void __launch_bounds__(kThreads)
    OrAccumulateKernel(const OrDesc* descs, const DevList* lists, ShardDev shard, uint32_t s) {
  const OrDesc& q = descs[blockIdx.y];
  if (q.m <= s) return;
  const DevList l = lists[q.list_off + s];
  uint64_t blocks = 0, postings = 0, bytes = 0;
  for (uint32_t b = GlobalWarp(); b < l.num_blocks; b += WarpStride()) {
    const BlockMeta m = l.meta[b];
    uint32_t docs[kWarpValues], tfs[kWarpValues];
    // last_doc < doc_begin + num_docs was checked on the host, and a good block's docs are <= it.
    if (!DecodeScoredBlock(l, b, m, shard.doc_begin, docs, tfs, blocks, postings, bytes)) {
      if (Lane() == 0) atomicOr(&q.out->error, kErrCorrupt);
      continue;
    }
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      if (i >= m.count) continue;
      const uint32_t off = docs[r] - shard.doc_begin;
      q.acc[off] += Bm25TermScore(l.idf, tfs[r], shard.norms[off], shard.k1);
    }
  }
  AddStats(q.out, blocks, postings, bytes, blocks);
}

}  // namespace search::gpu::engine_internal
