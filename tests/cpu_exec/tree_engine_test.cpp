// The tree evaluator (cpu_exec/src/tree_query.hpp) over in-memory shards: lists from EncodeList and
// positions from EncodePositions, built from the documents' token sequences, against the brute-force
// evaluator (tree_reference.hpp). Phrases of 2-5 tokens with repeats and overlaps, nested booleans,
// modes and or, counts, 1 and 3 shards merged: the same documents, order, float bits and totals.
// Also: corrupt or missing positions are errors, never answers.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "core/bm25.hpp"
#include "core/query_tree.hpp"
#include "core/topk.hpp"
#include "tree_query.hpp"
#include "tree_reference.hpp"

namespace search::testing {
namespace {

using cpu_internal::ExecuteTree;
using cpu_internal::TreeTermInput;

// A blob copied into 4-byte aligned storage (ListView reads words).
struct Blob {
  std::vector<uint32_t> words;
  size_t size = 0;
  std::string_view view() const { return {reinterpret_cast<const char*>(words.data()), size}; }
  static Blob Of(const std::string& s) {
    Blob b;
    b.words.assign((s.size() + 3) / 4, 0u);
    std::memcpy(b.words.data(), s.data(), s.size());
    b.size = s.size();
    return b;
  }
};

struct PosShard {
  uint32_t begin = 0, end = 0;
  std::vector<float> norms;
  std::map<std::string, size_t> index;  // term -> slot in the vectors below
  std::vector<std::unique_ptr<Blob>> list_blobs, pos_blobs;
  std::vector<ListView> lists;
  std::vector<PositionsView> positions;
  std::vector<float> idf;
};

struct Docs {
  std::vector<std::vector<std::string>> tokens;
  uint64_t total = 0;
  std::map<std::string, uint32_t> df;
};

Docs MakeDocs(uint32_t n, uint32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights(vocab);
  for (uint32_t i = 0; i < vocab; ++i) weights[i] = 1.0 / (i + 1.0);
  std::discrete_distribution<uint32_t> word(weights.begin(), weights.end());
  Docs d;
  // Overlaps and repeats by hand first, then random documents (a few long ones: tf in the hundreds).
  d.tokens.push_back({"w0", "w0", "w0", "w0"});
  d.tokens.push_back({"w1", "w2", "w1", "w2", "w1", "w2", "w1"});
  d.tokens.push_back({"w2", "w1"});
  d.tokens.push_back({});
  for (uint32_t i = static_cast<uint32_t>(d.tokens.size()); i < n; ++i) {
    const uint32_t len = i % 101 == 0 ? 600 : static_cast<uint32_t>(rng() % 25);
    std::vector<std::string> t;
    for (uint32_t j = 0; j < len; ++j) t.push_back(Word(word(rng)));
    d.tokens.push_back(std::move(t));
  }
  for (const auto& t : d.tokens) {
    d.total += t.size();
    std::map<std::string, uint32_t> seen;
    for (const std::string& w : t) ++seen[w];
    for (const auto& [w, f] : seen) ++d.df[w];
  }
  return d;
}

PosShard BuildPosShard(const Docs& docs, uint32_t begin, uint32_t end) {
  PosShard s;
  s.begin = begin;
  s.end = end;
  CollectionStats stats;
  stats.num_docs = docs.tokens.size();
  stats.total_tokens = docs.total;
  for (uint32_t d = begin; d < end; ++d)
    s.norms.push_back(Bm25Norm(static_cast<uint32_t>(docs.tokens[d].size()), stats.avgdl()));
  // term -> per doc (ascending) its positions
  std::map<std::string, std::vector<std::pair<uint32_t, std::vector<uint32_t>>>> post;
  for (uint32_t d = begin; d < end; ++d) {
    std::map<std::string, std::vector<uint32_t>> here;
    for (uint32_t p = 0; p < docs.tokens[d].size(); ++p) here[docs.tokens[d][p]].push_back(p);
    for (auto& [w, ps] : here) post[w].push_back({d, std::move(ps)});
  }
  for (const auto& [w, plist] : post) {
    std::vector<uint32_t> ds, tfs, ps;
    for (const auto& [d, p] : plist) {
      ds.push_back(d);
      tfs.push_back(static_cast<uint32_t>(p.size()));
      ps.insert(ps.end(), p.begin(), p.end());
    }
    const float idf = Bm25Idf(stats.num_docs, docs.df.at(w));
    auto list = EncodeList(ds, tfs, begin,
                           [&](uint32_t d, uint32_t f) { return Bm25TermScore(idf, f, s.norms[d - begin]); });
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    auto pos = EncodePositions(tfs, ps);
    EXPECT_TRUE(pos.ok()) << pos.status().ToString();
    if (!list.ok() || !pos.ok()) continue;
    s.index[w] = s.lists.size();
    s.list_blobs.push_back(std::make_unique<Blob>(Blob::Of(*list)));
    s.pos_blobs.push_back(std::make_unique<Blob>(Blob::Of(*pos)));
    auto lv = ListView::Parse(s.list_blobs.back()->view());
    EXPECT_TRUE(lv.ok()) << lv.status().ToString();
    auto pv = PositionsView::Parse(s.pos_blobs.back()->view(), static_cast<uint32_t>(ds.size()));
    EXPECT_TRUE(pv.ok()) << pv.status().ToString();
    s.lists.push_back(lv.ok() ? *lv : ListView());
    s.positions.push_back(pv.ok() ? *pv : PositionsView());
    s.idf.push_back(idf);
  }
  return s;
}

// The inputs of `terms` in shard s (absent: no list); global idf for every term.
std::vector<TreeTermInput> InputsFor(const PosShard& s, const Docs& docs, const std::vector<std::string>& terms) {
  std::vector<TreeTermInput> in(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    auto df = docs.df.find(terms[i]);
    in[i].idf = Bm25Idf(docs.tokens.size(), df == docs.df.end() ? 0 : df->second);
    auto it = s.index.find(terms[i]);
    if (it == s.index.end()) continue;
    in[i].list = &s.lists[it->second];
    in[i].positions = &s.positions[it->second];
  }
  return in;
}

TreeAnswer RunShards(const std::vector<PosShard>& shards, const Docs& docs, const QueryNode& resolved, uint32_t k,
                     bool count) {
  const std::vector<std::string> terms = TreeTerms(resolved);
  TreeAnswer out;
  std::vector<std::vector<ScoredDoc>> per;
  for (const PosShard& s : shards) {
    const std::vector<TreeTermInput> in = InputsFor(s, docs, terms);
    auto r = ExecuteTree(resolved, terms, in, s.norms, s.begin, k, count);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return out;
    EXPECT_EQ(r->has_total, count);
    out.total += r->total;
    per.push_back(std::move(r->hits));
  }
  out.hits = MergeTopK(per, k);
  return out;
}

TEST(TreeEngine, RandomTreesWithPhrasesEqualBruteForce) {
  const Docs docs = MakeDocs(2000, 8, 5);
  TreeReference ref(docs.tokens);
  const std::vector<std::vector<PosShard>> layouts = [&] {
    std::vector<std::vector<PosShard>> l(2);
    l[0].push_back(BuildPosShard(docs, 0, 2000));
    l[1].push_back(BuildPosShard(docs, 0, 700));
    l[1].push_back(BuildPosShard(docs, 700, 1300));
    l[1].push_back(BuildPosShard(docs, 1300, 2000));
    return l;
  }();
  std::mt19937_64 rng(31);
  RandomTreeGen gen{rng, 8, true};
  const uint32_t ks[] = {1, 3, 10, 100, 1000};
  uint64_t phrase_matches = 0;
  for (int i = 0; i < 500; ++i) {
    const QueryNode tree = Canonicalize(gen.Bool(0));
    ASSERT_TRUE(ValidateTree(tree).ok());
    const QueryMode mode = rng() % 2 == 0 ? QueryMode::kAnd : QueryMode::kOr;
    const bool count = rng() % 2 == 0;
    const uint32_t k = count && rng() % 5 == 0 ? 0 : ks[rng() % 5];
    Query q;
    q.tree = std::make_shared<const QueryNode>(tree);
    q.terms = TreeTerms(tree);
    q.mode = mode;
    q.k = k;
    q.count = count;
    const TreeAnswer want = ref.Search(q);
    if (TreeHasPhrase(tree)) phrase_matches += want.total;
    for (const auto& shards : layouts) {
      const TreeAnswer got = RunShards(shards, docs, ResolveMode(tree, mode), k, count);
      ASSERT_EQ(got.hits, want.hits) << CanonicalKey(tree) << " " << QueryModeName(mode) << " k=" << k << " over "
                                     << shards.size() << " shards";
      if (count) {
        ASSERT_EQ(got.total, want.total) << CanonicalKey(tree) << " " << QueryModeName(mode);
      }
    }
  }
  EXPECT_GT(phrase_matches, 0u);  // the phrases matched something
}

TEST(TreeEngine, PhraseOverlapsAndRepeatsCountEveryStart) {
  const Docs docs = MakeDocs(200, 8, 9);
  TreeReference ref(docs.tokens);
  std::vector<PosShard> shards;
  shards.push_back(BuildPosShard(docs, 0, 200));
  auto phrase = [](std::vector<std::string> t) {
    QueryNode root{QueryNode::Kind::kBool, {}, {}};
    root.clauses.push_back({Occur::kMust, QueryNode{QueryNode::Kind::kPhrase, std::move(t), {}}});
    return root;
  };
  // doc 0 is w0 x4: "w0 w0" starts at 0, 1, 2; doc 1 is (w1 w2) x3 w1: "w1 w2 w1" starts at 0, 2, 4.
  for (const auto& [tokens, doc, tf] : std::vector<std::tuple<std::vector<std::string>, uint32_t, uint32_t>>{
           {{"w0", "w0"}, 0, 3}, {{"w0", "w0", "w0", "w0"}, 0, 1}, {{"w1", "w2", "w1"}, 1, 3}, {{"w2", "w1"}, 1, 3}}) {
    const QueryNode tree = phrase(tokens);
    const TreeAnswer got = RunShards(shards, docs, tree, 1000, true);
    bool found = false;
    for (const ScoredDoc& h : got.hits) {
      if (h.doc != doc) continue;
      found = true;
      float idf = 0.0f;
      for (const std::string& t : tokens) idf += Bm25Idf(docs.tokens.size(), docs.df.at(t));
      const float norm = Bm25Norm(static_cast<uint32_t>(docs.tokens[doc].size()),
                                  static_cast<double>(docs.total) / docs.tokens.size());
      EXPECT_EQ(h.score, Bm25TermScore(idf, tf, norm)) << CanonicalKey(tree);
    }
    EXPECT_TRUE(found) << CanonicalKey(tree);
    Query q;
    q.tree = std::make_shared<const QueryNode>(tree);
    q.terms = TreeTerms(tree);
    q.k = 1000;
    q.count = true;
    EXPECT_EQ(got.hits, ref.Search(q).hits);
  }
}

TEST(TreeEngine, MissingOrCorruptPositionsAreErrors) {
  const Docs docs = MakeDocs(300, 8, 3);
  PosShard s = BuildPosShard(docs, 0, 300);
  QueryNode tree{QueryNode::Kind::kBool, {}, {}};
  tree.clauses.push_back({Occur::kMust, QueryNode{QueryNode::Kind::kPhrase, {"w0", "w1"}, {}}});
  const std::vector<std::string> terms = TreeTerms(tree);
  std::vector<TreeTermInput> in = InputsFor(s, docs, terms);
  ASSERT_TRUE(ExecuteTree(tree, terms, in, s.norms, 0, 10, true).ok());
  // No positions: InvalidArgument.
  std::vector<TreeTermInput> none = in;
  none[1].positions = nullptr;
  EXPECT_EQ(ExecuteTree(tree, terms, none, s.norms, 0, 10, true).status().code(), StatusCode::kInvalidArgument);
  // Positions of another list (w1's against w0's list): Corruption, not an answer.
  std::vector<TreeTermInput> swapped = in;
  swapped[0].positions = in[1].positions;
  EXPECT_EQ(ExecuteTree(tree, terms, swapped, s.norms, 0, 10, true).status().code(), StatusCode::kCorruption);
  // A bare clause left unresolved, and k 0 without a count.
  QueryNode bare = tree;
  bare.clauses[0].occur = Occur::kDefault;
  EXPECT_EQ(ExecuteTree(bare, terms, in, s.norms, 0, 10, true).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExecuteTree(tree, terms, in, s.norms, 0, 0, false).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace search::testing
