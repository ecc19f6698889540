#include "integrator/answer.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string_view>
#include <nlohmann/json.hpp>

#include "core/topk.hpp"

namespace search {
namespace {

using nlohmann::json;

// Scores are float32 on the wire; widening to double prints them exactly (shortest round trip of
// the double, which identifies the float), so clients can compare bit for bit.
double ScoreValue(float s) { return std::isfinite(s) ? static_cast<double>(s) : 0.0; }

double CoveragePercent(const SearchAnswer& a) {
  return a.coverage.documents_total > 0
             ? 100.0 * static_cast<double>(a.coverage.documents) / static_cast<double>(a.coverage.documents_total)
             : (a.shards.total > 0 ? 100.0 * a.query_shards() / a.shards.total : 0.0);
}

// Appends JSON text byte for byte as nlohmann::json::dump(-1, ' ', false, error_handler_t::replace)
// writes the same values (the search and count answers are written with it, without building a
// json tree): keys are given in the order nlohmann's std::map sorts them; numbers through the
// same formatting (integers in decimal, doubles through nlohmann's own to_chars, null when not
// finite); strings of printable ASCII without '"' or '\\' copied between quotes, any other string
// through nlohmann itself (its escapes and its replacement of invalid UTF-8).
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(*out) {}
  // `"name":` (a key that needs no escaping).
  void Key(std::string_view name) {
    out_ += '"';
    out_ += name;
    out_ += "\":";
  }
  void Raw(std::string_view text) { out_ += text; }
  void Raw(char c) { out_ += c; }
  // An integer in decimal (uint64_t or int64_t).
  template <typename T>
  void Integer(T v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out_.append(buf, r.ptr);
  }
  void Uint(uint64_t v) { Integer(v); }
  void Int(int64_t v) { Integer(v); }
  void Bool(bool v) { out_ += v ? "true" : "false"; }
  void Double(double v) {
    if (!std::isfinite(v)) {
      out_ += "null";
      return;
    }
    std::array<char, 64> buf;  // nlohmann's serializer's number buffer
    char* end = nlohmann::detail::to_chars(buf.data(), buf.data() + buf.size(), v);
    out_.append(buf.data(), static_cast<size_t>(end - buf.data()));
  }
  void String(std::string_view s) {
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
        out_ += json(s).dump(-1, ' ', false, json::error_handler_t::replace);
        return;
      }
    }
    out_ += '"';
    out_ += s;
    out_ += '"';
  }

 private:
  std::string& out_;
};

// {"failed","failures":[{"phase","reason","shard"}],"successful","total"}.
void WriteShards(JsonWriter& w, const ShardsSummary& s) {
  w.Raw("{\"failed\":");
  w.Uint(s.failures.size());
  w.Raw(",\"failures\":[");
  for (size_t i = 0; i < s.failures.size(); ++i) {
    const ShardFailure& f = s.failures[i];
    if (i > 0) w.Raw(',');
    w.Raw('{');
    if (f.fetch) w.Raw("\"phase\":\"fetch\",");
    w.Key("reason");
    w.String(f.reason);
    w.Raw(",\"shard\":");
    w.Uint(f.shard);
    w.Raw('}');
  }
  w.Raw("],\"successful\":");
  w.Uint(s.successful);
  w.Raw(",\"total\":");
  w.Uint(s.total);
  w.Raw('}');
}

// {"documents","documents_total","full","percent","shards","shards_total"}.
void WriteCoverage(JsonWriter& w, const SearchAnswer& a) {
  w.Raw("{\"documents\":");
  w.Uint(a.coverage.documents);
  w.Raw(",\"documents_total\":");
  w.Uint(a.coverage.documents_total);
  w.Raw(",\"full\":");
  w.Bool(a.complete());
  w.Raw(",\"percent\":");
  w.Double(CoveragePercent(a));
  w.Raw(",\"shards\":");
  w.Uint(a.query_shards());
  w.Raw(",\"shards_total\":");
  w.Uint(a.shards.total);
  w.Raw('}');
}

// ,"timed_out":..,"took":..,"took_us":..}
void WriteTimes(JsonWriter& w, const SearchAnswer& a) {
  w.Raw(",\"timed_out\":");
  w.Bool(a.timed_out);
  w.Raw(",\"took\":");
  w.Uint(a.took_us / 1000);
  w.Raw(",\"took_us\":");
  w.Uint(a.took_us);
  w.Raw('}');
}

}  // namespace

namespace {

// The best k of `lists` as (list, position) pairs, best first; equal (score, doc) pairs in list
// order. Sorts 16-byte keys, not the hits (each holds strings).
struct HitRef {
  float score;
  uint32_t doc;
  uint32_t list;
  uint32_t at;
};

std::vector<HitRef> BestRefs(const std::vector<std::vector<MergedHit>>& lists, uint32_t k) {
  std::vector<HitRef> refs;
  size_t n = 0;
  for (const auto& l : lists) n += l.size();
  refs.reserve(n);
  for (size_t i = 0; i < lists.size(); ++i)
    for (size_t j = 0; j < lists[i].size(); ++j)
      refs.push_back(HitRef{lists[i][j].score, lists[i][j].doc, static_cast<uint32_t>(i), static_cast<uint32_t>(j)});
  const size_t keep = std::min<size_t>(k, refs.size());
  std::partial_sort(refs.begin(), refs.begin() + static_cast<std::ptrdiff_t>(keep), refs.end(),
                    [](const HitRef& a, const HitRef& b) {
                      const ScoredDoc x{a.doc, a.score}, y{b.doc, b.score};
                      if (RanksBefore(x, y)) return true;
                      if (RanksBefore(y, x)) return false;
                      return a.list != b.list ? a.list < b.list : a.at < b.at;
                    });
  refs.resize(keep);
  return refs;
}

}  // namespace

std::vector<MergedHit> MergeShardHits(const std::vector<std::vector<MergedHit>>& lists, uint32_t k) {
  std::vector<MergedHit> out;
  const std::vector<HitRef> refs = BestRefs(lists, k);
  out.reserve(refs.size());
  for (const HitRef& r : refs) out.push_back(lists[r.list][r.at]);
  return out;
}

std::vector<MergedHit> MergeShardHits(std::vector<std::vector<MergedHit>>&& lists, uint32_t k) {
  std::vector<MergedHit> out;
  const std::vector<HitRef> refs = BestRefs(lists, k);
  out.reserve(refs.size());
  for (const HitRef& r : refs) out.push_back(std::move(lists[r.list][r.at]));
  return out;
}

namespace {

// A hit: {"_doc","_id","_score","_shard","_source_missing"?,"highlight"?:{"contents":[..]}} and,
// when it has one, ,"_source": spliced in last as stored (byte for byte: a client compares it with
// what it indexed). Invalid UTF-8 in external ids and fragments is replaced, not thrown on.
void WriteHit(JsonWriter& w, const MergedHit& h) {
  w.Raw("{\"_doc\":");
  w.Uint(h.doc);
  w.Raw(",\"_id\":");
  w.String(h.external_id);
  w.Raw(",\"_score\":");
  w.Double(ScoreValue(h.score));
  w.Raw(",\"_shard\":");
  w.Uint(h.shard);
  if (!h.source_missing.empty()) {
    w.Raw(",\"_source_missing\":");
    w.String(h.source_missing);
  }
  if (!h.highlights.empty()) {
    w.Raw(",\"highlight\":{\"contents\":[");
    for (size_t i = 0; i < h.highlights.size(); ++i) {
      if (i > 0) w.Raw(',');
      w.String(h.highlights[i]);
    }
    w.Raw("]}");
  }
  if (h.has_source && !h.source.empty()) {
    w.Raw(",\"_source\":");
    w.Raw(h.source);
  }
  w.Raw('}');
}

size_t HitsBytes(const std::vector<MergedHit>& hits) {
  size_t n = 0;
  for (const auto& h : hits) {
    n += 96 + h.external_id.size() + h.source.size() + h.source_missing.size();
    for (const auto& f : h.highlights) n += 4 + f.size();
  }
  return n;
}

}  // namespace

std::string SearchAnswerJson(const SearchAnswer& a) {
  std::string text;
  text.reserve(512 + HitsBytes(a.hits));
  JsonWriter w(&text);
  w.Raw("{\"_shards\":");
  WriteShards(w, a.shards);
  w.Raw(",\"cached\":");
  w.Bool(a.cached);
  w.Raw(",\"coverage\":");
  WriteCoverage(w, a);
  w.Raw(",\"hits\":{\"hits\":[");
  for (size_t i = 0; i < a.hits.size(); ++i) {
    if (i > 0) w.Raw(',');
    WriteHit(w, a.hits[i]);
  }
  w.Raw("],\"max_score\":");
  if (a.hits.empty())
    w.Raw("null");
  else
    w.Double(ScoreValue(a.hits.front().score));
  w.Raw(",\"total\":");
  if (a.total.has_value()) {
    w.Raw(a.query_complete() ? "{\"relation\":\"eq\",\"value\":" : "{\"relation\":\"gte\",\"value\":");
    w.Uint(*a.total);
    w.Raw('}');
  } else {
    w.Uint(a.hits.size());
  }
  w.Raw('}');
  WriteTimes(w, a);
  return text;
}

std::string CountAnswerJson(const SearchAnswer& a) {
  std::string text;
  text.reserve(512);
  JsonWriter w(&text);
  w.Raw("{\"_shards\":");
  WriteShards(w, a.shards);
  w.Raw(",\"cached\":");
  w.Bool(a.cached);
  w.Raw(",\"count\":");
  w.Uint(a.total.value_or(0));
  w.Raw(",\"coverage\":");
  WriteCoverage(w, a);
  WriteTimes(w, a);
  return text;
}

// {"_shards" (with shards),"error":{"reason","type"},"status"}.
std::string ErrorJson(const RequestError& error, const ShardsSummary* shards) {
  std::string text;
  JsonWriter w(&text);
  w.Raw('{');
  if (shards) {
    w.Raw("\"_shards\":");
    WriteShards(w, *shards);
    w.Raw(',');
  }
  w.Raw("\"error\":{\"reason\":");
  w.String(error.reason);
  w.Raw(",\"type\":");
  w.String(error.type);
  w.Raw("},\"status\":");
  w.Int(error.http_status);
  w.Raw('}');
  return text;
}

std::vector<ShardHealthView> MergeLaneHealth(std::vector<std::vector<ShardHealthView>> lanes) {
  if (lanes.empty()) return {};
  std::vector<ShardHealthView> out = std::move(lanes.front());
  for (size_t l = 1; l < lanes.size(); ++l) {
    for (size_t sh = 0; sh < out.size() && sh < lanes[l].size(); ++sh) {
      ShardHealthView& v = out[sh];
      const ShardHealthView& lane = lanes[l][sh];
      for (size_t r = 0; r < v.replica_detail.size() && r < lane.replica_detail.size(); ++r) {
        auto& rep = v.replica_detail[r];
        if (rep.state == "up" && lane.replica_detail[r].state != "up") {
          rep.state = lane.replica_detail[r].state;
          rep.last_error = lane.replica_detail[r].last_error;
        }
      }
      v.replicas_up = std::min(v.replicas_up, lane.replicas_up);
      if (v.state == "up" && lane.state != "up") v.state = lane.state;
      if (v.last_error.empty()) v.last_error = lane.last_error;
    }
  }
  for (ShardHealthView& v : out) {  // up in every lane, replica by replica
    uint32_t up = 0;
    for (const auto& rep : v.replica_detail) up += rep.state == "up";
    if (!v.replica_detail.empty()) v.replicas_up = up;
    if (v.state == "up" && v.replicas_up == 0) v.state = "down";
  }
  return out;
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
