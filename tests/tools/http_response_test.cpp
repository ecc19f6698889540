// The load generator's HTTP/1.1 response parser: whole and byte-by-byte responses, each framing,
// keep-alive rules, responses back to back, and malformed or oversized input ending in an error
// rather than a crash or a response made up.
#include "http_response.hpp"

#include <gtest/gtest.h>

#include <string>

namespace search::cli {
namespace {

using State = HttpResponseParser::State;

// Feeds `wire` one byte at a time; every prefix but the whole must be incomplete.
State FeedBytewise(HttpResponseParser& p, const std::string& wire) {
  for (size_t i = 0; i < wire.size(); ++i) {
    const State s = p.Feed(std::string_view(wire).substr(i, 1));
    if (s != State::kIncomplete) {
      EXPECT_EQ(i + 1, wire.size()) << "completed early at byte " << i;
      return s;
    }
  }
  return p.state();
}

TEST(HttpResponseParserTest, ContentLengthWholeAndBytewise) {
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 7\r\n\r\n{\"a\":1}";
  HttpResponseParser whole;
  ASSERT_EQ(whole.Feed(wire), State::kComplete);
  EXPECT_EQ(whole.status(), 200);
  EXPECT_EQ(whole.body(), "{\"a\":1}");
  EXPECT_TRUE(whole.keep_alive());
  HttpResponseParser bytewise;
  ASSERT_EQ(FeedBytewise(bytewise, wire), State::kComplete);
  EXPECT_EQ(bytewise.body(), "{\"a\":1}");
}

TEST(HttpResponseParserTest, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string wire =
      "HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\nabcd\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n";
  HttpResponseParser p;
  ASSERT_EQ(FeedBytewise(p, wire), State::kComplete);
  EXPECT_EQ(p.status(), 429);
  EXPECT_EQ(p.body(), "abcd0123456789");
}

TEST(HttpResponseParserTest, KeepAliveRules) {
  HttpResponseParser close;
  ASSERT_EQ(close.Feed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"), State::kComplete);
  EXPECT_FALSE(close.keep_alive());
  HttpResponseParser old;
  ASSERT_EQ(old.Feed("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"), State::kComplete);
  EXPECT_FALSE(old.keep_alive());
  HttpResponseParser old_kept;
  ASSERT_EQ(old_kept.Feed("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok"),
            State::kComplete);
  EXPECT_TRUE(old_kept.keep_alive());
}

TEST(HttpResponseParserTest, BodyUntilCloseNeedsTheEnd) {
  HttpResponseParser p;
  EXPECT_EQ(p.Feed("HTTP/1.1 200 OK\r\n\r\nsome"), State::kIncomplete);
  EXPECT_EQ(p.Feed(" body"), State::kIncomplete);
  ASSERT_EQ(p.FeedEof(), State::kComplete);
  EXPECT_EQ(p.body(), "some body");
  EXPECT_FALSE(p.keep_alive());
}

TEST(HttpResponseParserTest, InterimResponseIsSkipped) {
  HttpResponseParser p;
  ASSERT_EQ(p.Feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\nContent-Length: 1\r\n\r\nx"),
            State::kComplete);
  EXPECT_EQ(p.status(), 503);
  EXPECT_EQ(p.body(), "x");
}

TEST(HttpResponseParserTest, BackToBackResponsesOnOneConnection) {
  HttpResponseParser p;
  ASSERT_EQ(p.Feed("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 Not Found\r\nContent-Len"),
            State::kComplete);
  EXPECT_EQ(p.body(), "a");
  EXPECT_EQ(p.Reset(), State::kIncomplete);
  ASSERT_EQ(p.Feed("gth: 2\r\n\r\nno"), State::kComplete);
  EXPECT_EQ(p.status(), 404);
  EXPECT_EQ(p.body(), "no");
}

TEST(HttpResponseParserTest, MalformedResponsesAreErrors) {
  const std::string bad[] = {
      "SMTP 220 hello\r\n\r\n",
      "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
      "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX0\r\n\r\n",
  };
  for (const auto& wire : bad) {
    SCOPED_TRACE(wire);
    HttpResponseParser p;
    EXPECT_EQ(p.Feed(wire), State::kError);
    EXPECT_FALSE(p.error().empty());
    EXPECT_FALSE(p.keep_alive());
    EXPECT_EQ(p.Feed("more"), State::kError);  // stays failed
  }
}

TEST(HttpResponseParserTest, OversizedHeadersAndTruncatedResponses) {
  HttpResponseParser huge;
  std::string wire = "HTTP/1.1 200 OK\r\nX: ";
  wire.append(HttpResponseParser::kMaxHeaderBytes, 'a');
  EXPECT_EQ(huge.Feed(wire), State::kError);

  HttpResponseParser cut;
  EXPECT_EQ(cut.Feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"), State::kIncomplete);
  EXPECT_EQ(cut.FeedEof(), State::kError);

  HttpResponseParser nothing;
  EXPECT_FALSE(nothing.started());
  EXPECT_EQ(nothing.FeedEof(), State::kIncomplete);  // a closed idle connection: no response was under way
}

// ReadSearchAnswer: the answer's top-level timed_out (the boolean true only) and _shards.failed;
// the same names elsewhere do not count, and a body that is not JSON is not valid.
TEST(ReadSearchAnswerTest, TakesTheTopLevelFlagsAndRejectsWhatIsNotJson) {
  const SearchAnswerFlags ok = ReadSearchAnswer(
      R"({"took":2,"timed_out":false,"_shards":{"total":2,"successful":2,"failed":0,"failures":[]},)"
      R"("coverage":{"failed":5,"full":true},"hits":{"total":1,"hits":[{"_id":"d1","timed_out":true}]}})");
  EXPECT_TRUE(ok.valid);
  EXPECT_FALSE(ok.timed_out);
  EXPECT_EQ(ok.shards_failed, 0);

  const SearchAnswerFlags late = ReadSearchAnswer(R"({"hits":[],"timed_out":true})");
  EXPECT_TRUE(late.valid);
  EXPECT_TRUE(late.timed_out);

  const SearchAnswerFlags part = ReadSearchAnswer(
      R"({"_shards":{"total":2,"failures":[{"shard":1,"failed":9,"reason":"down"}],"failed":1},"timed_out":"true"})");
  EXPECT_TRUE(part.valid);
  EXPECT_FALSE(part.timed_out);  // a string, not the boolean
  EXPECT_EQ(part.shards_failed, 1);

  const SearchAnswerFlags nested = ReadSearchAnswer(R"({"x":{"_shards":{"failed":3},"timed_out":true}})");
  EXPECT_TRUE(nested.valid);
  EXPECT_FALSE(nested.timed_out);
  EXPECT_EQ(nested.shards_failed, 0);

  for (const char* bad : {"", "{", R"({"timed_out":true)", R"({"a":})", "{} x", "<html>", R"({"a":1,})"}) {
    SCOPED_TRACE(bad);
    const SearchAnswerFlags f = ReadSearchAnswer(bad);
    EXPECT_FALSE(f.valid);
    EXPECT_FALSE(f.timed_out);
    EXPECT_EQ(f.shards_failed, 0);
  }
}

}  // namespace
}  // namespace search::cli
