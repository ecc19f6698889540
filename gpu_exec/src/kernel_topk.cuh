// The GPU engine's top-k kernels (dispatch_round.cu launches them) over one query's scored items
// (TopkDesc), blockIdx.y the query: TopkHistogramKernel (13-bit score bins), TopkThresholdKernel
// (the bin holding the k-th), TopkSelectKernel (keys of bins >= it, unordered); then
// cub::DeviceSegmentedSort of the 64-bit keys (score, ~doc), a total order, so unordered
// compaction cannot change results; TopkOutputKernel writes the first k.
// Thread-safety: kernels touch only their query's scratch.
#pragma once

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "engine_device.cuh"

namespace search::gpu::engine_internal {

__device__ __forceinline__ bool TopkItem(const TopkDesc& t, uint32_t i, uint32_t doc_begin, uint32_t* doc,
                                         float* score) {
  *score = t.scores[i];
  *doc = t.docs == nullptr ? doc_begin + i : t.docs[i];
  return __float_as_uint(*score) != 0x80000000u;  // -0.0f: no document (a real score is never -0)
}

// Compact inputs: the device count, never past the buffer (a pruned or-query's counter runs past
// it when the candidates overflow; that query's answer is then discarded and rerun dense).
__device__ __forceinline__ uint32_t TopkCount(const TopkDesc& t) {
  return t.d_count ? min(*t.d_count, t.n) : t.n;
}

__global__ void __launch_bounds__(kThreads) TopkHistogramKernel(const TopkDesc* descs, uint32_t doc_begin) {
  __shared__ uint32_t hist[kHistBins];
  const TopkDesc& t = descs[blockIdx.y];
  for (uint32_t i = threadIdx.x; i < kHistBins; i += kThreads) hist[i] = 0;
  __syncthreads();
  const uint32_t c = TopkCount(t);
  uint32_t any = 0;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < c; i += gridDim.x * kThreads) {
    uint32_t doc;
    float score;
    if (!TopkItem(t, i, doc_begin, &doc, &score)) continue;
    atomicAdd(&hist[FloatKey(score) >> (32 - kHistBits)], 1u);
    any = 1;
  }
  if (__syncthreads_or(any) == 0) return;
  for (uint32_t i = threadIdx.x; i < kHistBins; i += kThreads)
    if (hist[i] != 0) atomicAdd(&t.hist[i], hist[i]);
}

// One CTA per query: the highest bin B with count(bins >= B) >= k (0 when fewer than k items);
// seg_end = seg_begin + count(bins >= B).
__global__ void __launch_bounds__(kThreads) TopkThresholdKernel(const TopkDesc* descs, uint32_t* d_thr) {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ uint32_t s_thr, s_ge;
  const TopkDesc& t = descs[blockIdx.y];
  constexpr uint32_t kPer = kHistBins / kThreads;
  const uint32_t hi = kHistBins - kPer * threadIdx.x;  // this thread's bins: [hi - kPer, hi), top first
  uint32_t sum = 0;
  for (uint32_t b = hi - kPer; b < hi; ++b) sum += t.hist[b];
  uint32_t before = 0, total = 0;
  Scan(scan_tmp).ExclusiveSum(sum, before, total);
  if (threadIdx.x == 0) {
    s_thr = 0;
    s_ge = total;
  }
  __syncthreads();
  if (total > t.k && before < t.k && before + sum >= t.k) {
    uint32_t acc = before;
    for (uint32_t b = hi; b-- > hi - kPer;) {
      acc += t.hist[b];
      if (acc >= t.k) {
        s_thr = b;
        s_ge = acc;
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (s_ge > t.key_cap) {  // the keys would not fit the segment: select none
      atomicOr(&t.out->error, kErrOverflow);
      s_thr = kHistBins;
      s_ge = 0;
    }
    d_thr[blockIdx.y] = s_thr;
    *t.seg_end = static_cast<int>(t.seg_begin + s_ge);
    t.out->hits = s_ge < t.k ? s_ge : t.k;
    if (t.docs == nullptr) t.out->scored = total;  // or: every matching document was scored
  }
}

__global__ void __launch_bounds__(kThreads)
    TopkSelectKernel(const TopkDesc* descs, const uint32_t* d_thr, uint32_t doc_begin, unsigned long long* keys) {
  const TopkDesc& t = descs[blockIdx.y];
  const uint32_t c = TopkCount(t);
  const uint32_t thr = d_thr[blockIdx.y];
  for (uint32_t i0 = blockIdx.x * kThreads + (threadIdx.x & ~31u); i0 < c; i0 += gridDim.x * kThreads) {
    const uint32_t i = i0 + Lane();
    uint32_t doc = 0;
    float score = 0.0f;
    bool take = false;
    if (i < c && TopkItem(t, i, doc_begin, &doc, &score)) take = (FloatKey(score) >> (32 - kHistBits)) >= thr;
    const uint32_t at = WarpAppend(t.sel_count, take);
    if (take) keys[t.seg_begin + at] = (static_cast<unsigned long long>(FloatKey(score)) << 32) | (0xffffffffu - doc);
  }
}

__global__ void __launch_bounds__(kThreads)
    TopkOutputKernel(const TopkDesc* descs, const unsigned long long* sorted, DevHit* hits) {
  const TopkDesc& t = descs[blockIdx.y];
  const uint32_t n = t.out->hits;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
    const unsigned long long key = sorted[t.seg_begin + i];
    hits[t.out_begin + i] =
        DevHit{0xffffffffu - static_cast<uint32_t>(key), KeyFloat(static_cast<uint32_t>(key >> 32))};
  }
}

}  // namespace search::gpu::engine_internal
