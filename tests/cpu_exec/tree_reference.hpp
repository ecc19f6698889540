// A brute-force evaluator of the query language (core/query_tree.hpp, docs/SCORING.md), written
// from the documents' analyzed token sequences alone, with no index, no cursor and no pruning:
//   term     tf = the token's occurrences in the document;
//   phrase   tf = the start positions p where tokens[p + i] == phrase token i for every i
//            (overlaps and repeats included); idf = the float sum, in text order, of the tokens'
//            idfs;
//   both     score = Bm25TermScore(idf, tf, Bm25Norm(dl, avgdl)) when tf > 0;
//   boolean  matches when every kMust and kFilter clause matches, no kMustNot clause does and,
//            without kMust or kFilter clauses, some kShould clause matches (kMustNot clauses alone:
//            nothing); score = the float sum, in clause order, of its matching kMust and kShould
//            clauses' scores.
// Bare clauses (kDefault) are resolved here, independently of core's ResolveMode: kMust under
// and, kShould under or; andor is the and-answer unless it has fewer than k matches (then the
// or-answer). A flat query (tree null) is the boolean of its terms as bare clauses. core/bm25.hpp's
// float operations are used in the same order, so answers must equal the engines' bit for bit.
// Thread-safety: Search is const and reentrant.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/bm25.hpp"
#include "core/query.hpp"
#include "core/query_tree.hpp"
#include "core/topk.hpp"

namespace search::testing {

struct TreeAnswer {
  std::vector<ScoredDoc> hits;  // best first, at most k
  uint64_t total = 0;           // every matching document
};

inline std::string Word(uint32_t i) {
  std::string w = std::to_string(i);  // not "w" + to_string(i): GCC 12 warns (-Wrestrict) on that
  return w.insert(0, 1, 'w');
}

// Every index of `indexes` (pointers to indexes with Search(q) and num_shards()) answers q with
// want's hits, and with want's total when q asks for a count; what() names q in a failure.
template <class Indexes, class What>
void ExpectIndexesAnswer(const Indexes& indexes, const Query& q, const TreeAnswer& want, const What& what) {
  for (const auto& index : indexes) {
    auto got = index->Search(q);
    ASSERT_TRUE(got.ok()) << what() << ": " << got.status().ToString();
    ASSERT_EQ(got->hits, want.hits) << what() << " over " << index->num_shards() << " shards";
    ASSERT_EQ(got->has_total, q.count) << what();
    if (q.count) {
      ASSERT_EQ(got->total, want.total) << what() << " over " << index->num_shards() << " shards";
    }
  }
}

// Random raw trees (not canonical: MakeQuery or Canonicalize them) over the words w0..w<vocab-1>:
// booleans of 1-4 clauses of every occurrence nested up to three deep, terms mostly among the six
// most frequent words, now and then a token absent from the corpus, and (with `phrases`) phrases
// of 2-5 tokens that repeat their own tokens a third of the time.
struct RandomTreeGen {
  std::mt19937_64& rng;
  uint32_t vocab;
  bool phrases;

  std::string Token() {
    if (rng() % 40 == 0) return "nosuch" + std::to_string(rng() % 3);  // absent from the index
    // Mostly frequent words, so that clauses overlap and phrases occur.
    const uint32_t r = static_cast<uint32_t>(rng() % 100);
    return Word(r < 70 ? static_cast<uint32_t>(rng() % std::min(vocab, 6u)) : static_cast<uint32_t>(rng() % vocab));
  }
  Occur RandomOccur() {
    const uint32_t r = static_cast<uint32_t>(rng() % 100);
    if (r < 40) return Occur::kDefault;
    if (r < 55) return Occur::kMust;
    if (r < 70) return Occur::kShould;
    if (r < 85) return Occur::kMustNot;
    return Occur::kFilter;
  }
  QueryNode Node(uint32_t depth) {
    QueryNode n;
    const uint32_t r = static_cast<uint32_t>(rng() % 100);
    if (depth < 3 && r < 18) return Bool(depth + 1);
    if (phrases && r < 40) {
      n.kind = QueryNode::Kind::kPhrase;
      const size_t len = 2 + rng() % 4;
      for (size_t i = 0; i < len; ++i)
        n.tokens.push_back(i > 0 && rng() % 3 == 0 ? n.tokens[rng() % i] : Token());  // repeats
      return n;
    }
    n.kind = QueryNode::Kind::kTerm;
    n.tokens = {Token()};
    return n;
  }
  QueryNode Bool(uint32_t depth) {
    QueryNode b;
    b.kind = QueryNode::Kind::kBool;
    const size_t clauses = 1 + rng() % 4;
    for (size_t i = 0; i < clauses; ++i) {
      QueryNode::Clause c;
      c.occur = RandomOccur();
      c.node = Node(depth);
      b.clauses.push_back(std::move(c));
    }
    return b;
  }
};

class TreeReference {
 public:
  // docs[d]: document d's analyzed tokens, in text order.
  explicit TreeReference(std::vector<std::vector<std::string>> docs, Bm25Params params = {})
      : docs_(std::move(docs)), params_(params) {
    uint64_t total = 0;
    tf_.resize(docs_.size());
    for (size_t d = 0; d < docs_.size(); ++d) {
      for (const std::string& t : docs_[d]) ++tf_[d][t];
      for (const auto& [t, f] : tf_[d]) ++df_[t];
      total += docs_[d].size();
    }
    stats_.num_docs = docs_.size();
    stats_.total_tokens = total;
    for (size_t d = 0; d < docs_.size(); ++d)
      norms_.push_back(Bm25Norm(static_cast<uint32_t>(docs_[d].size()), stats_.avgdl(), params_));
  }

  TreeAnswer Search(const Query& q) const {
    QueryNode tree;
    if (q.tree != nullptr) {
      tree = *q.tree;
    } else {
      tree.kind = QueryNode::Kind::kBool;
      for (const std::string& t : q.terms) {
        QueryNode::Clause c;
        c.node.kind = QueryNode::Kind::kTerm;
        c.node.tokens = {t};
        tree.clauses.push_back(c);
      }
    }
    if (q.mode != QueryMode::kAndOr) return Run(Resolve(tree, q.mode == QueryMode::kAnd), q.k);
    TreeAnswer a = Run(Resolve(tree, true), q.k);
    if (a.total < q.k) return Run(Resolve(tree, false), q.k);
    return a;
  }

  // Document d's match and score under a resolved node.
  bool Eval(const QueryNode& node, uint32_t d, float* score) const {
    switch (node.kind) {
      case QueryNode::Kind::kTerm: {
        const auto it = tf_[d].find(node.tokens[0]);
        if (it == tf_[d].end()) return false;
        *score = Bm25TermScore(Idf(node.tokens[0]), it->second, norms_[d], params_.k1);
        return true;
      }
      case QueryNode::Kind::kPhrase: {
        const std::vector<std::string>& toks = docs_[d];
        const size_t n = node.tokens.size();
        uint32_t tf = 0;
        for (size_t p = 0; p + n <= toks.size(); ++p) {
          size_t i = 0;
          while (i < n && toks[p + i] == node.tokens[i]) ++i;
          if (i == n) ++tf;
        }
        if (tf == 0) return false;
        float idf = 0.0f;
        for (const std::string& t : node.tokens) idf += Idf(t);
        *score = Bm25TermScore(idf, tf, norms_[d], params_.k1);
        return true;
      }
      case QueryNode::Kind::kBool: {
        bool has_required = false, any_should = false, has_positive = false;
        float sum = 0.0f;
        for (const QueryNode::Clause& c : node.clauses) {
          float s = 0.0f;
          const bool m = Eval(c.node, d, &s);
          switch (c.occur) {
            case Occur::kMust:
              has_required = has_positive = true;
              if (!m) return false;
              sum += s;
              break;
            case Occur::kFilter:
              has_required = has_positive = true;
              if (!m) return false;
              break;
            case Occur::kShould:
              has_positive = true;
              if (m) {
                any_should = true;
                sum += s;
              }
              break;
            case Occur::kMustNot:
              if (m) return false;
              break;
            case Occur::kDefault:
              ADD_FAILURE() << "unresolved clause";
              return false;
          }
        }
        if (!has_positive || (!has_required && !any_should)) return false;
        *score = sum;
        return true;
      }
    }
    return false;
  }

  const CollectionStats& stats() const { return stats_; }

 private:
  float Idf(const std::string& t) const {
    const auto it = df_.find(t);
    return Bm25Idf(stats_.num_docs, it == df_.end() ? 0 : it->second);
  }

  static QueryNode Resolve(QueryNode node, bool conjunctive) {
    for (QueryNode::Clause& c : node.clauses) {
      if (c.occur == Occur::kDefault) c.occur = conjunctive ? Occur::kMust : Occur::kShould;
      c.node = Resolve(std::move(c.node), conjunctive);
    }
    return node;
  }

  TreeAnswer Run(const QueryNode& tree, uint32_t k) const {
    TreeAnswer a;
    for (uint32_t d = 0; d < docs_.size(); ++d) {
      float s = 0.0f;
      if (!Eval(tree, d, &s)) continue;
      ++a.total;
      a.hits.push_back({d, s});
    }
    std::sort(a.hits.begin(), a.hits.end(), RanksBefore);
    if (a.hits.size() > k) a.hits.resize(k);
    return a;
  }

  std::vector<std::vector<std::string>> docs_;
  std::vector<std::map<std::string, uint32_t>> tf_;
  std::map<std::string, uint32_t> df_;
  std::vector<float> norms_;
  CollectionStats stats_;
  Bm25Params params_;
};

}  // namespace search::testing
