// The cluster end to end with real processes on loopback: 3 search-node processes (one per shard
// of a random index) and a search-integrator, compared over HTTP with LocalIndex (the single-process
// twin) over the same 3-shard index and over a 1-shard index of the same corpus. Then failures:
// bad parameters, a node killed (SIGKILL) and restarted, a node stopped (SIGSTOP/SIGCONT), every
// node stopped; /metrics of every process; a real Prometheus scraping them (when installed); and
// SIGTERM makes every process exit 0 (checked in TearDown of every test). ClusterLoopsTest: the same
// behind two HTTP loops, with raw-socket HTTP/1.x checks and SIGTERM with searches in flight.
#include <gtest/gtest.h>

#include <dirent.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <string_view>
#include <zmq.hpp>

#include "../prometheus_text.hpp"
#include "../thread_cpus.hpp"
#include "cluster_expect.hpp"
#include "cluster_harness.hpp"
#include "core/cpu_home.hpp"
#include "core/cpus.hpp"
#include "core/fd_table.hpp"
#include "core/url_encode.hpp"
#include "cpu_exec/local_index.hpp"
#include "integrator/integrator.hpp"
#include "proto/wire.hpp"

namespace search::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kShards = 3;
constexpr size_t kDocs = 3000;

SharedIndex* g_index = nullptr;

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_index = new SharedIndex;
    g_index->Build(kDocs, 20240501, kShards);
  }
  static void TearDownTestSuite() {
    delete g_index;
    g_index = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(g_index->local3, nullptr);
    run_ = std::make_unique<TempDir>();
    nodes_.resize(kShards);
    endpoints_.resize(kShards);
    node_metrics_.resize(kShards);
    for (uint32_t i = 0; i < kShards; ++i) ASSERT_NO_FATAL_FAILURE(StartNode(i, "tcp://127.0.0.1:*"));
    std::string shards;
    for (const auto& e : endpoints_) shards += (shards.empty() ? "" : ",") + e;
    integrator_ = std::make_unique<Process>();
    std::vector<std::string> args = {SEARCH_INTEGRATOR_BIN, "--shards",     shards, "--http", "127.0.0.1:0",
                                     "--metrics",           "127.0.0.1:0",  "--ping-ms", "200", "--cache-mb",
                                     "16",                  "--http-keep-alive-requests", "3"};
    args.insert(args.end(), integrator_extra_.begin(), integrator_extra_.end());
    ASSERT_TRUE(integrator_->Start(args, run_->path() + "/integrator"));
    auto ready = integrator_->WaitReady();
    ASSERT_TRUE(ready.has_value()) << integrator_->Logs();
    http_port_ = PortOf(ready->at("http").get<std::string>());
    metrics_port_ = PortOf(ready->at("metrics").get<std::string>());
    ready_lanes_ = ready->value("fanout_lanes", 0u);
    ready_line_ = *ready;
    ASSERT_TRUE(WaitHealth("green", 15s)) << Fetch(http_port_, "/health").raw << integrator_->Logs();
  }

  void TearDown() override {
    // SIGTERM: every live process drains and exits 0.
    StopGracefully(integrator_.get(), nodes_);
  }

  static int PortOf(const std::string& host_port) { return std::stoi(host_port.substr(host_port.rfind(':') + 1)); }

  void StartNode(uint32_t i, const std::string& listen) {
    nodes_[i] = std::make_unique<Process>();
    std::vector<std::string> args = {SEARCH_NODE_BIN, "--index", g_index->index3 + "/shard-" + std::to_string(i),
                                     "--listen", listen, "--metrics", "127.0.0.1:0", "--threads", "2"};
    args.insert(args.end(), node_extra_.begin(), node_extra_.end());
    ASSERT_TRUE(
        nodes_[i]->Start(args, run_->path() + "/node" + std::to_string(i) + "-" + std::to_string(++starts_)));
    auto ready = nodes_[i]->WaitReady();
    ASSERT_TRUE(ready.has_value()) << nodes_[i]->Logs();
    endpoints_[i] = ready->at("listen").get<std::string>();
    node_metrics_[i] = PortOf(ready->at("metrics").get<std::string>());
  }

  bool WaitHealth(const std::string& status, std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      auto h = Fetch(http_port_, "/health");
      if (h.status == 200 && h.body.is_object() && h.body["status"] == status) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  HttpResult Search(const std::string& q, QueryMode mode, uint32_t k, bool post = false, int timeout_ms = 0) {
    if (post) {
      json body = {{"q", q}, {"k", k}, {"mode", std::string(QueryModeName(mode))}};
      if (timeout_ms) body["timeout_ms"] = timeout_ms;
      const std::string s = body.dump();
      return Fetch(http_port_, "/search", {}, &s);
    }
    httplib::Params p{{"q", q}, {"k", std::to_string(k)}, {"mode", std::string(QueryModeName(mode))}};
    if (timeout_ms) p.emplace("timeout_ms", std::to_string(timeout_ms));
    return Fetch(http_port_, "/search", p);
  }

  static std::vector<ExternalHit> Expected(const LocalIndex& index, const std::string& q, QueryMode mode, uint32_t k) {
    return ExpectedHits(index, q, mode, k);
  }



  std::vector<std::string> node_extra_;        // more search-node flags (a derived fixture's)
  std::vector<std::string> integrator_extra_;  // more search-integrator flags (a derived fixture's)
  std::unique_ptr<TempDir> run_;
  std::vector<std::unique_ptr<Process>> nodes_;
  std::vector<std::string> endpoints_;
  std::vector<int> node_metrics_;
  std::unique_ptr<Process> integrator_;
  int http_port_ = 0, metrics_port_ = 0, starts_ = 0;
  unsigned ready_lanes_ = 0;  // the integrator's ready line's fanout_lanes
  json ready_line_;  // the integrator's whole ready line
};

TEST_F(ClusterTest, AnswersEqualSingleProcessInEveryMode) {
  // The integrator sizes its fan-out lanes to the CPUs it may use (inherited here).
  EXPECT_EQ(ready_lanes_, DefaultFanoutLanes(AvailableCores()));
  std::mt19937 rng(99);
  const uint32_t ks[] = {1, 3, 10, 10, 50, 1000};
  size_t nonempty = 0, cached = 0;
  for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
    for (int i = 0; i < 1000; ++i) {
      const std::string q = RandomQuery(g_index->corpus, rng);
      const uint32_t k = ks[rng() % std::size(ks)];
      const std::string what = std::string(QueryModeName(mode)) + " k=" + std::to_string(k) + " q='" + q + "'";
      auto r = Search(q, mode, k, /*post=*/i % 2 == 1);
      ASSERT_EQ(r.status, 200) << what << " " << r.raw;
      ASSERT_EQ(r.body["timed_out"], false) << what;
      ASSERT_EQ(r.body["_shards"]["successful"], kShards) << what;
      cached += r.body["cached"] == true;
      const auto want3 = Expected(*g_index->local3, q, mode, k);
      ASSERT_NO_FATAL_FAILURE(ExpectSameHits(r.body["hits"]["hits"], want3, what + " vs 3-shard LocalIndex"));
      ASSERT_NO_FATAL_FAILURE(
          ExpectSameHits(r.body["hits"]["hits"], Expected(*g_index->local1, q, mode, k), what + " vs 1-shard index"));
      nonempty += !want3.empty();
    }
  }
  EXPECT_GT(nonempty, 2000u);  // the queries exercise real answers, not just empty ones
  EXPECT_GT(cached, 0u);       // random queries repeat: some came from the cache, equal all the same
}

// The nodes through the scheduler (--scheduler cpu): the thread that finishes a query answers it. Every mode equals the single-process answers (andor's split runs on the
// worker, the rest through SubmitAsync), and the nodes drain and exit 0 at TearDown.
class ClusterAsyncTest : public ClusterTest {
 protected:
  ClusterAsyncTest() { node_extra_ = {"--scheduler", "cpu", "--tuning", "calibration_queries=8"}; }
};

TEST_F(ClusterAsyncTest, AnswersEqualSingleProcessThroughTheAsyncScheduler) {
  std::mt19937 rng(7);
  size_t nonempty = 0;
  for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
    for (int i = 0; i < 200; ++i) {
      const std::string q = RandomQuery(g_index->corpus, rng);
      const uint32_t k = i % 2 == 0 ? 10 : 3;
      const std::string what = std::string(QueryModeName(mode)) + " k=" + std::to_string(k) + " q='" + q + "'";
      auto r = Search(q, mode, k);
      ASSERT_EQ(r.status, 200) << what << " " << r.raw;
      ASSERT_EQ(r.body["_shards"]["successful"], kShards) << what;
      const auto want = Expected(*g_index->local3, q, mode, k);
      ASSERT_NO_FATAL_FAILURE(ExpectSameHits(r.body["hits"]["hits"], want, what));
      nonempty += !want.empty();
    }
  }
  EXPECT_GT(nonempty, 300u);
  // The nodes' scheduler ran the jobs (not the CPU engine directly). One search at a time finds
  // each node idle, so its I/O thread handed searches on itself (node_server.hpp); absent series
  // read -1.
  for (uint32_t i = 0; i < kShards; ++i) {
    auto n = Fetch(node_metrics_[i], "/metrics");
    ASSERT_EQ(n.status, 200);
    EXPECT_GE(SeriesValue(n.raw, R"(search_sched_jobs_total{processor="cpu"})"), 100.0) << "node " << i;
    EXPECT_GE(SeriesValue(n.raw, "search_node_io_thread_requests_total"), 100.0) << "node " << i;
  }
  // At rest, each process's chain of threads shares one CPU (core/cpu_home.hpp): a node's I/O
  // thread with its ZeroMQ I/O thread; in the integrator each fan-out lane's I/O thread with its
  // ZeroMQ I/O thread and the HTTP loops that feed it.
  if (AvailableCores() < 2) GTEST_SKIP() << "CPU homes need 2 CPUs";
  auto one_cpu = [](const std::string& cpus) { return !cpus.empty() && cpus.find_first_of(",-") == std::string::npos; };
  auto at_home = [&](pid_t pid, bool integrator, std::string* why) {
    const auto threads = testing::ThreadsOf(pid);
    std::set<std::string> homes;  // the CPUs of the chains' I/O threads
    for (const auto& t : threads)
      if (t.name == (integrator ? "fanout-io" : "node-io")) homes.insert(t.cpus);
    size_t members = 0;
    for (const auto& t : threads) {
      const bool member = t.name == "fanout-io" || t.name == "node-io" || t.name.rfind("http-loop", 0) == 0 ||
                          t.name.find("/ZMQbg/IO/0") != std::string::npos;
      if (!member) continue;
      ++members;
      if (!one_cpu(t.cpus) || !homes.count(t.cpus)) {
        *why = t.name + " on " + t.cpus;
        return false;
      }
    }
    *why = std::to_string(members) + " threads";
    return members >= (integrator ? 3u : 2u);
  };
  std::vector<pid_t> pids{integrator_->pid()};
  for (const auto& n : nodes_) pids.push_back(n->pid());
  for (size_t i = 0; i < pids.size(); ++i) {
    std::string why;
    bool home = false;
    for (auto until = std::chrono::steady_clock::now() + 20s; !home && std::chrono::steady_clock::now() < until;) {
      home = at_home(pids[i], i == 0, &why);
      if (!home) std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(home) << (i == 0 ? "integrator: " : "node: ") << why;
  }
  // Their metrics say so: the integrator's lanes and each node at home (pinned 1).
  auto im = Fetch(metrics_port_, "/metrics");
  ASSERT_EQ(im.status, 200);
  for (unsigned lane = 0; lane < ready_lanes_; ++lane)
    EXPECT_EQ(SeriesValue(im.raw, "search_integrator_cpu_home_pinned{lane=\"" + std::to_string(lane) + "\"}"), 1.0) << lane;
  for (uint32_t i = 0; i < kShards; ++i) {
    auto n = Fetch(node_metrics_[i], "/metrics");
    ASSERT_EQ(n.status, 200);
    EXPECT_EQ(SeriesValue(n.raw, "search_node_cpu_home_pinned"), 1.0) << "node " << i;
  }
  // One home a host: the integrator's chains and every node's on the same CPU.
  std::set<std::string> host_homes;
  for (size_t i = 0; i < pids.size(); ++i)
    host_homes.insert(testing::CpusOfThreads(testing::ThreadsOf(pids[i]), i == 0 ? "fanout-io" : "node-io"));
  ASSERT_EQ(host_homes.size(), 1u);
  const std::string home_cpu = *host_homes.begin();
  // Serving now and then, each process gets its poller (cpu-home-poll, SCHED_IDLE, on the home CPU;
  // one a process, which its chains share) and its metrics read polling 1.
  if (!testing::SchedIdleAllowed()) GTEST_SKIP() << "SCHED_IDLE refused here: no pollers";
  auto pollers = [&](pid_t pid, std::string* why) {
    size_t n = 0;
    for (const testing::ThreadCpus& t : testing::ThreadsOf(pid)) {
      if (t.name != CpuHome::kPollerName) continue;
      ++n;
      if (sched_getscheduler(t.tid) != SCHED_IDLE) *why = "a poller not at SCHED_IDLE";
      if (t.cpus != home_cpu) *why = "a poller on " + t.cpus + ", home " + home_cpu;
    }
    if (n > 1) *why = std::to_string(n) + " pollers in one process (one a home CPU)";
    return n > 0 && why->empty();
  };
  bool polled = false;
  std::string why;
  for (auto until = std::chrono::steady_clock::now() + 20s; !polled && std::chrono::steady_clock::now() < until;) {
    for (int i = 0; i < 10; ++i) {
      ASSERT_EQ(Search(RandomQuery(g_index->corpus, rng), QueryMode::kAnd, 10).status, 200);
      std::this_thread::sleep_for(10ms);
    }
    why.clear();
    polled = true;
    for (size_t i = 0; i < pids.size() && polled; ++i) {
      polled = pollers(pids[i], &why);
      if (!polled && why.empty()) why = (i == 0 ? "integrator" : "node") + std::string(": no poller");
    }
    if (!polled) continue;
    auto mi = Fetch(metrics_port_, "/metrics");
    polled = mi.status == 200 && SeriesValue(mi.raw, R"(search_integrator_cpu_home_polling{lane="0"})") == 1.0;
    for (uint32_t i = 0; i < kShards && polled; ++i)
      polled = SeriesValue(Fetch(node_metrics_[i], "/metrics").raw, "search_node_cpu_home_polling") == 1.0;
    if (!polled) why = "metrics: polling not 1";
  }
  EXPECT_TRUE(polled) << why;
}

TEST_F(ClusterTest, RepeatedQueryIsCachedAndEqual) {
  auto miss = Search("w1 w2 w3", QueryMode::kOr, 20);
  auto hit = Search("W3 w2, w1 w1", QueryMode::kOr, 20, /*post=*/true);
  ASSERT_EQ(miss.status, 200);
  ASSERT_EQ(hit.status, 200);
  EXPECT_EQ(miss.body["cached"], false);
  EXPECT_EQ(hit.body["cached"], true);
  EXPECT_EQ(hit.body["hits"], miss.body["hits"]);
  EXPECT_EQ(hit.body["_shards"]["successful"], kShards);
  EXPECT_EQ(Search("w1 w2 w3", QueryMode::kOr, 21).body["cached"], false);  // k is part of the key
  EXPECT_EQ(Search("w1 w2 w3", QueryMode::kAnd, 20).body["cached"], false);  // so is the mode
  auto stats = Fetch(http_port_, "/stats");
  ASSERT_EQ(stats.status, 200);
  EXPECT_GE(stats.body["cache"]["hits"].get<int>(), 1);
  EXPECT_GE(stats.body["cache"]["entries"].get<int>(), 3);
}

// Bad /search parameters (GET) and bodies (POST) to the integrator on `port`: each a 400 with a
// JSON error naming its type and reason.
void ExpectBadSearchesRefused(int port) {
  const std::vector<httplib::Params> bad = {
      {},
      {{"k", "5"}},
      {{"q", "w1"}, {"k", "abc"}},
      {{"q", "w1"}, {"k", "0"}},
      {{"q", "w1"}, {"k", "10001"}},
      {{"q", "w1"}, {"k", "1e3"}},
      {{"q", "w1"}, {"mode", "xor"}},
      {{"q", "w1"}, {"timeout_ms", "0"}},
      {{"q", "w1"}, {"timeout_ms", "999999"}},
      {{"q", "w1"}, {"bogus", "1"}},
  };
  for (const auto& p : bad) {
    auto r = Fetch(port, "/search", p);
    EXPECT_EQ(r.status, 400) << r.raw;
    ASSERT_TRUE(r.body.is_object()) << r.raw;
    EXPECT_TRUE(r.body["error"]["type"].is_string()) << r.raw;
    EXPECT_FALSE(r.body["error"]["reason"].get<std::string>().empty()) << r.raw;
  }
  for (const std::string& body : {std::string("{not json"), std::string("[1]"), std::string(R"({"q": 1})"),
                                 std::string(R"({"q": "w1", "k": 1.5})"), std::string(R"({"q": "w1", "mode": "x"})"),
                                 std::string(50000, '['), "{\"q\": \"" + std::string(70 * 1024, 'a') + "\"}"}) {
    auto r = Fetch(port, "/search", {}, &body);
    EXPECT_EQ(r.status, 400) << body.substr(0, 60) << " -> " << r.raw.substr(0, 200);
    ASSERT_TRUE(r.body.is_object() && r.body["error"].is_object()) << r.raw.substr(0, 200);
    EXPECT_FALSE(r.body["error"]["reason"].get<std::string>().empty()) << r.raw.substr(0, 200);
  }
}

TEST_F(ClusterTest, BadParametersAre400AndTheClusterKeepsServing) {
  ExpectBadSearchesRefused(http_port_);
  // A GET URI past the HTTP server's limit, an unknown route, an oversized body: errors, not hangs.
  EXPECT_GE(Fetch(http_port_, "/search", {{"q", std::string(20000, 'w')}}).status, 400);
  EXPECT_EQ(Fetch(http_port_, "/nope").status, 404);
  const std::string huge = "{\"q\": \"" + std::string(2 << 20, 'a') + "\"}";
  auto big = Fetch(http_port_, "/search", {}, &huge);
  EXPECT_TRUE(big.status == 413 || big.status == 0) << big.status;
  // Still serving, with the right answer.
  auto ok = Search("w5 w7", QueryMode::kOr, 10);
  ASSERT_EQ(ok.status, 200);
  ExpectSameHits(ok.body["hits"]["hits"], Expected(*g_index->local3, "w5 w7", QueryMode::kOr, 10), "after bad input");
}

// The integrator grows its descriptor table for its HTTP connections before its threads start
// (a growth under load would stall its accepting thread for an RCU grace period), though the test
// has opened few connections: room for 4,096 connections (2 x 2,048 + 256).
TEST_F(ClusterTest, IntegratorsDescriptorTableIsGrownAtStart) {
  EXPECT_GE(FdTableSlots(integrator_->pid()), 2 * 2048 + 256);
}

// The expected answer when shard `down` is missing: the best k of the other shards' documents.
std::vector<ExternalHit> ExpectedWithout(uint32_t down, const std::string& q, QueryMode mode, uint32_t k) {
  const auto& sh = g_index->local3->manifest().shards[down];
  auto all = g_index->local3->Search(q, mode, kMaxK);
  std::vector<ScoredDoc> keep;
  for (const auto& h : all->hits)
    if ((h.doc < sh.doc_begin || h.doc >= sh.doc_end) && keep.size() < k) keep.push_back(h);
  return *g_index->local3->Resolve(keep);
}

TEST_F(ClusterTest, KilledNodeGivesPartialAnswersThenRecoversAfterRestart) {
  nodes_[1]->Signal(SIGKILL);
  ASSERT_TRUE(nodes_[1]->Wait(5s).has_value());
  std::mt19937 rng(5);
  for (int i = 0; i < 30; ++i) {
    const std::string q = RandomQuery(g_index->corpus, rng);
    const QueryMode mode = i % 2 ? QueryMode::kOr : QueryMode::kAnd;
    auto r = Search(q, mode, 10, false, 500);
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_LT(r.seconds, 10.0);  // the killed node fails at once or at the deadline: never a hang
    EXPECT_EQ(r.body["_shards"]["failed"], 1) << r.raw;
    EXPECT_EQ(r.body["_shards"]["successful"], kShards - 1);
    EXPECT_EQ(r.body["cached"], false);
    ASSERT_EQ(r.body["_shards"]["failures"].size(), 1u);
    EXPECT_EQ(r.body["_shards"]["failures"][0]["shard"], 1);
    EXPECT_FALSE(r.body["_shards"]["failures"][0]["reason"].get<std::string>().empty());
    ExpectSameHits(r.body["hits"]["hits"], ExpectedWithout(1, q, mode, 10), "partial " + q);
  }
  EXPECT_TRUE(WaitHealth("yellow", 10s)) << Fetch(http_port_, "/health").raw;
  auto health = Fetch(http_port_, "/health");
  EXPECT_EQ(health.body["shards"][1]["state"], "down");
  // Readiness probes: ready while some shard is up, not while a shard is missing where green is asked.
  EXPECT_EQ(Fetch(http_port_, "/health", {{"wait_for_status", "yellow"}}).status, 200);
  auto not_green = Fetch(http_port_, "/health", {{"wait_for_status", "green"}});
  EXPECT_EQ(not_green.status, 503) << not_green.raw;
  EXPECT_EQ(not_green.body["status"], "yellow");
  EXPECT_EQ(health.body["shards"][0]["state"], "up");

  // Restart the node on the same endpoint: complete answers again.
  ASSERT_NO_FATAL_FAILURE(StartNode(1, endpoints_[1]));
  ASSERT_TRUE(WaitHealth("green", 15s)) << Fetch(http_port_, "/health").raw;
  auto r = Search("w2 w9", QueryMode::kOr, 10);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["_shards"]["failed"], 0);
  ExpectSameHits(r.body["hits"]["hits"], Expected(*g_index->local3, "w2 w9", QueryMode::kOr, 10), "after restart");
}

// A stopped node (SIGSTOP) fails its part at the deadline; the node answers late once resumed and the
// integrator drops those replies. Each stop is waited for (kill() returns before the process has
// stopped) and kept short: the fan-out's ZeroMQ heartbeat drops a silent node's connection after
// about 3 s, and with it the replies owed.
TEST_F(ClusterTest, StoppedNodeTimesOutWithinTheDeadlineThenRecovers) {
  const auto partial = ExpectedWithout(2, "w3 w4", QueryMode::kOr, 10);
  const auto complete = Expected(*g_index->local3, "w3 w4", QueryMode::kOr, 10);
  nodes_[2]->Signal(SIGSTOP);
  ASSERT_TRUE(nodes_[2]->WaitStopped(10s));
  auto r = Search("w3 w4", QueryMode::kOr, 10, false, 300);
  nodes_[2]->Signal(SIGCONT);  // before the checks: the stop stays short
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["timed_out"], true) << r.raw;
  EXPECT_EQ(r.body["_shards"]["failed"], 1);
  EXPECT_EQ(r.body["_shards"]["failures"][0]["shard"], 2);
  // The query phase's deadline ends the wait (the stopped node never answers): 4/5 of the 300 ms,
  // the rest is kept for fetching the other shards' sources.
  EXPECT_GE(r.seconds, 0.235);
  EXPECT_LT(r.seconds, 10.0);
  ExpectSameHits(r.body["hits"]["hits"], partial, "stopped node");
  const auto end = Clock::now() + 15s;
  HttpResult ok;
  while (Clock::now() < end) {
    ok = Search("w3 w4", QueryMode::kOr, 10, false, 500);
    if (ok.status == 200 && ok.body["_shards"]["failed"] == 0) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(ok.body["_shards"]["failed"], 0) << ok.raw;
  EXPECT_EQ(ok.body["timed_out"], false);
  ExpectSameHits(ok.body["hits"]["hits"], complete, "after SIGCONT");
  // The stopped node answered the queued request late: the integrator dropped it by request id.
  const auto end2 = Clock::now() + 10s;
  int late = 0;
  while (Clock::now() < end2 && late == 0) {
    late = Fetch(http_port_, "/stats").body["late_replies_total"].get<int>();
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GE(late, 1);
  // Stopped again: a few more, POST too, all answered by their deadline; then it recovers again.
  nodes_[2]->Signal(SIGSTOP);
  ASSERT_TRUE(nodes_[2]->WaitStopped(10s));
  for (int i = 0; i < 3; ++i) {
    auto again = Search("w" + std::to_string(10 + i), QueryMode::kAnd, 5, true, 200);
    ASSERT_EQ(again.status, 200);
    EXPECT_EQ(again.body["_shards"]["failed"], 1);
    EXPECT_LT(again.seconds, 10.0);
  }
  nodes_[2]->Signal(SIGCONT);
  EXPECT_TRUE(WaitHealth("green", 15s)) << Fetch(http_port_, "/health").raw;
}

TEST_F(ClusterTest, NoNodeLeftIs503) {
  for (auto& n : nodes_) n->Signal(SIGKILL);
  for (auto& n : nodes_) ASSERT_TRUE(n->Wait(5s).has_value());
  auto r = Search("w1", QueryMode::kOr, 10, false, 300);
  EXPECT_EQ(r.status, 503) << r.raw;
  EXPECT_LT(r.seconds, 10.0);  // at the deadline at the latest, never a hang
  EXPECT_EQ(r.body["error"]["type"], "search_phase_execution_exception");
  EXPECT_EQ(r.body["_shards"]["failed"], kShards);
  EXPECT_TRUE(WaitHealth("red", 10s));
  EXPECT_EQ(Fetch(http_port_, "/health", {{"wait_for_status", "yellow"}}).status, 503);
  EXPECT_EQ(Fetch(http_port_, "/health", {{"wait_for_status", "red"}}).status, 200);
  EXPECT_EQ(Fetch(http_port_, "/health", {{"wait_for_status", "orange"}}).status, 400);
}

TEST_F(ClusterTest, HealthStatsAndStatusPage) {
  auto h = Fetch(http_port_, "/health");
  ASSERT_EQ(h.status, 200);
  ASSERT_EQ(h.body["shards"].size(), kShards);
  EXPECT_EQ(Fetch(http_port_, "/health", {{"wait_for_status", "green"}}).status, 200);
  for (uint32_t i = 0; i < kShards; ++i) {
    EXPECT_EQ(h.body["shards"][i]["shard"], i);
    EXPECT_EQ(h.body["shards"][i]["endpoint"], endpoints_[i]);
    EXPECT_EQ(h.body["shards"][i]["state"], "up");
    EXPECT_GE(h.body["shards"][i]["last_seen_ms"].get<int>(), 0);
  }
  for (int i = 0; i < 20; ++i) {
    std::string term = "w";  // not "w" + to_string(...): a -Wrestrict false positive in GCC 12's inlining
    term += std::to_string(i % 4);
    ASSERT_EQ(Search(term, QueryMode::kOr, 10).status, 200);
  }
  auto s = Fetch(http_port_, "/stats");
  ASSERT_EQ(s.status, 200);
  EXPECT_GE(s.body["requests_total"].get<int>(), 20);
  EXPECT_GT(s.body["cache"]["hit_ratio"].get<double>(), 0.5);  // 16 of 20 were repeats
  EXPECT_GT(s.body["latency_ms"]["p50"].get<double>(), 0.0);
  auto page = Fetch(http_port_, "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.raw.find("<html"), std::string::npos);
  EXPECT_NE(page.raw.find("get('/health')"), std::string::npos);
  EXPECT_NE(page.raw.find("get('/stats')"), std::string::npos);
}

TEST_F(ClusterTest, EveryProcessServesMetrics) {
  ASSERT_EQ(Search("w1 w2", QueryMode::kAnd, 10).status, 200);
  ASSERT_EQ(Search("w1 w2", QueryMode::kAnd, 10).status, 200);
  ASSERT_EQ(Fetch(http_port_, "/search", {{"q", "x"}, {"k", "0"}}).status, 400);
  auto m = Fetch(metrics_port_, "/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* series : {"search_requests_total{", "search_request_duration_seconds_bucket{",
                             "search_shard_request_duration_seconds_bucket{", "search_shard_up{",
                             "search_result_cache_hits_total", "search_result_cache_bytes", "search_inflight_requests",
                             "search_late_replies_total", "search_bad_requests_total{"})
    EXPECT_NE(m.raw.find(series), std::string::npos) << series;
  EXPECT_NE(m.raw.find("\nsearch_result_cache_hits_total 1\n"), std::string::npos) << m.raw;
  // Where the searches' time went: every phase observed (the node's own times on one round in 8:
  // eight more searches, none answered from the cache, make sure of one).
  for (int i = 0; i < 8; ++i) ASSERT_EQ(Search("w" + std::to_string(i + 3), QueryMode::kOr, 10).status, 200);
  m = Fetch(metrics_port_, "/metrics");
  for (const char* phase : {"parse", "to_lane", "node_queue", "engine", "transport", "to_loop", "fetch", "answer"}) {
    const std::string series =
        std::string("search_request_phase_seconds_count{component=\"integrator\",phase=\"") + phase + "\"}";
    EXPECT_GE(SeriesValue(m.raw, series), 1.0) << series;  // -1 when absent
  }
  for (uint32_t i = 0; i < kShards; ++i) {
    auto n = Fetch(node_metrics_[i], "/metrics");
    ASSERT_EQ(n.status, 200);
    EXPECT_NE(n.raw.find("search_requests_total{"), std::string::npos);
    EXPECT_NE(n.raw.find("search_node_execution_seconds"), std::string::npos);
  }
}

TEST_F(ClusterTest, PrometheusScrapesTheCluster) {
  const std::string prom = "/usr/bin/prometheus";
  if (access(prom.c_str(), X_OK) != 0) GTEST_SKIP() << "no Prometheus binary at " << prom;
  // A free port for Prometheus' own web server.
  const int port = FreePort();
  ASSERT_GT(port, 0);
  std::string targets = "'127.0.0.1:" + std::to_string(metrics_port_) + "'";
  for (int p : node_metrics_) targets += ", '127.0.0.1:" + std::to_string(p) + "'";
  const std::string cfg = run_->path() + "/prometheus.yml";
  std::ofstream(cfg) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                     << "scrape_configs:\n  - job_name: search\n    static_configs:\n      - targets: [" << targets
                     << "]\n";
  Process p;
  ASSERT_TRUE(p.Start({prom, "--config.file=" + cfg, "--storage.tsdb.path=" + run_->path() + "/tsdb",
                       "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
                      run_->path() + "/prometheus"));
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Search("w1", QueryMode::kOr, 10).status, 200);
  const auto end = Clock::now() + 60s;
  bool all_up = false, ours = false;
  while (Clock::now() < end && !(all_up && ours)) {
    auto up = Fetch(port, "/api/v1/query", {{"query", "up"}});
    if (up.status == 200 && up.body["status"] == "success") {
      const auto& res = up.body["data"]["result"];
      all_up = res.size() == kShards + 1 &&
               std::all_of(res.begin(), res.end(), [](const json& s) { return s["value"][1] == "1"; });
    }
    auto q = Fetch(port, "/api/v1/query", {{"query", "sum(search_requests_total{component=\"integrator\"})"}});
    ours = q.status == 200 && q.body["status"] == "success" && !q.body["data"]["result"].empty() &&
           std::stod(q.body["data"]["result"][0]["value"][1].get<std::string>()) >= 5;
    if (!(all_up && ours)) std::this_thread::sleep_for(250ms);
    ASSERT_TRUE(p.running()) << p.Logs();
  }
  EXPECT_TRUE(all_up) << Fetch(port, "/api/v1/query", {{"query", "up"}}).raw;
  EXPECT_TRUE(ours);
  p.Signal(SIGTERM);
  EXPECT_TRUE(p.Wait(20s).has_value());
}

// ---------------------------------------------------------------------------------------------
// The same cluster behind two of the integrator's HTTP event loops (--http-loops 2,
// integrator/src/http_loops.hpp): exact answers from concurrent clients, bad input,
// HTTP/1.x details over raw sockets (pipelining, Connection: close, HTTP/1.0, a byte at a time,
// chunked bodies, garbage, HEAD, clients that go away), keep-alive's request count, and SIGTERM
// with searches in flight. TearDown's SIGTERM checks that it drains and exits 0 here too.
class ClusterLoopsTest : public ClusterTest {
 protected:
  ClusterLoopsTest() { integrator_extra_ = {"--http-loops", "2"}; }

  // The integrator under test runs the two loops asked for.
  void ExpectLoopsEngine() {
    EXPECT_EQ(ready_line_.value("http_loops", 0), 2) << ready_line_.dump();
  }
};

// One answer read off a raw connection.
struct RawAnswer {
  std::string status_line;  // e.g. "HTTP/1.1 200 OK"
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// A raw HTTP client on one TCP connection to 127.0.0.1:port: sends the bytes it is given and parses
// what comes back itself (status line, headers, a Content-Length body; bytes past one answer are
// kept for the next).
class RawConn {
 public:
  explicit RawConn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    int one = 1;
    if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  ~RawConn() { Close(); }

  bool ok() const { return fd_ >= 0; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Half-close: the server sees EOF after what was sent, and may still answer.
  void ShutdownWrite() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
  }

  // reset: SO_LINGER 0, so the close sends RST instead of FIN.
  void Close(bool reset = false) {
    if (fd_ < 0) return;
    if (reset) {
      linger l{1, 0};
      ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    ::close(fd_);
    fd_ = -1;
  }

  // The next answer, or nullopt (why() says why) when the connection ended, failed or `limit`
  // passed before one was complete. head: the request was a HEAD (no body, whatever
  // Content-Length says).
  std::optional<RawAnswer> Read(bool head = false, std::chrono::milliseconds limit = std::chrono::seconds(15)) {
    const auto deadline = Clock::now() + limit;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!Fill(deadline)) return Fail("before the end of the headers");
    RawAnswer a;
    std::istringstream lines(buf_.substr(0, end + 2));
    std::string line;
    std::getline(lines, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    a.status_line = line;
    if (line.size() < 12 || line.compare(0, 5, "HTTP/") != 0) return Fail("bad status line '" + line + "'");
    a.status = std::atoi(line.c_str() + 9);
    while (std::getline(lines, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) return Fail("bad header line '" + line + "'");
      std::string name = line.substr(0, colon), value = line.substr(colon + 1);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t") + 1);
      if (a.headers.count(name)) return Fail("header " + name + " twice");
      a.headers[name] = value;
    }
    if (!a.Header("transfer-encoding").empty()) return Fail("a Transfer-Encoding answer");
    const std::string cl = a.Header("content-length");
    if (cl.empty() || cl.find_first_not_of("0123456789") != std::string::npos)
      return Fail("no valid Content-Length ('" + cl + "')");
    const size_t len = head ? 0 : std::stoul(cl);
    while (buf_.size() < end + 4 + len)
      if (!Fill(deadline))
        return Fail("in the body: " + std::to_string(buf_.size() - end - 4) + " of " + std::to_string(len) + " bytes");
    a.body = buf_.substr(end + 4, len);
    buf_.erase(0, end + 4 + len);
    return a;
  }

  // True when the server closes the connection cleanly (EOF, not a reset) within `limit` without
  // sending anything more.
  bool ReadsEof(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto deadline = Clock::now() + limit;
    while (buf_.empty())
      if (!Fill(deadline)) return eof_;
    why_ = "bytes after the last answer: '" + buf_.substr(0, 80) + "'";
    return false;
  }

  const std::string& why() const { return why_; }
  const std::string& pending() const { return buf_; }

 private:
  std::optional<RawAnswer> Fail(const std::string& what) {
    why_ = "no complete answer (" + what + "; " + why_ + "); read: '" + buf_.substr(0, 200) + "'";
    return std::nullopt;
  }
  // Reads what arrives into buf_; false at EOF (eof_), on an error or at the deadline.
  bool Fill(Clock::time_point deadline) {
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        why_ = "timed out";
        return false;
      }
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) continue;
      char tmp[16384];
      const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n > 0) {
        buf_.append(tmp, static_cast<size_t>(n));
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      eof_ = n == 0;  // a clean close (FIN), not a reset
      why_ = n == 0 ? "EOF" : std::string("recv: ") + std::strerror(errno);
      return false;
    }
  }

  int fd_ = -1;
  std::string buf_;
  bool eof_ = false;
  std::string why_;
};

std::string SearchTarget(const std::string& q, QueryMode mode, uint32_t k, int timeout_ms = 0) {
  std::string t = "/search?q=" + UrlEncode(q) + "&mode=" + std::string(QueryModeName(mode)) + "&k=" + std::to_string(k);
  if (timeout_ms) t += "&timeout_ms=" + std::to_string(timeout_ms);
  return t;
}

std::string GetRequest(const std::string& target, const std::string& extra_headers = "", const char* version = "1.1") {
  return "GET " + target + " HTTP/" + version + "\r\nHost: 127.0.0.1\r\n" + extra_headers + "\r\n";
}

// A raw answer is a complete 200 search answer with the single-process hits of (q, mode, k).
void ExpectRawSearch(const std::optional<RawAnswer>& a, const std::string& why, const std::string& q, QueryMode mode,
                     uint32_t k, const std::string& what) {
  ASSERT_TRUE(a.has_value()) << what << ": " << why;
  ASSERT_EQ(a->status, 200) << what << ": " << a->status_line << " " << a->body;
  EXPECT_EQ(a->Header("content-type"), "application/json") << what;
  const json body = json::parse(a->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << what << ": " << a->body;
  EXPECT_EQ(body["_shards"]["successful"], kShards) << what;
  ExpectSameHits(body["hits"]["hits"], ExpectedHits(*g_index->local3, q, mode, k), what);
}

// 60 random searches (and, or, andor; GET and POST) from 3 client threads at once, every answer the
// single-process one; /health, /stats, the status page and an unknown route.
TEST_F(ClusterLoopsTest, LoopsEngineAnswersEqualSingleProcessFromConcurrentClients) {
  ExpectLoopsEngine();
  std::atomic<size_t> nonempty{0}, checked{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(300 + t);
      const uint32_t ks[] = {1, 3, 10, 50};
      for (int i = 0; i < 20; ++i) {
        const QueryMode mode = i % 3 == 0 ? QueryMode::kAnd : i % 3 == 1 ? QueryMode::kOr : QueryMode::kAndOr;
        const bool post = (i + t) % 2 == 1;
        const uint32_t k = ks[rng() % std::size(ks)];
        const std::string q = RandomQuery(g_index->corpus, rng);
        const std::string what = std::string(post ? "POST " : "GET ") + std::string(QueryModeName(mode)) +
                                 " k=" + std::to_string(k) + " q='" + q + "'";
        auto r = Search(q, mode, k, post);
        EXPECT_EQ(r.status, 200) << what << " " << r.raw;
        if (r.status != 200) continue;
        EXPECT_EQ(r.body["timed_out"], false) << what;
        EXPECT_EQ(r.body["_shards"]["successful"], kShards) << what;
        const auto want = Expected(*g_index->local3, q, mode, k);
        ExpectSameHits(r.body["hits"]["hits"], want, what);
        nonempty += !want.empty();
        ++checked;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(checked.load(), 60u);
  EXPECT_GT(nonempty.load(), 20u);  // real answers, not just empty ones

  auto h = Fetch(http_port_, "/health");
  ASSERT_EQ(h.status, 200) << h.raw;
  EXPECT_EQ(h.body["status"], "green") << h.raw;
  ASSERT_EQ(h.body["shards"].size(), kShards) << h.raw;
  auto s = Fetch(http_port_, "/stats");
  ASSERT_EQ(s.status, 200) << s.raw;
  ASSERT_TRUE(s.body.is_object()) << s.raw;
  EXPECT_GE(s.body["requests_total"].get<int>(), 60);
  auto page = Fetch(http_port_, "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.raw.find("<html"), std::string::npos) << page.raw.substr(0, 200);
  EXPECT_NE(page.raw.find("get('/health')"), std::string::npos);
  auto none = Fetch(http_port_, "/nope");
  EXPECT_EQ(none.status, 404) << none.raw;
  ASSERT_TRUE(none.body.is_object()) << none.raw;
  EXPECT_EQ(none.body["error"]["type"], "not_found") << none.raw;
  EXPECT_FALSE(none.body["error"]["reason"].get<std::string>().empty()) << none.raw;
}

// Bad parameters and bodies are 400 with a JSON error, a long URI 414, a huge body 413 (or the
// connection closed), and the server answers rightly afterwards.
TEST_F(ClusterLoopsTest, LoopsEngineBadInputGetsClearErrorsAndServingGoesOn) {
  ExpectLoopsEngine();
  ExpectBadSearchesRefused(http_port_);
  // A GET URI over 8 KiB.
  auto long_uri = Fetch(http_port_, "/search", {{"q", std::string(9000, 'w')}});
  EXPECT_EQ(long_uri.status, 414) << long_uri.raw.substr(0, 200);
  ASSERT_TRUE(long_uri.body.is_object()) << long_uri.raw.substr(0, 200);
  EXPECT_EQ(long_uri.body["error"]["type"], "uri_too_long") << long_uri.raw;
  // A POST body over 1 MiB.
  const std::string huge = "{\"q\": \"" + std::string(2 << 20, 'a') + "\"}";
  auto big = Fetch(http_port_, "/search", {}, &huge);
  EXPECT_TRUE(big.status == 413 || big.status == 0) << big.status << " " << big.raw.substr(0, 200);
  if (big.status == 413) {
    EXPECT_EQ(big.body["error"]["type"], "content_too_long") << big.raw;
  }
  // Still serving, with the right answer.
  auto ok = Search("w5 w7", QueryMode::kOr, 10);
  ASSERT_EQ(ok.status, 200) << ok.raw;
  ExpectSameHits(ok.body["hits"]["hits"], Expected(*g_index->local3, "w5 w7", QueryMode::kOr, 10), "after bad input");
  auto ok_post = Search("w2 w3", QueryMode::kAnd, 5, /*post=*/true);
  ASSERT_EQ(ok_post.status, 200) << ok_post.raw;
  ExpectSameHits(ok_post.body["hits"]["hits"], Expected(*g_index->local3, "w2 w3", QueryMode::kAnd, 5),
                 "POST after bad input");
}

// HTTP/1.x over raw sockets: pipelining, Connection: close, HTTP/1.0, a request a byte at a time,
// a chunked body, garbage, HEAD.
TEST_F(ClusterLoopsTest, LoopsEngineSpeaksHttp11OverRawSockets) {
  ExpectLoopsEngine();
  const std::string q1 = "w5 w7", q2 = "w1";
  ASSERT_NE(ExpectedHits(*g_index->local3, q1, QueryMode::kOr, 10).size(),
            ExpectedHits(*g_index->local3, q2, QueryMode::kAnd, 3).size());  // answers told apart by their hits
  {
    SCOPED_TRACE("(a) two pipelined searches in one write");
    RawConn c(http_port_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.Send(GetRequest(SearchTarget(q1, QueryMode::kOr, 10)) + GetRequest(SearchTarget(q2, QueryMode::kAnd, 3))));
    auto first = c.Read();
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(first, c.why(), q1, QueryMode::kOr, 10, "first pipelined"));
    EXPECT_NE(first->Header("connection"), "close");
    auto second = c.Read();
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(second, c.why(), q2, QueryMode::kAnd, 3, "second pipelined"));
    EXPECT_TRUE(c.pending().empty()) << c.pending();
    // The connection stays open for a third request.
    ASSERT_TRUE(c.Send(GetRequest("/health")));
    auto third = c.Read();
    ASSERT_TRUE(third.has_value()) << c.why();
    EXPECT_EQ(third->status, 200);
  }
  {
    SCOPED_TRACE("(b) Connection: close");
    RawConn c(http_port_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.Send(GetRequest(SearchTarget(q1, QueryMode::kOr, 10), "Connection: close\r\n")));
    auto a = c.Read();
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(a, c.why(), q1, QueryMode::kOr, 10, "Connection: close"));
    EXPECT_EQ(a->status_line.substr(0, 9), "HTTP/1.1 ");
    EXPECT_EQ(a->Header("connection"), "close");
    EXPECT_TRUE(c.ReadsEof()) << c.why();
  }
  {
    SCOPED_TRACE("(c) HTTP/1.0 without keep-alive");
    RawConn c(http_port_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.Send(GetRequest(SearchTarget(q1, QueryMode::kOr, 10), "", "1.0")));
    auto a = c.Read();
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(a, c.why(), q1, QueryMode::kOr, 10, "HTTP/1.0"));
    EXPECT_EQ(a->status_line.substr(0, 13), "HTTP/1.0 200 ") << a->status_line;
    EXPECT_NE(a->Header("connection"), "keep-alive");
    EXPECT_TRUE(c.ReadsEof()) << c.why();
  }
  {
    SCOPED_TRACE("(c') HTTP/1.0 with keep-alive");
    RawConn c(http_port_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.Send(GetRequest(SearchTarget(q1, QueryMode::kOr, 10), "Connection: keep-alive\r\n", "1.0")));
    auto a = c.Read();
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(a, c.why(), q1, QueryMode::kOr, 10, "HTTP/1.0 keep-alive"));
    EXPECT_EQ(a->status_line.substr(0, 9), "HTTP/1.0 ") << a->status_line;
    EXPECT_EQ(a->Header("connection"), "keep-alive");
    ASSERT_TRUE(c.Send(GetRequest(SearchTarget(q2, QueryMode::kAnd, 3), "Connection: keep-alive\r\n", "1.0")));
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(c.Read(), c.why(), q2, QueryMode::kAnd, 3, "HTTP/1.0 kept alive"));
  }
  {
    SCOPED_TRACE("(d) a request a byte at a time");
    RawConn c(http_port_);
    ASSERT_TRUE(c.ok());
    const std::string req = GetRequest(SearchTarget(q1, QueryMode::kOr, 10), "User-Agent: slow\r\n");
    for (char ch : req) {
      ASSERT_TRUE(c.Send(std::string_view(&ch, 1)));
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(c.Read(), c.why(), q1, QueryMode::kOr, 10, "byte at a time"));
  }
  {
    SCOPED_TRACE("(e) a chunked POST body");
    RawConn c(http_port_);
    ASSERT_TRUE(c.ok());
    const std::string body = json{{"q", q2}, {"mode", "and"}, {"k", 3}}.dump();
    std::string req =
        "POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    for (size_t at = 0; at < body.size(); at += 7) {
      const std::string piece = body.substr(at, 7);
      char size[16];
      std::snprintf(size, sizeof(size), "%zx", piece.size());
      req += std::string(size) + (at == 0 ? ";ext=1" : "") + "\r\n" + piece + "\r\n";
    }
    req += "0\r\n\r\n";
    // In two writes, the cut inside a chunk.
    ASSERT_TRUE(c.Send(req.substr(0, req.size() / 2)));
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(c.Send(req.substr(req.size() / 2)));
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(c.Read(), c.why(), q2, QueryMode::kAnd, 3, "chunked POST"));
  }
  {
    SCOPED_TRACE("(f) garbage");
    RawConn c(http_port_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.Send("HELLO\r\n\r\n"));
    auto a = c.Read();
    ASSERT_TRUE(a.has_value()) << c.why();
    EXPECT_EQ(a->status, 400) << a->status_line;
    EXPECT_EQ(a->Header("content-type"), "application/json");
    const json err = json::parse(a->body, nullptr, false);
    ASSERT_TRUE(err.is_object()) << a->body;
    EXPECT_EQ(err["error"]["type"], "bad_request") << a->body;
    EXPECT_FALSE(err["error"]["reason"].get<std::string>().empty()) << a->body;
    EXPECT_EQ(a->Header("connection"), "close");
    EXPECT_TRUE(c.ReadsEof()) << c.why();
  }
  {
    SCOPED_TRACE("(g) HEAD /health");
    RawConn c(http_port_);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c.Send("HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    auto a = c.Read(/*head=*/true);
    ASSERT_TRUE(a.has_value()) << c.why();
    EXPECT_EQ(a->status, 200) << a->status_line;
    EXPECT_EQ(a->Header("content-type"), "application/json");
    const std::string cl = a->Header("content-length");
    EXPECT_GT(std::atoi(cl.c_str()), 10) << "Content-Length '" << cl << "'";
    // No body follows: the connection's next bytes are the next request's answer.
    std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(c.Send(GetRequest("/health", "Connection: close\r\n")));
    auto next = c.Read();
    ASSERT_TRUE(next.has_value()) << c.why();
    EXPECT_EQ(next->status, 200) << next->status_line;
    EXPECT_EQ(json::parse(next->body, nullptr, false)["status"], "green") << next->body;
    EXPECT_TRUE(c.ReadsEof()) << c.why();
  }
}

// Clients that go away: half a request then FIN; a search then FIN or RST before its answer. The
// searches they left complete (in_flight back to 0), and new connections (taking the freed
// descriptors) get their own answers.
TEST_F(ClusterLoopsTest, LoopsEngineClientsThatGoAwayBreakNothing) {
  ExpectLoopsEngine();
  const std::string q = "w5 w7", other = "w1";
  for (int i = 0; i < 10; ++i) {
    const std::string what = "round " + std::to_string(i);
    {
      RawConn half(http_port_);
      ASSERT_TRUE(half.ok());
      ASSERT_TRUE(half.Send("GET " + SearchTarget(q, QueryMode::kOr, 10) + " HTTP/1.1\r\nHo"));
    }  // FIN
    {
      RawConn gone(http_port_);
      ASSERT_TRUE(gone.ok());
      ASSERT_TRUE(gone.Send(GetRequest(SearchTarget(q, QueryMode::kOr, 10 + i))));
      gone.Close(/*reset=*/i % 2 == 1);
    }
    RawConn next(http_port_);
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE(next.Send(GetRequest(SearchTarget(other, QueryMode::kAnd, 3))));
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(next.Read(), next.why(), other, QueryMode::kAnd, 3, what));
  }
  const auto end = Clock::now() + 10s;
  HttpResult s;
  while (Clock::now() < end) {
    s = Fetch(http_port_, "/stats");
    if (s.status == 200 && s.body["in_flight"] == 0) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(s.body["in_flight"], 0) << s.raw;
  auto ok = Search(q, QueryMode::kOr, 10);
  ASSERT_EQ(ok.status, 200) << ok.raw;
  ExpectSameHits(ok.body["hits"]["hits"], Expected(*g_index->local3, q, QueryMode::kOr, 10), "after the clients went");
  EXPECT_TRUE(integrator_->running());
}

// --http-keep-alive-requests 3 (the fixture's): a kept-alive client's 7 searches take 3 connections.
TEST_F(ClusterLoopsTest, LoopsEngineKeptAliveConnectionsCarryTheConfiguredRequests) {
  ExpectLoopsEngine();
  httplib::Client client("127.0.0.1", http_port_);
  client.set_keep_alive(true);
  std::atomic<int> sockets{0};
  client.set_socket_options([&](socket_t) { ++sockets; });
  const auto want = Expected(*g_index->local3, "w5 w7", QueryMode::kOr, 10);
  for (int i = 0; i < 7; ++i) {
    // %20, not '+': cpp-httplib sends a '+' in a path as %2B, a literal plus, and "w5+w7" is one
    // word of the query syntax that the analyzer splits, so a phrase.
    auto r = client.Get("/search?q=w5%20w7&mode=or&k=10");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << r->body;
    ExpectSameHits(nlohmann::json::parse(r->body)["hits"]["hits"], want, "kept-alive search " + std::to_string(i));
    // Every third answer says it closes.
    EXPECT_EQ(r->get_header_value("Connection") == "close", i % 3 == 2) << "answer " << i;
  }
  EXPECT_EQ(sockets.load(), 3);
}

// A client that sends two pipelined searches and then half-closes its side (shutdown SHUT_WR, as
// `nc -N` does) still gets both answers, big ones included, and then the close.
TEST_F(ClusterLoopsTest, LoopsEngineAnswersAClientThatHalfClosed) {
  ExpectLoopsEngine();
  RawConn c(http_port_);
  ASSERT_TRUE(c.ok());
  const std::string q = "w1 w2 w3 w5 w7";
  ASSERT_TRUE(c.Send(GetRequest(SearchTarget(q, QueryMode::kOr, 1000)) + GetRequest(SearchTarget(q, QueryMode::kOr, 10))));
  c.ShutdownWrite();
  ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(c.Read(), c.why(), q, QueryMode::kOr, 1000, "first, k=1000"));
  ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(c.Read(), c.why(), q, QueryMode::kOr, 10, "second"));
  EXPECT_TRUE(c.ReadsEof()) << c.why();
}

// Out of descriptors: an integrator limited to 160 (ulimit -n) and sent 300 connections accepts
// what it can, keeps serving the connections it has, warns once a pause instead of spinning on a
// listening socket it cannot accept from, and accepts again once connections close.
TEST_F(ClusterLoopsTest, LoopsEngineOutOfDescriptorsPausesAcceptingAndRecovers) {
  std::string shards;
  for (const auto& e : endpoints_) shards += (shards.empty() ? "" : ",") + e;
  Process limited;
  ASSERT_TRUE(limited.Start({"/bin/sh", "-c",
                             "ulimit -n 160 && exec " + std::string(SEARCH_INTEGRATOR_BIN) + " --shards " + shards +
                                 " --http 127.0.0.1:0 --metrics '' --ping-ms 200 --cache-mb 0 --http-loops 2"
                                 // A connection limit above the descriptors: they run out first (the
                                 // default limit, sized from them, would refuse the flood instead).
                                 " --max-connections 100000"},
                            run_->path() + "/limited"));
  auto ready = limited.WaitReady();
  ASSERT_TRUE(ready.has_value()) << limited.Logs();
  const int port = PortOf(ready->at("http").get<std::string>());
  const auto until = Clock::now() + 15s;
  while (Clock::now() < until && Fetch(port, "/health").body.value("status", "") != "green")
    std::this_thread::sleep_for(50ms);
  const std::string q = "w5 w7";
  RawConn early(port);  // accepted before the flood
  ASSERT_TRUE(early.ok());
  ASSERT_TRUE(early.Send(GetRequest(SearchTarget(q, QueryMode::kOr, 10))));
  ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(early.Read(), early.why(), q, QueryMode::kOr, 10, "before the flood"));
  {
    std::vector<std::unique_ptr<RawConn>> flood;
    for (int i = 0; i < 300; ++i) {
      flood.push_back(std::make_unique<RawConn>(port));  // the kernel completes them into the backlog
      ASSERT_TRUE(flood.back()->ok()) << "connection " << i;
    }
    std::this_thread::sleep_for(600ms);
    // The connection it had is still served, and right.
    ASSERT_TRUE(early.Send(GetRequest(SearchTarget(q, QueryMode::kOr, 10))));
    ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(early.Read(), early.why(), q, QueryMode::kOr, 10, "during the flood"));
  }  // the flood closes
  // Accepting again: a new connection is answered (it may wait for a pause to end).
  std::this_thread::sleep_for(300ms);
  RawConn late(port);
  ASSERT_TRUE(late.ok());
  ASSERT_TRUE(late.Send(GetRequest(SearchTarget(q, QueryMode::kOr, 10))));
  ASSERT_NO_FATAL_FAILURE(ExpectRawSearch(late.Read(), late.why(), q, QueryMode::kOr, 10, "after the flood"));
  EXPECT_TRUE(limited.running());
  // It ran out (else the test tested nothing), and warned once a pause (100 ms), not once a wake-up.
  std::ifstream err(run_->path() + "/limited.err");
  std::string line;
  int warnings = 0;
  while (std::getline(err, line)) warnings += line.find("not accepting for 100 ms") != std::string::npos;
  EXPECT_GE(warnings, 1) << limited.Logs();
  EXPECT_LE(warnings, 100) << limited.Logs();  // 10 s of pauses: generous for a loaded machine, far from a spin
}

// A shard that never answers a search: a ZeroMQ ROUTER that completes the handshake and answers
// heartbeats (libzmq does both on its own thread) but neither pings nor searches, so a search sent
// to it stays in flight until its deadline or until Close() drops the connection.
class SilentShard {
 public:
  SilentShard() : sock_(ctx_, zmq::socket_type::router) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.bind("tcp://127.0.0.1:*");
    endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }
  // Reads what arrived until `want` search requests have come in all (false after `limit`).
  bool WaitSearches(size_t want, std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (searches_ < want && Clock::now() < end) {
      zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
      std::vector<zmq::message_t> parts;
      while (true) {
        zmq::message_t m;
        if (!sock_.recv(m, zmq::recv_flags::dontwait)) break;
        const bool more = m.more();
        parts.push_back(std::move(m));
        if (more) continue;
        if (parts.size() == 3) {
          auto env = DecodeEnvelope(std::string_view(static_cast<const char*>(parts[2].data()), parts[2].size()));
          searches_ += env.ok() && env->kind() == MessageKind::kSearchRequest;
        }
        parts.clear();
      }
    }
    return searches_ >= want;
  }
  size_t searches() const { return searches_; }
  void Close() { sock_.close(); }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
  std::string endpoint_;
  size_t searches_ = 0;
};

// SIGTERM with 20 searches in flight over 20 connections: every one gets a complete 200 answer, then
// the connection closes, and the integrator exits 0. Shard 2 is a SilentShard behind an integrator
// of the test's own, so the searches (deadline 60 s) stay in flight however slowly a loaded machine
// gets them there; it goes away only once the integrator is draining, which ends shard 2's part of
// every search (its connection is lost) and lets them finish. Order, not time: each step waits for
// the one before it (30 s at most), none races a clock.
TEST_F(ClusterLoopsTest, LoopsEngineSigtermAnswersEverySearchInFlight) {
  constexpr int kClients = 20;
  constexpr uint32_t kSilent = 2;
  SilentShard silent;
  const std::string shards = endpoints_[0] + "," + endpoints_[1] + "," + silent.endpoint();
  Process held;
  ASSERT_TRUE(held.Start({SEARCH_INTEGRATOR_BIN, "--shards", shards, "--http", "127.0.0.1:0", "--metrics", "",
                          "--ping-ms", "200", "--cache-mb", "16", "--http-keep-alive-requests", "3", "--http-loops",
                          "2"},
                         run_->path() + "/held"));
  auto ready = held.WaitReady();
  ASSERT_TRUE(ready.has_value()) << held.Logs();
  EXPECT_EQ(ready->value("http_loops", 0), 2) << ready->dump();
  const int port = PortOf(ready->at("http").get<std::string>());
  // Shards 0 and 1 up on both lanes (shard 2 never pongs: yellow). Yellow alone is one shard up.
  const auto up_by = Clock::now() + 30s;
  HttpResult h;
  auto both_up = [&h] {
    return h.status == 200 && h.body.is_object() && h.body.value("status", "") == "yellow" && h.body["shards"].size() == 3 &&
           h.body["shards"][0]["state"] == "up" && h.body["shards"][1]["state"] == "up";
  };
  while (Clock::now() < up_by) {
    h = Fetch(port, "/health");
    if (both_up()) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(both_up()) << h.raw << held.Logs();

  std::vector<std::unique_ptr<RawConn>> conns;
  std::vector<std::string> queries;
  for (int i = 0; i < kClients; ++i) {
    std::string q = "w";
    q += std::to_string(i);
    q += " w";
    q += std::to_string(i + 1);
    queries.push_back(q);
    conns.push_back(std::make_unique<RawConn>(port));
    ASSERT_TRUE(conns.back()->ok());
    ASSERT_TRUE(conns.back()->Send(GetRequest(SearchTarget(q, QueryMode::kOr, 10, /*timeout_ms=*/60000))));
  }
  // All 20 admitted, and sent to shard 2, which holds them.
  ASSERT_TRUE(silent.WaitSearches(kClients, 30s)) << silent.searches() << " searches reached shard 2\n" << held.Logs();
  const HttpResult s = Fetch(port, "/stats");
  ASSERT_EQ(s.body["in_flight"], kClients) << s.raw;
  // An idle keep-alive connection (just used): the integrator closes it when it starts draining.
  RawConn idle(port);
  ASSERT_TRUE(idle.ok());
  ASSERT_TRUE(idle.Send(GetRequest("/health")));
  auto idle_answer = idle.Read();
  ASSERT_TRUE(idle_answer.has_value()) << idle.why();
  ASSERT_EQ(idle_answer->status, 200);
  held.Signal(SIGTERM);
  // Draining (it said so, and closed the idle connection), the 20 searches still in flight: now
  // shard 2 goes.
  const auto drain_by = Clock::now() + 30s;
  while (Clock::now() < drain_by && held.Logs().find("received SIGTERM, draining") == std::string::npos)
    std::this_thread::sleep_for(5ms);
  ASSERT_NE(held.Logs().find("received SIGTERM, draining"), std::string::npos) << held.Logs();
  ASSERT_TRUE(idle.ReadsEof(30s)) << idle.why() << "\n" << held.Logs();
  silent.Close();
  for (int i = 0; i < kClients; ++i) {
    const std::string what = "in flight " + std::to_string(i) + " q='" + queries[i] + "'";
    auto a = conns[i]->Read(false, 15s);
    ASSERT_TRUE(a.has_value()) << what << ": " << conns[i]->why() << "\n" << held.Logs();
    ASSERT_EQ(a->status, 200) << what << ": " << a->status_line << " " << a->body;
    const json body = json::parse(a->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << what << ": " << a->body;
    // Shard 2's part is missing (its connection was lost); the rest is exact.
    ASSERT_EQ(body["_shards"]["failed"], 1) << what << ": " << a->body;
    EXPECT_EQ(body["_shards"]["failures"][0]["shard"], kSilent) << what << ": " << a->body;
    EXPECT_EQ(body["_shards"]["successful"], kShards - 1) << what;
    ExpectSameHits(body["hits"]["hits"], ExpectedWithout(kSilent, queries[i], QueryMode::kOr, 10), what);
    EXPECT_EQ(a->Header("connection"), "close") << what;
    EXPECT_TRUE(conns[i]->ReadsEof()) << what << ": " << conns[i]->why();
  }
  auto st = held.Wait(15s);
  EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << DescribeExit(st) << "\n" << held.Logs();
  // (TearDown stops the fixture's integrator and nodes.)
}

}  // namespace
}  // namespace search::testing
