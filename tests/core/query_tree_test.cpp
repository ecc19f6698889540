#include "core/query_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace search {
namespace {

QueryNode Term(std::string t) {
  QueryNode n;
  n.kind = QueryNode::Kind::kTerm;
  n.tokens = {std::move(t)};
  return n;
}

QueryNode Phrase(std::vector<std::string> tokens) {
  QueryNode n;
  n.kind = QueryNode::Kind::kPhrase;
  n.tokens = std::move(tokens);
  return n;
}

QueryNode Bool(std::vector<QueryNode::Clause> clauses) {
  QueryNode n;
  n.kind = QueryNode::Kind::kBool;
  n.clauses = std::move(clauses);
  return n;
}

QueryNode::Clause C(Occur o, QueryNode n) {
  return QueryNode::Clause{o, std::move(n)};
}

TEST(QueryTreeTest, CanonicalKeyOfEveryKind) {
  EXPECT_EQ(CanonicalKey(Term("cat")), "cat");
  EXPECT_EQ(CanonicalKey(Phrase({"new", "york", "new"})), "\"new york new\"");
  QueryNode b = Bool({C(Occur::kMust, Term("a")), C(Occur::kMustNot, Term("b")), C(Occur::kShould, Term("c")),
                      C(Occur::kFilter, Term("d")), C(Occur::kDefault, Phrase({"e", "f"})),
                      C(Occur::kDefault, Bool({C(Occur::kMust, Term("g"))}))});
  EXPECT_EQ(CanonicalKey(b), "(+a -b ~c #d \"e f\" (+g))");
}

TEST(QueryTreeTest, ResolveModeReplacesOnlyDefault) {
  QueryNode t = Bool({C(Occur::kDefault, Term("a")), C(Occur::kMustNot, Term("b")),
                      C(Occur::kDefault, Bool({C(Occur::kDefault, Term("c")), C(Occur::kFilter, Term("d"))}))});
  QueryNode a = ResolveMode(t, QueryMode::kAnd);
  EXPECT_EQ(CanonicalKey(a), "(+a -b +(+c #d))");
  QueryNode o = ResolveMode(t, QueryMode::kOr);
  EXPECT_EQ(CanonicalKey(o), "(~a -b ~(~c #d))");
  EXPECT_EQ(CanonicalKey(t), "(a -b (c #d))");  // the input is unchanged
}

TEST(QueryTreeTest, CanonicalizeDedupesAndSorts) {
  // a a +b +b b: identical clauses with the same occurrence count once; b and +b differ.
  QueryNode t = Bool({C(Occur::kDefault, Term("b")), C(Occur::kDefault, Term("a")), C(Occur::kMust, Term("b")),
                      C(Occur::kDefault, Term("a")), C(Occur::kMust, Term("b"))});
  QueryNode c = Canonicalize(t);
  ASSERT_EQ(c.clauses.size(), 3u);
  EXPECT_EQ(CanonicalKey(c), "(a b +b)");  // sorted by key, then occurrence (kDefault 0 < kMust 1)
  EXPECT_EQ(c.clauses[1].occur, Occur::kDefault);
  EXPECT_EQ(c.clauses[2].occur, Occur::kMust);
}

TEST(QueryTreeTest, CanonicalizeSortsByKeyBytes) {
  QueryNode t = Bool({C(Occur::kDefault, Term("b")), C(Occur::kDefault, Phrase({"a", "b"})),
                      C(Occur::kDefault, Bool({C(Occur::kMust, Term("x")), C(Occur::kMust, Term("y"))})),
                      C(Occur::kDefault, Term("B1"))});
  // '"' (0x22) < '(' (0x28) < 'B' (0x42) < 'b' (0x62).
  EXPECT_EQ(CanonicalKey(Canonicalize(t)), "(\"a b\" (+x +y) B1 b)");
}

TEST(QueryTreeTest, CanonicalizeCollapsesOneTokenPhrasesAndSingleClauseGroups) {
  QueryNode t = Bool({C(Occur::kMust, Phrase({"a"})),
                      C(Occur::kMustNot, Bool({C(Occur::kDefault, Bool({C(Occur::kShould, Term("b"))}))})),
                      C(Occur::kDefault, Bool({C(Occur::kMustNot, Term("c"))})),
                      C(Occur::kDefault, Bool({C(Occur::kFilter, Term("d"))}))});
  QueryNode c = Canonicalize(t);
  // -((~b)) is -b; a group of one must_not or filter clause stays a group.
  EXPECT_EQ(CanonicalKey(c), "((#d) (-c) +a -b)");
  EXPECT_EQ(c.clauses[2].node.kind, QueryNode::Kind::kTerm);
}

TEST(QueryTreeTest, CanonicalizeKeepsARootOfOneClause) {
  QueryNode t = Bool({C(Occur::kMust, Term("a"))});
  QueryNode c = Canonicalize(t);
  EXPECT_EQ(c.kind, QueryNode::Kind::kBool);
  EXPECT_EQ(CanonicalKey(c), "(+a)");
}

TEST(QueryTreeTest, CanonicalizeDedupesAfterCollapsing) {
  // (a) a "a" -> one clause a; "x y" "x y" -> one phrase.
  QueryNode t = Bool({C(Occur::kDefault, Bool({C(Occur::kDefault, Term("a"))})), C(Occur::kDefault, Term("a")),
                      C(Occur::kDefault, Phrase({"a"})), C(Occur::kDefault, Phrase({"x", "y"})),
                      C(Occur::kDefault, Phrase({"x", "y"}))});
  EXPECT_EQ(CanonicalKey(Canonicalize(t)), "(\"x y\" a)");
}

TEST(QueryTreeTest, CanonicalizeIsIdempotentAndOrderIndependent) {
  QueryNode t1 = Bool({C(Occur::kMust, Term("z")),
                       C(Occur::kShould, Bool({C(Occur::kMust, Term("q")), C(Occur::kMustNot, Term("p"))})),
                       C(Occur::kMustNot, Phrase({"m", "n"}))});
  QueryNode t2 = Bool({C(Occur::kMustNot, Phrase({"m", "n"})),
                       C(Occur::kShould, Bool({C(Occur::kMustNot, Term("p")), C(Occur::kMust, Term("q"))})),
                       C(Occur::kMust, Term("z"))});
  QueryNode c1 = Canonicalize(t1);
  EXPECT_EQ(c1, Canonicalize(t2));
  EXPECT_EQ(c1, Canonicalize(c1));
}

TEST(QueryTreeTest, ValidateAcceptsAWellFormedTree) {
  QueryNode t = Bool({C(Occur::kMust, Term("a")), C(Occur::kDefault, Phrase({"b", "c"}))});
  EXPECT_TRUE(ValidateTree(t).ok());
}

TEST(QueryTreeTest, ValidateRefusesMalformedTrees) {
  auto bad = [](const QueryNode& t) {
    Status s = ValidateTree(t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << CanonicalKey(t);
    return s.message();
  };
  EXPECT_NE(bad(Term("a")).find("root"), std::string::npos);
  bad(Bool({}));
  bad(Bool({C(Occur::kMust, Term(""))}));
  QueryNode two_token_term = Term("a");
  two_token_term.tokens.push_back("b");
  bad(Bool({C(Occur::kMust, two_token_term)}));
  bad(Bool({C(Occur::kMust, Phrase({"a"}))}));
  bad(Bool({C(Occur::kMust, Phrase({"a", ""}))}));
  bad(Bool({C(Occur::kMust, Phrase(std::vector<std::string>(kMaxPhraseTokens + 1, "x")))}));
  EXPECT_TRUE(ValidateTree(Bool({C(Occur::kMust, Phrase(std::vector<std::string>(kMaxPhraseTokens, "x")))})).ok());
  bad(Bool({C(Occur::kMust, Bool({}))}));
  bad(Bool({C(static_cast<Occur>(5), Term("a"))}));
  QueryNode bad_kind = Term("a");
  bad_kind.kind = static_cast<QueryNode::Kind>(9);
  bad(Bool({C(Occur::kMust, bad_kind)}));
}

QueryNode Nested(uint32_t groups) {
  QueryNode n = Bool({C(Occur::kMust, Term("a")), C(Occur::kMust, Term("b"))});
  for (uint32_t i = 0; i < groups; ++i) n = Bool({C(Occur::kMust, n), C(Occur::kMust, Term("c"))});
  return n;
}

TEST(QueryTreeTest, ValidateDepthLimit) {
  // Nested(g) has g + 1 booleans: the root and g groups below it.
  EXPECT_TRUE(ValidateTree(Nested(kMaxTreeDepth)).ok());
  Status s = ValidateTree(Nested(kMaxTreeDepth + 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("deeper"), std::string::npos) << s.message();
}

TEST(QueryTreeTest, ValidateClauseLimit) {
  std::vector<QueryNode::Clause> cs;
  for (uint32_t i = 0; i < kMaxTreeClauses; ++i) cs.push_back(C(Occur::kShould, Term("t" + std::to_string(i))));
  QueryNode t = Bool(cs);
  EXPECT_TRUE(ValidateTree(t).ok());
  // Clauses count across the whole tree, nested ones included.
  t.clauses.back().node = Bool({C(Occur::kMust, Term("x")), C(Occur::kMust, Term("y"))});
  Status s = ValidateTree(t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("clauses"), std::string::npos) << s.message();
}

TEST(QueryTreeTest, TreeTermsAndHasPhrase) {
  QueryNode t = Bool({C(Occur::kMust, Term("z")), C(Occur::kMustNot, Phrase({"b", "a", "b"})),
                      C(Occur::kDefault, Bool({C(Occur::kMust, Term("a")), C(Occur::kFilter, Term("y"))}))});
  EXPECT_EQ(TreeTerms(t), (std::vector<std::string>{"a", "b", "y", "z"}));
  EXPECT_TRUE(TreeHasPhrase(t));
  EXPECT_FALSE(TreeHasPhrase(Bool({C(Occur::kMust, Term("a")), C(Occur::kMust, Bool({C(Occur::kMust, Term("b"))}))})));
}

TEST(QueryTreeTest, AsFlatQueryOnlyForBagsOfWords) {
  std::vector<std::string> terms;
  QueryMode m = QueryMode::kAnd;
  QueryNode bag = Canonicalize(Bool({C(Occur::kDefault, Term("b")), C(Occur::kDefault, Term("a"))}));
  ASSERT_TRUE(AsFlatQuery(bag, QueryMode::kAndOr, &terms, &m));
  EXPECT_EQ(terms, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m, QueryMode::kAndOr);

  ASSERT_TRUE(AsFlatQuery(Canonicalize(Bool({C(Occur::kMust, Term("a")), C(Occur::kMust, Term("b"))})), QueryMode::kOr,
                          &terms, &m));
  EXPECT_EQ(m, QueryMode::kAnd);
  ASSERT_TRUE(AsFlatQuery(Canonicalize(Bool({C(Occur::kShould, Term("a"))})), QueryMode::kAnd, &terms, &m));
  EXPECT_EQ(m, QueryMode::kOr);
  EXPECT_EQ(terms, (std::vector<std::string>{"a"}));

  EXPECT_FALSE(
      AsFlatQuery(Bool({C(Occur::kMust, Term("a")), C(Occur::kDefault, Term("b"))}), QueryMode::kAnd, &terms, &m));
  EXPECT_FALSE(
      AsFlatQuery(Bool({C(Occur::kMust, Term("a")), C(Occur::kMustNot, Term("b"))}), QueryMode::kAnd, &terms, &m));
  EXPECT_FALSE(AsFlatQuery(Bool({C(Occur::kFilter, Term("a"))}), QueryMode::kAnd, &terms, &m));
  EXPECT_FALSE(AsFlatQuery(Bool({C(Occur::kMust, Phrase({"a", "b"}))}), QueryMode::kAnd, &terms, &m));
  EXPECT_FALSE(AsFlatQuery(Bool({C(Occur::kMust, Bool({C(Occur::kMust, Term("a")), C(Occur::kMust, Term("b"))}))}),
                           QueryMode::kAnd, &terms, &m));
}

TEST(QueryTreeTest, MakeQueryFlatWhenABagAndNoCount) {
  QueryNode bag = Bool({C(Occur::kDefault, Term("b")), C(Occur::kDefault, Term("a")), C(Occur::kDefault, Term("b"))});
  Query q = MakeQuery(bag, QueryMode::kOr, 7, false);
  EXPECT_EQ(q.terms, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(q.mode, QueryMode::kOr);
  EXPECT_EQ(q.k, 7u);
  EXPECT_EQ(q.tree, nullptr);
  EXPECT_FALSE(q.count);

  // With a count the tree is kept (canonical), even for a bag of words.
  Query qc = MakeQuery(bag, QueryMode::kOr, 7, true);
  ASSERT_NE(qc.tree, nullptr);
  EXPECT_EQ(CanonicalKey(*qc.tree), "(a b)");
  EXPECT_EQ(qc.terms, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(qc.mode, QueryMode::kOr);
  EXPECT_TRUE(qc.count);
}

TEST(QueryTreeTest, MakeQueryKeepsTheCanonicalTree) {
  QueryNode t =
      Bool({C(Occur::kMustNot, Term("c")), C(Occur::kMust, Phrase({"b", "a"})), C(Occur::kMust, Phrase({"b", "a"}))});
  Query q = MakeQuery(t, QueryMode::kAndOr, 10, false);
  ASSERT_NE(q.tree, nullptr);
  EXPECT_EQ(*q.tree, Canonicalize(t));
  EXPECT_EQ(CanonicalKey(*q.tree), "(+\"b a\" -c)");
  EXPECT_EQ(q.terms, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(q.mode, QueryMode::kAndOr);
}

// An independent evaluator of a resolved tree over one document (a token sequence): whether it
// matches and its score in double (term: weight * tf, phrase: the sum of its tokens' weights * tf,
// boolean: the sum over matching must and should clauses), so that clause order does not matter.
double Weight(const std::string& t) {
  return 1.0 + static_cast<double>(t[0] - 'a') / 8.0;
}

bool Eval(const QueryNode& n, const std::vector<std::string>& doc, double* score) {
  *score = 0.0;
  if (n.kind != QueryNode::Kind::kBool) {
    const size_t len = n.tokens.size();
    uint32_t tf = 0;
    for (size_t p = 0; p + len <= doc.size(); ++p)
      tf += std::equal(n.tokens.begin(), n.tokens.end(), doc.begin() + static_cast<std::ptrdiff_t>(p)) ? 1 : 0;
    double idf = 0.0;
    for (const std::string& t : n.tokens) idf += Weight(t);
    *score = idf * tf;
    return tf > 0;
  }
  bool required = false, any_should = false;
  for (const QueryNode::Clause& c : n.clauses) {
    double s = 0.0;
    const bool m = Eval(c.node, doc, &s);
    switch (c.occur) {
      case Occur::kMust:
        if (!m) return false;
        required = true;
        *score += s;
        break;
      case Occur::kFilter:
        if (!m) return false;
        required = true;
        break;
      case Occur::kMustNot:
        if (m) return false;
        break;
      case Occur::kShould:
        if (m) {
          any_should = true;
          *score += s;
        }
        break;
      case Occur::kDefault:
        ADD_FAILURE() << "unresolved";
        return false;
    }
  }
  return required || any_should;
}

// Random raw trees with what Canonicalize removes: one-token phrases, repeated clauses, groups of
// one clause, nested groups.
QueryNode RandomTree(std::mt19937& rng, uint32_t depth) {
  const uint32_t n = 1 + rng() % 4;
  std::vector<QueryNode::Clause> cs;
  for (uint32_t i = 0; i < n; ++i) {
    const Occur o = static_cast<Occur>(rng() % 5);
    const uint32_t what = rng() % 6;
    QueryNode node;
    if (what <= 2 || depth >= 3) {
      node = Term(std::string(1, static_cast<char>('a' + rng() % 4)));
    } else if (what == 3) {
      std::vector<std::string> toks(1 + rng() % 3);
      for (std::string& t : toks) t = std::string(1, static_cast<char>('a' + rng() % 4));
      node = Phrase(toks);
    } else {
      node = RandomTree(rng, depth + 1);
    }
    cs.push_back(C(o, node));
    if (rng() % 5 == 0) cs.push_back(cs.back());  // a repeated clause
  }
  std::shuffle(cs.begin(), cs.end(), rng);
  return Bool(cs);
}

void Shuffle(QueryNode* n, std::mt19937& rng) {
  std::shuffle(n->clauses.begin(), n->clauses.end(), rng);
  for (QueryNode::Clause& c : n->clauses) Shuffle(&c.node, rng);
}

TEST(QueryTreeTest, CanonicalizeKeepsEveryAnswer) {
  std::mt19937 rng(48);
  std::vector<std::vector<std::string>> docs;
  for (int d = 0; d < 60; ++d) {
    std::vector<std::string> doc(rng() % 9);
    for (std::string& t : doc) t = std::string(1, static_cast<char>('a' + rng() % 5));
    docs.push_back(doc);
  }
  for (int i = 0; i < 3000; ++i) {
    const QueryNode raw = RandomTree(rng, 0);
    const QueryNode canon = Canonicalize(raw);
    ASSERT_EQ(Canonicalize(canon), canon) << CanonicalKey(raw);
    EXPECT_EQ(TreeTerms(canon), TreeTerms(raw)) << CanonicalKey(raw);
    QueryNode shuffled = raw;
    Shuffle(&shuffled, rng);
    EXPECT_EQ(Canonicalize(shuffled), canon) << CanonicalKey(raw);
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr}) {
      const QueryNode r = ResolveMode(raw, mode), c = ResolveMode(canon, mode);
      for (const auto& doc : docs) {
        double sr = 0, sc = 0;
        const bool mr = Eval(r, doc, &sr), mc = Eval(c, doc, &sc);
        ASSERT_EQ(mr, mc) << CanonicalKey(raw) << " vs " << CanonicalKey(canon);
        if (mr) {
          // Identical clauses count once: the raw tree may add a repeated clause twice.
          if (sr != sc) EXPECT_GT(sr, sc) << CanonicalKey(raw);
        }
      }
    }
  }
}

}  // namespace
}  // namespace search
