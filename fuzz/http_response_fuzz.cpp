// Fuzz target: the load generator's HTTP/1.1 response parser (tools/searchctl/http_response.hpp),
// which reads whatever a server (or something posing as one) sends `searchctl loadgen`, and
// ReadSearchAnswer, which reads each answer's JSON body. The input is the byte stream of one
// connection, up to its end (EOF). Checked, beyond "no crash, no sanitizer report":
//  - the responses read with the bytes fed whole, fed one byte at a time (inputs up to 1 KiB), and
//    fed in pieces whose sizes come from the input itself are the same (status, body, keep-alive,
//    state), and so is the final state after FeedEof;
//  - a complete response has a status of 100 to 999 and a body within kMaxBodyBytes; an error has a
//    non-empty reason and never keeps the connection;
//  - ReadSearchAnswer: valid for every body nlohmann's DOM accepts; on that body as the DOM writes it
//    back, timed_out exactly when the top level's "timed_out" is true and shards_failed the top-level
//    "_shards"."failed" when that is a number (else 0).
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "http_response.hpp"

namespace {

using search::cli::HttpResponseParser;
using State = HttpResponseParser::State;

struct Seen {
  State state = State::kIncomplete;
  int status = 0;
  std::string body;
  bool keep_alive = false;
  bool operator==(const Seen&) const = default;
};

void CheckResponse(const HttpResponseParser& p) {
  if (p.state() == State::kComplete) {
    FUZZ_CHECK(p.status() >= 100 && p.status() <= 999);
    FUZZ_CHECK(p.body().size() <= HttpResponseParser::kMaxBodyBytes);
  } else if (p.state() == State::kError) {
    FUZZ_CHECK(!p.error().empty());
    FUZZ_CHECK(!p.keep_alive());
  }
}

// The flags nlohmann's DOM gives `doc`.
search::cli::SearchAnswerFlags DomFlags(const nlohmann::json& doc) {
  search::cli::SearchAnswerFlags f;
  f.valid = true;
  if (!doc.is_object()) return f;
  if (auto it = doc.find("timed_out"); it != doc.end() && it->is_boolean()) f.timed_out = it->get<bool>();
  if (auto it = doc.find("_shards"); it != doc.end() && it->is_object())
    if (auto failed = it->find("failed"); failed != it->end() && failed->is_number())
      f.shards_failed = failed->get<double>();
  return f;
}

void CheckAnswerFlags(const std::string& body) {
  const search::cli::SearchAnswerFlags flags = search::cli::ReadSearchAnswer(body);
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  // The DOM parser also refuses numbers out of a double's range (1e999), which the SAX pass takes.
  if (doc.is_discarded()) {
    if (flags.valid) FUZZ_CHECK_MSG(nlohmann::json::accept(body), body.substr(0, 200));
    return;
  }
  FUZZ_CHECK_MSG(flags.valid, body.substr(0, 200));
  // The fields, on the body as the DOM writes it back (no repeated keys, which a server does not
  // send and whose "last value" the two readers may see differently).
  const std::string canonical = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const search::cli::SearchAnswerFlags back = search::cli::ReadSearchAnswer(canonical);
  const search::cli::SearchAnswerFlags want = DomFlags(nlohmann::json::parse(canonical));
  FUZZ_CHECK_MSG(back.valid && back.timed_out == want.timed_out && back.shards_failed == want.shards_failed,
                 canonical.substr(0, 200));
}

// Feeds `pieces` in turn, then EOF; returns every response completed and the final state.
std::vector<Seen> Run(const std::vector<std::string_view>& pieces) {
  std::vector<Seen> out;
  HttpResponseParser p;
  auto drain = [&] {
    // A complete response, then the next one from what is left (bounded: each takes bytes).
    for (int i = 0; i < 64 && p.state() == State::kComplete; ++i) {
      CheckResponse(p);
      out.push_back({p.state(), p.status(), p.body(), p.keep_alive()});
      if (!p.keep_alive()) return false;  // the load generator closes the connection here
      p.Reset();
    }
    CheckResponse(p);
    return p.state() != State::kError;
  };
  for (std::string_view piece : pieces) {
    p.Feed(piece);
    if (!drain()) {
      out.push_back({p.state(), p.status(), p.body(), p.keep_alive()});
      return out;
    }
  }
  p.FeedEof();
  drain();
  out.push_back({p.state(), p.status(), p.body(), p.keep_alive()});
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view wire(reinterpret_cast<const char*>(data), size);
  const std::vector<Seen> whole = Run({wire});

  if (size <= 1024) {
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < size; ++i) bytes.push_back(wire.substr(i, 1));
    FUZZ_CHECK(Run(bytes) == whole);
  }
  // Pieces of 1 to 64 bytes, sizes taken from the input's bytes in turn.
  std::vector<std::string_view> pieces;
  for (size_t at = 0, i = 0; at < size; ++i) {
    const size_t n = std::min<size_t>(size - at, 1 + data[i % size] % 64);
    pieces.push_back(wire.substr(at, n));
    at += n;
  }
  FUZZ_CHECK(Run(pieces) == whole);

  for (const Seen& s : whole)
    if (s.state == State::kComplete) CheckAnswerFlags(s.body);
  CheckAnswerFlags(std::string(wire));
  return 0;
}
