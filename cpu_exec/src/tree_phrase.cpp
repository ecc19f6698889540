#include "tree_phrase.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "and_query.hpp"
#include "block_cursor.hpp"
#include "codec/positions_codec.hpp"
#include "core/score_slack.hpp"
#include "query_engine.hpp"

namespace search::cpu_internal {

namespace {

// Covers the float rounding of a token score scaled by idf_phrase / idf_token against the
// phrase's own score (a few ulps; the tree evaluator's PhraseNode uses the same margin).
constexpr float kPhraseBoundMargin = 1.0f + 1e-5f;

#if defined(__AVX2__)
// MatchLanes(a, b) and MatchLanes(b, a) from one set of compares: *ma gets the lanes of a equal to
// some lane of b, *mb the lanes of b equal to some lane of a. Each compare of a against b rotated
// (within the 128-bit halves, then with the halves swapped) is rotated back onto b's lanes.
inline void MatchBoth(__m256i a, __m256i b, unsigned* ma, unsigned* mb) {
  const __m256i s = _mm256_permute2x128_si256(b, b, 1);  // b's halves swapped
  const __m256i e0 = _mm256_cmpeq_epi32(a, b);
  const __m256i e1 = _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(b, _MM_SHUFFLE(0, 3, 2, 1)));
  const __m256i e2 = _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(b, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m256i e3 = _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(b, _MM_SHUFFLE(2, 1, 0, 3)));
  const __m256i e4 = _mm256_cmpeq_epi32(a, s);
  const __m256i e5 = _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(s, _MM_SHUFFLE(0, 3, 2, 1)));
  const __m256i e6 = _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m256i e7 = _mm256_cmpeq_epi32(a, _mm256_shuffle_epi32(s, _MM_SHUFFLE(2, 1, 0, 3)));
  const __m256i any_a = _mm256_or_si256(_mm256_or_si256(_mm256_or_si256(e0, e1), _mm256_or_si256(e2, e3)),
                                        _mm256_or_si256(_mm256_or_si256(e4, e5), _mm256_or_si256(e6, e7)));
  // Lane l of e1 compared b's lane l + 1 (mod 4, in its half): b's lane m is lane m - 1 of e1.
  const __m256i in_b = _mm256_or_si256(_mm256_or_si256(e0, _mm256_shuffle_epi32(e1, _MM_SHUFFLE(2, 1, 0, 3))),
                                       _mm256_or_si256(_mm256_shuffle_epi32(e2, _MM_SHUFFLE(1, 0, 3, 2)),
                                                       _mm256_shuffle_epi32(e3, _MM_SHUFFLE(0, 3, 2, 1))));
  const __m256i in_s = _mm256_or_si256(_mm256_or_si256(e4, _mm256_shuffle_epi32(e5, _MM_SHUFFLE(2, 1, 0, 3))),
                                       _mm256_or_si256(_mm256_shuffle_epi32(e6, _MM_SHUFFLE(1, 0, 3, 2)),
                                                       _mm256_shuffle_epi32(e7, _MM_SHUFFLE(0, 3, 2, 1))));
  *ma = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(any_a)));
  *mb = static_cast<unsigned>(
      _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(in_b, _mm256_permute2x128_si256(in_s, in_s, 1)))));
}
#endif

// RunPair looks each document of the shortest list up in the second shortest's block (instead of
// merging the two blocks) when the second list is at least this many times longer.
constexpr uint32_t kProbeRatio = 2;

// Values readable past the end of a start list or of a token's positions (eight-lane loads).
constexpr uint32_t kMergePad = 8;
// Positions above this take the scalar merge (start + shift never wraps in 32 bits below it).
constexpr uint32_t kMaxSimdPosition = 0xffffff00u;

// Keeps the starts s[0, live) for which s + shift is in b[0, nb) (both strictly ascending, both
// readable kMergePad values past their ends); returns how many, compacted in order. AVX2: eight
// against eight (MatchLanes), lanes past either end masked (b's by a value no start + shift can
// equal: every value <= kMaxSimdPosition); else a branch-free merge.
uint32_t KeepShifted(uint32_t* s, uint32_t live, const uint32_t* b, uint32_t nb, uint32_t shift, bool simd) {
  uint32_t x = 0, y = 0, out = 0;
#if defined(__AVX2__)
  if (simd && live <= 8 && nb <= 8) {  // the usual tfs: one compare, then the kept lanes compacted
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i va = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)),
                                        _mm256_set1_epi32(static_cast<int>(shift)));
    __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    vb = _mm256_or_si256(vb, _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(nb) - 1)));
    for (unsigned keep = MatchLanes(va, vb) & ((1u << live) - 1); keep != 0; keep &= keep - 1)
      s[out++] = s[__builtin_ctz(keep)];
    return out;
  }
  if (simd && live + nb >= 16) {
    const __m256i v_shift = _mm256_set1_epi32(static_cast<int>(shift));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i none = _mm256_set1_epi32(-1);
    unsigned acc = 0;
    while (x < live && y < nb) {
      const uint32_t va_n = std::min(8u, live - x), vb_n = std::min(8u, nb - y);
      const __m256i va = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + x)), v_shift);
      __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + y));
      // Lanes at or past vb_n read as 0xffffffff.
      vb = _mm256_blendv_epi8(none, vb, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(vb_n)), lane));
      acc |= MatchLanes(va, vb);
      const uint32_t la = s[x + va_n - 1] + shift, lb = b[y + vb_n - 1];
      if (lb <= la) y += vb_n;
      if (la <= lb || y >= nb) {
        for (unsigned keep = acc & ((1u << va_n) - 1); keep != 0; keep &= keep - 1)
          s[out++] = s[x + static_cast<uint32_t>(__builtin_ctz(keep))];
        x += va_n;
        acc = 0;
      }
    }
    return out;
  }
#else
  (void)simd;
#endif
  while (x < live && y < nb) {
    const uint64_t want = uint64_t{s[x]} + shift, have = b[y];
    s[out] = s[x];
    out += static_cast<uint32_t>(want == have);
    x += static_cast<uint32_t>(want <= have);
    y += static_cast<uint32_t>(have <= want);
  }
  return out;
}

// One distinct token of the phrase: its cursor and its positions, decoded a block at a time.
struct Token {
  BlockCursor cursor;
  const ListView* list = nullptr;
  const PositionsView* positions = nullptr;
  float ratio = 0.0f;  // idf_phrase / idf_token (0 when idf_token is 0: no bound from this token)
  uint32_t decoded_block = kEndDoc;
  std::vector<uint32_t> offsets, pos;  // pos: the block's values (below), then kMergePad readable ones
  size_t pos_size = 0;                 // the block's values in pos
  // pos holds PositionsView::DecodeBlockSums' running sums (EnsureBlock, when they fit): posting
  // i's positions are pos[k] - Base(i); else the positions themselves (Base(i) == 0).
  bool sums = false;
  bool simd_ok = false;  // every position <= kMaxSimdPosition
  bool small = false;    // every value in pos below 2^31: a shifted compare cannot wrap (VisitBatch)
  // EnsurePostings' last call: block postings_block's postings whose bit is set in postings_mask
  // hold their positions in pos (the others not).
  uint32_t postings_block = kEndDoc;
  uint64_t postings_mask[2] = {0, 0};
  uint32_t Base(uint32_t i) const { return sums ? PositionsView::SumsBase(offsets.data(), pos.data(), i) : 0; }
};

// How many a[x] (x < na) have a[x] + shift in b[0, nb) (both strictly ascending, both readable
// kMergePad values past their ends): the two-slot phrase's tf without writing starts.
uint32_t CountShifted(const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb, uint32_t shift, bool simd) {
  uint32_t x = 0, y = 0, hits = 0;
#if defined(__AVX2__)
  if (simd) {
    const __m256i v_shift = _mm256_set1_epi32(static_cast<int>(shift));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i none = _mm256_set1_epi32(-1);
    if (na <= 8 && nb <= 8) {  // one compare, no loop (the usual tfs)
      const __m256i va = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)), v_shift);
      __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
      vb = _mm256_blendv_epi8(none, vb, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nb)), lane));
      return static_cast<uint32_t>(__builtin_popcount(MatchLanes(va, vb) & ((1u << na) - 1)));
    }
    while (x < na && y < nb) {
      const uint32_t va_n = std::min(8u, na - x), vb_n = std::min(8u, nb - y);
      const __m256i va = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + x)), v_shift);
      __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + y));
      vb = _mm256_blendv_epi8(none, vb, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(vb_n)), lane));
      // A start matches one value of b at most, so counting per chunk pair counts each once.
      hits += static_cast<uint32_t>(__builtin_popcount(MatchLanes(va, vb) & ((1u << va_n) - 1)));
      const uint32_t la = a[x + va_n - 1] + shift, lb = b[y + vb_n - 1];
      if (lb <= la) y += vb_n;
      if (la <= lb) x += va_n;
    }
    return hits;
  }
#else
  (void)simd;
#endif
  while (x < na && y < nb) {
    const uint64_t want = uint64_t{a[x]} + shift, have = b[y];
    hits += static_cast<uint32_t>(want == have);
    x += static_cast<uint32_t>(want <= have);
    y += static_cast<uint32_t>(have <= want);
  }
  return hits;
}

// CountShifted(a, na, b, nb, shift, simd) (same readable padding), with the usual cases inline and
// without a data-dependent branch inside a chunk: when one side holds at most eight values, its
// one vector is compared eight against eight (MatchLanes) with each chunk of the other side; lanes
// past an end are masked (b's read as 0xffffffff). REQUIRES: no a[x] + shift equals 0xffffffff
// (a[x] <= kMaxSimdPosition and shift 1, or every a[x] + shift below 2^32 - 1 without wrapping);
// a shift other than 1 only with simd under AVX2 (the scalar merge adds in 64 bits).
inline uint32_t PairTf(const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb, uint32_t shift, bool simd) {
#if defined(__AVX2__)
  if (simd && (na <= 8 || nb <= 8)) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i one = _mm256_set1_epi32(static_cast<int>(shift));
    auto load_b = [&](uint32_t y) {  // b[y, y + 8), lanes at or past nb as 0xffffffff
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + y));
      return _mm256_or_si256(vb, _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(nb - y) - 1)));
    };
    if (na <= 8) {  // each a[x] + shift equals one b value at most: OR the chunks' masks
      const __m256i va = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)), one);
      unsigned mask = 0;
      for (uint32_t y = 0; y < nb; y += 8) mask |= MatchLanes(va, load_b(y));
      return static_cast<uint32_t>(__builtin_popcount(mask & ((1u << na) - 1)));
    }
    const __m256i vb = load_b(0);  // nb <= 8: each chunk of a against it
    uint32_t hits = 0;
    for (uint32_t x = 0; x < na; x += 8) {
      const __m256i va = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + x)), one);
      const uint32_t live = std::min(8u, na - x);
      hits += static_cast<uint32_t>(__builtin_popcount(MatchLanes(va, vb) & ((1u << live) - 1)));
    }
    return hits;
  }
#endif
  return CountShifted(a, na, b, nb, shift, simd);
}

#if defined(__AVX2__)
// The two-slot phrase's tf at one common document when both tokens hold running sums
// (Token::sums): posting 1's values s1[f1 .. f1 + n1), posting 2's s2[f2 .. f2 + n2), each a
// position plus its posting's base (the sum before the posting, plus one). Positions p1 + 1 == p2
// exactly when v1 + (b2 - b1 + 1) == v2 in 32 bits (every value below 2^30: no wrap, and no
// v1 + shift reads as 0xffffffff, the padding). Both tfs at most eight, the usual case: one
// eight-against-eight compare without a branch on the values. REQUIRES: kMergePad readable values
// past each posting's; n1, n2 >= 1.
// loadu(kTail + 8 - n): lanes at or past n all ones, the others zero (0 <= n <= 8).
alignas(32) constexpr int32_t kTail[16] = {0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1};

// v[0, n) (n <= 8, readable eight values) with the lanes at or past n as 0xffffffff.
inline __m256i LoadMasked(const uint32_t* v, uint32_t n) {
  return _mm256_or_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v)),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTail + 8 - n)));
}

[[gnu::noinline]] uint32_t SumsPairTfLong(const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb,
                                          uint32_t shift) {
  return PairTf(a, na, b, nb, shift, true);
}

// Whether some a[x] + shift is in b[0, nb): PairTf's chunks against one vector when a side holds at
// most eight values, else CountShifted's SIMD merge, stopping at the first match (a count needs no
// more). Same REQUIRES as PairTf with simd under AVX2.
[[gnu::noinline]] bool AnyShiftedLong(const uint32_t* a, uint32_t na, const uint32_t* b, uint32_t nb,
                                      uint32_t shift) {
  if (na <= 8 || nb <= 8) return PairTf(a, na, b, nb, shift, true) != 0;  // no branch on the values
  const __m256i v_shift = _mm256_set1_epi32(static_cast<int>(shift));
  uint32_t x = 0, y = 0;
  while (x < na && y < nb) {
    const uint32_t va_n = std::min(8u, na - x), vb_n = std::min(8u, nb - y);
    const __m256i va = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + x)), v_shift);
    if ((MatchLanes(va, LoadMasked(b + y, vb_n)) & ((1u << va_n) - 1)) != 0) return true;
    const uint32_t la = a[x + va_n - 1] + shift, lb = b[y + vb_n - 1];
    if (lb <= la) y += vb_n;
    if (la <= lb) x += va_n;
  }
  return false;
}

// b2 - b1 + 1 of the comment above: what posting 1's sums are shifted by to meet posting 2's.
inline uint32_t SumsShift(const uint32_t* s1, uint32_t f1, const uint32_t* s2, uint32_t f2) {
  const uint32_t b1 = f1 == 0 ? 0 : s1[f1 - 1];
  const uint32_t b2 = f2 == 0 ? 0 : s2[f2 - 1];
  return b2 - b1 + 1;
}

// Both tfs at most eight: the lanes x < n1 whose a[x] + shift is among b[0, n2).
inline uint32_t ShortPairLanes(const uint32_t* a, uint32_t n1, const uint32_t* b, uint32_t n2, uint32_t shift) {
  const __m256i va = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)),
                                      _mm256_set1_epi32(static_cast<int>(shift)));
  return MatchLanes(va, LoadMasked(b, n2)) & ((1u << n1) - 1);
}

// SumsPairTf(...) != 0, stopping at the first match when a tf is above eight; `gap` >= 1: whether
// posting 2 holds some position p1 + gap (p1 one of posting 1's), 1 for two consecutive slots.
// When one posting holds one or two values (the usual rarer token), each is broadcast against the
// other's values eight at a time (v1 + shift == v2 exactly when v2 - shift == v1, in 32 bits), the
// lanes past its end masked out of the result; else the first positions are compared first (in
// "1913 webster" they are most documents' match).
inline bool SumsPairAny(const uint32_t* s1, uint32_t f1, uint32_t n1, const uint32_t* s2, uint32_t f2, uint32_t n2,
                        uint32_t gap = 1) {
  const uint32_t shift = SumsShift(s1, f1, s2, f2) + (gap - 1);  // v1 + shift = p1 + gap + b2 + 1
  const bool a_short = n1 <= n2;
  const uint32_t short_n = a_short ? n1 : n2;
  if (short_n <= 2) [[likely]] {
    const uint32_t* const sp = a_short ? s1 + f1 : s2 + f2;
    const uint32_t* const lp = a_short ? s2 + f2 : s1 + f1;
    const uint32_t long_n = a_short ? n2 : n1;
    const uint32_t d = a_short ? shift : 0u - shift;
    const __m256i x0 = _mm256_set1_epi32(static_cast<int>(sp[0] + d));
    const __m256i x1 = _mm256_set1_epi32(static_cast<int>(sp[short_n - 1] + d));
    unsigned hit = 0;
    uint32_t y = 0;
    for (; y + 8 < long_n; y += 8) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lp + y));
      hit |= static_cast<unsigned>(_mm256_movemask_ps(
          _mm256_castsi256_ps(_mm256_or_si256(_mm256_cmpeq_epi32(x0, v), _mm256_cmpeq_epi32(x1, v)))));
    }
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lp + y));
    hit |= static_cast<unsigned>(_mm256_movemask_ps(
               _mm256_castsi256_ps(_mm256_or_si256(_mm256_cmpeq_epi32(x0, v), _mm256_cmpeq_epi32(x1, v))))) &
           ((1u << (long_n - y)) - 1);
    return hit != 0;
  }
  if (s1[f1] + shift == s2[f2]) return true;
  if (n1 <= 8 && n2 <= 8) [[likely]]
    return ShortPairLanes(s1 + f1, n1, s2 + f2, n2, shift) != 0;
  return AnyShiftedLong(s1 + f1, n1, s2 + f2, n2, shift);
}

inline uint32_t SumsPairTf(const uint32_t* s1, uint32_t f1, uint32_t n1, const uint32_t* s2, uint32_t f2,
                           uint32_t n2) {
  const uint32_t shift = SumsShift(s1, f1, s2, f2);
  if (n1 <= 8 && n2 <= 8) [[likely]]
    return static_cast<uint32_t>(__builtin_popcount(ShortPairLanes(s1 + f1, n1, s2 + f2, n2, shift)));
  return SumsPairTfLong(s1 + f1, n1, s2 + f2, n2, shift);
}
#endif

#if defined(__AVX2__)
// The lanes set in `mask` (eight bits), in ascending order, packed into the low lanes; the other
// lanes are unspecified.
inline __m256i LaneIndexes(unsigned mask) {
  static constexpr auto kTable = [] {
    std::array<uint64_t, 256> t{};
    for (unsigned m = 0; m < 256; ++m) {
      unsigned k = 0;
      for (unsigned lane = 0; lane < 8; ++lane)
        if (m & (1u << lane)) t[m] |= uint64_t{lane} << (8 * k++);
    }
    return t;
  }();
  return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kTable[mask])));
}
#endif

class SolePhrase {
 public:
  // norm_floor: no document's norm is below it (Bm25Norm of length 0 under the norms' params).
  SolePhrase(std::vector<std::unique_ptr<Token>> tokens, std::vector<uint32_t> slots, float idf, bool scored,
             float norm_floor, const CursorEnv* env)
      : tokens_(std::move(tokens)), slots_(std::move(slots)), idf_(idf), scored_(scored), norm_floor_(norm_floor),
        env_(env) {
    for (uint32_t tf = 1; tf < kCeilings; ++tf) ceiling_[tf] = Bm25TermScore(idf_, tf, norm_floor_, env_->k1);
    for (auto& t : tokens_) order_.push_back(t.get());
    std::sort(order_.begin(), order_.end(),
              [](const Token* a, const Token* b) { return a->cursor.size() < b->cursor.size(); });
    spans_.resize(slots_.size());
    scratch_.resize(std::max<size_t>(slots_.size(), 2));
    // The two shortest lists' slots, when their tokens hold one slot each (KeepPairMatches).
    if (order_.size() >= 2 && slots_.size() >= 3) {
      int at[2] = {-1, -1}, seen[2] = {0, 0};
      for (size_t i = 0; i < slots_.size(); ++i)
        for (int o = 0; o < 2; ++o)
          if (tokens_[slots_[i]].get() == order_[o]) {
            at[o] = static_cast<int>(i);
            ++seen[o];
          }
      if (seen[0] == 1 && seen[1] == 1) {
        pair_a_first_ = at[0] < at[1];
        pair_gap_ = static_cast<uint32_t>(pair_a_first_ ? at[1] - at[0] : at[0] - at[1]);
      }
    }
  }

  // Visits every match; k == 0: the count only.
  void Run(uint32_t k, bool count, uint64_t* total, std::vector<ScoredDoc>* hits) {
    TopKHeap topk(std::max(k, 1u));
    topk_ = &topk;
    k_ = k;
    count_ = count;
    slack_ = ScoreSlack(order_.size());
#if defined(__AVX2__)
    if (order_.size() >= 2) {
      RunPair();
    } else {
      RunLeapfrog();
    }
#else
    RunLeapfrog();
#endif
    *total = matches_;
    if (k > 0) *hits = topk.TakeSorted();
  }

 private:
  // Without a count and with the heap full: *d moved past docID ranges whose block-max bound
  // cannot win (metadata only). False when nothing from *d on can match.
  bool SkipRanges(uint32_t* d) {
    while (full_ && !count_ && *d > bound_end_) {
      uint32_t end = kEndDoc;
      float bound = std::numeric_limits<float>::infinity();
      for (Token* t : order_) {
        BlockCursor& c = t->cursor;
        c.shallow_seek(*d);
        if (c.blocks_exhausted()) return false;
        end = std::min(end, c.block_last_doc());
        if (t->ratio > 0.0f) bound = std::min(bound, c.block_max_score() * t->ratio * kPhraseBoundMargin);
      }
      if (!scored_) bound = 0.0f;
      if (bound * slack_ > thr_) {
        bound_end_ = end;
        return true;
      }
      if (end == kEndDoc) return false;
      *d = end + 1;
    }
    return true;
  }

  // Every distinct token's cursor is on document d: counts and scores it. False on Corruption.
  // With a count every common document's tf is needed anyway, so the exact score decides; without
  // one, a document whose bound cannot enter the top k is skipped before its positions are read.
  bool Visit(uint32_t d) {
    if (!count_ && full_) {
      if (!scored_) return true;
      // The phrase's tf is at most each token's (every start needs its own occurrence of each),
      // and BM25 grows with tf: the score at the smallest token tf bounds it (one BM25).
      uint32_t tf_bound = std::numeric_limits<uint32_t>::max();
      for (Token* t : order_) tf_bound = std::min(tf_bound, t->cursor.freq());
      if (Ceiling(tf_bound) * kPhraseBoundMargin * slack_ <= thr_) return true;  // no norm read
      const float bound = Bm25TermScore(idf_, tf_bound, env_->norms[d - env_->doc_begin], env_->k1) * kPhraseBoundMargin;
      if (bound * slack_ <= thr_) return true;
    }
    const uint32_t tf = Tf();
    if (!env_->error->ok()) return false;
    if (tf == 0) return true;
    if (k_ > 0) {
      Collect(d, tf);
    } else {
      ++matches_;
    }
    return true;
  }

  // Any number of distinct tokens (RunPair's work without AVX2; one distinct token with it):
  // leapfrog to each common document.
  [[gnu::noinline]] void RunLeapfrog() {
    const size_t m = order_.size();
    uint32_t d = 0;
    for (;;) {
      if (!SkipRanges(&d)) return;
      size_t agreed = 0;
      for (size_t i = 0; agreed < m; i = i + 1 == m ? 0 : i + 1) {
        BlockCursor& c = order_[i]->cursor;
        c.next_geq(d);
        const uint32_t x = c.doc();
        if (x == kEndDoc) return;
        if (x != d) {
          d = x;
          agreed = 1;
        } else {
          ++agreed;
        }
      }
      if (!Visit(d) || d + 1 == kEndDoc) return;
      ++d;
    }
  }

#if defined(__AVX2__)
  // Two or more distinct tokens: the two shortest lists' decoded blocks intersected eight docIDs
  // against eight (as the and-path's AndFillBlock), block pair by block pair.
  [[gnu::noinline]] void RunPair() {
    BlockCursor& a = order_[0]->cursor;
    BlockCursor& b = order_[1]->cursor;
    // A block pair's common documents are taken together: with a count, a two-slot phrase of two
    // tokens ("a b") by VisitBatch; otherwise each is looked up in any other list and goes
    // through Visit (VisitCandidates).
    const bool batch = count_ && slots_.size() == 2 && slots_[0] != slots_[1];
    // The second list at least kProbeRatio times the first's length: each of the first block's
    // documents is looked up in the second's block (a scan eight docIDs a step, then one compare)
    // instead of the two blocks being merged eight against eight.
    const bool probe = uint64_t{b.size()} >= uint64_t{kProbeRatio} * a.size();

    uint32_t d = 0;
    for (;;) {
      if (!SkipRanges(&d)) return;
      a.next_geq(d);
      if (a.doc() == kEndDoc) return;
      b.next_geq(a.doc());
      if (b.doc() == kEndDoc) return;
      if (b.doc() > a.doc()) {
        d = b.doc();
        if (d > a.block_last_doc()) continue;  // a's block holds nothing more in common
        a.next_geq(d);
      }
      // Their positions blocks are decoded next if the blocks share a document: their bytes
      // requested now, to arrive while the docIDs are intersected.
      if (order_[0]->decoded_block != a.block()) order_[0]->positions->PrefetchBlock(a.block());
      if (order_[1]->decoded_block != b.block()) order_[1]->positions->PrefetchBlock(b.block());
      const uint32_t* ad = a.block_docs();
      const uint32_t* bd = b.block_docs();
      const uint32_t na = a.block_count(), nb = b.block_count();
      uint32_t i = a.pos(), j = b.pos();
      uint32_t batched = 0;
      if (probe) {
        // Each docID x's chunk of eight in bd found without a branch: the number of chunks whose
        // last docID is below x, the chunks' last docIDs (bd[8c + 7]; kEndDoc, above every docID,
        // in the kPad entries past nb) compared with x sixteen at once, the chunks past nb masked.
        const uint32_t b_last = bd[nb - 1];
        const __m256i step = _mm256_setr_epi32(7, 15, 23, 31, 39, 47, 55, 63);
        const __m256i last_lo = _mm256_i32gather_epi32(reinterpret_cast<const int*>(bd), step, 4);
        const __m256i last_hi = _mm256_i32gather_epi32(reinterpret_cast<const int*>(bd) + 64, step, 4);
        const unsigned chunks = (nb + 7) / 8;
        const unsigned live = chunks >= 16 ? 0xffffu : (1u << chunks) - 1;
        for (; i < na; ++i) {
          const uint32_t x = ad[i];
          if (x > b_last) break;
          const __m256i vx = _mm256_set1_epi32(static_cast<int>(x));
          // last >= x exactly when max(last, x) == last (unsigned)
          const unsigned at_or_above =
              static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(
                  _mm256_cmpeq_epi32(_mm256_max_epu32(last_lo, vx), last_lo)))) |
              static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(
                  _mm256_cmpeq_epi32(_mm256_max_epu32(last_hi, vx), last_hi))))
                  << 8;
          j = 8 * static_cast<uint32_t>(__builtin_popcount(~at_or_above & live));
          const unsigned eq = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bd + j)), _mm256_set1_epi32(static_cast<int>(x))))));
          batch_a_[batched] = i;
          batch_b_[batched] = j + static_cast<uint32_t>(__builtin_ctz(eq | 0x100u));
          batched += static_cast<uint32_t>(eq != 0);
        }
      }
      while (!probe && i < na && j < nb) {
        // Both chunks' common lanes, compacted in order (the k-th common lane of a's chunk and of
        // b's hold the same docID), without a branch on the docIDs. Lanes past a block's end read
        // kEndDoc, which no docID equals: they match only each other, in the last chunk pair
        // (both chunks end in padding, so both advance), after every common document; dropped
        // below. At every store batched <= na (each lane of a matches once): the eight entries stay
        // inside batch_a_ / batch_b_.
        const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ad + i));
        const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bd + j));
        unsigned ma, mb;
        MatchBoth(va, vb, &ma, &mb);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(batch_a_ + batched),
                            _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i)), LaneIndexes(ma)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(batch_b_ + batched),
                            _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(j)), LaneIndexes(mb)));
        batched += static_cast<uint32_t>(__builtin_popcount(ma));
        const uint32_t la = ad[i + 7], lb = bd[j + 7];
        i += la <= lb ? 8u : 0u;
        j += lb <= la ? 8u : 0u;
      }
      while (batched > 0 && batch_a_[batched - 1] >= na) --batched;  // the padding's matches
      if (batched > 0 && !(batch ? VisitBatch(batched) : VisitCandidates(batched))) return;
      const uint32_t done = std::min(ad[na - 1], bd[nb - 1]);  // every common document up to it is done
      if (done + 1 == kEndDoc) return;
      d = done + 1;
    }
  }
#endif

  // The checks after a positions decode of token t's block j (n postings): the decode's status, the
  // block's posting count, and (unless the decode took the list's tfs for the block's: `with_tfs`)
  // each posting's number of positions against the list's tf. False, with the first error
  // recorded, when one fails.
  bool CheckDecoded(Token& t, uint32_t j, uint32_t n, Status st, bool with_tfs = false) {
    if (st.ok() && t.offsets.size() != n + 1)
      st =
          Status::Corruption("positions block " + std::to_string(j) + " holds " + std::to_string(t.offsets.size() - 1) +
                             " postings, the list's block " + std::to_string(n));
    if (st.ok() && !with_tfs) {
      const uint32_t* freqs = t.cursor.block_freqs();  // block j's; decoded once for the bounds too
      uint32_t bad = 0;
      for (uint32_t i = 0; i < n; ++i) bad |= (t.offsets[i + 1] - t.offsets[i]) ^ freqs[i];
      if (bad != 0) st = Status::Corruption("positions of a block disagree with its term frequencies");
    }
    if (!st.ok()) {
      if (env_->error->ok()) *env_->error = st;
      return false;
    }
    return true;
  }

  // Token t's positions block at its cursor's block position, decoded and checked once: posting
  // counts, and every posting's positions count equal to its tf in the list. As running sums
  // (Token::sums) when they fit below PositionsView::kSumsLimit (2^30), else as positions; simd_ok,
  // small as Token says. False on Corruption (recorded).
  bool EnsureBlock(Token& t) {
    if (t.decoded_block == t.cursor.block()) [[likely]]
      return true;
    return DecodeBlockOf(t);
  }
  // Token t's positions at its cursor's posting: already there when EnsurePostings decoded that
  // posting (KeepPairMatches' batch), else EnsureBlock. False on Corruption (recorded).
  bool EnsureAt(Token& t) {
    const uint32_t j = t.cursor.block(), p = t.cursor.pos();
    if (t.decoded_block == j || (t.postings_block == j && ((t.postings_mask[p >> 6] >> (p & 63)) & 1) != 0))
      [[likely]]
      return true;
    return DecodeBlockOf(t);
  }
  [[gnu::noinline]] bool DecodeBlockOf(Token& t) {
    BlockCursor& c = t.cursor;
    const uint32_t j = c.block();
    bool fits = false;
    // The list's tfs (decoded for the bounds anyway) delimit the postings' positions.
    const std::span<const uint32_t> tfs(c.block_freqs(), c.block_count());
    Status st = t.positions->DecodeBlockSums(j, tfs, &t.offsets, &t.pos, &fits);
    if (st.ok() && !fits) st = t.positions->DecodeBlock(j, &t.offsets, &t.pos);
    if (!CheckDecoded(t, j, c.block_count(), std::move(st), fits)) return false;
    t.decoded_block = j;
    t.postings_block = kEndDoc;
    t.pos_size = t.pos.size();
    t.sums = fits;
    uint32_t top = 0;  // each posting's values ascend: its last is its largest
    if (!fits)
      for (size_t i = 1; i < t.offsets.size(); ++i) top = std::max(top, t.pos[t.offsets[i] - 1]);
    t.simd_ok = top <= kMaxSimdPosition;
    t.small = top < (uint32_t{1} << 31);
    t.pos.resize(t.pos_size + kMergePad, 0);
    return true;
  }

  // Token t's positions at its cursor's block for the postings idx[0, count) (ascending) only
  // (PositionsView::DecodePostings), checked as EnsureBlock checks a whole block; simd_ok over
  // those postings. Leaves t's block marked undecoded (the other postings' positions are not).
  // False on Corruption (recorded).
  bool EnsurePostings(Token& t, const uint32_t* idx, uint32_t count) {
    BlockCursor& c = t.cursor;
    const uint32_t j = c.block();
    if (t.decoded_block == j) return true;
    const std::span<const uint32_t> tfs(c.block_freqs(), c.block_count());
    Status st = t.positions->DecodePostings(j, tfs, std::span<const uint32_t>(idx, count), &t.offsets, &t.pos);
    if (!CheckDecoded(t, j, c.block_count(), std::move(st), true)) return false;
    t.decoded_block = kEndDoc;
    t.postings_block = j;
    t.postings_mask[0] = t.postings_mask[1] = 0;
    for (uint32_t m = 0; m < count; ++m) t.postings_mask[idx[m] >> 6] |= uint64_t{1} << (idx[m] & 63);
    t.pos_size = t.pos.size();
    t.sums = false;
    uint32_t top = 0;  // each posting's positions ascend (tf >= 1): its last is its largest
    for (uint32_t m = 0; m < count; ++m) top = std::max(top, t.pos[t.offsets[idx[m] + 1] - 1]);
    t.simd_ok = top <= kMaxSimdPosition;
    t.small = top < (uint32_t{1} << 31);
    t.pos.resize(t.pos_size + kMergePad, 0);
    return true;
  }

  // The `count` common documents of the two cursors' current blocks at block indexes batch_a_ /
  // batch_b_ (ascending): each one's tf, counted, and scored into the top k. False on Corruption.
  // Only those documents' positions are decoded.
  bool VisitBatch(uint32_t count) {
    Token& ta = *order_[0];
    Token& tb = *order_[1];
    // A block that goes on past the other's last document meets the next batch too: decoded whole,
    // once; a block that ends here: only the batch's postings.
    const uint32_t la = ta.cursor.block_last_doc(), lb = tb.cursor.block_last_doc();
    const bool few = count * 8 <= kBlockSize;
    if (!(la > lb || !few ? EnsureBlock(ta) : EnsurePostings(ta, batch_a_, count))) return false;
    if (!(lb > la || !few ? EnsureBlock(tb) : EnsurePostings(tb, batch_b_, count))) return false;
    const bool a_first = tokens_[slots_[0]].get() == &ta;  // slot 0 is the shorter list's token
    const bool simd = ta.simd_ok && tb.simd_ok;
    // Both sides' values below 2^31: positions p1 + 1 == p2 exactly when v1 + (base2 - base1 + 1)
    // == v2 in 32 bits (v = p + base, base < 2^30 + 1: the sum below 2^32 - 1, no wrap).
#if defined(__AVX2__)
    const bool shifted = ta.small && tb.small;
#else
    const bool shifted = false;  // CountShifted's scalar merge adds in 64 bits: positions only
#endif
    const Token& first = a_first ? ta : tb;
    const Token& second = a_first ? tb : ta;
    const uint32_t* oa = ta.offsets.data();
    const uint32_t* ob = tb.offsets.data();
    const uint32_t* docs = ta.cursor.block_docs();
    const uint32_t* const first_pos = a_first ? ta.pos.data() : tb.pos.data();
    const uint32_t* const second_pos = a_first ? tb.pos.data() : ta.pos.data();
    const uint32_t* const first_off = a_first ? oa : ob;
    const uint32_t* const second_off = a_first ? ob : oa;
    const uint32_t* const first_idx = a_first ? batch_a_ : batch_b_;
    const uint32_t* const second_idx = a_first ? batch_b_ : batch_a_;
#if defined(__AVX2__)
    if (first.sums && second.sums) {  // the usual case: running sums on both sides
      if (k_ == 0) {  // a count only: no branch on the (unpredictable) match, the sum in a register
        uint64_t hits = 0;
        for (uint32_t m = 0; m < count; ++m) {
          const uint32_t i1 = first_idx[m], i2 = second_idx[m];
          const uint32_t f1 = first_off[i1], f2 = second_off[i2];
          hits += SumsPairAny(first_pos, f1, first_off[i1 + 1] - f1, second_pos, f2, second_off[i2 + 1] - f2);
        }
        matches_ += hits;
        return true;
      }
      for (uint32_t m = 0; m < count; ++m) {
        const uint32_t i1 = first_idx[m], i2 = second_idx[m];
        const uint32_t f1 = first_off[i1], f2 = second_off[i2];
        const uint32_t tf =
            SumsPairTf(first_pos, f1, first_off[i1 + 1] - f1, second_pos, f2, second_off[i2 + 1] - f2);
        matches_ += static_cast<uint32_t>(tf != 0);  // no branch on the (unpredictable) match
        if (tf >= tf_need_) Score(docs[batch_a_[m]], tf);
      }
      return true;
    }
#endif
    for (uint32_t m = 0; m < count; ++m) {
      const uint32_t i1 = first_idx[m], i2 = second_idx[m];
      const uint32_t* p1 = first_pos + first_off[i1];
      const uint32_t* p2 = second_pos + second_off[i2];
      const uint32_t n1 = first_off[i1 + 1] - first_off[i1], n2 = second_off[i2 + 1] - second_off[i2];
      const uint32_t tf =
          shifted ? PairTf(p1, n1, p2, n2, second.Base(i2) - first.Base(i1) + 1, true)
                  : PairTf(ToPositions(first, i1, p1, n1, 0), n1, ToPositions(second, i2, p2, n2, 1), n2, 1, simd);
      if (k_ == 0) {  // a count only: no branch on the (unpredictable) match
        matches_ += static_cast<uint32_t>(tf != 0);
        continue;
      }
      matches_ += static_cast<uint32_t>(tf != 0);
      if (tf >= tf_need_) Score(docs[batch_a_[m]], tf);
    }
    return true;
  }

  // The largest score a document with phrase frequency tf can have: at the smallest norm (BM25
  // falls as the norm grows, and float rounding keeps that order), without reading the norm.
  float Ceiling(uint32_t tf) const {
    return tf < kCeilings ? ceiling_[tf] : Bm25TermScore(idf_, tf, norm_floor_, env_->k1);
  }

#if defined(__AVX2__)
  // The `count` common documents of the two shortest lists' current blocks at block indexes
  // batch_a_ / batch_b_ (ascending): each one that every other list holds is visited (Visit) with
  // every cursor on it. False when a list ran out (nothing more can match) or on Corruption.
  bool VisitCandidates(uint32_t count) {
    BlockCursor& a = order_[0]->cursor;
    BlockCursor& b = order_[1]->cursor;
    const uint32_t* ad = a.block_docs();
    if (!count_ && full_ && scored_) count = KeepBeatable(count);
    if (count_ && pair_gap_ != 0) {
      bool ok = true;
      count = KeepPairMatches(count, &ok);
      if (!ok) return false;
    }
    if (k_ > 0 && scored_) PrefetchNorms(ad, batch_a_, count);
    for (uint32_t m = 0; m < count; ++m) {
      const uint32_t x = ad[batch_a_[m]];
      bool all = true;
      for (size_t t = 2; t < order_.size() && all; ++t) {
        BlockCursor& c = order_[t]->cursor;
        c.next_geq(x);
        if (c.doc() == kEndDoc) return false;
        all = c.doc() == x;
      }
      if (!all) continue;
      a.set_pos(batch_a_[m]);
      b.set_pos(batch_b_[m]);
      if (!Visit(x)) return false;
    }
    return true;
  }

  // Without a count and with the heap full: keeps (compacted, in order) only the `count` common
  // documents at batch_a_ / batch_b_ whose bound could beat the k-th, eight a step: Visit's bound
  // (the same float operations, from the two shortest lists' tfs, which bound the phrase's tf too)
  // against the current threshold, which only rises. Returns how many are kept.
  uint32_t KeepBeatable(uint32_t count) {
    BlockCursor& a = order_[0]->cursor;
    BlockCursor& b = order_[1]->cursor;
    const int* fa = reinterpret_cast<const int*>(a.block_freqs());
    const int* fb = reinterpret_cast<const int*>(b.block_freqs());
    const int* docs = reinterpret_cast<const int*>(a.block_docs());
    const float* norms = env_->norms - env_->doc_begin;  // indexed by docID
    const __m256 idf = _mm256_set1_ps(idf_), k1p1 = _mm256_set1_ps(env_->k1 + 1.0f);
    const __m256 margin = _mm256_set1_ps(kPhraseBoundMargin), slack = _mm256_set1_ps(slack_);
    const __m256 thr = _mm256_set1_ps(thr_);
    uint32_t kept = 0;
    for (uint32_t m = 0; m < count; m += 8) {
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count - m)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const __m256i ia = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(batch_a_ + m));
      const __m256i ib = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(batch_b_ + m));
      const __m256i zero = _mm256_setzero_si256();
      const __m256i tf = _mm256_min_epu32(_mm256_mask_i32gather_epi32(zero, fa, ia, live, 4),
                                          _mm256_mask_i32gather_epi32(zero, fb, ib, live, 4));
      const __m256i d = _mm256_mask_i32gather_epi32(zero, docs, ia, live, 4);
      const __m256 norm = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), norms, d, _mm256_castsi256_ps(live), 4);
      const __m256 t = _mm256_cvtepi32_ps(tf);  // tf < 2^31: as static_cast<float>
      const __m256 s = _mm256_div_ps(_mm256_mul_ps(idf, _mm256_mul_ps(t, k1p1)), _mm256_add_ps(t, norm));
      const __m256 bound = _mm256_mul_ps(_mm256_mul_ps(s, margin), slack);
      const unsigned keep = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(bound, thr, _CMP_GT_OQ))) &
                            static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(live)));
      const __m256i lanes = LaneIndexes(keep);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(batch_a_ + kept), _mm256_permutevar8x32_epi32(ia, lanes));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(batch_b_ + kept), _mm256_permutevar8x32_epi32(ib, lanes));
      kept += static_cast<uint32_t>(__builtin_popcount(keep));
    }
    return kept;
  }

  // With a count, a phrase of three or more slots whose two shortest lists' tokens hold one slot
  // each (pair_gap_ apart): keeps (compacted, in order) only the `count` common documents at
  // batch_a_ / batch_b_ where the two tokens occur pair_gap_ positions apart (every match needs
  // that), so that the other lists are searched, and their positions decoded, for those alone.
  // Returns how many are kept: all of them when a block's values are not running sums. *ok false
  // on Corruption (recorded).
  uint32_t KeepPairMatches(uint32_t count, bool* ok) {
    Token& ta = *order_[0];
    Token& tb = *order_[1];
    // As VisitBatch: a block that goes on past the other's last document is decoded whole, one
    // that ends here for a few documents only those postings.
    const uint32_t la = ta.cursor.block_last_doc(), lb = tb.cursor.block_last_doc();
    const bool few = count * 8 <= kBlockSize;
    if (!(la > lb || !few ? EnsureBlock(ta) : EnsurePostings(ta, batch_a_, count)) ||
        !(lb > la || !few ? EnsureBlock(tb) : EnsurePostings(tb, batch_b_, count))) {
      *ok = false;
      return 0;
    }
    if (!ta.sums || !tb.sums) {
      // Values v = p + Base (0 for positions): p1 + gap == p2 exactly when v1 + (Base2 - Base1 +
      // gap) == v2 in 32 bits, every value below 2^31 (small) and a base at most 2^30 + 1.
      if (!ta.small || !tb.small) return count;
      const Token& first = pair_a_first_ ? ta : tb;
      const Token& second = pair_a_first_ ? tb : ta;
      const uint32_t* const first_idx = pair_a_first_ ? batch_a_ : batch_b_;
      const uint32_t* const second_idx = pair_a_first_ ? batch_b_ : batch_a_;
      uint32_t kept = 0;
      for (uint32_t m = 0; m < count; ++m) {
        const uint32_t i1 = first_idx[m], i2 = second_idx[m];
        const uint32_t f1 = first.offsets[i1], f2 = second.offsets[i2];
        const bool any = PairTf(first.pos.data() + f1, first.offsets[i1 + 1] - f1, second.pos.data() + f2,
                                second.offsets[i2 + 1] - f2, second.Base(i2) - first.Base(i1) + pair_gap_, true) != 0;
        const uint32_t ia = batch_a_[m], ib = batch_b_[m];
        batch_a_[kept] = ia;
        batch_b_[kept] = ib;
        kept += static_cast<uint32_t>(any);
      }
      return kept;
    }
    const Token& first = pair_a_first_ ? ta : tb;
    const Token& second = pair_a_first_ ? tb : ta;
    const uint32_t* const first_pos = first.pos.data();
    const uint32_t* const second_pos = second.pos.data();
    const uint32_t* const first_off = first.offsets.data();
    const uint32_t* const second_off = second.offsets.data();
    const uint32_t* const first_idx = pair_a_first_ ? batch_a_ : batch_b_;
    const uint32_t* const second_idx = pair_a_first_ ? batch_b_ : batch_a_;
    uint32_t kept = 0;
    for (uint32_t m = 0; m < count; ++m) {  // entry m read before entry kept <= m is written
      const uint32_t i1 = first_idx[m], i2 = second_idx[m];
      const uint32_t f1 = first_off[i1], f2 = second_off[i2];
      const bool any =
          SumsPairAny(first_pos, f1, first_off[i1 + 1] - f1, second_pos, f2, second_off[i2 + 1] - f2, pair_gap_);
      const uint32_t ia = batch_a_[m], ib = batch_b_[m];
      batch_a_[kept] = ia;
      batch_b_[kept] = ib;
      kept += static_cast<uint32_t>(any);  // no branch on the (unpredictable) match
    }
    return kept;
  }
#endif

  // Requests the norms of the documents docs[idx[0, count)], which the top k reads (the norms
  // of a large shard are megabytes: the reads would otherwise miss the cache one after another).
  void PrefetchNorms(const uint32_t* docs, const uint32_t* idx, uint32_t count) const {
    for (uint32_t m = 0; m < count; ++m) __builtin_prefetch(env_->norms + (docs[idx[m]] - env_->doc_begin));
  }

  // A matching document d with phrase frequency tf: counted, and scored into the top k (Score).
  void Collect(uint32_t d, uint32_t tf) {
    ++matches_;
    Score(d, tf);
  }

  // Scores a matching document d with phrase frequency tf into the top k. A score that cannot
  // beat the full heap's k-th is not computed (nor its norm read). A caller may skip it for any
  // tf below tf_need_ (nothing would be pushed).
  void Score(uint32_t d, uint32_t tf) {
    if (full_ && scored_ && Ceiling(tf) * kPhraseBoundMargin <= thr_) return;
    const float s = scored_ ? Bm25TermScore(idf_, tf, env_->norms[d - env_->doc_begin], env_->k1) : 0.0f;
    if (!full_ || s > thr_) {  // a later docID enters only above the k-th (TopKHeap would refuse it)
      topk_->Push(d, s);
      ++env_->stats->postings_scored;
      full_ = topk_->full();
      thr_ = topk_->Threshold();
      // Score's first test returns for every tf below the first one it lets through.
      uint32_t need = 1;
      if (full_ && scored_)
        while (need < kCeilings && ceiling_[need] * kPhraseBoundMargin <= thr_) ++need;
      tf_need_ = need;
    }
  }

  // Posting i's n values v of token t as positions: v itself unless t holds sums, else v - Base(i)
  // written to scratch_[slot] (kMergePad readable values past them).
  const uint32_t* ToPositions(const Token& t, uint32_t i, const uint32_t* v, uint32_t n, size_t slot) {
    if (!t.sums) return v;
    std::vector<uint32_t>& out = scratch_[slot];
    if (out.size() < n + kMergePad) out.resize(n + kMergePad);
    const uint32_t base = t.Base(i);
    for (uint32_t k = 0; k < n; ++k) out[k] = v[k] - base;
    return out.data();
  }

  // The positions of token t at its cursor's document, for phrase slot `slot`; false on Corruption
  // (recorded).
  bool PositionsOf(Token& t, size_t slot, const uint32_t** begin, const uint32_t** end) {
    if (!EnsureAt(t)) return false;
    const uint32_t p = t.cursor.pos();
    const uint32_t from = t.offsets[p], to = t.offsets[p + 1];  // EnsureBlock checked to - from
    *begin = ToPositions(t, p, t.pos.data() + from, to - from, slot);
    *end = *begin + (to - from);
    return true;
  }

  // The phrase's tf at the document every cursor is on: the starts s with slot i at s + i for
  // every i. The rarest slot's positions, shifted to starts, are filtered through every other
  // slot (KeepShifted). 0 on Corruption (recorded).
  uint32_t Tf() {
    const size_t n = slots_.size();
#if defined(__AVX2__)
    // Every slot's values below 2^31 (Token::small): each slot's values v = p + base_i are compared
    // as stored, by shifts in 32 bits (no copy to positions): p + 1 == q exactly when
    // v + (base' - base + 1) == v' (no wrap, no sum reads as the 0xffffffff padding).
    bool small = true;
    for (size_t i = 0; i < n; ++i) {
      Token& t = *tokens_[slots_[i]];
      if (!EnsureAt(t)) return 0;
      small &= t.small;
    }
    if (small) {
      size_t rare = 0;
      for (size_t i = 0; i < n; ++i) {
        const Token& t = *tokens_[slots_[i]];
        const uint32_t p = t.cursor.pos(), from = t.offsets[p];
        raw_[i] = RawSpan{t.pos.data() + from, t.offsets[p + 1] - from, t.Base(p)};
        if (raw_[i].n < raw_[rare].n) rare = i;
      }
      if (n == 2) return PairTf(raw_[0].v, raw_[0].n, raw_[1].v, raw_[1].n, raw_[1].base - raw_[0].base + 1, true);
      // The rarest slot at most eight values (the usual tfs): the starts as a lane mask, filtered by
      // each other slot eight values (one compare) at a time, no branch on the values.
      if (raw_[rare].n <= 8) {
        const RawSpan& r = raw_[rare];
        const __m256i pos = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r.v)),
                                             _mm256_set1_epi32(static_cast<int>(r.base)));
        const __m256i v_rare = _mm256_set1_epi32(static_cast<int>(rare));
        const __m256i start = _mm256_sub_epi32(pos, v_rare);  // lanes with pos >= rare
        unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(
                            _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_max_epu32(pos, v_rare), pos)))) &
                        ((1u << r.n) - 1);
        for (size_t i = 0; i < n; ++i) {
          if (i == rare) continue;
          const __m256i va =
              _mm256_add_epi32(start, _mm256_set1_epi32(static_cast<int>(raw_[i].base + static_cast<uint32_t>(i))));
          const uint32_t* v = raw_[i].v;
          const uint32_t nv = raw_[i].n;
          unsigned hit = MatchLanes(va, LoadMasked(v, std::min(8u, nv)));
          for (uint32_t y = 8; y < nv; y += 8) hit |= MatchLanes(va, LoadMasked(v + y, std::min(8u, nv - y)));
          mask &= hit;
          if (mask == 0) return 0;  // most candidates of a rare phrase: the other slots unread
        }
        return static_cast<uint32_t>(__builtin_popcount(mask));
      }
      // Starts s = p - rare of the rarest slot's positions p >= rare; slot i keeps those with
      // s + i + base_i among its values.
      const RawSpan& r = raw_[rare];
      if (starts_.size() < r.n + kMergePad) starts_.resize(r.n + kMergePad);
      uint32_t* st = starts_.data();
      uint32_t live = 0;
      for (uint32_t q = 0; q < r.n; ++q) {
        const uint32_t pos = r.v[q] - r.base;
        st[live] = pos - static_cast<uint32_t>(rare);
        live += static_cast<uint32_t>(pos >= rare);
      }
      for (size_t i = 0; i < n && live > 0; ++i) {
        if (i == rare) continue;
        live = KeepShifted(st, live, raw_[i].v, raw_[i].n, raw_[i].base + static_cast<uint32_t>(i), true);
      }
      return live;
    }
#endif
    size_t rare = 0;
    bool simd = true;
    for (size_t i = 0; i < n; ++i) {
      auto& [first, last] = spans_[i];
      if (!PositionsOf(*tokens_[slots_[i]], i, &first, &last)) return 0;
      if (last - first < spans_[rare].second - spans_[rare].first) rare = i;
      simd &= tokens_[slots_[i]]->simd_ok;
    }
    if (n == 2) {
      return PairTf(spans_[0].first, static_cast<uint32_t>(spans_[0].second - spans_[0].first), spans_[1].first,
                    static_cast<uint32_t>(spans_[1].second - spans_[1].first), 1, simd);
    }
    const uint32_t* r = spans_[rare].first;
    const size_t nr = static_cast<size_t>(spans_[rare].second - r);
    if (starts_.size() < nr + kMergePad) starts_.resize(nr + kMergePad);
    uint32_t* s = starts_.data();
    uint32_t live = 0;
    for (size_t q = 0; q < nr; ++q) {
      s[live] = r[q] - static_cast<uint32_t>(rare);
      live += static_cast<uint32_t>(r[q] >= rare);
    }
    for (size_t i = 0; i < n && live > 0; ++i) {
      if (i == rare) continue;
      live = KeepShifted(s, live, spans_[i].first, static_cast<uint32_t>(spans_[i].second - spans_[i].first),
                         static_cast<uint32_t>(i), simd);
    }
    return live;
  }

  std::vector<std::unique_ptr<Token>> tokens_;
  std::vector<Token*> order_;  // by list size, shortest first
  std::vector<uint32_t> slots_;
  std::vector<std::pair<const uint32_t*, const uint32_t*>> spans_;  // per phrase slot
  struct RawSpan {  // one slot's values at the current document: v[0, n), positions plus base
    const uint32_t* v = nullptr;
    uint32_t n = 0;
    uint32_t base = 0;
  };
  RawSpan raw_[kMaxPhraseTokens];  // Tf's per slot
  std::vector<uint32_t> starts_;
  std::vector<std::vector<uint32_t>> scratch_;  // per phrase slot: ToPositions' output
  float idf_;
  bool scored_;
  float norm_floor_;
  static constexpr uint32_t kCeilings = 64;
  float ceiling_[kCeilings] = {};  // Ceiling(tf) for tf < kCeilings
  const CursorEnv* env_;
  // Run's state.
  TopKHeap* topk_ = nullptr;
  uint32_t k_ = 0;
  bool count_ = false;
  float slack_ = 1.0f;
  float thr_ = -std::numeric_limits<float>::infinity();
  bool full_ = false;       // k > 0 and the heap is full
  uint32_t bound_end_ = 0;  // SkipRanges checked the block bound through this docID
  uint64_t matches_ = 0;
  uint32_t tf_need_ = 1;  // Score leaves the top k unchanged for any tf below it (1: unknown)
  // RunPair's common documents of a block pair (eight-lane stores: eight entries of slack).
  uint32_t batch_a_[kBlockSize + 8], batch_b_[kBlockSize + 8];
  uint32_t pair_gap_ = 0;      // KeepPairMatches' slot distance (0: not used)
  bool pair_a_first_ = false;  // order_[0]'s slot comes before order_[1]'s
};

}  // namespace

Result<std::optional<SearchResult>> ExecuteSolePhrase(const QueryNode& tree, std::span<const std::string> terms,
                                                      std::span<const TreeTermInput> inputs,
                                                      std::span<const float> norms, uint32_t doc_begin, uint32_t k,
                                                      bool count, const Bm25Params& params) {
  const auto t0 = std::chrono::steady_clock::now();
  if (tree.kind != QueryNode::Kind::kBool || tree.clauses.size() != 1 || terms.size() != inputs.size())
    return std::optional<SearchResult>();
  const QueryNode::Clause& clause = tree.clauses[0];
  if (clause.node.kind != QueryNode::Kind::kPhrase || clause.node.tokens.size() < 2 ||
      clause.node.tokens.size() > kMaxPhraseTokens)
    return std::optional<SearchResult>();
  if (clause.occur != Occur::kMust && clause.occur != Occur::kShould && clause.occur != Occur::kFilter)
    return std::optional<SearchResult>();
  float idf = 0.0f;
  bool absent = false;
  std::vector<const TreeTermInput*> distinct;
  std::vector<uint32_t> slots;
  for (const std::string& token : clause.node.tokens) {
    auto it = std::lower_bound(terms.begin(), terms.end(), token);
    if (it == terms.end() || *it != token) return std::optional<SearchResult>();
    const TreeTermInput* in = &inputs[static_cast<size_t>(it - terms.begin())];
    idf += in->idf;  // text order, repeats counted
    absent |= in->list == nullptr;
    auto d = std::find(distinct.begin(), distinct.end(), in);
    slots.push_back(static_cast<uint32_t>(d - distinct.begin()));
    if (d == distinct.end()) distinct.push_back(in);
  }
  if (!absent) {
    for (const TreeTermInput* in : distinct)
      if (in->positions == nullptr || in->positions->count() != in->list->count() ||
          in->positions->num_blocks() != in->list->num_blocks())
        return std::optional<SearchResult>();
  }
  SearchResult result;
  result.has_total = count;
  for (const TreeTermInput& in : inputs) {
    SEARCH_RETURN_IF_ERROR(CheckListRange(in.list, doc_begin, norms.size()));
    if (in.list != nullptr) ++result.stats.lists;
  }
  if (!absent) {
    Status error;
    CursorEnv env{
        .norms = norms.data(), .doc_begin = doc_begin, .k1 = params.k1, .stats = &result.stats, .error = &error};
    std::vector<std::unique_ptr<Token>> tokens;
    for (const TreeTermInput* in : distinct) {
      auto t = std::make_unique<Token>();
      t->cursor.reset(in->list, in->idf, 0, &env);
      t->list = in->list;
      t->positions = in->positions;
      t->ratio = in->idf > 0.0f ? idf / in->idf : 0.0f;
      tokens.push_back(std::move(t));
    }
    SolePhrase phrase(std::move(tokens), std::move(slots), idf, clause.occur != Occur::kFilter,
                      Bm25Norm(0, 1.0, params), &env);
    uint64_t total = 0;
    phrase.Run(k, count, &total, &result.hits);
    if (!error.ok()) return error;
    result.total = count ? total : 0;
  }
  result.stats.micros = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  return std::optional<SearchResult>(std::move(result));
}

}  // namespace search::cpu_internal
