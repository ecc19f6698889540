#include "integrator/http_request_parser.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>

namespace search {
namespace {

constexpr size_t kNpos = std::string_view::npos;
// A chunk-size line (size, extensions, CRLF) longer than this is an error.
constexpr size_t kMaxChunkLineBytes = 4096;

constexpr std::array<bool, 256> MakeTcharTable() {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kTchar = MakeTcharTable();

bool IsTchar(char c) { return kTchar[static_cast<unsigned char>(c)]; }
// Request-target bytes: anything visible (obs-text included, as common servers do); no SP, CTL or DEL.
bool IsTargetChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u != 0x7f;
}
// Field value bytes: VCHAR, obs-text, SP and HT; no other CTL (bare CR, NUL, ...) or DEL.
bool IsValueChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}
// True when every byte of v IsValueChar: one pass with no early exit, which the compiler turns into
// wide compares (a header value, such as an Authorization one, is read at vector width).
bool AllValueChars(std::string_view v) {
  unsigned bad = 0;
  for (char c : v) bad |= static_cast<unsigned>(!IsValueChar(c));
  return bad == 0;
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
char ToLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ToLower(a[i]) != ToLower(b[i])) return false;
  return true;
}

std::string_view TrimOws(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

// Calls f(element) for each non-empty, OWS-trimmed element of a comma-separated list.
template <typename F>
void ForEachListElement(std::string_view list, F&& f) {
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view element = TrimOws(list.substr(0, comma));
    if (!element.empty()) f(element);
    if (comma == kNpos) return;
    list.remove_prefix(comma + 1);
  }
}

// min(n, from + len) without overflow; from <= n.
size_t CapEnd(size_t n, size_t from, size_t len) { return n - from > len ? from + len : n; }

size_t SaturatingAdd(size_t a, size_t b) {
  return a > std::numeric_limits<size_t>::max() - b ? std::numeric_limits<size_t>::max() : a + b;
}

// Index of the first '\n' in buf[from, end), or kNpos.
size_t FindLf(std::string_view buf, size_t from, size_t end) {
  if (from >= end) return kNpos;
  const void* p = std::memchr(buf.data() + from, '\n', end - from);
  return p == nullptr ? kNpos : static_cast<size_t>(static_cast<const char*>(p) - buf.data());
}

// The line buf[from, lf) without the CR before its LF.
std::string_view LineContent(std::string_view buf, size_t from, size_t lf) {
  size_t e = lf;
  if (e > from && buf[e - 1] == '\r') --e;
  return buf.substr(from, e - from);
}

HttpParseResult Incomplete() { return {}; }

HttpParseResult Error(int status, std::string reason) {
  HttpParseResult r;
  r.state = HttpParseState::kError;
  r.status = status;
  r.reason = std::move(reason);
  return r;
}

// "HTTP/" 1*DIGIT "." 1*DIGIT: a version, just not one we speak (505 rather than 400).
bool LooksLikeHttpVersion(std::string_view v) {
  if (v.size() < 8 || v.substr(0, 5) != "HTTP/") return false;
  v.remove_prefix(5);
  size_t i = 0;
  while (i < v.size() && IsDigit(v[i])) ++i;
  if (i == 0 || i == v.size() || v[i] != '.') return false;
  size_t j = i + 1;
  while (j < v.size() && IsDigit(v[j])) ++j;
  return j > i + 1 && j == v.size();
}

// Splits a (non-empty) header line into its name and trimmed value; returns nullptr or an error reason.
const char* SplitHeaderLine(std::string_view line, std::string_view* name, std::string_view* value) {
  if (line[0] == ' ' || line[0] == '\t') return "obsolete header line folding is not accepted";
  size_t i = 0;
  while (i < line.size() && IsTchar(line[i])) ++i;
  if (i == line.size() || line[i] != ':')
    return line.find(':') == kNpos ? "header line without ':'" : "invalid header field name";
  if (i == 0) return "empty header field name";
  const std::string_view v = TrimOws(line.substr(i + 1));
  if (!AllValueChars(v)) return "invalid character in header field value";
  *name = line.substr(0, i);
  *value = v;
  return nullptr;
}

// Walks a chunked body starting at buf[p]. kComplete: *end is the index past the final CRLF of the
// trailer section. Appends the data to *body when it is not null (the caller does that once, when the
// verdict is known to be kComplete).
HttpParseResult WalkChunked(std::string_view buf, size_t p, const HttpRequestLimits& limits, std::string* body,
                            size_t* end) {
  const size_t n = buf.size();
  const size_t body_start = p;
  const size_t max_overhead = SaturatingAdd(limits.max_body_bytes, limits.max_header_bytes);
  size_t total = 0;  // data bytes so far, <= max_body_bytes
  while (true) {
    const size_t lf = FindLf(buf, p, CapEnd(n, p, kMaxChunkLineBytes));
    if (lf == kNpos) {
      if (n - p >= kMaxChunkLineBytes) return Error(400, "chunk-size line too long");
      return Incomplete();
    }
    const std::string_view line = LineContent(buf, p, lf);
    uint64_t size = 0;
    size_t i = 0;
    for (; i < line.size(); ++i) {
      const int h = HexValue(line[i]);
      if (h < 0) break;
      if (size > (std::numeric_limits<uint64_t>::max() >> 4)) return Error(400, "chunk size overflows");
      size = (size << 4) | static_cast<uint64_t>(h);
    }
    if (i == 0) return Error(400, "invalid chunk size");
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] != ';') return Error(400, "invalid chunk size");
    p = lf + 1;
    if (size == 0) break;  // last-chunk
    if (size > limits.max_body_bytes - total)
      return Error(413, "chunked request body larger than " + std::to_string(limits.max_body_bytes) + " bytes");
    if ((p - body_start) - total > max_overhead)
      return Error(413, "chunked framing overhead larger than " + std::to_string(max_overhead) + " bytes");
    if (n - p < size) return Incomplete();
    if (body != nullptr) body->append(buf.substr(p, static_cast<size_t>(size)));
    total += static_cast<size_t>(size);
    p += static_cast<size_t>(size);
    if (p == n) return Incomplete();
    if (buf[p] == '\n') {
      ++p;
    } else if (buf[p] == '\r') {
      if (p + 1 == n) return Incomplete();
      if (buf[p + 1] != '\n') return Error(400, "missing CRLF after chunk data");
      p += 2;
    } else {
      return Error(400, "missing CRLF after chunk data");
    }
  }
  // Trailer section: field lines, ignored, up to an empty line.
  const size_t trailer_start = p;
  while (true) {
    const size_t lf = FindLf(buf, p, CapEnd(n, trailer_start, limits.max_header_bytes));
    if (lf == kNpos) {
      if (n - trailer_start >= limits.max_header_bytes)
        return Error(431, "trailer section larger than " + std::to_string(limits.max_header_bytes) + " bytes");
      return Incomplete();
    }
    const bool empty = LineContent(buf, p, lf).empty();
    p = lf + 1;
    if (empty) break;
  }
  *end = p;
  HttpParseResult r;
  r.state = HttpParseState::kComplete;
  return r;
}

}  // namespace

void ParseQueryString(std::string_view query, std::multimap<std::string, std::string>* params) {
  while (true) {
    const size_t amp = query.find('&');
    const std::string_view piece = query.substr(0, amp);
    if (!piece.empty()) {
      const size_t eq = piece.find('=');
      if (eq == kNpos)
        params->emplace(PercentDecode(piece, true), std::string());
      else
        params->emplace(PercentDecode(piece.substr(0, eq), true), PercentDecode(piece.substr(eq + 1), true));
    }
    if (amp == kNpos) return;
    query.remove_prefix(amp + 1);
  }
}


const std::string* HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return &value;
  return nullptr;
}

std::string PercentDecode(std::string_view s, bool plus_as_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else if (c == '+' && plus_as_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

HttpParseResult ParseHttpRequest(std::string_view buf, const HttpRequestLimits& limits, HttpRequest* out) {
  const size_t n = buf.size();

  // Empty lines before the request line (RFC 9112 §2.2), bounded so that a stream of CRLFs is an error.
  size_t p = 0;
  while (p < n) {
    if (buf[p] == '\n') {
      ++p;
    } else if (buf[p] == '\r' && p + 1 < n && buf[p + 1] == '\n') {
      p += 2;
    } else if (buf[p] == '\r' && p + 1 == n) {
      return Incomplete();
    } else {
      break;
    }
    if (p > limits.max_header_bytes) return Error(400, "too many empty lines before the request line");
  }
  if (p == n) return Incomplete();

  // The header section runs from `start` through the blank line's LF; that LF must lie before header_end_cap.
  const size_t start = p;
  const size_t header_end_cap = CapEnd(n, start, limits.max_header_bytes);
  const auto need_more = [&]() {
    // The section, when it ends, will be longer than the bytes we have: certainly too long once those are.
    if (n - start >= limits.max_header_bytes)
      return Error(431, "request header section larger than " + std::to_string(limits.max_header_bytes) + " bytes");
    return Incomplete();
  };

  // Request line: method SP request-target SP HTTP-version CRLF.
  while (p < n && IsTchar(buf[p])) ++p;
  if (p == n) return need_more();
  if (p == start || buf[p] != ' ') return Error(400, "malformed request line: invalid method");
  const std::string_view method = buf.substr(start, p - start);
  const size_t target_start = ++p;
  if (p < n && buf[p] != '/' && buf[p] != '*')
    return Error(400, "malformed request line: the request-target must start with '/' or be '*'");
  const size_t target_cap = CapEnd(n, target_start, SaturatingAdd(limits.max_uri_bytes, 1));
  while (p < target_cap && IsTargetChar(buf[p])) ++p;
  if (p - target_start > limits.max_uri_bytes)
    return Error(414, "request-target longer than " + std::to_string(limits.max_uri_bytes) + " bytes");
  if (p == n) return need_more();
  if (buf[p] != ' ') return Error(400, "malformed request line");
  const std::string_view target = buf.substr(target_start, p - target_start);
  if (target[0] == '*' && target.size() != 1)
    return Error(400, "malformed request line: the request-target must start with '/' or be '*'");
  const size_t version_start = ++p;
  size_t lf = FindLf(buf, version_start, header_end_cap);
  if (lf == kNpos) return need_more();
  const std::string_view version = LineContent(buf, version_start, lf);
  int version_minor = 1;
  if (version == "HTTP/1.1") {
    version_minor = 1;
  } else if (version == "HTTP/1.0") {
    version_minor = 0;
  } else if (LooksLikeHttpVersion(version)) {
    return Error(505, "HTTP version not supported (only HTTP/1.0 and HTTP/1.1)");
  } else {
    return Error(400, "malformed request line: invalid HTTP version");
  }
  p = lf + 1;

  // Header fields: validated here, copied out only once the whole request is known to be complete.
  const size_t headers_start = p;
  bool has_te = false, te_chunked_last = false, has_cl = false, conn_close = false, conn_keep_alive = false;
  size_t te_codings = 0;
  std::string_view cl_digits;  // Content-Length without leading zeros
  while (true) {
    lf = FindLf(buf, p, header_end_cap);
    if (lf == kNpos) return need_more();
    const std::string_view line = LineContent(buf, p, lf);
    p = lf + 1;
    if (line.empty()) break;
    std::string_view name, value;
    if (const char* why = SplitHeaderLine(line, &name, &value)) return Error(400, why);
    if (IEquals(name, "transfer-encoding")) {
      has_te = true;
      ForEachListElement(value, [&](std::string_view coding) {
        ++te_codings;
        te_chunked_last = IEquals(coding, "chunked");
      });
    } else if (IEquals(name, "content-length")) {
      if (value.empty()) return Error(400, "invalid Content-Length");
      for (char c : value)
        if (!IsDigit(c)) return Error(400, "invalid Content-Length");
      const size_t nonzero = value.find_first_not_of('0');
      const std::string_view digits = nonzero == kNpos ? std::string_view("0") : value.substr(nonzero);
      if (has_cl && digits != cl_digits) return Error(400, "conflicting Content-Length headers");
      has_cl = true;
      cl_digits = digits;
    } else if (IEquals(name, "connection")) {
      ForEachListElement(value, [&](std::string_view option) {
        if (IEquals(option, "close")) conn_close = true;
        if (IEquals(option, "keep-alive")) conn_keep_alive = true;
      });
    }
  }
  const size_t headers_end = p;

  // Message body framing (RFC 9112 §6.3).
  size_t body_length = 0;
  size_t end = headers_end;
  if (has_te) {
    if (has_cl) return Error(400, "both Transfer-Encoding and Content-Length");
    if (te_codings == 0) return Error(400, "empty Transfer-Encoding");
    if (te_codings != 1 || !te_chunked_last) return Error(501, "unsupported transfer coding (only chunked)");
    HttpParseResult chunked = WalkChunked(buf, headers_end, limits, nullptr, &end);
    if (chunked.state == HttpParseState::kIncomplete) chunked.headers_complete = true;
    if (chunked.state != HttpParseState::kComplete) return chunked;
  } else if (has_cl) {
    uint64_t v = 0;
    bool too_large = cl_digits.size() > 19;  // 19 digits fit in uint64_t
    if (!too_large) {
      for (char c : cl_digits) v = v * 10 + static_cast<uint64_t>(c - '0');
      too_large = v > limits.max_body_bytes;
    }
    if (too_large) return Error(413, "request body larger than " + std::to_string(limits.max_body_bytes) + " bytes");
    body_length = static_cast<size_t>(v);
    if (n - headers_end < body_length) {
      HttpParseResult r;  // kIncomplete
      r.headers_complete = true;
      return r;
    }
    end = headers_end + body_length;
  }

  if (out != nullptr) {
    out->method.assign(method);
    out->target.assign(target);
    const size_t question = target.find('?');
    out->path = PercentDecode(target.substr(0, question), false);
    out->params.clear();
    if (question != kNpos) ParseQueryString(target.substr(question + 1), &out->params);
    out->version_minor = version_minor;
    out->headers.clear();
    for (size_t q = headers_start;;) {
      const size_t line_end = FindLf(buf, q, headers_end);
      const std::string_view line = LineContent(buf, q, line_end);
      q = line_end + 1;
      if (line.empty()) break;
      std::string_view name, value;
      SplitHeaderLine(line, &name, &value);  // validated above
      std::string lower(name);
      for (char& c : lower) c = ToLower(c);
      out->headers.emplace_back(std::move(lower), std::string(value));
    }
    out->body.clear();
    if (has_te) {
      size_t unused = 0;
      WalkChunked(buf, headers_end, limits, &out->body, &unused);
    } else {
      out->body.assign(buf.substr(headers_end, body_length));
    }
    if (version_minor == 1)
      out->keep_alive = !conn_close;
    else
      out->keep_alive = conn_keep_alive && !conn_close && !has_te;
  }

  HttpParseResult r;
  r.state = HttpParseState::kComplete;
  r.consumed = end;
  return r;
}

}  // namespace search
