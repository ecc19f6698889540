// The GPU engine's and-kernels (gpu_engine.hpp has the algorithm; dispatch_and.cu launches
// them). Every kernel serves a whole batch: blockIdx.y is the query (its AndDesc), blockIdx.x
// with a grid-stride loop covers that query's work, whose extent is read on the device (candidate
// counts) or known from host metadata (block counts). Loops step whole warps together so warp
// collectives (ballot, shuffles, WarpDecodeDocs) always see all 32 lanes.
//   AndLeadKernel decodes the shortest list (the candidates; a bounded query's also their exact
//   contributions, binned); then per further list AndLocateKernel (each candidate binary-searches
//   the skip array; a bounded query drops it there when its bound cannot reach theta),
//   AndDecodeKernel (a warp per needed block, or per block when the list is decoded whole),
//   AndProbeKernel (binary search in the candidate's decoded block; survivors appended,
//   unordered); AndScoreKernel sums the survivors' contributions in canonical term order (tf read
//   with FreqAt only for them).
//   Bounded queries (AndDesc): AndSampleBinKernel picks the lead bins of the sample,
//   AndFilterKernel takes a desc's candidates from the lead (the sample's: its bins; the main
//   desc's: a contribution that with the rest can reach theta), the steps and the score run for the
//   sample, AndThetaKernel takes the k-th best of its scores, and the main desc's filter and steps
//   follow.
// Thread-safety: kernels touch only their query's scratch.
#pragma once

#include <cstdint>

#include "engine_device.cuh"

namespace search::gpu::engine_internal {

// Step j decodes list l whole: its candidates (c) still outnumber its blocks kDenseFactor times.
__device__ __forceinline__ bool StepDense(const AndDesc& q, const DevList& l, uint32_t j, uint32_t c) {
  return ((q.dense_mask >> j) & 1u) != 0 && uint64_t{c} >= kDenseFactor * l.num_blocks;
}

// The candidates after step j (a sample desc's counter may run past its buffer).
__device__ __forceinline__ uint32_t AndCount(const AndDesc& q, uint32_t j) {
  return min(q.counters[j], q.cap);
}

// A lead contribution's bin in [0, kLeadBins): linear over [0, the list's max_score].
__device__ __forceinline__ uint32_t LeadBin(float v, float scale) {
  const float x = v * scale;
  if (!(x < static_cast<float>(kLeadBins - 1))) return kLeadBins - 1;  // also NaN
  return x > 0.0f ? static_cast<uint32_t>(x) : 0u;
}

__global__ void __launch_bounds__(kThreads) AndLeadKernel(const AndDesc* descs, const DevList* lists, ShardDev shard) {
  __shared__ uint32_t hist[kLeadBins];
  const AndDesc& q = descs[blockIdx.y];
  const DevList l = lists[q.list_off + q.step_slot[0]];
  const bool bounded = q.lead_doc != nullptr;  // uniform in the CTA
  if (bounded) {
    for (uint32_t i = threadIdx.x; i < kLeadBins; i += kThreads) hist[i] = 0;
    __syncthreads();
  } else if (blockIdx.x == 0 && threadIdx.x == 0) {
    q.counters[0] = l.count;
  }
  uint64_t blocks = 0, postings = 0, bytes = 0, freq_blocks = 0;
  for (uint32_t b = GlobalWarp(); b < l.num_blocks; b += WarpStride()) {
    const BlockMeta m = l.meta[b];
    uint32_t docs[kWarpValues];
    if (!DecodeChecked(l, b, m, shard.doc_begin, docs)) {
      if (Lane() == 0) atomicOr(&q.out->error, kErrCorrupt);
      for (uint32_t r = 0; r < kWarpValues; ++r) docs[r] = shard.doc_begin;  // harmless values
    }
    ++blocks;
    postings += m.count;
    bytes += PackedBytes(m.count, m.doc_bits);
    if (!bounded) {
      for (uint32_t r = 0; r < kWarpValues; ++r) {
        const uint32_t i = Lane() * kWarpValues + r;
        if (i < m.count) {
          q.cand_doc[0][b * kBlockSize + i] = docs[r];
          q.cand_orig[0][b * kBlockSize + i] = b * kBlockSize + i;
        }
      }
      continue;
    }
    uint32_t tfs[kWarpValues];
    WarpDecodeFreqs(l.payload, m, tfs);
    ++freq_blocks;
    bytes += PackedBytes(m.count, m.freq_bits);
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      if (i >= m.count) continue;
      const uint32_t rel = docs[r] - shard.doc_begin;
      // Past the shard (a corrupt list; AndScoreKernel reports it): a bound that never prunes.
      const float c = rel < shard.num_docs ? Bm25TermScore(l.idf, tfs[r], shard.norms[rel], shard.k1) : INFINITY;
      q.lead_doc[b * kBlockSize + i] = docs[r];
      q.lead_score[b * kBlockSize + i] = c;
      atomicAdd(&hist[LeadBin(c, q.lead_scale)], 1u);
    }
  }
  AddStats(q.out, blocks, postings, bytes, freq_blocks);
  if (!bounded) return;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < kLeadBins; i += kThreads)
    if (hist[i] != 0) atomicAdd(&q.lead_hist[i], hist[i]);
}

// One CTA per query: the lowest lead bin the sample takes (at least sample_want postings above it).
__global__ void __launch_bounds__(kThreads) AndSampleBinKernel(const AndDesc* descs) {
  __shared__ BinScan::TempStorage scan_tmp;
  __shared__ uint32_t s_bin[2];
  const AndDesc& q = descs[blockIdx.y];
  if (q.lead_doc == nullptr) return;
  const uint32_t bin = BinOfRank<kLeadBins>(q.lead_hist, q.sample_want, scan_tmp, s_bin);
  if (threadIdx.x == 0) *q.sample_bin = bin == kNone ? 0u : bin;
}

// A bounded query's candidates from its lead: the sample desc's are the postings of its bins
// (the first `cap`: any real matches bound theta from below); the main desc's those whose exact
// contribution plus the later lists' max_scores can reach theta (each one's bound starts there).
__global__ void __launch_bounds__(kThreads) AndFilterKernel(const AndDesc* descs) {
  const AndDesc& q = descs[blockIdx.y];
  if (q.lead_doc == nullptr || q.n == 0) return;
  const uint32_t floor_bin = q.sample ? *q.sample_bin : 0u;
  const float theta = q.sample ? 0.0f : *q.theta;
  const uint32_t stride = gridDim.x * kThreads;
  for (uint32_t i0 = blockIdx.x * kThreads + (threadIdx.x & ~31u); i0 < q.lead_count; i0 += stride) {
    const uint32_t i = i0 + Lane();
    bool keep = false;
    float c = 0.0f;
    if (i < q.lead_count) {
      c = q.lead_score[i];
      keep = q.sample ? LeadBin(c, q.lead_scale) >= floor_bin : !((c + q.rest[0]) * q.slack < theta);
    }
    const uint32_t at = WarpAppend(&q.counters[0], keep);
    if (keep && at < q.cap) {
      q.cand_doc[0][at] = q.lead_doc[i];
      q.cand_orig[0][at] = i;
      if (!q.sample) q.bound[i] = c;
    }
  }
}

__global__ void __launch_bounds__(kThreads) AndLocateKernel(const AndDesc* descs, const DevList* lists, uint32_t j) {
  const AndDesc& q = descs[blockIdx.y];
  if (q.n <= j) return;
  const DevList l = lists[q.list_off + q.step_slot[j]];
  const uint32_t c = AndCount(q, j - 1);
  const uint32_t* cand = q.cand_doc[(j - 1) & 1];
  const bool dense = StepDense(q, l, j, c);
  const float theta = q.theta != nullptr ? *q.theta : 0.0f;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < c; i += gridDim.x * kThreads) {
    const uint32_t doc = cand[i];
    const uint32_t lo = FirstBlockReaching(l, 0, l.num_blocks, doc);
    uint32_t b = lo < l.num_blocks ? lo : kNone;
    if (theta > 0.0f && b != kNone) {  // the document, if l holds it, is in block b
      const uint32_t orig = q.cand_orig[(j - 1) & 1][i];
      const float u = q.bound[orig] + SanitizeBoundHD(l.meta[b].max_score);
      if ((u + q.rest[j]) * q.slack < theta)
        b = kNone;
      else
        q.bound[orig] = u;
    }
    q.cand_block[i] = b;
    if (!dense && b != kNone) q.needed[b] = 1u;  // same value from every writer
  }
}

__global__ void __launch_bounds__(kThreads)
    AndDecodeKernel(const AndDesc* descs, const DevList* lists, ShardDev shard, uint32_t j) {
  const AndDesc& q = descs[blockIdx.y];
  if (q.n <= j) return;
  const DevList l = lists[q.list_off + q.step_slot[j]];
  const bool dense = StepDense(q, l, j, AndCount(q, j - 1));
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
  const uint32_t c = AndCount(q, j - 1);
  const uint32_t src = (j - 1) & 1u, dst = j & 1u;
  const bool dense = StepDense(q, l, j, c);
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
      q.posmat[static_cast<size_t>(j - 1) * q.pos_stride + orig] = pos;
    }
  }
}

__global__ void __launch_bounds__(kThreads) AndScoreKernel(const AndDesc* descs, const DevList* lists, ShardDev shard) {
  const AndDesc& q = descs[blockIdx.y];
  if (q.n == 0) return;
  const uint32_t last = q.n - 1;
  const uint32_t c = AndCount(q, last);
  const uint32_t src = last & 1u;
  // Both the sample's and the answer's scoring count (out is zeroed; the sample runs first).
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&q.out->scored, static_cast<unsigned long long>(c));
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
        const uint32_t pos = step == 0 ? orig : q.posmat[static_cast<size_t>(step - 1) * q.pos_stride + orig];
        const uint32_t tf = FreqAt(l.payload, l.meta[pos / kBlockSize], pos % kBlockSize);
        score += Bm25TermScore(l.idf, tf, norm, shard.k1);
      }
    }
    q.scores[i] = score;
    q.docs[i] = doc;
  }
}

// One CTA per query: theta of a bounded query, the floor of the k-th best of its sample's scores
// (real documents: a lower bound on its k-th best) to 26 bits of the float key, written to the
// main desc; 0 (no pruning) when the sample matched fewer than k documents.
__global__ void __launch_bounds__(kThreads) AndThetaKernel(const AndDesc* samples, const AndDesc* mains) {
  __shared__ uint32_t hist[kHistBins];
  __shared__ BinScan::TempStorage scan_tmp;
  __shared__ uint32_t s_bin[2];
  const AndDesc& a = samples[blockIdx.y];
  if (a.n == 0) return;
  const uint32_t c = AndCount(a, a.n - 1);
  if (c < a.k || a.k == 0) return;
  uint32_t prefix = 0, want = a.k;
  for (int level = 0; level < 2; ++level) {  // bits 31..19, then 18..6 of the key
    const uint32_t shift = level == 0 ? 32 - kHistBits : 32 - 2 * kHistBits;
    for (uint32_t i = threadIdx.x; i < kHistBins; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < c; i += kThreads) {
      const uint32_t key = FloatKey(a.scores[i]);
      if (level == 1 && (key >> (32 - kHistBits)) != prefix >> (32 - kHistBits)) continue;
      atomicAdd(&hist[(key >> shift) & (kHistBins - 1)], 1u);
    }
    __syncthreads();
    uint32_t above = 0;
    const uint32_t bin = BinOfRank(hist, want, scan_tmp, s_bin, &above);
    if (bin == kNone) return;  // cannot happen: the sample holds >= k scores
    prefix |= bin << shift;
    want -= above;
    __syncthreads();
  }
  const float theta = KeyFloat(prefix);
  if (threadIdx.x == 0 && theta > 0.0f && theta < INFINITY) *mains[blockIdx.y].theta = theta;
}

}  // namespace search::gpu::engine_internal
