// The answer's JSON shapes and the shard merge (docs/SCORING.md order) against a brute-force reference.
#include "integrator/answer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

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

}  // namespace
}  // namespace search
