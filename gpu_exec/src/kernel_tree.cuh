// The GPU engine's tree-path kernels (dispatch_tree.cu launches them), blockIdx.y the query. A
// query's matching runs on bitmaps, a bit per shard document (TreeDesc): 32 documents a word.
//   TreeScatterKernel   sets each slot's bits (blockIdx.z the slot): a compressed list decoded a
//                       warp per block, docIDs only; a decoded leaf (TreeLeaf) a thread per entry;
//   TreeEvalKernel      a thread per word runs the query's postfix program (engine_desc.hpp) on
//                       words: must and filter AND, must_not AND NOT, should OR, a boolean without
//                       a must or filter clause needing one should (core/query_tree.hpp's rules),
//                       nested booleans on a stack; counts the matches (popcount, one atomic per
//                       CTA). With a top-k it also keeps the match words and ranks them: a CTA
//                       takes a chunk of kThreads words, each word's matches before it in the chunk
//                       (wpre) and the chunk's count (chunk_base, before the scan);
//   TreeChunkScanKernel one CTA per query: chunk counts -> matches before each chunk (more matches
//                       than TreeDesc::cap, the host's bound, is a corrupt list);
//   TreeFillKernel      each scoring slot's tf at each match it holds, in match order (tfc,
//                       compact); a slot only under must_not or filter clauses is skipped;
//   TreeScoreKernel     a thread per word scores its matches: a term Bm25TermScore(idf, tf, norm), a
//                       boolean the float sum, in clause order, of its matching must and should
//                       clauses (a nested boolean's sum first), exactly as cpu_exec's ExecuteTree
//                       adds them; writes the r-th match's docID and score.
// Thread-safety: kernels touch only their query's scratch.
#pragma once

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "core/bm25.hpp"
#include "engine_device.cuh"

namespace search::gpu::engine_internal {

__device__ __forceinline__ uint32_t TreeWords(const ShardDev& shard) {
  return (shard.num_docs + 31u) / 32u;
}

// Whether slot s of q holds the document at offset `off` from doc_begin.
__device__ __forceinline__ bool TreeHas(const TreeDesc& q, uint32_t s, uint32_t words, uint32_t off) {
  return (q.bits[size_t{s} * words + (off >> 5)] >> (off & 31u)) & 1u;
}

// Calls f(doc, tf) for every posting of slot s of query q, spread over the grid (blockIdx.x and
// threads): a compressed list a warp per block, a decoded leaf a thread per entry. with_tf false:
// tf is 0 (frequencies not decoded). Corrupt blocks set kErrCorrupt.
template <bool kWithTf, class F>
__device__ __forceinline__ void TreeForEachPosting(const TreeDesc& q, const DevList& l, const TreeLeaf& leaf,
                                                   const ShardDev& shard, F&& f) {
  uint64_t blocks = 0, postings = 0, bytes = 0;
  if (l.meta != nullptr) {
    for (uint32_t b = GlobalWarp(); b < l.num_blocks; b += WarpStride()) {
      const BlockMeta m = l.meta[b];
      uint32_t docs[kWarpValues], tfs[kWarpValues] = {};
      bool ok;
      if constexpr (kWithTf) {
        ok = DecodeScoredBlock(l, b, m, shard.doc_begin, docs, tfs, blocks, postings, bytes);
      } else {
        ++blocks;
        postings += m.count;
        bytes += PackedBytes(m.count, m.doc_bits);
        ok = DecodeChecked(l, b, m, shard.doc_begin, docs);
      }
      if (!ok) {
        if (Lane() == 0) atomicOr(&q.out->error, kErrCorrupt);
        continue;
      }
#pragma unroll
      for (uint32_t r = 0; r < kWarpValues; ++r) {
        if (Lane() * kWarpValues + r >= m.count) continue;
        if (docs[r] - shard.doc_begin >= shard.num_docs) {  // blocks out of order: past the shard
          atomicOr(&q.out->error, kErrCorrupt);
          continue;
        }
        f(docs[r], tfs[r]);
      }
    }
    AddStats(q.out, blocks, postings, bytes, kWithTf ? blocks : 0);
  } else if (leaf.docs != nullptr) {
    const uint32_t n = min(*leaf.d_len, leaf.cap);
    for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
      const uint32_t doc = leaf.docs[i];
      if (doc < shard.doc_begin || doc - shard.doc_begin >= shard.num_docs) {
        atomicOr(&q.out->error, kErrCorrupt);
        continue;
      }
      f(doc, kWithTf ? leaf.tfs[i] : 0u);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    TreeScatterKernel(const TreeDesc* descs, const DevList* lists, const TreeLeaf* leaves, ShardDev shard) {
  const TreeDesc& q = descs[blockIdx.y];
  const uint32_t s = blockIdx.z;
  if (q.m <= s) return;
  uint32_t* bits = q.bits + size_t{s} * TreeWords(shard);
  // A thread's postings come in ascending runs: bits of one word are gathered, one atomic a word.
  uint32_t pend_w = kNone, pend_m = 0;
  TreeForEachPosting<false>(q, lists[q.list_off + s], leaves[q.list_off + s], shard, [&](uint32_t doc, uint32_t) {
    const uint32_t off = doc - shard.doc_begin;
    if ((off >> 5) != pend_w) {
      if (pend_m != 0) atomicOr(bits + pend_w, pend_m);
      pend_w = off >> 5;
      pend_m = 0;
    }
    pend_m |= 1u << (off & 31u);
  });
  if (pend_m != 0) atomicOr(bits + pend_w, pend_m);
}

// One open boolean of the program while a word of documents is evaluated.
struct TreeWordFrame {
  uint32_t all;   // documents every must and filter clause so far matched
  uint32_t none;  // documents some must_not clause matched
  uint32_t any;   // documents some should clause matched
  bool required;  // it has a must or filter clause
};

__device__ __forceinline__ void TreeWordApply(TreeWordFrame& f, uint32_t occur, uint32_t match) {
  switch (occur) {
    case 1:  // must
    case 4:  // filter
      f.all &= match;
      break;
    case 2:  // should
      f.any |= match;
      break;
    default:  // 3: must_not
      f.none |= match;
      break;
  }
}

// The matches among documents 32w .. 32w+31 (offsets from doc_begin) of query q.
__device__ __forceinline__ uint32_t TreeWordMatch(const TreeDesc& q, const uint32_t* prog, uint32_t words, uint32_t w) {
  TreeWordFrame frames[kTreeFrames];
  int top = -1;
  uint32_t match = 0;
  for (uint32_t pc = 0; pc < q.prog_len; ++pc) {
    const uint32_t op = __ldg(prog + pc);
    const uint32_t kind = op & 3u, occur = (op >> 2) & 7u;
    if (kind == kTreeBegin) {
      ++top;
      frames[top] = TreeWordFrame{0xffffffffu, 0u, 0u, ((op >> 5) & 1u) != 0};
    } else if (kind == kTreeTerm) {
      const uint32_t slot = (op >> 8) & 0xffu;
      const uint32_t m = slot == kTreeAbsent ? 0u : q.bits[size_t{slot} * words + w];
      TreeWordApply(frames[top], occur, m);
    } else {  // kTreeEnd
      const TreeWordFrame& f = frames[top];
      const uint32_t m = f.all & ~f.none & (f.required ? 0xffffffffu : f.any);
      --top;
      if (top < 0)
        match = m;
      else
        TreeWordApply(frames[top], occur, m);
    }
  }
  return match;
}

template <bool kRank>
__global__ void __launch_bounds__(kThreads)
    TreeEvalKernel(const TreeDesc* descs, const uint32_t* progs, ShardDev shard) {
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } tmp;
  const TreeDesc& q = descs[blockIdx.y];
  const uint32_t* prog = progs + q.prog_off;
  const uint32_t words = TreeWords(shard);
  const uint32_t chunks = (words + kThreads - 1) / kThreads;
  const uint32_t tail = shard.num_docs & 31u;  // valid bits of the last word (0: all 32)
  uint32_t matched = 0;
  for (uint32_t c = blockIdx.x; c < chunks; c += gridDim.x) {  // uniform over the CTA
    const uint32_t w = c * kThreads + threadIdx.x;
    uint32_t m = 0;
    if (w < words) {
      m = TreeWordMatch(q, prog, words, w);
      if (w == words - 1 && tail != 0) m &= (1u << tail) - 1u;
    }
    const uint32_t n = static_cast<uint32_t>(__popc(m));
    matched += n;
    if constexpr (kRank) {
      uint32_t before = 0, chunk_total = 0;
      Scan(tmp.scan).ExclusiveSum(n, before, chunk_total);
      __syncthreads();  // tmp is reused by the next chunk's scan
      if (w < words) {
        q.match[w] = m;
        q.wpre[w] = before;
      }
      if (threadIdx.x == 0) q.chunk_base[c] = chunk_total;
    }
  }
  const uint32_t sum = Reduce(tmp.reduce).Sum(matched);
  if (threadIdx.x == 0 && sum != 0) atomicAdd(&q.out->total, sum);
}

// One CTA per query: chunk_base[c] from the chunk's count to the matches before chunk c.
__global__ void __launch_bounds__(kThreads) TreeChunkScanKernel(const TreeDesc* descs, ShardDev shard) {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const TreeDesc& q = descs[blockIdx.y];
  const uint32_t chunks = (TreeWords(shard) + kThreads - 1) / kThreads;
  uint32_t carry = 0;
  for (uint32_t c0 = 0; c0 < chunks; c0 += kThreads) {
    const uint32_t c = c0 + threadIdx.x;
    const uint32_t v = c < chunks ? q.chunk_base[c] : 0u;
    uint32_t before = 0, total = 0;
    Scan(tmp).ExclusiveSum(v, before, total);
    __syncthreads();
    if (c < chunks) q.chunk_base[c] = carry + before;
    carry += total;
  }
  // More matches than the host's bound on them: the lists' headers disagree with their blocks.
  if (threadIdx.x == 0 && carry > q.cap) atomicOr(&q.out->error, kErrCorrupt);
}

// The rank of a match at offset `off` among the query's matches (its bit set in q.match).
__device__ __forceinline__ uint32_t TreeRank(const TreeDesc& q, uint32_t off) {
  const uint32_t w = off >> 5;
  return q.chunk_base[w / kThreads] + q.wpre[w] +
         static_cast<uint32_t>(__popc(q.match[w] & ((1u << (off & 31u)) - 1u)));
}

__global__ void __launch_bounds__(kThreads)
    TreeFillKernel(const TreeDesc* descs, const DevList* lists, const TreeLeaf* leaves, ShardDev shard) {
  const TreeDesc& q = descs[blockIdx.y];
  const uint32_t s = blockIdx.z;
  if (q.m <= s || ((q.score_mask >> s) & 1u) == 0) return;  // a slot that adds nothing: matching only
  uint32_t* tfc = q.tfc + size_t{s} * q.cap;
  TreeForEachPosting<true>(q, lists[q.list_off + s], leaves[q.list_off + s], shard, [&](uint32_t doc, uint32_t tf) {
    const uint32_t off = doc - shard.doc_begin;
    if (((q.match[off >> 5] >> (off & 31u)) & 1u) == 0) return;
    const uint32_t r = TreeRank(q, off);
    if (r < q.cap) tfc[r] = tf;
  });
}

// One open boolean of the program while a document is scored.
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
    TreeScoreKernel(const TreeDesc* descs, const DevList* lists, const uint32_t* progs, ShardDev shard) {
  __shared__ float idf[kMaxSteps];
  const TreeDesc& q = descs[blockIdx.y];
  if (threadIdx.x < q.m) idf[threadIdx.x] = lists[q.list_off + threadIdx.x].idf;
  __syncthreads();
  const uint32_t* prog = progs + q.prog_off;
  const uint32_t len = q.prog_len;
  const uint32_t words = TreeWords(shard);
  for (uint32_t w = blockIdx.x * kThreads + threadIdx.x; w < words; w += gridDim.x * kThreads) {
    uint32_t mw = q.match[w];
    if (mw == 0) continue;
    uint32_t r = q.chunk_base[w / kThreads] + q.wpre[w];
    for (; mw != 0 && r < q.cap; mw &= mw - 1u, ++r) {  // past cap: a corrupt list (TreeChunkScanKernel)
      const uint32_t off = w * 32u + static_cast<uint32_t>(__ffs(mw) - 1);
      const float norm = shard.norms[off];
      TreeFrame frames[kTreeFrames];
      int top = -1;
      float score = 0.0f;
      for (uint32_t pc = 0; pc < len; ++pc) {
        const uint32_t op = __ldg(prog + pc);
        const uint32_t kind = op & 3u, occur = (op >> 2) & 7u;
        if (kind == kTreeBegin) {
          ++top;
          frames[top] = TreeFrame{0.0f, false, false, ((op >> 5) & 1u) != 0};
        } else if (kind == kTreeTerm) {
          const uint32_t slot = (op >> 8) & 0xffu;
          const bool has = slot != kTreeAbsent && TreeHas(q, slot, words, off);
          const bool scores = has && ((q.score_mask >> slot) & 1u) != 0;  // else no tf gathered
          const float c = scores ? Bm25TermScore(idf[slot], q.tfc[size_t{slot} * q.cap + r], norm, shard.k1) : 0.0f;
          TreeApply(frames[top], occur, has, c);
        } else {  // kTreeEnd
          const TreeFrame& f = frames[top];
          const bool m = !f.failed && (f.required || f.any);
          const float sc = f.score;
          --top;
          if (top < 0)
            score = sc;
          else
            TreeApply(frames[top], occur, m, sc);
        }
      }
      q.scores[r] = score;
      q.docs[r] = shard.doc_begin + off;
    }
  }
}

}  // namespace search::gpu::engine_internal
