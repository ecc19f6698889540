// Incremental HTTP/1.1 request parser for the integrator's epoll-based HTTP server (RFC 9112 framing).
// ParseHttpRequest looks at the bytes received so far on a connection and says whether they hold a
// complete request (and how many bytes it took: a pipelined request starts there), need more bytes, or
// are an error to answer with a status before closing the connection:
//   400 malformed request line, header or chunked framing; Content-Length with Transfer-Encoding
//   413 body over max_body_bytes (Content-Length or chunked data; also chunked framing overhead over
//       max_body_bytes + max_header_bytes, so tiny chunks cannot make the server buffer unbounded bytes)
//   414 request-target over max_uri_bytes       431 header section (or chunked trailers) over max_header_bytes
//   501 a transfer coding other than chunked    505 an HTTP version other than 1.0 / 1.1
// Every limit is reported as soon as it is certainly exceeded, before the rest of the request arrives, so
// a slow or hostile client cannot make the server buffer more than the limits (plus one read).
// Lenient where common servers are: bare LF line ends, empty lines before the request line. Strict
// elsewhere: no obsolete line folding, no whitespace before ':', origin-form targets or "*" only.
// The parser keeps no state between calls: call it again with the grown buffer. Each call is linear in
// the bytes it looks at and never looks past the first request.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace search {

struct HttpRequestLimits {
  size_t max_header_bytes = 16 << 10;  // request line + headers, up to and including the blank line
  size_t max_uri_bytes = 8 << 10;      // the request-target
  size_t max_body_bytes = 1 << 20;
};

struct HttpRequest {
  std::string method;  // as sent, e.g. "GET" (case-sensitive per RFC 9110)
  std::string target;  // the raw request-target, e.g. "/search?q=a%20b"
  std::string path;    // target before '?', percent-decoded ('+' kept as '+')
  // Query string: split on '&', then on the first '='; names and values percent-decoded with '+' -> ' ';
  // "a" without '=' gives ("a", ""); empty pieces ("&&") skipped.
  std::multimap<std::string, std::string> params;
  int version_minor = 1;  // HTTP/1.0 -> 0, HTTP/1.1 -> 1
  // Names lower-cased, values with surrounding spaces/tabs trimmed, in the order sent.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // de-chunked when Transfer-Encoding: chunked (extensions and trailers dropped)
  // HTTP/1.1: true unless a Connection header lists "close"; HTTP/1.0: false unless one lists "keep-alive"
  // (and none "close"), and false for an HTTP/1.0 request with Transfer-Encoding (RFC 9112 §6.1).
  bool keep_alive = true;

  // First value of a header (name lower-case), or nullptr.
  const std::string* Header(std::string_view lower_name) const;
};

enum class HttpParseState { kIncomplete, kComplete, kError };

struct HttpParseResult {
  HttpParseState state = HttpParseState::kIncomplete;
  size_t consumed = 0;  // kComplete: bytes of `buf` this request took (the next request, pipelined, starts there)
  int status = 0;       // kError: the HTTP status to answer before closing: 400, 413, 414, 431, 501, 505
  std::string reason;   // kError: a short human-readable reason, e.g. "request body larger than 1048576 bytes"
  // kIncomplete: the request line and header section are all there, only body bytes are missing
  // (the front's header timeout stops counting then).
  bool headers_complete = false;
};

// Parses the first request in `buf` (bytes received so far on a connection). kIncomplete: call again with
// more bytes. Empty lines before the request line are skipped and counted in `consumed` (at most
// max_header_bytes of them, else 400). On kComplete `*out` is overwritten entirely; otherwise its contents
// are unspecified. `out` may be null (only the verdict is computed).
HttpParseResult ParseHttpRequest(std::string_view buf, const HttpRequestLimits& limits, HttpRequest* out);

// The query string (the target after '?') as HttpRequest::params holds it: pieces split on '&' (empty
// ones skipped), each on its first '=', names and values PercentDecode'd with '+' -> ' '; appended to
// `*params`. ParseHttpRequest uses it; so does the search_params fuzz target.
void ParseQueryString(std::string_view query, std::multimap<std::string, std::string>* params);

// Percent-decoding: "%41" -> "A" (either hex case); invalid escapes ("%zz", "%4") are kept literally;
// '+' becomes ' ' when plus_as_space (query strings), else stays '+' (paths).
std::string PercentDecode(std::string_view s, bool plus_as_space);

}  // namespace search
