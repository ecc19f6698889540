// The GPU engine's pruned (exact) or: the GPU analogue of MaxScore with block-max bounds
// (gpu_engine.hpp has the algorithm, engine_plan.hpp the planning, dispatch_or.cu the launches).
// Kernels serve a whole batch: the theta and score kernels like kernel_and.cuh's (blockIdx.y =
// query), the gather, locate, decode and probe kernels spread the batch's items evenly over one
// grid (Spread, below; the sample's round takes blockIdx.z = the list's canonical slot).
//   theta:  ThetaBlockHistKernel / ThetaBlockSelectKernel pick the blocks of the highest block
//           maxima of one list per query (the list with the highest max_score among those with
//           >= k postings): max(k, sample) of them (k for a single list); ThetaHistKernel scores
//           every posting of those blocks into a fine histogram of its contributions;
//           ThetaSelectKernel takes the lower edge of the bin holding the k-th best: a lower bound
//           on that list's k-th best contribution, hence on the query's k-th best final score (a
//           document's float sum of non-negative contributions is >= each of them), and the bin
//           holding the sample-th best. SampleGatherKernel collects the documents of those best
//           bins (at most the sample buffer), the Or{Locate,Decode,Probe,Score} kernels score them
//           exactly over every list, and SampleThetaKernel raises theta to the lower edge of the
//           bin holding their k-th best exact score: any k real documents' scores bound the k-th
//           best score from below.
//   top blocks: a query of one list takes its k best documents in one round from the blocks of
//           its k highest block maxima (TopBlocksGatherKernel), without a theta round.
//   pruned: OrGatherKernel decodes the essential
//           lists' blocks, skipping blocks whose block max plus every other list's max_score
//           cannot reach theta (but the essential lists of fewer postings, OrPList::omit: a
//           document they hold is gathered from them), keeps a document when its own
//           contribution plus that bound can
//           (a bounded query, any with theta:
//           the other lists' bound is the highest block max of their blocks over the block's
//           documents, then per document the block max of their block that can hold it:
//           WindowBound, DocBound),
//           and appends each kept document once with its position in that list and that
//           contribution as its partial score (a bitmap over the shard dedupes; past the buffer:
//           kErrOverflow, and OrDropOverflowKernel empties the buffer for the later steps); then
//           per other list OrLocateKernel (LocateBlock per candidate: a guess from the list's even
//           spread, then galloping; the first candidate to need a block appends it to the list's
//           need_list),
//           OrDecodeKernel (only the needed blocks, or the whole list when most blocks are),
//           OrProbeKernel (binary search in the decoded block: the posting's position or kNone);
//           OrScoreKernel sums the contributions in canonical order.
//           Progressive probing (step != kNone; with theta): the lists are probed one per step,
//           by decreasing max_score (OrPDesc::order), as MaxScore probes its non-essential lists.
//           After each step a candidate's partial score (the contributions found so far) plus
//           the max_score of the lists still to probe (OrPList::after) must reach theta, else it
//           is dropped (src = kDeadSrc): later steps neither locate, decode nor probe for it, and
//           OrScoreKernel gives it the no-document score (-0.0f), which top-k skips. A dropped
//           document's score is below theta <= the k-th best, so it is not in the top k.
//           OrLocateKernel drops one earlier, with the block max of its block in the step's list
//           in place of the contribution (OrPDesc::probe_bound; block-max MaxScore): that block is
//           then not decoded for it. The bound is >= the probe's in float too (rounding is
//           monotonic), so every candidate it drops the probe would have dropped.
//           The sample's round probes every list in one step (step == kNone, blockIdx.z = slot).
//           RequiredOr queries: a must_not list (OrPList::exclude) is probed like the others, but
//           a candidate found there is dropped, and it adds nothing (its bounds are 0); a candidate
//           that the must list (OrPList::require, probed first) does not hold is dropped.
// Thread-safety: kernels touch only their query's scratch.
#pragma once

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "engine_device.cuh"

namespace search::gpu::engine_internal {

// Theta histogram: contributions in [2^-8, 2^8) binned by 4 exponent and 9 mantissa bits (a bin is
// 1/512 of an octave wide); smaller values fall in bin 0 (floor 0), larger ones in the top bin.
inline constexpr uint32_t kThetaExpLow = 127u - 8u;
inline constexpr uint32_t kThetaShift = 14u;  // 23 mantissa bits - 9 kept

__device__ __forceinline__ uint32_t ThetaBin(float c) {
  if (!(c > 0.0f)) return 0;  // also NaN
  const uint32_t v = __float_as_uint(c) >> kThetaShift;
  constexpr uint32_t lo = kThetaExpLow << (23u - kThetaShift);
  if (v < lo) return 0;
  return v - lo < kHistBins ? v - lo : kHistBins - 1;
}
// A value <= every contribution binned at b.
__device__ __forceinline__ float ThetaBinFloor(uint32_t b) {
  if (b == 0) return 0.0f;
  return __uint_as_float((b + (kThetaExpLow << (23u - kThetaShift))) << kThetaShift);
}

// The list a probe kernel serves: step kNone probes every list at once (blockIdx.z = slot), else
// the step's list (gridDim.z = 1). kNone when there is none (the query has fewer lists).
__device__ __forceinline__ uint32_t ProbeSlot(const OrPDesc& q, uint32_t step) {
  if (step == kNone) return blockIdx.z < q.m ? blockIdx.z : kNone;
  return step < q.m ? q.order[step] : kNone;
}

// ------------------------------------------------------------------------------------ spread
// The pruned kernels' work per query varies a thousandfold within a batch (a query's candidates,
// its needed blocks, its essential lists' blocks). A grid of a fixed share per query (blockIdx.y)
// waits for its heaviest query's threads; these kernels instead spread the batch's items evenly
// over one grid: each CTA prefix-sums the per-query item counts (at most kMaxSpreadQueries queries:
// one per thread) and item g of the launch is item g - prefix[a] of query a.

struct Spread {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  typename Scan::TempStorage scan;
  uint32_t prefix[kMaxSpreadQueries + 1];
};

// Every thread of the CTA calls; count(a) is query a's items (a < nq <= kMaxSpreadQueries).
// Returns the launch's total; ends with a barrier.
template <class Count>
__device__ __forceinline__ uint32_t BuildSpread(Spread& sp, uint32_t nq, Count count) {
  const uint32_t c = threadIdx.x < nq ? count(threadIdx.x) : 0u;
  uint32_t before = 0, total = 0;
  Spread::Scan(sp.scan).ExclusiveSum(c, before, total);
  sp.prefix[threadIdx.x] = before;
  if (threadIdx.x == 0) sp.prefix[kMaxSpreadQueries] = total;
  __syncthreads();
  return total;
}

// The query of item g < total: the last a < nq with prefix[a] <= g (queries of no items before
// it share its prefix; those after it start past g).
__device__ __forceinline__ uint32_t SpreadQuery(const Spread& sp, uint32_t nq, uint32_t g) {
  uint32_t lo = 0, hi = nq - 1;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) >> 1;
    if (sp.prefix[mid] <= g)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// A warp's stats, flushed to its query's out when the warp moves to another query and at the end.
struct WarpStats {
  QueryOut* out = nullptr;
  uint64_t blocks = 0, postings = 0, bytes = 0, freq_blocks = 0;
  __device__ __forceinline__ void To(QueryOut* o) {
    if (o == out) return;
    Flush();
    out = o;
  }
  __device__ __forceinline__ void Flush() {
    if (out != nullptr) AddStats(out, blocks, postings, bytes, freq_blocks);
    blocks = postings = bytes = freq_blocks = 0;
  }
};

// ------------------------------------------------------------------------------------- theta

// The theta list's blocks by block max: the round reads only the `blocks` blocks of the highest
// maxima (more on ties within a bin). Every posting whose contribution reaches a bin lies in a
// block whose maximum does, so the best contributions are all read.
__device__ __forceinline__ uint32_t BlockMaxBin(const BlockMeta& m) {
  return ThetaBin(SanitizeBoundHD(m.max_score));
}

__global__ void __launch_bounds__(kThreads) ThetaBlockHistKernel(const ThetaDesc* descs) {
  __shared__ uint32_t hist[kHistBins];
  const ThetaDesc& q = descs[blockIdx.y];
  const DevList l = q.list;
  for (uint32_t i = threadIdx.x; i < kHistBins; i += kThreads) hist[i] = 0;
  __syncthreads();
  uint32_t any = 0;
  for (uint32_t b = blockIdx.x * kThreads + threadIdx.x; b < l.num_blocks; b += gridDim.x * kThreads) {
    atomicAdd(&hist[BlockMaxBin(l.meta[b])], 1u);
    any = 1;
  }
  if (__syncthreads_or(any) == 0) return;
  for (uint32_t i = threadIdx.x; i < kHistBins; i += kThreads)
    if (hist[i] != 0) atomicAdd(&q.block_hist[i], hist[i]);
}

__global__ void __launch_bounds__(kThreads) ThetaHistKernel(const ThetaDesc* descs, ShardDev shard) {
  __shared__ uint32_t hist[kHistBins];
  const ThetaDesc& q = descs[blockIdx.y];
  const DevList l = q.list;
  for (uint32_t i = threadIdx.x; i < kHistBins; i += kThreads) hist[i] = 0;
  __syncthreads();
  const uint32_t lowest = *q.block_bin;
  uint64_t blocks = 0, postings = 0, bytes = 0;
  for (uint32_t b = GlobalWarp(); b < l.num_blocks; b += WarpStride()) {
    const BlockMeta m = l.meta[b];
    if (BlockMaxBin(m) < lowest) continue;
    uint32_t docs[kWarpValues], tfs[kWarpValues];
    if (!DecodeScoredBlock(l, b, m, shard.doc_begin, docs, tfs, blocks, postings, bytes)) {
      if (Lane() == 0) atomicOr(&q.out->error, kErrCorrupt);
      continue;
    }
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      if (i >= m.count) continue;
      const uint32_t off = docs[r] - shard.doc_begin;
      if (off >= shard.num_docs) continue;  // only in a corrupt block that decoded
      atomicAdd(&hist[ThetaBin(Bm25TermScore(l.idf, tfs[r], shard.norms[off], shard.k1))], 1u);
    }
  }
  AddStats(q.out, blocks, postings, bytes, blocks);
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < kHistBins; i += kThreads)
    if (hist[i] != 0) atomicAdd(&q.hist[i], hist[i]);
}

// One CTA per query: *block_bin = the bin holding the blocks-th highest block max (0, every
// block, when the list has fewer blocks).
__global__ void __launch_bounds__(kThreads) ThetaBlockSelectKernel(const ThetaDesc* descs) {
  __shared__ BinScan::TempStorage scan_tmp;
  __shared__ uint32_t s_bin[2];
  const ThetaDesc& q = descs[blockIdx.y];
  const uint32_t b = BinOfRank(q.block_hist, q.blocks, scan_tmp, s_bin);
  if (threadIdx.x == 0) *q.block_bin = b == kNone ? 0u : b;
}

// One CTA per query: out->theta = the floor of the bin holding the k-th best contribution (0 when
// the list turned out to hold fewer than k scorable postings); *sample_bin = the bin holding the
// sample-th best (0, every bin, when there are fewer).
__global__ void __launch_bounds__(kThreads) ThetaSelectKernel(const ThetaDesc* descs) {
  __shared__ BinScan::TempStorage scan_tmp;
  __shared__ uint32_t s_bin[2];
  const ThetaDesc& q = descs[blockIdx.y];
  const uint32_t b = BinOfRank(q.hist, q.k, scan_tmp, s_bin);
  if (threadIdx.x == 0) q.out->theta = b == kNone || q.contrib_bound == 0 ? 0.0f : ThetaBinFloor(b);
  const uint32_t sb = BinOfRank(q.hist, q.sample, scan_tmp, s_bin);
  if (threadIdx.x == 0) *q.sample_bin = sb == kNone ? 0u : sb;
}

// The candidates a kernel may read: the device count, never past the buffer.
__device__ __forceinline__ uint32_t CandCount(const OrPDesc& q) {
  return min(q.counters[0], q.cap);
}

// The candidate counter (warp-uniform: lane 0 reads, all lanes get it).
__device__ __forceinline__ uint32_t CandCounter(const OrPDesc& q) {
  uint32_t c = 0;
  if (Lane() == 0) c = *static_cast<volatile uint32_t*>(q.counters);
  return __shfl_sync(0xffffffffu, c, 0);
}

// Whether the candidate buffer is already full: the sample may stop there (any subset will do).
__device__ __forceinline__ bool CandFull(const OrPDesc& q) {
  return CandCounter(q) >= q.cap;
}

// Whether the candidates already overflowed: some append went past the buffer and set kErrOverflow.
// A buffer exactly full has not: a block skipped then may hold a candidate that is never appended,
// so nothing sets kErrOverflow and the incomplete answer stands. Whether that happens depends on
// when the warps look (one warp filling the buffer before the others start, as under racecheck).
__device__ __forceinline__ bool CandOverflowed(const OrPDesc& q) {
  return CandCounter(q) > q.cap;
}

// The sample: documents of the theta list whose contribution falls in the sampled bins, appended
// up to the buffer (which documents of the lowest bin make it does not matter: any real documents'
// exact scores bound the k-th best from below).
__global__ void __launch_bounds__(kThreads)
    SampleGatherKernel(const ThetaDesc* tdescs, const OrPDesc* sdescs, ShardDev shard) {
  const ThetaDesc& t = tdescs[blockIdx.y];
  const OrPDesc& q = sdescs[blockIdx.y];
  const DevList l = t.list;
  const uint32_t lowest = *t.sample_bin, lowest_block = *t.block_bin;
  uint64_t blocks = 0, postings = 0, bytes = 0;
  for (uint32_t b = GlobalWarp(); b < l.num_blocks; b += WarpStride()) {
    if (CandFull(q)) break;
    const BlockMeta m = l.meta[b];
    if (BlockMaxBin(m) < lowest_block) continue;
    uint32_t docs[kWarpValues], tfs[kWarpValues];
    // A corrupt block: ThetaHistKernel reported it.
    if (!DecodeScoredBlock(l, b, m, shard.doc_begin, docs, tfs, blocks, postings, bytes)) continue;
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      bool take = false;
      if (i < m.count) {
        const uint32_t off = docs[r] - shard.doc_begin;
        take = off < shard.num_docs &&
               ThetaBin(Bm25TermScore(l.idf, tfs[r], shard.norms[off], shard.k1)) >= lowest;
      }
      const uint32_t at = WarpAppend(&q.counters[0], take);
      if (take && at < q.cap) {
        q.cand[at] = docs[r];
        q.src[at] = static_cast<uint8_t>(t.slot);
        q.pos[static_cast<size_t>(t.slot) * q.cap + at] = b * kBlockSize + i;
      }
    }
  }
  AddStats(q.out, blocks, postings, bytes, blocks);
}

// One CTA per query, after OrScoreKernel scored the sample: theta = max(theta, the floor of the
// bin holding the sample's k-th best exact score) when the sample holds k documents.
__global__ void __launch_bounds__(kThreads) SampleThetaKernel(const ThetaDesc* tdescs, const OrPDesc* sdescs) {
  __shared__ uint32_t hist[kHistBins];
  __shared__ BinScan::TempStorage scan_tmp;
  __shared__ uint32_t s_bin[2];
  const ThetaDesc& t = tdescs[blockIdx.y];
  const OrPDesc& q = sdescs[blockIdx.y];
  for (uint32_t i = threadIdx.x; i < kHistBins; i += kThreads) hist[i] = 0;
  __syncthreads();
  const uint32_t c = CandCount(q);
  for (uint32_t i = threadIdx.x; i < c; i += kThreads) atomicAdd(&hist[ThetaBin(q.scores[i])], 1u);
  __syncthreads();
  const uint32_t b = BinOfRank(hist, t.k, scan_tmp, s_bin);
  if (threadIdx.x == 0 && b != kNone) t.out->theta = fmaxf(t.out->theta, ThetaBinFloor(b));
}

// ------------------------------------------------------------------------------- top blocks

// A one-list top-k in one round (PhaseKind::kTopBlocks), after ThetaBlockHistKernel and
// ThetaBlockSelectKernel with blocks = k: every posting of the blocks whose maximum lies in the
// lowest bin read or above, whose contribution (its final score: one list) reaches that bin's floor
// F, is a candidate (out->theta = F). The blocks not read have maxima below F, so when the k-th
// best candidate scores at least F * ScoreSlack(1) no posting outside them can enter the top k
// (the host checks that, engine_plan.hpp's TopBlocksExact, and otherwise reruns the query on the
// theta path). k blocks of maxima >= F each hold such a posting when the maxima are attained.
__global__ void __launch_bounds__(kThreads)
    TopBlocksGatherKernel(const ThetaDesc* tdescs, const TopBlocksDesc* gdescs, ShardDev shard) {
  const ThetaDesc& t = tdescs[blockIdx.y];
  const TopBlocksDesc& g = gdescs[blockIdx.y];
  const DevList l = t.list;
  const uint32_t lowest = *t.block_bin;
  const float floor = ThetaBinFloor(lowest);
  if (blockIdx.x == 0 && threadIdx.x == 0) t.out->theta = floor;
  uint64_t blocks = 0, postings = 0, bytes = 0;
  bool overflow = false;
  for (uint32_t b = GlobalWarp(); b < l.num_blocks; b += WarpStride()) {
    const BlockMeta m = l.meta[b];
    if (BlockMaxBin(m) < lowest) continue;
    uint32_t docs[kWarpValues], tfs[kWarpValues];
    if (!DecodeScoredBlock(l, b, m, shard.doc_begin, docs, tfs, blocks, postings, bytes)) {
      if (Lane() == 0) atomicOr(&t.out->error, kErrCorrupt);
      continue;
    }
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      bool take = false;
      float score = 0.0f;
      if (i < m.count) {
        const uint32_t off = docs[r] - shard.doc_begin;
        if (off < shard.num_docs) {  // only a corrupt block that decoded holds others
          score = Bm25TermScore(l.idf, tfs[r], shard.norms[off], shard.k1);
          take = score >= floor;
        }
      }
      const uint32_t at = WarpAppend(g.count, take);
      if (take && at < g.cap) {
        g.docs[at] = docs[r];
        g.scores[at] = score;
      }
      overflow |= take && at >= g.cap;
    }
  }
  if (overflow) atomicOr(&t.out->error, kErrOverflow);
  AddStats(t.out, blocks, postings, bytes, blocks);
  if (Lane() == 0 && postings != 0) atomicAdd(&t.out->scored, static_cast<unsigned long long>(postings));
}

// ------------------------------------------------------------------------------------ pruned

// A bounded query's gather (OrPDesc::bounded), per essential block: lane t < m gets the window
// [*lo, *hi] of list t's blocks that can hold a document in [first, last] (lo > hi: none, and for
// the block's own list s, must_not lists and the lists s omits); returns the sum over those lists of their windows'
// highest block maxima, the bound of what the other lists add to a document of this block.
// Warp-uniform arguments; every lane calls.
static_assert(kMaxSteps <= 32, "WindowBound gives each list of a query a lane of one warp");
__device__ __forceinline__ float WindowBound(const OrPDesc& q, const DevList* lists, const OrPList* plists, uint32_t s,
                                             uint32_t first, uint32_t last, uint32_t* lo, uint32_t* hi) {
  *lo = 1;
  *hi = 0;
  const uint32_t t = Lane();
  const uint32_t omit = plists[q.list_off + s].omit;
  if (t < q.m && t != s && !plists[q.list_off + t].exclude && !((omit >> t) & 1u)) {
    const DevList lt = lists[q.list_off + t];
    const uint32_t x = LocateBlock(lt, first);
    if (x < lt.num_blocks) {
      *lo = x;
      *hi = min(GallopFrom(lt, x, last), lt.num_blocks - 1);
    }
  }
  float bound = 0.0f;
  for (uint32_t u = 0; u < q.m; ++u) {
    const uint32_t a = __shfl_sync(0xffffffffu, *lo, u), z = __shfl_sync(0xffffffffu, *hi, u);
    if (a > z) continue;
    const BlockMeta* meta = lists[q.list_off + u].meta;
    uint32_t mx = 0;  // non-negative floats (and +inf) order as their bits
    for (uint32_t x = a + Lane(); x <= z; x += 32) mx = max(mx, __float_as_uint(SanitizeBoundHD(meta[x].max_score)));
    bound += __uint_as_float(__reduce_max_sync(0xffffffffu, mx));
  }
  return bound;
}

// The bound of what the other lists add to document doc of a bounded query's block: over the
// windows WindowBound set, the block maximum of each list's block that can hold doc. Every lane
// calls (valid: whether this lane's doc is one).
__device__ __forceinline__ float DocBound(const OrPDesc& q, const DevList* lists, uint32_t lo, uint32_t hi, bool valid,
                                          uint32_t doc) {
  float bound = 0.0f;
  for (uint32_t u = 0; u < q.m; ++u) {
    const uint32_t a = __shfl_sync(0xffffffffu, lo, u), z = __shfl_sync(0xffffffffu, hi, u);
    if (a > z || !valid) continue;
    const DevList& lu = lists[q.list_off + u];
    const uint32_t x = FirstBlockReaching(lu, a, z + 1, doc);
    if (x <= z && doc >= BlockBase(lu, x)) bound += SanitizeBoundHD(lu.meta[x].max_score);
  }
  return bound;
}

// A warp per block of the essential lists, spread over the batch (OrPDesc::ess_blocks,
// OrPList::ess_off).
__global__ void __launch_bounds__(kThreads)
    OrGatherKernel(const OrPDesc* descs, uint32_t nq, const DevList* lists, const OrPList* plists, ShardDev shard) {
  __shared__ Spread sp;
  const uint32_t total = BuildSpread(sp, nq, [&](uint32_t a) { return descs[a].ess_blocks; });
  WarpStats st;
  for (uint32_t g = GlobalWarp(); g < total; g += WarpStride()) {
    const uint32_t a = SpreadQuery(sp, nq, g);
    const OrPDesc& q = descs[a];
    const uint32_t e = g - sp.prefix[a];
    uint32_t s = 0;  // the essential list holding the query's e-th essential block
    while (s + 1 < q.m && !(plists[q.list_off + s].essential && e < plists[q.list_off + s].ess_off +
                                                                        lists[q.list_off + s].num_blocks))
      ++s;
    const OrPList& pl = plists[q.list_off + s];
    const DevList l = lists[q.list_off + s];
    const uint32_t b = e - pl.ess_off;
    if (!pl.essential || b >= l.num_blocks) continue;  // only with inconsistent descriptors
    if (CandOverflowed(q)) continue;  // kErrOverflow is set: the host reruns the query dense
    st.To(q.out);
    const BlockMeta m = l.meta[b];
    const float bmax = SanitizeBoundHD(m.max_score);
    // No document of this block reaches theta: its score is at most about bmax + rest (rounding
    // covered by slack; strict, so bounds of 0 against theta 0 prune nothing).
    if ((bmax + pl.rest) * q.slack < q.theta) continue;
    float rest = pl.rest;  // the block's bound of the other lists
    uint32_t win_lo = 1, win_hi = 0;
    if (q.bounded) {
      rest = WindowBound(q, lists, plists, s, BlockBase(l, b), m.last_doc, &win_lo, &win_hi);
      if ((bmax + rest) * q.slack < q.theta) continue;
    }
    uint32_t docs[kWarpValues], tfs[kWarpValues];
    const bool decoded = DecodeScoredBlock(l, b, m, shard.doc_begin, docs, tfs, st.blocks, st.postings, st.bytes);
    st.freq_blocks = st.blocks;  // scored whole: both payloads
    if (!decoded) {
      if (Lane() == 0) atomicOr(&q.out->error, kErrCorrupt);
      continue;
    }
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      bool fresh = false;
      float own = 0.0f;
      // A bounded query's document: the blocks of the other lists that can hold it.
      const float doc_rest = q.bounded ? DocBound(q, lists, win_lo, win_hi, i < m.count, docs[r]) : rest;
      if (i < m.count) {
        const uint32_t off = docs[r] - shard.doc_begin;
        // Its tf alone bounds the contribution (the norm at its floor; Bm25TermScore falls as
        // the norm grows, in float too): most postings fail here without reading their norm.
        const bool may = shard.norm_floor <= 0.0f ||
                         !((Bm25TermScore(l.idf, tfs[r], shard.norm_floor, shard.k1) + doc_rest) * q.slack < q.theta);
        if (off >= shard.num_docs) {
          atomicOr(&q.out->error, kErrCorrupt);  // a corrupt block that decoded past the shard
        } else if (may) {
          // The document's own contribution plus what the other lists can add.
          own = Bm25TermScore(l.idf, tfs[r], shard.norms[off], shard.k1);
          if (!((own + doc_rest) * q.slack < q.theta)) {
            const uint32_t bit = 1u << (off & 31u);
            fresh = (atomicOr(&q.bitmap[off >> 5], bit) & bit) == 0;
          }
        }
      }
      const uint32_t at = WarpAppend(&q.counters[0], fresh);
      if (fresh) {
        if (at < q.cap) {  // its position here is known: the other lists are searched for it
          q.cand[at] = docs[r];
          q.src[at] = static_cast<uint8_t>(s);
          q.pos[static_cast<size_t>(s) * q.cap + at] = b * kBlockSize + i;
          q.scores[at] = own;
        } else {
          atomicOr(&q.out->error, kErrOverflow);
        }
      }
    }
  }
  st.Flush();
}

// After the gather: a query whose candidates overflowed (kErrOverflow is set; the host reruns it
// dense) keeps none, so the steps after it (locate, decode, probe, score, top-k) skip it instead of
// working through a full buffer of candidates that no answer uses. A thread per query.
__global__ void __launch_bounds__(kThreads) OrDropOverflowKernel(const OrPDesc* descs, uint32_t nq) {
  const uint32_t a = blockIdx.x * kThreads + threadIdx.x;
  if (a < nq && descs[a].counters[0] > descs[a].cap) descs[a].counters[0] = 0;
}

// The first candidate to need block b of list s appends it to the list's need_list.
__device__ __forceinline__ void MarkNeeded(const OrPDesc& q, const OrPList& pl, uint32_t s, uint32_t b) {
  if (pl.needed[b] != 0 || atomicExch(&pl.needed[b], 1u) != 0) return;
  const uint32_t j = atomicAdd(&q.counters[1 + s], 1u);  // < blocks and <= candidates: in range
  pl.need_list[j] = b;
  pl.slot_of[b] = j;
}

// The candidates a probe kernel's CTA serves for query a (0: the query has no list there).
__device__ __forceinline__ uint32_t ProbeItems(const OrPDesc& q, uint32_t step) {
  return ProbeSlot(q, step) == kNone ? 0u : CandCount(q);
}

// f(q, i, s, src) for each candidate i that the step's list s must be searched for (not taken
// from s, where its position is set, nor dropped): a thread per candidate, spread over the batch.
// Every thread of the CTA calls.
template <class F>
__device__ __forceinline__ void ForEachProbe(const OrPDesc* descs, uint32_t nq, uint32_t step, F f) {
  __shared__ Spread sp;
  const uint32_t total = BuildSpread(sp, nq, [&](uint32_t a) { return ProbeItems(descs[a], step); });
  for (uint32_t g = blockIdx.x * kThreads + threadIdx.x; g < total; g += gridDim.x * kThreads) {
    const uint32_t a = SpreadQuery(sp, nq, g);
    const uint32_t i = g - sp.prefix[a];
    const OrPDesc& q = descs[a];
    const uint32_t s = ProbeSlot(q, step);
    const uint32_t src = q.src[i];
    if (src != s && src != kDeadSrc) f(q, i, s, src);
  }
}

__global__ void __launch_bounds__(kThreads)
    OrLocateKernel(const OrPDesc* descs, uint32_t nq, const DevList* lists, const OrPList* plists, uint32_t step) {
  ForEachProbe(descs, nq, step, [&](const OrPDesc& q, uint32_t i, uint32_t s, uint32_t src) {
    const DevList l = lists[q.list_off + s];
    const uint32_t doc = q.cand[i];
    const uint32_t lo = LocateBlock(l, doc);
    uint32_t b = lo < l.num_blocks ? lo : kNone;
    if (b != kNone && doc < BlockBase(l, b)) b = kNone;  // between blocks (or before the list)
    q.pos[static_cast<size_t>(s) * q.cap + i] = b;
    const OrPList& pl = plists[q.list_off + s];
    // Progressively, block-max MaxScore: the block can add at most its max, so a candidate whose
    // partial score plus that (0 where no block can hold it) plus the later lists' bound cannot
    // reach theta is dropped here, and its block is not decoded for it. Strict, as the probe's
    // filter; a must_not list adds nothing and bounds nothing.
    if (step != kNone && q.probe_bound != 0 && pl.exclude == 0) {
      const float here = b == kNone ? 0.0f : SanitizeBoundHD(l.meta[b].max_score);
      if ((q.scores[i] + here + plists[q.list_off + src].after[step]) * q.slack < q.theta) {
        q.src[i] = kDeadSrc;
        return;
      }
    }
    if (pl.dense == 0 && b != kNone) MarkNeeded(q, pl, s, b);
  });
}

// The blocks OrDecodeKernel decodes for a query: the needed ones, or all when the list is dense.
__device__ __forceinline__ uint32_t DecodeItems(const OrPDesc& q, const DevList* lists, const OrPList* plists,
                                                uint32_t step) {
  const uint32_t s = ProbeSlot(q, step);
  if (s == kNone) return 0;
  const uint32_t nb = lists[q.list_off + s].num_blocks;
  return plists[q.list_off + s].dense ? nb : min(q.counters[1 + s], nb);
}

// A warp per block to decode, spread over the batch.
__global__ void __launch_bounds__(kThreads) OrDecodeKernel(const OrPDesc* descs, uint32_t nq, const DevList* lists,
                                                           const OrPList* plists, ShardDev shard, uint32_t step) {
  __shared__ Spread sp;
  const uint32_t total = BuildSpread(sp, nq, [&](uint32_t a) { return DecodeItems(descs[a], lists, plists, step); });
  WarpStats st;
  for (uint32_t g = GlobalWarp(); g < total; g += WarpStride()) {
    const uint32_t a = SpreadQuery(sp, nq, g);
    const uint32_t slot = g - sp.prefix[a];
    const OrPDesc& q = descs[a];
    const uint32_t s = ProbeSlot(q, step);
    const DevList l = lists[q.list_off + s];
    const OrPList& pl = plists[q.list_off + s];
    st.To(q.out);
    const uint32_t b = pl.dense ? slot : pl.need_list[slot];
    const BlockMeta m = l.meta[b];
    uint32_t docs[kWarpValues];
    if (!DecodeChecked(l, b, m, shard.doc_begin, docs) && Lane() == 0) atomicOr(&q.out->error, kErrCorrupt);
    uint32_t* dst = pl.decoded + static_cast<size_t>(slot) * kBlockSize;
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      const uint32_t i = Lane() * kWarpValues + r;
      if (i < m.count) dst[i] = docs[r];
    }
    ++st.blocks;
    st.postings += m.count;
    st.bytes += PackedBytes(m.count, m.doc_bits);
  }
  st.Flush();
}

// Progressively (step != kNone) also adds the found contribution to the candidate's partial score
// and drops the candidate when that plus the later lists' bound cannot reach theta.
__global__ void __launch_bounds__(kThreads) OrProbeKernel(const OrPDesc* descs, uint32_t nq, const DevList* lists,
                                                          const OrPList* plists, ShardDev shard, uint32_t step) {
  ForEachProbe(descs, nq, step, [&](const OrPDesc& q, uint32_t i, uint32_t s, uint32_t src) {
    uint32_t* pos = q.pos + static_cast<size_t>(s) * q.cap;
    const uint32_t b = pos[i];
    const uint32_t doc = q.cand[i];
    const DevList l = lists[q.list_off + s];
    uint32_t at = kNone;
    if (b != kNone) {
      const OrPList& pl = plists[q.list_off + s];
      const uint32_t slot = pl.dense ? b : pl.slot_of[b];
      const uint32_t* blk = pl.decoded + static_cast<size_t>(slot) * kBlockSize;
      const uint32_t cnt = l.meta[b].count;
      uint32_t lo = 0, hi = cnt;
      while (lo < hi) {
        const uint32_t mid = (lo + hi) >> 1;
        if (blk[mid] < doc)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo < cnt && blk[lo] == doc) at = b * kBlockSize + lo;
      pos[i] = at;
    }
    const OrPList& probed = plists[q.list_off + s];
    if (probed.exclude || (probed.require && at == kNone)) {  // a must_not list holds it, the must list not
      if (at != kNone || probed.require) q.src[i] = kDeadSrc;
      return;
    }
    if (step == kNone) return;
    const float after = plists[q.list_off + src].after[step];
    float partial = q.scores[i];
    bool drop = false;
    if (at != kNone) {
      const uint32_t tf = FreqAt(l.payload, l.meta[b], at % kBlockSize);
      // The tf-only bound first (as the gather's): a drop it proves needs no norm.
      drop = shard.norm_floor > 0.0f &&
             (partial + Bm25TermScore(l.idf, tf, shard.norm_floor, shard.k1) + after) * q.slack < q.theta;
      if (!drop) partial += Bm25TermScore(l.idf, tf, shard.norms[doc - shard.doc_begin], shard.k1);
    }
    // Strict, as the gather's filter: a bound equal to theta keeps the candidate.
    if (drop || (partial + after) * q.slack < q.theta)
      q.src[i] = kDeadSrc;
    else
      q.scores[i] = partial;
  });
}

// Sums each candidate's contributions in canonical slot order (the CPU's float adds; absent
// terms add nothing, as x + 0.0f == x). out->scored counts the candidates scored (not dropped).
__global__ void __launch_bounds__(kThreads) OrScoreKernel(const OrPDesc* descs, const DevList* lists, ShardDev shard) {
  const OrPDesc& q = descs[blockIdx.y];
  const uint32_t c = CandCount(q);
  uint32_t scored = 0;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < c; i += gridDim.x * kThreads) {
    if (q.src[i] == kDeadSrc) {
      q.scores[i] = -0.0f;  // not a document: top-k skips it
      continue;
    }
    ++scored;
    const uint32_t doc = q.cand[i];
    const float norm = shard.norms[doc - shard.doc_begin];  // in range: checked by the gather
    float score = 0.0f;
    for (uint32_t s = 0; s < q.m; ++s) {
      const uint32_t p = q.pos[static_cast<size_t>(s) * q.cap + i];
      if (p == kNone) continue;
      const DevList& l = lists[q.list_off + s];
      const uint32_t tf = FreqAt(l.payload, l.meta[p / kBlockSize], p % kBlockSize);
      score += Bm25TermScore(l.idf, tf, norm, shard.k1);
    }
    q.scores[i] = score;
  }
  scored = __reduce_add_sync(0xffffffffu, scored);
  if (Lane() == 0 && scored != 0) atomicAdd(&q.out->scored, static_cast<unsigned long long>(scored));
}

}  // namespace search::gpu::engine_internal
