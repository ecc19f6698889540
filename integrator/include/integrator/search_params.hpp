// Parsing and validation of the integrator's search and count parameters, from a GET query string
// (already URL-decoded into name/value pairs) or a POST JSON body. Every bad parameter yields a
// RequestError (HTTP 400, Elasticsearch-style type and a reason naming the parameter); nothing is
// guessed or silently dropped: unknown and repeated parameters are errors too.
// /search and /_search (GET parameters, or a POST body {"q": ..., ...} of the same names):
//   q                 required, the query syntax (core/query_parser.hpp ParseQuerySyntax), at most
//                     kMaxQueryBytes bytes; parsed at search time with the cluster's analyzer
//   k (or size)       optional, an integer in 1..kMaxK (default 10); 0 only with track_total_hits
//                     (the count alone); GET: decimal digits only
//   mode              optional, and | or | andor (default and): what a bare clause is
//   timeout_ms        optional, an integer in 1..kMaxTimeoutMs (default: the integrator's --timeout-ms)
//   track_total_hits  optional, true | false (default false): also count the matches exactly
//   _source           optional, true | false (default true): each hit carries its stored source
//   highlight         optional, true | false (default false): each hit carries highlight.contents
//                     (POST: also Elasticsearch's {"fields": {"contents": {}}})
// POST /search and /_search with a body that has a "query" field: Elasticsearch's query DSL subset
//   (core/query_parser.hpp ParseSearchDsl: query, size, track_total_hits, _source, highlight), kept
//   as text here and parsed at search time with the analyzer; mode and timeout_ms are not DSL fields.
// /count and /_count: GET q, mode, timeout_ms; POST {"query": ...} (the DSL's query alone) or
//   {"q", "mode", "timeout_ms"}. The answer is the exact number of matches (a count never fetches:
//   _source and highlight are not its parameters).
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
  std::string q;     // the query syntax (when !is_dsl)
  std::string dsl;   // the DSL body, whole (when is_dsl): query, size and track_total_hits in it
  bool is_dsl = false;
  uint32_t k = kDefaultK;  // 0 only with track_total_hits (set from the DSL's size at search time)
  QueryMode mode = QueryMode::kAnd;
  std::optional<uint32_t> timeout_ms;
  bool track_total_hits = false;  // count the matches exactly (hits.total {value, relation})
  bool count_only = false;        // /count, /_count: the count alone ({"count": N})
  bool source = true;             // hits carry _source (the fetch phase); the DSL's _source overrides
  bool highlight = false;         // hits carry highlight.contents; the DSL's highlight overrides
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

// GET /search?q=...&k=...&mode=...&timeout_ms=...&track_total_hits=...
ParsedSearch ParseSearchQuery(const std::multimap<std::string, std::string>& params);
// POST /search with {"q": "...", "k": 10, "mode": "and", "timeout_ms": 500, "track_total_hits": true},
// or a DSL body {"query": {...}, "size": 10, "track_total_hits": true}.
ParsedSearch ParseSearchBody(std::string_view body);
// GET /count?q=...&mode=...&timeout_ms=...
ParsedSearch ParseCountQuery(const std::multimap<std::string, std::string>& params);
// POST /count with {"query": {...}} or {"q": "...", "mode": "and", "timeout_ms": 500}.
ParsedSearch ParseCountBody(std::string_view body);

}  // namespace search
