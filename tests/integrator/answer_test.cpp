// The answer's JSON shapes and the shard merge (docs/SCORING.md order) against a brute-force reference.
#include "integrator/answer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>

#include "core/topk.hpp"

namespace search {
namespace {

using nlohmann::json;

TEST(MergeShardHits, EqualsBruteForceOverDisjointShards) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const uint32_t shards = 1 + rng() % 5, k = 1 + rng() % 30;
    std::vector<std::vector<MergedHit>> lists(shards);
    std::vector<ScoredDoc> all;
    for (uint32_t s = 0; s < shards; ++s) {
      // Shard s holds docIDs [s*1000, s*1000+1000); few distinct scores make many ties.
      std::vector<MergedHit> l;
      const uint32_t n = rng() % 40;
      std::vector<uint32_t> docs;
      while (docs.size() < n) {
        uint32_t d = s * 1000 + rng() % 1000;
        if (std::find(docs.begin(), docs.end(), d) == docs.end()) docs.push_back(d);
      }
      for (uint32_t d : docs) {
        const float score = static_cast<float>(rng() % 5) * 0.5f;
        l.push_back(MergedHit{d, score, s, "id" + std::to_string(d)});
        all.push_back(ScoredDoc{d, score});
      }
      std::sort(l.begin(), l.end(), [](const MergedHit& a, const MergedHit& b) {
        return RanksBefore(ScoredDoc{a.doc, a.score}, ScoredDoc{b.doc, b.score});
      });
      if (l.size() > k) l.resize(k);  // a node sends at most k
      lists[s] = std::move(l);
    }
    std::sort(all.begin(), all.end(), RanksBefore);
    if (all.size() > k) all.resize(k);
    const auto merged = MergeShardHits(lists, k);
    ASSERT_EQ(merged.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(merged[i].doc, all[i].doc) << "round " << round << " rank " << i;
      EXPECT_EQ(merged[i].score, all[i].score);
      EXPECT_EQ(merged[i].shard, merged[i].doc / 1000);
      EXPECT_EQ(merged[i].external_id, "id" + std::to_string(merged[i].doc));
    }
  }
}

TEST(SearchAnswerJson, ElasticsearchShape) {
  SearchAnswer a;
  a.took_us = 2500;
  a.timed_out = true;
  a.shards.total = 3;
  a.shards.successful = 2;
  a.shards.failures.push_back({1, "shard 1 did not answer before the deadline"});
  a.hits = {{42, 3.25f, 0, "doc-42"}, {7, 1.0f / 3.0f, 2, "doc-\"7\""}};
  const json j = json::parse(SearchAnswerJson(a));
  EXPECT_EQ(j["took"], 2);
  EXPECT_EQ(j["took_us"], 2500);
  EXPECT_EQ(j["timed_out"], true);
  EXPECT_EQ(j["cached"], false);
  EXPECT_EQ(j["_shards"]["total"], 3);
  EXPECT_EQ(j["_shards"]["successful"], 2);
  EXPECT_EQ(j["_shards"]["failed"], 1);
  EXPECT_EQ(j["_shards"]["failures"][0]["shard"], 1);
  EXPECT_EQ(j["_shards"]["failures"][0]["reason"], "shard 1 did not answer before the deadline");
  EXPECT_EQ(j["hits"]["max_score"].get<double>(), 3.25);
  ASSERT_EQ(j["hits"]["hits"].size(), 2u);
  EXPECT_EQ(j["hits"]["hits"][0]["_id"], "doc-42");
  EXPECT_EQ(j["hits"]["hits"][0]["_doc"], 42);
  EXPECT_EQ(j["hits"]["hits"][0]["_shard"], 0);
  EXPECT_EQ(j["hits"]["hits"][1]["_id"], "doc-\"7\"");
  // The float score survives the round trip exactly.
  EXPECT_EQ(static_cast<float>(j["hits"]["hits"][1]["_score"].get<double>()), 1.0f / 3.0f);
}

TEST(SearchAnswerJson, EmptyAnswerHasNullMaxScoreAndInvalidUtf8IsReplaced) {
  SearchAnswer a;
  a.shards.total = a.shards.successful = 1;
  json j = json::parse(SearchAnswerJson(a));
  EXPECT_TRUE(j["hits"]["max_score"].is_null());
  EXPECT_TRUE(j["hits"]["hits"].empty());
  EXPECT_EQ(j["_shards"]["failed"], 0);
  a.hits = {{1, 1.0f, 0, std::string("bad\xff\xfe")}};
  j = json::parse(SearchAnswerJson(a));  // valid JSON despite the bad bytes
  EXPECT_EQ(j["hits"]["hits"][0]["_doc"], 1);
}

// Documents in hits: _source spliced in byte for byte (spacing, escapes, number spellings kept),
// _source_missing and highlight.contents when present, nothing when not; fetch failures in _shards.
TEST(SearchAnswerJson, SourcesAreSplicedByteForByte) {
  SearchAnswer a;
  a.shards.total = 2;
  a.shards.successful = 1;  // shard 1 answered the query, failed the fetch
  // A reason that spells the placeholder's text: still only text.
  a.shards.failures.push_back({1, "fetch: \"hits\":\"\x01\" odd", /*fetch=*/true});
  a.total = 3;
  const std::string src = "{ \"id\" :\"d\\u00e9\",\"contents\":\"caf\xc3\xa9 \\\"q\\\" \\/\",\"n\":1.50e1, \"a\":[ ] }";
  MergedHit with{1, 2.0f, 0, "d1"};
  with.has_source = true;
  with.source = src;
  with.highlights = {"<em>caf\xc3\xa9</em> &quot;q&quot;"};
  MergedHit failed{2, 1.5f, 1, "d2"};
  failed.source_missing = "fetch failed";
  MergedHit plain{3, 1.0f, 0, "d3"};
  a.hits = {with, failed, plain};
  const std::string text = SearchAnswerJson(a);
  EXPECT_NE(text.find("\"_source\":" + src + "}"), std::string::npos) << text;
  const json j = json::parse(text);
  const json& hits = j["hits"]["hits"];
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0]["_source"], json::parse(src));
  EXPECT_EQ(hits[0]["_id"], "d1");
  EXPECT_EQ(hits[0]["highlight"]["contents"], json({"<em>caf\xc3\xa9</em> &quot;q&quot;"}));
  EXPECT_FALSE(hits[0].contains("_source_missing"));
  EXPECT_EQ(hits[1]["_source_missing"], "fetch failed");
  EXPECT_FALSE(hits[1].contains("_source"));
  EXPECT_FALSE(hits[1].contains("highlight"));
  EXPECT_FALSE(hits[2].contains("_source"));
  EXPECT_FALSE(hits[2].contains("_source_missing"));
  EXPECT_EQ(j["_shards"]["failures"][0]["phase"], "fetch");
  EXPECT_EQ(j["_shards"]["failures"][0]["reason"], "fetch: \"hits\":\"\x01\" odd");
  EXPECT_EQ(j["_shards"]["failed"], 1);
  EXPECT_EQ(j["_shards"]["successful"], 1);  // successful + failed = total, as Elasticsearch's
  EXPECT_EQ(j["coverage"]["shards"], 2);     // the query phase's coverage
  EXPECT_EQ(j["coverage"]["percent"], 100.0);
  // The query phase was complete: the count is exact, the answer is not.
  EXPECT_EQ(j["hits"]["total"]["relation"], "eq");
  EXPECT_EQ(j["coverage"]["full"], false);
  EXPECT_FALSE(a.complete());
  EXPECT_TRUE(a.query_complete());
  a.shards.failures.push_back({0, "shard 0 did not answer"});
  EXPECT_FALSE(a.query_complete());
  EXPECT_EQ(json::parse(SearchAnswerJson(a))["hits"]["total"]["relation"], "gte");
}

TEST(ErrorJson, Shape) {
  json j = json::parse(ErrorJson(RequestError{400, "illegal_argument_exception", "parameter [k] ..."}));
  EXPECT_EQ(j["status"], 400);
  EXPECT_EQ(j["error"]["type"], "illegal_argument_exception");
  EXPECT_EQ(j["error"]["reason"], "parameter [k] ...");
  EXPECT_FALSE(j.contains("_shards"));
  ShardsSummary s{2, 0, {{0, "down"}, {1, "down"}}};
  j = json::parse(ErrorJson(RequestError{503, "search_phase_execution_exception", "all shards failed"}, &s));
  EXPECT_EQ(j["status"], 503);
  EXPECT_EQ(j["_shards"]["failed"], 2);
  EXPECT_EQ(j["_shards"]["successful"], 0);
}

TEST(HealthJson, WaitForStatusIsMetOrA503) {
  EXPECT_EQ(HealthHttpStatus("green", "green"), 200);
  EXPECT_EQ(HealthHttpStatus("green", "yellow"), 200);
  EXPECT_EQ(HealthHttpStatus("yellow", "yellow"), 200);
  EXPECT_EQ(HealthHttpStatus("yellow", "green"), 503);
  EXPECT_EQ(HealthHttpStatus("red", "yellow"), 503);
  EXPECT_EQ(HealthHttpStatus("red", "red"), 200);
  EXPECT_EQ(HealthHttpStatus("green", "Green"), 400);
  EXPECT_EQ(HealthHttpStatus("green", ""), 400);
}

TEST(HealthJson, GreenYellowRed) {
  std::vector<ShardHealthView> v(3);
  for (uint32_t i = 0; i < 3; ++i) {
    v[i].shard = i;
    v[i].endpoint = "tcp://127.0.0.1:" + std::to_string(7000 + i);
    v[i].state = "up";
    v[i].last_seen_ms = 10;
  }
  EXPECT_EQ(HealthStatus(v), "green");
  v[1].state = "down";
  v[1].last_seen_ms = -1;
  EXPECT_EQ(HealthStatus(v), "yellow");
  json j = json::parse(HealthJson(v, ""));
  EXPECT_EQ(j["status"], "yellow");
  ASSERT_EQ(j["shards"].size(), 3u);
  EXPECT_EQ(j["shards"][1]["state"], "down");
  EXPECT_TRUE(j["shards"][1]["last_seen_ms"].is_null());
  EXPECT_EQ(j["shards"][2]["endpoint"], "tcp://127.0.0.1:7002");
  v[0].state = v[2].state = "down";
  EXPECT_EQ(HealthStatus(v), "red");
  EXPECT_EQ(HealthStatus({}), "red");
  // An analyzer problem makes the cluster red whatever the shards say.
  for (auto& s : v) s.state = "up";
  j = json::parse(HealthJson(v, "shards disagree on the analyzer"));
  EXPECT_EQ(j["status"], "red");
  EXPECT_EQ(j["error"], "shards disagree on the analyzer");
}

// Each lane connects to every replica on its own: a replica is up only where every lane has it up,
// so that green means a search on any loop reaches every shard.
TEST(HealthJson, LanesMergeToWhatEveryLaneReaches) {
  auto lane = [](std::vector<std::vector<const char*>> replicas) {
    std::vector<ShardHealthView> v;
    for (uint32_t sh = 0; sh < replicas.size(); ++sh) {
      ShardHealthView s;
      s.shard = sh;
      s.replicas = static_cast<uint32_t>(replicas[sh].size());
      for (const char* st : replicas[sh]) {
        s.replica_detail.push_back({"tcp://r" + std::to_string(s.replica_detail.size()), st, "", ""});
        s.replicas_up += std::string(st) == "up";
      }
      s.state = s.replicas_up > 0 ? "up" : "down";
      v.push_back(s);
    }
    return v;
  };
  EXPECT_TRUE(MergeLaneHealth({}).empty());
  // One lane: as it is.
  auto one = MergeLaneHealth({lane({{"up"}, {"down"}})});
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].state, "up");
  EXPECT_EQ(one[1].state, "down");
  // Lane 1 has not reached shard 0 yet: down, though lane 0 has it.
  auto m = MergeLaneHealth({lane({{"up"}, {"up"}}), lane({{"down"}, {"up"}})});
  EXPECT_EQ(m[0].state, "down");
  EXPECT_EQ(m[0].replicas_up, 0u);
  EXPECT_EQ(m[1].state, "up");
  EXPECT_EQ(HealthStatus(m), "yellow");
  // Replicas: up only where both lanes have them; the shard stays up while one replica is.
  m = MergeLaneHealth({lane({{"up", "up", "down"}}), lane({{"up", "down", "up"}})});
  EXPECT_EQ(m[0].state, "up");
  EXPECT_EQ(m[0].replicas_up, 1u);
  EXPECT_EQ(m[0].replica_detail[0].state, "up");
  EXPECT_EQ(m[0].replica_detail[1].state, "down");
  EXPECT_EQ(m[0].replica_detail[2].state, "down");
  m = MergeLaneHealth({lane({{"up", "down"}}), lane({{"down", "up"}})});
  EXPECT_EQ(m[0].state, "down");
  EXPECT_EQ(HealthStatus(m), "red");
  m = MergeLaneHealth({lane({{"up"}, {"up"}}), lane({{"up"}, {"up"}}), lane({{"up"}, {"up"}})});
  EXPECT_EQ(HealthStatus(m), "green");
}

// track_total_hits: hits.total is {value, relation}; "gte" when the answer is partial. The count
// shape is Elasticsearch's _count.
TEST(AnswerJson, TotalsAndCounts) {
  SearchAnswer a;
  a.shards.total = 3;
  a.shards.successful = 3;
  a.hits = {MergedHit{1, 2.0f, 0, "d1"}};
  json j = json::parse(SearchAnswerJson(a));
  EXPECT_EQ(j["hits"]["total"], 1);  // no count: the hits returned
  a.total = 123456789012ull;
  j = json::parse(SearchAnswerJson(a));
  EXPECT_EQ(j["hits"]["total"]["value"], 123456789012ull);
  EXPECT_EQ(j["hits"]["total"]["relation"], "eq");
  a.shards.successful = 2;
  a.shards.failures.push_back(ShardFailure{2, "timed out"});
  j = json::parse(SearchAnswerJson(a));
  EXPECT_EQ(j["hits"]["total"]["relation"], "gte");
  j = json::parse(CountAnswerJson(a));
  EXPECT_EQ(j["count"], 123456789012ull);
  EXPECT_EQ(j["_shards"]["failed"], 1);
  EXPECT_EQ(j["coverage"]["full"], false);
  EXPECT_FALSE(j.contains("hits"));
}


// The answers as an nlohmann tree dumped (how answer.cpp wrote them before it wrote the text
// itself): SearchAnswerJson and CountAnswerJson must give these bytes exactly.
namespace reference {

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

std::string HitsJson(const std::vector<MergedHit>& hits) {
  std::string out = "[";
  for (const auto& h : hits) {
    json o = {{"_id", h.external_id}, {"_score", ScoreValue(h.score)}, {"_shard", h.shard}, {"_doc", h.doc}};
    if (!h.source_missing.empty()) o["_source_missing"] = h.source_missing;
    if (!h.highlights.empty()) o["highlight"] = {{"contents", h.highlights}};
    std::string t = o.dump(-1, ' ', false, json::error_handler_t::replace);
    if (h.has_source && !h.source.empty()) {
      t.pop_back();
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

std::string SearchAnswerJson(const SearchAnswer& a) {
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

}  // namespace reference

// Random strings: printable ASCII, quotes and backslashes, control bytes, DEL, valid UTF-8 of 2-4
// bytes, and invalid UTF-8 (lone continuation bytes, truncated sequences, overlongs, 0xff).
std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {
      "a", "Z", "0", " ", "doc-", "<em>", "</em>", "&quot;", "\"", "\\", "/", "\x01", "\x1f", "\n", "\t", "\r",
      "\b", "\f", "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\x9f\xbf", "\x80", "\xbf", "\xc3",
      "\xe2\x82", "\xf0\x9f\x98", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xfe", "\xff",
      std::string("\0", 1), "\"hits\":\"\x01\"", "\\u0001"};
  std::string s;
  const int n = static_cast<int>(rng() % 6 == 0 ? 0 : rng() % 12);
  for (int i = 0; i < n; ++i) {
    if (rng() % 3 == 0)
      s += static_cast<char>(rng() % 256);
    else
      s += kPieces[rng() % kPieces.size()];
  }
  return s;
}

float RandomScore(std::mt19937& rng) {
  switch (rng() % 10) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return std::numeric_limits<float>::quiet_NaN();
    case 3: return rng() % 2 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
    case 4: return std::numeric_limits<float>::denorm_min() * static_cast<float>(1 + rng() % 1000);
    case 5: return std::numeric_limits<float>::max() / static_cast<float>(1 + rng() % 1000);
    case 6: return static_cast<float>(rng() % 100);  // integral: "7.0"
    case 7: return std::ldexp(static_cast<float>(rng() % 1000 + 1), static_cast<int>(rng() % 80) - 40);
    default: {
      uint32_t bits = static_cast<uint32_t>(rng());
      float f;
      std::memcpy(&f, &bits, sizeof(f));
      return f;  // any float, NaN and inf included
    }
  }
}

SearchAnswer RandomAnswer(std::mt19937& rng) {
  SearchAnswer a;
  a.took_us = rng() % 4 == 0 ? rng() % 1000 : (static_cast<uint64_t>(rng()) << (rng() % 32));
  a.timed_out = rng() % 4 == 0;
  a.cached = rng() % 4 == 0;
  a.shards.total = rng() % 6;
  a.shards.successful = a.shards.total > 0 ? rng() % (a.shards.total + 1) : 0;
  const uint32_t failures = rng() % 3 == 0 ? rng() % 4 : 0;
  for (uint32_t i = 0; i < failures; ++i)
    a.shards.failures.push_back(ShardFailure{static_cast<uint32_t>(rng() % 8), RandomText(rng), rng() % 2 == 0});
  if (rng() % 4 != 0) {
    a.coverage.documents_total = rng() % 3 == 0 ? rng() % 10 : static_cast<uint64_t>(rng()) << (rng() % 30);
    a.coverage.documents = a.coverage.documents_total > 0 ? rng() % (a.coverage.documents_total + 1) : 0;
  }
  if (rng() % 2) a.total = rng() % 3 == 0 ? 0 : static_cast<uint64_t>(rng()) << (rng() % 32);
  const uint32_t hits = rng() % 5 == 0 ? 0 : rng() % 12;
  for (uint32_t i = 0; i < hits; ++i) {
    MergedHit h{static_cast<uint32_t>(rng()), RandomScore(rng), static_cast<uint32_t>(rng() % 300), RandomText(rng)};
    if (rng() % 3 == 0) {
      h.has_source = true;
      h.source = rng() % 4 == 0 ? "" : "{\"id\":\"" + std::to_string(i) + "\", \"n\" : 1.50e1}";
    }
    if (rng() % 4 == 0) h.source_missing = rng() % 2 ? "not stored" : RandomText(rng);
    if (rng() % 3 == 0) {
      const uint32_t frags = rng() % 4;
      for (uint32_t f = 0; f < frags; ++f) h.highlights.push_back(RandomText(rng));
    }
    a.hits.push_back(std::move(h));
  }
  return a;
}

TEST(AnswerJson, EqualsNlohmannDumpByteForByte) {
  std::mt19937 rng(47);
  for (int round = 0; round < 20000; ++round) {
    const SearchAnswer a = RandomAnswer(rng);
    ASSERT_EQ(SearchAnswerJson(a), reference::SearchAnswerJson(a)) << "round " << round;
    ASSERT_EQ(CountAnswerJson(a), reference::CountAnswerJson(a)) << "round " << round;
    const RequestError error{static_cast<int>(rng() % 600) - 50, RandomText(rng), RandomText(rng)};
    ASSERT_EQ(ErrorJson(error), reference::ErrorJson(error, nullptr)) << "round " << round;
    ASSERT_EQ(ErrorJson(error, &a.shards), reference::ErrorJson(error, &a.shards)) << "round " << round;
  }
  // Every float's widened double through nlohmann's formatting (exponent forms, "1.0", "-0.0"):
  // one hit, scores spread over the exponent range.
  SearchAnswer a;
  a.hits.resize(1);
  for (int e = -149; e <= 127; ++e)
    for (float m : {1.0f, 1.5f, 1.1f, 9.999999f, 3.3333333f}) {
      a.hits[0].score = std::ldexp(m, e);
      ASSERT_EQ(SearchAnswerJson(a), reference::SearchAnswerJson(a)) << a.hits[0].score;
      a.hits[0].score = -a.hits[0].score;
      ASSERT_EQ(SearchAnswerJson(a), reference::SearchAnswerJson(a)) << a.hits[0].score;
    }
}

// The moving merge gives what the copying one gives, and takes the hits out of the lists.
TEST(MergeShardHits, MovingEqualsCopying) {
  std::mt19937 rng(9);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::vector<MergedHit>> lists(1 + rng() % 4);
    for (auto& l : lists) {
      const uint32_t n = rng() % 20;
      for (uint32_t i = 0; i < n; ++i) {
        MergedHit h{static_cast<uint32_t>(rng() % 50), static_cast<float>(rng() % 4), static_cast<uint32_t>(rng() % 4),
                    "id-" + std::to_string(rng())};
        h.highlights = {std::string(rng() % 40, 'x')};
        l.push_back(std::move(h));
      }
    }
    const uint32_t k = rng() % 30;
    const auto copied = MergeShardHits(lists, k);
    // Equal (score, doc) pairs keep list order: the first list's hit first.
    for (size_t i = 1; i < copied.size(); ++i)
      ASSERT_FALSE(RanksBefore(ScoredDoc{copied[i].doc, copied[i].score},
                               ScoredDoc{copied[i - 1].doc, copied[i - 1].score}));
    auto moved_from = lists;
    const auto moved = MergeShardHits(std::move(moved_from), k);
    ASSERT_EQ(moved, copied) << "round " << round;
  }
}

}  // namespace
}  // namespace search
