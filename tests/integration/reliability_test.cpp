// Reliability with real processes (issue 8): 2 shards x 2 replicas (4 search-node processes over
// two copies of a random index) behind one search-integrator (result cache off, so every answer
// comes from the nodes), checked against LocalIndex.
//   - A rolling restart of every node (SIGTERM, drain, restart on the same endpoint) while 8
//     clients query: since a replica of each shard is always up, every answer is complete and
//     exact, `_shards.total == successful + failed` always, nothing hangs.
//   - kill -9 of the integrator under load: it restarts on the same port and serves exact,
//     complete answers; clients see connection errors only while it is down, never a hang.
//   - a replica with a corrupt list: Corruption for the queries touching it, retried on the
//     other replica (answers complete and exact), and "degraded" in its health.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "cluster_expect.hpp"
#include "cluster_harness.hpp"
#include "cpu_exec/local_index.hpp"
#include "load_clients.hpp"
#include "../rocksdb_fault.hpp"

namespace search::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kShards = 2, kReplicas = 2;

ReplicatedIndex* g = nullptr;  // built once per suite

class ReliabilityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new ReplicatedIndex;
    g->Build(2500, 777, kShards, kReplicas);
  }
  static void TearDownTestSuite() {
    delete g;
    g = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(g->local, nullptr);
    run_ = std::make_unique<TempDir>();
    std::string shards;
    for (uint32_t s = 0; s < kShards; ++s) {
      shards += s == 0 ? "" : ",";
      for (uint32_t r = 0; r < kReplicas; ++r) {
        const size_t i = s * kReplicas + r;
        // Each process binds a port of the kernel's choosing and reports it on its ready line; a
        // restart reuses that port. (A port found free beforehand could be taken by a test running
        // in parallel before the process binds it.)
        endpoints_[i] = "tcp://127.0.0.1:*";
        ASSERT_NO_FATAL_FAILURE(StartNode(i));
        shards += (r == 0 ? "" : "|") + endpoints_[i];
      }
    }
    shards_ = shards;
    http_port_ = 0;
    ASSERT_NO_FATAL_FAILURE(StartIntegrator());
    ASSERT_TRUE(WaitReplicasUp(15s)) << Fetch("127.0.0.1", http_port_, "/health").raw;
  }

  void TearDown() override {
    StopGracefully(integrator_.get(), nodes_);
  }

  void StartNode(size_t i) {
    nodes_[i] = std::make_unique<Process>();
    const uint32_t shard = static_cast<uint32_t>(i / kReplicas), replica = static_cast<uint32_t>(i % kReplicas);
    ASSERT_TRUE(nodes_[i]->Start({SEARCH_NODE_BIN, "--index", g->dirs[replica] + "/shard-" + std::to_string(shard),
                                  "--listen", endpoints_[i], "--threads", "2", "--drain-timeout-ms", "5000"},
                                 run_->path() + "/node" + std::to_string(i) + "-" + std::to_string(++starts_)));
    auto ready = nodes_[i]->WaitReady();
    ASSERT_TRUE(ready.has_value()) << nodes_[i]->Logs();
    endpoints_[i] = ready->value("listen", "");
    ASSERT_EQ(endpoints_[i].rfind("tcp://127.0.0.1:", 0), 0u) << ready->dump();
  }

  void StartIntegrator() {
    integrator_ = std::make_unique<Process>();
    ASSERT_TRUE(integrator_->Start({SEARCH_INTEGRATOR_BIN, "--shards", shards_, "--http",
                                    "127.0.0.1:" + std::to_string(http_port_), "--metrics", "127.0.0.1:0",
                                    "--ping-ms", "100", "--cache-mb", "0", "--timeout-ms", "3000"},
                                   run_->path() + "/integrator-" + std::to_string(++starts_)));
    auto ready = integrator_->WaitReady();
    ASSERT_TRUE(ready.has_value()) << integrator_->Logs();
    const std::string http = ready->value("http", "");
    http_port_ = std::atoi(http.substr(http.rfind(':') + 1).c_str());
    ASSERT_GT(http_port_, 0) << ready->dump();
  }

  // Every shard has all its replicas up.
  bool WaitReplicasUp(std::chrono::milliseconds limit) {
    return search::testing::WaitReplicasUp([&] { return Fetch("127.0.0.1", http_port_, "/health"); }, kReplicas, limit);
  }

  // One client: random queries until `stop`; every 200 answer checked against LocalIndex. While
  // *pause is set it sends nothing and counts itself in *parked.
  void Client(uint32_t seed, const std::atomic<bool>& stop, Tally& t, bool expect_complete,
              const std::atomic<bool>* pause = nullptr, std::atomic<int>* parked = nullptr) {
    std::mt19937 rng(seed);
    const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
    const uint32_t ks[] = {1, 10, 100};
    while (!stop.load()) {
      if (pause != nullptr && pause->load()) {
        ++*parked;
        while (pause->load() && !stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        --*parked;
        continue;
      }
      const std::string q = RandomQuery(g->corpus, rng);
      const QueryMode mode = modes[rng() % 3];
      const uint32_t k = ks[rng() % 3];
      ++t.requests;
      auto r = Fetch("127.0.0.1", http_port_, "/search",
                     {{"q", q}, {"k", std::to_string(k)}, {"mode", std::string(QueryModeName(mode))}});
      const std::string what = std::string(QueryModeName(mode)) + " k=" + std::to_string(k) + " '" + q + "'";
      TallyAnswer(t, r, what, kShards, [&] { return ExpectedHits(*g->local, q, mode, k); }, expect_complete);
    }
  }

  std::unique_ptr<TempDir> run_;
  std::unique_ptr<Process> nodes_[kShards * kReplicas];
  std::string endpoints_[kShards * kReplicas];
  std::string shards_;
  std::unique_ptr<Process> integrator_;
  int http_port_ = 0, starts_ = 0;
};

TEST_F(ReliabilityTest, RollingRestartWithEightClientsLosesNothing) {
  Tally t;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (uint32_t c = 0; c < 8; ++c) clients.emplace_back([&, c] { Client(100 + c, stop, t, true); });
  ClientsJoin join{stop, clients};
  RollingRestart(t, stop, clients,
                 {.nodes = kShards * kReplicas,
                  .node = [&](size_t i) { return nodes_[i].get(); },
                  .start = [&](size_t i) { StartNode(i); },
                  .replicas_up = [&] { return WaitReplicasUp(15s); }},
                 "rolling restart");
}

// The clients run before and during the kill (they see no answer while it is down), then pause
// while it restarts and connects to every replica (a search that reaches it in its first
// milliseconds may find a shard not connected yet and get a partial answer), then run again.
// Each step waits for what it needs (30 s at most), not for a fixed time.
TEST_F(ReliabilityTest, KillNineOfTheIntegratorUnderLoadRestartsAndServes) {
  Tally t;
  std::atomic<bool> stop{false}, pause{false};
  std::atomic<int> parked{0};
  constexpr int kClients = 4;
  std::vector<std::thread> clients;
  for (uint32_t c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] { Client(200 + c, stop, t, true, &pause, &parked); });
  ClientsJoin join{stop, clients};
  // Under load: the clients are getting answers.
  auto wait_for = [](auto done) {
    const auto until = Clock::now() + 30s;
    while (Clock::now() < until && !done()) std::this_thread::sleep_for(5ms);
    return done();
  };
  EXPECT_TRUE(wait_for([&] { return t.complete.load() >= 20; })) << t.complete.load();
  integrator_->Signal(SIGKILL);
  auto st = integrator_->Wait(5s);
  ASSERT_TRUE(st && WIFSIGNALED(*st)) << DescribeExit(st);
  // The clients find it down (no answer, not a hang), then pause.
  EXPECT_TRUE(wait_for([&] { return t.no_answer.load() >= kClients; })) << t.no_answer.load();
  pause = true;
  ASSERT_TRUE(wait_for([&] { return parked.load() == kClients; })) << parked.load();
  const uint64_t answered_before = t.complete.load();
  ASSERT_NO_FATAL_FAILURE(StartIntegrator());
  ASSERT_TRUE(WaitReplicasUp(30s));
  pause = false;
  wait_for([&] { return t.complete.load() >= answered_before + 20; });
  stop = true;
  for (auto& c : clients) c.join();
  std::cerr << "kill -9: " << t.requests << " requests, " << t.complete << " complete, " << t.no_answer
            << " without an answer while the integrator was down\n";
  EXPECT_GE(t.complete.load(), answered_before + 20) << "the restarted integrator does not serve";
  EXPECT_EQ(t.wrong.load(), 0u) << t.Examples();
  EXPECT_EQ(t.incomplete.load(), 0u) << t.Examples();
  EXPECT_EQ(t.http_errors.load(), 0u) << t.Examples();
  EXPECT_EQ(t.bad_shard_counts.load(), 0u) << t.Examples();
}

// A replica with a corrupt list: it answers Corruption for the queries touching that list and
// reports "degraded" in its health; the integrator retries those on the other replica, so every
// answer stays complete and exact.
TEST_F(ReliabilityTest, CorruptReplicaIsRoutedAroundAndReportsDegraded) {
  nodes_[0]->Signal(SIGTERM);
  auto st = nodes_[0]->Wait(15s);
  ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
  // Replica a of shard 0 gets its own copy with the list of a frequent term corrupted.
  const std::string copy = run_->path() + "/corrupt";
  std::filesystem::copy(g->dirs[0], copy, std::filesystem::copy_options::recursive);
  const std::string term = g->corpus.vocab[2];
  const Status c = CorruptList(copy + "/shard-0", term);
  ASSERT_TRUE(c.ok()) << c.ToString();
  nodes_[0] = std::make_unique<Process>();
  ASSERT_TRUE(nodes_[0]->Start({SEARCH_NODE_BIN, "--index", copy + "/shard-0", "--listen", endpoints_[0],
                                "--threads", "2"},
                               run_->path() + "/node0-corrupt"));
  ASSERT_TRUE(nodes_[0]->WaitReady().has_value()) << nodes_[0]->Logs();
  ASSERT_TRUE(WaitReplicasUp(15s));
  std::mt19937 rng(5);
  int touching = 0;
  for (int i = 0; i < 80; ++i) {
    const std::string q = i % 2 == 0 ? term + " " + g->corpus.vocab[3 + rng() % 50] : RandomQuery(g->corpus, rng);
    touching += i % 2 == 0;
    const QueryMode mode = i % 4 < 2 ? QueryMode::kOr : QueryMode::kAnd;
    auto r = Fetch("127.0.0.1", http_port_, "/search", {{"q", q}, {"k", "10"}, {"mode", std::string(QueryModeName(mode))}});
    ASSERT_EQ(r.status, 200) << r.raw;
    ASSERT_EQ(r.body["_shards"]["successful"], kShards) << q << ": " << r.raw;
    ASSERT_NO_FATAL_FAILURE(ExpectSameHits(r.body["hits"]["hits"], ExpectedHits(*g->local, q, mode, 10), q));
  }
  EXPECT_EQ(touching, 40);
  // The corrupt replica says so in the integrator's health (its pong after the failures).
  bool degraded = false;
  const auto end = Clock::now() + 5s;
  while (!degraded && Clock::now() < end) {
    auto h = Fetch("127.0.0.1", http_port_, "/health");
    for (const auto& rep : h.body["shards"][0]["replica_detail"])
      degraded = degraded || rep["node_state"].get<std::string>().rfind("degraded", 0) == 0;
    if (!degraded) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(degraded) << Fetch("127.0.0.1", http_port_, "/health").raw;
}

}  // namespace
}  // namespace search::testing
