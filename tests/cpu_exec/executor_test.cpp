// ExecuteQuery against brute-force BM25 on random corpora, in every mode and for k from 1 to 1000.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "exec_fixture.hpp"

namespace search::testing {
namespace {

const QueryMode kModes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
const uint32_t kKs[] = {1, 10, 100, 1000};

std::string Describe(const Corpus& c, const TestQuery& q, QueryMode mode, uint32_t k) {
  std::string s = std::string(QueryModeName(mode)) + " k=" + std::to_string(k) + " [";
  for (uint32_t t : q.terms) {
    s += ' ';
    s += QueryTermName(c, t);
    s += "(df ";
    s += t < c.postings.size() ? std::to_string(c.df(t)) : std::string("-");
    s += ')';
  }
  return s + " ]";
}

[[maybe_unused]] Result<SearchResult> RunQuery(const Corpus& c, const MemShard& s, const TestQuery& q, QueryMode mode, uint32_t k) {
  const std::vector<TermInput> in = Inputs(c, s, q);
  return ExecuteQuery(in, std::span<const float>(s.norms), s.doc_begin, mode, k);
}

struct Case {
  const char* name;
  CorpusOptions options;
  int queries;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  CorpusOptions zipf;  // long lists (thousands of postings), heavy tf, empty documents
  zipf.num_docs = 6000;
  zipf.vocab = 3000;
  zipf.seed = 11;
  cases.push_back({"zipf", zipf, 150});
  CorpusOptions tied;  // every document of one length over a tiny vocabulary: many exact ties
  tied.num_docs = 3000;
  tied.vocab = 30;
  tied.zipf_s = 0.5;
  tied.fixed_len = 6;
  tied.seed = 22;
  cases.push_back({"tied", tied, 100});
  CorpusOptions tied_one;  // length 1: every posting of a term scores the same
  tied_one.num_docs = 2000;
  tied_one.vocab = 12;
  tied_one.fixed_len = 1;
  tied_one.seed = 23;
  cases.push_back({"tied_one", tied_one, 50});
  CorpusOptions sparse;  // many empty documents and huge tf
  sparse.num_docs = 4000;
  sparse.vocab = 800;
  sparse.empty_fraction = 0.3;
  sparse.heavy_fraction = 0.05;
  sparse.zipf_s = 1.3;
  sparse.seed = 33;
  cases.push_back({"sparse", sparse, 120});
  CorpusOptions small;
  small.num_docs = 150;
  small.vocab = 60;
  small.max_len = 20;
  small.seed = 44;
  cases.push_back({"small", small, 80});
  return cases;
}

// Every mode and k for `queries` random queries: bit-identical to the float twin, and within the
// brief's tolerance of the double brute force.
void CheckCorpus(const Corpus& c, const MemShard& s, uint64_t seed, int queries, const Bm25Params& p = {}) {
  std::mt19937_64 rng(seed);
  for (int qi = 0; qi < queries; ++qi) {
    const TestQuery q = RandomQuery(c, rng);
    const std::vector<RefHit> ref_and = ReferenceAll(c, q.terms, true, p), ref_or = ReferenceAll(c, q.terms, false, p);
    const std::vector<double> by_and = RefByDoc(ref_and, c.num_docs), by_or = RefByDoc(ref_or, c.num_docs);
    const std::vector<ScoredDoc> f_and = FloatReferenceAll(c, q.terms, true, p),
                                 f_or = FloatReferenceAll(c, q.terms, false, p);
    ASSERT_EQ(f_and.size(), ref_and.size());
    ASSERT_EQ(f_or.size(), ref_or.size());
    const std::vector<TermInput> in = Inputs(c, s, q);
    for (QueryMode mode : kModes) {
      for (uint32_t k : kKs) {
        const std::string what = Describe(c, q, mode, k);
        auto r = ExecuteQuery(in, std::span<const float>(s.norms), s.doc_begin, mode, k, p);
        ASSERT_TRUE(r.ok()) << what << ": " << r.status().ToString();
        const bool use_and = mode == QueryMode::kAnd || (mode == QueryMode::kAndOr && ref_and.size() >= k);
        // Exact: the float twin, bit for bit and in the same order.
        EXPECT_EQ(r->hits, Prefix(use_and ? f_and : f_or, k)) << what;
        // Brute force in double, tolerant only of genuine near-ties.
        ExpectMatchesReference(r->hits, use_and ? ref_and : ref_or, use_and ? by_and : by_or, k, what);
        const size_t scorable = mode == QueryMode::kOr    ? f_or.size()
                                : mode == QueryMode::kAnd ? f_and.size()
                                                          : f_and.size() + (use_and ? 0 : f_or.size());
        EXPECT_LE(r->stats.postings_scored, scorable) << what;
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST(ExecuteQuery, MatchesBruteForceOnRandomCorpora) {
  for (const Case& cs : Cases()) {
    SCOPED_TRACE(cs.name);
    const Corpus c = MakeCorpus(cs.options);
    const MemShard s = BuildShard(c, 0, c.num_docs);
    CheckCorpus(c, s, cs.options.seed * 7 + 1, cs.queries);
    if (HasFailure()) return;
  }
}

// Many small corpora: odd list lengths around block boundaries, extreme length spreads, a
// non-default shard start, and non-default BM25 parameters.
TEST(ExecuteQuery, MatchesBruteForceOnManySmallCorpora) {
  for (uint64_t seed = 100; seed < 220; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    CorpusOptions o;
    o.seed = seed;
    o.num_docs = 100 + static_cast<uint32_t>(rng() % 1500);
    o.vocab = 10 + static_cast<uint32_t>(rng() % 150);
    o.zipf_s = 0.3 + (rng() % 12) / 10.0;
    o.max_len = 1 + static_cast<uint32_t>(rng() % 200);
    o.empty_fraction = (rng() % 4) / 10.0;
    o.heavy_fraction = (rng() % 3) / 20.0;
    if (rng() % 4 == 0) o.fixed_len = static_cast<int>(rng() % 10);
    Bm25Params p;
    if (seed % 3 == 0) p = Bm25Params{1.2f, 0.75f};
    const Corpus c = MakeCorpus(o);
    const MemShard s = BuildShard(c, 0, c.num_docs, p);
    CheckCorpus(c, s, seed, 12, p);
    if (HasFailure()) return;
  }
}

TEST(ExecuteQuery, AndWithAnUnknownTermIsEmpty) {
  CorpusOptions o;
  o.num_docs = 1500;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  const uint32_t unknown = static_cast<uint32_t>(c.postings.size()) + 5;
  for (uint32_t t = 0; t < 5; ++t) {
    TestQuery q{{t, unknown}};  // canonical: "t0000x" < "u..."
    auto and_r = RunQuery(c, s, q, QueryMode::kAnd, 10);
    ASSERT_TRUE(and_r.ok());
    EXPECT_TRUE(and_r->hits.empty());
    auto or_r = RunQuery(c, s, q, QueryMode::kOr, 10);
    ASSERT_TRUE(or_r.ok());
    EXPECT_EQ(or_r->hits, Prefix(FloatReferenceAll(c, {t}, false), 10));
    EXPECT_FALSE(or_r->hits.empty());
  }
}

TEST(ExecuteQuery, AndOrFallsBackToOrExactlyWhenAndHasFewerThanK) {
  CorpusOptions o;
  o.num_docs = 3000;
  o.vocab = 500;
  o.seed = 5;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  std::mt19937_64 rng(99);
  int fell_back = 0, stayed = 0;
  for (int qi = 0; qi < 60; ++qi) {
    const TestQuery q = RandomQuery(c, rng);
    auto all_and = RunQuery(c, s, q, QueryMode::kAnd, kMaxK);
    ASSERT_TRUE(all_and.ok());
    const uint32_t hits = static_cast<uint32_t>(all_and->hits.size());
    for (uint32_t k : {std::max(hits, 1u), hits + 1, std::max(hits, 2u) - 1, 10u}) {
      if (k < 1 || k > kMaxK) continue;
      auto andor = RunQuery(c, s, q, QueryMode::kAndOr, k);
      auto and_r = RunQuery(c, s, q, QueryMode::kAnd, k);
      auto or_r = RunQuery(c, s, q, QueryMode::kOr, k);
      ASSERT_TRUE(andor.ok() && and_r.ok() && or_r.ok());
      if (hits >= k) {
        EXPECT_EQ(andor->hits, and_r->hits);
        EXPECT_EQ(andor->stats.lists, and_r->stats.lists);  // or did not run
        ++stayed;
      } else {
        EXPECT_EQ(andor->hits, or_r->hits);
        EXPECT_EQ(andor->stats.lists, and_r->stats.lists + or_r->stats.lists);  // stats summed
        ++fell_back;
      }
    }
  }
  EXPECT_GT(fell_back, 0);
  EXPECT_GT(stayed, 0);
}

TEST(ExecuteQuery, ValidatesKAndHandlesEmptyQueries) {
  CorpusOptions o;
  o.num_docs = 200;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  TestQuery q{{0, 1}};
  for (int64_t bad : {int64_t{0}, int64_t{kMaxK} + 1}) {
    auto r = RunQuery(c, s, q, QueryMode::kOr, static_cast<uint32_t>(bad));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  auto max_k = RunQuery(c, s, q, QueryMode::kOr, kMaxK);
  ASSERT_TRUE(max_k.ok());
  EXPECT_EQ(max_k->hits, FloatReferenceAll(c, q.terms, false));
  for (QueryMode mode : kModes) {
    auto empty = RunQuery(c, s, TestQuery{}, mode, 10);
    ASSERT_TRUE(empty.ok());
    EXPECT_TRUE(empty->hits.empty());
    auto unknown_only = RunQuery(c, s, TestQuery{{static_cast<uint32_t>(c.postings.size()) + 1}}, mode, 10);
    ASSERT_TRUE(unknown_only.ok());
    EXPECT_TRUE(unknown_only->hits.empty());
  }
}

TEST(ExecuteQuery, SameListTwiceCountsTwiceWithoutCrashing) {
  CorpusOptions o;
  o.num_docs = 2000;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  const std::vector<float> idf = GlobalIdf(c);
  for (uint32_t t : {0u, 3u, 50u}) {
    std::vector<TermInput> in = {{s.view(t), idf[t]}, {s.view(t), idf[t]}, {s.view(t + 1), idf[t + 1]}};
    for (QueryMode mode : kModes) {
      auto r = ExecuteQuery(in, std::span<const float>(s.norms), 0, mode, 20);
      ASSERT_TRUE(r.ok());
      const std::vector<ScoredDoc> all_and = FloatReferenceAll(c, {t, t, t + 1}, true);
      const bool conj = mode == QueryMode::kAnd || (mode == QueryMode::kAndOr && all_and.size() >= 20);
      EXPECT_EQ(r->hits, Prefix(conj ? all_and : FloatReferenceAll(c, {t, t, t + 1}, false), 20))
          << QueryModeName(mode);
    }
  }
}

// 20,000 short documents over 2,000 terms: lists of many blocks.
CorpusOptions LongListsCorpus() {
  CorpusOptions o;
  o.num_docs = 20000;
  o.vocab = 2000;
  o.max_len = 60;
  o.seed = 8;
  return o;
}

TEST(ExecuteQuery, PruningSkipsBlocksAndCountsWork) {
  const Corpus c = MakeCorpus(LongListsCorpus());
  const MemShard s = BuildShard(c, 0, c.num_docs);
  // Two long lists and a mid one: k = 10 must decode far fewer blocks than the lists hold.
  TestQuery q{{0, 1, 40}};
  uint64_t total_blocks = 0, total_bytes = 0;
  for (uint32_t t : q.terms) {
    total_blocks += s.view(t)->num_blocks();
    total_bytes += s.view(t)->bytes().size();
  }
  ASSERT_GT(total_blocks, 100u);
  for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd}) {
    auto r = RunQuery(c, s, q, mode, 10);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->hits, Prefix(FloatReferenceAll(c, q.terms, mode == QueryMode::kAnd), 10));
    EXPECT_EQ(r->stats.lists, 3u);
    EXPECT_GT(r->stats.blocks_decoded, 0u);
    EXPECT_LT(r->stats.blocks_decoded, total_blocks) << QueryModeName(mode);
    EXPECT_LE(r->stats.freq_blocks_decoded, r->stats.blocks_decoded);
    EXPECT_GT(r->stats.bytes_touched, 0u);
    EXPECT_LT(r->stats.bytes_touched, total_bytes);
    EXPECT_LE(r->stats.postings_decoded, r->stats.blocks_decoded * kBlockSize);
    EXPECT_GE(r->stats.postings_scored, 10u);
  }
  // Exhaustive: k = kMaxK over an or-query touches every block and scores every document.
  auto all = RunQuery(c, s, q, QueryMode::kOr, kMaxK);
  ASSERT_TRUE(all.ok());
  const size_t matching = FloatReferenceAll(c, q.terms, false).size();
  if (matching <= kMaxK) {
    EXPECT_EQ(all->stats.blocks_decoded, total_blocks);
    EXPECT_EQ(all->stats.postings_scored, matching);
  }
}

// Until k documents match, a lead document is followed into the longer lists before it is scored:
// an and-query whose lists share no document decodes none of their frequencies (a served query
// would pay a cache miss for each norm). Two lists of several blocks each with no common document.
TEST(ExecuteQuery, AndScoresNothingTheOtherListsLack) {
  const Corpus c = MakeCorpus(LongListsCorpus());
  const MemShard s = BuildShard(c, 0, c.num_docs);
  TestQuery q;
  for (uint32_t a = 0; a < c.postings.size() && q.terms.empty(); ++a) {
    if (c.df(a) < 2 * kBlockSize) continue;
    for (uint32_t b = a + 1; b < c.postings.size(); ++b) {
      if (c.df(b) < 2 * kBlockSize || !FloatReferenceAll(c, {a, b}, true).empty()) continue;
      q.terms = {a, b};
      break;
    }
  }
  ASSERT_FALSE(q.terms.empty()) << "no two lists of 2+ blocks without a common document";
  auto r = RunQuery(c, s, q, QueryMode::kAnd, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->hits.empty());
  EXPECT_GT(r->stats.blocks_decoded, 2u);  // the lists were walked
  EXPECT_EQ(r->stats.freq_blocks_decoded, 0u);
  EXPECT_EQ(r->stats.postings_scored, 0u);
}

// The and-path's heap-filling phase intersects the two shortest lists a block pair at a time,
// eight docIDs against eight, while the second is at most 16 times the first (and_query.hpp).
// Lists of chosen densities over 60,000 documents (length ratios 1 to about 50, runs of
// consecutive common documents, a document at either end of the shard, partial last blocks),
// queries of two to four of them, k from 1 to kMaxK: the float twin's answer, bit for bit.
// A corpus of one list per density: each list holds a document with that probability, and
// every list holds [run_begin, run_end) (long common runs) and, with `ends`, the first and the
// last document. Documents are 1-50 tokens long.
Corpus DensityCorpus(std::mt19937_64& rng, uint32_t num_docs, std::span<const double> density, uint32_t run_begin,
                     uint32_t run_end, bool ends) {
  Corpus c;
  c.num_docs = num_docs;
  c.doc_len.resize(c.num_docs);
  for (uint32_t d = 0; d < c.num_docs; ++d) {
    c.doc_len[d] = 1 + static_cast<uint32_t>(rng() % 50);
    c.total_tokens += c.doc_len[d];
  }
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (double p : density) {
    std::vector<Posting> list;
    for (uint32_t d = 0; d < c.num_docs; ++d) {
      const bool run = d >= run_begin && d < run_end;
      if (run || (ends && (d == 0 || d + 1 == c.num_docs)) || u01(rng) < p)
        list.push_back({d, 1 + static_cast<uint32_t>(rng() % 5)});
    }
    c.postings.push_back(std::move(list));
    c.names.push_back(TermName(static_cast<uint32_t>(c.names.size())));
  }
  return c;
}

// n distinct terms of c, in canonical (ascending) order.
TestQuery DistinctTerms(const Corpus& c, std::mt19937_64& rng, uint32_t n) {
  const uint32_t lists = static_cast<uint32_t>(c.postings.size());
  TestQuery q;
  while (q.terms.size() < n) {
    const uint32_t t = static_cast<uint32_t>(rng() % lists);
    if (std::find(q.terms.begin(), q.terms.end(), t) == q.terms.end()) q.terms.push_back(t);
  }
  std::sort(q.terms.begin(), q.terms.end());
  return q;
}

TEST(ExecuteQuery, AndBlockIntersectionMatchesBruteForce) {
  std::mt19937_64 rng(91);
  const double density[] = {0.005, 0.02, 0.021, 0.04, 0.1, 0.3, 0.31, 0.33, 0.9};
  const Corpus c = DensityCorpus(rng, 60000, density, 30000, 30400, /*ends=*/true);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  for (int qi = 0; qi < 120; ++qi) {
    const TestQuery q = DistinctTerms(c, rng, 2 + static_cast<uint32_t>(qi % 3));
    const std::vector<ScoredDoc> want = FloatReferenceAll(c, q.terms, true);
    for (uint32_t k : {1u, 2u, 10u, 150u, 1000u, kMaxK}) {
      auto r = RunQuery(c, s, q, QueryMode::kAnd, k);
      ASSERT_TRUE(r.ok()) << Describe(c, q, QueryMode::kAnd, k);
      ASSERT_EQ(r->hits, Prefix(want, k)) << Describe(c, q, QueryMode::kAnd, k);
    }
  }
}

TEST(ExecuteQuery, ListsOutsideTheNormsAreCorruption) {
  CorpusOptions o;
  o.num_docs = 1000;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  const std::vector<float> idf = GlobalIdf(c);
  std::vector<TermInput> in = {{s.view(0), idf[0]}};
  const std::vector<float> short_norms(s.norms.begin(), s.norms.begin() + 500);
  auto r = ExecuteQuery(in, std::span<const float>(short_norms), 0, QueryMode::kOr, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  // A list whose documents start below doc_begin.
  auto r2 = ExecuteQuery(in, std::span<const float>(s.norms.data() + 100, 900), 100, QueryMode::kOr, 10);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kCorruption);
}

}  // namespace
// Griffin's hand-off: the and-part over a candidate set (the intersection of the two shortest
// lists, as the GPU would hand it over, or a looser superset: every docID of the shortest list)
// gives exactly ExecuteQuery's answer, in and and andor, for every k.
TEST(ExecuteQuery, FromCandidatesEqualsTheFullQuery) {
  for (uint64_t seed : {3u, 4u, 5u}) {
    CorpusOptions o;
    o.num_docs = 5000;
    o.vocab = 300;
    o.seed = seed;
    if (seed == 5) o.fixed_len = 3;  // ties
    const Corpus c = MakeCorpus(o);
    const MemShard s = BuildShard(c, 0, c.num_docs);
    std::mt19937_64 rng(seed);
    for (int qi = 0; qi < 60; ++qi) {
      const TestQuery q = RandomQuery(c, rng);
      const std::vector<TermInput> in = Inputs(c, s, q);
      // The present lists by size; candidates from the two shortest.
      std::vector<const std::vector<Posting>*> lists;
      for (uint32_t t : q.terms)
        if (t < c.postings.size()) lists.push_back(&c.postings[t]);
      std::sort(lists.begin(), lists.end(), [](auto* a, auto* b) { return a->size() < b->size(); });
      std::vector<uint32_t> loose, tight;
      if (!lists.empty()) {
        for (const Posting& p : *lists[0]) loose.push_back(p.doc);
        if (lists.size() > 1) {
          for (const Posting& p : *lists[0])
            if (std::binary_search(lists[1]->begin(), lists[1]->end(), Posting{p.doc, 0},
                                   [](const Posting& a, const Posting& b) { return a.doc < b.doc; }))
              tight.push_back(p.doc);
        } else {
          tight = loose;
        }
      }
      for (QueryMode mode : {QueryMode::kAnd, QueryMode::kAndOr})
        for (uint32_t k : {1u, 10u, 1000u}) {
          auto want = ExecuteQuery(in, std::span<const float>(s.norms), 0, mode, k);
          ASSERT_TRUE(want.ok()) << want.status().ToString();
          for (const auto* cand : {&tight, &loose}) {
            auto got = ExecuteQueryFromCandidates(in, std::span<const float>(s.norms), 0, *cand, mode, k);
            ASSERT_TRUE(got.ok()) << got.status().ToString();
            ASSERT_EQ(got->hits, want->hits) << "seed " << seed << " query " << qi << " mode "
                                             << QueryModeName(mode) << " k " << k;
          }
        }
    }
  }
  // Bad candidate sets.
  const Corpus c = MakeCorpus(CorpusOptions{});
  const MemShard s = BuildShard(c, 0, c.num_docs);
  const std::vector<TermInput> in = Inputs(c, s, TestQuery{{0, 1}});
  const std::vector<uint32_t> unsorted = {5, 3}, outside = {c.num_docs + 7};
  EXPECT_EQ(ExecuteQueryFromCandidates(in, std::span<const float>(s.norms), 0, unsorted, QueryMode::kAnd, 10)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ExecuteQueryFromCandidates(in, std::span<const float>(s.norms), 0, outside, QueryMode::kAnd, 10)
                .status()
                .code(),
            StatusCode::kCorruption);
  EXPECT_EQ(ExecuteQueryFromCandidates(in, std::span<const float>(s.norms), 0, {}, QueryMode::kOr, 10).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace search::testing
