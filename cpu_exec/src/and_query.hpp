// Block-max AND over BlockMaxCursors (block_cursor.hpp). The shortest list drives; the others
// follow with next_geq. While the heap is full, every list is shallow-seeked to the candidate's
// block: when the sum of the block maxima cannot beat the threshold, the whole docID range up to
// the nearest block end is skipped without decoding anything. Otherwise the driving block is
// scored eight lanes at a time and only documents whose exact lead score plus the other lists'
// bounds can beat the threshold are followed into the longer lists, list by list, each step
// again bounded by the exact partial score plus the remaining block maxima. Until the heap is
// full (for most and-queries of a large shard, their whole run) the two shortest lists are
// intersected a block pair at a time, eight docIDs against eight (AndFillBlock), and only their
// common documents are followed into the longer lists and scored. After that, a lead block that
// passes the bound while the threshold is loose is intersected with the second list the same way
// before any of its documents is scored (kAndPairNeedShare).
// Thread-safety: pure functions over caller-owned cursors and buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "block_cursor.hpp"
#include "core/topk.hpp"
#include "query_engine.hpp"

namespace search::cpu_internal {

// Scores lead's current document and follows it into cur[1..n) (next_geq), pushing it when every
// list holds it and it can still beat thr. With `bounded`, rest[i] holds the sum of the block
// maxima of lists i..n-1 at d (rest[n] = 0) and the walk stops as soon as the exact partial score
// plus rest cannot beat thr, so a longer list's block is decoded only while that is possible.
// Returns the first docID the walk proved absent from some list (> d: the next candidate is at
// least that), d when done with d, or kEndDoc when a list ran out.
template <BlockMaxCursor C>
uint32_t AndCandidate(C* const* cur, size_t n, uint32_t d, float lead_score, const float* rest, bool bounded,
                      float thr, float slack, ScoreSheet& sheet, TopKHeap& topk, QueryStats& stats) {
  float partial = lead_score;
  sheet.set(cur[0]->slot(), lead_score);
  for (size_t j = 1; j <= n; ++j) {
    if (bounded && (partial + rest[j]) * slack <= thr) {
      sheet.clear();
      return d;
    }
    if (j == n) break;
    cur[j]->next_geq(d);
    if (cur[j]->doc() != d) {
      sheet.clear();
      return cur[j]->doc();
    }
    const float c = cur[j]->score();
    sheet.set(cur[j]->slot(), c);
    partial += c;
  }
  topk.Push(d, sheet.sum_and_clear());
  ++stats.postings_scored;
  return d;
}

// Fills rest[i] (1 <= i < n) with the sum of the block maxima of lists i..n-1 at doc (rest[n] = 0),
// shallow-seeking those lists to doc. False when one of them has nothing at or after doc.
template <BlockMaxCursor C>
bool RestBounds(C* const* cur, size_t n, uint32_t doc, float* rest) {
  for (size_t i = 1; i < n; ++i) {
    cur[i]->shallow_seek(doc);
    if (cur[i]->blocks_exhausted()) return false;
    rest[i] = cur[i]->block_max_score();
  }
  rest[n] = 0.0f;
  for (size_t i = n - 1; i >= 1; --i) rest[i] += rest[i + 1];
  return true;
}

// Follows d into cur[from..n) (next_geq) until a list lacks it. Returns d when every one holds
// it, else the first docID the walk proved absent (the lacking list's next document, > d; kEndDoc
// when that list ran out).
template <BlockMaxCursor C>
uint32_t FirstMissing(C* const* cur, size_t from, size_t n, uint32_t d) {
  for (size_t j = from; j < n; ++j) {
    cur[j]->next_geq(d);
    if (cur[j]->doc() != d) return cur[j]->doc();
  }
  return d;
}

#if defined(__AVX2__)
// Lanes of a (eight docIDs) equal to some lane of b, as an 8-bit mask: a against b and its seven
// rotations.
inline unsigned MatchLanes(__m256i a, __m256i b) {
  const __m256i s = _mm256_permute2x128_si256(b, b, 1);  // b's halves swapped
  __m256i m = _mm256_cmpeq_epi32(a, b);
  m = _mm256_or_si256(m, _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(b, _MM_SHUFFLE(0, 3, 2, 1))));
  m = _mm256_or_si256(m, _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(b, _MM_SHUFFLE(1, 0, 3, 2))));
  m = _mm256_or_si256(m, _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(b, _MM_SHUFFLE(2, 1, 0, 3))));
  m = _mm256_or_si256(m, _mm256_cmpeq_epi32(a, s));
  m = _mm256_or_si256(m, _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(s, _MM_SHUFFLE(0, 3, 2, 1))));
  m = _mm256_or_si256(m, _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2))));
  m = _mm256_or_si256(m, _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(s, _MM_SHUFFLE(2, 1, 0, 3))));
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(m)));
}

// The heap-filling phase of RunAnd for n >= 2 while cur[1] is at most kAndFillMaxRatio times as
// long as the lead, one block of the lead list at a time: the lead's decoded block is intersected
// with cur[1]'s decoded block eight docIDs against eight (no data-dependent branch per document:
// a served query's cost there was branch misses), and only their common documents are followed
// into cur[2..n), scored and pushed, until the heap is full. The blocks' kPad trailing kEndDoc
// values let every load take eight. REQUIRES: the heap is not full (kBounded: it is full).
// Returns the next candidate docID (every common document below it is done), or kEndDoc when a
// list ran out.
// kBounded: the same intersection once the heap is full (RunAnd's block-max phase): a common
// document is scored only if its exact lead score plus the other lists' block maxima can beat the
// threshold, and followed into cur[2..n) only while the exact partial score allows (AndCandidate,
// bounded), so the lead's norms are read for the common documents alone, not for its whole block.
template <bool kBounded = false, BlockMaxCursor C>
uint32_t AndFillBlock(C* const* cur, size_t n, uint32_t d, float slack, float* rest, ScoreSheet& sheet,
                      TopKHeap& topk, QueryStats& stats) {
  C& lead = *cur[0];
  C& b = *cur[1];
  lead.next_geq(d);
  if (lead.doc() == kEndDoc) return kEndDoc;
  b.next_geq(lead.doc());
  if (b.doc() == kEndDoc) return kEndDoc;
  const uint32_t* a = lead.block_docs();
  const uint32_t na = lead.block_count();
  const uint32_t* bd = b.block_docs();
  const uint32_t nb = b.block_count();
  uint32_t i = lead.pos(), j = b.pos();
  uint32_t floor = 0;  // a list of cur[2..n) holds nothing in [a match, floor)
  float thr = kBounded ? topk.Threshold() : 0.0f;
  while (i < na && j < nb) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bd + j));
    unsigned mask = MatchLanes(va, vb);
    if (mask != 0) [[unlikely]] {
      if (na - i < 8) mask &= (1u << (na - i)) - 1;  // a's padding may equal b's
      for (; mask != 0; mask &= mask - 1) {
        const uint32_t ia = i + static_cast<uint32_t>(__builtin_ctz(mask));
        const uint32_t x = a[ia];
        if (x < floor) continue;
        const unsigned mb = static_cast<unsigned>(
            _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(vb, _mm256_set1_epi32(static_cast<int>(x))))));
        lead.set_pos(ia);
        b.set_pos(j + static_cast<uint32_t>(__builtin_ctz(mb)));
        if constexpr (kBounded) {
          if (!RestBounds(cur, n, x, rest)) return kEndDoc;
          const uint32_t r = AndCandidate(cur, n, x, lead.score(), rest, true, thr, slack, sheet, topk, stats);
          if (r == kEndDoc) return kEndDoc;
          if (r != x) floor = r;
          thr = topk.Threshold();
          continue;
        }
        const uint32_t missing = FirstMissing(cur, 2, n, x);
        if (missing == kEndDoc) return kEndDoc;
        if (missing != x) {
          floor = missing;
          continue;
        }
        (void)AndCandidate(cur, n, x, lead.score(), rest, false, 0.0f, slack, sheet, topk, stats);
        if (topk.full()) return x + 1;  // x < kEndDoc, so x + 1 <= kEndDoc
      }
    }
    // The chunk with the smaller last value is done (both when equal); padding reads as kEndDoc.
    const uint32_t la = a[i + 7], lb = bd[j + 7];
    i += la <= lb ? 8u : 0u;
    j += lb <= la ? 8u : 0u;
  }
  // Every common document up to the end of the block that ran out is done: the one with the
  // smaller last docID (both advance past their padding together, whichever ends first).
  const uint32_t done = std::min(a[na - 1], bd[nb - 1]);
  return std::max(done + 1, floor);  // done < kEndDoc
}
#endif

// How much longer than the lead cur[1] may be for AndFillBlock: past it, following each lead
// document with next_geq skips more of cur[1] than eight-by-eight comparison.
inline constexpr uint32_t kAndFillMaxRatio = 16;
// Once the heap is full, a lead block that passes the block-max bound goes through AndFillBlock's
// intersection with cur[1] first (kBounded) when a lead document needs less than this share of
// the lead block's maximum to pass (thr / slack less the other lists' maxima): most of the block's
// documents would then pass the score filter and be followed into cur[1] anyway, so scoring only
// the common documents saves the norm reads of the rest. Where the threshold is tight, scoring the
// block first (eight lanes) rules out most documents without decoding cur[1]'s blocks at all.
inline constexpr float kAndPairNeedShare = 0.5f;

// REQUIRES: cur[0..n) sorted by size ascending, n >= 1, every list non-empty; rest has n + 1 floats.
template <BlockMaxCursor C>
void RunAnd(C* const* cur, size_t n, ScoreSheet& sheet, TopKHeap& topk, float slack, float* rest, QueryStats& stats) {
  C& lead = *cur[0];
  float others_max = 0.0f;  // the most lists 1..n-1 can add to any document
  for (size_t i = 1; i < n; ++i) others_max += cur[i]->max_score();
#if defined(__AVX2__)
  const bool fill_blocks = n >= 2 && cur[1]->size() / kAndFillMaxRatio <= lead.size();
#endif
  lead.next_geq(0);
  uint32_t d = lead.doc();  // a lower bound of lead's next document while its block is not decoded
  while (d != kEndDoc) {
#if defined(__AVX2__)
    if (fill_blocks && !topk.full()) {
      d = AndFillBlock(cur, n, d, slack, rest, sheet, topk, stats);
      continue;
    }
#endif
    if (!topk.full()) {
      // Plain DAAT until the heap fills. A document is followed into the longer lists before the
      // lead scores it: most of the lead's documents are missing from some list, and its score
      // costs a frequency decode and a norm read from anywhere in the shard's array (a cache
      // miss for a served query). The lists move exactly as AndCandidate would move them.
      lead.next_geq(d);
      d = lead.doc();
      if (d == kEndDoc) break;
      const uint32_t missing = FirstMissing(cur, 1, n, d);
      if (missing == kEndDoc) break;
      if (missing != d) {
        d = missing;
        continue;
      }
      // Every list holds d, so the unbounded walk scores and pushes it (its next_geq calls stay put).
      (void)AndCandidate(cur, n, d, lead.score(), rest, false, 0.0f, slack, sheet, topk, stats);
      lead.next();
      d = lead.doc();
      continue;
    }
    float thr = topk.Threshold();
    // Block-max bound over [d, end]: every list's postings there lie in its current block.
    uint32_t end = kEndDoc;
    float bound = 0.0f;
    for (size_t i = 0; i < n; ++i) {
      cur[i]->shallow_seek(d);
      if (cur[i]->blocks_exhausted()) return;  // a list has nothing at or after d: no more matches
      bound += cur[i]->block_max_score();
      end = std::min(end, cur[i]->block_last_doc());
    }
    if (bound * slack <= thr) {
      if (end == kEndDoc) break;
      d = end + 1;
      continue;
    }
    // Scan the rest of lead's block: its scores eight lanes at a time; a document goes further
    // only if its lead score plus the other lists' maxima can beat thr.
    lead.next_geq(d);
    if (lead.doc() == kEndDoc) break;
    const uint32_t* docs = lead.block_docs();
    const uint32_t count = lead.block_count();
    float others_range = 0.0f;  // the most lists 1..n-1 can add to a document of this block
    for (size_t i = 1; i < n; ++i) {
      cur[i]->shallow_seek(docs[lead.pos()]);
      others_range += cur[i]->block_max_score_through(docs[count - 1]);
    }
    others_range = std::min(others_range, others_max);
#if defined(__AVX2__)
    if (fill_blocks && thr / slack - others_range < kAndPairNeedShare * lead.block_max_score()) {
      d = AndFillBlock<true>(cur, n, lead.doc(), slack, rest, sheet, topk, stats);
      continue;
    }
#endif
    const float* lead_scores = lead.block_scores();
    for (uint32_t j = lead.pos(); j < count; ++j) {
      const float c0 = lead_scores[j];
      if ((c0 + others_range) * slack <= thr) continue;
      const uint32_t doc = docs[j];
      if (!RestBounds(cur, n, doc, rest)) return;
      if (AndCandidate(cur, n, doc, c0, rest, true, thr, slack, sheet, topk, stats) == kEndDoc) return;
      thr = topk.Threshold();
    }
    lead.skip_block();
    d = lead.doc();
  }
}

}  // namespace search::cpu_internal
