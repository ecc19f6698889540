// Clients that query a cluster while a test disrupts it (reliability_test, security_test): what
// they saw (Tally), their threads joined on any exit (ClientsJoin), one answer checked and counted
// (TallyAnswer), and a rolling restart of the nodes under their load (RollingRestart).
// Thread-safety: a Tally is shared by the client threads; the rest runs on the test's thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster_expect.hpp"
#include "cluster_harness.hpp"

namespace search::testing {

// What the clients saw.
struct Tally {
  std::atomic<uint64_t> requests{0}, complete{0}, incomplete{0}, wrong{0}, http_errors{0}, no_answer{0},
      bad_shard_counts{0};
  std::mutex mu;
  std::vector<std::string> examples;  // GUARDED_BY(mu), a few
  void Note(std::string what) {
    std::lock_guard lock(mu);
    if (examples.size() < 8) examples.push_back(std::move(what));
  }
  std::string Examples() {
    std::lock_guard lock(mu);
    std::string s;
    for (const auto& e : examples) s += "\n  " + e;
    return s;
  }
};

// Stops and joins the client threads when a test returns, also early (a failed ASSERT).
struct ClientsJoin {
  std::atomic<bool>& stop;
  std::vector<std::thread>& threads;
  ~ClientsJoin() {
    stop = true;
    for (auto& th : threads)
      if (th.joinable()) th.join();
  }
};

// Counts one answer `r` to the query `what` (after ++t.requests): no answer; an HTTP error; an
// answer whose _shards do not add up (total != successful + failed); incomplete (fewer than
// `shards` successful, or timed out; noted when expect_complete); or complete, and wrong when its
// hits differ from want().
inline void TallyAnswer(Tally& t, const HttpResult& r, const std::string& what, uint32_t shards,
                        const std::function<std::vector<ExternalHit>()>& want, bool expect_complete = true) {
  if (r.status == 0) {
    ++t.no_answer;
    t.Note("no answer: " + what);
    return;
  }
  if (r.status != 200 || !r.body.is_object()) {
    ++t.http_errors;
    t.Note("HTTP " + std::to_string(r.status) + " " + what + ": " + r.raw.substr(0, 300));
    return;
  }
  const auto& sh = r.body["_shards"];
  if (!sh.is_object() || !sh["total"].is_number() || !sh["successful"].is_number() || !sh["failed"].is_number() ||
      sh["total"].get<int>() != sh["successful"].get<int>() + sh["failed"].get<int>()) {
    ++t.bad_shard_counts;
    t.Note("_shards does not add up: " + sh.dump());
  }
  if (sh["successful"] != shards || r.body["timed_out"] != false) {
    ++t.incomplete;
    if (expect_complete) t.Note("incomplete " + what + ": " + sh.dump());
    return;
  }
  ++t.complete;
  const std::string diff = HitsDiffer(r.body["hits"]["hits"], want());
  if (!diff.empty()) {
    ++t.wrong;
    t.Note("wrong " + what + ": " + diff);
  }
}

// Whether the clients sent `n` more requests within `limit`: counts, not a fixed time.
inline bool MoreRequests(const Tally& t, uint64_t n, std::chrono::milliseconds limit) {
  const uint64_t want = t.requests.load() + n;
  const auto until = Clock::now() + limit;
  while (Clock::now() < until && t.requests.load() < want) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return t.requests.load() >= want;
}

// What RollingRestart does to a cluster: its nodes, one of them started again, and whether every
// shard has all its replicas up (within a limit).
struct RestartPlan {
  size_t nodes = 0;
  std::function<Process*(size_t)> node;
  std::function<void(size_t)> start;  // may fail with gtest fatal failures
  std::function<bool()> replicas_up;
  std::chrono::milliseconds wait{30000};  // for requests, and for a replica to come back
};

// Under the clients' load (they count into t until `stop`): each node in turn gets SIGTERM and must
// exit 0, the clients send 8 requests while it is away, it starts again and every replica is back
// before the next. Then the clients reach 100 requests in all (at least 8 more), are stopped and
// joined, and every request must have been answered complete and exact. `label` heads the line
// printed with the totals.
inline void RollingRestart(Tally& t, std::atomic<bool>& stop, std::vector<std::thread>& clients, const RestartPlan& p,
                           const std::string& label) {
  EXPECT_TRUE(MoreRequests(t, 8, p.wait));
  for (size_t i = 0; i < p.nodes; ++i) {
    const uint64_t before = t.requests.load();
    p.node(i)->Signal(SIGTERM);
    auto st = p.node(i)->Wait(std::chrono::seconds(15));
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "node " << i << ": " << DescribeExit(st);
    EXPECT_TRUE(MoreRequests(t, 8, p.wait)) << "queries run while this replica is away";
    p.start(i);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(p.replicas_up()) << "replica " << i << " did not come back";
    EXPECT_GT(t.requests.load(), before) << "no queries ran while node " << i << " restarted";
  }
  EXPECT_TRUE(MoreRequests(t, t.requests.load() > 100 ? 8 : 108 - t.requests.load(), p.wait));
  stop = true;
  for (auto& c : clients) c.join();
  std::cerr << label << ": " << t.requests << " requests, " << t.complete << " complete\n";
  EXPECT_GT(t.requests.load(), 100u);
  EXPECT_EQ(t.complete.load(), t.requests.load()) << t.Examples();
  EXPECT_EQ(t.incomplete.load(), 0u) << t.Examples();
  EXPECT_EQ(t.wrong.load(), 0u) << t.Examples();
  EXPECT_EQ(t.http_errors.load(), 0u) << t.Examples();
  EXPECT_EQ(t.no_answer.load(), 0u) << t.Examples();
  EXPECT_EQ(t.bad_shard_counts.load(), 0u) << t.Examples();
}

}  // namespace search::testing
