// The GPU engine's and-kernels (gpu_engine.hpp has the algorithm; dispatch_and.cu launches
// them). Every kernel serves a whole batch: blockIdx.y is the query (its AndDesc), blockIdx.x
// with a grid-stride loop covers that query's work, whose extent is read on the device (candidate
// counts) or known from host metadata (block counts). Loops step whole warps together so warp
// collectives (ballot, shuffles, WarpDecodeDocs) always see all 32 lanes.
//   AndLeadKernel decodes the shortest list (the candidates); then per further list
//   AndLocateKernel (each candidate binary-searches the skip array), AndDecodeKernel (a warp per
//   needed block, or per block when the whole list is decoded), AndProbeKernel (binary search in
//   the candidate's decoded block; survivors appended, unordered); AndScoreKernel sums the
//   survivors' contributions in canonical term order (tf read with FreqAt only for them).
// Thread-safety: kernels touch only their query's scratch.
#pragma once

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "engine_device.cuh"

namespace search::gpu::engine_internal {

__global__ void __launch_bounds__(kThreads) AndLeadKernel(const AndDesc* descs, const DevList* lists, ShardDev shard) {
  const AndDesc& q = descs[blockIdx.y];
  const DevList l = lists[q.list_off + q.step_slot[0]];
  if (blockIdx.x == 0 && threadIdx.x == 0) q.counters[0] = l.count;
  uint64_t blocks = 0, postings = 0, bytes = 0;
  for (uint32_t b = GlobalWarp(); b < l.num_blocks; b += WarpStride()) {
    const BlockMeta m = l.meta[b];
    uint32_t docs[kWarpValues];
    if (!DecodeChecked(l, b, m, shard.doc_begin, docs)) {
      if (Lane() == 0) atomicOr(&q.out->error, kErrCorrupt);
      for (uint32_t r = 0; r < kWarpValues; ++r) docs[r] = shard.doc_begin;  // harmless values
    }
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      if (i < m.count) {
        q.cand_doc[0][b * kBlockSize + i] = docs[r];
        q.cand_orig[0][b * kBlockSize + i] = b * kBlockSize + i;
      }
    }
    ++blocks;
    postings += m.count;
    bytes += PackedBytes(m.count, m.doc_bits);
  }
  AddStats(q.out, blocks, postings, bytes, 0);
}

__global__ void __launch_bounds__(kThreads) AndLocateKernel(const AndDesc* descs, const DevList* lists, uint32_t j) {
  const AndDesc& q = descs[blockIdx.y];
  if (q.n <= j) return;
  const DevList l = lists[q.list_off + q.step_slot[j]];
  const uint32_t c = q.counters[j - 1];
  const uint32_t* cand = q.cand_doc[(j - 1) & 1];
  const bool dense = (q.dense_mask >> j) & 1u;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < c; i += gridDim.x * kThreads) {
    const uint32_t doc = cand[i];
    const uint32_t lo = FirstBlockReaching(l, 0, l.num_blocks, doc);
    const uint32_t b = lo < l.num_blocks ? lo : kNone;
    q.cand_block[i] = b;
    if (!dense && b != kNone) q.needed[b] = 1u;  // same value from every writer
  }
}

__global__ void __launch_bounds__(kThreads)
    AndDecodeKernel(const AndDesc* descs, const DevList* lists, ShardDev shard, uint32_t j) {
  const AndDesc& q = descs[blockIdx.y];
  if (q.n <= j) return;
  const DevList l = lists[q.list_off + q.step_slot[j]];
  const bool dense = (q.dense_mask >> j) & 1u;
  uint64_t blocks = 0, postings = 0, bytes = 0;
  for (uint32_t b = GlobalWarp(); b < l.num_blocks; b += WarpStride()) {
    uint32_t slot = b;
    if (!dense) {
      uint32_t need = 0;
      if (Lane() == 0) {
        need = q.needed[b];
        if (need != 0) {
          q.needed[b] = 0;  // ready for the next step
          slot = atomicAdd(&q.counters[kMaxSteps + j], 1u);
          q.slot_of[b] = slot;
        }
      }
      need = __shfl_sync(0xffffffffu, need, 0);
      if (need == 0) continue;
      slot = __shfl_sync(0xffffffffu, slot, 0);
    }
    const BlockMeta m = l.meta[b];
    uint32_t docs[kWarpValues];
    if (!DecodeChecked(l, b, m, shard.doc_begin, docs) && Lane() == 0) atomicOr(&q.out->error, kErrCorrupt);
    uint32_t* dst = q.decoded + static_cast<size_t>(slot) * kBlockSize;
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      if (i < m.count) dst[i] = docs[r];
    }
    ++blocks;
    postings += m.count;
    bytes += PackedBytes(m.count, m.doc_bits);
  }
  AddStats(q.out, blocks, postings, bytes, 0);
}

__global__ void __launch_bounds__(kThreads) AndProbeKernel(const AndDesc* descs, const DevList* lists, uint32_t j) {
  const AndDesc& q = descs[blockIdx.y];
  if (q.n <= j) return;
  const DevList l = lists[q.list_off + q.step_slot[j]];
  const uint32_t c = q.counters[j - 1];
  const uint32_t src = (j - 1) & 1u, dst = j & 1u;
  const bool dense = (q.dense_mask >> j) & 1u;
  const uint32_t stride = gridDim.x * kThreads;
  for (uint32_t i0 = blockIdx.x * kThreads + (threadIdx.x & ~31u); i0 < c; i0 += stride) {
    const uint32_t i = i0 + Lane();
    bool found = false;
    uint32_t doc = 0, orig = 0, pos = 0;
    if (i < c) {
      const uint32_t b = q.cand_block[i];
      if (b != kNone) {
        doc = q.cand_doc[src][i];
        orig = q.cand_orig[src][i];
        const uint32_t slot = dense ? b : q.slot_of[b];
        const uint32_t* blk = q.decoded + static_cast<size_t>(slot) * kBlockSize;
        const uint32_t cnt = l.meta[b].count;
        uint32_t lo = 0, hi = cnt;
        while (lo < hi) {
          const uint32_t mid = (lo + hi) >> 1;
          if (blk[mid] < doc)
            lo = mid + 1;
          else
            hi = mid;
        }
        found = lo < cnt && blk[lo] == doc;
        pos = b * kBlockSize + lo;
      }
    }
    const uint32_t at = WarpAppend(&q.counters[j], found);
    if (found) {
      q.cand_doc[dst][at] = doc;
      q.cand_orig[dst][at] = orig;
      q.posmat[static_cast<size_t>(j - 1) * q.cap + orig] = pos;
    }
  }
}

__global__ void __launch_bounds__(kThreads) AndScoreKernel(const AndDesc* descs, const DevList* lists, ShardDev shard) {
  const AndDesc& q = descs[blockIdx.y];
  const uint32_t last = q.n - 1;
  const uint32_t c = q.counters[last];
  const uint32_t src = last & 1u;
  if (blockIdx.x == 0 && threadIdx.x == 0) q.out->scored = c;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < c; i += gridDim.x * kThreads) {
    const uint32_t doc = q.cand_doc[src][i];
    const uint32_t orig = q.cand_orig[src][i];
    float score = 0.0f;
    if (doc - shard.doc_begin >= shard.num_docs) {  // only after a corrupt block
      atomicOr(&q.out->error, kErrCorrupt);
    } else {
      const float norm = shard.norms[doc - shard.doc_begin];
      for (uint32_t s = 0; s < q.n; ++s) {  // canonical order
        const DevList& l = lists[q.list_off + s];
        const uint32_t step = q.slot_step[s];
        const uint32_t pos = step == 0 ? orig : q.posmat[static_cast<size_t>(step - 1) * q.cap + orig];
        const uint32_t tf = FreqAt(l.payload, l.meta[pos / kBlockSize], pos % kBlockSize);
        score += Bm25TermScore(l.idf, tf, norm, shard.k1);
      }
    }
    q.scores[i] = score;
    q.docs[i] = doc;
  }
}

}  // namespace search::gpu::engine_internal
