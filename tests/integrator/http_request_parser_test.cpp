// The incremental HTTP/1.1 request parser: framing, decoding, keep-alive, every error status (and that
// the limit errors come before the rest of the request), byte-at-a-time feeding, pipelining, and a
// deterministic fuzz loop.
#include "integrator/http_request_parser.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

namespace search {
namespace {

using Params = std::multimap<std::string, std::string>;
using Headers = std::vector<std::pair<std::string, std::string>>;

HttpParseResult Parse(std::string_view buf, HttpRequest* out, const HttpRequestLimits& limits = {}) {
  return ParseHttpRequest(buf, limits, out);
}

// Parses `buf`, expecting one complete request of exactly buf.size() bytes.
HttpRequest ParseComplete(std::string_view buf, const HttpRequestLimits& limits = {}) {
  HttpRequest req;
  const HttpParseResult r = ParseHttpRequest(buf, limits, &req);
  EXPECT_EQ(r.state, HttpParseState::kComplete) << "status " << r.status << ": " << r.reason;
  EXPECT_EQ(r.consumed, buf.size());
  return req;
}

void ExpectError(std::string_view buf, int status, const std::string& reason_part = "",
                 const HttpRequestLimits& limits = {}) {
  HttpRequest req;
  const HttpParseResult r = ParseHttpRequest(buf, limits, &req);
  ASSERT_EQ(r.state, HttpParseState::kError) << "input: " << std::string(buf.substr(0, 200));
  EXPECT_EQ(r.status, status) << r.reason << " / input: " << std::string(buf.substr(0, 200));
  EXPECT_FALSE(r.reason.empty());
  EXPECT_LT(r.reason.size(), 200u);
  if (!reason_part.empty()) {
    EXPECT_NE(r.reason.find(reason_part), std::string::npos) << r.reason;
  }
}

void ExpectIncomplete(std::string_view buf, const HttpRequestLimits& limits = {}) {
  HttpRequest req;
  const HttpParseResult r = ParseHttpRequest(buf, limits, &req);
  EXPECT_EQ(r.state, HttpParseState::kIncomplete) << "status " << r.status << ": " << r.reason;
}

// Every strict prefix of `buf` is incomplete; the whole is complete, taking all of it.
void ExpectByteAtATime(const std::string& buf) {
  HttpRequest req;
  for (size_t i = 0; i < buf.size(); ++i) {
    const HttpParseResult r = Parse(std::string_view(buf).substr(0, i), &req);
    ASSERT_EQ(r.state, HttpParseState::kIncomplete) << "prefix of " << i << " bytes: " << r.status << " " << r.reason;
  }
  const HttpParseResult r = Parse(buf, &req);
  ASSERT_EQ(r.state, HttpParseState::kComplete) << r.reason;
  EXPECT_EQ(r.consumed, buf.size());
}

TEST(HttpRequestParserTest, SimpleGetWithQueryParams) {
  const std::string buf =
      "GET /se%61rch?q=a%20b+c&k=10&flag&&x=1%2B1&q=second&%6Ee+y=v%3d&= HTTP/1.1\r\nHost: example\r\n\r\n";
  const HttpRequest req = ParseComplete(buf);
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.target, "/se%61rch?q=a%20b+c&k=10&flag&&x=1%2B1&q=second&%6Ee+y=v%3d&=");
  EXPECT_EQ(req.path, "/search");
  EXPECT_EQ(req.params,
            (Params{{"q", "a b c"},
                    {"q", "second"},
                    {"k", "10"},
                    {"flag", ""},
                    {"x", "1+1"},
                    {"ne y", "v="},
                    {"", ""}}));
  // Same-name parameters keep their order.
  auto [first, last] = req.params.equal_range("q");
  ASSERT_EQ(std::distance(first, last), 2);
  EXPECT_EQ(first->second, "a b c");
  EXPECT_EQ(std::next(first)->second, "second");
  EXPECT_EQ(req.version_minor, 1);
  EXPECT_TRUE(req.keep_alive);
  EXPECT_EQ(req.headers, (Headers{{"host", "example"}}));
  EXPECT_EQ(req.body, "");
}

TEST(HttpRequestParserTest, PathKeepsPlusAndDecodesPercent) {
  const HttpRequest req = ParseComplete("GET /a+b%2Fc%zz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(req.path, "/a+b/c%zz");
  EXPECT_TRUE(req.params.empty());
  const HttpRequest star = ParseComplete("OPTIONS * HTTP/1.1\r\n\r\n");
  EXPECT_EQ(star.method, "OPTIONS");
  EXPECT_EQ(star.target, "*");
  EXPECT_EQ(star.path, "*");
  const HttpRequest empty_query = ParseComplete("GET /x? HTTP/1.1\r\n\r\n");
  EXPECT_EQ(empty_query.path, "/x");
  EXPECT_TRUE(empty_query.params.empty());
}

TEST(HttpRequestParserTest, PercentDecodeKeepsInvalidEscapes) {
  EXPECT_EQ(PercentDecode("%41%42c", false), "ABc");
  EXPECT_EQ(PercentDecode("%2b%2B%e2%82%AC", false), "++\xe2\x82\xac");
  EXPECT_EQ(PercentDecode("%zz", false), "%zz");
  EXPECT_EQ(PercentDecode("%4", false), "%4");
  EXPECT_EQ(PercentDecode("a%", false), "a%");
  EXPECT_EQ(PercentDecode("%%41", false), "%A");
  EXPECT_EQ(PercentDecode("%4g1", false), "%4g1");
  EXPECT_EQ(PercentDecode("%00", false), std::string(1, '\0'));
  EXPECT_EQ(PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(PercentDecode("a+b", true), "a b");
  EXPECT_EQ(PercentDecode("", true), "");
}

TEST(HttpRequestParserTest, PostWithContentLength) {
  const std::string buf =
      "POST /search HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n"
      "{\"q\": \"abc\"}\n";
  const HttpRequest req = ParseComplete(buf);
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/search");
  EXPECT_EQ(req.body, "{\"q\": \"abc\"}\n");
  ASSERT_NE(req.Header("content-length"), nullptr);
  EXPECT_EQ(*req.Header("content-length"), "13");
  // Bytes after the body belong to the next request.
  HttpRequest out;
  const HttpParseResult r = Parse(buf + "GET", &out);
  ASSERT_EQ(r.state, HttpParseState::kComplete);
  EXPECT_EQ(r.consumed, buf.size());
  EXPECT_EQ(out.body, "{\"q\": \"abc\"}\n");
  // A missing body byte: incomplete.
  ExpectIncomplete(std::string_view(buf).substr(0, buf.size() - 1));
  // Content-Length: 0, leading zeros, repeated identical values.
  EXPECT_EQ(ParseComplete("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").body, "");
  EXPECT_EQ(ParseComplete("POST / HTTP/1.1\r\nContent-Length: 003\r\n\r\nabc").body, "abc");
  EXPECT_EQ(ParseComplete("POST / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length:  3 \r\n\r\nxyz").body, "xyz");
  EXPECT_EQ(ParseComplete("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 03\r\n\r\nxyz").body, "xyz");
}

TEST(HttpRequestParserTest, KeepAliveRules) {
  struct Case {
    std::string version;
    std::vector<std::string> connection;
    bool keep_alive;
  };
  const std::vector<Case> cases = {
      {"HTTP/1.1", {}, true},
      {"HTTP/1.1", {"close"}, false},
      {"HTTP/1.1", {"Close"}, false},
      {"HTTP/1.1", {"keep-alive"}, true},
      {"HTTP/1.1", {"Upgrade, CLOSE"}, false},
      {"HTTP/1.1", {"keep-alive", "close"}, false},
      {"HTTP/1.1", {"closed, xclose"}, true},
      {"HTTP/1.1", {"close-ish"}, true},
      {"HTTP/1.0", {}, false},
      {"HTTP/1.0", {"keep-alive"}, true},
      {"HTTP/1.0", {"Keep-Alive"}, true},
      {"HTTP/1.0", {"foo ,\tkeep-alive , bar"}, true},
      {"HTTP/1.0", {"foo", "KEEP-ALIVE"}, true},
      {"HTTP/1.0", {"keep-alive, close"}, false},
      {"HTTP/1.0", {"keepalive"}, false},
      {"HTTP/1.0", {"close"}, false},
  };
  for (const Case& c : cases) {
    std::string buf = "GET / " + c.version + "\r\n";
    for (const std::string& v : c.connection) buf += "Connection: " + v + "\r\n";
    buf += "\r\n";
    const HttpRequest req = ParseComplete(buf);
    EXPECT_EQ(req.keep_alive, c.keep_alive) << buf;
    EXPECT_EQ(req.version_minor, c.version == "HTTP/1.0" ? 0 : 1) << buf;
  }
  // HTTP/1.0 with Transfer-Encoding: decoded, but the connection closes afterwards (RFC 9112 §6.1).
  const HttpRequest te10 = ParseComplete(
      "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
      "1\r\nx\r\n0\r\n\r\n");
  EXPECT_EQ(te10.body, "x");
  EXPECT_FALSE(te10.keep_alive);
}

TEST(HttpRequestParserTest, ByteAtATimeFeeding) {
  ExpectByteAtATime("GET /search?q=x HTTP/1.1\r\nHost: h\r\nX-Empty:\r\n\r\n");
  ExpectByteAtATime("\r\n\r\nPOST /search HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  ExpectByteAtATime(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;a=b\r\nwiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n");
  ExpectByteAtATime("GET / HTTP/1.0\nHost: h\n\n");
}

TEST(HttpRequestParserTest, SplitsAPipelinedPair) {
  const std::string first = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  const std::string second = "GET /b?x=1 HTTP/1.1\r\nConnection: close\r\n\r\n";
  const std::string buf = first + second;
  HttpRequest req;
  HttpParseResult r = Parse(buf, &req);
  ASSERT_EQ(r.state, HttpParseState::kComplete);
  EXPECT_EQ(r.consumed, first.size());
  EXPECT_EQ(req.path, "/a");
  EXPECT_EQ(req.body, "abc");
  EXPECT_TRUE(req.keep_alive);

  r = Parse(std::string_view(buf).substr(first.size()), &req);
  ASSERT_EQ(r.state, HttpParseState::kComplete);
  EXPECT_EQ(r.consumed, second.size());
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path, "/b");
  EXPECT_EQ(req.params, (Params{{"x", "1"}}));
  EXPECT_EQ(req.body, "");  // the previous request's body is gone
  EXPECT_FALSE(req.keep_alive);
  EXPECT_EQ(req.headers, (Headers{{"connection", "close"}}));

  // Chunked first, then a request that starts with stray CRLFs.
  const std::string chunked = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
  r = Parse(chunked + "\r\n" + second, &req);
  ASSERT_EQ(r.state, HttpParseState::kComplete);
  EXPECT_EQ(r.consumed, chunked.size());
  EXPECT_EQ(req.body, "ok");
}

TEST(HttpRequestParserTest, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string buf =
      "POST /search HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  Chunked \r\n\r\n"
      "4;name=value;quoted=\"a;b\"\r\nWiki\r\n"
      "5 ; ext\r\npedia\r\n"
      "E\r\n in\r\n\r\nchunks.\r\n"
      "000\r\n"
      "Expires: never\r\n"
      "X-Trailer: 1\r\n"
      "\r\n";
  const HttpRequest req = ParseComplete(buf);
  EXPECT_EQ(req.body, "Wikipedia in\r\n\r\nchunks.");
  // Trailers are dropped, not merged into the headers.
  EXPECT_EQ(req.headers, (Headers{{"host", "h"}, {"transfer-encoding", "Chunked"}}));
  EXPECT_EQ(req.Header("expires"), nullptr);

  // Bare LF everywhere, upper- and lower-case hex, no trailers.
  EXPECT_EQ(ParseComplete("POST / HTTP/1.1\nTransfer-Encoding: chunked\n\na\n0123456789\nA\nabcdefghij\n0\n\n").body,
            "0123456789abcdefghij");
  // An empty chunked body.
  EXPECT_EQ(ParseComplete("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").body, "");
  // Several Transfer-Encoding headers form one list: "chunked, chunked" is not the only coding.
  ExpectError("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501);
}

TEST(HttpRequestParserTest, LeadingEmptyLinesAreSkippedAndConsumed) {
  const std::string buf = "\r\n\n\r\nGET /x HTTP/1.1\r\n\r\n";
  const HttpRequest req = ParseComplete(buf);  // consumed == buf.size(), leading lines included
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path, "/x");
  ExpectIncomplete("\r\n\r\n");
  ExpectIncomplete("\r\n\r");
  ExpectIncomplete("");
  // A lone CR that is not a line end is no method.
  ExpectError("\r\rGET / HTTP/1.1\r\n\r\n", 400);
  // An endless stream of empty lines is cut off.
  HttpRequestLimits small;
  small.max_header_bytes = 64;
  std::string crlfs;
  for (int i = 0; i < 40; ++i) crlfs += "\r\n";
  ExpectError(crlfs, 400, "empty lines", small);
  // Up to the limit, they are fine (and do not count against the header section).
  const std::string ok = crlfs.substr(0, 64) + "GET / HTTP/1.1\r\n\r\n";
  HttpRequest r2;
  const HttpParseResult r = Parse(ok, &r2, small);
  ASSERT_EQ(r.state, HttpParseState::kComplete) << r.reason;
  EXPECT_EQ(r.consumed, ok.size());
}

TEST(HttpRequestParserTest, HeaderLookup) {
  const HttpRequest req = ParseComplete(
      "GET / HTTP/1.1\r\nHost: example.com\r\nX-Multi:  first \t\r\nx-multi: second\r\nACCEPT:\t*/*\r\n"
      "Empty:\r\nWeird!#$%&'*+-.^_`|~Name: v a l\r\n\r\n");
  EXPECT_EQ(req.headers, (Headers{{"host", "example.com"},
                                  {"x-multi", "first"},
                                  {"x-multi", "second"},
                                  {"accept", "*/*"},
                                  {"empty", ""},
                                  {"weird!#$%&'*+-.^_`|~name", "v a l"}}));
  ASSERT_NE(req.Header("host"), nullptr);
  EXPECT_EQ(*req.Header("host"), "example.com");
  ASSERT_NE(req.Header("x-multi"), nullptr);
  EXPECT_EQ(*req.Header("x-multi"), "first");
  ASSERT_NE(req.Header("accept"), nullptr);
  EXPECT_EQ(*req.Header("accept"), "*/*");
  ASSERT_NE(req.Header("empty"), nullptr);
  EXPECT_EQ(*req.Header("empty"), "");
  EXPECT_EQ(req.Header("missing"), nullptr);
  EXPECT_EQ(req.Header("Host"), nullptr);  // the argument is the lower-case name
  EXPECT_EQ(req.Header("hos"), nullptr);
}

TEST(HttpRequestParserTest, OutputIsOverwrittenOnComplete) {
  HttpRequest req;
  req.method = "STALE";
  req.params.emplace("old", "1");
  req.headers.emplace_back("old", "1");
  req.body = "old body";
  req.version_minor = 0;
  req.keep_alive = false;
  const HttpParseResult r = Parse("GET /new HTTP/1.1\r\n\r\n", &req);
  ASSERT_EQ(r.state, HttpParseState::kComplete);
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.target, "/new");
  EXPECT_TRUE(req.params.empty());
  EXPECT_TRUE(req.headers.empty());
  EXPECT_EQ(req.body, "");
  EXPECT_EQ(req.version_minor, 1);
  EXPECT_TRUE(req.keep_alive);
  // A null `out` still gives the verdict.
  const HttpParseResult n = ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", {}, nullptr);
  EXPECT_EQ(n.state, HttpParseState::kComplete);
  EXPECT_EQ(n.consumed, 40u);
}

TEST(HttpRequestParserTest, MalformedRequestsAre400) {
  const std::vector<std::string> bad = {
      " GET / HTTP/1.1\r\n\r\n",                  // empty method
      "GET  / HTTP/1.1\r\n\r\n",                  // empty target
      "G(T / HTTP/1.1\r\n\r\n",                   // method not a token
      "GET\t/ HTTP/1.1\r\n\r\n",                  // HT is not SP
      "GET http://h/ HTTP/1.1\r\n\r\n",           // absolute-form not accepted
      "GET x HTTP/1.1\r\n\r\n",                   // neither '/' nor '*'
      "GET *x HTTP/1.1\r\n\r\n",                  // '*' must be the whole target
      "GET /\r\n\r\n",                            // no version (HTTP/0.9)
      "GET / \r\n\r\n",                           // empty version
      "GET /a\x01 HTTP/1.1\r\n\r\n",              // control byte in the target
      "GET / HTTP/1.1 \r\n\r\n",                  // trailing space
      "GET / http/1.1\r\n\r\n",                   // case-sensitive version
      "GET / HTTP/1\r\n\r\n",                     // no minor
      "GET / HTTP/1.x\r\n\r\n",                   // garbage version
      "GET / FOO\r\n\r\n",                        // garbage version
      "GET / HTTP/1.1\rX\r\n\r\n",                // bare CR
      "GET / HTTP/1.1\r\nHost : h\r\n\r\n",       // whitespace before ':'
      "GET / HTTP/1.1\r\nHost\r\n\r\n",           // no ':'
      "GET / HTTP/1.1\r\nHost h\r\n\r\n",         // no ':'
      "GET / HTTP/1.1\r\n: v\r\n\r\n",            // empty name
      "GET / HTTP/1.1\r\nA(b: v\r\n\r\n",         // name not a token
      "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",     // obsolete line folding
      "GET / HTTP/1.1\r\n\tA: b\r\n\r\n",         // obsolete line folding (first line)
      "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",        // bare CR in a value
      "GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n",       // DEL in a value
      "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\nab",
      "POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx",
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy",
      "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n",                    // non-hex size
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",                       // empty size
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",                     // signed size
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n 1\r\nx\r\n0\r\n\r\n",       // leading space
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1x\r\nx\r\n0\r\n\r\n",       // junk after size
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",      // overflows 64 bits
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n0\r\n\r\n",       // data longer than size
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\rz0\r\n\r\n",         // CR without LF
  };
  for (const std::string& b : bad) ExpectError(b, 400);
  ExpectError("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy", 400, "conflicting");
  ExpectError("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both");
  ExpectError("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400, "folding");
  ExpectError("GET / HTTP/1.1\r\nHost\r\n\r\n", 400, "':'");
  ExpectError("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n", 400, "CRLF after chunk data");
  ExpectError("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", 400, "overflow");
  // A chunk-size line that never ends.
  ExpectError("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" + std::string(5000, 'e'), 400, "too long");
  // Errors that can be seen before the line ends come back at once.
  ExpectError("GET x", 400);
  ExpectError("G\x01", 400);
}

TEST(HttpRequestParserTest, BodyTooLargeIs413BeforeTheBodyArrives) {
  HttpRequestLimits limits;
  limits.max_body_bytes = 100;
  // Content-Length over the limit: 413 as soon as the headers are in, no body byte sent.
  ExpectError("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413, "request body larger than 100 bytes", limits);
  // At the limit: waits for the body.
  ExpectIncomplete("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n", limits);
  EXPECT_EQ(ParseComplete("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'b'), limits).body,
            std::string(100, 'b'));
  // Huge values: 413, not an overflow.
  ExpectError("POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n", 413);
  ExpectError("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999999999999999999\r\n\r\n", 413);
  ExpectError("POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", 413, "request body larger than 1048576 bytes");
  // Leading zeros do not make a small value large.
  ExpectIncomplete("POST / HTTP/1.1\r\nContent-Length: 000000000000000000000000000001\r\n\r\n", limits);

  // Chunked: a chunk that would take the body over the limit is refused when its size line arrives.
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  ExpectError(head + "65\r\n", 413, "larger than 100 bytes", limits);  // 0x65 = 101
  ExpectIncomplete(head + "64\r\n", limits);                           // 100: fine so far
  // Growth over several chunks: 60 + 41 > 100, refused before the second chunk's data.
  ExpectError(head + "3c\r\n" + std::string(60, 'a') + "\r\n29\r\n", 413, "", limits);
  const std::string two_chunks =
      head + "3c\r\n" + std::string(60, 'a') + "\r\n28\r\n" + std::string(40, 'b') + "\r\n0\r\n\r\n";
  EXPECT_EQ(ParseComplete(two_chunks, limits).body, std::string(60, 'a') + std::string(40, 'b'));
  // A size far over the limit that still fits 64 bits: 413 too.
  ExpectError(head + "ffffffffffffffff\r\n", 413, "", limits);
  // Tiny chunks with long extensions: the framing overhead is bounded too.
  HttpRequestLimits tiny;
  tiny.max_body_bytes = 100;
  tiny.max_header_bytes = 100;
  std::string many = head;
  for (int i = 0; i < 10; ++i) many += "1;" + std::string(30, 'e') + "\r\nx\r\n";
  ExpectError(many, 413, "overhead", tiny);
}

TEST(HttpRequestParserTest, LongTargetIs414BeforeTheRequestLineEnds) {
  HttpRequestLimits limits;
  limits.max_uri_bytes = 32;
  const std::string at_limit = "/" + std::string(31, 'a');
  EXPECT_EQ(ParseComplete("GET " + at_limit + " HTTP/1.1\r\n\r\n", limits).target, at_limit);
  ExpectError("GET " + at_limit + "a HTTP/1.1\r\n\r\n", 414, "longer than 32 bytes", limits);
  // The target is still arriving: 33 bytes of it are enough.
  ExpectIncomplete("GET " + at_limit, limits);
  ExpectError("GET " + at_limit + "a", 414, "", limits);
  // Default limit: 8 KiB; a partial target of 8 KiB + 1 is refused, well before the 16 KiB header limit.
  ExpectError("GET /" + std::string(8 << 10, 'x'), 414, "longer than 8192 bytes");
  ExpectIncomplete("GET /" + std::string((8 << 10) - 1, 'x'));
}

TEST(HttpRequestParserTest, LargeHeaderSectionIs431BeforeItEnds) {
  HttpRequestLimits limits;
  limits.max_header_bytes = 64;
  // Exactly 64 bytes, blank line included: fine.
  const std::string base = "GET / HTTP/1.1\r\nX: ";  // 19 bytes
  const std::string at_limit = base + std::string(64 - 19 - 4, 'v') + "\r\n\r\n";
  ASSERT_EQ(at_limit.size(), 64u);
  EXPECT_EQ(ParseComplete(at_limit, limits).headers.size(), 1u);
  const std::string over = base + std::string(64 - 19 - 3, 'v') + "\r\n\r\n";
  ExpectError(over, 431, "larger than 64 bytes", limits);
  // No blank line yet: refused once 64 bytes have come without one.
  ExpectIncomplete(over.substr(0, 63), limits);
  ExpectError(over.substr(0, 64), 431, "", limits);
  // Even within the request line (a long method or version), and with a body behind the headers.
  ExpectError(std::string(64, 'G'), 431, "", limits);
  ExpectError("GET / " + std::string(58, 'H'), 431, "", limits);
  // Default limit: 16 KiB of headers without the end.
  std::string big = "GET / HTTP/1.1\r\n";
  while (big.size() <= (16 << 10)) big += "X-Filler: 0123456789012345678901234567890123456789\r\n";
  ExpectError(big, 431, "larger than 16384 bytes");
  // Trailers are bounded by the same limit.
  std::string trailers = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
  for (int i = 0; i < 10; ++i) trailers += "T: 0123456789\r\n";
  ExpectError(trailers, 431, "trailer", limits);
}

TEST(HttpRequestParserTest, UnsupportedTransferCodingIs501) {
  const std::vector<std::string> codings = {"gzip", "gzip, chunked", "chunked, gzip", "identity", "chunked;x=1",
                                            "deflate ,chunked"};
  for (const std::string& c : codings)
    ExpectError("POST / HTTP/1.1\r\nTransfer-Encoding: " + c + "\r\n\r\n", 501, "transfer coding");
  ExpectError("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", 501);
  // Empty list elements do not count as codings.
  EXPECT_EQ(ParseComplete("POST / HTTP/1.1\r\nTransfer-Encoding: , chunked,\r\n\r\n1\r\nz\r\n0\r\n\r\n").body, "z");
}

TEST(HttpRequestParserTest, OtherVersionsAre505) {
  for (const char* v : {"HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/3.0", "HTTP/10.1", "HTTP/1.10"})
    ExpectError(std::string("GET / ") + v + "\r\n\r\n", 505, "version");
  ExpectError("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505);  // the HTTP/2 connection preface
  ExpectError("GET / HTTP/2.0\n\n", 505);
}

TEST(HttpRequestParserTest, BareLineFeedsAreAccepted) {
  const HttpRequest req = ParseComplete("POST /p HTTP/1.0\nHost: h\nContent-Length: 2\n\nhi");
  EXPECT_EQ(req.version_minor, 0);
  EXPECT_EQ(req.headers, (Headers{{"host", "h"}, {"content-length", "2"}}));
  EXPECT_EQ(req.body, "hi");
  EXPECT_FALSE(req.keep_alive);
  // Mixed CRLF and LF.
  EXPECT_EQ(ParseComplete("GET / HTTP/1.1\r\nA: 1\nB: 2\r\n\n").headers, (Headers{{"a", "1"}, {"b", "2"}}));
}

TEST(HttpRequestParserTest, FuzzedInputNeverBreaksTheParser) {
  std::mt19937 rng(20240611);
  const std::vector<std::string> seeds = {
      "GET /search?q=a%20b+c&k=10 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
      "POST /search HTTP/1.1\r\nContent-Length: 11\r\n\r\n{\"q\": \"x\"}\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n",
      "\r\nGET / HTTP/1.0\nConnection: keep-alive\n\n",
  };
  using namespace std::string_literals;
  const std::string alphabet = "GETPOST /?&=%+:;,\r\n\t0123456789abcdefABCDEF-HTP.chunkedContent-Length\x00\x7f\xff"s;
  HttpRequestLimits small;
  small.max_header_bytes = 96;
  small.max_uri_bytes = 24;
  small.max_body_bytes = 16;
  const std::set<int> statuses = {400, 413, 414, 431, 501, 505};
  size_t completes = 0, errors = 0;
  HttpRequest req;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string buf;
    const int kind = iter % 4;
    if (kind == 0) {  // random bytes
      const size_t len = rng() % 64;
      for (size_t i = 0; i < len; ++i) buf.push_back(static_cast<char>(rng() & 0xff));
    } else if (kind == 1) {  // random bytes from a request-like alphabet
      const size_t len = rng() % 96;
      for (size_t i = 0; i < len; ++i) buf.push_back(alphabet[rng() % alphabet.size()]);
    } else {  // mutations of a valid request
      buf = seeds[rng() % seeds.size()];
      const int mutations = 1 + static_cast<int>(rng() % 4);
      for (int m = 0; m < mutations && !buf.empty(); ++m) {
        const size_t pos = rng() % buf.size();
        switch (rng() % 4) {
          case 0: buf[pos] = static_cast<char>(rng() & 0xff); break;
          case 1: buf.erase(pos, 1 + rng() % 4); break;
          case 2: buf.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
          default: buf.resize(pos); break;
        }
      }
    }
    const HttpRequestLimits& limits = (iter % 3 == 0) ? small : HttpRequestLimits{};
    const HttpParseResult r = ParseHttpRequest(buf, limits, &req);
    switch (r.state) {
      case HttpParseState::kComplete:
        ++completes;
        ASSERT_GT(r.consumed, 0u) << iter;
        ASSERT_LE(r.consumed, buf.size()) << iter;
        ASSERT_LE(req.body.size(), limits.max_body_bytes) << iter;
        ASSERT_LE(req.target.size(), limits.max_uri_bytes) << iter;
        {
          // The verdict depends only on the bytes it consumed: the request alone is complete too.
          const HttpParseResult again = ParseHttpRequest(std::string_view(buf).substr(0, r.consumed), limits, nullptr);
          ASSERT_EQ(again.state, HttpParseState::kComplete) << iter;
          ASSERT_EQ(again.consumed, r.consumed) << iter;
          // And any shorter prefix is incomplete.
          const size_t cut = rng() % r.consumed;
          ASSERT_EQ(ParseHttpRequest(std::string_view(buf).substr(0, cut), limits, nullptr).state,
                    HttpParseState::kIncomplete)
              << iter << " cut " << cut;
        }
        break;
      case HttpParseState::kError:
        ++errors;
        ASSERT_TRUE(statuses.count(r.status)) << iter << ": " << r.status;
        ASSERT_FALSE(r.reason.empty()) << iter;
        ASSERT_EQ(r.consumed, 0u) << iter;
        {
          // More bytes never turn an error into something else.
          const HttpParseResult longer = ParseHttpRequest(buf + "\r\n\r\nxyz", limits, nullptr);
          ASSERT_EQ(longer.state, HttpParseState::kError) << iter;
          ASSERT_EQ(longer.status, r.status) << iter;
        }
        break;
      case HttpParseState::kIncomplete:
        ASSERT_EQ(r.status, 0) << iter;
        ASSERT_EQ(r.consumed, 0u) << iter;
        break;
    }
  }
  // The loop exercised all three outcomes (the fixed seed makes these counts stable).
  EXPECT_GT(completes, 1000u);
  EXPECT_GT(errors, 1000u);
}

TEST(HttpRequestParserTest, LargeInputIsLinear) {
  // A 1 MiB body, chunked in 4 KiB pieces or with a Content-Length, parses in one call.
  std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string piece(4096, 'z');
  for (int i = 0; i < 256; ++i) chunked += "1000\r\n" + piece + "\r\n";
  chunked += "0\r\n\r\n";
  const HttpRequest a = ParseComplete(chunked);
  EXPECT_EQ(a.body.size(), size_t{1} << 20);
  const std::string cl = "POST / HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n" + std::string(1 << 20, 'y');
  EXPECT_EQ(ParseComplete(cl).body.size(), size_t{1} << 20);
  // Many pipelined requests: parsing the first looks at the first only.
  std::string many;
  for (int i = 0; i < 10000; ++i) many.append("GET /").append(std::to_string(i)).append(" HTTP/1.1\r\n\r\n");
  size_t off = 0, count = 0;
  HttpRequest req;
  while (off < many.size()) {
    const HttpParseResult r = Parse(std::string_view(many).substr(off), &req);
    ASSERT_EQ(r.state, HttpParseState::kComplete);
    ASSERT_EQ(req.path, std::string("/").append(std::to_string(count)));
    off += r.consumed;
    ++count;
  }
  EXPECT_EQ(count, 10000u);
}

}  // namespace
}  // namespace search

namespace search {
namespace {

// headers_complete: set on kIncomplete only once the header section is all in (the front's header
// timeout stops there), for Content-Length and chunked bodies; never while headers still come.
TEST(HttpRequestParserTest, HeadersCompleteOnlyWhileTheBodyIsMissing) {
  const HttpRequestLimits limits;
  const std::string head = "POST /search HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
  for (size_t i = 0; i < head.size(); ++i) {
    const HttpParseResult r = ParseHttpRequest(head.substr(0, i), limits, nullptr);
    ASSERT_EQ(r.state, HttpParseState::kIncomplete) << i;
    EXPECT_FALSE(r.headers_complete) << i;
  }
  const HttpParseResult body_missing = ParseHttpRequest(head + "12345", limits, nullptr);
  ASSERT_EQ(body_missing.state, HttpParseState::kIncomplete);
  EXPECT_TRUE(body_missing.headers_complete);
  const HttpParseResult chunked =
      ParseHttpRequest("POST /search HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", limits, nullptr);
  ASSERT_EQ(chunked.state, HttpParseState::kIncomplete);
  EXPECT_TRUE(chunked.headers_complete);
  const HttpParseResult get = ParseHttpRequest("GET /health HTTP/1.1\r\nHost: a\r\n", limits, nullptr);
  ASSERT_EQ(get.state, HttpParseState::kIncomplete);
  EXPECT_FALSE(get.headers_complete);
}

}  // namespace
}  // namespace search
