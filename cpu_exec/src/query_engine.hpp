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
inline thread_local uint64_t g_iters = 0, g_cands = 0, g_probes = 0, g_bounds = 0;

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
    if (bounded) {
      // Align and score list by list: list j+1's block is decoded only while the exact partial
      // score plus the block maxima of the lists after j can still beat the threshold.
      float partial = 0.0f;
      uint32_t mismatch = d;
      bool pruned = false;
      for (size_t j = 0; j < n; ++j) {
        if (j > 0) {
          cur[j]->next_geq(d);
          if (cur[j]->doc() != d) {
            mismatch = cur[j]->doc();
            break;
          }
        }
        const float c = cur[j]->score();
        sheet.set(cur[j]->slot(), c);
        partial += c;
        if (j + 1 < n && (partial + rest[j + 1]) * slack <= thr) {
          pruned = true;
          break;
        }
      }
      if (mismatch != d) {
        sheet.clear();
        if (mismatch == kEndDoc) break;
        lead.next_geq(mismatch);
        d = lead.doc();
        continue;
      }
      if (pruned) {
        sheet.clear();
      } else {
        topk.Push(d, sheet.sum_and_clear());
        ++stats.postings_scored;
      }
    } else {
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
      for (size_t j = 0; j < n; ++j) sheet.set(cur[j]->slot(), cur[j]->score());
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
  size_t first_ess = 0;  // lists [first_ess, n) are essential; first_ess > 0 only when topk is full
  float thr = -std::numeric_limits<float>::infinity();
  auto min_essential = [&] {
    uint32_t m = kEndDoc;
    for (size_t i = first_ess; i < n; ++i) m = std::min(m, cur[i]->doc());
    return m;
  };

  uint32_t pivot = min_essential();
  while (pivot != kEndDoc) {
    ++g_iters;
    if (topk.full()) {
      // Bound every document in [pivot, end]: each non-essential list by its block there; each
      // essential list by its block, or by 0 up to its next document when that is known for free
      // (its block is decoded). Nothing is decoded here, so runs of blocks are skipped unread.
      float bound = 0.0f;
      uint32_t end = kEndDoc;
      for (size_t i = 0; i < first_ess; ++i) {
        C& c = *cur[i];
        c.shallow_seek(pivot);
        if (!c.blocks_exhausted()) {
          bound += c.block_max_score();
          end = std::min(end, c.block_last_doc());
        }
        ne[i] = bound;  // prefix sums: the most lists 0..i can add
      }
      for (size_t i = first_ess; i < n; ++i) {
        C& c = *cur[i];
        c.shallow_seek(pivot);
        if (c.blocks_exhausted()) continue;
        if (c.decoded()) {
          c.next_geq(pivot);  // within the decoded block: a scan, no decode
          if (c.doc() > pivot) {
            end = std::min(end, c.doc() - 1);
            continue;
          }
        }
        bound += c.block_max_score();
        end = std::min(end, c.block_last_doc());
      }
      if (bound * slack <= thr) {
        if (end == kEndDoc) break;
        pivot = end + 1;
        continue;
      }
    }
    // The bound admits a document at pivot or later: position the essential lists for real.
    uint32_t d = kEndDoc;
    for (size_t i = first_ess; i < n; ++i) {
      cur[i]->next_geq(pivot);
      d = std::min(d, cur[i]->doc());
    }
    if (d == kEndDoc) break;
    if (d != pivot) {
      pivot = d;  // re-bound at the real candidate
      continue;
    }
    ++g_cands;
    float partial = 0.0f;
    for (size_t i = first_ess; i < n; ++i) {
      if (cur[i]->doc() != d) continue;
      const float c = cur[i]->score();
      sheet.set(cur[i]->slot(), c);
      partial += c;
      cur[i]->next();
    }
    bool pruned = false;
    for (size_t i = first_ess; i-- > 0;) {  // ne[] was filled at this pivot (the heap is full)
      if ((partial + ne[i]) * slack <= thr) {
        pruned = true;
        break;
      }
      ++g_probes; cur[i]->next_geq(d);
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
    pivot = min_essential();
  }
}

}  // namespace search::cpu_internal
