// The cluster across network namespaces, as if on separate hosts without containers: one namespace
// per shard node and one for the integrator, each with its own address on a private /24, their
// veth cables plugged into a bridge that lives in a "switch" namespace; the test process (root
// namespace) reaches the integrator's HTTP API through one more veth into that bridge.
//
//   root ns  gsnt<pid> 10.A.B.1 ──┐
//   gsnt-<pid>-n0  eth0 10.A.B.10 ┼── br0 in gsnt-<pid>-sw (ports: root, n0, n1, n2, in)
//   gsnt-<pid>-n1  eth0 10.A.B.11 ┤
//   gsnt-<pid>-n2  eth0 10.A.B.12 ┤
//   gsnt-<pid>-in  eth0 10.A.B.100┘   search-integrator --shards tcp://10.A.B.1x:5555,...
//
// The bridge sits in its own namespace so that the root's firewall (br_netfilter, Docker's FORWARD
// policy) never sees the bridged traffic. Checks: the exact-answer query suite across the
// namespaces; a node's link taken down (the switch port, or the node's own interface) gives
// partial answers within the deadline that equal the exact answer over the live shards; link up
// restores complete, exact answers. Skips unless root with working `ip netns`. Every namespace,
// link and process it creates is removed on any exit (RAII, children die with the test through
// PR_SET_PDEATHSIG), and leftovers of earlier runs whose process is gone are removed at start.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <memory>
#include <regex>
#include <set>

#include "cluster_expect.hpp"
#include "cluster_harness.hpp"
#include "netns_harness.hpp"
#include "cpu_exec/local_index.hpp"

namespace search::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kShards = 3;
constexpr size_t kDocs = 3000;
constexpr int kNodePort = 5555;          // every node has its own network stack: the same port everywhere
const char* const kNsPrefix = "gsnt-";   // namespaces: gsnt-<pid>-<role>
const char* const kLinkPrefix = "gsnt";  // the root namespace's veth end: gsnt<pid>

SharedIndex* g_index = nullptr;

// A query's identity for the result cache: its analyzed terms (as a set), mode and k.
std::string QueryKey(const std::string& q, QueryMode mode, uint32_t k) {
  std::set<std::string> terms;
  std::string cur;
  for (char c : q + " ") {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || u >= 0x80) {
      cur += static_cast<char>(std::tolower(u));
    } else if (!cur.empty()) {
      terms.insert(cur);
      cur.clear();
    }
  }
  std::string key = std::string(QueryModeName(mode)) + "/" + std::to_string(k);
  for (const auto& t : terms) key += "/" + t;
  return key;
}

class NetnsClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_index = new SharedIndex;
    g_index->Build(kDocs, 20240611, kShards);
  }
  static void TearDownTestSuite() {
    delete g_index;
    g_index = nullptr;
  }

  void SetUp() override {
    std::string err;
    const std::string skip = StartNetLab(kNsPrefix, kLinkPrefix, kShards, &ip_, &lab_, &err);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_EQ(err, "");
    ASSERT_NE(g_index->local3, nullptr);
    setpriv_ = FirstExecutable({"/usr/bin/setpriv", "/bin/setpriv"});

    run_ = std::make_unique<TempDir>();
    nodes_.resize(kShards);
    std::string shards;
    for (uint32_t i = 0; i < kShards; ++i) {
      const std::string listen = "tcp://" + lab_->NodeAddr(i) + ":" + std::to_string(kNodePort);
      nodes_[i] = std::make_unique<Process>();
      ASSERT_TRUE(nodes_[i]->Start(
          InNamespace(lab_->NodeNs(i), {SEARCH_NODE_BIN, "--index", g_index->index3 + "/shard-" + std::to_string(i),
                                        "--listen", listen, "--threads", "2", "--insecure"}),
          run_->path() + "/node" + std::to_string(i)));
      shards += (shards.empty() ? "" : ",") + listen;
    }
    for (uint32_t i = 0; i < kShards; ++i) {
      auto ready = nodes_[i]->WaitReady();
      ASSERT_TRUE(ready.has_value()) << nodes_[i]->Logs();
      ASSERT_EQ(ready->value("listen", ""), "tcp://" + lab_->NodeAddr(i) + ":" + std::to_string(kNodePort));
    }
    integrator_ = std::make_unique<Process>();
    ASSERT_TRUE(integrator_->Start(
        InNamespace(lab_->IntegratorNs(),
                    {SEARCH_INTEGRATOR_BIN, "--shards", shards, "--http", lab_->IntegratorAddr() + ":0", "--metrics",
                     lab_->IntegratorAddr() + ":0", "--ping-ms", "200", "--cache-mb", "16",
                     "--insecure"}),  // plain HTTP and ZeroMQ beyond loopback (the lab's 10.x addresses)
        run_->path() + "/integrator"));
    auto ready = integrator_->WaitReady();
    ASSERT_TRUE(ready.has_value()) << integrator_->Logs();
    const std::string http = ready->at("http").get<std::string>();
    ASSERT_EQ(http.substr(0, http.rfind(':')), lab_->IntegratorAddr());
    http_port_ = std::stoi(http.substr(http.rfind(':') + 1));
    ASSERT_TRUE(WaitHealth("green", 15s)) << Get("/health").raw << integrator_->Logs();
  }

  void TearDown() override {
    // SIGTERM: every live process drains and exits 0, as on loopback.
    StopGracefully(integrator_.get(), nodes_);
    integrator_.reset();
    nodes_.clear();
    // Nothing of this run is left behind.
    for (const auto& left : CloseNetLab(&lab_, kNsPrefix)) ADD_FAILURE() << "left behind: " << left;
  }

  std::vector<std::string> InNamespace(const std::string& ns, std::vector<std::string> argv) const {
    return search::testing::InNamespace(setpriv_, ip_, ns, argv);
  }

  HttpResult Get(const std::string& path, const httplib::Params& params = {}) {
    return Fetch(lab_->IntegratorAddr(), http_port_, path, params);
  }

  HttpResult Search(const std::string& q, QueryMode mode, uint32_t k, bool post = false, int timeout_ms = 0) {
    if (post) {
      json body = {{"q", q}, {"k", k}, {"mode", std::string(QueryModeName(mode))}};
      if (timeout_ms) body["timeout_ms"] = timeout_ms;
      const std::string s = body.dump();
      return Fetch(lab_->IntegratorAddr(), http_port_, "/search", {}, &s);
    }
    httplib::Params p{{"q", q}, {"k", std::to_string(k)}, {"mode", std::string(QueryModeName(mode))}};
    if (timeout_ms) p.emplace("timeout_ms", std::to_string(timeout_ms));
    return Get("/search", p);
  }

  bool WaitHealth(const std::string& status, std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      auto h = Get("/health");
      if (h.status == 200 && h.body.is_object() && h.body["status"] == status) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  static std::vector<ExternalHit> Expected(const LocalIndex& index, const std::string& q, QueryMode mode, uint32_t k) {
    return ExpectedHits(index, q, mode, k);
  }

  // The exact answer when shard `down` is missing: the best k of the live shards' documents;
  // for andor, AND over the live shards if they have k AND hits, else OR over them.
  static std::vector<ExternalHit> ExpectedWithout(uint32_t down, const std::string& q, QueryMode mode, uint32_t k) {
    const auto& sh = g_index->local3->manifest().shards[down];
    auto live = [&](QueryMode m) {
      auto all = g_index->local3->Search(q, m, kMaxK);
      EXPECT_TRUE(all.ok());
      std::vector<ScoredDoc> keep;
      if (all.ok())
        for (const auto& h : all->hits)
          if (h.doc < sh.doc_begin || h.doc >= sh.doc_end) keep.push_back(h);
      return keep;
    };
    std::vector<ScoredDoc> keep = live(mode == QueryMode::kAndOr ? QueryMode::kAnd : mode);
    if (mode == QueryMode::kAndOr && keep.size() < k) keep = live(QueryMode::kOr);
    if (keep.size() > k) keep.resize(k);
    auto r = g_index->local3->Resolve(keep);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<ExternalHit>{};
  }


  // A complete answer equal to both the 3-shard and the 1-shard single-process index.
  void ExpectComplete(const HttpResult& r, const std::string& q, QueryMode mode, uint32_t k, const std::string& what) {
    ASSERT_EQ(r.status, 200) << what << " " << r.raw;
    ASSERT_EQ(r.body["timed_out"], false) << what << " " << r.raw;
    ASSERT_EQ(r.body["_shards"]["successful"], kShards) << what << " " << r.raw;
    ASSERT_EQ(r.body["_shards"]["failed"], 0) << what;
    ASSERT_NO_FATAL_FAILURE(ExpectSameHits(r.body["hits"]["hits"], Expected(*g_index->local3, q, mode, k), what));
    ASSERT_NO_FATAL_FAILURE(
        ExpectSameHits(r.body["hits"]["hits"], Expected(*g_index->local1, q, mode, k), what + " vs 1-shard index"));
  }

  // Runs fresh random queries (none asked before, so none can come from the result cache) for
  // `duration` while shard `down` is cut off; each must be a partial answer, by its deadline, equal
  // to the exact answer over the live shards. Returns the queries asked.
  struct Asked {
    std::string q;
    QueryMode mode;
    uint32_t k;
  };
  void PartialPhase(uint32_t down, std::chrono::milliseconds duration, std::mt19937& rng, std::vector<Asked>* asked) {
    constexpr int kDeadlineMs = 300;
    constexpr double kSlackS = 3.0;  // generous: a loaded 2-core machine; without the deadline, a hang
    const uint32_t ks[] = {1, 5, 10, 10, 40, 200};
    const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
    const auto end = Clock::now() + duration;
    int n = 0, timed_out = 0, fast = 0, not_ok = 0;
    double slowest = 0;
    bool health_down = false;
    while (Clock::now() < end || n < 12) {
      if (n > 0) std::this_thread::sleep_for(10ms);
      std::string q;
      QueryMode mode;
      uint32_t k;
      do {
        q = RandomQuery(g_index->corpus, rng);
        mode = modes[rng() % 3];
        k = ks[rng() % std::size(ks)];
      } while (!seen_.insert(QueryKey(q, mode, k)).second);
      const std::string what = "shard " + std::to_string(down) + " cut off: " + std::string(QueryModeName(mode)) +
                               " k=" + std::to_string(k) + " q='" + q + "'";
      auto r = Search(q, mode, k, n % 2 == 1, kDeadlineMs);
      ++n;
      asked->push_back({q, mode, k});
      slowest = std::max(slowest, r.seconds);
      if (r.status != 200) {  // reported without stopping: the phase goes on and counts them
        if (++not_ok <= 3) ADD_FAILURE() << what << " -> HTTP " << r.status << " " << r.raw;
        continue;
      }
      EXPECT_LE(r.seconds, kDeadlineMs / 1000.0 + kSlackS) << what;  // never waits past the deadline
      ASSERT_EQ(r.body["cached"], false) << what;
      ASSERT_EQ(r.body["_shards"]["failed"], 1) << what << " " << r.raw;
      ASSERT_EQ(r.body["_shards"]["successful"], kShards - 1) << what;
      ASSERT_EQ(r.body["_shards"]["failures"].size(), 1u) << what;
      EXPECT_EQ(r.body["_shards"]["failures"][0]["shard"], down) << what;
      EXPECT_FALSE(r.body["_shards"]["failures"][0]["reason"].get<std::string>().empty()) << what;
      ASSERT_NO_FATAL_FAILURE(ExpectSameHits(r.body["hits"]["hits"], ExpectedWithout(down, q, mode, k), what));
      if (r.body["timed_out"] == true) {
        ++timed_out;
        // A silent shard is waited for until the query phase's deadline: 4/5 of the timeout (the
        // rest is the fetch phase's).
        EXPECT_GE(r.seconds, kDeadlineMs * 0.8 / 1000.0 - 0.02) << what;
      } else {
        ++fast;
      }
      if (!health_down && n % 4 == 0) {
        auto h = Get("/health");
        health_down = h.body.is_object() && h.body["status"] == "yellow" && h.body["shards"][down]["state"] == "down";
      }
    }
    EXPECT_EQ(not_ok, 0) << "of " << n << " queries were not answered 200 with a partial answer";
    // The link died silently (no RST, no FIN): the first queries can only end at their deadline.
    EXPECT_GE(timed_out, 1);
    EXPECT_TRUE(health_down || WaitHealth("yellow", 5s)) << Get("/health").raw;
    auto h = Get("/health");
    for (uint32_t i = 0; i < kShards; ++i) EXPECT_EQ(h.body["shards"][i]["state"], i == down ? "down" : "up") << h.raw;
    std::printf(
        "[   INFO   ] shard %u cut off: %d queries, %d partial answers (%d timed out at the deadline, %d "
        "failed fast), %d not 200; slowest %.3f s for a %d ms deadline\n",
        down, n, timed_out + fast, timed_out, fast, not_ok, slowest, kDeadlineMs);
  }

  // After the link is back: complete answers within 15 s, and the partial ones were not cached.
  void RecoveryPhase(uint32_t shard, const std::vector<Asked>& asked, Clock::time_point up_at) {
    HttpResult ok;
    seen_.insert(QueryKey("w2 w9", QueryMode::kOr, 10));  // cached from here on
    const auto end = up_at + 30s;
    while (Clock::now() < end) {
      ok = Search("w2 w9", QueryMode::kOr, 10, false, 500);
      if (ok.status == 200 && ok.body["_shards"]["failed"] == 0) break;
      std::this_thread::sleep_for(50ms);
    }
    const double recovered = std::chrono::duration<double>(Clock::now() - up_at).count();
    ASSERT_NO_FATAL_FAILURE(ExpectComplete(ok, "w2 w9", QueryMode::kOr, 10, "after link up"));
    EXPECT_LT(recovered, 15.0);
    ASSERT_TRUE(WaitHealth("green", 10s)) << Get("/health").raw;
    std::printf("[   INFO   ] shard %u back: complete answers %.2f s after link up\n", shard, recovered);
    for (size_t i = 0; i < asked.size(); ++i) {
      const auto& a = asked[i];
      auto r = Search(a.q, a.mode, a.k, i % 2 == 0);
      const std::string what =
          "after link up: " + std::string(QueryModeName(a.mode)) + " k=" + std::to_string(a.k) + " q='" + a.q + "'";
      EXPECT_EQ(r.body["cached"], false) << what << ": a partial answer was cached";
      ASSERT_NO_FATAL_FAILURE(ExpectComplete(r, a.q, a.mode, a.k, what));
    }
  }

  std::string ip_, setpriv_;
  std::unique_ptr<NetLab> lab_;
  std::unique_ptr<TempDir> run_;
  std::vector<std::unique_ptr<Process>> nodes_;
  std::unique_ptr<Process> integrator_;
  int http_port_ = 0;
  std::set<std::string> seen_;  // QueryKey of every query asked
};

TEST_F(NetnsClusterTest, QuerySuiteAcrossNamespacesIsExact) {
  // The shards answer from their own addresses: /health lists the endpoints the integrator dialled.
  auto h = Get("/health");
  ASSERT_EQ(h.status, 200) << h.raw;
  for (uint32_t i = 0; i < kShards; ++i) {
    EXPECT_EQ(h.body["shards"][i]["endpoint"], "tcp://" + lab_->NodeAddr(i) + ":" + std::to_string(kNodePort));
    EXPECT_EQ(h.body["shards"][i]["state"], "up");
  }
  std::mt19937 rng(7);
  const uint32_t ks[] = {1, 3, 10, 10, 50, 1000};
  size_t nonempty = 0;
  for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
    for (int i = 0; i < 300; ++i) {
      const std::string q = RandomQuery(g_index->corpus, rng);
      const uint32_t k = ks[rng() % std::size(ks)];
      const std::string what = std::string(QueryModeName(mode)) + " k=" + std::to_string(k) + " q='" + q + "'";
      auto r = Search(q, mode, k, /*post=*/i % 2 == 1);
      ASSERT_NO_FATAL_FAILURE(ExpectComplete(r, q, mode, k, what));
      nonempty += !r.body["hits"]["hits"].empty();
    }
  }
  EXPECT_GT(nonempty, 600u);  // real answers, not just empty ones
}

TEST_F(NetnsClusterTest, LinkDownGivesPartialAnswersWithinTheDeadlineAndLinkUpRestoresThem) {
  std::mt19937 rng(11);
  for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
    seen_.insert(QueryKey("w1 w4", mode, 10));
    ASSERT_NO_FATAL_FAILURE(ExpectComplete(Search("w1 w4", mode, 10), "w1 w4", mode, 10, "before"));
  }

  // Shard 1: its cable out of the switch, long enough for the ZMTP heartbeat (3 s) to give up too.
  std::vector<Asked> asked;
  ASSERT_TRUE(lab_->SetSwitchPort(1, false));
  ASSERT_NO_FATAL_FAILURE(PartialPhase(1, 5s, rng, &asked));
  ASSERT_TRUE(lab_->SetSwitchPort(1, true));
  ASSERT_NO_FATAL_FAILURE(RecoveryPhase(1, asked, Clock::now()));

  // Shard 2: its own interface down inside its namespace, briefly.
  asked.clear();
  ASSERT_TRUE(lab_->SetNodeInterface(2, false));
  ASSERT_NO_FATAL_FAILURE(PartialPhase(2, 2s, rng, &asked));
  ASSERT_TRUE(lab_->SetNodeInterface(2, true));
  ASSERT_NO_FATAL_FAILURE(RecoveryPhase(2, asked, Clock::now()));

  // Every process survived the outages.
  ASSERT_TRUE(integrator_->running()) << integrator_->Logs();
  for (auto& n : nodes_) ASSERT_TRUE(n->running()) << n->Logs();
}

}  // namespace
}  // namespace search::testing
