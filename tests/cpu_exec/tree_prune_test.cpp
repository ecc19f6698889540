// The term-boolean fast paths (cpu_exec/src/tree_count.hpp, tree_prune.hpp: counts by docID-set
// algebra, top k with block-max pruning) against the brute-force evaluator (tree_reference.hpp):
// a corpus whose frequent words span dozens of blocks (so block skipping, leapfrogging and the
// eight-lane merges run), indexed by the real builder into 1, 2 and 5 shards. Every shape of the
// search-benchmark-game (term, +a +b, a b, +a b, +a -b) over frequent, rare and absent words, and
// random booleans of 1-6 term clauses with every occurrence (tokens repeated across clauses),
// every mode, k from 1 to 1000, counts on, off and alone: the same documents in the same order,
// bit-identical scores, equal totals. The 1-shard index is also run through ExecuteTermBoolean
// directly (modes and / or), which must take every such shape: a fallback to the tree evaluator
// would hide a fast path's bug from the end-to-end check.
#include "tree_prune.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "core/query_tree.hpp"
#include "cpu_exec/local_index.hpp"
#include "index_store/list_cache.hpp"
#include "indexer/index_builder.hpp"
#include "tree_phrase.hpp"
#include "tree_reference.hpp"
#include "../temp_dir.hpp"

namespace search {
inline void PrintTo(const ScoredDoc& h, std::ostream* os) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "(%u, %.9g)", h.doc, static_cast<double>(h.score));
  *os << buf;
}
}  // namespace search

namespace search::testing {
namespace {

constexpr uint32_t kDocs = 6000;
constexpr uint32_t kVocab = 40;

// Documents of 0..40 words from a Zipf vocabulary: w0 is in most documents, w39 in a few dozen.
std::vector<std::string> Texts() {
  std::mt19937_64 rng(2026);
  std::vector<double> weights(kVocab);
  for (uint32_t i = 0; i < kVocab; ++i) weights[i] = 1.0 / (i + 1.0);
  std::discrete_distribution<uint32_t> word(weights.begin(), weights.end());
  std::vector<std::string> texts;
  for (uint32_t d = 0; d < kDocs; ++d) {
    const uint32_t len = d % 97 == 0 ? 0 : static_cast<uint32_t>(rng() % 41);
    std::string text;
    for (uint32_t i = 0; i < len; ++i) text += (i > 0 ? " " : "") + Word(word(rng));
    texts.push_back(text);
  }
  return texts;
}

std::string Describe(const Query& q) {
  std::string s = q.tree != nullptr ? CanonicalKey(*q.tree) : "flat:";
  if (q.tree == nullptr)
    for (const std::string& t : q.terms) s += " " + t;
  return s + " mode=" + std::string(QueryModeName(q.mode)) + " k=" + std::to_string(q.k) + (q.count ? " count" : "");
}

QueryNode Term(const std::string& t) {
  return QueryNode{QueryNode::Kind::kTerm, {t}, {}};
}

class TreePruneTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::vector<std::string> texts = Texts();
    dir_ = new TempDir();
    const std::string input = dir_->path() + "/corpus.jsonl";
    {
      std::ofstream out(input, std::ios::binary | std::ios::trunc);
      for (size_t d = 0; d < texts.size(); ++d)
        out << "{\"id\": \"d" << d << "\", \"contents\": \"" << texts[d] << "\"}\n";
    }
    for (uint32_t shards : {1u, 2u, 5u}) {
      IndexBuildOptions o;
      o.input = input;
      o.output = dir_->path() + "/index-" + std::to_string(shards);
      o.shards = shards;
      o.threads = 2;
      auto built = BuildIndex(o);
      ASSERT_TRUE(built.ok()) << built.status().ToString();
      auto index = LocalIndex::Open(o.output);
      ASSERT_TRUE(index.ok()) << index.status().ToString();
      indexes_->push_back(std::move(index).value());
    }
    Analyzer analyzer;
    std::vector<std::vector<std::string>> tokens;
    for (const std::string& t : texts) tokens.push_back(analyzer.Analyze(t));
    reference_ = new TreeReference(std::move(tokens));
  }
  static void TearDownTestSuite() {
    indexes_->clear();
    delete reference_;
    delete dir_;
  }

  // Every index answers q as the reference does; with `direct`, ExecuteTermBoolean on the 1-shard
  // index takes q's resolved tree(s) and answers them as the reference does too.
  static void ExpectExact(const Query& q, bool direct) {
    const TreeAnswer want = reference_->Search(q);
    ExpectIndexesAnswer(*indexes_, q, want, [&] { return Describe(q); });
    if (HasFatalFailure()) return;
    if (direct && q.tree != nullptr && q.mode != QueryMode::kAndOr) ExpectDirect(q, want);
  }

  // REQUIRES: q.mode is kAnd or kOr.
  static void ExpectDirect(const Query& q, const TreeAnswer& want) {
    const ShardReader& shard = (*indexes_)[0]->shard(0);
    const ShardMeta& meta = shard.meta();
    std::vector<std::shared_ptr<const CachedList>> held;
    std::vector<cpu_internal::TreeTermInput> inputs(q.terms.size());
    for (size_t i = 0; i < q.terms.size(); ++i) {
      auto info = shard.GetTermInfo(q.terms[i]);
      ASSERT_TRUE(info.ok());
      if (!info->has_value()) continue;
      auto list = shard.GetList(q.terms[i]);
      ASSERT_TRUE(list.ok()) << list.status().ToString();
      held.push_back(*list);
      inputs[i].list = &held.back()->view;
      inputs[i].idf = Bm25Idf(meta.stats.num_docs, (*info)->df);
    }
    std::vector<std::shared_ptr<const CachedPositions>> held_positions;
    const bool phrase = TreeHasPhrase(*q.tree);
    for (size_t i = 0; i < q.terms.size() && phrase; ++i) {
      if (inputs[i].list == nullptr) continue;
      auto positions = shard.GetPositions(q.terms[i]);
      ASSERT_TRUE(positions.ok()) << positions.status().ToString();
      held_positions.push_back(*positions);
      inputs[i].positions = &held_positions.back()->view;
    }
    const std::span<const float> norms(shard.norms(), meta.doc_end - meta.doc_begin);
    const QueryNode resolved = ResolveMode(*q.tree, q.mode);
    auto got = phrase ? cpu_internal::ExecuteSolePhrase(resolved, q.terms, inputs, norms, meta.doc_begin, q.k, q.count,
                                                        meta.bm25)
                      : cpu_internal::ExecuteTermBoolean(resolved, q.terms, inputs, norms, meta.doc_begin, q.k, q.count,
                                                         meta.bm25);
    ASSERT_TRUE(got.ok()) << Describe(q) << ": " << got.status().ToString();
    ASSERT_TRUE(got->has_value()) << Describe(q) << ": not taken by the fast paths";
    ASSERT_EQ((*got)->hits, want.hits) << Describe(q) << " (directly)";
    if (q.count) {
      ASSERT_EQ((*got)->total, want.total) << Describe(q) << " (directly)";
    }
  }

  static TempDir* dir_;
  static std::vector<std::unique_ptr<LocalIndex>>* indexes_;
  static TreeReference* reference_;
};

TempDir* TreePruneTest::dir_ = nullptr;
std::vector<std::unique_ptr<LocalIndex>>* TreePruneTest::indexes_ = new std::vector<std::unique_ptr<LocalIndex>>();
TreeReference* TreePruneTest::reference_ = nullptr;

constexpr QueryMode kModes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};

// The benchmark categories over pairs of frequent, middling, rare and absent words, both ways round.
TEST_F(TreePruneTest, BenchmarkShapesEqualBruteForce) {
  const std::vector<std::string> words = {"w0", "w1", "w5", "w15", "w39", "nosuch"};
  for (const std::string& a : words) {
    for (const std::string& b : words) {
      if (a == b) continue;
      const std::vector<QueryNode> trees = {
          QueryNode{QueryNode::Kind::kBool, {}, {{Occur::kDefault, Term(a)}}},
          QueryNode{QueryNode::Kind::kBool, {}, {{Occur::kMust, Term(a)}, {Occur::kMust, Term(b)}}},
          QueryNode{QueryNode::Kind::kBool, {}, {{Occur::kDefault, Term(a)}, {Occur::kDefault, Term(b)}}},
          QueryNode{QueryNode::Kind::kBool, {}, {{Occur::kMust, Term(a)}, {Occur::kDefault, Term(b)}}},
          QueryNode{QueryNode::Kind::kBool, {}, {{Occur::kMust, Term(a)}, {Occur::kMustNot, Term(b)}}},
          QueryNode{QueryNode::Kind::kBool, {}, {{Occur::kFilter, Term(a)}, {Occur::kShould, Term(b)}}},
      };
      for (const QueryNode& t : trees) {
        for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd}) {
          for (uint32_t k : {0u, 1u, 10u, 1000u}) {
            for (bool count : {false, true}) {
              if (k == 0 && !count) continue;
              ExpectExact(MakeQuery(t, mode, k, count), true);
              if (HasFatalFailure()) return;
            }
          }
        }
      }
    }
  }
}

// Random booleans of 1-6 term clauses, every occurrence, a token now and then in two clauses.
TEST_F(TreePruneTest, RandomTermBooleansEqualBruteForce) {
  std::mt19937_64 rng(48);
  const Occur occurs[] = {Occur::kDefault, Occur::kMust, Occur::kShould, Occur::kMustNot, Occur::kFilter};
  auto token = [&]() -> std::string {
    if (rng() % 30 == 0) return "nosuch";
    const uint32_t r = static_cast<uint32_t>(rng() % 100);
    return Word(r < 50 ? static_cast<uint32_t>(rng() % 4) : static_cast<uint32_t>(rng() % kVocab));
  };
  for (int i = 0; i < 700; ++i) {
    QueryNode tree{QueryNode::Kind::kBool, {}, {}};
    const size_t n = 1 + rng() % 6;
    for (size_t c = 0; c < n; ++c) {
      std::string t = c > 0 && rng() % 6 == 0 ? tree.clauses[rng() % c].node.tokens[0] : token();
      tree.clauses.push_back({occurs[rng() % 5], Term(t)});
    }
    const QueryMode mode = kModes[rng() % 3];
    const bool count = rng() % 2 == 0;
    const uint32_t ks[] = {1, 2, 3, 5, 10, 37, 100, 1000, 1 + static_cast<uint32_t>(rng() % 1000)};
    const uint32_t k = count && rng() % 5 == 0 ? 0 : ks[rng() % 9];
    const Query q = MakeQuery(tree, mode, k, count);
    // Direct: shapes the fast paths must take (some required clause, or a bag of distinct terms).
    bool direct = q.tree != nullptr && q.mode != QueryMode::kAndOr;  // ExpectExact skips the rest
    if (direct) {
      const QueryNode r = ResolveMode(*q.tree, q.mode);
      bool required = false, bag = true;
      for (size_t c = 0; c < r.clauses.size(); ++c) {
        required |= r.clauses[c].occur == Occur::kMust || r.clauses[c].occur == Occur::kFilter;
        bag &= r.clauses[c].occur == r.clauses[0].occur && r.clauses[c].occur != Occur::kMustNot &&
               r.clauses[c].occur != Occur::kFilter;
        for (size_t e = 0; e < c; ++e) bag &= r.clauses[e].node.tokens != r.clauses[c].node.tokens;
      }
      direct = k == 0 || required || bag;
    }
    ExpectExact(q, direct);
    if (HasFatalFailure()) return;
  }
}

// Frequent required words with rarer optional ones (+the easily): once the required lists'
// maxima alone cannot win, the optional lists drive (TopShouldDriven); with excluded and filter
// clauses too, and optional lists both rarer and about as frequent as the required ones.
TEST_F(TreePruneTest, FrequentRequiredRareShouldEqualBruteForce) {
  std::mt19937_64 rng(4848);
  for (int i = 0; i < 300; ++i) {
    QueryNode tree{QueryNode::Kind::kBool, {}, {}};
    tree.clauses.push_back({Occur::kMust, Term(Word(static_cast<uint32_t>(rng() % 3)))});
    if (rng() % 4 == 0) tree.clauses.push_back({Occur::kMust, Term(Word(static_cast<uint32_t>(rng() % 6)))});
    if (rng() % 5 == 0) tree.clauses.push_back({Occur::kFilter, Term(Word(static_cast<uint32_t>(rng() % 4)))});
    const size_t shoulds = 1 + rng() % 3;
    for (size_t c = 0; c < shoulds; ++c) {
      const uint32_t w = rng() % 5 == 0 ? static_cast<uint32_t>(rng() % 8) : 8 + static_cast<uint32_t>(rng() % 32);
      tree.clauses.push_back({Occur::kShould, Term(Word(w))});
    }
    if (rng() % 3 == 0) tree.clauses.push_back({Occur::kMustNot, Term(Word(4 + static_cast<uint32_t>(rng() % 12)))});
    std::shuffle(tree.clauses.begin(), tree.clauses.end(), rng);
    const uint32_t ks[] = {1, 2, 3, 10, 37, 100};
    ExpectExact(MakeQuery(tree, QueryMode::kOr, ks[rng() % 6], rng() % 4 == 0), true);
    if (HasFatalFailure()) return;
  }
}

// A sole phrase (the phrase category): 2-5 tokens, mostly frequent ones so that phrases match,
// repeated tokens ("w0 w0", overlaps counted), absent tokens; must, should, filter or bare.
TEST_F(TreePruneTest, SolePhrasesEqualBruteForce) {
  std::mt19937_64 rng(4848);
  const Occur occurs[] = {Occur::kDefault, Occur::kMust, Occur::kShould, Occur::kFilter};
  uint64_t matched = 0;
  for (int i = 0; i < 500; ++i) {
    QueryNode phrase{QueryNode::Kind::kPhrase, {}, {}};
    const size_t len = 2 + rng() % 4;
    for (size_t t = 0; t < len; ++t) {
      if (t > 0 && rng() % 4 == 0) {
        phrase.tokens.push_back(phrase.tokens[rng() % t]);
      } else {
        phrase.tokens.push_back(rng() % 40 == 0 ? "nosuch"
                                                : Word(static_cast<uint32_t>(rng() % (rng() % 3 == 0 ? kVocab : 5))));
      }
    }
    QueryNode tree{QueryNode::Kind::kBool, {}, {{occurs[rng() % 4], phrase}}};
    const QueryMode mode = kModes[rng() % 3];
    const bool count = rng() % 2 == 0;
    const uint32_t ks[] = {1, 2, 3, 5, 10, 37, 100, 1000, 1 + static_cast<uint32_t>(rng() % 1000)};
    const uint32_t k = count && rng() % 4 == 0 ? 0 : ks[rng() % 9];
    const Query q = MakeQuery(tree, mode, k, count);
    ASSERT_NE(q.tree, nullptr);
    ASSERT_EQ(q.tree->clauses.size(), 1u);
    ExpectExact(q, q.tree->clauses[0].node.kind == QueryNode::Kind::kPhrase);
    if (HasFatalFailure()) return;
    matched += reference_->Search(q).total;
  }
  EXPECT_GT(matched, 0u);
}

// Counted phrases of three and four slots over the six most frequent words, every ordered choice:
// the count path drops a common document of the two shortest lists unless their tokens occur at
// their slots' distance (either order of those slots, distances 1 to 3), before the other lists.
TEST_F(TreePruneTest, CountedLongPhrasesEqualBruteForce) {
  uint64_t matched = 0;
  std::mt19937_64 rng(48);
  for (uint32_t i = 0; i < 6 * 6 * 6 + 100; ++i) {
    QueryNode phrase{QueryNode::Kind::kPhrase, {}, {}};
    if (i < 6 * 6 * 6) {
      for (uint32_t v = i, t = 0; t < 3; ++t, v /= 6) phrase.tokens.push_back(Word(v % 6));
    } else {
      for (uint32_t t = 0; t < 4; ++t) phrase.tokens.push_back(Word(static_cast<uint32_t>(rng() % 6)));
    }
    QueryNode tree{QueryNode::Kind::kBool, {}, {{Occur::kDefault, phrase}}};
    const Query q = MakeQuery(tree, QueryMode::kOr, i % 3 == 0 ? 10 : 0, true);
    ExpectExact(q, true);
    if (HasFatalFailure()) return;
    matched += reference_->Search(q).total;
  }
  EXPECT_GT(matched, 0u);
}

}  // namespace
}  // namespace search::testing
