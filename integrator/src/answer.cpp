#include "integrator/answer.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/topk.hpp"

namespace search {
namespace {

using nlohmann::json;

bool HitRanksBefore(const MergedHit& a, const MergedHit& b) {
  return RanksBefore(ScoredDoc{a.doc, a.score}, ScoredDoc{b.doc, b.score});
}

json ShardsJson(const ShardsSummary& s) {
  json failures = json::array();
  for (const auto& f : s.failures) {
    failures.push_back({{"shard", f.shard}, {"reason", f.reason}});
    if (f.fetch) failures.back()["phase"] = "fetch";
  }
  return {{"total", s.total},
          {"successful", s.successful},
          {"failed", s.failures.size()},
          {"failures", std::move(failures)}};
}

// Scores are float32 on the wire; widening to double prints them exactly (shortest round trip of
// the double, which identifies the float), so clients can compare bit for bit.
double ScoreValue(float s) { return std::isfinite(s) ? static_cast<double>(s) : 0.0; }

json CoverageJson(const SearchAnswer& a) {
  const uint32_t shards = a.query_shards();
  return {{"shards", shards},
          {"shards_total", a.shards.total},
          {"documents", a.coverage.documents},
          {"documents_total", a.coverage.documents_total},
          {"percent", a.coverage.documents_total > 0
                          ? 100.0 * static_cast<double>(a.coverage.documents) /
                                static_cast<double>(a.coverage.documents_total)
                          : (a.shards.total > 0 ? 100.0 * shards / a.shards.total : 0.0)},
          {"full", a.complete()}};
}

}  // namespace

std::vector<MergedHit> MergeShardHits(const std::vector<std::vector<MergedHit>>& lists, uint32_t k) {
  std::vector<MergedHit> all;
  size_t n = 0;
  for (const auto& l : lists) n += l.size();
  all.reserve(n);
  for (const auto& l : lists) all.insert(all.end(), l.begin(), l.end());
  const size_t keep = std::min<size_t>(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(), HitRanksBefore);
  all.resize(keep);
  return all;
}

namespace {

// The hits array as JSON text: each hit's fields through nlohmann, then its _source spliced in as
// stored (byte for byte: a client compares it with what it indexed).
std::string HitsJson(const std::vector<MergedHit>& hits) {
  std::string out = "[";
  for (const auto& h : hits) {
    json o = {{"_id", h.external_id}, {"_score", ScoreValue(h.score)}, {"_shard", h.shard}, {"_doc", h.doc}};
    if (!h.source_missing.empty()) o["_source_missing"] = h.source_missing;
    if (!h.highlights.empty()) o["highlight"] = {{"contents", h.highlights}};
    // Replace invalid UTF-8 in external ids and fragments instead of throwing.
    std::string t = o.dump(-1, ' ', false, json::error_handler_t::replace);
    if (h.has_source && !h.source.empty()) {
      t.pop_back();  // the object's '}'
      t += ",\"_source\":";
      t += h.source;
      t += '}';
    }
    if (out.size() > 1) out += ',';
    out += t;
  }
  out += ']';
  return out;
}

}  // namespace

std::string SearchAnswerJson(const SearchAnswer& a) {
  // hits.hits is a placeholder string here, replaced by HitsJson's text after the dump: the only
  // `"hits":"\u0001"` of the text (any string holding those bytes is dumped with its quotes escaped).
  const json hits = "\x01";
  json out = {{"took", a.took_us / 1000},
              {"took_us", a.took_us},
              {"timed_out", a.timed_out},
              {"cached", a.cached},
              {"_shards", ShardsJson(a.shards)},
              {"coverage", CoverageJson(a)},
              {"hits",
               {{"total", a.total.has_value()
                              ? json{{"value", *a.total}, {"relation", a.query_complete() ? "eq" : "gte"}}
                              : json(a.hits.size())},
                {"max_score", a.hits.empty() ? json(nullptr) : json(ScoreValue(a.hits.front().score))},
                {"hits", hits}}}};
  std::string text = out.dump(-1, ' ', false, json::error_handler_t::replace);
  static constexpr std::string_view kPlaceholder = "\"hits\":\"\\u0001\"";
  const size_t at = text.find(kPlaceholder);
  if (at != std::string::npos) text.replace(at + 7, kPlaceholder.size() - 7, HitsJson(a.hits));
  return text;
}

std::string CountAnswerJson(const SearchAnswer& a) {
  json out = {{"count", a.total.value_or(0)},
              {"took", a.took_us / 1000},
              {"took_us", a.took_us},
              {"timed_out", a.timed_out},
              {"cached", a.cached},
              {"_shards", ShardsJson(a.shards)},
              {"coverage", CoverageJson(a)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ErrorJson(const RequestError& error, const ShardsSummary* shards) {
  json out = {{"error", {{"type", error.type}, {"reason", error.reason}}}, {"status", error.http_status}};
  if (shards) out["_shards"] = ShardsJson(*shards);
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string HealthStatus(const std::vector<ShardHealthView>& shards) {
  size_t up = 0;
  for (const auto& s : shards) up += s.state == "up";
  if (!shards.empty() && up == shards.size()) return "green";
  return up > 0 ? "yellow" : "red";
}

std::string HealthStatus(const std::vector<ShardHealthView>& shards, const std::string& analyzer_error) {
  return analyzer_error.empty() ? HealthStatus(shards) : "red";
}

int HealthHttpStatus(const std::string& status, const std::string& wait_for_status) {
  auto rank = [](const std::string& s) { return s == "green" ? 2 : s == "yellow" ? 1 : s == "red" ? 0 : -1; };
  const int want = rank(wait_for_status);
  if (want < 0) return 400;
  return rank(status) >= want ? 200 : 503;
}

std::string HealthJson(const std::vector<ShardHealthView>& shards, const std::string& analyzer_error) {
  json list = json::array();
  for (const auto& s : shards) {
    json j = {{"shard", s.shard},
              {"endpoint", s.endpoint},
              {"state", s.state},
              {"last_seen_ms", s.last_seen_ms < 0 ? json(nullptr) : json(s.last_seen_ms)},
              {"node_state", s.node_state},
              {"in_flight", s.in_flight},
              {"queued", s.queued},
              {"doc_begin", s.doc_begin},
              {"doc_end", s.doc_end},
              {"gpu", s.gpu},
              {"replicas", s.replicas},
              {"replicas_up", s.replicas_up}};
    json reps = json::array();
    for (const auto& r : s.replica_detail) {
      json rj = {{"endpoint", r.endpoint}, {"state", r.state}, {"node_state", r.node_state}};
      if (!r.last_error.empty()) rj["last_error"] = r.last_error;
      reps.push_back(std::move(rj));
    }
    j["replica_detail"] = std::move(reps);
    if (!s.last_error.empty()) j["last_error"] = s.last_error;
    list.push_back(std::move(j));
  }
  json out = {{"status", HealthStatus(shards, analyzer_error)}, {"shards", std::move(list)}};
  if (!analyzer_error.empty()) out["error"] = analyzer_error;
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace search
