// Security end to end with real processes (issue 49): 3 shards x 2 replicas (6 search-node
// processes over two copies of a random index, each with its own CURVE key pair and accepting only
// the integrator's public key) behind a search-integrator that talks CurveZMQ to them and serves
// HTTPS with API keys. Every key and certificate is made at test time by docker/secrets-init.sh,
// the compose "secrets" job (openssl, searchctl keygen, searchctl apikey create). Answers are
// checked against LocalIndex (the single-process twin).
//   - Exactness: random queries in every mode, GET and POST, over HTTPS with the API key equal the
//     brute-force answers; then with replica a of every shard stopped, replica b answers them all,
//     and the other way round (so each of the 6 nodes served over CURVE). Without a key: 401; a
//     wrong key: 403; a client that trusts another CA gets no answer; an integrator without CURVE,
//     or with a client key the nodes do not list, gets nothing from any node (503, health red), and
//     every node counts the refusals (search_node_refused_peers_total).
//   - A rolling restart of every node (SIGTERM, drain, restart on the same endpoint with the same
//     keys) while 8 HTTPS clients query: every answer complete and exact, none lost.
//   - The secrets job run twice keeps every file (and makes no second API key); secrets are 0600.
// The corpus and query seed is random each run and printed (SECURITY_TEST_SEED=N replays it).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "cluster_expect.hpp"
#include "cluster_harness.hpp"
#include "cpu_exec/local_index.hpp"
#include "load_clients.hpp"
#include "secure_cluster.hpp"

namespace search::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kShards = 3, kReplicas = 2;
constexpr size_t kNodes = kShards * kReplicas;

struct Suite {
  uint32_t seed = 0;
  ReplicatedIndex index;
  TempDir keys_dir;
  Secrets secrets;
};
Suite* g = nullptr;

uint32_t SuiteSeed() {
  if (const char* s = std::getenv("SECURITY_TEST_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new Suite;
    g->seed = SuiteSeed();
    std::cerr << "security_test: seed " << g->seed << " (SECURITY_TEST_SEED=" << g->seed << " replays it)\n";
    g->index.Build(3000, g->seed, kShards, kReplicas);
    g->secrets = MakeSecrets(SEARCH_SOURCE_DIR, SEARCHCTL_BIN, g->keys_dir.path() + "/secrets", kNodes);
  }
  static void TearDownTestSuite() {
    delete g;
    g = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(g->index.local, nullptr);
    ASSERT_FALSE(g->secrets.api_key.empty()) << "docker/secrets-init.sh failed:\n" << g->secrets.output;
    run_ = std::make_unique<TempDir>();
    for (size_t i = 0; i < kNodes; ++i) {
      endpoints_[i] = "tcp://127.0.0.1:*";  // the kernel's port, reported on the ready line, kept on restart
      ASSERT_NO_FATAL_FAILURE(StartNode(i));
    }
    std::string shards;
    for (uint32_t s = 0; s < kShards; ++s)
      for (uint32_t r = 0; r < kReplicas; ++r)
        shards += (r == 0 ? (s == 0 ? "" : ",") : "|") + endpoints_[s * kReplicas + r];
    integrator_ = std::make_unique<Process>();
    std::vector<std::string> args = {SEARCH_INTEGRATOR_BIN, "--shards", shards, "--http", "127.0.0.1:0",
                                     "--metrics", "127.0.0.1:0", "--ping-ms", "100", "--cache-mb", "0",
                                     "--timeout-ms", "3000"};
    const auto flags = g->secrets.IntegratorFlags({endpoints_, endpoints_ + kNodes}, run_->path() + "/curve-servers");
    args.insert(args.end(), flags.begin(), flags.end());
    ASSERT_TRUE(integrator_->Start(args, run_->path() + "/integrator"));
    auto ready = integrator_->WaitReady();
    ASSERT_TRUE(ready.has_value()) << integrator_->Logs();
    const std::string http = ready->value("http", "");
    http_port_ = std::atoi(http.substr(http.rfind(':') + 1).c_str());
    ASSERT_GT(http_port_, 0) << ready->dump();
    ASSERT_EQ(ready->value("tls", false), true) << ready->dump();
    ASSERT_EQ(ready->value("curve", false), true) << ready->dump();
    ASSERT_TRUE(WaitReplicasUp(kReplicas, 30s)) << Get("/health").raw << integrator_->Logs();
  }

  void TearDown() override { StopGracefully(integrator_.get(), nodes_); }

  void StartNode(size_t i) {
    nodes_[i] = std::make_unique<Process>();
    const uint32_t shard = static_cast<uint32_t>(i / kReplicas), replica = static_cast<uint32_t>(i % kReplicas);
    std::vector<std::string> args = {SEARCH_NODE_BIN, "--index",
                                     g->index.dirs[replica] + "/shard-" + std::to_string(shard),
                                     "--listen", endpoints_[i], "--metrics", "127.0.0.1:0", "--threads", "2",
                                     "--drain-timeout-ms", "5000"};
    const auto flags = g->secrets.NodeFlags(i);
    args.insert(args.end(), flags.begin(), flags.end());
    ASSERT_TRUE(nodes_[i]->Start(args, run_->path() + "/node" + std::to_string(i) + "-" + std::to_string(++starts_)));
    auto ready = nodes_[i]->WaitReady();
    ASSERT_TRUE(ready.has_value()) << nodes_[i]->Logs();
    endpoints_[i] = ready->value("listen", "");
    ASSERT_EQ(endpoints_[i].rfind("tcp://127.0.0.1:", 0), 0u) << ready->dump();
    ASSERT_EQ(ready->value("curve", false), true) << ready->dump();
    const std::string m = ready->value("metrics", "");
    node_metrics_[i] = std::atoi(m.substr(m.rfind(':') + 1).c_str());
  }

  // Node i's search_node_refused_peers_total, all reasons together; `lines` gets the series.
  double Refused(size_t i, std::string* lines = nullptr) const {
    const auto r = Fetch("127.0.0.1", node_metrics_[i], "/metrics");
    std::istringstream in(r.raw);
    std::string line;
    double sum = 0;
    while (std::getline(in, line)) {
      if (line.rfind("search_node_refused_peers_total{", 0) != 0) continue;
      sum += std::stod(line.substr(line.rfind(' ') + 1));
      if (lines != nullptr) *lines += line + "\n";
    }
    return sum;
  }

  // An integrator over the same nodes with other ZeroMQ credentials (`flags`: none, or a key the
  // nodes do not list) and a short deadline, plain HTTP on loopback: every search fails every shard.
  void ExpectImpostorGetsNothing(const std::vector<std::string>& flags, const std::string& name) {
    std::string shards;
    for (uint32_t s = 0; s < kShards; ++s)
      for (uint32_t r = 0; r < kReplicas; ++r)
        shards += (r == 0 ? (s == 0 ? "" : ",") : "|") + endpoints_[s * kReplicas + r];
    Process impostor;
    std::vector<std::string> args = {SEARCH_INTEGRATOR_BIN, "--shards", shards, "--http", "127.0.0.1:0",
                                     "--ping-ms", "100", "--cache-mb", "0", "--timeout-ms", "300"};
    args.insert(args.end(), flags.begin(), flags.end());
    ASSERT_TRUE(impostor.Start(args, run_->path() + "/" + name));
    auto ready = impostor.WaitReady();
    ASSERT_TRUE(ready.has_value()) << impostor.Logs();
    const std::string http = ready->value("http", "");
    const int port = std::atoi(http.substr(http.rfind(':') + 1).c_str());
    for (const std::string& q : {g->index.corpus.vocab[0], g->index.corpus.vocab[1] + " " + g->index.corpus.vocab[2]}) {
      auto r = Fetch("127.0.0.1", port, "/search", {{"q", q}, {"k", "10"}});
      EXPECT_EQ(r.status, 503) << name << ": " << r.raw;
      EXPECT_FALSE(r.body.contains("hits")) << name << ": " << r.raw;
    }
    auto h = Fetch("127.0.0.1", port, "/health");
    EXPECT_EQ(h.body["status"], "red") << name << ": " << h.raw;
    impostor.Signal(SIGTERM);
    EXPECT_TRUE(impostor.Wait(15s).has_value());
  }

  HttpResult Get(const std::string& path, const httplib::Params& params = {}) const {
    return FetchTls(http_port_, g->secrets.ca(), g->secrets.authorization(), path, params);
  }

  HttpResult Search(const std::string& q, QueryMode mode, uint32_t k, bool post) const {
    if (post) {
      const std::string body = json{{"q", q}, {"k", k}, {"mode", std::string(QueryModeName(mode))}}.dump();
      return FetchTls(http_port_, g->secrets.ca(), g->secrets.authorization(), "/search", {}, &body);
    }
    return Get("/search", {{"q", q}, {"k", std::to_string(k)}, {"mode", std::string(QueryModeName(mode))}});
  }

  // Every shard reports exactly `replicas` replicas up.
  bool WaitReplicasUp(uint32_t replicas, std::chrono::milliseconds limit) const {
    return search::testing::WaitReplicasUp([&] { return Get("/health"); }, replicas, limit);
  }

  // `n` random queries per mode over HTTPS, each complete and equal to LocalIndex.
  void ExpectExact(std::mt19937& rng, int n, const std::string& phase) {
    const uint32_t ks[] = {1, 3, 10, 10, 50, 1000};
    size_t nonempty = 0;
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
      for (int i = 0; i < n; ++i) {
        const std::string q = RandomQuery(g->index.corpus, rng);
        const uint32_t k = ks[rng() % std::size(ks)];
        const std::string what = phase + ": " + std::string(QueryModeName(mode)) + " k=" + std::to_string(k) +
                                 " q='" + q + "' (seed " + std::to_string(g->seed) + ")";
        auto r = Search(q, mode, k, /*post=*/i % 2 == 1);
        ASSERT_EQ(r.status, 200) << what << " " << r.raw;
        ASSERT_EQ(r.body["timed_out"], false) << what;
        ASSERT_EQ(r.body["_shards"]["successful"], kShards) << what << " " << r.body["_shards"].dump();
        const auto want = ExpectedHits(*g->index.local, q, mode, k);
        ASSERT_NO_FATAL_FAILURE(ExpectSameHits(r.body["hits"]["hits"], want, what));
        nonempty += !want.empty();
      }
    }
    EXPECT_GT(nonempty, size_t(n) * 3 / 2) << phase << ": the queries exercise real answers, not just empty ones";
  }

  // One client: random queries over HTTPS with the key until `stop`; every 200 answer checked.
  void Client(uint32_t seed, const std::atomic<bool>& stop, Tally& t) {
    std::mt19937 rng(seed);
    const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
    const uint32_t ks[] = {1, 10, 100};
    while (!stop.load()) {
      const std::string q = RandomQuery(g->index.corpus, rng);
      const QueryMode mode = modes[rng() % 3];
      const uint32_t k = ks[rng() % 3];
      ++t.requests;
      auto r = Search(q, mode, k, /*post=*/rng() % 2 == 0);
      const std::string what = std::string(QueryModeName(mode)) + " k=" + std::to_string(k) + " '" + q + "'";
      TallyAnswer(t, r, what, kShards, [&] { return ExpectedHits(*g->index.local, q, mode, k); });
    }
  }

  std::unique_ptr<TempDir> run_;
  std::unique_ptr<Process> nodes_[kNodes];
  std::string endpoints_[kNodes];
  int node_metrics_[kNodes] = {};
  std::unique_ptr<Process> integrator_;
  int http_port_ = 0, starts_ = 0;
};

TEST_F(SecurityTest, AnswersOverHttpsAndCurveEqualBruteForceOnEveryReplica) {
  // The front door is shut without the key, and a client that trusts another CA gets nothing.
  const httplib::Params p = {{"q", g->index.corpus.vocab[0]}, {"k", "3"}};
  EXPECT_EQ(FetchTls(http_port_, g->secrets.ca(), "", "/search", p).status, 401);
  EXPECT_EQ(FetchTls(http_port_, g->secrets.ca(), "ApiKey " + Base64(g->secrets.api_key + "x"), "/search", p).status,
            403);
  TempDir other;
  const Secrets stranger = MakeSecrets(SEARCH_SOURCE_DIR, SEARCHCTL_BIN, other.path() + "/secrets", 1);
  ASSERT_FALSE(stranger.api_key.empty()) << stranger.output;
  EXPECT_EQ(FetchTls(http_port_, stranger.ca(), g->secrets.authorization(), "/search", p).status, 0)
      << "a client trusting another CA got an answer";

  // The nodes answer no integrator but theirs: not one without CURVE, not one with an unknown key.
  double refused[kNodes];
  for (size_t i = 0; i < kNodes; ++i) refused[i] = Refused(i);
  ASSERT_NO_FATAL_FAILURE(ExpectImpostorGetsNothing({}, "plain-integrator"));
  for (size_t i = 0; i < kNodes; ++i) {  // every node counted the refusals
    std::string lines;
    EXPECT_GT(Refused(i, &lines), refused[i]) << "node " << i << " counted no refusal of a plain peer:\n" << lines;
    refused[i] = Refused(i);
  }
  const Secrets other_keys = MakeSecrets(SEARCH_SOURCE_DIR, SEARCHCTL_BIN, other.path() + "/other", kNodes);
  ASSERT_FALSE(other_keys.api_key.empty()) << other_keys.output;
  std::vector<std::string> unknown = other_keys.IntegratorFlags({endpoints_, endpoints_ + kNodes}, run_->path() + "/s2");
  // Its own client key, but the right node keys (so only the nodes' client lists stop it).
  unknown = {unknown[0], unknown[1], "--curve-servers", run_->path() + "/curve-servers"};
  ASSERT_NO_FATAL_FAILURE(ExpectImpostorGetsNothing(unknown, "unknown-key-integrator"));
  for (size_t i = 0; i < kNodes; ++i) {
    std::string lines;
    EXPECT_GT(Refused(i, &lines), refused[i]) << "node " << i << " counted no refusal of an unknown key:\n" << lines;
    const size_t at = lines.find("reason=\"unknown_key\"} ");  // ZAP's verdict, never another reason
    EXPECT_TRUE(at != std::string::npos && std::stod(lines.substr(lines.find("} ", at) + 2)) > 0) << lines;
  }

  std::mt19937 rng(g->seed ^ 0x5eedu);
  ASSERT_NO_FATAL_FAILURE(ExpectExact(rng, 300, "all replicas up"));
  // Replica a of every shard drains and stops: replica b answers everything over CURVE.
  for (uint32_t s = 0; s < kShards; ++s) nodes_[s * kReplicas]->Signal(SIGTERM);
  for (uint32_t s = 0; s < kShards; ++s) {
    auto st = nodes_[s * kReplicas]->Wait(15s);
    ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << DescribeExit(st);
  }
  ASSERT_TRUE(WaitReplicasUp(1, 30s)) << Get("/health").raw;
  ASSERT_NO_FATAL_FAILURE(ExpectExact(rng, 100, "replica b only"));
  // And replica a, back with replica b stopped.
  for (uint32_t s = 0; s < kShards; ++s) ASSERT_NO_FATAL_FAILURE(StartNode(s * kReplicas));
  ASSERT_TRUE(WaitReplicasUp(2, 30s)) << Get("/health").raw;
  for (uint32_t s = 0; s < kShards; ++s) nodes_[s * kReplicas + 1]->Signal(SIGTERM);
  for (uint32_t s = 0; s < kShards; ++s) {
    auto st = nodes_[s * kReplicas + 1]->Wait(15s);
    ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << DescribeExit(st);
  }
  ASSERT_TRUE(WaitReplicasUp(1, 30s)) << Get("/health").raw;
  ASSERT_NO_FATAL_FAILURE(ExpectExact(rng, 100, "replica a only"));
}

TEST_F(SecurityTest, RollingRestartUnderHttpsLoadLosesNothing) {
  Tally t;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (uint32_t c = 0; c < 8; ++c) clients.emplace_back([&, c] { Client(g->seed + 100 + c, stop, t); });
  ClientsJoin join{stop, clients};
  RollingRestart(t, stop, clients,
                 {.nodes = kNodes,
                  .node = [&](size_t i) { return nodes_[i].get(); },
                  .start = [&](size_t i) { StartNode(i); },
                  .replicas_up = [&] { return WaitReplicasUp(kReplicas, 30s); },
                  .wait = 60s},
                 "rolling restart over HTTPS + CURVE (seed " + std::to_string(g->seed) + ")");
}

// The compose secrets job run twice: the second run keeps every key, certificate and API key
// (prints no new key), and what is secret is readable by its owner only.
TEST(SecretsJob, SecondRunKeepsEverythingAndSecretsAre0600) {
  TempDir dir;
  const std::string secrets = dir.path() + "/secrets";
  const Secrets first = MakeSecrets(SEARCH_SOURCE_DIR, SEARCHCTL_BIN, secrets, 2);
  ASSERT_FALSE(first.api_key.empty()) << first.output;
  std::map<std::string, std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(secrets))
    if (e.is_regular_file()) before[e.path().string()] = Slurp(e.path().string());
  for (const char* f : {"ca.pem", "ca/ca.key", "integrator/tls.crt", "integrator/tls.key", "integrator/curve.key",
                        "integrator/curve.pub", "integrator/curve-servers", "integrator/api-keys", "node-0/curve.key",
                        "node-1/curve.key", "node-0/curve-clients", "node-1/curve-clients"})
    EXPECT_EQ(before.count(secrets + "/" + f), 1u) << f << " not made";
  for (const char* f : {"ca/ca.key", "integrator/tls.key", "integrator/curve.key", "integrator/api-keys",
                        "node-0/curve.key", "node-1/curve.key"}) {
    const auto perms = fs::status(secrets + "/" + f).permissions();
    EXPECT_EQ(perms & (fs::perms::group_all | fs::perms::others_all), fs::perms::none) << f << " is readable by others";
  }
  EXPECT_EQ(before[secrets + "/integrator/api-keys"].find(first.api_key.substr(first.api_key.find(':') + 1)),
            std::string::npos)
      << "the API key file holds the key itself";
  const Secrets second = MakeSecrets(SEARCH_SOURCE_DIR, SEARCHCTL_BIN, secrets, 2);
  EXPECT_TRUE(second.api_key.empty()) << "a second run made another API key:\n" << second.output;
  EXPECT_NE(second.output.find("keeping"), std::string::npos) << second.output;
  std::map<std::string, std::string> after;
  for (const auto& e : fs::recursive_directory_iterator(secrets))
    if (e.is_regular_file()) after[e.path().string()] = Slurp(e.path().string());
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace search::testing
