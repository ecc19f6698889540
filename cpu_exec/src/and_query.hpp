// Block-max AND over BlockMaxCursors (block_cursor.hpp). The shortest list drives; the others
// follow with next_geq. While the heap is full, every list is shallow-seeked to the candidate's
// block: when the sum of the block maxima cannot beat the threshold, the whole docID range up to
// the nearest block end is skipped without decoding anything. Otherwise the driving block is
// scored eight lanes at a time and only documents whose exact lead score plus the other lists'
// bounds can beat the threshold are followed into the longer lists, list by list, each step
// again bounded by the exact partial score plus the remaining block maxima.
// Thread-safety: pure functions over caller-owned cursors and buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

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

// REQUIRES: cur[0..n) sorted by size ascending, n >= 1, every list non-empty; rest has n + 1 floats.
template <BlockMaxCursor C>
void RunAnd(C* const* cur, size_t n, ScoreSheet& sheet, TopKHeap& topk, float slack, float* rest, QueryStats& stats) {
  C& lead = *cur[0];
  float others_max = 0.0f;  // the most lists 1..n-1 can add to any document
  for (size_t i = 1; i < n; ++i) others_max += cur[i]->max_score();
  lead.next_geq(0);
  uint32_t d = lead.doc();  // a lower bound of lead's next document while its block is not decoded
  while (d != kEndDoc) {
    if (!topk.full()) {
      // Plain DAAT until the heap fills. A document is followed into the longer lists before the
      // lead scores it: most of the lead's documents are missing from some list, and its score
      // costs a frequency decode and a norm read from anywhere in the shard's array (a cache
      // miss for a served query). The lists move exactly as AndCandidate would move them.
      lead.next_geq(d);
      d = lead.doc();
      if (d == kEndDoc) break;
      uint32_t missing = d;
      for (size_t j = 1; j < n && missing == d; ++j) {
        cur[j]->next_geq(d);
        if (cur[j]->doc() != d) missing = cur[j]->doc();
      }
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
    const float* lead_scores = lead.block_scores();
    const uint32_t* docs = lead.block_docs();
    const uint32_t count = lead.block_count();
    float others_range = 0.0f;  // the most lists 1..n-1 can add to a document of this block
    for (size_t i = 1; i < n; ++i) {
      cur[i]->shallow_seek(docs[lead.pos()]);
      others_range += cur[i]->block_max_score_through(docs[count - 1]);
    }
    others_range = std::min(others_range, others_max);
    for (uint32_t j = lead.pos(); j < count; ++j) {
      const float c0 = lead_scores[j];
      if ((c0 + others_range) * slack <= thr) continue;
      const uint32_t doc = docs[j];
      for (size_t i = 1; i < n; ++i) {
        cur[i]->shallow_seek(doc);
        if (cur[i]->blocks_exhausted()) return;
        rest[i] = cur[i]->block_max_score();
      }
      rest[n] = 0.0f;
      for (size_t i = n - 1; i >= 1; --i) rest[i] += rest[i + 1];
      if (AndCandidate(cur, n, doc, c0, rest, true, thr, slack, sheet, topk, stats) == kEndDoc) return;
      thr = topk.Threshold();
    }
    lead.skip_block();
    d = lead.doc();
  }
}

}  // namespace search::cpu_internal
