#include "core/query_parser.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace search {
namespace {

// The canonical key of the tree `text` parses to, or "ERROR: <message>".
std::string Key(std::string_view text, const Analyzer& a = Analyzer()) {
  Result<QueryNode> t = ParseQuerySyntax(text, a);
  if (!t.ok()) return "ERROR: " + t.status().message();
  EXPECT_TRUE(ValidateTree(*t).ok()) << text;
  EXPECT_EQ(*t, Canonicalize(*t)) << text;
  return CanonicalKey(*t);
}

std::string Error(std::string_view text, const Analyzer& a = Analyzer()) {
  Result<QueryNode> t = ParseQuerySyntax(text, a);
  if (t.ok()) return "OK: " + CanonicalKey(*t);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << text;
  return t.status().message();
}

Analyzer EnglishWithStopwords() {
  AnalyzerConfig c;
  c.stem_language = "english";
  c.stopwords = {"the", "of", "a"};
  Result<Analyzer> a = Analyzer::Create(c);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return *a;
}

TEST(QueryParserTest, BareWordsAreDefaultTerms) {
  Result<QueryNode> t = ParseQuerySyntax("c a b", Analyzer());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->kind, QueryNode::Kind::kBool);
  ASSERT_EQ(t->clauses.size(), 3u);
  for (const QueryNode::Clause& c : t->clauses) {
    EXPECT_EQ(c.occur, Occur::kDefault);
    EXPECT_EQ(c.node.kind, QueryNode::Kind::kTerm);
  }
  EXPECT_EQ(CanonicalKey(*t), "(a b c)");
}

TEST(QueryParserTest, BagOfWordsKeepsTodaysFlatQuery) {
  const Analyzer plain;
  const Analyzer english = EnglishWithStopwords();
  for (const Analyzer* a : {&plain, &english}) {
    for (std::string_view text : {"the cat THE dog cat", "Hello, World! 42abc", "jaguar", "Running dogs of the world",
                                  "caf\xC3\xA9 \xC3\xA4rger  \t\n zebra; apple."}) {
      for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
        Result<QueryNode> t = ParseQuerySyntax(text, *a);
        ASSERT_TRUE(t.ok()) << text << ": " << t.status().ToString();
        Query q = MakeQuery(*t, mode, 10, false);
        EXPECT_EQ(q.tree, nullptr) << text;
        EXPECT_EQ(q.terms, a->AnalyzeQuery(text)) << text;
        EXPECT_EQ(q.mode, mode) << text;
      }
    }
  }
}

TEST(QueryParserTest, Signs) {
  // Clauses sort by their node's key, then occurrence (kDefault, +, ~, -, #).
  EXPECT_EQ(Key("+jaguar -car"), "(-car +jaguar)");
  EXPECT_EQ(Key("+a b -c"), "(+a b -c)");
  EXPECT_EQ(Key("-a"), "(-a)");  // valid; matches nothing
  // A sign is an operator only at the start of a clause.
  EXPECT_EQ(Key("wi-fi"), "(\"wi fi\")");
  EXPECT_EQ(Key("a- b+"), "(a b)");
  EXPECT_EQ(Key("+-a"), "(+a)");
  EXPECT_EQ(Key("--a"), "(-a)");
  EXPECT_EQ(Key("-+a +-b"), "(-a +b)");
  // Whitespace may follow a sign, as in Lucene's classic parser.
  EXPECT_EQ(Key("a - b + \"c d\" -\t(e f)"), "(+\"c d\" -(e f) a -b)");
  EXPECT_EQ(Key("- a"), "(-a)");
}

TEST(QueryParserTest, AWordOfSeveralTokensIsAPhrase) {
  EXPECT_EQ(Key("x-ray"), "(\"x ray\")");
  EXPECT_EQ(Key("+U.S.A."), "(+\"u s a\")");
  EXPECT_EQ(Key("don't stop"), "(\"don t\" stop)");
  EXPECT_EQ(Key("C++"), "(c)");
  EXPECT_EQ(Key("a+b"), "(\"a b\")");
}

TEST(QueryParserTest, Phrases) {
  Result<QueryNode> t = ParseQuerySyntax("\"New York  Times\"", Analyzer());
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->clauses.size(), 1u);
  EXPECT_EQ(t->clauses[0].occur, Occur::kDefault);
  EXPECT_EQ(t->clauses[0].node.kind, QueryNode::Kind::kPhrase);
  EXPECT_EQ(t->clauses[0].node.tokens, (std::vector<std::string>{"new", "york", "times"}));
  EXPECT_EQ(Key("+\"the who\" +uk"), "(+\"the who\" +uk)");
  EXPECT_EQ(Key("\"a b a\""), "(\"a b a\")");  // repeats kept, text order
  EXPECT_EQ(Key("\"one\""), "(one)");          // one token: a term
  EXPECT_EQ(Key("-\"a, b!\" c"), "(-\"a b\" c)");
  EXPECT_EQ(Key("a\"b c\"d"), "(\"b c\" a d)");  // quotes end a word
  EXPECT_EQ(Key("\"\" x"), "(x)");               // an empty phrase is dropped
  EXPECT_EQ(Key("\"(a) +b\""), "(\"a b\")");     // operators inside quotes are text
}

TEST(QueryParserTest, Groups) {
  EXPECT_EQ(Key("+(a b) -c"), "(+(a b) -c)");
  EXPECT_EQ(Key("(a)"), "(a)");  // a group of one clause is that clause
  EXPECT_EQ(Key("+(+a)"), "(+a)");
  EXPECT_EQ(Key("-(a) b"), "(-a b)");
  EXPECT_EQ(Key("(-a) b"), "((-a) b)");  // a group of one '-' clause stays a group
  EXPECT_EQ(Key("x (a (b (c d)))"), "((((c d) b) a) x)");
  EXPECT_EQ(Key("() a"), "(a)");  // an empty group is dropped
  EXPECT_EQ(Key("a(b)c"), "(a b c)");
  EXPECT_EQ(Key("+(\"a b\" -c) (d)"), "(+(\"a b\" -c) d)");
}

TEST(QueryParserTest, CanonicalDedupe) {
  EXPECT_EQ(Key("a a +b +b"), "(a +b)");
  EXPECT_EQ(Key("\"a b\" \"a b\""), "(\"a b\")");
  EXPECT_EQ(Key("b +b -b b"), "(b +b -b)");  // different signs are different clauses
  EXPECT_EQ(Key("(a b) (b a) (a) a"), "((a b) a)");
  EXPECT_EQ(Key("\"A, B\" \"a b\""), "(\"a b\")");
}

TEST(QueryParserTest, StemmingAndStopwords) {
  const Analyzer en = EnglishWithStopwords();
  EXPECT_EQ(Key("Running DOGS", en), "(dog run)");
  // Stopwords leave no token and no gap: the phrase is of the remaining stems.
  EXPECT_EQ(Key("\"the running of the dogs\"", en), "(\"run dog\")");
  EXPECT_EQ(Key("+the cats", en), "(cat)");       // a stopword clause is dropped
  EXPECT_EQ(Key("-(the of) cats", en), "(cat)");  // so is a group of dropped clauses
  EXPECT_EQ(Key("\"the cats\"", en), "(cat)");    // a phrase left with one token is a term
  EXPECT_EQ(Key("running runs", en), "(run)");    // dedupe after stemming
  EXPECT_EQ(Error("the of", en), "the query has no searchable terms");
  EXPECT_EQ(Error("+\"the\" -(a)", en), "the query has no searchable terms");
}

TEST(QueryParserTest, ErrorsNameThePosition) {
  EXPECT_EQ(Error("a \"b c"), "unclosed quote at position 2");
  EXPECT_EQ(Error("\"a\" \""), "unclosed quote at position 4");
  EXPECT_EQ(Error("a (b c"), "unclosed parenthesis at position 2");
  EXPECT_EQ(Error("((a) b"), "unclosed parenthesis at position 0");
  EXPECT_EQ(Error("a b)"), "unmatched ')' at position 3");
  EXPECT_EQ(Error("(a))"), "unmatched ')' at position 3");
  EXPECT_EQ(Error(")"), "unmatched ')' at position 0");
  EXPECT_EQ(Error("a +"), "'+' at position 2 has nothing after it");
  EXPECT_EQ(Error("a - "), "'-' at position 2 has nothing after it");
  EXPECT_EQ(Error("(a + \t)"), "'+' at position 3 has nothing after it");
  EXPECT_EQ(Error("(a -)"), "'-' at position 3 has nothing after it");
  EXPECT_EQ(Error("-"), "'-' at position 0 has nothing after it");
  // A sign before an empty group or phrase has something after it; the clause is dropped.
  EXPECT_EQ(Error("+() a"), "OK: (a)");
}

TEST(QueryParserTest, NothingLeftIsAnError) {
  for (std::string_view text : {"", "   ", "!!! ,.;", "\"\"", "()", "(( ) \"  \")", "+\"!\" -(?)"}) {
    EXPECT_EQ(Error(text), "the query has no searchable terms") << "'" << text << "'";
  }
}

TEST(QueryParserTest, DepthLimit) {
  auto nested = [](uint32_t levels) { return std::string(levels, '(') + "a b" + std::string(levels, ')'); };
  EXPECT_EQ(Key(nested(kMaxTreeDepth)), "((a b))");  // groups of one clause collapse
  EXPECT_EQ(Error(nested(kMaxTreeDepth + 1)), "parentheses nested deeper than " + std::to_string(kMaxTreeDepth) +
                                                  " at position " + std::to_string(kMaxTreeDepth));
  // Deep inputs are refused without recursing into them.
  EXPECT_NE(Error(std::string(1 << 20, '(')).find("nested deeper"), std::string::npos);
}

TEST(QueryParserTest, ClauseLimit) {
  std::string ok, too_many;
  for (uint32_t i = 0; i < kMaxTreeClauses; ++i) ok += "t" + std::to_string(i) + " ";
  Result<QueryNode> t = ParseQuerySyntax(ok, Analyzer());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->clauses.size(), kMaxTreeClauses);
  too_many = ok + "x";
  EXPECT_EQ(Error(too_many), "the query has more than " + std::to_string(kMaxTreeClauses) + " clauses (at position " +
                                 std::to_string(ok.size()) + ")");
  // Groups count as clauses too.
  EXPECT_NE(Error(ok.substr(0, ok.size() - 7) + " (a b)").find("more than"), std::string::npos);
}

TEST(QueryParserTest, PhraseTokenLimit) {
  std::string ok = "\"", too_long = "x \"";
  for (uint32_t i = 0; i < kMaxPhraseTokens; ++i) ok += "w" + std::to_string(i) + " ";
  ok += "\"";
  EXPECT_TRUE(ParseQuerySyntax(ok, Analyzer()).ok());
  too_long += std::string(ok.begin() + 1, ok.end() - 1) + "extra\"";
  EXPECT_EQ(Error(too_long), "the phrase at position 2 has " + std::to_string(kMaxPhraseTokens + 1) +
                                 " tokens, more than " + std::to_string(kMaxPhraseTokens));
  // A word of many tokens is a phrase too.
  std::string word;
  for (uint32_t i = 0; i <= kMaxPhraseTokens; ++i) word += "a.";
  EXPECT_NE(Error(word).find("more than"), std::string::npos);
}

TEST(QueryParserTest, MakeQueryOfATree) {
  Result<QueryNode> t = ParseQuerySyntax("+\"new york\" -times b", Analyzer());
  ASSERT_TRUE(t.ok());
  Query q = MakeQuery(*t, QueryMode::kOr, 5, false);
  ASSERT_NE(q.tree, nullptr);
  EXPECT_EQ(q.terms, (std::vector<std::string>{"b", "new", "times", "york"}));
  EXPECT_EQ(q.mode, QueryMode::kOr);
  EXPECT_TRUE(TreeHasPhrase(*q.tree));
  // +a +b is the flat `and` query whatever the request's mode.
  Result<QueryNode> and_tree = ParseQuerySyntax("+b +a", Analyzer());
  ASSERT_TRUE(and_tree.ok());
  Query qa = MakeQuery(*and_tree, QueryMode::kOr, 5, false);
  EXPECT_EQ(qa.tree, nullptr);
  EXPECT_EQ(qa.mode, QueryMode::kAnd);
  EXPECT_EQ(qa.terms, (std::vector<std::string>{"a", "b"}));
}

// The canonical key of a syntax tree is itself syntax (kDefault, '+' and '-' only): its clauses,
// without the root's parentheses, parse back to the same tree.
TEST(QueryParserTest, CanonicalKeyRoundTrips) {
  for (std::string_view text : {"+jaguar -car", "\"new york times\" -(a b +c) +(d \"e f\")", "a a +b +b",
                                "+(a (b (c -\"d e\"))) x-ray", "-a", "wi-fi (x) ((y z))"}) {
    Result<QueryNode> t = ParseQuerySyntax(text, Analyzer());
    ASSERT_TRUE(t.ok()) << text;
    const std::string key = CanonicalKey(*t);
    Result<QueryNode> again = ParseQuerySyntax(std::string_view(key).substr(1, key.size() - 2), Analyzer());
    ASSERT_TRUE(again.ok()) << key;
    EXPECT_EQ(*again, *t) << text << " -> " << key;
  }
}

// Any bytes: an answer or an InvalidArgument, never a crash; accepted trees are valid and canonical.
TEST(QueryParserTest, RandomBytesNeverCrash) {
  std::mt19937 rng(48);
  const std::string alphabet = "ab +-\"() \t\xC3\xA9!.";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 24, ' ');
    for (char& c : s) c = (rng() % 4 == 0) ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
    Result<QueryNode> t = ParseQuerySyntax(s, Analyzer());
    if (!t.ok()) {
      EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    EXPECT_TRUE(ValidateTree(*t).ok()) << s;
    EXPECT_EQ(*t, Canonicalize(*t)) << s;
  }
}

}  // namespace
}  // namespace search
