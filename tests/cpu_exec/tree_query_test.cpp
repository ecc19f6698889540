// The query language on the CPU engine against the brute-force evaluator (tree_reference.hpp):
// random corpora over a small vocabulary (so phrases and repeated tokens occur), indexed by the
// real index builder into 1, 2 and 5 shards and searched through LocalIndex with random trees up
// to three nested booleans deep (terms, phrases of 2-5 tokens with repeats, -, + and filter
// clauses, tokens absent from the index), every mode, counts on and off, count only, k from 1 to
// 1000. Exact equality: the same documents in the same order, bit-identical scores, equal totals.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "core/query_tree.hpp"
#include "cpu_exec/local_index.hpp"
#include "indexer/index_builder.hpp"
#include "tree_reference.hpp"

namespace search {
// Hits print as (doc, score with every digit) in failure messages.
inline void PrintTo(const ScoredDoc& h, std::ostream* os) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "(%u, %.9g)", h.doc, static_cast<double>(h.score));
  *os << buf;
}
}  // namespace search

namespace search::testing {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tree_query_test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Documents of 0..max_len words drawn from a Zipf vocabulary of `vocab` words, with separators
// the analyzer drops and letters it folds.
std::vector<std::string> RandomTexts(uint32_t n, uint32_t vocab, uint32_t max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights(vocab);
  for (uint32_t i = 0; i < vocab; ++i) weights[i] = 1.0 / (i + 1.0);
  std::discrete_distribution<uint32_t> word(weights.begin(), weights.end());
  const char* seps[] = {" ", " ", " ", ", ", ". "};
  std::vector<std::string> texts;
  for (uint32_t d = 0; d < n; ++d) {
    const uint32_t len = d % 53 == 0 ? 0 : static_cast<uint32_t>(rng() % (max_len + 1));
    std::string text;
    for (uint32_t i = 0; i < len; ++i) {
      if (i > 0) text += seps[rng() % 5];
      std::string w = Word(word(rng));
      if (rng() % 9 == 0) w[0] = 'W';
      text += w;
    }
    texts.push_back(text);
  }
  return texts;
}

// Builds an index of `shards` shards from the texts with the real builder (searchctl index).
void BuildTestIndex(const std::vector<std::string>& texts, uint32_t shards, const std::string& dir) {
  const std::string input = dir + ".jsonl";
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    for (size_t d = 0; d < texts.size(); ++d)
      out << "{\"id\": \"doc-" << d << "\", \"contents\": \"" << texts[d] << "\"}\n";  // no characters to escape
  }
  IndexBuildOptions o;
  o.input = input;
  o.output = dir;
  o.shards = shards;
  o.threads = 2;
  auto r = BuildIndex(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

std::string Describe(const Query& q) {
  std::string s = q.tree != nullptr ? CanonicalKey(*q.tree) : "flat:";
  if (q.tree == nullptr)
    for (const std::string& t : q.terms) s += " " + t;
  s += " mode=" + std::string(QueryModeName(q.mode)) + " k=" + std::to_string(q.k) + (q.count ? " count" : "");
  return s;
}

class TreeQueryTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kDocs = 1500;
  static constexpr uint32_t kVocab = 14;

  static void SetUpTestSuite() {
    texts_ = new std::vector<std::string>(RandomTexts(kDocs, kVocab, 30, 4242));
    dir_ = new TempDir();
    indexes_ = new std::vector<std::unique_ptr<LocalIndex>>();
    for (uint32_t shards : {1u, 2u, 5u}) {
      const std::string d = dir_->path() + "/index-" + std::to_string(shards);
      BuildTestIndex(*texts_, shards, d);
      auto index = LocalIndex::Open(d);
      ASSERT_TRUE(index.ok()) << index.status().ToString();
      indexes_->push_back(std::move(index).value());
    }
    Analyzer analyzer;
    std::vector<std::vector<std::string>> tokens;
    for (const std::string& t : *texts_) tokens.push_back(analyzer.Analyze(t));
    reference_ = new TreeReference(std::move(tokens));
  }
  static void TearDownTestSuite() {
    delete indexes_;
    delete reference_;
    delete dir_;
    delete texts_;
  }

  // Every index answers q exactly as the reference does.
  static void ExpectExact(const Query& q) {
    const TreeAnswer want = reference_->Search(q);
    for (const auto& index : *indexes_) {
      auto got = index->Search(q);
      ASSERT_TRUE(got.ok()) << Describe(q) << ": " << got.status().ToString();
      ASSERT_EQ(got->hits, want.hits) << Describe(q) << " over " << index->num_shards() << " shards";
      ASSERT_EQ(got->has_total, q.count) << Describe(q);
      if (q.count) {
        ASSERT_EQ(got->total, want.total) << Describe(q) << " over " << index->num_shards() << " shards";
      }
    }
  }

  static std::vector<std::string>* texts_;
  static TempDir* dir_;
  static std::vector<std::unique_ptr<LocalIndex>>* indexes_;
  static TreeReference* reference_;
};

std::vector<std::string>* TreeQueryTest::texts_ = nullptr;
TempDir* TreeQueryTest::dir_ = nullptr;
std::vector<std::unique_ptr<LocalIndex>>* TreeQueryTest::indexes_ = nullptr;
TreeReference* TreeQueryTest::reference_ = nullptr;

constexpr QueryMode kModes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};

TEST_F(TreeQueryTest, RandomTreesEqualBruteForce) {
  std::mt19937_64 rng(99);
  RandomTreeGen gen{rng, kVocab, true};
  const uint32_t ks[] = {1, 2, 3, 5, 10, 37, 100, 1000};
  uint64_t phrase_matches = 0;
  for (int i = 0; i < 600; ++i) {
    QueryNode raw = gen.Bool(0);
    ASSERT_TRUE(ValidateTree(raw).ok()) << CanonicalKey(raw);
    const QueryMode mode = kModes[rng() % 3];
    const bool count = rng() % 2 == 0;
    const uint32_t k = count && rng() % 5 == 0 ? 0 : ks[rng() % 8];
    const Query q = MakeQuery(raw, mode, k, count);
    ExpectExact(q);
    if (HasFatalFailure()) return;
    if (q.tree != nullptr && TreeHasPhrase(*q.tree)) phrase_matches += reference_->Search(q).total;
  }
  EXPECT_GT(phrase_matches, 0u);  // phrases matched documents, through the index's positions
}

// A second corpus of another shape: 6 words, documents up to 60 words (long runs of repeats), a
// few of 400 words (lists of many blocks; positions blocks of many values).
TEST(TreeQuerySecondCorpus, RandomTreesEqualBruteForce) {
  std::vector<std::string> texts = RandomTexts(900, 6, 60, 17);
  for (size_t d = 0; d < texts.size(); d += 150) texts[d] = RandomTexts(1, 6, 400, d + 1)[0];
  TempDir dir;
  std::vector<std::unique_ptr<LocalIndex>> indexes;
  for (uint32_t shards : {1u, 2u, 5u}) {
    const std::string d = dir.path() + "/index-" + std::to_string(shards);
    BuildTestIndex(texts, shards, d);
    auto index = LocalIndex::Open(d);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    indexes.push_back(std::move(index).value());
  }
  Analyzer analyzer;
  std::vector<std::vector<std::string>> tokens;
  for (const std::string& t : texts) tokens.push_back(analyzer.Analyze(t));
  const TreeReference reference(std::move(tokens));
  std::mt19937_64 rng(5);
  RandomTreeGen gen{rng, 6, true};
  const uint32_t ks[] = {1, 4, 10, 100, 1000};
  for (int i = 0; i < 300; ++i) {
    const QueryMode mode = kModes[rng() % 3];
    const bool count = rng() % 2 == 0;
    const uint32_t k = count && rng() % 5 == 0 ? 0 : ks[rng() % 5];
    const Query q = MakeQuery(gen.Bool(0), mode, k, count);
    const TreeAnswer want = reference.Search(q);
    for (const auto& index : indexes) {
      auto got = index->Search(q);
      ASSERT_TRUE(got.ok()) << Describe(q) << ": " << got.status().ToString();
      ASSERT_EQ(got->hits, want.hits) << Describe(q) << " over " << index->num_shards() << " shards";
      if (q.count) {
        ASSERT_EQ(got->total, want.total) << Describe(q) << " over " << index->num_shards() << " shards";
      }
    }
  }
}

// An index built without positions answers terms and booleans but refuses phrases (InvalidArgument,
// the reader's reason), even a phrase of tokens it does not hold.
TEST_F(TreeQueryTest, PhrasesNeedPositions) {
  const std::string dir = dir_->path() + "/no-positions";
  const std::string input = dir + ".jsonl";
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    for (size_t d = 0; d < 200; ++d) out << "{\"id\": \"d" << d << "\", \"contents\": \"" << (*texts_)[d] << "\"}\n";
  }
  IndexBuildOptions o;
  o.input = input;
  o.output = dir;
  o.shards = 2;
  o.threads = 2;
  o.positions = false;
  ASSERT_TRUE(BuildIndex(o).ok());
  auto index = LocalIndex::Open(dir);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  auto term = [](const std::string& t) { return QueryNode{QueryNode::Kind::kTerm, {t}, {}}; };
  auto phrase = [](std::vector<std::string> t) { return QueryNode{QueryNode::Kind::kPhrase, std::move(t), {}}; };
  QueryNode terms_only{QueryNode::Kind::kBool, {}, {{Occur::kMust, term("w0")}, {Occur::kMustNot, term("w1")}}};
  auto ok = (*index)->Search(MakeQuery(terms_only, QueryMode::kAnd, 10, true));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_GT(ok->total, 0u);
  for (const QueryNode& p : {phrase({"w0", "w1"}), phrase({"nosuch1", "nosuch2"})}) {
    QueryNode tree{QueryNode::Kind::kBool, {}, {{Occur::kShould, term("w2")}, {Occur::kMust, p}}};
    for (bool count : {false, true}) {
      auto r = (*index)->Search(MakeQuery(tree, QueryMode::kOr, 10, count));
      ASSERT_FALSE(r.ok()) << CanonicalKey(p);
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("positions"), std::string::npos) << r.status().ToString();
    }
  }
}

// Bags of words (the flat fast paths without a count, the tree evaluator with one).
TEST_F(TreeQueryTest, FlatQueriesWithAndWithoutCount) {
  std::mt19937_64 rng(7);
  RandomTreeGen gen{rng, kVocab, false};
  for (int i = 0; i < 200; ++i) {
    Query q;
    const size_t n = 1 + rng() % 5;
    for (size_t j = 0; j < n; ++j) q.terms.push_back(gen.Token());
    std::sort(q.terms.begin(), q.terms.end());
    q.terms.erase(std::unique(q.terms.begin(), q.terms.end()), q.terms.end());
    q.mode = kModes[rng() % 3];
    q.count = rng() % 2 == 0;
    q.k = q.count && rng() % 4 == 0 ? 0 : 1 + static_cast<uint32_t>(rng() % 1000);
    ExpectExact(q);
    if (HasFatalFailure()) return;
  }
}

TEST_F(TreeQueryTest, ShapesByHand) {
  auto term = [](const std::string& t) { return QueryNode{QueryNode::Kind::kTerm, {t}, {}}; };
  auto boolean = [](std::vector<QueryNode::Clause> c) { return QueryNode{QueryNode::Kind::kBool, {}, std::move(c)}; };
  const std::vector<QueryNode> trees = {
      boolean({{Occur::kMustNot, term("w0")}}),                                    // - only: nothing
      boolean({{Occur::kMust, term("w0")}, {Occur::kMustNot, term("w1")}}),        // +a -b
      boolean({{Occur::kDefault, term("w2")}, {Occur::kMustNot, term("w0")}}),     // a -b
      boolean({{Occur::kFilter, term("w3")}}),                                     // filter only: score 0
      boolean({{Occur::kMust, term("w1")}, {Occur::kShould, term("w2")}}),         // +a b
      boolean({{Occur::kMust, term("nosuch")}, {Occur::kShould, term("w2")}}),     // absent required term
      boolean({{Occur::kShould, term("nosuch")}, {Occur::kShould, term("w5")}}),   // absent optional term
      boolean({{Occur::kMust, boolean({{Occur::kMustNot, term("w1")}})}, {Occur::kShould, term("w0")}}),
      boolean({{Occur::kShould, boolean({{Occur::kMust, term("w0")}, {Occur::kMust, term("w1")}})},
               {Occur::kShould, boolean({{Occur::kFilter, term("w2")}, {Occur::kMustNot, term("w0")}})}}),
  };
  for (const QueryNode& t : trees) {
    for (QueryMode mode : kModes) {
      for (uint32_t k : {0u, 1u, 10u, 1000u}) {
        for (bool count : {false, true}) {
          if (k == 0 && !count) continue;
          ExpectExact(MakeQuery(t, mode, k, count));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_F(TreeQueryTest, BadRequests) {
  const LocalIndex& index = *(*indexes_)[0];
  Query q;
  q.terms = {"w0"};
  q.k = 0;
  EXPECT_EQ(index.Search(q).status().code(), StatusCode::kInvalidArgument);  // k 0 without a count
  q.k = kMaxK + 1;
  q.count = true;
  EXPECT_EQ(index.Search(q).status().code(), StatusCode::kInvalidArgument);
  // A tree naming a token that query.terms lacks.
  QueryNode tree{QueryNode::Kind::kBool, {}, {{Occur::kMust, QueryNode{QueryNode::Kind::kTerm, {"w1"}, {}}}}};
  q.tree = std::make_shared<const QueryNode>(tree);
  q.k = 10;
  EXPECT_EQ(index.Search(q).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace search::testing
