// Device helpers shared by the GPU engine's kernels (kernel_*.cuh): warp indexing and
// appends, checked block decoding, the order-preserving float key and the stats tallies.
// All __forceinline__; every helper that uses warp collectives must be called by all 32 lanes.
// Thread-safety: device functions over the caller's data.
#pragma once

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "codec/block_codec.hpp"
#include "engine_desc.hpp"
#include "warp_decode.cuh"

namespace search::gpu::engine_internal {

__device__ __forceinline__ uint32_t Lane() {
  return threadIdx.x & 31u;
}
__device__ __forceinline__ uint32_t GlobalWarp() {
  return blockIdx.x * kWarpsPerCta + (threadIdx.x >> 5);
}
__device__ __forceinline__ uint32_t WarpStride() {
  return gridDim.x * kWarpsPerCta;
}

// Appends the lanes with pred to *counter; returns each such lane's index. All 32 lanes call.
__device__ __forceinline__ uint32_t WarpAppend(uint32_t* counter, bool pred) {
  const uint32_t mask = __ballot_sync(0xffffffffu, pred);
  uint32_t base = 0;
  if (Lane() == 0 && mask != 0) base = atomicAdd(counter, static_cast<uint32_t>(__popc(mask)));
  base = __shfl_sync(0xffffffffu, base, 0);
  return base + static_cast<uint32_t>(__popc(mask & ((1u << Lane()) - 1u)));
}

using BinScan = cub::BlockScan<uint32_t, kThreads>;

// One CTA: the highest bin B of hist[0, kBins) with count(bins >= B) >= need, or kNone when the
// bins hold fewer (or need is 0); every thread gets it, and with `above` also the count of the bins
// above B. `s` is two shared words. Ends with a barrier, so `tmp` and `s` may be reused at once.
template <uint32_t kBins = kHistBins>
__device__ __forceinline__ uint32_t BinOfRank(const uint32_t* hist, uint32_t need, BinScan::TempStorage& tmp,
                                              uint32_t* s, uint32_t* above = nullptr) {
  constexpr uint32_t kPer = kBins / kThreads;
  static_assert(kPer * kThreads == kBins);
  const uint32_t hi = kBins - kPer * threadIdx.x;  // this thread's bins: [hi - kPer, hi), top first
  uint32_t sum = 0;
  for (uint32_t b = hi - kPer; b < hi; ++b) sum += hist[b];
  uint32_t before = 0, total = 0;
  BinScan(tmp).ExclusiveSum(sum, before, total);
  if (threadIdx.x == 0) {
    s[0] = kNone;
    s[1] = 0;
  }
  __syncthreads();
  if (need > 0 && before < need && before + sum >= need) {  // exactly one thread
    uint32_t acc = before;
    for (uint32_t b = hi; b-- > hi - kPer;) {
      if (acc + hist[b] >= need) {
        s[0] = b;
        s[1] = acc;
        break;
      }
      acc += hist[b];
    }
  }
  __syncthreads();
  if (above != nullptr) *above = s[1];
  return s[0];
}

__device__ __forceinline__ uint32_t BlockBase(const DevList& l, uint32_t b) {
  return b == 0 ? l.base_doc : l.meta[b - 1].last_doc + 1u;
}

// The first block x in [lo, hi) of l with last_doc >= doc (hi when none): a skip-array search.
__device__ __forceinline__ uint32_t FirstBlockReaching(const DevList& l, uint32_t lo, uint32_t hi, uint32_t doc) {
  while (lo < hi) {
    const uint32_t mid = (lo + hi) >> 1;
    if (l.meta[mid].last_doc < doc)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// FirstBlockReaching(l, lo, l.num_blocks, doc) for a doc near block lo: steps of 1, 2, 4, ...
// blocks from lo bracket the answer, which a search of that bracket then finds (about 2 log2 of the
// distance in loads, not log2 of the list's blocks).
__device__ __forceinline__ uint32_t GallopFrom(const DevList& l, uint32_t lo, uint32_t doc) {
  const uint32_t nb = l.num_blocks;
  uint32_t hi = nb;  // the answer is in [lo, hi]; block hi (< nb) reaches doc
  for (uint32_t step = 1; lo < nb; step <<= 1) {
    const uint32_t p = lo - 1 + step;
    if (p >= nb) break;
    if (l.meta[p].last_doc >= doc) {
      hi = p;
      break;
    }
    lo = p + 1;
  }
  return FirstBlockReaching(l, lo, hi, doc);  // hi when no block before it reaches doc
}

// FirstBlockReaching(l, 0, l.num_blocks, doc) over the whole list, with fewer dependent loads: from
// the block where doc would lie if the list's documents were spread evenly over its range, steps of
// 1, 2, 4, ... blocks towards doc bracket the answer, which a search of that bracket then finds. A
// posting's position strays from the even spread by about the square root of the list's length: on
// lists drawn at random over 25.2M documents, 3.5 / 7.1 / 11.1 loads a search for 1,000 / 8,000 /
// 40,000 blocks against binary search's 10.0 / 13.0 / 15.4 (a host model of this code), the first
// loads near one another. The same answer for any list, evenly spread or not. The or probing and
// WindowBound use it; the and locate keeps the binary search (BENCHMARKS.md: mixed on 5-6 terms).
__device__ __forceinline__ uint32_t LocateBlock(const DevList& l, uint32_t doc) {
  const uint32_t nb = l.num_blocks;
  if (nb == 0 || doc <= l.base_doc) return 0;  // block 0 ends at or past base_doc
  const uint32_t last = l.meta[nb - 1].last_doc;
  if (doc > last) return nb;
  // doc in (base_doc, last]: the guess g < nb.
  const uint32_t g = static_cast<uint32_t>(uint64_t{doc - l.base_doc} * nb / (uint64_t{last - l.base_doc} + 1u));
  if (l.meta[g].last_doc < doc) return GallopFrom(l, g + 1, doc);
  // The answer is in [lo, hi], and block hi reaches doc; a step past hi leaves lo at 0.
  uint32_t lo = 0, hi = g;
  for (uint32_t step = 1; step <= hi; step <<= 1) {
    const uint32_t p = hi - step;
    if (l.meta[p].last_doc < doc) {
      lo = p + 1;
      break;
    }
    hi = p;
  }
  return FirstBlockReaching(l, lo, hi, doc);  // hi when no block before it reaches doc
}

// Decodes block b of l into docs; false (all lanes) when corrupt or below the shard.
__device__ __forceinline__ bool DecodeChecked(const DevList& l, uint32_t b, const BlockMeta& m, uint32_t doc_begin,
                                              uint32_t (&docs)[kWarpValues]) {
  const bool ok = WarpDecodeDocs(l.payload, m, BlockBase(l, b), docs);
  const bool low_ok = __shfl_sync(0xffffffffu, docs[0], 0) >= doc_begin;
  return ok && low_ok;
}

// A block about to be scored whole: counts it (both payloads) in the caller's tallies, decodes its
// docIDs into docs and its tfs into tfs; false (all lanes) when it is corrupt or below the shard
// (counted all the same: its bytes were read), tfs then undecoded.
__device__ __forceinline__ bool DecodeScoredBlock(const DevList& l, uint32_t b, const BlockMeta& m, uint32_t doc_begin,
                                                  uint32_t (&docs)[kWarpValues], uint32_t (&tfs)[kWarpValues],
                                                  uint64_t& blocks, uint64_t& postings, uint64_t& bytes) {
  ++blocks;
  postings += m.count;
  bytes += PackedBytes(m.count, m.doc_bits) + PackedBytes(m.count, m.freq_bits);
  if (!DecodeChecked(l, b, m, doc_begin, docs)) return false;
  WarpDecodeFreqs(l.payload, m, tfs);
  return true;
}

// Order-preserving float -> uint32 (larger float, larger key).
__device__ __forceinline__ uint32_t FloatKey(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float KeyFloat(uint32_t k) {
  const uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  return __uint_as_float(u);
}

__device__ __forceinline__ void AddStats(QueryOut* out, uint64_t blocks, uint64_t postings, uint64_t bytes,
                                         uint64_t freq_blocks) {
  if (Lane() != 0) return;
  if (blocks) atomicAdd(&out->blocks, static_cast<unsigned long long>(blocks));
  if (postings) atomicAdd(&out->postings, static_cast<unsigned long long>(postings));
  if (bytes) atomicAdd(&out->bytes, static_cast<unsigned long long>(bytes));
  if (freq_blocks) atomicAdd(&out->freq_blocks, static_cast<unsigned long long>(freq_blocks));
}

}  // namespace search::gpu::engine_internal
