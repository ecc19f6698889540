#include "integrator/search_params.hpp"

#include <charconv>
#include <set>
#include <nlohmann/json.hpp>

#include "core/query_parser.hpp"

namespace search {
namespace {

constexpr const char* kIllegalArgument = "illegal_argument_exception";
constexpr const char* kParseException = "parse_exception";

ParsedSearch Fail(std::string type, std::string reason) {
  ParsedSearch r;
  r.error = RequestError{400, std::move(type), std::move(reason)};
  return r;
}

// Strict decimal: optional leading '-', digits only, no spaces, no '+', no exponent.
std::optional<int64_t> ParseInteger(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string Quote(std::string_view s) {
  // Bounded echo of a bad value, so a huge parameter does not make a huge error.
  constexpr size_t kMaxEcho = 64;
  std::string out = "'";
  out.append(s.substr(0, kMaxEcho));
  if (s.size() > kMaxEcho) out += "...";
  out += "'";
  return out;
}

std::optional<RequestError> CheckQ(const std::string& q) {
  if (q.size() > kMaxQueryBytes)
    return RequestError{400, kIllegalArgument,
                        "parameter [q] is too long: " + std::to_string(q.size()) + " bytes (at most " +
                            std::to_string(kMaxQueryBytes) + ")"};
  return std::nullopt;
}

// 0 passes here: it needs track_total_hits (Finish).
std::optional<RequestError> CheckK(int64_t k, const std::string& name) {
  if (k < 0 || k > kMaxK)
    return RequestError{400, kIllegalArgument,
                        "parameter [" + name + "] must be an integer between 1 and " + std::to_string(kMaxK) +
                            " (0 with track_total_hits=true) (got " + std::to_string(k) + ")"};
  return std::nullopt;
}

enum class Endpoint : uint8_t { kSearch, kCount };

bool Known(Endpoint ep, const std::string& name) {
  if (name == "q" || name == "mode" || name == "timeout_ms") return true;
  return ep == Endpoint::kSearch && (name == "k" || name == "size" || name == "track_total_hits" ||
                                     name == "_source" || name == "highlight");
}

const char* KnownList(Endpoint ep) {
  return ep == Endpoint::kSearch ? "q, k, size, mode, timeout_ms, track_total_hits, _source, highlight"
                                 : "q, mode, timeout_ms";
}

// The checks that span parameters, once all are read.
ParsedSearch Finish(ParsedSearch out, Endpoint ep, bool have_q, bool have_k, bool have_size, const char* what) {
  const std::string kind = what;
  if (!have_q) return Fail(kIllegalArgument, "missing required " + kind + " [q]");
  if (have_k && have_size) return Fail(kIllegalArgument, kind + "s [k] and [size] are the same: give one");
  if (out.params.k == 0 && !out.params.track_total_hits)
    return Fail(kIllegalArgument, kind + " [" + std::string(have_size ? "size" : "k") +
                                      "] may be 0 only with track_total_hits=true (the count alone)");
  out.params.count_only = ep == Endpoint::kCount;
  return out;
}

std::optional<RequestError> CheckTimeout(int64_t t) {
  if (t < 1 || t > kMaxTimeoutMs)
    return RequestError{400, kIllegalArgument,
                        "parameter [timeout_ms] must be an integer between 1 and " + std::to_string(kMaxTimeoutMs) +
                            " (got " + std::to_string(t) + ")"};
  return std::nullopt;
}

std::optional<RequestError> SetMode(std::string_view name, SearchParams* p) {
  auto mode = ParseQueryMode(name);
  if (!mode.ok())
    return RequestError{400, kIllegalArgument, "parameter [mode] must be one of and, or, andor (got " + Quote(name) + ")"};
  p->mode = *mode;
  return std::nullopt;
}

}  // namespace

namespace {

ParsedSearch ParseQueryParams(const std::multimap<std::string, std::string>& params, Endpoint ep) {
  ParsedSearch out;
  bool have_q = false, have_k = false, have_size = false;
  for (auto it = params.begin(); it != params.end(); it = params.upper_bound(it->first)) {
    const std::string& name = it->first;
    if (params.count(name) > 1)
      return Fail(kIllegalArgument, "parameter [" + name.substr(0, 64) + "] given more than once");
  }
  for (const auto& [name, value] : params) {
    if (!Known(ep, name)) {
      return Fail(kIllegalArgument, "unrecognized parameter [" + std::string(name.substr(0, 64)) + "] (known: " +
                                        KnownList(ep) + ")");
    }
    if (name == "q") {
      if (auto e = CheckQ(value)) return Fail(e->type, e->reason);
      out.params.q = value;
      have_q = true;
    } else if (name == "k" || name == "size") {
      auto k = ParseInteger(value);
      if (!k) return Fail(kIllegalArgument, "parameter [" + name + "] must be an integer (got " + Quote(value) + ")");
      if (auto e = CheckK(*k, name)) return Fail(e->type, e->reason);
      out.params.k = static_cast<uint32_t>(*k);
      (name == "k" ? have_k : have_size) = true;
    } else if (name == "mode") {
      if (auto e = SetMode(value, &out.params)) return Fail(e->type, e->reason);
    } else if (name == "timeout_ms") {
      auto t = ParseInteger(value);
      if (!t) return Fail(kIllegalArgument, "parameter [timeout_ms] must be an integer (got " + Quote(value) + ")");
      if (auto e = CheckTimeout(*t)) return Fail(e->type, e->reason);
      out.params.timeout_ms = static_cast<uint32_t>(*t);
    } else {  // track_total_hits, _source, highlight
      if (value != "true" && value != "false")
        return Fail(kIllegalArgument, "parameter [" + name + "] must be true or false (got " + Quote(value) + ")");
      const bool on = value == "true";
      bool& field = name == "_source"     ? out.params.source
                    : name == "highlight" ? out.params.highlight
                                          : out.params.track_total_hits;
      field = on;
    }
  }
  return Finish(std::move(out), ep, have_q, have_k, have_size, "parameter");
}

ParsedSearch ParseBody(std::string_view body, Endpoint ep) {
  using nlohmann::json;
  ParsedSearch out;
  json doc;
  std::set<std::string> top_keys;
  std::string repeated;
  try {
    // nlohmann's parser and destructor are iterative, so deep nesting cannot overflow the stack;
    // the body's size is bounded by the HTTP server's payload limit. The callback refuses a
    // repeated top-level field (json::parse would keep the last), as GET refuses a repeated
    // parameter.
    doc = json::parse(body.begin(), body.end(), [&](int depth, json::parse_event_t event, json& parsed) {
      if (depth == 1 && event == json::parse_event_t::key && repeated.empty()) {
        const std::string key = parsed.get<std::string>();
        if (!top_keys.insert(key).second) repeated = key;
      }
      return true;
    });
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    std::string what = e.what();
    if (what.size() > 200) what = what.substr(0, 200) + "...";
    return Fail(kParseException, "request body is not valid JSON: " + what);
  }
  if (!repeated.empty()) return Fail(kIllegalArgument, "field [" + repeated.substr(0, 64) + "] given more than once");
  if (!doc.is_object()) return Fail(kParseException, "request body must be a JSON object");
  if (doc.contains("query")) {
    // The DSL: parsed whole, with the analyzer, at search time (ParseSearchDsl names what it refuses).
    if (ep == Endpoint::kCount) {
      for (const auto& [name, value] : doc.items())
        if (name != "query")
          return Fail(kIllegalArgument, "unrecognized field [" + name.substr(0, 64) + "] (a _count body with a "
                                        "query takes nothing else)");
    }
    out.params.is_dsl = true;
    out.params.dsl = std::string(body);
    out.params.count_only = ep == Endpoint::kCount;
    return out;
  }
  bool have_q = false, have_k = false, have_size = false;
  for (const auto& [name, value] : doc.items()) {
    if (!Known(ep, name)) {
      return Fail(kIllegalArgument, "unrecognized field [" + name.substr(0, 64) + "] (known: " + KnownList(ep) +
                                        "; or an Elasticsearch query DSL body with [query])");
    }
    if (name == "q") {
      if (!value.is_string()) return Fail(kIllegalArgument, "field [q] must be a string");
      const auto& q = value.get_ref<const std::string&>();
      if (auto e = CheckQ(q)) return Fail(e->type, e->reason);
      out.params.q = q;
      have_q = true;
    } else if (name == "k" || name == "size") {
      if (!value.is_number_integer()) return Fail(kIllegalArgument, "field [" + name + "] must be an integer");
      const int64_t k = value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX}
                            ? INT64_MAX
                            : value.get<int64_t>();
      if (auto e = CheckK(k, name)) return Fail(e->type, e->reason);
      out.params.k = static_cast<uint32_t>(k);
      (name == "k" ? have_k : have_size) = true;
    } else if (name == "mode") {
      if (!value.is_string()) return Fail(kIllegalArgument, "field [mode] must be a string");
      if (auto e = SetMode(value.get_ref<const std::string&>(), &out.params)) return Fail(e->type, e->reason);
    } else if (name == "timeout_ms") {
      if (!value.is_number_integer()) return Fail(kIllegalArgument, "field [timeout_ms] must be an integer");
      const int64_t t = value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX}
                            ? INT64_MAX
                            : value.get<int64_t>();
      if (auto e = CheckTimeout(t)) return Fail(e->type, e->reason);
      out.params.timeout_ms = static_cast<uint32_t>(t);
    } else if (name == "highlight") {  // true | false | Elasticsearch's {"fields": {"contents": {}}}
      if (value.is_boolean()) {
        out.params.highlight = value.get<bool>();
      } else {
        auto on = ParseHighlightDsl(value.dump());
        if (!on.ok()) return Fail(kIllegalArgument, "field [highlight]: " + on.status().message());
        out.params.highlight = *on;
      }
    } else {  // track_total_hits, _source
      if (!value.is_boolean()) return Fail(kIllegalArgument, "field [" + name + "] must be true or false");
      (name == "_source" ? out.params.source : out.params.track_total_hits) = value.get<bool>();
    }
  }
  return Finish(std::move(out), ep, have_q, have_k, have_size, "field");
}

}  // namespace

ParsedSearch ParseSearchQuery(const std::multimap<std::string, std::string>& params) {
  return ParseQueryParams(params, Endpoint::kSearch);
}
ParsedSearch ParseSearchBody(std::string_view body) { return ParseBody(body, Endpoint::kSearch); }
ParsedSearch ParseCountQuery(const std::multimap<std::string, std::string>& params) {
  return ParseQueryParams(params, Endpoint::kCount);
}
ParsedSearch ParseCountBody(std::string_view body) { return ParseBody(body, Endpoint::kCount); }

}  // namespace search
