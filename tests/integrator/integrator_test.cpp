// Integrator over fake nodes: the analyzer learned from pongs (and refused when shards disagree),
// canonical terms on the wire, merge, andor decided globally, the result cache, partial answers,
// 503 and 429.
#include "integrator/integrator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "fake_node.hpp"
#include "integrator_fixture.hpp"
#include "core/query_parser.hpp"
#include "index_store/manifest.hpp"
#include "index_store/shard_store.hpp"

namespace search {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using testing::AnswerCounting;
using testing::AnswerWith;
using testing::FakeNode;
using testing::Options;
using testing::Params;
using testing::WaitReady;

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
  m.format_version = kIndexFormatVersion;
  m.stats.num_docs = 1000;
  m.stats.total_tokens = 5000;
  m.analyzer.stem_language = "english";
  m.shards.push_back(ShardEntry{0, "shard-0", 0, 1000, 1, 1, "crc32c:00000000"});
  m.created_by = "integrator_test";
  ASSERT_TRUE(m.Write(dir).ok());

  FakeNode plain(0, AnswerWith(0, {}));  // reports the default analyzer
  plain.set_answer_pings(false);         // until the manifest's analyzer is checked alone
  auto opts = Options({plain.endpoint()});
  opts.index_dir = dir;
  auto in = Integrator::Start(opts, nullptr);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ((*in)->AnalyzerError(), "");  // known from the manifest before any pong
  plain.set_answer_pings(true);
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
  EXPECT_LT(waited, 1900ms);  // the deadline, not the 2 s most a search waits for a first report
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

  b.set_delay(60s);  // far past the deadline
  SearchParams p = Params("slow query");
  p.timeout_ms = 100;
  const auto t0 = Clock::now();
  auto partial = json::parse((*in)->Search(p).body);
  EXPECT_LT(Clock::now() - t0, 10s);  // the deadline, not the slow shard (60 s)
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
  EXPECT_NE(r.body.find("more than 1024 clauses"), std::string::npos) << r.body;  // the parser's limit
  // Fewer clauses, more distinct terms: words the analyzer splits into phrases.
  many.clear();
  for (int i = 0; i < 600; ++i) many.append("t").append(std::to_string(i)).append("-u").append(std::to_string(i)).append(" ");
  r = (*in)->Search(Params(many));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("distinct terms"), std::string::npos) << r.body;
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
  // Each shard reported once per round: the query round and the fetch round (_source is on).
  EXPECT_EQ(obs.replies.load(), 2 * 2 * kSearches);
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

// ---- HandleSearchAsync: the event loop's path ----

// Removes the timing fields ("took", "took_us") so that two answers to the same search compare
// equal; an error body (no timing field) is compared as it is.
HttpReply Untimed(HttpReply r) {
  json j = json::parse(r.body);
  j.erase("took");
  j.erase("took_us");
  r.body = j.dump();
  return r;
}

// True on a thread while it runs a closure taken from a PostQueue.
thread_local bool t_in_posted_closure = false;

// A test-owned event loop's queue: post() queues closures; whichever thread calls RunUntil runs
// them, as an event loop would.
class PostQueue {
 public:
  Integrator::Post post() {
    return [this](std::function<void()> fn) {
      {
        std::lock_guard lock(mu_);
        q_.push_back(std::move(fn));
        ++posted_;
      }
      cv_.notify_all();
    };
  }
  // Runs queued closures on this thread until `pred` holds (checked before each) or `limit`
  // passes; returns pred().
  bool RunUntil(const std::function<bool()>& pred, std::chrono::milliseconds limit = 10s) {
    const auto end = Clock::now() + limit;
    while (!pred()) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        // In slices: pred may turn true without a closure (something another thread did).
        if (!cv_.wait_until(lock, std::min(end, Clock::now() + 5ms), [&] { return !q_.empty(); })) {
          if (Clock::now() >= end) return pred();
          continue;
        }
        fn = std::move(q_.front());
        q_.pop_front();
      }
      t_in_posted_closure = true;
      fn();
      t_in_posted_closure = false;
      ++ran_;
    }
    return true;
  }
  // Runs whatever arrives for `d`.
  void RunFor(std::chrono::milliseconds d) { (void)RunUntil([] { return false; }, d); }
  // Destroys the queued closures without running them.
  void Drop() {
    std::deque<std::function<void()>> q;
    {
      std::lock_guard lock(mu_);
      q.swap(q_);
    }
  }
  int posted() const { return posted_.load(); }
  size_t queued() {
    std::lock_guard lock(mu_);
    return q_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  std::atomic<int> posted_{0}, ran_{0};
};

// What a search's `done` saw: each call's reply, thread, whether it ran inside a posted closure
// and whether HandleSearchAsync had returned by then.
struct DoneLog {
  std::mutex mu;
  std::vector<HttpReply> replies;
  std::vector<std::thread::id> threads;
  std::vector<bool> in_closure, after_return;
  std::atomic<bool> returned{false};
  std::atomic<int> calls{0};
  std::chrono::nanoseconds call_took{0};  // how long HandleSearchAsync took to return
};

Integrator::ReplyCallback Recorder(const std::shared_ptr<DoneLog>& log) {
  return [log](HttpReply r) {
    std::lock_guard lock(log->mu);
    log->replies.push_back(std::move(r));
    log->threads.push_back(std::this_thread::get_id());
    log->in_closure.push_back(t_in_posted_closure);
    log->after_return.push_back(log->returned.load());
    ++log->calls;
  };
}

ParsedSearch Parsed(SearchParams p) {
  ParsedSearch ps;
  ps.params = std::move(p);
  return ps;
}

std::shared_ptr<DoneLog> StartAsync(Integrator& in, const ParsedSearch& ps, const Integrator::Post& post,
                                    size_t waiting = 0) {
  auto log = std::make_shared<DoneLog>();
  const auto t0 = Clock::now();
  in.HandleSearchAsync(ps, waiting, post, Recorder(log));
  log->call_took = Clock::now() - t0;
  log->returned = true;
  return log;
}

// A fanned-out search: `done` is called exactly once, later, by the loop (on this thread, inside a
// posted closure), never inline. Returns the reply (status 0 when none came).
HttpReply AwaitAsync(Integrator& in, const ParsedSearch& ps, PostQueue& loop, size_t waiting = 0) {
  const int posted0 = loop.posted();
  auto log = StartAsync(in, ps, loop.post(), waiting);
  EXPECT_EQ(log->calls.load(), 0) << "done called inline for a fanned-out search";
  EXPECT_TRUE(loop.RunUntil([&] { return log->calls.load() > 0; })) << "no reply through post";
  loop.RunFor(50ms);  // a second call would come now
  std::lock_guard lock(log->mu);
  EXPECT_EQ(log->replies.size(), 1u);
  EXPECT_GT(loop.posted(), posted0);
  if (log->replies.empty()) return {0, ""};
  EXPECT_EQ(log->threads[0], std::this_thread::get_id());
  EXPECT_TRUE(log->in_closure[0]) << "done called outside the posted closures";
  EXPECT_TRUE(log->after_return[0]);
  return log->replies[0];
}

// An answer that needs no shard: `done` is called exactly once, on the calling thread, before
// HandleSearchAsync returns, and post is never called.
HttpReply InlineAsync(Integrator& in, const ParsedSearch& ps, size_t waiting = 0) {
  std::atomic<int> posts{0};
  Integrator::Post counting = [&posts](std::function<void()>) { ++posts; };
  auto log = StartAsync(in, ps, counting, waiting);
  std::this_thread::sleep_for(50ms);  // a late or second call would come now
  std::lock_guard lock(log->mu);
  EXPECT_EQ(posts.load(), 0);
  EXPECT_EQ(log->replies.size(), 1u);
  if (log->replies.empty()) return {0, ""};
  EXPECT_EQ(log->threads[0], std::this_thread::get_id());
  EXPECT_FALSE(log->after_return[0]) << "done not called before HandleSearchAsync returned";
  return log->replies[0];
}

// The integrator with its loop's queue: on the way out the integrator is stopped first (nothing
// posts any more), then the queued closures go (their search state releases its place in the
// integrator, which must still exist), then the integrator.
struct AsyncRig {
  PostQueue loop;
  std::unique_ptr<Integrator> in;
  explicit AsyncRig(IntegratorOptions o) {
    auto r = Integrator::Start(std::move(o), nullptr);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) in = std::move(*r);
  }
  ~AsyncRig() {
    if (in) in->Stop();
    loop.Drop();
    in.reset();
  }
  int64_t InFlight() const { return json::parse(in->StatsJson())["in_flight"].get<int64_t>(); }
};

#define EXPECT_SAME_REPLY(a, b)                 \
  do {                                          \
    const HttpReply ua = Untimed(a), ub = Untimed(b); \
    EXPECT_EQ(ua.status, ub.status);            \
    EXPECT_EQ(ua.body, ub.body);                \
  } while (0)

// The shards' answers merged as HandleSearch merges them, for or, and and andor (AND standing).
TEST(IntegratorAsync, MergedSearchMatchesTheBlockingPath) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}, {1, 1.0f, "a1"}}), 2);
  FakeNode b(1, AnswerWith(1, {{700, 3.0f, "b700"}, {600, 2.0f, "b600"}}), 2);
  auto opts = Options({a.endpoint(), b.endpoint()});
  opts.cache_bytes = 0;  // both paths go to the shards
  AsyncRig rig(opts);
  ASSERT_TRUE(rig.in);
  ASSERT_TRUE(WaitReady(*rig.in));
  for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd, QueryMode::kAndOr}) {
    for (uint32_t k : {3u, 10u}) {
      SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode) << " k " << k);
      const ParsedSearch ps = Parsed(Params("Zebra apple  ZEBRA, mango", mode, k));
      const size_t before = a.requests().size();
      HttpReply async = AwaitAsync(*rig.in, ps, rig.loop);
      ASSERT_EQ(async.status, 200) << async.body;
      // andor with k = 10: 4 AND hits in all, and these nodes do not split: a second round, OR.
      const bool or_round = mode == QueryMode::kAndOr && k > 4;
      ASSERT_EQ(a.requests().size(), before + (or_round ? 2 : 1));
      EXPECT_EQ(a.requests().back().mode, or_round ? QueryMode::kOr : mode == QueryMode::kAndOr ? QueryMode::kAnd : mode);
      EXPECT_EQ(a.requests().back().terms, (std::vector<std::string>{"apple", "mango", "zebra"}));
      EXPECT_EQ(a.requests().back().k, k);
      HttpReply blocking = rig.in->HandleSearch(ps);
      EXPECT_SAME_REPLY(async, blocking);
      json j = json::parse(async.body);
      EXPECT_EQ(j["_shards"]["successful"], 2);
      ASSERT_EQ(j["hits"]["hits"].size(), std::min<size_t>(k, 4));
      EXPECT_EQ(j["hits"]["hits"][0]["_id"], "a5");
      EXPECT_EQ(j["hits"]["hits"][1]["_id"], "b700");
      EXPECT_EQ(j["hits"]["hits"][2]["_doc"], 600);
    }
  }
  EXPECT_EQ(rig.InFlight(), 0);
}

// A node with the andor split: with fewer than k AND hits of its own it sends its OR top-k too.
FakeNode::Handler SplitAndOrNode(uint32_t shard, uint32_t and_hits) {
  auto plain = AndOrNode(shard, and_hits);
  return [=](const SearchRequestMsg& req) -> std::optional<SearchResponseMsg> {
    auto r = plain(req);
    if (req.mode == QueryMode::kAnd && (req.flags & kFlagAndOrSplit) && r->hits.size() < req.k) {
      SearchRequestMsg as_or = req;
      as_or.mode = QueryMode::kOr;
      r->or_hits = plain(as_or)->hits;
      r->has_or_hits = true;
    }
    return r;
  };
}

// andor decided over the whole collection, as HandleSearch decides it: AND standing when the
// shards together have k AND hits; OR in a second round through post when a node without the split
// flag (or one of two) leaves it undecided; OR from the split answers in one round otherwise.
TEST(IntegratorAsync, AndOrIsDecidedOverTheWholeCollectionAsByTheBlockingPath) {
  struct Setup {
    const char* name;
    bool split_a, split_b;
  };
  for (const Setup& s : {Setup{"no split", false, false}, Setup{"one split", true, false},
                         Setup{"both split", true, true}}) {
    SCOPED_TRACE(s.name);
    FakeNode a(0, s.split_a ? SplitAndOrNode(0, 3) : AndOrNode(0, 3), 2);
    FakeNode b(1, s.split_b ? SplitAndOrNode(1, 1) : AndOrNode(1, 1), 2);
    auto opts = Options({a.endpoint(), b.endpoint()});
    opts.cache_bytes = 0;
    AsyncRig rig(opts);
    ASSERT_TRUE(rig.in);
    ASSERT_TRUE(WaitReady(*rig.in));
    // k = 4: 3 + 1 AND hits: AND stands, one round.
    HttpReply async = AwaitAsync(*rig.in, Parsed(Params("x y", QueryMode::kAndOr, 4)), rig.loop);
    ASSERT_EQ(async.status, 200) << async.body;
    EXPECT_EQ(json::parse(async.body)["hits"]["hits"].size(), 4u);
    ASSERT_EQ(a.requests().size(), 1u);
    EXPECT_EQ(a.requests()[0].mode, QueryMode::kAnd);
    EXPECT_SAME_REPLY(async, rig.in->HandleSearch(Parsed(Params("x y", QueryMode::kAndOr, 4))));
    // k = 5: 4 AND hits in all < 5: OR decides (8 + 6 OR hits: 5 of them).
    const size_t before = a.requests().size();
    async = AwaitAsync(*rig.in, Parsed(Params("x y", QueryMode::kAndOr, 5)), rig.loop);
    ASSERT_EQ(async.status, 200) << async.body;
    json j = json::parse(async.body);
    EXPECT_EQ(j["hits"]["hits"].size(), 5u);
    EXPECT_EQ(j["_shards"]["successful"], 2);
    const bool second_round = !(s.split_a && s.split_b);
    ASSERT_EQ(a.requests().size(), before + (second_round ? 2 : 1));
    EXPECT_EQ(a.requests()[before].mode, QueryMode::kAnd);
    EXPECT_EQ(a.requests()[before].flags & kFlagAndOrSplit, kFlagAndOrSplit);
    if (second_round) {
      EXPECT_EQ(a.requests()[before + 1].mode, QueryMode::kOr);
      EXPECT_EQ(b.requests().back().mode, QueryMode::kOr);
    }
    // The OR hits: shard 0's 8 (scores 10..3) and shard 1's 6 (10..5); ties to the smaller docID.
    std::vector<int> docs;
    for (const auto& h : j["hits"]["hits"]) docs.push_back(h["_doc"].get<int>());
    EXPECT_EQ(docs, (std::vector<int>{0, 100, 1, 101, 2}));
    EXPECT_SAME_REPLY(async, rig.in->HandleSearch(Parsed(Params("x y", QueryMode::kAndOr, 5))));
    EXPECT_EQ(rig.InFlight(), 0);
  }
}

// A cache hit is answered inline (done on the calling thread before HandleSearchAsync returns,
// post never called), as HandleSearch answers it; an answer the async path merged is cached too.
TEST(IntegratorAsync, CacheHitIsAnsweredInline) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2), b(1, AnswerWith(1, {{2, 2.0f, "y"}}), 2);
  AsyncRig rig(Options({a.endpoint(), b.endpoint()}));
  ASSERT_TRUE(rig.in);
  ASSERT_TRUE(WaitReady(*rig.in));
  HttpReply miss = AwaitAsync(*rig.in, Parsed(Params("Hello world")), rig.loop);
  ASSERT_EQ(miss.status, 200) << miss.body;
  EXPECT_EQ(json::parse(miss.body)["cached"], false);
  HttpReply hit = InlineAsync(*rig.in, Parsed(Params("WORLD hello hello")));
  ASSERT_EQ(hit.status, 200) << hit.body;
  EXPECT_EQ(json::parse(hit.body)["cached"], true);
  EXPECT_EQ(json::parse(hit.body)["hits"], json::parse(miss.body)["hits"]);
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_SAME_REPLY(hit, rig.in->HandleSearch(Parsed(Params("hello world"))));
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_EQ(rig.in->cache().stats().hits, 2u);
  EXPECT_EQ(rig.InFlight(), 0);
}

// A request that did not parse is answered inline, as HandleSearch answers it, without a shard.
TEST(IntegratorAsync, ParseErrorIsAnsweredInline) {
  FakeNode a(0, AnswerWith(0, {}));
  AsyncRig rig(Options({a.endpoint()}));
  ASSERT_TRUE(rig.in);
  ASSERT_TRUE(WaitReady(*rig.in));
  ParsedSearch bad;
  bad.error = RequestError{400, "illegal_argument_exception", "parameter [k] must be an integer"};
  HttpReply async = InlineAsync(*rig.in, bad);
  EXPECT_EQ(async.status, 400);
  EXPECT_SAME_REPLY(async, rig.in->HandleSearch(bad));
  EXPECT_EQ(json::parse(async.body)["error"]["reason"], "parameter [k] must be an integer");
  // Too many terms: 400 from Begin, inline too.
  std::string many;
  for (int i = 0; i < 1100; ++i) many.append("t").append(std::to_string(i)).append(" ");
  HttpReply terms = InlineAsync(*rig.in, Parsed(Params(many)));
  EXPECT_EQ(terms.status, 400);
  EXPECT_SAME_REPLY(terms, rig.in->HandleSearch(Parsed(Params(many))));
  EXPECT_TRUE(a.requests().empty());
  EXPECT_EQ(rig.InFlight(), 0);
}

// max_inflight 1 with an async search outstanding: the next one is 429 inline, as HandleSearch's;
// once the outstanding one is answered through post, its place is free again.
TEST(IntegratorAsync, OverloadIs429InlineWhileAnotherAsyncSearchIsOutstanding) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}));
  auto opts = Options({a.endpoint()});
  opts.max_inflight = 1;
  opts.cache_bytes = 0;
  AsyncRig rig(opts);
  ASSERT_TRUE(rig.in);
  ASSERT_TRUE(WaitReady(*rig.in));
  a.set_delay(300ms);
  SearchParams p = Params("q");
  p.timeout_ms = 2000;
  auto outstanding = StartAsync(*rig.in, Parsed(p), rig.loop.post());
  EXPECT_EQ(outstanding->calls.load(), 0);
  EXPECT_EQ(rig.InFlight(), 1);
  HttpReply over = InlineAsync(*rig.in, Parsed(p));
  EXPECT_EQ(over.status, 429);
  EXPECT_EQ(json::parse(over.body)["error"]["type"], "es_rejected_execution_exception");
  EXPECT_SAME_REPLY(over, rig.in->HandleSearch(Parsed(p)));
  EXPECT_EQ(a.requests().size(), 1u);
  // The outstanding one is answered through post, once.
  ASSERT_TRUE(rig.loop.RunUntil([&] { return outstanding->calls.load() > 0; }));
  rig.loop.RunFor(50ms);
  {
    std::lock_guard lock(outstanding->mu);
    ASSERT_EQ(outstanding->replies.size(), 1u);
    EXPECT_EQ(outstanding->replies[0].status, 200) << outstanding->replies[0].body;
    EXPECT_TRUE(outstanding->in_closure[0]);
  }
  EXPECT_EQ(rig.InFlight(), 0);
  a.set_delay(0ms);
  EXPECT_EQ(AwaitAsync(*rig.in, Parsed(p), rig.loop).status, 200);
  // Requests waiting for a worker count too: waiting 1 of at most 1 is 429, inline.
  HttpReply queued = InlineAsync(*rig.in, Parsed(p), /*waiting=*/1);
  EXPECT_EQ(queued.status, 429);
  EXPECT_SAME_REPLY(queued, rig.in->HandleSearch(Parsed(p), /*waiting=*/1));
}

// Every shard missing the deadline: the 503 comes through post, as HandleSearch's.
TEST(IntegratorAsync, AllShardsFailingIs503ThroughPost) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2), b(1, AnswerWith(1, {{2, 2.0f, "y"}}), 2);
  auto opts = Options({a.endpoint(), b.endpoint()});
  opts.cache_bytes = 0;
  AsyncRig rig(opts);
  ASSERT_TRUE(rig.in);
  ASSERT_TRUE(WaitReady(*rig.in));
  a.set_delay(60s);  // both far past the deadline
  b.set_delay(60s);
  SearchParams p = Params("q");
  p.timeout_ms = 100;
  const auto t0 = Clock::now();
  HttpReply async = AwaitAsync(*rig.in, Parsed(p), rig.loop);
  EXPECT_LT(Clock::now() - t0, 10s);  // the deadline, not the slow shards (60 s)
  EXPECT_EQ(async.status, 503);
  json j = json::parse(async.body);
  EXPECT_EQ(j["error"]["type"], "search_phase_execution_exception");
  EXPECT_EQ(j["_shards"]["failed"], 2);
  EXPECT_SAME_REPLY(async, rig.in->HandleSearch(Parsed(p)));
  EXPECT_EQ(rig.InFlight(), 0);
}

// done exactly once, only on the thread running the posted closures: here a loop thread of its
// own, on which the searches are also started (as an event loop's handlers start them), 40 of them
// outstanding together, andor's second rounds among them.
TEST(IntegratorAsync, DoneIsCalledOnceOnTheLoopThreadOnly) {
  FakeNode a(0, AndOrNode(0, 3), 2), b(1, AndOrNode(1, 1), 2);
  b.set_delay(20ms);
  auto opts = Options({a.endpoint(), b.endpoint()});
  opts.cache_bytes = 0;
  opts.fanout_lanes = 2;
  AsyncRig rig(opts);
  ASSERT_TRUE(rig.in);
  ASSERT_TRUE(WaitReady(*rig.in));
  std::this_thread::sleep_for(200ms);  // the second lane's first pongs
  constexpr int kSearches = 40;
  std::vector<std::shared_ptr<DoneLog>> logs(kSearches);
  std::atomic<bool> started{false};
  std::thread::id loop_id;
  std::thread loop([&] {
    loop_id = std::this_thread::get_id();
    rig.loop.post()([&] {
      for (int i = 0; i < kSearches; ++i) {
        const QueryMode mode = i % 3 == 0 ? QueryMode::kOr : QueryMode::kAndOr;
        logs[i] = StartAsync(*rig.in, Parsed(Params("x y", mode, i % 2 == 0 ? 4 : 5)), rig.loop.post());
      }
      started = true;
    });
    (void)rig.loop.RunUntil(
        [&] {
          if (!started) return false;
          for (const auto& l : logs)
            if (l->calls.load() == 0) return false;
          return true;
        },
        20s);
    rig.loop.RunFor(100ms);  // second calls would come now
  });
  loop.join();
  ASSERT_TRUE(started);
  int or_rounds = 0, expected_or = 0;
  for (const auto& r : a.requests()) or_rounds += r.mode == QueryMode::kOr;
  for (int i = 0; i < kSearches; ++i) expected_or += i % 3 == 0 || i % 2 == 1;  // or, or andor k = 5
  EXPECT_EQ(or_rounds, expected_or);  // andor's second rounds happened
  for (int i = 0; i < kSearches; ++i) {
    SCOPED_TRACE(i);
    std::lock_guard lock(logs[i]->mu);
    ASSERT_EQ(logs[i]->replies.size(), 1u);
    EXPECT_EQ(logs[i]->threads[0], loop_id);
    EXPECT_NE(logs[i]->threads[0], std::this_thread::get_id());
    EXPECT_TRUE(logs[i]->in_closure[0]);
    EXPECT_TRUE(logs[i]->after_return[0]);
    EXPECT_EQ(logs[i]->replies[0].status, 200) << logs[i]->replies[0].body;
    EXPECT_EQ(json::parse(logs[i]->replies[0].body)["hits"]["hits"].size(), i % 2 == 0 ? 4u : 5u);
  }
  EXPECT_EQ(rig.InFlight(), 0);
}

// Before any shard has reported, HandleSearchAsync returns at once (the wait happens on a thread
// of the Integrator's) and the answer, the blocking path's, comes through post once a shard
// reports; with no report by the deadline, the 503 comes through post at about the deadline.
// The shards report only after HandleSearchAsync returned: had it waited for their report, it
// would have waited out the whole (2 s) wait and the answer would be the 503.
TEST(IntegratorAsync, SearchBeforeTheFirstShardReportDoesNotBlockTheCaller) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}}), 2), b(1, AnswerWith(1, {{700, 4.0f, "b700"}}), 2);
  a.set_answer_pings(false);
  b.set_answer_pings(false);
  auto opts = Options({a.endpoint(), b.endpoint()});
  opts.cache_bytes = 0;
  AsyncRig rig(opts);
  ASSERT_TRUE(rig.in);
  SearchParams p = Params("x");
  p.timeout_ms = 3000;
  const auto t0 = Clock::now();
  auto log = StartAsync(*rig.in, Parsed(p), rig.loop.post());
  EXPECT_LT(log->call_took, 1s);
  EXPECT_EQ(log->calls.load(), 0);
  EXPECT_EQ(rig.loop.posted(), 0);
  std::thread pongs([&] {
    std::this_thread::sleep_for(300ms);
    a.set_answer_pings(true);
    b.set_answer_pings(true);
  });
  EXPECT_TRUE(rig.loop.RunUntil([&] { return log->calls.load() > 0; }, 10s));
  const auto waited = Clock::now() - t0;
  pongs.join();
  rig.loop.RunFor(50ms);
  EXPECT_GE(waited, 250ms);
  HttpReply async;
  {
    std::lock_guard lock(log->mu);
    ASSERT_EQ(log->replies.size(), 1u);
    EXPECT_EQ(log->threads[0], std::this_thread::get_id());
    EXPECT_TRUE(log->in_closure[0]);
    async = log->replies[0];
  }
  ASSERT_EQ(async.status, 200) << async.body;
  json j = json::parse(async.body);
  ASSERT_EQ(j["hits"]["hits"].size(), 2u);
  EXPECT_EQ(j["hits"]["hits"][0]["_id"], "b700");
  EXPECT_EQ(j["hits"]["hits"][1]["_id"], "a5");
  EXPECT_EQ(a.requests().size(), 1u);
  EXPECT_SAME_REPLY(async, rig.in->HandleSearch(Parsed(p)));
  EXPECT_EQ(rig.InFlight(), 0);

  // No report within a 200 ms deadline: 503 through post at about the deadline, as the blocking
  // path's.
  FakeNode c(0, AnswerWith(0, {}), 1);
  c.set_answer_pings(false);
  AsyncRig rig2(Options({c.endpoint()}));
  ASSERT_TRUE(rig2.in);
  p.timeout_ms = 200;
  const auto t1 = Clock::now();
  auto log2 = StartAsync(*rig2.in, Parsed(p), rig2.loop.post());
  EXPECT_EQ(log2->calls.load(), 0);
  EXPECT_TRUE(rig2.loop.RunUntil([&] { return log2->calls.load() > 0; }, 10s));
  const auto waited2 = Clock::now() - t1;
  rig2.loop.RunFor(50ms);
  EXPECT_GE(waited2, 180ms);
  EXPECT_LT(waited2, 1900ms);  // the deadline, not the 2 s most a search waits for a first report
  std::lock_guard lock(log2->mu);
  ASSERT_EQ(log2->replies.size(), 1u);
  EXPECT_TRUE(log2->in_closure[0]);
  EXPECT_EQ(log2->replies[0].status, 503) << log2->replies[0].body;
  EXPECT_SAME_REPLY(log2->replies[0], rig2.in->HandleSearch(Parsed(p)));
  EXPECT_TRUE(c.requests().empty());
}

// A post that drops its closures (its loop stopped): done is never called, and each search's
// place in flight goes with the closure, so that later searches are admitted under max_inflight 2.
// The same for andor's second round dropped after its first round ran, and for a search dropped
// while waiting for the first shard report.
TEST(IntegratorAsync, DroppedClosuresReleaseTheirPlaceInFlight) {
  FakeNode a(0, AndOrNode(0, 3), 2), b(1, AndOrNode(1, 1), 2);
  auto opts = Options({a.endpoint(), b.endpoint()});
  opts.max_inflight = 2;
  opts.cache_bytes = 0;
  AsyncRig rig(opts);
  ASSERT_TRUE(rig.in);
  ASSERT_TRUE(WaitReady(*rig.in));
  std::atomic<int> dropped{0};
  Integrator::Post drop = [&dropped](std::function<void()> fn) {
    ++dropped;
    fn = nullptr;  // destroyed, never run
  };
  auto wait_released = [&] {
    const auto end = Clock::now() + 5s;
    while (rig.InFlight() != 0 && Clock::now() < end) std::this_thread::sleep_for(5ms);
    return rig.InFlight() == 0;
  };
  std::vector<std::shared_ptr<DoneLog>> logs;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 2; ++i) {
      logs.push_back(StartAsync(*rig.in, Parsed(Params("x y", QueryMode::kOr, 4)), drop));
      EXPECT_EQ(logs.back()->calls.load(), 0) << "answered inline, not admitted";
    }
    ASSERT_TRUE(wait_released()) << "round " << round << ": in flight " << rig.InFlight();
  }
  EXPECT_EQ(dropped.load(), 8);
  // andor k = 5: the first round's closure runs, the second round's is dropped.
  std::atomic<int> posts{0};
  Integrator::Post first_only = [&](std::function<void()> fn) {
    if (posts++ == 0) rig.loop.post()(std::move(fn));
  };
  for (int i = 0; i < 3; ++i) {
    posts = 0;
    logs.push_back(StartAsync(*rig.in, Parsed(Params("x y", QueryMode::kAndOr, 5)), first_only));
    ASSERT_TRUE(rig.loop.RunUntil([&] { return posts.load() >= 2; }, 5s));
    ASSERT_TRUE(wait_released()) << "in flight " << rig.InFlight();
  }
  EXPECT_EQ(a.requests().back().mode, QueryMode::kOr);  // the second round was sent
  for (const auto& l : logs) EXPECT_EQ(l->calls.load(), 0);
  // Later searches are admitted, blocking and async.
  EXPECT_EQ(rig.in->HandleSearch(Parsed(Params("x y"))).status, 200);
  EXPECT_EQ(AwaitAsync(*rig.in, Parsed(Params("x y")), rig.loop).status, 200);
  EXPECT_EQ(AwaitAsync(*rig.in, Parsed(Params("x y")), rig.loop).status, 200);

  // Dropped while waiting for the first shard report.
  FakeNode c(0, AnswerWith(0, {}), 1);
  c.set_answer_pings(false);
  auto opts2 = Options({c.endpoint()});
  opts2.max_inflight = 2;
  AsyncRig rig2(opts2);
  ASSERT_TRUE(rig2.in);
  SearchParams p = Params("q");
  p.timeout_ms = 300;
  std::atomic<int> dropped2{0};
  Integrator::Post drop2 = [&dropped2](std::function<void()>) { ++dropped2; };
  std::vector<std::shared_ptr<DoneLog>> waiting;
  for (int i = 0; i < 3; ++i) waiting.push_back(StartAsync(*rig2.in, Parsed(p), drop2));
  c.set_answer_pings(true);
  const auto end = Clock::now() + 5s;
  while (dropped2.load() < 3 && Clock::now() < end) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(dropped2.load(), 3);
  ASSERT_TRUE(WaitReady(*rig2.in));
  EXPECT_EQ(rig2.InFlight(), 0);
  EXPECT_EQ(AwaitAsync(*rig2.in, Parsed(Params("q")), rig2.loop).status, 200);
  for (const auto& l : waiting) EXPECT_EQ(l->calls.load(), 0);
}

// Stop() with async searches outstanding (at a silent shard, and waiting for a first shard report)
// returns promptly; the closures it leads to may run (done once, 503) or be dropped, and a search
// started after Stop is answered once too.
TEST(IntegratorAsync, StopWithAsyncSearchesOutstandingReturnsPromptly) {
  for (bool run_closures : {true, false}) {
    SCOPED_TRACE(run_closures ? "closures run" : "closures dropped");
    FakeNode silent(0, [](const SearchRequestMsg&) { return std::optional<SearchResponseMsg>(); });
    auto opts = Options({silent.endpoint()});
    opts.cache_bytes = 0;
    AsyncRig rig(opts);
    ASSERT_TRUE(rig.in);
    ASSERT_TRUE(WaitReady(*rig.in));
    SearchParams p = Params("q", QueryMode::kAndOr, 5);
    p.timeout_ms = 60000;
    auto log = StartAsync(*rig.in, Parsed(p), rig.loop.post());
    const auto end = Clock::now() + 5s;
    while (silent.requests().empty() && Clock::now() < end) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(silent.requests().size(), 1u);
    const auto t0 = Clock::now();
    rig.in->Stop();
    EXPECT_LT(Clock::now() - t0, 10s);  // not the search's deadline (60 s)
    if (run_closures) {
      (void)rig.loop.RunUntil([&] { return log->calls.load() > 0; }, 10s);
      rig.loop.RunFor(50ms);  // a second call would come now
      std::lock_guard lock(log->mu);
      ASSERT_EQ(log->replies.size(), 1u);
      EXPECT_EQ(log->replies[0].status, 503) << log->replies[0].body;
      EXPECT_NE(log->replies[0].body.find("shutting down"), std::string::npos) << log->replies[0].body;
      EXPECT_TRUE(log->in_closure[0]);
    } else {
      rig.loop.Drop();
      EXPECT_EQ(log->calls.load(), 0);
    }
    EXPECT_EQ(rig.InFlight(), 0);
    // After Stop: answered once (503), through post or inline.
    auto later = StartAsync(*rig.in, Parsed(p), rig.loop.post());
    (void)rig.loop.RunUntil([&] { return later->calls.load() > 0; }, 10s);
    rig.loop.RunFor(50ms);  // a second call would come now
    EXPECT_EQ(later->calls.load(), 1);
    std::lock_guard lock(later->mu);
    if (!later->replies.empty()) {
      EXPECT_EQ(later->replies[0].status, 503) << later->replies[0].body;
    }
    EXPECT_EQ(log->calls.load(), run_closures ? 1 : 0);
  }
  // Waiting for the first shard report (up to 2 s) when Stop comes.
  FakeNode mute(0, AnswerWith(0, {}), 1);
  mute.set_answer_pings(false);
  AsyncRig rig(Options({mute.endpoint()}));
  ASSERT_TRUE(rig.in);
  SearchParams p = Params("q");
  p.timeout_ms = 5000;
  auto log = StartAsync(*rig.in, Parsed(p), rig.loop.post());
  std::this_thread::sleep_for(50ms);  // on the waiter thread now
  const auto t0 = Clock::now();
  rig.in->Stop();
  EXPECT_LT(Clock::now() - t0, 1500ms);  // not the wait's 2 s
  rig.loop.RunFor(200ms);  // Stop posted the answer, if any, before it returned
  std::lock_guard lock(log->mu);
  EXPECT_LE(log->replies.size(), 1u);
  if (!log->replies.empty()) {
    EXPECT_EQ(log->replies[0].status, 503) << log->replies[0].body;
    // Stop ended the wait: a wait run out would have answered that no shard reported.
    EXPECT_NE(log->replies[0].body.find("shutting down"), std::string::npos) << log->replies[0].body;
    EXPECT_TRUE(log->in_closure[0]);
  }
  EXPECT_TRUE(mute.requests().empty());
}

// The query syntax is parsed with the shards' analyzer: a bag of words stays the flat query of
// before (no tree on the wire); +, -, phrases and groups travel as the canonical tree with the
// tree's tokens as terms; a bad query is a 400 naming the position, sent nowhere.
TEST(Integrator, SyntaxTreesTravelToTheShardsAndBagsOfWordsStayFlat) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "d1"}}));
  auto in = Integrator::Start(Options({a.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  auto key = [](const SearchRequestMsg& r) { return r.tree ? CanonicalKey(*r.tree) : std::string("(flat)"); };
  ASSERT_EQ((*in)->Search(Params("Zebra apple", QueryMode::kAnd)).status, 200);
  std::vector<SearchRequestMsg> reqs = a.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(key(reqs[0]), "(flat)");
  EXPECT_FALSE(reqs[0].count);
  EXPECT_EQ(reqs[0].terms, (std::vector<std::string>{"apple", "zebra"}));
  // +a +b is the flat and-query whatever the mode: the cached answer of the first.
  auto r = (*in)->Search(Params("+zebra +apple", QueryMode::kOr));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["cached"], true);
  EXPECT_EQ(a.requests().size(), 1u);

  r = (*in)->Search(Params("+jaguar -car \"New York\" (a b)", QueryMode::kAndOr, 7));
  ASSERT_EQ(r.status, 200) << r.body;
  reqs = a.requests();
  // The fake node sends no OR hits with its one AND hit: a second round asks for OR.
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[2].mode, QueryMode::kOr);
  EXPECT_EQ(key(reqs[2]), key(reqs[1]));
  const SearchRequestMsg& req = reqs[1];
  ASSERT_NE(req.tree, nullptr);
  auto want = ParseQuerySyntax("+jaguar -car \"New York\" (a b)", Analyzer());
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(*req.tree, *want);
  EXPECT_EQ(req.terms, TreeTerms(*want));
  EXPECT_EQ(req.k, 7u);
  EXPECT_EQ(req.mode, QueryMode::kAnd);  // andor's first round
  EXPECT_EQ(req.flags & kFlagAndOrSplit, kFlagAndOrSplit);
  EXPECT_FALSE(req.count);

  for (const char* bad : {"\"new york", "(a b", "a )", "+", ""}) {
    auto e = (*in)->Search(Params(bad));
    EXPECT_EQ(e.status, 400) << bad;
    const json j = json::parse(e.body);
    EXPECT_EQ(j["error"]["type"], "query_shard_exception") << bad;
    if (std::string(bad) != "") {
      EXPECT_NE(e.body.find("position"), std::string::npos) << e.body;
    }
  }
  EXPECT_EQ(a.requests().size(), 3u);
}

// track_total_hits: hits.total is Elasticsearch's {value, relation}, the shards' exact totals
// summed; a shard missing makes it a lower bound ("gte") beside the partial answer's fields.
TEST(Integrator, TrackTotalHitsSumsTheShardsTotals) {
  FakeNode a(0, AnswerCounting(0, {{5, 3.0f, "a5"}}, 41), 2);
  FakeNode b(1, AnswerCounting(1, {{700, 2.0f, "b700"}}, 1000001), 2);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  SearchParams p = Params("apple", QueryMode::kAnd, 10);
  p.track_total_hits = true;
  auto r = (*in)->Search(p);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["hits"]["total"]["value"], 1000042);
  EXPECT_EQ(j["hits"]["total"]["relation"], "eq");
  EXPECT_EQ(j["hits"]["hits"].size(), 2u);
  ASSERT_EQ(a.requests().size(), 1u);
  EXPECT_TRUE(a.requests()[0].count);
  ASSERT_NE(a.requests()[0].tree, nullptr);  // a counted bag of words travels as a tree
  // The cache keeps the total, and keys counted and uncounted answers apart.
  r = (*in)->Search(p);
  j = json::parse(r.body);
  EXPECT_EQ(j["cached"], true);
  EXPECT_EQ(j["hits"]["total"]["value"], 1000042);
  r = (*in)->Search(Params("apple", QueryMode::kAnd, 10));
  j = json::parse(r.body);
  EXPECT_EQ(j["cached"], false);
  EXPECT_EQ(j["hits"]["total"], 2);  // without track_total_hits: the hits returned, as before
  // k 0: the count alone.
  p.k = 0;
  r = (*in)->Search(p);
  j = json::parse(r.body);
  EXPECT_EQ(j["hits"]["total"]["value"], 1000042);
  EXPECT_EQ(j["hits"]["hits"].size(), 0u);
  EXPECT_EQ(a.requests().back().k, 0u);
  // Shard 1 silent past the deadline: a lower bound.
  b.set_delay(5s);
  p.k = 3;
  p.timeout_ms = 200;
  p.q = "pear";
  r = (*in)->Search(p);
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  EXPECT_EQ(j["hits"]["total"]["value"], 41);
  EXPECT_EQ(j["hits"]["total"]["relation"], "gte");
  EXPECT_EQ(j["coverage"]["full"], false);
  EXPECT_EQ(j["_shards"]["failed"], 1);
  b.ReleaseHeld();
}

// /count's answer: {"count": N, "_shards": ...}; k 0 and count on the wire; andor counts the and
// resolution (k 0: never fewer than k and-matches).
TEST(Integrator, CountOnlyAnswersLikeElasticsearchsCount) {
  FakeNode a(0, AnswerCounting(0, {{5, 3.0f, "a5"}}, 3), 2);
  FakeNode b(1, AnswerCounting(1, {}, 4), 2);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  auto parsed = ParseCountQuery({{"q", "+apple -pear"}, {"mode", "andor"}});
  ASSERT_TRUE(parsed.ok());
  auto r = (*in)->HandleSearch(parsed);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["count"], 7);
  EXPECT_EQ(j["_shards"]["total"], 2);
  EXPECT_EQ(j["_shards"]["successful"], 2);
  EXPECT_FALSE(j.contains("hits"));
  ASSERT_EQ(a.requests().size(), 1u);
  EXPECT_EQ(a.requests()[0].k, 0u);
  EXPECT_TRUE(a.requests()[0].count);
  EXPECT_EQ(a.requests()[0].mode, QueryMode::kAnd);
  EXPECT_EQ(a.requests()[0].flags & kFlagAndOrSplit, 0u);
  // The DSL body.
  parsed = ParseCountBody(R"({"query": {"bool": {"must": [{"match": {"contents": "apple"}}],
                                                  "must_not": {"term": {"contents": "pear"}}}}})");
  ASSERT_TRUE(parsed.ok());
  r = (*in)->HandleSearch(parsed);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["count"], 7);
  EXPECT_EQ(*a.requests()[1].tree, *a.requests()[0].tree);  // the same tree as +apple -pear
  parsed = ParseCountBody(R"({"query": {"match": {"contents": "apple"}}, "size": 3})");
  EXPECT_FALSE(parsed.ok());  // a _count body takes query only
}

// POST DSL bodies: size is k (default 10), track_total_hits counts; anything unsupported is a 400
// naming the part; a shard's InvalidArgument (a phrase on an index without positions) is a 400
// with its reason, asked of no other replica.
TEST(Integrator, DslBodiesAndRefusals) {
  std::atomic<int> refusals{0};
  FakeNode a(0, [&](const SearchRequestMsg& req) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg r;
    if (req.tree != nullptr && TreeHasPhrase(*req.tree)) {
      refusals.fetch_add(1);
      r.status = Status::InvalidArgument("phrase query on an index built without positions (--no-positions)");
      return r;
    }
    r.hits = {{1, 1.0f, "d1"}};
    r.has_total = req.count;
    r.total = req.count ? 9 : 0;
    return r;
  });
  FakeNode a2(0, AnswerWith(0, {}));  // a replica of the same shard
  auto in = Integrator::Start(Options({a.endpoint() + "|" + a2.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  auto parsed = ParseSearchBody(R"({"query": {"bool": {"must": {"match": {"contents": {"query": "Apple pie", "operator": "and"}}},
                                                       "filter": [{"term": {"contents": "fresh"}}]}},
                                     "size": 4, "track_total_hits": true})");
  ASSERT_TRUE(parsed.ok()) << parsed.error->reason;
  for (int i = 0; i < 4 && a.requests().size() + a2.requests().size() < 1; ++i) {
    auto r = (*in)->HandleSearch(parsed);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  std::vector<SearchRequestMsg> seen = a.requests();
  for (const auto& q : a2.requests()) seen.push_back(q);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].k, 4u);
  EXPECT_TRUE(seen[0].count);
  ASSERT_NE(seen[0].tree, nullptr);
  EXPECT_EQ(CanonicalKey(*seen[0].tree), "(+(+apple +pie) #fresh)");

  for (const auto& [body, part] : std::vector<std::pair<std::string, std::string>>{
           {R"({"query": {"range": {"contents": {"gte": 1}}}})", "range"},
           {R"({"query": {"match": {"title": "x"}}})", "title"},
           {R"({"query": {"match": {"contents": "x"}}, "from": 10})", "from"}}) {
    auto p = ParseSearchBody(body);
    ASSERT_TRUE(p.ok());
    auto r = (*in)->HandleSearch(p);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "parsing_exception");
    EXPECT_NE(r.body.find(part), std::string::npos) << r.body;
  }
  // The phrase: whichever replica gets it refuses it, and the other is not asked.
  const size_t before = a.requests().size() + a2.requests().size();
  a2.set_answer_pings(false);  // so that the phrase goes to the refusing replica
  std::this_thread::sleep_for(400ms);
  auto r = (*in)->Search(Params("\"apple pie\""));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("without positions"), std::string::npos) << r.body;
  EXPECT_EQ(refusals.load(), 1);
  EXPECT_EQ(a.requests().size() + a2.requests().size(), before + 1);
}

// A node of wire 1.0 ignores trees and counts: its reply to one is a failure naming the version,
// not a wrong answer; its bags of words are served as before.
TEST(Integrator, ANodeWithoutQueryTreesIsNotTrustedWithThem) {
  FakeNode old(0, AnswerCounting(0, {{1, 1.0f, "d1"}}, 5));
  old.set_minor(0);
  auto in = Integrator::Start(Options({old.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  EXPECT_EQ((*in)->Search(Params("apple pear")).status, 200);
  auto r = (*in)->Search(Params("+apple -pear"));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("protocol 1.0, which has no query trees or counts"), std::string::npos) << r.body;
}

// andor with counts, decided on the merged and-hits: enough and-hits over all shards keep the and
// totals; fewer than k take every shard's OR hits and totals.
TEST(Integrator, AndorWithCountsUsesTheTotalsOfTheAnswerTaken) {
  FakeNode a(0, AnswerCounting(0, {{1, 2.0f, "a1"}}, 1, {{1, 2.0f, "a1"}, {2, 1.0f, "a2"}}, 30), 2);
  FakeNode b(1, AnswerCounting(1, {{900, 1.5f, "b900"}}, 1, {{900, 1.5f, "b900"}}, 12), 2);
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  SearchParams p = Params("apple +pear", QueryMode::kAndOr, 2);
  p.track_total_hits = true;
  auto r = (*in)->Search(p);  // 2 and-hits in all: and decides
  json j = json::parse(r.body);
  EXPECT_EQ(j["hits"]["total"]["value"], 2);
  EXPECT_EQ(j["hits"]["hits"].size(), 2u);
  p.k = 3;  // fewer than 3 and-hits: or decides, with its totals
  r = (*in)->Search(p);
  j = json::parse(r.body);
  EXPECT_EQ(j["hits"]["total"]["value"], 42);
  EXPECT_EQ(j["hits"]["total"]["relation"], "eq");
  ASSERT_EQ(j["hits"]["hits"].size(), 3u);
  EXPECT_EQ(j["hits"]["hits"][2]["_id"], "a2");
}

}  // namespace
}  // namespace search
