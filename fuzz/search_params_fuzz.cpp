// Fuzz target: the integrator's /search parameters (integrator/search_params.hpp). The input is,
// at once, the query string of a GET /search (split and URL-decoded by ParseQueryString, the HTTP
// front's own decoder, integrator/http_request_parser.hpp) and the JSON body of a POST /search. An accepted
// request must satisfy every documented limit and survive a round trip (re-encoded as a query
// string, and for bodies as JSON, it parses to the same parameters); a refused one is a 400 with
// a known error type and a bounded reason. A POST body may not repeat a field (checked with an
// independent SAX pass). A body with "query" (the Elasticsearch DSL) is kept whole, unparsed here.
// The input is also a POST /count body.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "core/url_encode.hpp"
#include "fuzz_check.hpp"
#include "integrator/http_request_parser.hpp"
#include "integrator/search_params.hpp"

namespace {

using search::ParsedSearch;
using search::SearchParams;

bool SameParams(const SearchParams& a, const SearchParams& b) {
  return a.q == b.q && a.k == b.k && a.mode == b.mode && a.timeout_ms == b.timeout_ms &&
         a.track_total_hits == b.track_total_hits && a.count_only == b.count_only && a.is_dsl == b.is_dsl &&
         a.dsl == b.dsl;
}

std::string Describe(const ParsedSearch& p) {
  if (!p.ok()) return p.error->type + ": " + p.error->reason;
  return "q=" + p.params.q.substr(0, 64) + " k=" + std::to_string(p.params.k) +
         " mode=" + std::string(search::QueryModeName(p.params.mode)) +
         " timeout_ms=" + (p.params.timeout_ms ? std::to_string(*p.params.timeout_ms) : "-");
}

void CheckOutcome(const ParsedSearch& p) {
  if (!p.ok()) {
    FUZZ_CHECK(p.error->http_status == 400);
    FUZZ_CHECK(p.error->type == "illegal_argument_exception" || p.error->type == "parse_exception");
    FUZZ_CHECK(!p.error->reason.empty());
    // Bad input is echoed bounded (names and values cut at 64 bytes, parser messages at 200),
    // so a huge parameter does not make a huge error.
    FUZZ_CHECK_MSG(p.error->reason.size() <= 512, p.error->reason.substr(0, 512));
    return;
  }
  const SearchParams& s = p.params;
  FUZZ_CHECK(s.q.size() <= search::kMaxQueryBytes);
  FUZZ_CHECK(s.k <= search::kMaxK && (s.k >= 1 || s.track_total_hits));
  FUZZ_CHECK(s.is_dsl || s.dsl.empty());
  FUZZ_CHECK(s.mode == search::QueryMode::kAnd || s.mode == search::QueryMode::kOr ||
             s.mode == search::QueryMode::kAndOr);
  FUZZ_CHECK(!s.timeout_ms || (*s.timeout_ms >= 1 && *s.timeout_ms <= search::kMaxTimeoutMs));
}

// Top-level object keys given more than once, found with nlohmann's SAX interface (the DOM parser
// keeps the last value of a repeated key).
class DuplicateKeyFinder : public nlohmann::json::json_sax_t {
 public:
  bool found() const { return found_; }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1 && !keys_.insert(k).second) found_ = true;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override { return false; }

 private:
  int depth_ = 0;
  bool found_ = false;
  std::set<std::string> keys_;
};

bool HasDuplicateTopLevelKey(std::string_view body) {
  DuplicateKeyFinder finder;
  try {
    nlohmann::json::sax_parse(body, &finder);
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return finder.found();
}

ParsedSearch ParseQueryString(const std::string& query) {
  std::multimap<std::string, std::string> params;
  search::ParseQueryString(query, &params);
  return search::ParseSearchQuery(params);
}

// An accepted request, written back as a query string with every parameter explicit, parses to
// the same parameters.
void CheckQueryRoundTrip(const SearchParams& s) {
  std::string query = "q=" + search::UrlEncode(s.q) + "&k=" + std::to_string(s.k) +
                      "&mode=" + std::string(search::QueryModeName(s.mode)) +
                      "&track_total_hits=" + (s.track_total_hits ? "true" : "false");
  if (s.timeout_ms) query += "&timeout_ms=" + std::to_string(*s.timeout_ms);
  const ParsedSearch back = ParseQueryString(query);
  FUZZ_CHECK_MSG(back.ok() && SameParams(back.params, s), Describe(back));
}

void CheckBodyRoundTrip(const SearchParams& s) {
  nlohmann::json body = {{"q", s.q}, {"k", s.k}, {"mode", std::string(search::QueryModeName(s.mode))},
                         {"track_total_hits", s.track_total_hits}};
  if (s.timeout_ms) body["timeout_ms"] = *s.timeout_ms;
  const ParsedSearch back = search::ParseSearchBody(body.dump());
  FUZZ_CHECK_MSG(back.ok() && SameParams(back.params, s), Describe(back));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  const ParsedSearch get = ParseQueryString(text);
  CheckOutcome(get);
  if (get.ok()) CheckQueryRoundTrip(get.params);

  // No exception may escape (nlohmann throws out_of_range, not parse_error, for "1e999").
  const ParsedSearch post = search::ParseSearchBody(text);
  CheckOutcome(post);
  // Repeated parameters are errors (search_params.hpp), in a body as in a query string.
  FUZZ_CHECK_MSG(!post.ok() || !HasDuplicateTopLevelKey(text), Describe(post));
  if (post.ok() && post.params.is_dsl) {
    // A DSL body is kept whole for ParseSearchDsl (fuzzed in query_parser's target).
    FUZZ_CHECK(post.params.dsl == text);
  } else if (post.ok()) {
    CheckQueryRoundTrip(post.params);
    CheckBodyRoundTrip(post.params);  // q came from JSON, so it is valid UTF-8 and dumps as is
  }
  // The count endpoints: the same rules, with count_only set and no k, size or track_total_hits.
  const ParsedSearch count_body = search::ParseCountBody(text);
  CheckOutcome(count_body);
  if (count_body.ok()) {
    FUZZ_CHECK(count_body.params.count_only && !count_body.params.track_total_hits);
    FUZZ_CHECK(count_body.params.k == search::kDefaultK);
  }
  return 0;
}
