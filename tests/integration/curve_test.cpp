// CurveZMQ between real search-integrator and search-node processes (curve/, issue 49):
//   CurveClusterAnswersExactlyAsPlain   2 shards x 2 replicas over CURVE (a key pair per node, the
//                                       servers file by endpoint) and a plain cluster over the same
//                                       index give LocalIndex's answers, query for query
//   PeersWithoutKeysOrWithUnknownKeysGetNothing  a keyless DEALER and one with an unlisted key get
//                                       no Pong within a generous wait (a listed key does), and the
//                                       node's search_node_refused_peers_total counts both
//   ReplicasDrainAndRestartOverCurve    a replica of each shard SIGTERMed (drained) and restarted
//                                       while clients search over CURVE: every answer exact, none lost
//   JunkFloodLeavesAnswersExact/{plain,curve}  many garbage frames (multi-part, oversized, random
//                                       bytes, raw TCP) at a node while searches stay exact; the node
//                                       stays up and counted the junk
//   IntegratorWithWrongKeysStaysDownAndSaysWhy  an unlisted client key, a wrong server key: the
//                                       replica stays down, /health says why, searches get no hits
//   StartupRefusals                     plain beyond loopback without --insecure, a loose secret key,
//                                       half the flags, an endpoint without a server key: exit 2
// No wall-clock upper bounds: waits are generous, assertions are on answers and counts.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "../prometheus_text.hpp"
#include "cluster_expect.hpp"
#include "load_clients.hpp"
#include "curve/curve_keys.hpp"
#include "proto/wire.hpp"

namespace search::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kShards = 2, kReplicas = 2;
ReplicatedIndex* g = nullptr;

class CurveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new ReplicatedIndex;
    g->Build(1500, 4949, kShards, kReplicas);
  }
  static void TearDownTestSuite() {
    delete g;
    g = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(g->local, nullptr);
    ASSERT_TRUE(curve::CurveAvailable());
    run_ = std::make_unique<TempDir>();
    integrator_keys_ = NewKeys("integrator");
    clients_file_ = run_->path() + "/clients";
    std::ofstream(clients_file_) << "# the integrator\n" << integrator_keys_.public_key << "\n";
  }
  void TearDown() override { StopGracefully(integrator_.get(), nodes_); }

  // A key pair written as PREFIX.key / PREFIX.pub under the run directory.
  curve::KeyPair NewKeys(const std::string& name) {
    auto k = curve::GenerateKeyPair();
    EXPECT_TRUE(k.ok());
    EXPECT_TRUE(curve::WriteKeyPair(run_->path() + "/" + name, *k, false).ok());
    return *k;
  }
  std::string KeyFile(const std::string& name) const { return run_->path() + "/" + name + ".key"; }

  // Starts a node on `listen` (port * the first time; its ready line gives the port), with CURVE
  // when `curve_name` names its key files. Returns the bound endpoint.
  std::string StartNode(std::unique_ptr<Process>& p, uint32_t shard, uint32_t replica, const std::string& listen,
                        const std::string& curve_name, bool metrics = false) {
    p = std::make_unique<Process>();
    std::vector<std::string> args = {SEARCH_NODE_BIN,
                                     "--index",
                                     g->dirs[replica] + "/shard-" + std::to_string(shard),
                                     "--listen",
                                     listen,
                                     "--threads",
                                     "2",
                                     "--drain-timeout-ms",
                                     "5000"};
    if (metrics) args.insert(args.end(), {"--metrics", "127.0.0.1:0"});
    if (!curve_name.empty())
      args.insert(args.end(), {"--curve-key", KeyFile(curve_name), "--curve-clients", clients_file_});
    EXPECT_TRUE(p->Start(args, run_->path() + "/node-" + std::to_string(shard) + "-" + std::to_string(replica) + "-" +
                                   std::to_string(++starts_)));
    auto ready = p->WaitReady(60s);
    EXPECT_TRUE(ready.has_value()) << p->Logs();
    if (!ready) return "";
    EXPECT_EQ(ready->value("curve", !curve_name.empty()), !curve_name.empty()) << ready->dump();
    if (metrics) node_metrics_[p.get()] = ready->value("metrics", "");
    return ready->value("listen", "");
  }

  // Starts an integrator over `shards`; CURVE when `servers_file` is set. Returns its HTTP port.
  int StartIntegrator(std::unique_ptr<Process>& p, const std::string& shards, const std::string& servers_file) {
    p = std::make_unique<Process>();
    std::vector<std::string> args = {
        SEARCH_INTEGRATOR_BIN, "--shards", shards,       "--http", "127.0.0.1:0",  "--metrics", "",
        "--ping-ms",           "100",      "--cache-mb", "0",      "--timeout-ms", "10000"};
    if (!servers_file.empty())
      args.insert(args.end(), {"--curve-key", KeyFile("integrator"), "--curve-servers", servers_file});
    EXPECT_TRUE(p->Start(args, run_->path() + "/integrator-" + std::to_string(++starts_)));
    auto ready = p->WaitReady(60s);
    EXPECT_TRUE(ready.has_value()) << p->Logs();
    if (!ready) return 0;
    EXPECT_EQ(ready->value("curve", servers_file.empty()), !servers_file.empty()) << ready->dump();
    const std::string http = ready->value("http", "");
    return std::atoi(http.substr(http.rfind(':') + 1).c_str());
  }

  std::string Scrape(Process* node) {
    const std::string addr = node_metrics_[node];
    const size_t colon = addr.rfind(':');
    return Fetch(addr.substr(0, colon), std::atoi(addr.substr(colon + 1).c_str()), "/metrics").raw;
  }

  // One random query through the integrator at `port`, checked against LocalIndex.
  void Query(int port, std::mt19937& rng, Tally& t) {
    const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
    const uint32_t ks[] = {1, 10, 100};
    const std::string q = RandomQuery(g->corpus, rng);
    const QueryMode mode = modes[rng() % 3];
    const uint32_t k = ks[rng() % 3];
    ++t.requests;
    auto r = Fetch("127.0.0.1", port, "/search",
                   {{"q", q}, {"k", std::to_string(k)}, {"mode", std::string(QueryModeName(mode))}});
    const std::string what = std::string(QueryModeName(mode)) + " k=" + std::to_string(k) + " '" + q + "'";
    TallyAnswer(t, r, what, kShards, [&] { return ExpectedHits(*g->local, q, mode, k); });
  }

  void ExpectAllExact(Tally& t) {
    EXPECT_GT(t.requests.load(), 0u);
    EXPECT_EQ(t.complete.load(), t.requests.load()) << t.Examples();
    EXPECT_EQ(t.wrong.load(), 0u);
    EXPECT_EQ(t.no_answer.load(), 0u);
    EXPECT_EQ(t.http_errors.load(), 0u);
    EXPECT_EQ(t.incomplete.load(), 0u);
    EXPECT_EQ(t.bad_shard_counts.load(), 0u);
  }

  bool WaitUp(int port, uint32_t replicas) {
    return WaitReplicasUp([&] { return Fetch("127.0.0.1", port, "/health"); }, replicas, 60s);
  }

  std::unique_ptr<TempDir> run_;
  curve::KeyPair integrator_keys_;
  std::string clients_file_;
  std::unique_ptr<Process> integrator_;
  std::vector<std::unique_ptr<Process>> nodes_;
  std::map<Process*, std::string> node_metrics_;
  int starts_ = 0;
};

TEST_F(CurveTest, CurveClusterAnswersExactlyAsPlain) {
  // CURVE: 2 x 2, each node its own key pair, the servers file by endpoint.
  std::string shards, servers = "# the nodes\n";
  nodes_.resize(kShards * kReplicas + kShards);
  for (uint32_t s = 0; s < kShards; ++s) {
    shards += s == 0 ? "" : ",";
    for (uint32_t r = 0; r < kReplicas; ++r) {
      const std::string name = "node" + std::to_string(s) + std::to_string(r);
      const curve::KeyPair keys = NewKeys(name);
      const std::string ep = StartNode(nodes_[s * kReplicas + r], s, r, "tcp://127.0.0.1:*", name);
      ASSERT_FALSE(ep.empty());
      shards += (r == 0 ? "" : "|") + ep;
      servers += ep + " " + keys.public_key + "\n";
    }
  }
  std::ofstream(run_->path() + "/servers") << servers;
  const int curve_port = StartIntegrator(integrator_, shards, run_->path() + "/servers");
  ASSERT_GT(curve_port, 0);
  ASSERT_TRUE(WaitUp(curve_port, kReplicas)) << Fetch("127.0.0.1", curve_port, "/health").raw;
  // Plain: 2 x 1 on loopback.
  std::string plain_shards;
  for (uint32_t s = 0; s < kShards; ++s) {
    const std::string ep = StartNode(nodes_[kShards * kReplicas + s], s, 0, "tcp://127.0.0.1:*", "");
    ASSERT_FALSE(ep.empty());
    plain_shards += (s == 0 ? "" : ",") + ep;
  }
  std::unique_ptr<Process> plain;
  const int plain_port = StartIntegrator(plain, plain_shards, "");
  ASSERT_GT(plain_port, 0);
  ASSERT_TRUE(WaitUp(plain_port, 1));

  Tally curve_t, plain_t;
  std::mt19937 a(7), b(7);  // the same queries on both
  for (int i = 0; i < 80; ++i) {
    Query(curve_port, a, curve_t);
    Query(plain_port, b, plain_t);
  }
  ExpectAllExact(curve_t);
  ExpectAllExact(plain_t);
  StopGracefully(plain.get(), nodes_);  // (integrator_ is stopped by TearDown; nodes already are)
}

TEST_F(CurveTest, PeersWithoutKeysOrWithUnknownKeysGetNothing) {
  const curve::KeyPair node_keys = NewKeys("node");
  const curve::KeyPair stranger = NewKeys("stranger");
  nodes_.resize(1);
  const std::string ep = StartNode(nodes_[0], 0, 0, "tcp://127.0.0.1:*", "node", /*metrics=*/true);
  ASSERT_FALSE(ep.empty());
  zmq::context_t ctx{1};
  // A Ping to the node from a DEALER with `client` keys (none: plain); true when a Pong comes back
  // within `wait`.
  auto pinged = [&](const curve::KeyPair* client, std::chrono::milliseconds wait) {
    zmq::socket_t d(ctx, zmq::socket_type::dealer);
    d.set(zmq::sockopt::linger, 0);
    if (client != nullptr) {
      d.set(zmq::sockopt::curve_serverkey, node_keys.public_key);
      d.set(zmq::sockopt::curve_publickey, client->public_key);
      d.set(zmq::sockopt::curve_secretkey, client->secret_key);
    }
    d.connect(ep);
    const std::string ping = EncodePing(PingMsg{42});
    d.send(zmq::message_t(), zmq::send_flags::sndmore);
    d.send(zmq::buffer(ping), zmq::send_flags::none);
    zmq::pollitem_t item{d.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, wait);
    return (item.revents & ZMQ_POLLIN) != 0;
  };
  auto refused = [&](const char* reason) {
    return SeriesValue(Scrape(nodes_[0].get()),
                       std::string("search_node_refused_peers_total{reason=\"") + reason + "\"}");
  };
  // Waits (generously) until the refusals of `reasons` together exceed `before`; their sum.
  auto wait_refused = [&](std::vector<const char*> reasons, double before) {
    double n = 0;
    for (auto end = Clock::now() + 60s; Clock::now() < end; std::this_thread::sleep_for(50ms)) {
      n = 0;
      for (const char* r : reasons) n += refused(r);
      if (n > before) break;
    }
    return n;
  };
  EXPECT_TRUE(pinged(&integrator_keys_, 60s)) << "the listed key must be answered";
  EXPECT_EQ(SeriesValue(Scrape(nodes_[0].get()), "search_node_curve"), 1);
  EXPECT_EQ(refused("unknown_key") + refused("no_curve") + refused("bad_handshake"), 0);
  // A plain peer: no_curve when the node sees the mechanism mismatch first, bad_handshake when the
  // peer saw it first and hung up (the node then sees only a broken connection).
  EXPECT_FALSE(pinged(nullptr, 5s)) << "a DEALER without keys got an answer from a CURVE node";
  EXPECT_GE(wait_refused({"no_curve", "bad_handshake"}, 0), 1) << nodes_[0]->Logs();
  EXPECT_EQ(refused("unknown_key"), 0);
  EXPECT_FALSE(pinged(&stranger, 5s)) << "a DEALER with an unknown key got an answer";
  EXPECT_GE(wait_refused({"unknown_key"}, 0), 1) << nodes_[0]->Logs();
  EXPECT_NE(Slurp(run_->path() + "/node-0-0-1.err").find("refused"), std::string::npos);
  EXPECT_TRUE(pinged(&integrator_keys_, 60s)) << "still serving the listed key";
}

TEST_F(CurveTest, ReplicasDrainAndRestartOverCurve) {
  NewKeys("node");  // one key for every node
  std::ofstream(run_->path() + "/servers") << curve::ReadPublicKeyFile(run_->path() + "/node.pub").value() << "\n";
  std::vector<std::string> eps(kShards * kReplicas);
  nodes_.resize(eps.size());
  std::string shards;
  for (uint32_t s = 0; s < kShards; ++s) {
    shards += s == 0 ? "" : ",";
    for (uint32_t r = 0; r < kReplicas; ++r) {
      eps[s * kReplicas + r] = StartNode(nodes_[s * kReplicas + r], s, r, "tcp://127.0.0.1:*", "node");
      ASSERT_FALSE(eps[s * kReplicas + r].empty());
      shards += (r == 0 ? "" : "|") + eps[s * kReplicas + r];
    }
  }
  const int port = StartIntegrator(integrator_, shards, run_->path() + "/servers");
  ASSERT_GT(port, 0);
  ASSERT_TRUE(WaitUp(port, kReplicas));
  Tally t;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (uint32_t c = 0; c < 2; ++c)
    clients.emplace_back([&, c] {
      std::mt19937 rng(100 + c);
      while (!stop.load()) Query(port, rng, t);
    });
  // Replica 0 of shard 0, then replica 1 of shard 1: drained by SIGTERM, restarted on its port.
  for (size_t i : {size_t{0}, size_t{3}}) {
    const uint64_t before = t.requests.load();
    while (t.requests.load() < before + 20) std::this_thread::sleep_for(5ms);
    nodes_[i]->Signal(SIGTERM);
    auto st = nodes_[i]->Wait(30s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << DescribeExit(st) << nodes_[i]->Logs();
    const uint64_t down = t.requests.load();
    while (t.requests.load() < down + 20) std::this_thread::sleep_for(5ms);  // answered by the other replica
    ASSERT_EQ(StartNode(nodes_[i], static_cast<uint32_t>(i / kReplicas), static_cast<uint32_t>(i % kReplicas), eps[i],
                        "node"),
              eps[i]);
    EXPECT_TRUE(WaitUp(port, kReplicas)) << Fetch("127.0.0.1", port, "/health").raw;
  }
  const uint64_t end = t.requests.load();
  while (t.requests.load() < end + 20) std::this_thread::sleep_for(5ms);
  stop = true;
  for (auto& c : clients) c.join();
  ExpectAllExact(t);
}

TEST_F(CurveTest, IntegratorWithWrongKeysStaysDownAndSaysWhy) {
  const curve::KeyPair node_keys = NewKeys("node");
  NewKeys("stranger");
  const curve::KeyPair other = NewKeys("other");
  nodes_.resize(1);
  const std::string ep = StartNode(nodes_[0], 0, 0, "tcp://127.0.0.1:*", "node");
  ASSERT_FALSE(ep.empty());
  // `last_error` of the replica in /health once the shard has one containing `want` (generous wait).
  auto health_error = [&](int port, const std::string& want) {
    std::string last;
    for (auto end = Clock::now() + 60s; Clock::now() < end; std::this_thread::sleep_for(50ms)) {
      const HttpResult h = Fetch("127.0.0.1", port, "/health");
      if (h.status != 200 || !h.body.is_object()) continue;
      const json& rep = h.body["shards"][0]["replica_detail"][0];
      last = rep.value("last_error", "");
      EXPECT_EQ(h.body["shards"][0]["replicas_up"], 0) << h.raw;
      if (last.find(want) != std::string::npos) break;
    }
    return last;
  };
  // A client key the node does not list: refused by the ZAP handler.
  std::ofstream(run_->path() + "/servers") << node_keys.public_key << "\n";
  std::unique_ptr<Process> p1;
  std::vector<std::string> args = {SEARCH_INTEGRATOR_BIN,
                                   "--shards",
                                   ep,
                                   "--http",
                                   "127.0.0.1:0",
                                   "--metrics",
                                   "",
                                   "--ping-ms",
                                   "100",
                                   "--curve-key",
                                   KeyFile("stranger"),
                                   "--curve-servers",
                                   run_->path() + "/servers"};
  p1 = std::make_unique<Process>();
  ASSERT_TRUE(p1->Start(args, run_->path() + "/i-stranger"));
  auto ready = p1->WaitReady(60s);
  ASSERT_TRUE(ready.has_value()) << p1->Logs();
  int port = std::atoi(ready->value("http", "").substr(ready->value("http", "").rfind(':') + 1).c_str());
  EXPECT_NE(health_error(port, "refused").find("refused"), std::string::npos);
  const HttpResult r = Fetch("127.0.0.1", port, "/search", {{"q", "w1"}});
  EXPECT_NE(r.status, 200) << r.raw;
  EXPECT_EQ(r.raw.find("_id"), std::string::npos) << r.raw;
  // The listed client key but the wrong server key: the handshake fails on the keys.
  std::ofstream(run_->path() + "/servers-wrong") << other.public_key << "\n";
  args[10] = KeyFile("integrator");
  args[12] = run_->path() + "/servers-wrong";
  integrator_ = std::make_unique<Process>();
  ASSERT_TRUE(integrator_->Start(args, run_->path() + "/i-wrong"));
  ready = integrator_->WaitReady(60s);
  ASSERT_TRUE(ready.has_value()) << integrator_->Logs();
  port = std::atoi(ready->value("http", "").substr(ready->value("http", "").rfind(':') + 1).c_str());
  EXPECT_NE(health_error(port, "handshake failed").find("handshake failed"), std::string::npos);
  p1->Signal(SIGTERM);
  EXPECT_TRUE(p1->Wait(30s).has_value());
}

// Garbage at a node's port while searches go through the integrator.
class JunkFloodTest : public CurveTest, public ::testing::WithParamInterface<bool> {};

TEST_P(JunkFloodTest, JunkFloodLeavesAnswersExact) {
  const bool use_curve = GetParam();
  std::string servers_file;
  curve::KeyPair node_keys;
  if (use_curve) {
    node_keys = NewKeys("node");
    servers_file = run_->path() + "/servers";
    std::ofstream(servers_file) << node_keys.public_key << "\n";
  }
  nodes_.resize(kShards);
  std::string shards;
  std::vector<std::string> eps;
  for (uint32_t s = 0; s < kShards; ++s) {
    eps.push_back(StartNode(nodes_[s], s, 0, "tcp://127.0.0.1:*", use_curve ? "node" : "", /*metrics=*/true));
    ASSERT_FALSE(eps.back().empty());
    shards += (s == 0 ? "" : ",") + eps.back();
  }
  const int port = StartIntegrator(integrator_, shards, servers_file);
  ASSERT_GT(port, 0);
  ASSERT_TRUE(WaitUp(port, 1));

  const std::string target = eps[0];
  const int target_port = std::atoi(target.substr(target.rfind(':') + 1).c_str());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> frames_sent{0}, raw_sent{0};
  std::vector<std::thread> flooders;
  // ZeroMQ flooders: random multi-part messages of random bytes, now and then one over the node's
  // 16 MiB message limit (the node drops that connection; a fresh socket carries on). Under CURVE one
  // flooder holds the listed client key (authenticated junk), the other none (refused at handshake).
  for (int f = 0; f < 2; ++f)
    flooders.emplace_back([&, f] {
      std::mt19937 rng(900 + f);
      zmq::context_t ctx{1};
      const std::string oversized((size_t{17} << 20), 'x');
      while (!stop.load()) {
        zmq::socket_t d(ctx, zmq::socket_type::dealer);
        d.set(zmq::sockopt::linger, 200);
        d.set(zmq::sockopt::sndtimeo, 200);
        if (use_curve && f == 0) {
          d.set(zmq::sockopt::curve_serverkey, node_keys.public_key);
          d.set(zmq::sockopt::curve_publickey, integrator_keys_.public_key);
          d.set(zmq::sockopt::curve_secretkey, integrator_keys_.secret_key);
        }
        d.connect(target);
        for (int m = 0; m < 2000 && !stop.load(); ++m) {
          // The oversized frame goes alone: libzmq 4.3.4 aborts the *sender* (session_base.cpp
          // clean_pipes) when the peer drops a connection in the middle of a multi-part message.
          const bool big = m % 397 == 396;
          const int parts = big ? 1 : 1 + static_cast<int>(rng() % 6);
          bool sent = true;
          for (int p = 0; p < parts && sent; ++p) {
            std::string bytes(rng() % 4096, '\0');
            for (char& c : bytes) c = static_cast<char>(rng());
            if (big) bytes = oversized;
            sent = d.send(zmq::buffer(bytes), p + 1 < parts ? zmq::send_flags::sndmore : zmq::send_flags::none)
                       .has_value();
          }
          if (sent) ++frames_sent;
          zmq::message_t reply;  // drain whatever error replies came back
          while (d.recv(reply, zmq::recv_flags::dontwait)) {
          }
        }
      }
    });
  // Raw TCP flooder: connections that send random bytes (sometimes after a ZMTP-like signature)
  // and close.
  flooders.emplace_back([&] {
    std::mt19937 rng(77);
    while (!stop.load()) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(target_port));
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
        std::string bytes(1 + rng() % 65536, '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
        if (rng() % 2 == 0)
          bytes.replace(0, std::min<size_t>(bytes.size(), 10), std::string("\xff\0\0\0\0\0\0\0\x01\x7f", 10));
        if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) > 0) ++raw_sent;
      }
      ::close(fd);
      std::this_thread::sleep_for(1ms);
    }
  });
  // The junk the node has seen: its bad-request counters (every reason).
  auto junk_seen = [&] {
    const std::string text = Scrape(nodes_[0].get());
    double bad = 0;
    for (const char* reason :
         {"bad_frames", "malformed", "unsupported_version", "invalid_argument", "unexpected_message"})
      bad += std::max(0.0, SeriesValue(text, std::string("search_bad_requests_total{component=\"node\",reason=\"") +
                                                 reason + "\"}"));
    return bad;
  };
  // Ordinary searches meanwhile, until the node has taken a good dose (a safety stop at 10 minutes
  // fails below rather than hanging).
  Tally t;
  std::mt19937 rng(5);
  double seen = 0;
  for (const auto give_up = Clock::now() + 10min; Clock::now() < give_up;) {
    for (int i = 0; i < 5; ++i) Query(port, rng, t);
    seen = junk_seen();
    if (seen >= 20000 && raw_sent.load() >= 300 && t.requests.load() >= 150) break;
  }
  stop = true;
  for (auto& f : flooders) f.join();
  for (int i = 0; i < 20; ++i) Query(port, rng, t);  // and after
  EXPECT_GE(seen, 20000) << "the node saw too little of the junk (" << frames_sent.load() << " messages sent)";
  EXPECT_GE(raw_sent.load(), 300u);
  std::cout << "junk messages sent " << frames_sent.load() << ", counted bad by the node " << seen
            << ", raw TCP connections " << raw_sent.load() << ", searches " << t.requests.load() << " ("
            << t.complete.load() - t.wrong.load() << " exact)\n";
  ExpectAllExact(t);
  EXPECT_TRUE(nodes_[0]->running()) << nodes_[0]->Logs().substr(0, 4000);
  const std::string text = Scrape(nodes_[0].get());
  if (use_curve) {
    const double refused = SeriesValue(text, "search_node_refused_peers_total{reason=\"no_curve\"}") +
                           SeriesValue(text, "search_node_refused_peers_total{reason=\"bad_handshake\"}");
    EXPECT_GT(refused, 0) << "the keyless and raw flooders were not refused";
    std::cout << "refused peers (no_curve + bad_handshake) " << refused << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, JunkFloodTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "curve" : "plain"; });

TEST_F(CurveTest, StartupRefusals) {
  const std::string shard0 = g->dirs[0] + "/shard-0";
  auto exit_of = [&](std::vector<std::string> args, const std::string& name, std::string* err) {
    Process p;
    EXPECT_TRUE(p.Start(args, run_->path() + "/" + name));
    auto st = p.Wait(60s);
    *err = Slurp(run_->path() + "/" + name + ".err");
    return st && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  };
  std::string err;
  // A node: plain beyond loopback.
  EXPECT_EQ(exit_of({SEARCH_NODE_BIN, "--index", shard0, "--listen", "tcp://0.0.0.0:*"}, "n1", &err), 2);
  EXPECT_NE(err.find("--insecure"), std::string::npos) << err;
  // A loose secret key; half the flags; a bad client list.
  NewKeys("node");
  ::chmod(KeyFile("node").c_str(), 0644);
  EXPECT_EQ(
      exit_of({SEARCH_NODE_BIN, "--index", shard0, "--curve-key", KeyFile("node"), "--curve-clients", clients_file_},
              "n2", &err),
      2);
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
  ::chmod(KeyFile("node").c_str(), 0600);
  EXPECT_EQ(exit_of({SEARCH_NODE_BIN, "--index", shard0, "--curve-key", KeyFile("node")}, "n3", &err), 2);
  std::ofstream(run_->path() + "/bad-clients") << "\n\nnot-a-key\n";
  EXPECT_EQ(exit_of({SEARCH_NODE_BIN, "--index", shard0, "--curve-key", KeyFile("node"), "--curve-clients",
                     run_->path() + "/bad-clients"},
                    "n4", &err),
            2);
  EXPECT_NE(err.find("bad-clients:3:"), std::string::npos) << err;
  // The integrator: plain to a node beyond loopback; an endpoint without a server key.
  EXPECT_EQ(exit_of({SEARCH_INTEGRATOR_BIN, "--shards", "tcp://10.255.0.1:7001", "--http", "127.0.0.1:0"}, "i1", &err),
            2);
  EXPECT_NE(err.find("--insecure"), std::string::npos) << err;
  std::ofstream(run_->path() + "/servers") << "tcp://127.0.0.1:7001 " << integrator_keys_.public_key << "\n";
  EXPECT_EQ(exit_of({SEARCH_INTEGRATOR_BIN, "--shards", "tcp://127.0.0.1:7001|tcp://127.0.0.1:7002", "--http",
                     "127.0.0.1:0", "--curve-key", KeyFile("integrator"), "--curve-servers", run_->path() + "/servers"},
                    "i2", &err),
            2);
  EXPECT_NE(err.find("tcp://127.0.0.1:7002"), std::string::npos) << err;
  // With --insecure both start (and say so).
  nodes_.resize(1);
  nodes_[0] = std::make_unique<Process>();
  ASSERT_TRUE(nodes_[0]->Start({SEARCH_NODE_BIN, "--index", shard0, "--listen", "tcp://0.0.0.0:*", "--insecure"},
                               run_->path() + "/n5"));
  ASSERT_TRUE(nodes_[0]->WaitReady(60s).has_value()) << nodes_[0]->Logs();
  EXPECT_NE(Slurp(run_->path() + "/n5.err").find("INSECURE"), std::string::npos);
}

}  // namespace
}  // namespace search::testing
