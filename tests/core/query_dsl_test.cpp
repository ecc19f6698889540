#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/query_parser.hpp"

namespace search {
namespace {

// The canonical key of the tree of `{"query": <query>}`, or "ERROR: <message>".
std::string Key(const std::string& query, const Analyzer& a = Analyzer()) {
  Result<SearchBody> b = ParseSearchDsl("{\"query\": " + query + "}", a);
  if (!b.ok()) return "ERROR: " + b.status().message();
  EXPECT_TRUE(ValidateTree(b->tree).ok()) << query;
  EXPECT_EQ(b->tree, Canonicalize(b->tree)) << query;
  return CanonicalKey(b->tree);
}

// The error message for a whole body ("OK" when it parses).
std::string BodyError(const std::string& body, const Analyzer& a = Analyzer()) {
  Result<SearchBody> b = ParseSearchDsl(body, a);
  if (b.ok()) return "OK";
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << body;
  return b.status().message();
}

std::string QueryError(const std::string& query, const Analyzer& a = Analyzer()) {
  return BodyError("{\"query\": " + query + "}", a);
}

Analyzer EnglishWithStopwords() {
  AnalyzerConfig c;
  c.stem_language = "english";
  c.stopwords = {"the", "of"};
  Result<Analyzer> a = Analyzer::Create(c);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return *a;
}

bool HasDefault(const QueryNode& n) {
  for (const QueryNode::Clause& c : n.clauses)
    if (c.occur == Occur::kDefault || HasDefault(c.node)) return true;
  return false;
}

TEST(QueryDslTest, MatchIsABagOfTermsOrByDefault) {
  EXPECT_EQ(Key(R"({"match": {"contents": "Jaguar car jaguar"}})"), "(~car ~jaguar)");
  EXPECT_EQ(Key(R"({"match": {"contents": {"query": "b a"}}})"), "(~a ~b)");
  EXPECT_EQ(Key(R"({"match": {"contents": {"query": "b a", "operator": "or"}}})"), "(~a ~b)");
  EXPECT_EQ(Key(R"({"match": {"contents": {"query": "b a", "operator": "and"}}})"), "(+a +b)");
  EXPECT_EQ(Key(R"({"match": {"contents": {"operator": "AND", "query": "x-ray"}}})"), "(+ray +x)");  // not a phrase
  EXPECT_EQ(Key(R"({"match": {"contents": "one"}})"), "(~one)");

  // A top-level match is the flat query of its terms.
  Result<SearchBody> b = ParseSearchDsl(R"({"query": {"match": {"contents": "b a b"}}})", Analyzer());
  ASSERT_TRUE(b.ok());
  Query q = MakeQuery(b->tree, QueryMode::kAnd, 10, false);
  EXPECT_EQ(q.tree, nullptr);
  EXPECT_EQ(q.mode, QueryMode::kOr);
  EXPECT_EQ(q.terms, (std::vector<std::string>{"a", "b"}));
}

TEST(QueryDslTest, MatchPhrase) {
  EXPECT_EQ(Key(R"({"match_phrase": {"contents": "New York, new"}})"), "(+\"new york new\")");
  EXPECT_EQ(Key(R"({"match_phrase": {"contents": {"query": "a b"}}})"), "(+\"a b\")");
  EXPECT_EQ(Key(R"({"match_phrase": {"contents": "single"}})"), "(+single)");  // one token: a term
}

TEST(QueryDslTest, TermIsLowercasedNotAnalyzed) {
  const Analyzer en = EnglishWithStopwords();
  EXPECT_EQ(Key(R"({"term": {"contents": "Cat"}})"), "(+cat)");
  EXPECT_EQ(Key(R"({"term": {"contents": {"value": "Running"}}})", en), "(+running)");  // no stemming
  EXPECT_EQ(Key(R"({"term": {"contents": "the"}})", en), "(+the)");                     // no stopwords
  EXPECT_EQ(Key(R"({"match": {"contents": "Running"}})", en), "(~run)");
  EXPECT_EQ(QueryError(R"({"term": {"contents": "new york"}})"),
            "query.term.contents: a term query takes exactly one token, and 'new york' has several (term values are "
            "not analyzed; use match or match_phrase)");
  EXPECT_NE(QueryError(R"({"term": {"contents": "!!"}})").find("has none"), std::string::npos);
}

TEST(QueryDslTest, BoolOccurrences) {
  EXPECT_EQ(Key(R"({"bool": {"must": {"term": {"contents": "a"}}, "must_not": [{"term": {"contents": "b"}}],
                             "should": [{"match_phrase": {"contents": "c d"}}], "filter": {"term": {"contents": "e"}}}})"),
            "(~\"c d\" +a -b #e)");  // sorted by the node's key, then occurrence
  // Nested: a bool clause is a group; a nested match of several terms is a group of them.
  EXPECT_EQ(Key(R"({"bool": {"must": [{"match": {"contents": "x y"}},
                                      {"bool": {"should": [{"term": {"contents": "p"}}, {"term": {"contents": "q"}}],
                                                "must_not": {"term": {"contents": "r"}}}}]}})"),
            "(+(~p ~q -r) +(~x ~y))");
  // Groups of one must or should clause collapse.
  EXPECT_EQ(
      Key(R"({"bool": {"must": [{"match": {"contents": "x"}}, {"bool": {"must": {"term": {"contents": "y"}}}}]}})"),
      "(+x +y)");
  EXPECT_EQ(Key(R"({"bool": {"must": [], "should": {"term": {"contents": "a"}}}})"), "(~a)");
}

TEST(QueryDslTest, TreesHaveNoDefaultOccurrence) {
  for (
      const std::string q :
      {R"({"match": {"contents": "a b"}})", R"({"term": {"contents": "a"}})",
       R"({"match_phrase": {"contents": "a b"}})",
       R"({"bool": {"should": [{"match": {"contents": "a b"}}, {"bool": {"filter": {"match": {"contents": "c d"}}}}]}})"}) {
    Result<SearchBody> b = ParseSearchDsl("{\"query\": " + q + "}", Analyzer());
    ASSERT_TRUE(b.ok()) << q << ": " << b.status().ToString();
    EXPECT_FALSE(HasDefault(b->tree)) << q;
  }
}

TEST(QueryDslTest, SameTreesAsTheSyntax) {
  auto syntax = [](std::string_view text) {
    Result<QueryNode> t = ParseQuerySyntax(text, Analyzer());
    EXPECT_TRUE(t.ok()) << text;
    return t.ok() ? *t : QueryNode();
  };
  auto dsl = [](const std::string& q) {
    Result<SearchBody> b = ParseSearchDsl("{\"query\": " + q + "}", Analyzer());
    EXPECT_TRUE(b.ok()) << q << ": " << b.status().ToString();
    return b.ok() ? b->tree : QueryNode();
  };
  EXPECT_EQ(dsl(R"({"bool": {"must": [{"term": {"contents": "a"}}], "must_not": {"match": {"contents": "b"}}}})"),
            syntax("+a -b"));
  EXPECT_EQ(dsl(R"({"match": {"contents": {"query": "a b", "operator": "and"}}})"), syntax("+a +b"));
  EXPECT_EQ(dsl(R"({"bool": {"must": [{"match_phrase": {"contents": "the who"}}, {"term": {"contents": "uk"}}]}})"),
            syntax("+\"the who\" +uk"));
  EXPECT_EQ(dsl(R"({"bool": {"must": {"term": {"contents": "a"}}, "should": [{"bool": {"must":
                [{"term": {"contents": "b"}}, {"term": {"contents": "c"}}]}}]}})"),
            ResolveMode(syntax("+a (+b +c)"), QueryMode::kOr));
}

TEST(QueryDslTest, StopwordsAndStemming) {
  const Analyzer en = EnglishWithStopwords();
  EXPECT_EQ(Key(R"({"match_phrase": {"contents": "the running of the dogs"}})", en), "(+\"run dog\")");
  // A clause whose text analyzes to nothing is dropped, as in the syntax.
  EXPECT_EQ(Key(R"({"bool": {"must": {"match": {"contents": "the"}}, "should": {"match": {"contents": "Cats"}}}})", en),
            "(~cat)");
  EXPECT_EQ(QueryError(R"({"match": {"contents": "the of"}})", en), "query: the query has no searchable terms");
  EXPECT_EQ(QueryError(R"({"bool": {"must": [{"match_phrase": {"contents": "the"}}]}})", en),
            "query: the query has no searchable terms");
}

TEST(QueryDslTest, TopLevelFields) {
  Result<SearchBody> b =
      ParseSearchDsl(R"({"size": 0, "track_total_hits": true, "query": {"match": {"contents": "a"}}})", Analyzer());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->size, 0u);
  EXPECT_EQ(b->track_total_hits, true);
  b = ParseSearchDsl(R"({"query": {"match": {"contents": "a"}}, "size": 10000, "track_total_hits": false})",
                     Analyzer());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->size, 10000u);
  EXPECT_EQ(b->track_total_hits, false);
  b = ParseSearchDsl(R"({"query": {"match": {"contents": "a"}}})", Analyzer());
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->size.has_value());
  EXPECT_FALSE(b->track_total_hits.has_value());

  const std::string q = R"("query": {"match": {"contents": "a"}})";
  EXPECT_EQ(BodyError("{" + q + R"(, "size": -1})"), "size: must be an integer in 0..10000, got -1");
  EXPECT_EQ(BodyError("{" + q + R"(, "size": 10001})"), "size: must be an integer in 0..10000, got 10001");
  EXPECT_EQ(BodyError("{" + q + R"(, "size": 1.5})"), "size: must be an integer in 0..10000, got 1.5");
  EXPECT_EQ(BodyError("{" + q + R"(, "size": "10"})"), "size: must be an integer in 0..10000, got \"10\"");
  EXPECT_EQ(BodyError("{" + q + R"(, "track_total_hits": 100})"),
            "track_total_hits: only true or false is supported, not a number (100)");
  EXPECT_EQ(BodyError("{" + q + R"(, "track_total_hits": "true"})"),
            "track_total_hits: must be true or false, got string");
  EXPECT_EQ(BodyError("{" + q + R"(, "from": 10})"),
            "unsupported key 'from' (supported: query, size, track_total_hits, _source, highlight)");
  EXPECT_EQ(BodyError("{" + q + R"(, "mode": "and"})"),
            "unsupported key 'mode' (supported: query, size, track_total_hits, _source, highlight)");
  EXPECT_EQ(BodyError(R"({"size": 3})"), "query: missing: a search body needs a query");
  EXPECT_EQ(BodyError("{}"), "query: missing: a search body needs a query");
  EXPECT_EQ(BodyError("[1]"), "the body must be a JSON object, got array");
  EXPECT_EQ(BodyError("{" + q + ", " + q + "}"), "the key 'query' is repeated");
  EXPECT_EQ(BodyError(R"({"query": {"bool": {"must": {"term": {"contents": "a", "contents": "b"}}}}})"),
            "the key 'contents' is repeated");
  EXPECT_EQ(BodyError("").rfind("the body is not valid JSON: ", 0), 0u);
  EXPECT_EQ(BodyError("{\"query\": ").rfind("the body is not valid JSON: ", 0), 0u);
  EXPECT_EQ(BodyError("{" + q + R"(, "size": 1e999})").rfind("the body is not valid JSON: ", 0), 0u);
  EXPECT_LE(BodyError("{\"" + std::string(100000, 'a')).size(), 300u);  // parser messages are bounded
}

// _source and highlight (the fetch phase): true/false, and the highlight of contents only.
TEST(QueryDslTest, SourceAndHighlight) {
  const std::string q = R"("query": {"match": {"contents": "a"}})";
  Result<SearchBody> b = ParseSearchDsl("{" + q + "}", Analyzer());
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->source.has_value());
  EXPECT_FALSE(b->highlight);
  b = ParseSearchDsl("{" + q + R"(, "_source": false, "highlight": {"fields": {"contents": {}}}})", Analyzer());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->source, false);
  EXPECT_TRUE(b->highlight);
  EXPECT_EQ(ParseSearchDsl("{" + q + R"(, "_source": true})", Analyzer())->source, true);
  EXPECT_EQ(BodyError("{" + q + R"(, "_source": ["id"]})"),
            "_source: only true or false is supported (source filtering is not), got [\"id\"]");
  EXPECT_EQ(BodyError("{" + q + R"(, "highlight": {"fields": {"title": {}}}})"),
            "highlight.fields.title: only the field 'contents' can be highlighted");
  EXPECT_EQ(BodyError("{" + q + R"(, "highlight": {"fields": {"contents": {"fragment_size": 50}}}})"),
            "highlight.fields.contents: highlight options are not supported: give {} (got {\"fragment_size\":50})");
  EXPECT_EQ(BodyError("{" + q + R"(, "highlight": {"pre_tags": ["<b>"], "fields": {"contents": {}}}})")
                .rfind("highlight: unsupported key 'pre_tags'", 0),
            0u);
  EXPECT_EQ(BodyError("{" + q + R"(, "highlight": {}})"),
            "highlight.fields: missing: name the field to highlight, {\"contents\": {}}");
  EXPECT_EQ(BodyError("{" + q + R"(, "highlight": {"fields": {}}})"),
            "highlight.fields: must be a non-empty object {\"contents\": {}}, got {}");
  EXPECT_EQ(BodyError("{" + q + R"(, "highlight": true})"),
            "highlight: must be an object {\"fields\": {\"contents\": {}}}, got boolean");
  EXPECT_TRUE(ParseHighlightDsl(R"({"fields": {"contents": {}}})").ok());
  EXPECT_EQ(ParseHighlightDsl(R"({"fields": {"body": {}}})").status().message(),
            "highlight.fields.body: only the field 'contents' can be highlighted");
  EXPECT_FALSE(ParseHighlightDsl("{").ok());
}

TEST(QueryDslTest, UnsupportedPartsAreNamedWithTheirPath) {
  EXPECT_EQ(QueryError(R"({"bool": {"must": [{"term": {"contents": "a"}}, {"range": {"contents": {"gte": 1}}}]}})"),
            "query.bool.must[1]: unsupported query type 'range' (supported: bool, match, match_phrase, term)");
  EXPECT_EQ(QueryError(R"({"match_all": {}})"),
            "query: unsupported query type 'match_all' (supported: bool, match, match_phrase, term)");
  EXPECT_EQ(QueryError(R"({"match": {"title": "a"}})"),
            "query.match: unsupported field 'title' (the only field is 'contents')");
  EXPECT_EQ(QueryError(R"({"match": {"contents": "a", "title": "b"}})"),
            "query.match: names more than one field (the only field is 'contents')");
  EXPECT_EQ(QueryError(R"({"match": {}})"), "query.match: names no field (the field is 'contents')");
  EXPECT_EQ(QueryError(R"({"match": {"contents": {"query": "a", "fuzziness": 2}}})"),
            "query.match.contents: unsupported parameter 'fuzziness' (supported: query, operator)");
  EXPECT_EQ(QueryError(R"({"match": {"contents": {"query": "a", "operator": "xor"}}})"),
            "query.match.contents.operator: must be \"and\" or \"or\", got 'xor'");
  EXPECT_EQ(QueryError(R"({"match": {"contents": {"operator": "and"}}})"), "query.match.contents: missing \"query\"");
  EXPECT_EQ(QueryError(R"({"match": {"contents": 42}})"),
            "query.match.contents: must be a string or an object with \"query\", got number");
  EXPECT_EQ(QueryError(R"({"match": {"contents": {"query": ["a"]}}})"),
            "query.match.contents.query: must be a string, got array");
  EXPECT_EQ(QueryError(R"({"match_phrase": {"contents": {"query": "a b", "slop": 1}}})"),
            "query.match_phrase.contents: unsupported parameter 'slop' (supported: query)");
  EXPECT_EQ(QueryError(R"({"match_phrase": {"contents": {"query": "a b", "operator": "and"}}})"),
            "query.match_phrase.contents: unsupported parameter 'operator' (supported: query)");
  EXPECT_EQ(QueryError(R"({"term": {"contents": {"value": "a", "boost": 2}}})"),
            "query.term.contents: unsupported parameter 'boost' (supported: value)");
  EXPECT_EQ(
      QueryError(R"({"bool": {"must": {"term": {"contents": "a"}}, "minimum_should_match": 1}})"),
      "query.bool: unsupported bool parameter 'minimum_should_match' (supported: must, should, must_not, filter)");
  EXPECT_EQ(QueryError(R"({"bool": {"must": "a"}})"),
            "query.bool.must: must be a query object or an array of query objects, got string");
  EXPECT_EQ(QueryError(R"({"bool": {"should": [{"term": {"contents": "a"}}, 7]}})"),
            "query.bool.should[1]: a query must be an object, got number");
  EXPECT_EQ(QueryError(R"({"bool": []})"), "query.bool: must be an object, got array");
  EXPECT_EQ(QueryError(R"({"match": {"contents": "a"}, "term": {"contents": "b"}})"),
            "query: a query object has exactly one key, the query type (got 2)");
  EXPECT_EQ(QueryError("{}"), "query: empty query object (match_all is not supported)");
  EXPECT_EQ(QueryError("null"), "query: a query must be an object, got null");
  EXPECT_EQ(QueryError(R"({"bool": {}})"),
            "query.bool: an empty bool matches every document (match_all is not supported)");
  EXPECT_EQ(QueryError(R"({"bool": {"must": [], "filter": []}})"),
            "query.bool: an empty bool matches every document (match_all is not supported)");
  EXPECT_EQ(QueryError(R"({"bool": {"must_not": {"term": {"contents": "a"}}}})"),
            "query.bool: a bool of must_not clauses only matches every other document in Elasticsearch (match_all is "
            "not supported): add a must, filter or should clause");
  EXPECT_NE(
      QueryError(
          R"({"bool": {"filter": {"bool": {"must_not": [{"term": {"contents": "a"}}]}}, "must": {"term": {"contents": "b"}}}})")
          .find("query.bool.filter.bool: a bool of must_not"),
      std::string::npos);
  // Long unknown names are echoed cut.
  EXPECT_LE(QueryError("{\"" + std::string(5000, 'x') + "\": {}}").size(), 200u);
}

std::string NestedBool(uint32_t bools) {
  std::string q = R"({"term": {"contents": "a"}})";
  for (uint32_t i = 0; i < bools; ++i) q = R"({"bool": {"must": [)" + q + R"(, {"term": {"contents": "b"}}]}})";
  return q;
}

TEST(QueryDslTest, DepthLimit) {
  // NestedBool(n) has the root and n - 1 booleans below it.
  EXPECT_TRUE(ParseSearchDsl("{\"query\": " + NestedBool(kMaxTreeDepth + 1) + "}", Analyzer()).ok());
  const std::string err = QueryError(NestedBool(kMaxTreeDepth + 2));
  EXPECT_NE(err.find("nested deeper than 8 booleans"), std::string::npos) << err;
  EXPECT_EQ(err.rfind("query.bool.must[0].bool.must[0]", 0), 0u) << err;
  // A match of several terms is a boolean too.
  std::string m = R"({"match": {"contents": "x y"}})";
  std::string deep = NestedBool(kMaxTreeDepth + 1);
  deep.replace(deep.find(R"({"term": {"contents": "a"}})"), 27, m);
  EXPECT_NE(QueryError(deep).find("nested deeper"), std::string::npos);
  // Very deep JSON is refused without recursing through it.
  std::string very_deep;
  for (int i = 0; i < 100000; ++i) very_deep += R"({"bool": {"must": )";
  very_deep += R"({"term": {"contents": "a"}})";
  for (int i = 0; i < 100000; ++i) very_deep += "}}";
  EXPECT_NE(QueryError(very_deep).find("nested deeper"), std::string::npos);
}

TEST(QueryDslTest, ClauseLimit) {
  auto should_terms = [](uint32_t n) {
    std::string q = R"({"bool": {"should": [)";
    for (uint32_t i = 0; i < n; ++i)
      q += (i ? "," : "") + std::string(R"({"term": {"contents": "t)") + std::to_string(i) + "\"}}";
    return q + "]}}";
  };
  EXPECT_TRUE(ParseSearchDsl("{\"query\": " + should_terms(kMaxTreeClauses) + "}", Analyzer()).ok());
  EXPECT_EQ(QueryError(should_terms(kMaxTreeClauses + 1)),
            "query.bool.should[1024]: the query has more than 1024 clauses");
  std::string words;
  for (uint32_t i = 0; i <= kMaxTreeClauses; ++i) words += "w" + std::to_string(i) + " ";
  EXPECT_EQ(QueryError(R"({"match": {"contents": ")" + words + "\"}}"),
            "query.match: the query has more than 1024 clauses");
}

TEST(QueryDslTest, PhraseTokenLimit) {
  std::string words;
  for (uint32_t i = 0; i <= kMaxPhraseTokens; ++i) words += "w" + std::to_string(i) + " ";
  EXPECT_EQ(QueryError(R"({"match_phrase": {"contents": ")" + words + "\"}}"),
            "query.match_phrase.contents: the phrase has 65 tokens, more than 64");
}

// Mutated bodies: an answer or an InvalidArgument, never a crash or an exception.
TEST(QueryDslTest, MutatedBodiesNeverCrash) {
  const std::vector<std::string> seeds = {
      R"({"query": {"bool": {"must": [{"match": {"contents": {"query": "a b", "operator": "and"}}}], "should": {"term": {"contents": "c"}}, "must_not": [{"match_phrase": {"contents": "d e"}}], "filter": {"term": {"contents": "f"}}}}, "size": 3, "track_total_hits": true})",
      R"({"query": {"match": {"contents": "x"}}})"};
  std::mt19937 rng(48);
  const std::string bytes = "{}[]\":,0 -1e9truefalsenullabcontentsbool";
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t p = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[p] = bytes[rng() % bytes.size()];
          break;
        case 1:
          s.erase(p, 1 + rng() % 8);
          break;
        default:
          s.insert(p, 1, bytes[rng() % bytes.size()]);
          break;
      }
    }
    Result<SearchBody> b = ParseSearchDsl(s, Analyzer());
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    EXPECT_TRUE(ValidateTree(b->tree).ok()) << s;
    EXPECT_FALSE(HasDefault(b->tree)) << s;
  }
}

}  // namespace
}  // namespace search
