// An incremental HTTP/1.1 response parser for the load generator's event loops: bytes in as they
// arrive, one complete response out (status, body, whether the server keeps the connection), or a
// clear error for a malformed one. Bodies by Content-Length, chunked transfer coding, or (no
// length) up to the connection's end. Bounded: headers at most 64 KiB, a body at most 64 MiB.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace search::cli {

class HttpResponseParser {
 public:
  enum class State { kIncomplete, kComplete, kError };
  static constexpr size_t kMaxHeaderBytes = 64 << 10;
  static constexpr size_t kMaxBodyBytes = 64 << 20;

  // Appends bytes read from the connection and parses as far as they go.
  State Feed(std::string_view bytes);
  // The connection ended (EOF): completes a close-delimited body, else an error if a response
  // was under way (kIncomplete if nothing had arrived).
  State FeedEof();
  // Starts over for the next response on the same connection; bytes after the response's end
  // (a server that answered early) are kept and parsed.
  State Reset();

  State state() const { return state_; }
  bool started() const { return !buf_.empty() || state_ != State::kIncomplete; }
  int status() const { return status_; }
  const std::string& body() const { return body_; }
  bool keep_alive() const { return keep_alive_; }
  const std::string& error() const { return error_; }

 private:
  State Parse();
  State Fail(std::string why);
  bool ParseHeaders(std::string_view head);
  State ParseChunked();

  enum class Framing { kLength, kChunked, kUntilClose };
  std::string buf_;  // unparsed bytes
  size_t pos_ = 0;   // parsed up to here
  bool have_headers_ = false;
  Framing framing_ = Framing::kLength;
  size_t length_ = 0;
  State state_ = State::kIncomplete;
  int status_ = 0;
  bool keep_alive_ = true;
  std::string body_, error_;
};

// What the load generator needs of a search answer's JSON body: whether it is JSON at all, its
// top-level "timed_out" (true only as the boolean true) and "_shards"."failed" (a number; 0 when
// absent). The whole body is checked as JSON, but no document is built (a SAX pass), since the
// load generator shares its host with what it measures.
struct SearchAnswerFlags {
  bool valid = false;
  bool timed_out = false;
  double shards_failed = 0;
};
SearchAnswerFlags ReadSearchAnswer(std::string_view body);

}  // namespace search::cli
