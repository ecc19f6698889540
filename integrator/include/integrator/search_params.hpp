// Parsing and validation of the integrator's /search parameters, from a GET query string
// (already URL-decoded into name/value pairs) or a POST JSON body. Every bad parameter yields a
// RequestError (HTTP 400, Elasticsearch-style type and a reason naming the parameter); nothing is
// guessed or silently dropped: unknown and repeated parameters are errors too.
//   q           required, a string of at most kMaxQueryBytes bytes
//   k           optional, an integer in 1..kMaxK (default 10); GET: decimal digits only
//   mode        optional, and | or | andor (default and)
//   timeout_ms  optional, an integer in 1..kMaxTimeoutMs (default: the integrator's --timeout-ms)
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/query.hpp"

namespace search {

inline constexpr size_t kMaxQueryBytes = size_t{64} << 10;
inline constexpr uint32_t kMaxTimeoutMs = 60000;
inline constexpr uint32_t kDefaultK = 10;

struct SearchParams {
  std::string q;
  uint32_t k = kDefaultK;
  QueryMode mode = QueryMode::kAnd;
  std::optional<uint32_t> timeout_ms;
};

// An error answer: HTTP status, Elasticsearch-like error type and a human-readable reason.
struct RequestError {
  int http_status = 400;
  std::string type;    // "illegal_argument_exception", "parse_exception", ...
  std::string reason;
};

struct ParsedSearch {
  SearchParams params;
  std::optional<RequestError> error;
  bool ok() const { return !error.has_value(); }
};

// GET /search?q=...&k=...&mode=...&timeout_ms=...
ParsedSearch ParseSearchQuery(const std::multimap<std::string, std::string>& params);
// POST /search with {"q": "...", "k": 10, "mode": "and", "timeout_ms": 500}.
ParsedSearch ParseSearchBody(std::string_view body);

}  // namespace search
