// Block-max MaxScore over BlockMaxCursors (block_cursor.hpp), exact.
// Lists are sorted by list max score; the prefix whose summed maxima cannot beat the threshold is
// non-essential: those lists never produce candidates, they are only probed. Before any decode the
// docID range ahead is bounded from block metadata (every non-essential list's block maximum plus
// each essential list's, or 0 up to its next document where its block is already decoded), and
// whole runs of blocks are skipped when the bound cannot beat the threshold. Past the bound:
//   * one essential list: its block is scored eight lanes at a time and only documents whose
//     score plus the non-essential maxima can beat the threshold are looked at;
//   * several: their postings in a window of at most kWindow docIDs (within their decoded blocks)
//     are scored block-wise and accumulated into a dense array; the window's documents are then
//     visited in order and only those whose accumulated score plus the non-essential maxima can
//     beat the threshold are scored exactly;
//   * until the heap is full: plain document-at-a-time.
// A document that survives is scored per term in canonical order (ScoreSheet) and non-essential
// lists are probed from the largest bound down while the partial score plus their block maxima
// can still beat the threshold (ProbeAndPush).
// Thread-safety: one OrQuery per query and thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "block_cursor.hpp"
#include "core/topk.hpp"
#include "query_engine.hpp"

namespace search::cpu_internal {

// DocIDs per accumulation window: 16 KiB of floats, L1-resident.
inline constexpr uint32_t kWindow = 4096;

struct OrBuffers {
  float* ub;       // n floats
  float* ne;       // n floats
  float* acc;      // kWindow floats, all 0 between uses
  uint64_t* bits;  // kWindow / 64 words, all 0 between uses
};

template <BlockMaxCursor C>
class OrQuery {
 public:
  // REQUIRES: cur[0..n) sorted by max_score ascending, n >= 1, every list non-empty.
  OrQuery(C* const* cur, size_t n, ScoreSheet& sheet, TopKHeap& topk, float slack, OrBuffers buf, QueryStats& stats)
      : cur_(cur), n_(n), sheet_(sheet), topk_(topk), slack_(slack), buf_(buf), stats_(stats) {}

  void Run() {
    float acc = 0.0f;
    for (size_t i = 0; i < n_; ++i) {
      acc += cur_[i]->max_score();
      buf_.ub[i] = acc;  // bound of any document that only lists 0..i hold
      cur_[i]->next_geq(0);
    }
    uint32_t pivot = MinEssential();
    while (pivot != kEndDoc) {
      if (topk_.full()) {
        uint32_t end;
        if (!BoundAdmits(pivot, &end)) {
          if (end == kEndDoc) return;
          pivot = end + 1;
          continue;
        }
      }
      // The bound admits a document at pivot or later: position the essential lists for real.
      uint32_t d = kEndDoc;
      for (size_t i = first_ess_; i < n_; ++i) {
        cur_[i]->next_geq(pivot);
        d = std::min(d, cur_[i]->doc());
      }
      if (d == kEndDoc) return;
      if (d != pivot) {
        pivot = d;  // bound again at the real candidate
        continue;
      }
      if (topk_.full()) {
        const bool more = first_ess_ + 1 == n_ ? ScanSingle(&pivot) : ScanWindow(&pivot);
        if (!more) return;
        continue;
      }
      // Heap not full yet (so every list is essential): document at a time.
      for (size_t i = first_ess_; i < n_; ++i) {
        if (cur_[i]->doc() != d) continue;
        sheet_.set(cur_[i]->slot(), cur_[i]->score());
        cur_[i]->next();
      }
      topk_.Push(d, sheet_.sum_and_clear());
      ++stats_.postings_scored;
      if (!UpdateThreshold()) return;
      pivot = MinEssential();
    }
  }

 private:
  uint32_t MinEssential() const {
    uint32_t m = kEndDoc;
    for (size_t i = first_ess_; i < n_; ++i) m = std::min(m, cur_[i]->doc());
    return m;
  }

  // After a push: follows a new threshold; false when no list is essential any more (done).
  bool UpdateThreshold() {
    if (!topk_.full() || topk_.Threshold() == thr_) return true;
    thr_ = topk_.Threshold();
    while (first_ess_ < n_ && buf_.ub[first_ess_] * slack_ <= thr_) ++first_ess_;
    return first_ess_ < n_;
  }

  // Bounds every document in [pivot, *end] from metadata and decoded blocks only (nothing is
  // decoded); fills ne[] with the non-essential block maxima's prefix sums at pivot. True when
  // the bound can beat the threshold.
  bool BoundAdmits(uint32_t pivot, uint32_t* end_out) {
    if (n_ == 1) {  // one list: every block that cannot beat the threshold, skipped in one scan
      C& c = *cur_[0];
      c.shallow_seek(pivot);
      if (!c.decoded()) c.skip_blocks_at_most(thr_, slack_);
    }
    float bound = 0.0f;
    uint32_t end = kEndDoc;
    for (size_t i = 0; i < first_ess_; ++i) {
      C& c = *cur_[i];
      c.shallow_seek(pivot);
      if (!c.blocks_exhausted()) {
        bound += c.block_max_score();
        end = std::min(end, c.block_last_doc());
      }
      buf_.ne[i] = bound;
    }
    for (size_t i = first_ess_; i < n_; ++i) {
      C& c = *cur_[i];
      c.shallow_seek(pivot);
      if (c.blocks_exhausted()) continue;
      if (c.decoded()) {
        c.next_geq(pivot);  // within the decoded block: a scan, no decode
        if (c.doc() > pivot) {
          end = std::min(end, c.doc() - 1);  // nothing from this list before its next document
          continue;
        }
      }
      bound += c.block_max_score();
      end = std::min(end, c.block_last_doc());
    }
    *end_out = end;
    return bound * slack_ > thr_;
  }

  // Fills ne[] with the non-essential block maxima's prefix sums at d; returns their total.
  float NonEssentialBlockMax(uint32_t d) {
    float acc = 0.0f;
    for (size_t i = 0; i < first_ess_; ++i) {
      cur_[i]->shallow_seek(d);
      acc += cur_[i]->block_max_score();  // 0 once the list has no block left
      buf_.ne[i] = acc;
    }
    return acc;
  }

  // The non-essential lists' bound over [from, to] from block metadata (shallow seeks to from).
  float NonEssentialRangeMax(uint32_t from, uint32_t to) {
    float acc = 0.0f;
    for (size_t i = 0; i < first_ess_; ++i) {
      cur_[i]->shallow_seek(from);
      acc += cur_[i]->block_max_score_through(to);
    }
    return acc;
  }

  // Bit j set when a[j] + ne_max might beat the threshold: not ((a[j] + ne_max) * slack <= thr).
  uint64_t PassMask(const float* a, float ne_max) const {
    uint64_t mask = 0;
#if defined(__AVX2__)
    const __m256 v_ne = _mm256_set1_ps(ne_max), v_slack = _mm256_set1_ps(slack_), v_thr = _mm256_set1_ps(thr_);
    for (uint32_t c = 0; c < 8; ++c) {
      const __m256 bound = _mm256_mul_ps(_mm256_add_ps(_mm256_loadu_ps(a + 8 * c), v_ne), v_slack);
      const int keep = _mm256_movemask_ps(_mm256_cmp_ps(bound, v_thr, _CMP_NLE_UQ));
      mask |= static_cast<uint64_t>(static_cast<uint32_t>(keep)) << (8 * c);
    }
#else
    for (uint32_t j = 0; j < 64; ++j)
      if (!((a[j] + ne_max) * slack_ <= thr_)) mask |= uint64_t{1} << j;
#endif
    return mask;
  }

  // One essential list, positioned (decoded) at *pivot: finishes its block. False when done.
  bool ScanSingle(uint32_t* pivot) {
    C& e = *cur_[n_ - 1];
    const uint32_t* docs = e.block_docs();
    const uint32_t count = e.block_count();
    const uint32_t last = docs[count - 1];
    const float* scores = e.block_scores();
    float ne_max = NonEssentialRangeMax(docs[e.pos()], last);
    // 64 positions at a time: the survivors of (score + ne_max) * slack <= thr, eight lanes a step
    // (scores[] is a whole block's array: lanes outside [pos, count) are masked off).
    for (uint32_t w = e.pos() / 64; 64 * w < count; ++w) {
      const uint32_t from = std::max(e.pos(), 64 * w), to = std::min(count, 64 * w + 64);
      const uint64_t valid = (to - 64 * w == 64 ? ~uint64_t{0} : (uint64_t{1} << (to - 64 * w)) - 1) &
                             ~((uint64_t{1} << (from - 64 * w)) - 1);
      uint64_t pass = valid & PassMask(scores + 64 * w, ne_max);
      while (pass != 0) {
        const uint32_t j = 64 * w + static_cast<uint32_t>(__builtin_ctzll(pass));
        pass &= pass - 1;
        const float c = scores[j];
        const uint32_t doc = docs[j];
        if ((c + NonEssentialBlockMax(doc)) * slack_ <= thr_) continue;
        sheet_.set(e.slot(), c);
        if (ProbeAndPush(cur_, first_ess_, doc, c, buf_.ne, sheet_, topk_, slack_, thr_, stats_)) {
          if (!UpdateThreshold()) return false;
          ne_max = NonEssentialRangeMax(doc, last);
          pass &= PassMask(scores + 64 * w, ne_max);  // the rest of the word, against the new bound
        }
      }
    }
    e.skip_block();
    *pivot = e.blocks_exhausted() ? kEndDoc : last + 1;
    return true;
  }

  // Several essential lists, positioned (decoded) with the smallest at *pivot: accumulates their
  // postings in [pivot, wend] and scores the documents that can beat the threshold. False when done.
  bool ScanWindow(uint32_t* pivot) {
    const uint32_t p = *pivot;
    uint32_t wend = p + std::min<uint32_t>(kWindow - 1, kEndDoc - 1 - p);
    for (size_t i = first_ess_; i < n_; ++i) {
      const C& c = *cur_[i];
      if (c.doc() <= wend) wend = std::min(wend, c.block_last_doc());  // stay inside decoded blocks
    }
    float* acc = buf_.acc;
    uint64_t* bits = buf_.bits;
    for (size_t i = first_ess_; i < n_; ++i) {
      C& c = *cur_[i];
      if (c.doc() > wend) continue;
      const float* scores = c.block_scores();
      const uint32_t* docs = c.block_docs();
      const uint32_t count = c.block_count();
      for (uint32_t j = c.pos(); j < count && docs[j] <= wend; ++j) {
        const uint32_t off = docs[j] - p;
        acc[off] += scores[j];
        bits[off >> 6] |= uint64_t{1} << (off & 63);
      }
    }
    bool done = false;
    float ne_max = NonEssentialRangeMax(p, wend);
    const uint32_t words = (wend - p) / 64 + 1;
    for (uint32_t w = 0; w < words; ++w) {
      const uint64_t m = bits[w];
      if (m == 0) continue;
      bits[w] = 0;
      float* a = acc + 64 * w;
      // Survivors: documents whose accumulated score plus the non-essential bound can beat thr;
      // a sparse word is tested bit by bit, a dense one eight lanes at a time.
      const bool sparse = __builtin_popcountll(m) <= 8;
      uint64_t pass = 0;
      if (done) {
      } else if (sparse) {
        for (uint64_t r = m; r != 0; r &= r - 1) {
          const uint32_t j = static_cast<uint32_t>(__builtin_ctzll(r));
          if (!((a[j] + ne_max) * slack_ <= thr_)) pass |= uint64_t{1} << j;
        }
      } else {
        pass = m & PassMask(a, ne_max);
      }
      while (pass != 0) {
        const uint32_t j = static_cast<uint32_t>(__builtin_ctzll(pass));
        pass &= pass - 1;
        const uint32_t doc = p + 64 * w + j;
        if ((a[j] + NonEssentialBlockMax(doc)) * slack_ <= thr_) continue;
        float partial = 0.0f;
        for (size_t i = first_ess_; i < n_; ++i) {
          C& c = *cur_[i];
          c.next_geq(doc);  // inside the decoded block (doc <= wend): a scan
          if (c.doc() != doc) continue;
          const float v = c.block_scores()[c.pos()];
          sheet_.set(c.slot(), v);
          partial += v;
        }
        if (ProbeAndPush(cur_, first_ess_, doc, partial, buf_.ne, sheet_, topk_, slack_, thr_, stats_)) {
          if (!UpdateThreshold()) {
            done = true;  // keep clearing acc and bits
            break;
          }
          ne_max = NonEssentialRangeMax(doc, wend);
        }
      }
      if (sparse) {
        for (uint64_t r = m; r != 0; r &= r - 1) a[__builtin_ctzll(r)] = 0.0f;
      } else {
        for (uint32_t c = 0; c < 8; ++c)
          if (((m >> (8 * c)) & 0xff) != 0) std::fill(a + 8 * c, a + 8 * c + 8, 0.0f);
      }
    }
    if (done) return false;
    // Move the essential lists past the window; a block used up is left undecoded.
    for (size_t i = first_ess_; i < n_; ++i) {
      C& c = *cur_[i];
      if (c.blocks_exhausted() || c.doc() > wend) continue;
      if (c.block_last_doc() <= wend) c.skip_block();
      else c.next_geq(wend + 1);
    }
    *pivot = wend + 1;  // kEndDoc when wend was the largest possible docID: then all is done
    return true;
  }

  C* const* cur_;
  const size_t n_;
  ScoreSheet& sheet_;
  TopKHeap& topk_;
  const float slack_;
  OrBuffers buf_;
  QueryStats& stats_;
  size_t first_ess_ = 0;  // lists [first_ess_, n_) are essential; > 0 only once the heap is full
  float thr_ = -std::numeric_limits<float>::infinity();
};

}  // namespace search::cpu_internal
