// The GPU engine's tree-path kernels (dispatch_tree.cu launches them), blockIdx.y the query:
//   TreeScatterKernel  decodes every present list whole (a warp per block, blockIdx.z the slot)
//                      into the query's dense tf array of that slot (a list's docIDs are distinct:
//                      plain stores);
//   TreeEvalKernel     a thread per document runs the query's postfix program (engine_desc.hpp):
//                      the match rules of core/query_tree.hpp, a term's score Bm25TermScore(idf,
//                      tf, norm) and a boolean's the float sum, in clause order, of its matching
//                      must and should clauses (a nested boolean's sum first), exactly as cpu_exec's
//                      ExecuteTree adds them; writes the score (-0.0f: no match) when the query
//                      wants hits, and adds its CTA's matches to out->total with one atomic.
// Thread-safety: kernels touch only their query's scratch.
#pragma once

#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "core/bm25.hpp"
#include "engine_device.cuh"

namespace search::gpu::engine_internal {

__global__ void __launch_bounds__(kThreads)
    TreeScatterKernel(const TreeDesc* descs, const DevList* lists, ShardDev shard) {
  const TreeDesc& q = descs[blockIdx.y];
  const uint32_t s = blockIdx.z;
  if (q.m <= s) return;
  const DevList l = lists[q.list_off + s];
  uint32_t* tf = q.tfs + size_t{s} * shard.num_docs;
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
      if (i < m.count) tf[docs[r] - shard.doc_begin] = tfs[r];
    }
  }
  AddStats(q.out, blocks, postings, bytes, blocks);
}

// One open boolean of the program while a document is evaluated.
struct TreeFrame {
  float score;
  bool failed;    // a must or filter clause missed, or a must_not clause matched
  bool any;       // a should clause matched
  bool required;  // it has a must or filter clause
};

// Folds a clause's (match, score) into its boolean, as BoolNode does on the CPU.
__device__ __forceinline__ void TreeApply(TreeFrame& f, uint32_t occur, bool match, float score) {
  switch (occur) {
    case 1:  // must
      if (match)
        f.score += score;
      else
        f.failed = true;
      break;
    case 2:  // should
      if (match) {
        f.score += score;
        f.any = true;
      }
      break;
    case 3:  // must_not
      if (match) f.failed = true;
      break;
    default:  // 4: filter
      if (!match) f.failed = true;
      break;
  }
}

__global__ void __launch_bounds__(kThreads)
    TreeEvalKernel(const TreeDesc* descs, const DevList* lists, const uint32_t* progs, ShardDev shard) {
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ float idf[kMaxSteps];
  const TreeDesc& q = descs[blockIdx.y];
  if (threadIdx.x < q.m) idf[threadIdx.x] = lists[q.list_off + threadIdx.x].idf;
  __syncthreads();
  const uint32_t* prog = progs + q.prog_off;
  const uint32_t len = q.prog_len;
  const uint32_t n = shard.num_docs;
  uint32_t matched = 0;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
    const float norm = shard.norms[i];
    TreeFrame frames[kTreeFrames];
    int top = -1;
    bool match = false;
    float score = 0.0f;
    for (uint32_t pc = 0; pc < len; ++pc) {
      const uint32_t op = __ldg(prog + pc);
      const uint32_t kind = op & 3u, occur = (op >> 2) & 7u;
      if (kind == kTreeBegin) {
        ++top;
        frames[top] = TreeFrame{0.0f, false, false, ((op >> 5) & 1u) != 0};
      } else if (kind == kTreeTerm) {
        const uint32_t slot = (op >> 8) & 0xffu;
        const uint32_t tf = slot == kTreeAbsent ? 0u : q.tfs[size_t{slot} * n + i];
        const float c = tf != 0 ? Bm25TermScore(idf[slot], tf, norm, shard.k1) : 0.0f;
        TreeApply(frames[top], occur, tf != 0, c);
      } else {  // kTreeEnd
        const TreeFrame& f = frames[top];
        const bool m = !f.failed && (f.required || f.any);
        const float sc = f.score;
        --top;
        if (top < 0) {
          match = m;
          score = sc;
        } else {
          TreeApply(frames[top], occur, m, sc);
        }
      }
    }
    if (q.scores != nullptr) q.scores[i] = match ? score : -0.0f;
    matched += match ? 1u : 0u;
  }
  const uint32_t sum = Reduce(reduce_tmp).Sum(matched);
  if (threadIdx.x == 0 && sum != 0) atomicAdd(&q.out->total, sum);
}

}  // namespace search::gpu::engine_internal
