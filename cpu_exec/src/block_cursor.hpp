// BlockCursor: a forward-only cursor over one compressed posting list (codec/ ListView), and the
// C++20 concepts the query algorithms (query_engine.hpp) require of a cursor.
//
// A cursor has a *block position* (which block it is in) and, once that block is decoded, a
// *document position* inside it. shallow_seek() moves only the block position, reading BlockMeta
// (last_doc, max_score) and decoding nothing: block-max pruning uses it to bound the scores of a
// docID range before paying for a decode. next_geq()/next() decode a block's docIDs (ListView::
// DecodeDocs, the AVX2 path) only when they must look inside it; score() decodes the block's
// frequencies (DecodeFreqs) lazily, the first time a document of that block is scored.
// Every decode is counted in the query's QueryStats. A block that fails to decode records its
// Corruption in the shared CursorEnv and leaves the cursor exhausted, so every loop ends.
//
// No position ever moves backwards: targets passed to shallow_seek/next_geq over a cursor's life
// must not decrease below what it has already passed (a smaller target is a no-op).
// Thread-safety: a cursor belongs to one query on one thread.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "codec/block_codec.hpp"
#include "core/bm25.hpp"
#include "core/status.hpp"
#include "cpu_exec/cpu_executor.hpp"

namespace search::cpu_internal {

// doc() of an exhausted cursor; larger than any docID a list can hold.
inline constexpr uint32_t kEndDoc = std::numeric_limits<uint32_t>::max();

// A DAAT posting cursor (in the spirit of pisa's concepts/posting_cursor.hpp).
template <class C>
concept PostingCursor = requires(C& c, const C& cc, uint32_t target) {
  { cc.doc() } -> std::same_as<uint32_t>;  // the current docID; kEndDoc once exhausted
  { c.next() };                            // REQUIRES: positioned on a document (not exhausted)
  { c.next_geq(target) };                  // first docID >= target; never moves backwards
  { c.score() } -> std::same_as<float>;    // BM25 contribution of the current document
  { cc.slot() } -> std::same_as<uint32_t>; // the term's index in canonical order
  { cc.size() } -> std::same_as<uint32_t>; // postings in the list
};

// A cursor that also exposes block-max metadata without decoding.
template <class C>
concept BlockMaxCursor = PostingCursor<C> && requires(C& c, const C& cc, uint32_t target) {
  { c.shallow_seek(target) };                      // block position to the first block with last_doc >= target
  { cc.blocks_exhausted() } -> std::same_as<bool>; // no block with last_doc >= the last target
  { cc.block_max_score() } -> std::same_as<float>; // upper bound of the current block's contributions
  { cc.block_last_doc() } -> std::same_as<uint32_t>;
  { cc.max_score() } -> std::same_as<float>;       // upper bound of the whole list's contributions
  { cc.decoded() } -> std::same_as<bool>;
  { cc.block_max_score_through(target) } -> std::same_as<float>;          // the current block is decoded: next_geq within it is free
};

// What every cursor of one query shares.
struct CursorEnv {
  const float* norms = nullptr;  // norms[doc - doc_begin]
  uint32_t doc_begin = 0;
  float k1 = 0.9f;
  QueryStats* stats = nullptr;
  Status* error = nullptr;  // the first decode error of the query
};

// An upper bound must be a non-negative number to be usable; anything else (a corrupted NaN or a
// negative) becomes +inf, which never prunes.
inline float SanitizeBound(float v) { return v >= 0.0f ? v : std::numeric_limits<float>::infinity(); }

class BlockCursor {
 public:
  // REQUIRES: list parsed by ListView::Parse (so count >= 1 and the metadata is consistent).
  void reset(const ListView* list, float idf, uint32_t slot, const CursorEnv* env) {
    list_ = list;
    meta_ = list->blocks();
    num_blocks_ = list->num_blocks();
    idf_ = idf;
    slot_ = slot;
    env_ = env;
    block_ = 0;
    decoded_block_ = kNoBlock;
    freq_block_ = kNoBlock;
    scores_block_ = kNoBlock;
    scores_from_ = 0;
    pos_ = 0;
    block_count_ = 0;
    doc_ = num_blocks_ == 0 ? kEndDoc : 0;  // not positioned until the first next_geq
    max_score_ = SanitizeBound(list->max_score());
  }

  uint32_t doc() const { return doc_; }
  uint32_t slot() const { return slot_; }
  uint32_t size() const { return list_->count(); }
  float idf() const { return idf_; }
  float max_score() const { return max_score_; }

  // --- block (shallow) position ---
  void shallow_seek(uint32_t target) {
    if (block_ < num_blocks_ && meta_[block_].last_doc < target) advance_blocks(target);
  }
  bool blocks_exhausted() const { return block_ >= num_blocks_; }
  // The block position's index in the list (num_blocks when exhausted).
  uint32_t block() const { return block_; }
  float block_max_score() const { return block_ < num_blocks_ ? SanitizeBound(meta_[block_].max_score) : 0.0f; }
  uint32_t block_last_doc() const { return block_ < num_blocks_ ? meta_[block_].last_doc : kEndDoc; }
  // A bound of the list over [current block, end]: the largest block maximum among the blocks
  // from the block position through the first whose last_doc >= end, or the list's maximum when
  // that would take more than kMaxBlocksScanned blocks. Reads metadata only.
  float block_max_score_through(uint32_t end) const {
    static constexpr uint32_t kMaxBlocksScanned = 32;
    float m = 0.0f;
    const uint32_t stop = num_blocks_ - block_ > kMaxBlocksScanned ? block_ + kMaxBlocksScanned : num_blocks_;
    for (uint32_t b = block_; b < stop; ++b) {
      m = std::max(m, SanitizeBound(meta_[b].max_score));
      if (meta_[b].last_doc >= end) return m;
    }
    return stop == num_blocks_ ? m : max_score_;
  }
  // True when the block position's docIDs are decoded (doc() is then a real position in it).
  bool decoded() const { return decoded_block_ == block_; }
  // Moves the block position past every block, from the current one on, whose maximum cannot beat
  // thr (block_max_score() * slack <= thr), reading metadata only; doc() is then only a lower
  // bound (that block's base) until next_geq. REQUIRES: not decoded().
  void skip_blocks_at_most(float thr, float slack) {
    // A group whose maximum cannot beat thr is passed at once; else its blocks one by one.
    const float* groups = list_->group_maxima();
    const uint32_t per_group = groups != nullptr ? ListView::kBlocksPerGroup : num_blocks_;
    uint32_t b = block_;
    while (b < num_blocks_) {
      const uint32_t group_end = std::min(num_blocks_, (b / per_group + 1) * per_group);
      if (groups != nullptr && groups[b / per_group] * slack <= thr) {
        b = group_end;
        continue;
      }
      b = FirstBlockAbove(b, group_end, thr, slack);
      if (b < group_end) break;
    }
    if (b == block_) return;
    block_ = b;
    doc_ = b < num_blocks_ ? list_->block_base(b) : kEndDoc;
  }

  // --- document position ---
  void next_geq(uint32_t target) {
    if (block_ >= num_blocks_) {
      doc_ = kEndDoc;
      return;
    }
    if (decoded_block_ == block_) {
      if (doc_ >= target) return;
      if (target <= meta_[block_].last_doc) {
        scan_to(target);
        return;
      }
    }
    if (meta_[block_].last_doc < target) {
      advance_blocks(target);
      if (block_ >= num_blocks_) {
        doc_ = kEndDoc;
        return;
      }
    }
    if (decoded_block_ != block_ && !decode_block()) return;
    scan_to(target);
  }

  void next() {
    if (++pos_ < block_count_) {
      doc_ = docs_[pos_];
      return;
    }
    if (++block_ >= num_blocks_) {
      doc_ = kEndDoc;
      return;
    }
    if (decode_block()) doc_ = docs_[0];
  }

  // REQUIRES: positioned on a document.
  uint32_t freq() { return block_freqs()[pos_]; }
  // The decoded block's term frequencies (freq() at each position, [0, block_count())), decoded
  // once a block. REQUIRES: decoded() and not exhausted.
  const uint32_t* block_freqs() {
    if (freq_block_ != block_) {
      list_->DecodeFreqs(block_, freqs_);
      freq_block_ = block_;
      QueryStats& s = *env_->stats;
      ++s.freq_blocks_decoded;
      s.bytes_touched += PackedBytes(meta_[block_].count, meta_[block_].freq_bits);
    }
    return freqs_;
  }

  float score() { return Bm25TermScore(idf_, freq(), env_->norms[doc_ - env_->doc_begin], env_->k1); }

  // --- block-at-a-time access; REQUIRES: decoded() and not exhausted ---
  uint32_t pos() const { return pos_; }
  uint32_t block_count() const { return block_count_; }
  const uint32_t* block_docs() const { return docs_; }
  // block_scores()[j] == score() at position j, for j in [pos(), block_count()): the same float
  // operations, eight lanes at a time, computed once per block (positions only move forward).
  // It points at kBlockSize floats, all readable: those outside that range mean nothing.
  const float* block_scores() {
    if (scores_block_ != block_ || scores_from_ > pos_) {
      score_rest_of_block(scores_);
      scores_block_ = block_;
      scores_from_ = pos_;
    }
    return scores_;
  }
  // block_docs()[block_count() .. block_count() + kPad) hold kEndDoc.
  static constexpr uint32_t kPad = 8;
  // Moves the document position to index p of the decoded block. REQUIRES: decoded(), pos() <= p
  // < block_count() (positions only move forward).
  void set_pos(uint32_t p) {
    pos_ = p;
    doc_ = docs_[p];
  }
  // Leaves the decoded block for the next one without decoding it; doc() is then only a lower
  // bound (the next block's base) until next_geq positions the cursor again.
  void skip_block() {
    if (++block_ >= num_blocks_) {
      doc_ = kEndDoc;
      return;
    }
    doc_ = list_->block_base(block_);
  }

 private:
  static constexpr uint32_t kNoBlock = std::numeric_limits<uint32_t>::max();

  // The first block in [b, end) whose maximum times slack beats thr, or end.
  uint32_t FirstBlockAbove(uint32_t b, uint32_t end, float thr, float slack) const {
#if defined(__AVX2__)
    // Eight blocks a step: the same float operations as the scalar loop, a lane each.
    static_assert(sizeof(BlockMeta) == 16 && offsetof(BlockMeta, max_score) == 12);
    const __m256i stride = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256 zero = _mm256_setzero_ps(), inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
    const __m256 v_slack = _mm256_set1_ps(slack), v_thr = _mm256_set1_ps(thr);
    for (; b + 8 <= end; b += 8) {
      const __m256 m = _mm256_i32gather_ps(&meta_[b].max_score, stride, 4);
      const __m256 bound = _mm256_blendv_ps(inf, m, _mm256_cmp_ps(m, zero, _CMP_GE_OQ));
      const int skip = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_mul_ps(bound, v_slack), v_thr, _CMP_LE_OQ));
      if (skip != 0xff) return b + static_cast<uint32_t>(__builtin_ctz(~static_cast<unsigned>(skip)));
    }
#endif
    while (b < end && SanitizeBound(meta_[b].max_score) * slack <= thr) ++b;
    return b;
  }

  // out[j] = score() of position j, for j in [pos(), block_count()).
  void score_rest_of_block(float* out) {
    (void)freq();
    const float idf = idf_, k1 = env_->k1, k1p1 = k1 + 1.0f;
    const float* norms = env_->norms;
    const uint32_t base = env_->doc_begin;
    uint32_t j = pos_;
#if defined(__AVX2__)
    // Gathers index with signed 32-bit offsets: only when every offset in the block fits.
    if (docs_[block_count_ - 1] - base < 0x80000000u) {
      const __m256 v_idf = _mm256_set1_ps(idf), v_k1p1 = _mm256_set1_ps(k1p1);
      const __m256i v_base = _mm256_set1_epi32(static_cast<int>(base));
      for (; j + 8 <= block_count_; j += 8) {
        const __m256i f = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(freqs_ + j));
        if (_mm256_movemask_ps(_mm256_castsi256_ps(f)) != 0) break;  // tf >= 2^31: the scalar twin converts unsigned
        const __m256i idx = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(docs_ + j)), v_base);
        const __m256 norm = _mm256_i32gather_ps(norms, idx, 4);
        const __m256 t = _mm256_cvtepi32_ps(f);
        const __m256 num = _mm256_mul_ps(t, v_k1p1);
        const __m256 den = _mm256_add_ps(t, norm);
        _mm256_storeu_ps(out + j, _mm256_div_ps(_mm256_mul_ps(v_idf, num), den));  // (idf * num) / den
      }
    }
#endif
    for (; j < block_count_; ++j) {
      const float t = static_cast<float>(freqs_[j]);
      const float num = t * k1p1;
      const float den = t + norms[docs_[j] - base];
      out[j] = idf * num / den;
    }
  }

  // REQUIRES: block_ < num_blocks_ and meta_[block_].last_doc < target. Galloping then binary
  // search over the blocks' last_doc.
  void advance_blocks(uint32_t target) {
    uint64_t lo = block_, step = 1, hi;
    for (;;) {
      hi = lo + step;
      if (hi >= num_blocks_) {
        hi = num_blocks_;
        break;
      }
      if (meta_[hi].last_doc >= target) break;
      lo = hi;
      step <<= 1;
    }
    // meta_[lo].last_doc < target; hi == num_blocks_ or meta_[hi].last_doc >= target.
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (meta_[mid].last_doc < target) lo = mid;
      else hi = mid;
    }
    block_ = static_cast<uint32_t>(hi);
  }

  // Decodes block_'s docIDs and positions on its first document. False (cursor exhausted, error
  // recorded) on Corruption.
  bool decode_block() {
    const BlockMeta& m = meta_[block_];
    QueryStats& s = *env_->stats;
    ++s.blocks_decoded;
    s.postings_decoded += m.count;
    s.bytes_touched += PackedBytes(m.count, m.doc_bits);
    Status st = list_->DecodeDocs(block_, docs_);
    if (!st.ok() || m.count == 0 || docs_[0] < env_->doc_begin) {
      if (env_->error->ok())
        *env_->error = st.ok() ? Status::Corruption("posting list docID below the shard's first document") : st;
      fail();
      return false;
    }
    // kPad values past the block's end read as kEndDoc (AndFillBlock loads eight at a time).
    std::fill(docs_ + m.count, docs_ + m.count + kPad, kEndDoc);
    decoded_block_ = block_;
    block_count_ = m.count;
    pos_ = 0;
    doc_ = docs_[0];
    return true;
  }

  // REQUIRES: the current block decoded and target <= its last_doc.
  void scan_to(uint32_t target) {
    uint32_t p = pos_;
#if defined(__AVX2__)
    // Eight docIDs per step: the position is the count of docIDs below target (they ascend).
    // Unsigned compare as signed after flipping the sign bits.
    const __m256i flip = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    const __m256i t = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int>(target)), flip);
    while (p + 8 <= block_count_) {
      const __m256i d = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(docs_ + p)), flip);
      const int below = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(t, d)));
      if (below != 0xff) {
        p += static_cast<uint32_t>(__builtin_popcount(static_cast<unsigned>(below)));
        break;
      }
      p += 8;
    }
#endif
    while (p < block_count_ && docs_[p] < target) ++p;
    if (p == block_count_) {  // the decoded block disagrees with its last_doc: DecodeDocs vouches it cannot
      if (env_->error->ok()) *env_->error = Status::Corruption("posting block shorter than its last_doc");
      fail();
      return;
    }
    pos_ = p;
    doc_ = docs_[p];
  }

  void fail() {
    block_ = num_blocks_;
    decoded_block_ = kNoBlock;
    doc_ = kEndDoc;
  }

  alignas(32) uint32_t docs_[kBlockSize + kPad];
  alignas(32) uint32_t freqs_[kBlockSize];
  alignas(32) float scores_[kBlockSize] = {};  // whole: OrQuery's ScanSingle reads 64 at a time
  const ListView* list_ = nullptr;
  const BlockMeta* meta_ = nullptr;
  const CursorEnv* env_ = nullptr;
  uint32_t num_blocks_ = 0;
  uint32_t block_ = 0;          // current block; num_blocks_ when exhausted
  uint32_t decoded_block_ = kNoBlock;
  uint32_t freq_block_ = kNoBlock;
  uint32_t scores_block_ = kNoBlock;  // the block whose scores_ [scores_from_, count) are valid
  uint32_t scores_from_ = 0;
  uint32_t pos_ = 0;            // index in docs_ of the current document
  uint32_t block_count_ = 0;    // values in the decoded block
  uint32_t doc_ = 0;
  uint32_t slot_ = 0;
  float idf_ = 0.0f;
  float max_score_ = 0.0f;
};

static_assert(BlockMaxCursor<BlockCursor>);

}  // namespace search::cpu_internal
