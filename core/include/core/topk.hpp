// Top-k selection in the order docs/SCORING.md fixes: score descending, ties by smaller docID.
// TopK keeps the k best (score, doc) pairs seen so far in a bounded heap.
// MergeTopK merges per-shard top-k lists into the global top-k.
// Thread-safety: TopK is not thread-safe; one per query.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace search {

struct ScoredDoc {
  uint32_t doc = 0;  // global docID
  float score = 0.0f;
  bool operator==(const ScoredDoc&) const = default;
};

// True when a ranks before b: higher score, or equal score and smaller docID.
inline bool RanksBefore(const ScoredDoc& a, const ScoredDoc& b) {
  return a.score > b.score || (a.score == b.score && a.doc < b.doc);
}

class TopK {
 public:
  // REQUIRES: k >= 1.
  explicit TopK(uint32_t k) : k_(k) { heap_.reserve(std::min<uint32_t>(k, 1u << 16)); }

  uint32_t k() const { return k_; }
  size_t size() const { return heap_.size(); }
  bool full() const { return heap_.size() >= k_; }

  // The score a new document must beat to enter: -inf until k documents are held. A document
  // whose docID is larger than all held ones enters only if its score is strictly greater
  // (ties go to the smaller docID), so DAAT engines may prune any candidate whose upper bound
  // is <= Threshold().
  float Threshold() const { return full() ? heap_.front().score : -std::numeric_limits<float>::infinity(); }

  // Offers a document; keeps it if it ranks before the current k-th.
  void Push(uint32_t doc, float score) {
    ScoredDoc d{doc, score};
    if (heap_.size() < k_) {
      heap_.push_back(d);
      std::push_heap(heap_.begin(), heap_.end(), RanksBefore);
    } else if (RanksBefore(d, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), RanksBefore);
      heap_.back() = d;
      std::push_heap(heap_.begin(), heap_.end(), RanksBefore);
    }
  }

  // The held documents, best first. Leaves the TopK empty.
  std::vector<ScoredDoc> TakeSorted() {
    std::sort(heap_.begin(), heap_.end(), RanksBefore);
    return std::move(heap_);
  }

 private:
  uint32_t k_;
  std::vector<ScoredDoc> heap_;  // max-heap under RanksBefore: front() is the worst held
};

// Merges already-sorted lists (each best first) into the best k overall.
inline std::vector<ScoredDoc> MergeTopK(std::span<const std::vector<ScoredDoc>> lists, uint32_t k) {
  std::vector<ScoredDoc> all;
  for (const auto& l : lists) all.insert(all.end(), l.begin(), l.end());
  const size_t keep = std::min<size_t>(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), RanksBefore);
  all.resize(keep);
  return all;
}

}  // namespace search
