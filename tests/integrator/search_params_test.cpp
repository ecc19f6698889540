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
  EXPECT_TRUE(ParseSearchQuery(Params{{"q", ""}}).ok());  // empty query: valid, matches nothing
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
  ExpectBad(ParseSearchQuery(Params{{"q", "x"}, {"size", "5"}}), "[size]");
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
