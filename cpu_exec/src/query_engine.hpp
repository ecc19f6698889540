// Shared pieces of the CPU executor's top-k algorithms (and_query.hpp, or_query.hpp): the
// canonical-order score sheet, the pruning slack and the probe of non-essential lists.
// Exactness: documents are visited in ascending docID order, so a new candidate enters the top k only
// with a score strictly above Threshold(); every pruning test is `bound * slack <= threshold`
// where bound >= the float score up to rounding and slack (ScoreSlack, core/score_slack.hpp)
// exceeds that rounding.
// Scores are summed per term slot in canonical order (ScoreSheet), whatever the visiting order.
// Thread-safety: pure functions over caller-owned cursors and buffers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "block_cursor.hpp"
#include "core/bm25.hpp"
#include "core/score_slack.hpp"
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

// The k best (doc, score) pairs seen so far, exactly as core/topk.hpp's TopK keeps them (same
// Threshold() semantics, same TakeSorted() result: the order is total), with the comparisons
// inlined and a replacement sifted down once: pushes are the hot path for large k.
class TopKHeap {
 public:
  // REQUIRES: k >= 1.
  explicit TopKHeap(uint32_t k) : k_(k) { heap_.reserve(std::min<uint32_t>(k, 1u << 16)); }
  bool full() const { return heap_.size() >= k_; }
  // -inf until k documents are held; then the k-th best score. A later (larger docID) document
  // enters only with a score strictly above it.
  float Threshold() const { return full() ? heap_[0].score : -std::numeric_limits<float>::infinity(); }
  void Push(uint32_t doc, float score) {
    const ScoredDoc x{doc, score};
    if (heap_.size() < k_) {
      heap_.push_back(x);
      SiftUp(heap_.size() - 1);
    } else if (Before(x, heap_[0])) {
      SiftDown(x);
    }
  }
  // The held documents, best first. Leaves the heap empty.
  std::vector<ScoredDoc> TakeSorted() {
    std::sort(heap_.begin(), heap_.end(), [](const ScoredDoc& a, const ScoredDoc& b) { return Before(a, b); });
    return std::move(heap_);
  }

 private:
  static bool Before(const ScoredDoc& a, const ScoredDoc& b) {
    return a.score > b.score || (a.score == b.score && a.doc < b.doc);
  }
  // Heap order: a parent never ranks before its children, so heap_[0] is the worst held.
  void SiftUp(size_t i) {
    const ScoredDoc x = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!Before(heap_[parent], x)) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = x;
  }
  // Replaces the worst held with x.
  void SiftDown(const ScoredDoc& x) {
    const size_t n = heap_.size();
    size_t i = 0;
    for (;;) {
      size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && Before(heap_[c], heap_[c + 1])) ++c;  // the worse child
      if (!Before(x, heap_[c])) break;
      heap_[i] = heap_[c];
      i = c;
    }
    heap_[i] = x;
  }

  uint32_t k_;
  std::vector<ScoredDoc> heap_;
};

// Probes the non-essential lists cur[0..first_ess) at d from the largest bound down, adding their
// contributions to `partial`, and pushes d unless partial plus the remaining block maxima
// (ne[i]: prefix sums at d) cannot beat thr. The sheet is cleared either way. True when pushed.
template <BlockMaxCursor C>
bool ProbeAndPush(C* const* cur, size_t first_ess, uint32_t d, float partial, const float* ne, ScoreSheet& sheet,
                  TopKHeap& topk, float slack, float thr, QueryStats& stats) {
  for (size_t i = first_ess; i-- > 0;) {
    if ((partial + ne[i]) * slack <= thr) {
      sheet.clear();
      return false;
    }
    cur[i]->next_geq(d);
    if (cur[i]->doc() == d) {
      const float c = cur[i]->score();
      sheet.set(cur[i]->slot(), c);
      partial += c;
    }
  }
  topk.Push(d, sheet.sum_and_clear());
  ++stats.postings_scored;
  return true;
}

}  // namespace search::cpu_internal
