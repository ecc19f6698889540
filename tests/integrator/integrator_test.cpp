// Integrator over fake nodes: the analyzer learned from pongs (and refused when shards disagree),
// canonical terms on the wire, merge, andor decided globally, the result cache, partial answers,
// 503 and 429.
#include "integrator/integrator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "fake_node.hpp"
#include "index_store/manifest.hpp"

namespace search {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using testing::AnswerWith;
using testing::FakeNode;

IntegratorOptions Options(std::vector<std::string> shards) {
  IntegratorOptions o;
  o.shards = std::move(shards);
  o.default_timeout_ms = 1000;
  o.fanout.ping_interval = 50ms;
  o.fanout.reconnect_ivl_ms = 20;
  return o;
}

bool WaitReady(const Integrator& in, std::chrono::milliseconds limit = 5s) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (json::parse(in.HealthJson())["status"] == "green") return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

SearchParams Params(std::string q, QueryMode mode = QueryMode::kOr, uint32_t k = 10) {
  SearchParams p;
  p.q = std::move(q);
  p.mode = mode;
  p.k = k;
  return p;
}

TEST(Integrator, MergesShardsInDesignOrderAndSendsCanonicalTerms) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}, {1, 1.0f, "a1"}}), 2);
  FakeNode b(1, AnswerWith(1, {{700, 3.0f, "b700"}, {600, 2.0f, "b600"}}), 2);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_TRUE(WaitReady(**in));
  auto r = (*in)->Search(Params("Zebra apple  ZEBRA, mango", QueryMode::kOr, 3));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["timed_out"], false);
  EXPECT_EQ(j["cached"], false);
  EXPECT_EQ(j["_shards"]["successful"], 2);
  ASSERT_EQ(j["hits"]["hits"].size(), 3u);
  // Score ties go to the smaller docID: 5 (3.0) before 700 (3.0), then 600 (2.0).
  EXPECT_EQ(j["hits"]["hits"][0]["_id"], "a5");
  EXPECT_EQ(j["hits"]["hits"][1]["_id"], "b700");
  EXPECT_EQ(j["hits"]["hits"][1]["_shard"], 1);
  EXPECT_EQ(j["hits"]["hits"][2]["_doc"], 600);
  EXPECT_EQ(j["hits"]["max_score"], 3.0);
  ASSERT_EQ(a.requests().size(), 1u);
  EXPECT_EQ(a.requests()[0].terms, (std::vector<std::string>{"apple", "mango", "zebra"}));
  EXPECT_EQ(a.requests()[0].k, 3u);
  EXPECT_EQ(a.requests()[0].mode, QueryMode::kOr);
  EXPECT_GT(a.requests()[0].deadline_unix_micros, 0);
}

TEST(Integrator, AnalyzerComesFromThePongs) {
  FakeNode n(0, AnswerWith(0, {}));
  ShardHealthMsg h = n.health();
  AnalyzerConfig english;
  english.stem_language = "english";
  h.analyzer_json = english.ToJson();
  n.set_health(h);
  auto in = Integrator::Start(Options({n.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  ASSERT_EQ((*in)->Search(Params("running dogs")).status, 200);
  ASSERT_EQ(n.requests().size(), 1u);
  EXPECT_EQ(n.requests()[0].terms, (std::vector<std::string>{"dog", "run"}));
}

TEST(Integrator, AnalyzerFromTheIndexManifestMustMatchTheShards) {
  char tmpl[] = "/tmp/integrator-manifest-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  Manifest m;
  m.format_version = 1;
  m.stats.num_docs = 1000;
  m.stats.total_tokens = 5000;
  m.analyzer.stem_language = "english";
  m.shards.push_back(ShardEntry{0, "shard-0", 0, 1000, 1, 1, "crc32c:00000000"});
  m.created_by = "integrator_test";
  ASSERT_TRUE(m.Write(dir).ok());

  FakeNode plain(0, AnswerWith(0, {}));  // reports the default analyzer
  auto opts = Options({plain.endpoint()});
  opts.index_dir = dir;
  auto in = Integrator::Start(opts, nullptr);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ((*in)->AnalyzerError(), "");  // known from the manifest before any pong
  auto end = Clock::now() + 5s;
  while ((*in)->AnalyzerError().empty() && Clock::now() < end) std::this_thread::sleep_for(10ms);
  EXPECT_NE((*in)->AnalyzerError().find("index manifest"), std::string::npos) << (*in)->AnalyzerError();
  EXPECT_EQ((*in)->Search(Params("running")).status, 503);

  FakeNode english(0, AnswerWith(0, {}));
  ShardHealthMsg h = english.health();
  h.analyzer_json = m.analyzer.ToJson();
  english.set_health(h);
  opts.shards = {english.endpoint()};
  auto in2 = Integrator::Start(opts, nullptr);
  ASSERT_TRUE(in2.ok());
  ASSERT_TRUE(WaitReady(**in2));
  EXPECT_EQ((*in2)->Search(Params("running")).status, 200);
  EXPECT_EQ(english.requests().at(0).terms, (std::vector<std::string>{"run"}));

  opts.shards = {english.endpoint(), plain.endpoint()};  // the manifest has one shard
  EXPECT_FALSE(Integrator::Start(opts, nullptr).ok());
  opts.index_dir = dir + "/missing";
  EXPECT_FALSE(Integrator::Start(opts, nullptr).ok());
  std::filesystem::remove_all(dir);
}

// A fresh integrator (say, restarted under load) answers searches that arrive before any shard has
// reported once it does, within their deadline, instead of a 503; with no report by the deadline
// (at most 2 s) the answer is the 503.
TEST(Integrator, SearchesBeforeTheFirstShardReportWaitForIt) {
  FakeNode a(0, AnswerWith(0, {}), 2), b(1, AnswerWith(1, {}), 2);
  a.set_answer_pings(false);
  b.set_answer_pings(false);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  std::thread pongs([&] {
    std::this_thread::sleep_for(300ms);
    a.set_answer_pings(true);
    b.set_answer_pings(true);
  });
  SearchParams p = Params("x");
  p.timeout_ms = 3000;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = (*in)->Search(p);
  pongs.join();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  // No report within a 200 ms deadline: 503 at about the deadline.
  FakeNode c(0, AnswerWith(0, {}), 1);
  c.set_answer_pings(false);
  auto in2 = Integrator::Start(Options({c.endpoint()}), nullptr);
  ASSERT_TRUE(in2.ok());
  p.timeout_ms = 200;
  const auto t1 = std::chrono::steady_clock::now();
  auto r2 = (*in2)->Search(p);
  const auto waited = std::chrono::steady_clock::now() - t1;
  EXPECT_EQ(r2.status, 503) << r2.body;
  EXPECT_GE(waited, 180ms);
  EXPECT_LT(waited, 1500ms);
}

TEST(Integrator, RefusesWithoutAnAnalyzerAndWhenShardsDisagree) {
  FakeNode a(0, AnswerWith(0, {}), 2), b(1, AnswerWith(1, {}), 2);
  a.set_answer_pings(false);
  b.set_answer_pings(false);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  auto r = (*in)->Search(Params("x"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "illegal_state_exception");
  EXPECT_NE(json::parse(r.body)["error"]["reason"].get<std::string>().find("analyzer"), std::string::npos);

  ShardHealthMsg h = b.health();
  AnalyzerConfig stop;
  stop.stopwords = {"the"};
  h.analyzer_json = stop.ToJson();
  b.set_health(h);
  a.set_answer_pings(true);
  b.set_answer_pings(true);
  const auto end = Clock::now() + 5s;
  while ((*in)->AnalyzerError().find("disagree") == std::string::npos && Clock::now() < end)
    std::this_thread::sleep_for(10ms);
  EXPECT_NE((*in)->AnalyzerError().find("disagree"), std::string::npos) << (*in)->AnalyzerError();
  r = (*in)->Search(Params("x"));
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(json::parse(r.body)["error"]["reason"].get<std::string>().find("disagree"), std::string::npos);
  EXPECT_EQ(json::parse((*in)->HealthJson())["status"], "red");
  EXPECT_TRUE(a.requests().empty());

  // The operator fixes shard 1: searches run again.
  h.analyzer_json = AnalyzerConfig{}.ToJson();
  b.set_health(h);
  const auto end2 = Clock::now() + 5s;
  while (!(*in)->AnalyzerError().empty() && Clock::now() < end2) std::this_thread::sleep_for(10ms);
  EXPECT_EQ((*in)->Search(Params("x")).status, 200);
}

TEST(Integrator, DuplicateShardIdsAndWrongShardCountAreRefused) {
  FakeNode a(0, AnswerWith(0, {}), 2), b(0, AnswerWith(0, {}), 2);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  auto end = Clock::now() + 5s;
  while ((*in)->AnalyzerError().find("two endpoints") == std::string::npos && Clock::now() < end)
    std::this_thread::sleep_for(10ms);
  EXPECT_NE((*in)->AnalyzerError().find("two endpoints serve shard 0"), std::string::npos) << (*in)->AnalyzerError();

  FakeNode c(0, AnswerWith(0, {}), 3);
  auto in2 = Integrator::Start(Options({c.endpoint()}), nullptr);
  ASSERT_TRUE(in2.ok());
  end = Clock::now() + 5s;
  while ((*in2)->AnalyzerError().find("3 shards") == std::string::npos && Clock::now() < end)
    std::this_thread::sleep_for(10ms);
  EXPECT_NE((*in2)->AnalyzerError().find("3 shards"), std::string::npos) << (*in2)->AnalyzerError();
}

// A node whose AND answer has `and_hits` documents and whose OR answer has 5 more.
FakeNode::Handler AndOrNode(uint32_t shard, uint32_t and_hits) {
  return [=](const SearchRequestMsg& req) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg r;
    r.shard_id = shard;
    const uint32_t n = req.mode == QueryMode::kAnd ? and_hits : and_hits + 5;
    for (uint32_t i = 0; i < n && i < req.k; ++i)
      r.hits.push_back({shard * 100 + i, 10.0f - static_cast<float>(i), std::string("s").append(std::to_string(shard * 100 + i))});
    return r;
  };
}

TEST(Integrator, AndOrIsDecidedOverTheWholeCollection) {
  FakeNode a(0, AndOrNode(0, 3), 2), b(1, AndOrNode(1, 1), 2);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  // k = 4: shard 0 alone has fewer than 4 AND hits, but together they have 4: AND stands.
  auto r = (*in)->Search(Params("x y", QueryMode::kAndOr, 4));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["hits"]["hits"].size(), 4u);
  ASSERT_EQ(a.requests().size(), 1u);
  EXPECT_EQ(a.requests()[0].mode, QueryMode::kAnd);
  // k = 5: 4 AND hits in all < 5: OR on every shard.
  r = (*in)->Search(Params("x y", QueryMode::kAndOr, 5));
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(a.requests().size(), 3u);
  EXPECT_EQ(a.requests()[1].mode, QueryMode::kAnd);
  EXPECT_EQ(a.requests()[2].mode, QueryMode::kOr);
  EXPECT_EQ(b.requests()[2].mode, QueryMode::kOr);
  EXPECT_EQ(json::parse(r.body)["hits"]["hits"].size(), 5u);
}

TEST(Integrator, CacheAnswersRepeatsWithoutTouchingShardsButNeverCachesPartialAnswers) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2), b(1, AnswerWith(1, {{2, 2.0f, "y"}}), 2);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  auto miss = json::parse((*in)->Search(Params("Hello world")).body);
  auto hit = json::parse((*in)->Search(Params("WORLD hello hello")).body);  // same canonical terms
  EXPECT_EQ(miss["cached"], false);
  EXPECT_EQ(hit["cached"], true);
  EXPECT_EQ(hit["hits"], miss["hits"]);
  EXPECT_EQ(hit["_shards"]["successful"], 2);
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_EQ(json::parse((*in)->Search(Params("hello world", QueryMode::kAnd)).body)["cached"], false);
  EXPECT_EQ((*in)->cache().stats().hits, 1u);

  b.set_delay(400ms);
  SearchParams p = Params("slow query");
  p.timeout_ms = 100;
  const auto t0 = Clock::now();
  auto partial = json::parse((*in)->Search(p).body);
  EXPECT_LT(Clock::now() - t0, 300ms);
  EXPECT_EQ(partial["timed_out"], true);
  EXPECT_EQ(partial["_shards"]["failed"], 1);
  EXPECT_EQ(partial["_shards"]["failures"][0]["shard"], 1);
  EXPECT_EQ(partial["hits"]["hits"].size(), 1u);
  EXPECT_EQ(json::parse((*in)->Search(p).body)["cached"], false);  // the partial answer was not cached
}

TEST(Integrator, AllShardsFailingIs503AndOverloadIs429) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}));
  auto opts = Options({a.endpoint()});
  opts.max_inflight = 1;
  opts.cache_bytes = 0;
  auto in = Integrator::Start(opts, nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  a.set_delay(300ms);
  SearchParams p = Params("q");
  p.timeout_ms = 100;
  auto r = (*in)->Search(p);
  EXPECT_EQ(r.status, 503);
  json j = json::parse(r.body);
  EXPECT_EQ(j["error"]["type"], "search_phase_execution_exception");
  EXPECT_EQ(j["_shards"]["failed"], 1);

  p.timeout_ms = 500;
  std::thread busy([&] { (void)(*in)->Search(p); });
  std::this_thread::sleep_for(100ms);
  auto over = (*in)->Search(p);
  busy.join();
  EXPECT_EQ(over.status, 429);
  EXPECT_EQ(json::parse(over.body)["error"]["type"], "es_rejected_execution_exception");
}

TEST(Integrator, RequestsWaitingForAWorkerCountAgainstTheBound) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}));
  auto opts = Options({a.endpoint()});
  opts.max_inflight = 4;
  auto in = Integrator::Start(opts, nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  EXPECT_EQ((*in)->Search(Params("q"), /*waiting=*/3).status, 200);
  EXPECT_EQ((*in)->Search(Params("q"), /*waiting=*/4).status, 429);
  EXPECT_EQ((*in)->Search(Params("q"), /*waiting=*/0).status, 200);
}

TEST(Integrator, TooManyOrTooLongTermsAre400) {
  FakeNode a(0, AnswerWith(0, {}));
  auto in = Integrator::Start(Options({a.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  std::string many;
  for (int i = 0; i < 1100; ++i) many.append("t").append(std::to_string(i)).append(" ");
  auto r = (*in)->Search(Params(many));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("distinct terms"), std::string::npos);
  r = (*in)->Search(Params(std::string(2000, 'x')));
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(a.requests().empty());
  // A parse error goes through HandleSearch unchanged.
  ParsedSearch bad;
  bad.error = RequestError{400, "illegal_argument_exception", "parameter [k] must be an integer"};
  EXPECT_EQ((*in)->HandleSearch(bad).status, 400);
}

// Counts the fan-out events an observer gets (thread-safe: they come from every lane's I/O thread).
class CountingObserver : public IntegratorObserver {
 public:
  void OnShardReply(size_t, ShardCallState, double) override { ++replies; }
  void OnShardUp(size_t, bool up) override { (up ? ups : downs)++; }
  void OnHealth(size_t, const ShardHealthMsg&) override { ++healths; }
  std::atomic<int> replies{0}, ups{0}, downs{0}, healths{0};
};

// Three fan-out lanes over two shards: searches take the lanes in turn (each lane's request ids
// come from its own random start, so a shard sees three runs of consecutive ids), every answer is
// merged as with one lane, every lane's replies reach the observer, and shard up and health events
// come from one lane only (two shards up: two events, not six).
TEST(Integrator, FanoutLanesTakeSearchesInTurnAndReportEachShardOnce) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}, {1, 1.0f, "a1"}}), 2);
  FakeNode b(1, AnswerWith(1, {{700, 3.0f, "b700"}, {600, 2.0f, "b600"}}), 2);
  CountingObserver obs;
  auto opts = Options({a.endpoint(), b.endpoint()});
  opts.fanout_lanes = 3;
  opts.cache_bytes = 0;  // every search goes to the shards
  auto in = Integrator::Start(opts, &obs);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_TRUE(WaitReady(**in));
  std::this_thread::sleep_for(300ms);  // the other lanes' first pongs (every 50 ms)
  constexpr int kSearches = 30;
  for (int i = 0; i < kSearches; ++i) {
    auto r = (*in)->Search(Params("apple", QueryMode::kOr, 3));
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    ASSERT_EQ(j["hits"]["hits"].size(), 3u);
    EXPECT_EQ(j["hits"]["hits"][0]["_id"], "a5");
    EXPECT_EQ(j["hits"]["hits"][1]["_id"], "b700");
    EXPECT_EQ(j["hits"]["hits"][2]["_doc"], 600);
  }
  for (const FakeNode* n : {&a, &b}) {
    std::vector<uint64_t> ids;
    for (const auto& r : n->requests()) ids.push_back(r.request_id);
    ASSERT_EQ(ids.size(), static_cast<size_t>(kSearches));
    std::sort(ids.begin(), ids.end());
    std::vector<int> runs = {1};  // lengths of the runs of consecutive ids
    for (size_t i = 1; i < ids.size(); ++i) {
      if (ids[i] - ids[i - 1] < 1000) {
        ++runs.back();
      } else {
        runs.push_back(1);
      }
    }
    EXPECT_EQ(runs, (std::vector<int>{10, 10, 10}));
  }
  EXPECT_EQ(obs.replies.load(), 2 * kSearches);
  EXPECT_EQ(obs.ups.load(), 2);
  EXPECT_EQ(obs.downs.load(), 0);
  EXPECT_GT(obs.healths.load(), 0);
  EXPECT_EQ((*in)->retries(), 0u);
  EXPECT_EQ((*in)->hedges(), 0u);
  // Out of range: refused at start.
  opts.fanout_lanes = 0;
  EXPECT_FALSE(Integrator::Start(opts, nullptr).ok());
  opts.fanout_lanes = kMaxFanoutLanes + 1;
  EXPECT_FALSE(Integrator::Start(opts, nullptr).ok());
}

// Two lanes where the integrator has cores to spare for the second thread, one on a small machine.
TEST(Integrator, DefaultFanoutLanesFollowTheCpus) {
  EXPECT_EQ(DefaultFanoutLanes(1), 1u);
  EXPECT_EQ(DefaultFanoutLanes(2), 1u);
  EXPECT_EQ(DefaultFanoutLanes(7), 1u);
  EXPECT_EQ(DefaultFanoutLanes(8), 2u);
  EXPECT_EQ(DefaultFanoutLanes(12), 2u);
  EXPECT_EQ(DefaultFanoutLanes(128), 2u);
}

}  // namespace
}  // namespace search
