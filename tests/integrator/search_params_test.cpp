// /search parameter parsing: every bad parameter is a 400 with a type and a reason naming it.
#include "integrator/search_params.hpp"

#include <gtest/gtest.h>

namespace search {
namespace {

using Params = std::multimap<std::string, std::string>;

void ExpectBad(const ParsedSearch& r, const std::string& reason_part, const std::string& type = "illegal_argument_exception") {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << reason_part;
  EXPECT_EQ(r.error->http_status, 400);
  EXPECT_EQ(r.error->type, type);
  EXPECT_NE(r.error->reason.find(reason_part), std::string::npos) << r.error->reason;
  EXPECT_LT(r.error->reason.size(), 400u);  // bounded, even for huge inputs
}

TEST(SearchParamsGet, Defaults) {
  auto r = ParseSearchQuery(Params{{"q", "hello world"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.params.q, "hello world");
  EXPECT_EQ(r.params.k, kDefaultK);
  EXPECT_EQ(r.params.mode, QueryMode::kAnd);
  EXPECT_FALSE(r.params.timeout_ms.has_value());
}

TEST(SearchParamsGet, AllFields) {
  auto r = ParseSearchQuery(Params{{"q", "x"}, {"k", "10000"}, {"mode", "andor"}, {"timeout_ms", "250"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.params.k, 10000u);
  EXPECT_EQ(r.params.mode, QueryMode::kAndOr);
  EXPECT_EQ(r.params.timeout_ms, 250u);
  EXPECT_EQ(ParseSearchQuery(Params{{"q", "x"}, {"mode", "or"}}).params.mode, QueryMode::kOr);
  EXPECT_EQ(ParseSearchQuery(Params{{"q", "x"}, {"k", "1"}}).params.k, 1u);
  EXPECT_TRUE(ParseSearchQuery(Params{{"q", ""}}).ok());  // the syntax is parsed at search time
  EXPECT_FALSE(r.params.track_total_hits);
  EXPECT_FALSE(r.params.count_only);
  EXPECT_FALSE(r.params.is_dsl);
}

TEST(SearchParamsGet, TrackTotalHitsSizeAndCounts) {
  auto r = ParseSearchQuery(Params{{"q", "+a -b"}, {"size", "3"}, {"track_total_hits", "true"}});
  ASSERT_TRUE(r.ok()) << r.error->reason;
  EXPECT_EQ(r.params.q, "+a -b");
  EXPECT_EQ(r.params.k, 3u);
  EXPECT_TRUE(r.params.track_total_hits);
  EXPECT_FALSE(ParseSearchQuery(Params{{"q", "x"}, {"track_total_hits", "false"}}).params.track_total_hits);
  // k 0: the count alone, only when counting.
  EXPECT_TRUE(ParseSearchQuery(Params{{"q", "x"}, {"k", "0"}, {"track_total_hits", "true"}}).ok());
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"k", "0"}}), "track_total_hits");
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"size", "0"}}), "[size] may be 0");
  for (const char* t : {"yes", "1", "TRUE", ""})
    ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"track_total_hits", t}}), "[track_total_hits]");
  // /count: q, mode, timeout_ms only.
  auto c = ParseCountQuery(Params{{"q", "x y"}, {"mode", "or"}, {"timeout_ms", "50"}});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c.params.count_only);
  EXPECT_EQ(c.params.mode, QueryMode::kOr);
  EXPECT_EQ(c.params.timeout_ms, 50u);
  for (const char* p : {"k", "size", "track_total_hits"})
    ExpectBad(ParseCountQuery(Params{{"q", "x"}, {p, "1"}}), p);
  ExpectBad(ParseCountQuery(Params{}), "[q]");
}

TEST(SearchParamsGet, BadParameters) {
  ExpectBad(ParseSearchQuery(Params{}), "[q]");
  ExpectBad(ParseSearchQuery(Params{{"k", "5"}}), "[q]");
  for (const char* k : {"abc", "10x", "", "1.5", "+5", " 5", "5 ", "0x10", "1e3"})
    ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"k", k}}), "[k]");
  for (const char* k : {"0", "-1", "10001", "99999999999999999999", "-99999999999999999999"})
    ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"k", k}}), "[k]");
  for (const char* m : {"AND", "xor", "", "and "}) ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"mode", m}}), "[mode]");
  for (const char* t : {"0", "-5", "60001", "soon", ""})
    ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"timeout_ms", t}}), "[timeout_ms]");
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"size", "5"}, {"k", "5"}}), "[size]");
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"from", "5"}}), "[from]");
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"q", "y"}}), "more than once");
  ExpectBad(ParseSearchQuery(Params{{"q", std::string(kMaxQueryBytes + 1, 'a')}}), "too long");
  EXPECT_TRUE(ParseSearchQuery(Params{{"q", std::string(kMaxQueryBytes, 'a')}}).ok());
  // A huge bad value is echoed only in part.
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"mode", std::string(100000, 'z')}}), "[mode]");
}

TEST(SearchParamsPost, Valid) {
  auto r = ParseSearchBody(R"({"q": "quick fox", "k": 7, "mode": "or", "timeout_ms": 100})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.params.q, "quick fox");
  EXPECT_EQ(r.params.k, 7u);
  EXPECT_EQ(r.params.mode, QueryMode::kOr);
  EXPECT_EQ(r.params.timeout_ms, 100u);
  auto d = ParseSearchBody(R"({"q": "a"})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.params.k, kDefaultK);
}

TEST(SearchParamsPost, DslBodiesAreKeptForTheSearchAndCountsParsed) {
  const std::string dsl = R"({"query": {"match": {"contents": "a b"}}, "size": 0, "track_total_hits": true})";
  auto r = ParseSearchBody(dsl);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.params.is_dsl);
  EXPECT_EQ(r.params.dsl, dsl);  // parsed with the analyzer at search time (ParseSearchDsl)
  EXPECT_FALSE(r.params.count_only);
  auto t = ParseSearchBody(R"({"q": "+a", "size": 0, "track_total_hits": true})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.params.k, 0u);
  EXPECT_TRUE(t.params.track_total_hits);
  ExpectBad(ParseSearchBody(R"({"q": "a", "track_total_hits": "true"})"), "[track_total_hits]");
  ExpectBad(ParseSearchBody(R"({"q": "a", "k": 0})"), "track_total_hits");
  auto c = ParseCountBody(R"({"query": {"term": {"contents": "a"}}})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c.params.is_dsl);
  EXPECT_TRUE(c.params.count_only);
  auto cq = ParseCountBody(R"({"q": "a b", "mode": "or"})");
  ASSERT_TRUE(cq.ok());
  EXPECT_TRUE(cq.params.count_only);
  EXPECT_FALSE(cq.params.is_dsl);
  ExpectBad(ParseCountBody(R"({"query": {"term": {"contents": "a"}}, "size": 1})"), "[size]");
  ExpectBad(ParseCountBody(R"({"q": "a", "k": 1})"), "[k]");
  ExpectBad(ParseCountBody(R"({"query": 1, "query": 2})"), "more than once");
}

// The fetch phase's parameters: _source (default on) and highlight (default off); a count takes neither.
TEST(SearchParamsFetch, SourceAndHighlight) {
  auto r = ParseSearchQuery(Params{{"q", "x"}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.params.source);
  EXPECT_FALSE(r.params.highlight);
  r = ParseSearchQuery(Params{{"q", "x"}, {"_source", "false"}, {"highlight", "true"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.params.source);
  EXPECT_TRUE(r.params.highlight);
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"_source", "no"}}), "parameter [_source] must be true or false");
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"highlight", "1"}}), "parameter [highlight] must be true or false");
  ExpectBad(ParseCountQuery(Params{{"q", "x"}, {"_source", "false"}}), "unrecognized parameter [_source]");
  ExpectBad(ParseCountQuery(Params{{"q", "x"}, {"highlight", "true"}}), "unrecognized parameter [highlight]");
  r = ParseSearchBody(R"({"q": "x", "_source": false, "highlight": true})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.params.source);
  EXPECT_TRUE(r.params.highlight);
  r = ParseSearchBody(R"({"q": "x", "highlight": {"fields": {"contents": {}}}})");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.params.highlight);
  ExpectBad(ParseSearchBody(R"({"q": "x", "highlight": {"fields": {"title": {}}}})"),
            "highlight.fields.title: only the field 'contents' can be highlighted");
  ExpectBad(ParseSearchBody(R"({"q": "x", "_source": "false"})"), "field [_source] must be true or false");
  ExpectBad(ParseCountBody(R"({"q": "x", "_source": false})"), "unrecognized field [_source]");
  // A DSL body keeps them for ParseSearchDsl; a _count DSL body takes nothing but the query.
  r = ParseSearchBody(R"({"query": {"match": {"contents": "x"}}, "_source": false})");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.params.is_dsl);
  ExpectBad(ParseCountBody(R"({"query": {"match": {"contents": "x"}}, "highlight": {"fields": {"contents": {}}}})"),
            "unrecognized field [highlight]");
}

TEST(SearchParamsPost, BadBodies) {
  ExpectBad(ParseSearchBody(""), "not valid JSON", "parse_exception");
  ExpectBad(ParseSearchBody("{\"q\": "), "not valid JSON", "parse_exception");
  ExpectBad(ParseSearchBody("{'q': 'x'}"), "not valid JSON", "parse_exception");
  ExpectBad(ParseSearchBody("[1, 2]"), "JSON object", "parse_exception");
  ExpectBad(ParseSearchBody("\"q\""), "JSON object", "parse_exception");
  ExpectBad(ParseSearchBody(std::string(200000, '[')), "not valid JSON", "parse_exception");  // deep: no crash
  ExpectBad(ParseSearchBody(std::string(100000, '[') + std::string(100000, ']')), "JSON object", "parse_exception");
  ExpectBad(ParseSearchBody("{\"q\": \"\xff\xfe\"}"), "not valid JSON", "parse_exception");  // invalid UTF-8
  ExpectBad(ParseSearchBody(R"({})"), "[q]");
  ExpectBad(ParseSearchBody(R"({"q": 5})"), "[q]");
  ExpectBad(ParseSearchBody(R"({"q": null})"), "[q]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "k": "10"})"), "[k]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "k": 1.5})"), "[k]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "k": 0})"), "[k]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "k": 10001})"), "[k]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "k": -3})"), "[k]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "k": 18446744073709551615})"), "[k]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "k": true})"), "[k]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "mode": "nand"})"), "[mode]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "mode": 1})"), "[mode]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "timeout_ms": 0})"), "[timeout_ms]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "timeout_ms": 1e9})"), "[timeout_ms]");
  ExpectBad(ParseSearchBody(R"({"q": "x", "from": 10})"), "[from]");
  ExpectBad(ParseSearchBody("{\"q\": \"" + std::string(kMaxQueryBytes + 1, 'b') + "\"}"), "too long");
}

}  // namespace
}  // namespace search
