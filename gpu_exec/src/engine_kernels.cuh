// The GPU engine's kernels (gpu_engine.hpp has the algorithm; gpu_engine.cu the dispatch).
// Every kernel serves a whole batch: blockIdx.y is the query (its descriptor), blockIdx.x with a
// grid-stride loop covers that query's work, whose extent is read on the device (candidate
// counts) or known from host metadata (block counts). Loops step whole warps together so warp
// collectives (ballot, shuffles, WarpDecodeDocs) always see all 32 lanes.
//   and:   AndLeadKernel (decode the shortest list: the candidates) then per further list
//          AndLocateKernel (each candidate binary-searches the skip array), AndDecodeKernel (a warp
//          per needed block, or per block when the whole list is decoded), AndProbeKernel
//          (binary search in the candidate's decoded block; survivors appended, unordered);
//          AndScoreKernel sums the survivors' contributions in canonical term order (tf read with
//          FreqAt only for them).
//   or:    OrFillKernel (-0.0f: "no posting yet"), OrAccumulateKernel once per canonical term slot
//          (a list's docIDs are distinct, so plain read-add-write; slots run in order).
//   top-k: TopkHistogramKernel (13-bit score bins), TopkThresholdKernel (the bin holding the k-th),
//          TopkSelectKernel (keys of bins >= it, unordered), then a segmented radix sort of the
//          64-bit keys (score, ~doc): a total order, so unordered compaction cannot change results;
//          TopkOutputKernel writes the first k.
// Thread-safety: kernels touch only their query's scratch.
#pragma once

#include <cub/block/block_scan.cuh>
#include <cstdint>

#include "codec/block_codec.hpp"
#include "core/bm25.hpp"
#include "warp_decode.cuh"

namespace search::gpu::engine_internal {

inline constexpr uint32_t kThreads = 256;  // every kernel: 8 warps per CTA
inline constexpr uint32_t kWarpsPerCta = kThreads / 32;
inline constexpr uint32_t kHistBits = 13;  // score-key bins for the top-k threshold
inline constexpr uint32_t kHistBins = 1u << kHistBits;
inline constexpr uint32_t kNone = 0xffffffffu;
inline constexpr uint32_t kMaxSteps = 32;  // == kGpuMaxTerms
inline constexpr uint32_t kErrCorrupt = 1u;
// A pruned or-query found more candidates than its buffer holds: the host reruns it dense.
inline constexpr uint32_t kErrOverflow = 2u;

// One list of a query on the device.
struct DevList {
  const BlockMeta* meta = nullptr;
  const uint8_t* payload = nullptr;
  uint32_t count = 0;
  uint32_t num_blocks = 0;
  uint32_t base_doc = 0;
  float idf = 0.0f;
};

// What comes back to the host per query (zeroed before the launches).
struct QueryOut {
  uint32_t hits = 0;
  uint32_t error = 0;
  float theta = 0.0f;  // theta phase: the lower bound on the k-th best score (kernel_or.cuh)
  uint32_t pad = 0;
  unsigned long long blocks = 0, postings = 0, bytes = 0, freq_blocks = 0, scored = 0;
};

struct ShardDev {
  const float* norms;
  uint32_t doc_begin;
  uint32_t num_docs;
  float k1;
  float norm_floor;  // <= every norm (0: unknown)
};

// One and-query. Lists are at lists[list_off + slot] in canonical order; step j handles slot
// step_slot[j] (steps: shortest list first).
struct AndDesc {
  uint32_t n = 0;
  uint32_t cap = 0;  // the shortest list's count: a bound on every candidate set
  uint32_t list_off = 0;
  uint32_t dense_mask = 0;  // bit j: step j decodes its whole list (block b in slot b)
  uint8_t step_slot[kMaxSteps] = {};
  uint8_t slot_step[kMaxSteps] = {};
  uint32_t* cand_doc[2] = {};
  uint32_t* cand_orig[2] = {};  // the candidate's position in the shortest list
  uint32_t* cand_block = nullptr;
  uint32_t* posmat = nullptr;   // (n - 1) * cap: position (block * 128 + i) in step j's list
  uint32_t* decoded = nullptr;  // decoded blocks, 128 docIDs per slot
  uint32_t* needed = nullptr;   // per block of the current list: 1 when a candidate needs it (zeroed)
  uint32_t* slot_of = nullptr;  // per block: its slot in `decoded`
  uint32_t* counters = nullptr; // [j]: candidates after step j; [kMaxSteps + j]: slots used (zeroed)
  float* scores = nullptr;      // survivors' scores and docs (cap)
  uint32_t* docs = nullptr;
  QueryOut* out = nullptr;
};

// One or-query: its present lists at lists[list_off + i], i < m, in canonical order.
struct OrDesc {
  uint32_t m = 0;
  uint32_t list_off = 0;
  float* acc = nullptr;  // num_docs
  QueryOut* out = nullptr;
};

// Top-k input of one query: compact (scores[i], docs[i]) for i < *d_count, or dense
// (docs == nullptr: scores[i] is doc_begin + i's). Either way an item scored -0.0f is no document
// (a sum of non-negative contributions from 0.0f is never -0.0f).
struct TopkDesc {
  const float* scores = nullptr;
  const uint32_t* docs = nullptr;
  const uint32_t* d_count = nullptr;  // nullptr: n
  uint32_t n = 0;
  uint32_t k = 0;
  uint32_t seg_begin = 0;  // in the batch's key arrays
  uint32_t out_begin = 0;  // in the batch's hit array
  uint32_t key_cap = 0;  // the query's key segment (an invariant: more items at or above the
                         // threshold bin than it holds set kErrOverflow, and none are selected)
  uint32_t* hist = nullptr;     // kHistBins (zeroed)
  uint32_t* sel_count = nullptr; // (zeroed)
  int* seg_end = nullptr;
  QueryOut* out = nullptr;
};

struct DevHit {  // layout of ScoredDoc
  uint32_t doc;
  float score;
};

__device__ __forceinline__ uint32_t Lane() { return threadIdx.x & 31u; }
__device__ __forceinline__ uint32_t GlobalWarp() { return blockIdx.x * kWarpsPerCta + (threadIdx.x >> 5); }
__device__ __forceinline__ uint32_t WarpStride() { return gridDim.x * kWarpsPerCta; }

// Appends the lanes with pred to *counter; returns each such lane's index. All 32 lanes call.
__device__ __forceinline__ uint32_t WarpAppend(uint32_t* counter, bool pred) {
  const uint32_t mask = __ballot_sync(0xffffffffu, pred);
  uint32_t base = 0;
  if (Lane() == 0 && mask != 0) base = atomicAdd(counter, static_cast<uint32_t>(__popc(mask)));
  base = __shfl_sync(0xffffffffu, base, 0);
  return base + static_cast<uint32_t>(__popc(mask & ((1u << Lane()) - 1u)));
}

__device__ __forceinline__ uint32_t BlockBase(const DevList& l, uint32_t b) {
  return b == 0 ? l.base_doc : l.meta[b - 1].last_doc + 1u;
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

// ---------------------------------------------------------------------------------------- and

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
    uint32_t lo = 0, hi = l.num_blocks;  // first block with last_doc >= doc
    while (lo < hi) {
      const uint32_t mid = (lo + hi) >> 1;
      if (l.meta[mid].last_doc < doc) lo = mid + 1;
      else hi = mid;
    }
    const uint32_t b = lo < l.num_blocks ? lo : kNone;
    q.cand_block[i] = b;
    if (!dense && b != kNone) q.needed[b] = 1u;  // same value from every writer
  }
}

__global__ void __launch_bounds__(kThreads) AndDecodeKernel(const AndDesc* descs, const DevList* lists, ShardDev shard,
                                                            uint32_t j) {
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
          if (blk[mid] < doc) lo = mid + 1;
          else hi = mid;
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

// ----------------------------------------------------------------------------------------- or

__global__ void __launch_bounds__(kThreads) OrFillKernel(const OrDesc* descs, uint32_t num_docs) {
  float* acc = descs[blockIdx.y].acc;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < num_docs; i += gridDim.x * kThreads) acc[i] = -0.0f;
}

// Adds canonical slot s of every query: acc[doc] += contribution (float adds in slot order).
__global__ void __launch_bounds__(kThreads) OrAccumulateKernel(const OrDesc* descs, const DevList* lists,
                                                               ShardDev shard, uint32_t s) {
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

// -------------------------------------------------------------------------------------- top-k

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

__global__ void __launch_bounds__(kThreads) TopkSelectKernel(const TopkDesc* descs, const uint32_t* d_thr,
                                                             uint32_t doc_begin, unsigned long long* keys) {
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
    if (take)
      keys[t.seg_begin + at] = (static_cast<unsigned long long>(FloatKey(score)) << 32) | (0xffffffffu - doc);
  }
}

__global__ void __launch_bounds__(kThreads) TopkOutputKernel(const TopkDesc* descs, const unsigned long long* sorted,
                                                             DevHit* hits) {
  const TopkDesc& t = descs[blockIdx.y];
  const uint32_t n = t.out->hits;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n; i += gridDim.x * kThreads) {
    const unsigned long long key = sorted[t.seg_begin + i];
    hits[t.out_begin + i] = DevHit{0xffffffffu - static_cast<uint32_t>(key), KeyFloat(static_cast<uint32_t>(key >> 32))};
  }
}

}  // namespace search::gpu::engine_internal
