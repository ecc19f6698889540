// Fuzz target: the integrator's HTTP/1.1 request parser (integrator/http_request_parser.hpp), the
// event-loop front's reader of every byte a client sends. The first input byte picks the limits
// (the front's defaults, or small ones so the 413/414/431 paths are reached); the rest is what a
// connection received. Checked, beyond "no crash, no sanitizer report":
//  - an error is one of 400, 413, 414, 431, 501, 505 with a non-empty reason of at most 512 bytes;
//  - a complete request took 1 to size bytes; its method is a token, its target origin-form or "*"
//    within max_uri_bytes, its version 1.0 or 1.1, its body within max_body_bytes, its header names
//    lower-case tokens and values trimmed without CR, LF or NUL; its path and query parameters equal
//    an independent percent-decoding and split of the target;
//  - the verdict does not depend on whether a request is wanted (out == nullptr);
//  - incremental: every prefix (or 64 spread over a long input) is kIncomplete, or the whole input's
//    verdict already (the same error, or the same complete request): the front reparses a growing
//    buffer, so a verdict must never change as bytes are added;
//  - the bytes a complete request took parse alone to the same request, and the rest (pipelined
//    requests) parses in turn under the same checks.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "integrator/http_request_parser.hpp"

namespace {

using search::HttpParseResult;
using search::HttpParseState;
using search::HttpRequest;
using search::HttpRequestLimits;

bool IsTchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Independent of the parser's PercentDecode: a valid %XX escape decodes, anything else stays.
std::string RefDecode(std::string_view s, bool plus_as_space) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '%' && s.size() - i >= 3 && Hex(s[i + 1]) >= 0 && Hex(s[i + 2]) >= 0) {
      out += static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2]));
      i += 3;
      continue;
    }
    out += (plus_as_space && s[i] == '+') ? ' ' : s[i];
    ++i;
  }
  return out;
}

std::multimap<std::string, std::string> RefParams(std::string_view query) {
  std::multimap<std::string, std::string> out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view piece = query.substr(start, end - start);
    if (!piece.empty()) {
      const size_t eq = piece.find('=');
      const std::string_view name = piece.substr(0, eq);
      const std::string_view value = eq == std::string_view::npos ? std::string_view() : piece.substr(eq + 1);
      out.emplace(RefDecode(name, true), RefDecode(value, true));
    }
    start = end + 1;
  }
  return out;
}

bool SameRequest(const HttpRequest& a, const HttpRequest& b) {
  return a.method == b.method && a.target == b.target && a.path == b.path && a.params == b.params &&
         a.version_minor == b.version_minor && a.headers == b.headers && a.body == b.body &&
         a.keep_alive == b.keep_alive;
}

bool SameVerdict(const HttpParseResult& a, const HttpParseResult& b) {
  return a.state == b.state && a.consumed == b.consumed && a.status == b.status;
}

std::string Describe(const HttpParseResult& r) {
  return "state " + std::to_string(static_cast<int>(r.state)) + " consumed " + std::to_string(r.consumed) + " status " +
         std::to_string(r.status) + " " + r.reason.substr(0, 200);
}

void CheckRequest(const HttpRequest& req, const HttpRequestLimits& limits) {
  FUZZ_CHECK(!req.method.empty());
  for (char c : req.method) FUZZ_CHECK(IsTchar(c));
  FUZZ_CHECK(!req.target.empty() && req.target.size() <= limits.max_uri_bytes);
  FUZZ_CHECK(req.target[0] == '/' || req.target == "*");
  for (char c : req.target) FUZZ_CHECK(static_cast<unsigned char>(c) > 0x20 && c != 0x7f);
  FUZZ_CHECK(req.version_minor == 0 || req.version_minor == 1);
  FUZZ_CHECK(req.body.size() <= limits.max_body_bytes);
  for (const auto& [name, value] : req.headers) {
    FUZZ_CHECK(!name.empty());
    for (char c : name) FUZZ_CHECK(IsTchar(c) && !(c >= 'A' && c <= 'Z'));
    for (char c : value) FUZZ_CHECK(c != '\r' && c != '\n' && c != '\0');
    FUZZ_CHECK(value.empty() ||
               (value.front() != ' ' && value.front() != '\t' && value.back() != ' ' && value.back() != '\t'));
  }
  const size_t q = req.target.find('?');
  FUZZ_CHECK_MSG(req.path == RefDecode(std::string_view(req.target).substr(0, q), false), req.target);
  const auto params = q == std::string::npos ? std::multimap<std::string, std::string>()
                                             : RefParams(std::string_view(req.target).substr(q + 1));
  FUZZ_CHECK_MSG(req.params == params, req.target);
  if (!req.Header("connection") && req.version_minor == 1 && !req.Header("transfer-encoding"))
    FUZZ_CHECK(req.keep_alive);
  if (!req.Header("connection") && req.version_minor == 0) FUZZ_CHECK(!req.keep_alive);
}

// Checks the first request of `buf` and returns its verdict (and the request in *out).
HttpParseResult CheckOne(std::string_view buf, const HttpRequestLimits& limits, HttpRequest* out) {
  const HttpParseResult r = search::ParseHttpRequest(buf, limits, out);
  const HttpParseResult bare = search::ParseHttpRequest(buf, limits, nullptr);
  FUZZ_CHECK_MSG(SameVerdict(r, bare), Describe(r) + " vs " + Describe(bare));
  switch (r.state) {
    case HttpParseState::kError:
      FUZZ_CHECK_MSG(r.status == 400 || r.status == 413 || r.status == 414 || r.status == 431 || r.status == 501 ||
                         r.status == 505,
                     Describe(r));
      FUZZ_CHECK(!r.reason.empty() && r.reason.size() <= 512);
      break;
    case HttpParseState::kComplete:
      FUZZ_CHECK_MSG(r.consumed >= 1 && r.consumed <= buf.size(), Describe(r));
      CheckRequest(*out, limits);
      break;
    case HttpParseState::kIncomplete:
      break;
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  HttpRequestLimits limits;
  if (data[0] & 1) {
    limits.max_header_bytes = 256;
    limits.max_uri_bytes = 64;
    limits.max_body_bytes = 512;
  }
  const std::string_view buf(reinterpret_cast<const char*>(data) + 1, size - 1);

  HttpRequest whole;
  const HttpParseResult r = CheckOne(buf, limits, &whole);

  // Prefixes: the verdict never changes as bytes arrive (the front reparses its growing buffer).
  std::vector<size_t> cuts;
  if (buf.size() <= 512) {
    for (size_t i = 0; i < buf.size(); ++i) cuts.push_back(i);
  } else {
    for (size_t i = 0; i < 64; ++i) cuts.push_back(buf.size() * i / 64);
  }
  for (size_t cut : cuts) {
    HttpRequest part;
    const HttpParseResult p = search::ParseHttpRequest(buf.substr(0, cut), limits, &part);
    if (p.state == HttpParseState::kIncomplete) continue;
    FUZZ_CHECK_MSG(SameVerdict(p, r), "prefix " + std::to_string(cut) + ": " + Describe(p) + " vs " + Describe(r));
    if (p.state == HttpParseState::kComplete) FUZZ_CHECK(SameRequest(part, whole));
  }

  if (r.state != HttpParseState::kComplete) return 0;
  HttpRequest alone;
  const HttpParseResult a = search::ParseHttpRequest(buf.substr(0, r.consumed), limits, &alone);
  FUZZ_CHECK_MSG(SameVerdict(a, r) && SameRequest(alone, whole), Describe(a));

  // Pipelined requests after the first, as the front reads them (bounded: each takes >= 1 byte).
  std::string_view rest = buf.substr(r.consumed);
  for (int i = 0; i < 16 && !rest.empty(); ++i) {
    HttpRequest next;
    const HttpParseResult n = CheckOne(rest, limits, &next);
    if (n.state != HttpParseState::kComplete) break;
    rest.remove_prefix(n.consumed);
  }
  return 0;
}
