// The document-at-a-time top-k algorithms of the CPU executor, templated over block-max cursors
// (block_cursor.hpp):
//   RunAnd: block-max AND. The shortest list drives; the others follow with next_geq. While the
//           heap is full, a candidate first shallow-seeks every list to its block: when the sum of
//           the block maxima cannot beat the threshold, the whole docID range up to the nearest
//           block end is skipped without decoding anything.
//   RunOr:  block-max MaxScore. Lists sorted by list max score; the prefix whose summed maxima
//           cannot beat the threshold is non-essential (only probed, never drives). Ranges where
//           the block maxima of all lists cannot beat the threshold are skipped by shallow seeks;
//           a candidate whose block-max bound cannot beat it is dropped before its frequencies are
//           decoded; non-essential lists are probed from the largest bound down and probing stops
//           as soon as the partial score plus the remaining block maxima cannot beat it.
// Exactness: documents are visited in ascending docID order, so a new candidate enters TopK only
// with a score strictly above Threshold(); every pruning test is `bound * slack <= threshold`
// where bound >= the float score up to rounding and slack (QuerySlack) exceeds that rounding.
// Scores are summed per term slot in canonical order (ScoreSheet), whatever the visiting order.
// Thread-safety: pure functions over caller-owned cursors and buffers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "block_cursor.hpp"
#include "core/bm25.hpp"
#include "core/topk.hpp"
#include "cpu_exec/cpu_executor.hpp"

namespace search::cpu_internal {

// The current candidate's per-term contributions, by canonical slot; unset slots hold 0 (and
// x + 0.0f == x, so summing every slot in order equals summing the present terms in order).
class ScoreSheet {
 public:
  // REQUIRES: vals has n zeroed floats.
  ScoreSheet(float* vals, size_t n) : vals_(vals), n_(n) {}
  void set(uint32_t slot, float v) { vals_[slot] = v; }
  float sum_and_clear() {
    float s = 0.0f;
    for (size_t i = 0; i < n_; ++i) {
      s += vals_[i];
      vals_[i] = 0.0f;
    }
    return s;
  }
  void clear() { std::fill(vals_, vals_ + n_, 0.0f); }

 private:
  float* vals_;
  size_t n_;
};

// The pruning slack for an n-term query: kScoreSlack, widened for very long queries so that it
// always exceeds the relative rounding of two n-term float sums (about 2n ulps of 2^-24).
inline float QuerySlack(size_t n) {
  const double need = 1.0 + 8.0 * static_cast<double>(n + 2) * 0x1p-24;
  return std::max(kScoreSlack, std::nextafter(static_cast<float>(need), 2.0f));
}

// REQUIRES: cur[0..n) sorted by size ascending, n >= 1, every list non-empty; rest has n + 1 floats.
template <BlockMaxCursor C>
void RunAnd(C* const* cur, size_t n, ScoreSheet& sheet, TopK& topk, float slack, float* rest, QueryStats& stats) {
  C& lead = *cur[0];
  lead.next_geq(0);
  uint32_t d = lead.doc();
  while (d != kEndDoc) {
    bool bounded = false;
    float thr = 0.0f;
    if (topk.full()) {
      // Block-max bound over [d, end]: every list's postings there lie in its current block.
      thr = topk.Threshold();
      uint32_t end = kEndDoc;
      bool exhausted = false;
      for (size_t i = 0; i < n; ++i) {
        cur[i]->shallow_seek(d);
        if (cur[i]->blocks_exhausted()) {
          exhausted = true;
          break;
        }
        rest[i] = cur[i]->block_max_score();
        end = std::min(end, cur[i]->block_last_doc());
      }
      if (exhausted) break;  // some list has nothing at or after d: no more matches
      float acc = 0.0f;
      rest[n] = 0.0f;
      for (size_t i = n; i-- > 0;) {
        acc += rest[i];
        rest[i] = acc;  // rest[i] = sum of block maxima of lists i..n-1
      }
      if (rest[0] * slack <= thr) {
        if (end == kEndDoc) break;
        lead.next_geq(end + 1);
        d = lead.doc();
        continue;
      }
      bounded = true;
    }
    size_t i = 1;
    for (; i < n; ++i) {
      cur[i]->next_geq(d);
      if (cur[i]->doc() != d) break;
    }
    if (i < n) {
      const uint32_t t = cur[i]->doc();
      if (t == kEndDoc) break;
      lead.next_geq(t);
      d = lead.doc();
      continue;
    }
    // Every list is at d. Score shortest first; stop when the rest cannot lift it over thr.
    float partial = 0.0f;
    bool pruned = false;
    for (size_t j = 0; j < n; ++j) {
      const float c = cur[j]->score();
      sheet.set(cur[j]->slot(), c);
      partial += c;
      if (bounded && j + 1 < n && (partial + rest[j + 1]) * slack <= thr) {
        pruned = true;
        break;
      }
    }
    if (pruned) {
      sheet.clear();
    } else {
      topk.Push(d, sheet.sum_and_clear());
      ++stats.postings_scored;
    }
    lead.next();
    d = lead.doc();
  }
}

// REQUIRES: cur[0..n) sorted by max_score ascending, n >= 1, every list non-empty; ub and ne have
// n floats each.
template <BlockMaxCursor C>
void RunOr(C* const* cur, size_t n, ScoreSheet& sheet, TopK& topk, float slack, float* ub, float* ne,
           QueryStats& stats) {
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    acc += cur[i]->max_score();
    ub[i] = acc;  // bound of any document that only lists 0..i hold
    cur[i]->next_geq(0);
  }
  size_t first_ess = 0;  // lists [first_ess, n) are essential
  float thr = -std::numeric_limits<float>::infinity();
  auto min_essential = [&] {
    uint32_t m = kEndDoc;
    for (size_t i = first_ess; i < n; ++i) m = std::min(m, cur[i]->doc());
    return m;
  };
  // Block-max bound of every document in [pivot, range_end].
  uint32_t range_end = 0;
  float range_bound = 0.0f;
  bool range_valid = false;
  auto compute_range = [&](uint32_t pivot) {
    float b = 0.0f;
    uint32_t e = kEndDoc;
    for (size_t i = 0; i < n; ++i) {
      cur[i]->shallow_seek(pivot);
      if (cur[i]->blocks_exhausted()) continue;
      b += cur[i]->block_max_score();
      e = std::min(e, cur[i]->block_last_doc());
    }
    range_bound = b;
    range_end = e;
    range_valid = true;
  };

  uint32_t d = min_essential();
  while (d != kEndDoc) {
    if (topk.full()) {
      if (!range_valid || d > range_end) compute_range(d);
      if (range_bound * slack <= thr) {
        // Skip whole block ranges by metadata alone, then land the essential lists past them.
        uint32_t pivot = d;
        do {
          if (range_end == kEndDoc) {
            pivot = kEndDoc;
            break;
          }
          pivot = range_end + 1;
          compute_range(pivot);
        } while (range_bound * slack <= thr);
        if (pivot == kEndDoc) break;
        for (size_t i = first_ess; i < n; ++i) cur[i]->next_geq(pivot);
        d = min_essential();
        continue;
      }
      // Candidate bound from the blocks holding d: essential lists at d plus every non-essential.
      float bound = 0.0f;
      for (size_t i = first_ess; i < n; ++i)
        if (cur[i]->doc() == d) bound += cur[i]->block_max_score();
      float ne_acc = 0.0f;
      for (size_t i = 0; i < first_ess; ++i) {
        cur[i]->shallow_seek(d);
        ne_acc += cur[i]->block_max_score();  // 0 once the list has no block left
        ne[i] = ne_acc;
      }
      if ((bound + ne_acc) * slack <= thr) {
        for (size_t i = first_ess; i < n; ++i)
          if (cur[i]->doc() == d) cur[i]->next();
        d = min_essential();
        continue;
      }
    }
    float partial = 0.0f;
    for (size_t i = first_ess; i < n; ++i) {
      if (cur[i]->doc() != d) continue;
      const float c = cur[i]->score();
      sheet.set(cur[i]->slot(), c);
      partial += c;
      cur[i]->next();
    }
    bool pruned = false;
    for (size_t i = first_ess; i-- > 0;) {  // first_ess > 0 only once the heap is full (ne is set)
      if ((partial + ne[i]) * slack <= thr) {
        pruned = true;
        break;
      }
      cur[i]->next_geq(d);
      if (cur[i]->doc() == d) {
        const float c = cur[i]->score();
        sheet.set(cur[i]->slot(), c);
        partial += c;
      }
    }
    if (pruned) {
      sheet.clear();
    } else {
      topk.Push(d, sheet.sum_and_clear());
      ++stats.postings_scored;
      if (topk.full() && topk.Threshold() != thr) {
        thr = topk.Threshold();
        while (first_ess < n && ub[first_ess] * slack <= thr) ++first_ess;
      }
    }
    d = min_essential();
  }
}

}  // namespace search::cpu_internal
