#include "http_response.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace search::cli {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ContainsToken(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (IEquals(Trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// Decimal (base 10) or hexadecimal (base 16) digits only, no sign, at most `max`.
bool ParseNumber(std::string_view s, int base, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    if (v > max) return false;
  }
  *out = v;
  return true;
}

}  // namespace

HttpResponseParser::State HttpResponseParser::Fail(std::string why) {
  error_ = std::move(why);
  keep_alive_ = false;
  return state_ = State::kError;
}

HttpResponseParser::State HttpResponseParser::Feed(std::string_view bytes) {
  if (state_ != State::kIncomplete) return state_;
  buf_.append(bytes);
  return Parse();
}

HttpResponseParser::State HttpResponseParser::FeedEof() {
  if (state_ != State::kIncomplete) return state_;
  if (have_headers_ && framing_ == Framing::kUntilClose) {
    body_.assign(buf_, pos_, std::string::npos);
    buf_.clear();
    pos_ = 0;
    keep_alive_ = false;
    return state_ = State::kComplete;
  }
  if (buf_.empty() && !have_headers_) return state_;  // nothing under way
  return Fail("the connection closed in the middle of a response");
}

HttpResponseParser::State HttpResponseParser::Reset() {
  buf_.erase(0, pos_);
  pos_ = 0;
  have_headers_ = false;
  framing_ = Framing::kLength;
  length_ = 0;
  state_ = State::kIncomplete;
  status_ = 0;
  keep_alive_ = true;
  body_.clear();
  error_.clear();
  return buf_.empty() ? state_ : Parse();
}

bool HttpResponseParser::ParseHeaders(std::string_view head) {
  // Status line: HTTP/1.x SSS reason
  const size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ' || (line.size() > 12 && line[12] != ' ')) {
    Fail("malformed status line");
    return false;
  }
  const bool http10 = line[7] == '0';
  uint64_t code = 0;
  if (!ParseNumber(line.substr(9, 3), 10, 999, &code) || code < 100) {
    Fail("malformed status code");
    return false;
  }
  status_ = static_cast<int>(code);
  keep_alive_ = !http10;
  bool have_length = false, chunked = false;
  std::string_view rest = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
  while (!rest.empty()) {
    const size_t e = rest.find("\r\n");
    const std::string_view h = rest.substr(0, e);
    rest = e == std::string_view::npos ? std::string_view() : rest.substr(e + 2);
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      Fail("malformed header line");
      return false;
    }
    const std::string_view name = h.substr(0, colon), value = Trim(h.substr(colon + 1));
    if (IEquals(name, "content-length")) {
      uint64_t n = 0;
      if (!ParseNumber(value, 10, kMaxBodyBytes, &n) || (have_length && n != length_)) {
        Fail("bad Content-Length");
        return false;
      }
      have_length = true;
      length_ = n;
    } else if (IEquals(name, "transfer-encoding")) {
      chunked = ContainsToken(value, "chunked");
      if (!chunked) {
        Fail("unsupported Transfer-Encoding");
        return false;
      }
    } else if (IEquals(name, "connection")) {
      if (ContainsToken(value, "close")) keep_alive_ = false;
      if (ContainsToken(value, "keep-alive")) keep_alive_ = keep_alive_ || http10;
    }
  }
  if (chunked) {
    framing_ = Framing::kChunked;
  } else if (have_length) {
    framing_ = Framing::kLength;
  } else if (status_ == 204 || status_ == 304 || status_ < 200) {
    framing_ = Framing::kLength;
    length_ = 0;
  } else {
    framing_ = Framing::kUntilClose;
    keep_alive_ = false;
  }
  return true;
}

HttpResponseParser::State HttpResponseParser::ParseChunked() {
  // Parses from pos_ (the body's start) each time; bodies here are small.
  size_t p = pos_;
  std::string body;
  for (;;) {
    const size_t eol = buf_.find("\r\n", p);
    if (eol == std::string::npos) {
      if (buf_.size() - p > 1024) return Fail("malformed chunk size line");
      return state_;
    }
    std::string_view size_line(buf_.data() + p, eol - p);
    size_line = Trim(size_line.substr(0, size_line.find(';')));  // chunk extensions ignored
    uint64_t n = 0;
    if (!ParseNumber(size_line, 16, kMaxBodyBytes, &n)) return Fail("malformed chunk size");
    p = eol + 2;
    if (n == 0) {
      // Trailers, then the empty line.
      for (;;) {
        const size_t e = buf_.find("\r\n", p);
        if (e == std::string::npos) {
          if (buf_.size() - p > kMaxHeaderBytes) return Fail("trailers too long");
          return state_;
        }
        const bool empty = e == p;
        p = e + 2;
        if (empty) break;
      }
      body_ = std::move(body);
      pos_ = p;
      return state_ = State::kComplete;
    }
    if (body.size() + n > kMaxBodyBytes) return Fail("response body too large");
    if (buf_.size() - p < n + 2) return state_;
    body.append(buf_, p, n);
    p += n;
    if (buf_.compare(p, 2, "\r\n") != 0) return Fail("chunk not followed by CRLF");
    p += 2;
  }
}

HttpResponseParser::State HttpResponseParser::Parse() {
  if (!have_headers_) {
    const size_t end = buf_.find("\r\n\r\n", pos_);
    if (end == std::string::npos) {
      if (buf_.size() - pos_ > kMaxHeaderBytes) return Fail("response headers too long");
      if (buf_.size() - pos_ >= 5 && buf_.compare(pos_, 5, "HTTP/") != 0) return Fail("malformed status line");
      return state_;
    }
    if (end - pos_ > kMaxHeaderBytes) return Fail("response headers too long");
    if (!ParseHeaders(std::string_view(buf_).substr(pos_, end - pos_))) return state_;
    have_headers_ = true;
    pos_ = end + 4;
    if (status_ < 200 && status_ != 101) {
      // An interim response (100 Continue): skip it and parse the final one.
      buf_.erase(0, pos_);
      pos_ = 0;
      have_headers_ = false;
      status_ = 0;
      keep_alive_ = true;
      return Parse();
    }
  }
  switch (framing_) {
    case Framing::kLength:
      if (buf_.size() - pos_ < length_) return state_;
      body_.assign(buf_, pos_, length_);
      pos_ += length_;
      return state_ = State::kComplete;
    case Framing::kChunked:
      return ParseChunked();
    case Framing::kUntilClose:
      if (buf_.size() - pos_ > kMaxBodyBytes) return Fail("response body too large");
      return state_;
  }
  return state_;
}

namespace {

// SAX events of a search answer: tracks the depth and the last key, and keeps the two fields.
class AnswerSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit AnswerSax(SearchAnswerFlags* out) : out_(out) {}
  bool null() override { return Scalar(); }
  bool boolean(bool v) override {
    if (depth_ == 1 && key_ == "timed_out") out_->timed_out = v;
    return Scalar();
  }
  bool number_integer(number_integer_t v) override { return Number(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Number(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Number(v); }
  bool string(string_t&) override { return Scalar(); }
  bool binary(binary_t&) override { return Scalar(); }
  bool start_object(std::size_t) override {
    if (depth_ == 1 && key_ == "_shards") shards_depth_ = depth_ + 1;
    ++depth_;
    key_.clear();
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool end_object() override {
    if (depth_ == shards_depth_) shards_depth_ = 0;
    --depth_;
    key_.clear();
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    key_.clear();
    return true;
  }
  bool end_array() override {
    --depth_;
    key_.clear();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool Scalar() {
    key_.clear();
    return true;
  }
  bool Number(double v) {
    if (shards_depth_ != 0 && depth_ == shards_depth_ && key_ == "failed") out_->shards_failed = v;
    return Scalar();
  }

  SearchAnswerFlags* out_;
  int depth_ = 0;
  int shards_depth_ = 0;  // the depth inside the top-level "_shards" object; 0 outside it
  std::string key_;       // the key of the value being read (empty in arrays)
};

}  // namespace

SearchAnswerFlags ReadSearchAnswer(std::string_view body) {
  SearchAnswerFlags flags;
  AnswerSax sax(&flags);
  const bool ok = nlohmann::json::sax_parse(body.begin(), body.end(), &sax);
  if (!ok) return SearchAnswerFlags{};
  flags.valid = true;
  return flags;
}

}  // namespace search::cli
