// The GPU engine's phrase kernels (dispatch_phrase.cu launches them). Per phrase leaf of a batch
// (phrase_plan.hpp's PhraseDesc; blockIdx.y strides over the leaves), over its driver's postings:
//   PhraseTfKernel       a thread per driver posting: the document's posting in every other
//                        distinct token (binary search of its docIDs; none: tf 0), then the tf:
//                        the start positions s with token i at s + i for every i, found from the
//                        token of fewest positions there (each of its positions p >= its index a
//                        gives s = p - a, the others checked by binary search in their positions);
//                        writes the tf and a 0/1 flag per item;
//   PhraseCompactKernel  after an exclusive scan of the flags: the matches' (docID, tf) at their
//                        scanned ranks (ascending docIDs, as the driver's), and the leaf's count.
// Exactly the CPU engine's tf (tree_query.cpp PhraseNode::CountAt): the same set of starts.
// Thread-safety: kernels touch only their batch's scratch.
#pragma once

#include <cstdint>

#include "engine_device.cuh"
#include "phrase_plan.hpp"

namespace search::gpu::engine_internal {

// The first index in a[lo, hi) whose value is >= x (hi when none).
__device__ __forceinline__ uint32_t LowerBound(const uint32_t* a, uint32_t lo, uint32_t hi, uint64_t x) {
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (uint64_t{__ldg(a + mid)} < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The phrase's tf at the driver's posting i.
__device__ __forceinline__ uint32_t PhraseTfAt(const PhraseDesc& d, const PhraseTok* toks, uint32_t i) {
  uint32_t idx[kMaxPhraseTokens];
  const uint32_t doc = __ldg(toks[0].docs + i);
  idx[0] = i;
  for (uint32_t u = 1; u < d.distinct; ++u) {
    const PhraseTok& t = toks[u];
    const uint32_t j = LowerBound(t.docs, 0, t.count, doc);
    if (j == t.count || __ldg(t.docs + j) != doc) return 0;
    idx[u] = j;
  }
  // The anchor: the phrase token with the fewest positions here (the first such).
  uint32_t a = 0, fewest = 0xffffffffu;
  for (uint32_t k = 0; k < d.n; ++k) {
    const uint32_t u = d.tok_of[k];
    const uint32_t len = __ldg(toks[u].offsets + idx[u] + 1) - __ldg(toks[u].offsets + idx[u]);
    if (len < fewest) {
      fewest = len;
      a = k;
    }
  }
  const PhraseTok& at = toks[d.tok_of[a]];
  const uint32_t from = __ldg(at.offsets + idx[d.tok_of[a]]), to = from + fewest;
  uint32_t tf = 0;
  for (uint32_t e = from; e < to; ++e) {
    const uint32_t p = __ldg(at.pos + e);
    if (p < a) continue;
    const uint64_t start = p - a;
    bool all = true;
    for (uint32_t k = 0; k < d.n && all; ++k) {
      if (k == a) continue;
      const uint32_t u = d.tok_of[k];
      const PhraseTok& t = toks[u];
      const uint32_t lo = __ldg(t.offsets + idx[u]), hi = __ldg(t.offsets + idx[u] + 1);
      const uint64_t want = start + k;
      const uint32_t j = LowerBound(t.pos, lo, hi, want);
      all = j < hi && uint64_t{__ldg(t.pos + j)} == want;
    }
    tf += all ? 1u : 0u;
  }
  return tf;
}

__global__ void __launch_bounds__(kThreads)
    PhraseTfKernel(const PhraseDesc* descs, uint32_t leaves, const PhraseTok* toks, uint32_t* tfc, uint32_t* flags) {
  for (uint32_t p = blockIdx.y; p < leaves; p += gridDim.y) {
    const PhraseDesc& d = descs[p];
    const PhraseTok* t = toks + d.tok_off;
    const uint32_t n = t[0].count;
    for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
      const uint32_t tf = PhraseTfAt(d, t, i);
      tfc[d.item_begin + i] = tf;
      flags[d.item_begin + i] = tf != 0 ? 1u : 0u;
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    PhraseCompactKernel(const PhraseDesc* descs, uint32_t leaves, const PhraseTok* toks, const uint32_t* tfc,
                        const uint32_t* scan, uint32_t* out_docs, uint32_t* out_tfs, uint32_t* lens) {
  for (uint32_t p = blockIdx.y; p < leaves; p += gridDim.y) {
    const PhraseDesc& d = descs[p];
    const PhraseTok& drv = toks[d.tok_off];
    const uint32_t n = drv.count, b = d.item_begin;
    const uint32_t base = scan[b];
    if (blockIdx.x == 0 && threadIdx.x == 0) lens[p] = scan[b + n] - base;
    for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
      const uint32_t tf = tfc[b + i];
      if (tf == 0) continue;
      const uint32_t r = scan[b + i] - base;
      out_docs[b + r] = __ldg(drv.docs + i);
      out_tfs[b + r] = tf;
    }
  }
}

}  // namespace search::gpu::engine_internal
