// The shard node in-process: a NodeServer on a loopback port over a random shard, driven by a
// DEALER. Answers must equal CpuExecutor's exactly; deadlines, load shedding, garbage frames,
// version mismatch, Ping and draining stop behave as node_server.hpp promises.
#include "node/node_server.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "../prometheus_text.hpp"
#include "../thread_cpus.hpp"
#include "core/cpus.hpp"
#include "metrics/metrics.hpp"
#include "node/executor.hpp"
#include "node/scheduled_executor.hpp"
#include "node_fixture.hpp"

namespace search {
namespace {

using testing::Client;
using testing::RandomRequest;
using testing::Reference;

constexpr uint32_t kDocs = 3000;
constexpr uint32_t kVocab = 400;

int64_t WallMicros(int64_t offset_us) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
             .count() +
         offset_us;
}

// An executor that waits before delegating, to hold workers busy.
class SlowExecutor final : public Executor {
 public:
  SlowExecutor(Executor* inner, std::chrono::milliseconds delay) : inner_(inner), delay_(delay) {}
  std::string_view name() const override { return "slow"; }
  Result<ExecOutput> Execute(const Query& q, Deadline d, uint32_t flags) override {
    started_.fetch_add(1);
    std::this_thread::sleep_for(delay_);
    return inner_->Execute(q, d, flags);
  }
  int started() const { return started_.load(); }

 private:
  Executor* inner_;
  std::chrono::milliseconds delay_;
  std::atomic<int> started_{0};
};

// An executor that answers through ExecuteAsync on threads of its own, `delay` later: the node's
// asynchronous path, where the finishing thread (not the worker) queues the reply.
class DeferredExecutor final : public Executor {
 public:
  DeferredExecutor(Executor* inner, std::chrono::milliseconds delay) : inner_(inner), delay_(delay) {}
  ~DeferredExecutor() override {
    for (auto& t : threads_) t.join();
  }
  std::string_view name() const override { return "deferred"; }
  Result<ExecOutput> Execute(const Query& q, Deadline d, uint32_t flags) override {
    sync_.fetch_add(1);
    return inner_->Execute(q, d, flags);
  }
  void ExecuteAsync(Query q, Deadline d, uint32_t flags, std::function<void(Result<ExecOutput>)> done,
                    double caller_max_us) override {
    started_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    calls_.push_back(Call{name, caller_max_us});
    threads_.emplace_back([this, q = std::move(q), d, flags, done = std::move(done)] {
      std::this_thread::sleep_for(delay_);
      done(inner_->Execute(q, d, flags));
    });
  }
  bool BoundsCaller() const override { return true; }
  int started() const { return started_.load(); }
  int sync() const { return sync_.load(); }
  // Each ExecuteAsync's calling thread (its name) and caller_max_us, in call order.
  struct Call {
    std::string thread;
    double caller_max_us = 0;
  };
  std::vector<Call> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  Executor* inner_;
  std::chrono::milliseconds delay_;
  std::atomic<int> started_{0}, sync_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::vector<Call> calls_;
};

class NodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const std::string path = dir_->path() + "/shard-0";
    Status st = testing::WriteRandomShard(path, kDocs, kVocab, 42);
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto reader = ShardReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    shard_ = reader->release();
  }
  static void TearDownTestSuite() {
    delete shard_;
    delete dir_;
  }

  std::unique_ptr<NodeServer> Start(Executor* exec, NodeServerOptions o = {}) {
    o.listen = "tcp://127.0.0.1:*";
    auto server = std::make_unique<NodeServer>(shard_, exec, &metrics_, o);
    Status st = server->Start();
    EXPECT_TRUE(st.ok()) << st.ToString();
    return server;
  }

  // The scheduler under the CPU policy with 3 workers, and a node's options that hand each request
  // to it (2 request threads).
  static Result<std::unique_ptr<ScheduledExecutor>> CpuScheduler() {
    ScheduledExecutorOptions so;
    so.sched.policy.mode = SchedMode::kCpu;
    so.sched.cpu_workers = 3;
    so.calibration_queries = 8;
    return ScheduledExecutor::Create(shard_, nullptr, nullptr, so);
  }
  static NodeServerOptions AsyncOptions() {
    NodeServerOptions o;
    o.threads = 2;
    return o;
  }

  // Sends n random requests, ids 1..n, pipelined (the workers answer out of order), each with a
  // 30 s deadline and then `adjust`ed; returns them by id.
  static std::map<uint64_t, SearchRequestMsg> SendRandomRequests(Client& client, uint64_t seed, uint64_t n,
                                                                 const std::function<void(SearchRequestMsg&)>& adjust) {
    std::mt19937_64 rng(seed);
    std::map<uint64_t, SearchRequestMsg> sent;
    for (uint64_t id = 1; id <= n; ++id) {
      SearchRequestMsg r = RandomRequest(rng, kVocab, id);
      r.deadline_unix_micros = WallMicros(30'000'000);
      adjust(r);
      sent[id] = r;
      client.Send(EncodeSearchRequest(r));
    }
    return sent;
  }

  // Receives one reply per request sent, each OK, for a request sent and not answered before, and
  // hands it to `check` with its request.
  static void ExpectEachAnsweredOnce(Client& client, const std::map<uint64_t, SearchRequestMsg>& sent,
                                     const std::function<void(const SearchRequestMsg&, SearchResponseMsg&)>& check) {
    std::set<uint64_t> seen;
    for (size_t i = 0; i < sent.size(); ++i) {
      SearchResponseMsg resp = client.RecvResponse();
      ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
      ASSERT_TRUE(sent.count(resp.request_id)) << resp.request_id;
      EXPECT_TRUE(seen.insert(resp.request_id).second) << "duplicate reply " << resp.request_id;
      check(sent.at(resp.request_id), resp);
    }
  }

  // Sends requests 1..n, each the same or-query; returns it.
  static SearchRequestMsg SendSameQuery(Client& client, uint64_t n) {
    SearchRequestMsg r;
    r.terms = {"w2", "w7"};
    r.mode = QueryMode::kOr;
    for (uint64_t id = 1; id <= n; ++id) {
      r.request_id = id;
      client.Send(EncodeSearchRequest(r));
    }
    return r;
  }

  // Stops the server while requests 1..n (all `r`) are in flight, sends request 50 meanwhile, and
  // checks the drain: 1..n answered exactly, 50 refused Unavailable.
  void StopWhileBusyAndCheck(NodeServer& server, Client& client, SearchRequestMsg r, uint64_t n) {
    std::thread stopper([&] { server.Stop(); });
    std::map<uint64_t, SearchResponseMsg> got;
    // Request 50 goes once the drain has begun (pings answer "draining"), not after a fixed time
    // that a loaded machine may not give the stopper thread.
    bool draining = false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (uint64_t ping = 900; !draining && std::chrono::steady_clock::now() < until; ++ping) {
      client.Send(EncodePing(PingMsg{ping}));
      while (auto env = client.Recv(100)) {
        if (env->kind() == MessageKind::kPong) {
          draining = draining || std::get<PongMsg>(env->body).health.state == "draining";
        } else if (env->kind() == MessageKind::kSearchResponse) {
          const auto& resp = std::get<SearchResponseMsg>(env->body);
          got[resp.request_id] = resp;
        }
      }
    }
    EXPECT_TRUE(draining);
    r.request_id = 50;
    client.Send(EncodeSearchRequest(r));
    while (got.size() < n + 1) {
      auto env = client.Recv(10000);
      if (!env) break;
      if (env->kind() != MessageKind::kSearchResponse) continue;  // a late pong
      const auto& resp = std::get<SearchResponseMsg>(env->body);
      got[resp.request_id] = resp;
    }
    stopper.join();
    ASSERT_EQ(got.size(), n + 1);
    const std::vector<HitMsg> want = Reference(*shard_, r);
    for (uint64_t id = 1; id <= n; ++id) {
      EXPECT_TRUE(got[id].status.ok()) << id << ": " << got[id].status.ToString();
      EXPECT_EQ(got[id].hits, want);
    }
    EXPECT_EQ(got[50].status.code(), StatusCode::kUnavailable);
    EXPECT_FALSE(server.running());
    EXPECT_EQ(server.in_flight(), 0u);
  }

  static testing::TempDir* dir_;
  static ShardReader* shard_;
  zmq::context_t ctx_{1};
  Metrics metrics_{"node"};
  CpuExecutorAdapter cpu_{shard_};
};
testing::TempDir* NodeTest::dir_ = nullptr;
ShardReader* NodeTest::shard_ = nullptr;

TEST_F(NodeTest, AnswersEqualTheCpuExecutor) {
  NodeServerOptions o;
  o.threads = 4;
  auto server = Start(&cpu_, o);
  Client client(ctx_, server->endpoint());
  const auto sent = SendRandomRequests(
      client, 7, 600, [](SearchRequestMsg& r) { r.flags = r.request_id % 2 == 0 ? kFlagIncludeStats : 0; });
  size_t nonempty = 0;
  ASSERT_NO_FATAL_FAILURE(ExpectEachAnsweredOnce(client, sent, [&](const SearchRequestMsg& r, SearchResponseMsg& resp) {
    const std::vector<HitMsg> want = Reference(*shard_, r);
    EXPECT_EQ(resp.hits, want) << "request " << r.request_id;  // scores compared bit for bit
    nonempty += !want.empty();
    EXPECT_EQ(resp.shard_id, 0u);
    EXPECT_EQ(resp.doc_begin, 0u);
    EXPECT_EQ(resp.doc_end, kDocs);
    if (r.flags & kFlagIncludeStats) {
      EXPECT_EQ(resp.stats.processor, Processor::kCpu);
      if (!want.empty()) {
        EXPECT_GT(resp.stats.postings_decoded, 0u);
      }
    } else {
      EXPECT_EQ(resp.stats.postings_decoded, 0u);
    }
  }));
  EXPECT_GT(nonempty, sent.size() / 2);
  // Every reply was counted by mode and status; list cache stats come from the shard.
  const std::string text = metrics_.SerializeText();
  double ok_total = 0;
  for (const char* mode : {"and", "or", "andor"}) {
    const std::string series =
        std::string("search_requests_total{component=\"node\",mode=\"") + mode + "\",status=\"ok\"} ";
    const size_t p = text.find(series);
    ASSERT_NE(p, std::string::npos) << series;
    ok_total += std::stod(text.substr(p + series.size()));
  }
  EXPECT_EQ(ok_total, 600);
  EXPECT_NE(text.find("search_list_cache_hits_total "), std::string::npos);
  EXPECT_GT(shard_->list_cache().stats().hits, 0u);
  server->Stop();
  EXPECT_EQ(server->in_flight(), 0u);
}

// The worker hands each request to ExecuteAsync and takes the next; the thread that
// finishes it queues the reply. Over the scheduler (its CPU workers answer), every reply equals the
// CPU engine's, once each; an andor split still runs on the worker (two runs in a row).
TEST_F(NodeTest, AsyncExecuteAnswersEqualTheCpuExecutor) {
  auto sched = CpuScheduler();
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  NodeServerOptions o = AsyncOptions();
  auto server = Start(sched->get(), o);
  Client client(ctx_, server->endpoint());
  const auto sent = SendRandomRequests(client, 11, 400, [](SearchRequestMsg& r) {
    if (r.request_id % 5 == 0 && r.mode == QueryMode::kAnd) r.flags |= kFlagAndOrSplit;
  });
  ASSERT_NO_FATAL_FAILURE(ExpectEachAnsweredOnce(client, sent, [&](const SearchRequestMsg& r, SearchResponseMsg& resp) {
    SearchRequestMsg plain = r;
    plain.flags &= ~kFlagAndOrSplit;
    EXPECT_EQ(resp.hits, Reference(*shard_, plain)) << "request " << resp.request_id;
  }));
  server->Stop();
  EXPECT_EQ(server->in_flight(), 0u);
  EXPECT_GE((*sched)->scheduler().stats().jobs[0], 400u);  // every request went through the scheduler
}

// Query trees and counts travel to the executor whole: every reply equals the CPU engine's answer
// to the same Query (hits, scores bit for bit, the exact total; a refusal with the same status),
// directly and over the scheduler; an andor split with a count also carries the OR total.
TEST_F(NodeTest, TreesAndCountsAnswerAsTheCpuEngine) {
  auto sched = CpuScheduler();
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  for (Executor* exec : {static_cast<Executor*>(&cpu_), static_cast<Executor*>(sched->get())}) {
    SCOPED_TRACE(exec->name());
    auto server = Start(exec, AsyncOptions());
    Client client(ctx_, server->endpoint());
    std::mt19937_64 rng(23);
    std::map<uint64_t, SearchRequestMsg> sent;
    for (uint64_t id = 1; id <= 300; ++id) {
      SearchRequestMsg r = testing::RandomTreeRequest(rng, id, /*phrases=*/id % 10 == 0);
      if (id % 3 == 0 && r.mode == QueryMode::kAnd && r.k > 0) r.flags |= kFlagAndOrSplit;
      sent[id] = r;
      client.Send(EncodeSearchRequest(r));
    }
    size_t counted = 0, split_or = 0, matched = 0;
    for (size_t i = 0; i < sent.size(); ++i) {
      SearchResponseMsg resp = client.RecvResponse();
      ASSERT_TRUE(sent.count(resp.request_id)) << resp.request_id << ": " << resp.status.ToString();
      const SearchRequestMsg& r = sent.at(resp.request_id);
      const std::string what = "request " + std::to_string(r.request_id) + " " + CanonicalKey(*r.tree) + " " +
                               std::string(QueryModeName(r.mode)) + " k=" + std::to_string(r.k) +
                               (r.count ? " count" : "");
      auto want = cpu_.Execute(ToQuery(r), kNoDeadline, 0);
      if (!want.ok()) {
        EXPECT_EQ(resp.status.code(), want.status().code()) << what;
        EXPECT_EQ(resp.status.message(), want.status().message()) << what;
        continue;
      }
      ASSERT_TRUE(resp.status.ok()) << what << ": " << resp.status.ToString();
      EXPECT_TRUE(testing::SameHits(resp.hits, want->hits)) << what;
      EXPECT_EQ(resp.has_total, r.count) << what;
      if (r.count) {
        ++counted;
        EXPECT_TRUE(want->has_total) << what;
        EXPECT_EQ(resp.total, want->total) << what;
        matched += want->total > 0;
      }
      const bool split = (r.flags & kFlagAndOrSplit) != 0;
      EXPECT_EQ(resp.has_or_hits, split && want->hits.size() < r.k) << what;
      if (resp.has_or_hits) {
        ++split_or;
        Query q = ToQuery(r);
        q.mode = QueryMode::kOr;
        auto want_or = cpu_.Execute(q, kNoDeadline, 0);
        ASSERT_TRUE(want_or.ok()) << what;
        EXPECT_TRUE(testing::SameHits(resp.or_hits, want_or->hits)) << what;
        EXPECT_EQ(resp.or_total, r.count ? want_or->total : 0) << what;
      }
    }
    EXPECT_GT(counted, 50u);
    EXPECT_GT(matched, 10u);
    EXPECT_GT(split_or, 0u);
    server->Stop();
  }
}

// A reply queued by the thread that finished its query wakes the I/O thread only when that thread
// may be asleep in poll (NodeServer's io_idle); while it is awake the reply waits for its next look
// at the queue. With the I/O thread's poll raised to a minute, a lost wake-up would hold a reply
// past the client's 5 s: one request at a time (the I/O thread asleep at each answer), then bursts
// (replies queued while it is awake sending the others), alternating.
TEST_F(NodeTest, QueuedRepliesWakeTheIoThreadWithoutItsPollTimeout) {
  auto sched = CpuScheduler();
  ASSERT_TRUE(sched.ok()) << sched.status().ToString();
  NodeServerOptions o = AsyncOptions();
  o.io_poll = std::chrono::minutes(1);
  auto server = Start(sched->get(), o);
  Client client(ctx_, server->endpoint());
  std::mt19937_64 rng(23);
  uint64_t id = 1'000'000;  // the bursts' ids are 1..80, each burst answered before the next
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 60; ++i) {
      SearchRequestMsg r = RandomRequest(rng, kVocab, ++id);
      client.Send(EncodeSearchRequest(r));
      SearchResponseMsg resp = client.RecvResponse();
      ASSERT_TRUE(resp.status.ok()) << "request " << id << ": " << resp.status.ToString();
      ASSERT_EQ(resp.request_id, id);
      EXPECT_EQ(resp.hits, Reference(*shard_, r)) << "request " << id;
    }
    const auto sent = SendRandomRequests(client, 100 + round, 80, [](SearchRequestMsg&) {});
    ASSERT_NO_FATAL_FAILURE(ExpectEachAnsweredOnce(client, sent, [&](const SearchRequestMsg& r, SearchResponseMsg& resp) {
      EXPECT_EQ(resp.hits, Reference(*shard_, r)) << "request " << resp.request_id;
    }));
  }
  server->Stop();
  EXPECT_EQ(server->in_flight(), 0u);
}

// Answers still running when Stop() is called: the drain waits for them, every
// request handed over is answered once, and Stop() returns only after the last answer (its thread
// touches the server's state); new work meanwhile is refused.
TEST_F(NodeTest, AsyncExecuteStopWaitsForHandedOverRequests) {
  // 1 s a request: the drain lasts long enough for the request sent during it, even when loaded.
  DeferredExecutor deferred(&cpu_, std::chrono::milliseconds(1000));
  NodeServerOptions o;
  o.threads = 2;
  auto server = Start(&deferred, o);
  Client client(ctx_, server->endpoint());
  const SearchRequestMsg r = SendSameQuery(client, 6);
  for (int i = 0; i < 5000 && deferred.started() < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(deferred.started(), 6);  // two workers took six requests: none waited for an answer
  StopWhileBusyAndCheck(*server, client, r, 6);
  EXPECT_EQ(deferred.sync(), 0);
}

// A search reaching an idle node (nothing in flight) is handed to the executor by the I/O thread,
// with a bound on what it may run itself, and counted; one arriving while another is in flight,
// and an andor split (two runs in a row), go through a worker, unbounded. Answers stay exact.
TEST_F(NodeTest, IdleNodeHandsASearchOnFromItsIoThread) {
  DeferredExecutor deferred(&cpu_, std::chrono::milliseconds(300));
  auto server = Start(&deferred, AsyncOptions());
  Client client(ctx_, server->endpoint());
  const double before = testing::SeriesValue(metrics_.SerializeText(), "search_node_io_thread_requests_total");
  std::mt19937_64 rng(5);
  std::vector<SearchRequestMsg> sent;
  for (uint64_t id = 1; id <= 2; ++id) {  // the second arrives while the first is in flight (300 ms)
    sent.push_back(RandomRequest(rng, kVocab, id));
    client.Send(EncodeSearchRequest(sent.back()));
    for (int i = 0; i < 5000 && deferred.started() < static_cast<int>(id); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int i = 0; i < 2; ++i) {
    SearchResponseMsg resp = client.RecvResponse();
    ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
    ASSERT_TRUE(resp.request_id == 1 || resp.request_id == 2) << resp.request_id;
    EXPECT_EQ(resp.hits, Reference(*shard_, sent[resp.request_id - 1]));
  }
  const auto calls = deferred.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].thread, "node-io");
  EXPECT_GT(calls[0].caller_max_us, 0);
  EXPECT_LT(calls[0].caller_max_us, 1e6);
  EXPECT_EQ(calls[1].thread, "node-worker");
  EXPECT_EQ(calls[1].caller_max_us, kNoCallerBound);
  // Idle again: an andor split goes to a worker (not through ExecuteAsync), the next plain one to
  // the I/O thread.
  SearchRequestMsg split = RandomRequest(rng, kVocab, 3);
  split.mode = QueryMode::kAnd;
  split.flags |= kFlagAndOrSplit;
  client.Send(EncodeSearchRequest(split));
  SearchResponseMsg resp = client.RecvResponse();
  ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
  EXPECT_EQ(resp.request_id, 3u);
  EXPECT_GE(deferred.sync(), 1);  // its AND, and its OR when the AND found fewer than k
  EXPECT_EQ(deferred.calls().size(), 2u);
  SearchRequestMsg last = RandomRequest(rng, kVocab, 4);
  client.Send(EncodeSearchRequest(last));
  resp = client.RecvResponse();
  ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
  EXPECT_EQ(resp.hits, Reference(*shard_, last));
  ASSERT_EQ(deferred.calls().size(), 3u);
  EXPECT_EQ(deferred.calls()[2].thread, "node-io");
  EXPECT_EQ(testing::SeriesValue(metrics_.SerializeText(), "search_node_io_thread_requests_total") - before, 2);
  server->Stop();
  EXPECT_EQ(server->in_flight(), 0u);
}

// --slow-query-ms: a request that spends the threshold in the node is counted and logged with
// where its time went; past slow_log_per_second in a second only counted; a fast node logs none.
TEST_F(NodeTest, SlowQueriesAreLoggedWithTheirPhasesAndCounted) {
  auto slow_total = [&] {
    const std::string text = metrics_.SerializeText();
    const std::string series = "\nsearch_node_slow_queries_total ";
    const size_t p = text.find(series);
    return p == std::string::npos ? -1.0 : std::stod(text.substr(p + series.size()));
  };
  NodeServerOptions o;
  o.threads = 4;
  o.slow_query_ms = 200;
  o.slow_log_per_second = 2;
  std::mt19937_64 rng(3);
  ::testing::internal::CaptureStderr();
  {
    auto fast = Start(&cpu_, o);
    Client client(ctx_, fast->endpoint());
    for (uint64_t id = 1; id <= 20; ++id) client.Send(EncodeSearchRequest(RandomRequest(rng, kVocab, id)));
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(client.RecvResponse().status.ok());
    fast->Stop();
  }
  EXPECT_EQ(slow_total(), 0);
  SlowExecutor slow(&cpu_, std::chrono::milliseconds(250));
  auto server = Start(&slow, o);
  Client client(ctx_, server->endpoint());
  std::map<uint64_t, std::string> terms;
  for (uint64_t id = 1; id <= 6; ++id) {
    SearchRequestMsg r = RandomRequest(rng, kVocab, id);
    terms[id] = r.terms.front();
    client.Send(EncodeSearchRequest(r));
  }
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(client.RecvResponse().status.ok());
  server->Stop();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(slow_total(), 6);
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);)
    if (l.find("slow query: total_ms=") != std::string::npos) lines.push_back(l);
  ASSERT_EQ(lines.size(), 2u) << log;  // the rate limit: 2 of the 6 within the second
  for (const std::string& l : lines) {
    const auto field = [&](const std::string& key) {
      const size_t p = l.find(" " + key + "=");
      EXPECT_NE(p, std::string::npos) << key << " in " << l;
      return p == std::string::npos ? std::string()
                                    : l.substr(p + key.size() + 2, l.find(' ', p + 1) - p - key.size() - 2);
    };
    EXPECT_GE(std::stod(field("execute_ms")), 250.0) << l;
    EXPECT_GE(std::stod(field("total_ms")), std::stod(field("execute_ms"))) << l;
    EXPECT_GE(std::stod(field("queue_ms")), 0.0) << l;
    EXPECT_EQ(field("processor"), "cpu") << l;
    EXPECT_EQ(field("status"), "OK") << l;
    const uint64_t id = std::stoull(field("request_id"));
    ASSERT_TRUE(terms.count(id)) << l;
    EXPECT_NE(l.find("query=\"" + terms[id]), std::string::npos) << l;  // the terms, first one first
  }

  // A wire message's terms are any bytes: quotes, backslashes and control bytes are escaped, so
  // the log line stays one line that a term cannot forge.
  ::testing::internal::CaptureStderr();
  {
    auto again = Start(&slow, o);
    Client c2(ctx_, again->endpoint());
    SearchRequestMsg r = RandomRequest(rng, kVocab, 77);
    r.terms = {"a\"b\\c\nWARN forged"};
    c2.Send(EncodeSearchRequest(r));
    EXPECT_TRUE(c2.RecvResponse().status.ok());
    again->Stop();
  }
  const std::string log2 = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log2.find("query=\"a\\x22b\\x5cc\\x0aWARN forged\"\n"), std::string::npos) << log2;
  EXPECT_EQ(log2.find("\nWARN forged"), std::string::npos) << log2;
}

TEST_F(NodeTest, PastDeadlineIsAnsweredWithoutRunning) {
  SlowExecutor slow(&cpu_, std::chrono::milliseconds(0));
  auto server = Start(&slow);
  Client client(ctx_, server->endpoint());
  SearchRequestMsg r;
  r.request_id = 99;
  r.terms = {"w1", "w2"};
  r.deadline_unix_micros = WallMicros(-1000);
  client.Send(EncodeSearchRequest(r));
  SearchResponseMsg resp = client.RecvResponse();
  EXPECT_EQ(resp.request_id, 99u);
  EXPECT_EQ(resp.status.code(), StatusCode::kDeadlineExceeded) << resp.status.ToString();
  EXPECT_TRUE(resp.hits.empty());
  EXPECT_EQ(slow.started(), 0);
  // No deadline at all: it runs.
  r.deadline_unix_micros = 0;
  client.Send(EncodeSearchRequest(r));
  EXPECT_TRUE(client.RecvResponse().status.ok());
  EXPECT_EQ(slow.started(), 1);
}

TEST_F(NodeTest, DeadlinePassingWhileQueuedIsNotRun) {
  SlowExecutor slow(&cpu_, std::chrono::milliseconds(300));
  NodeServerOptions o;
  o.threads = 1;
  auto server = Start(&slow, o);
  Client client(ctx_, server->endpoint());
  SearchRequestMsg a;
  a.request_id = 1;
  a.terms = {"w3"};
  client.Send(EncodeSearchRequest(a));
  SearchRequestMsg b = a;
  b.request_id = 2;
  b.deadline_unix_micros = WallMicros(100'000);  // passes while `a` holds the only worker
  client.Send(EncodeSearchRequest(b));
  std::map<uint64_t, SearchResponseMsg> got;
  for (int i = 0; i < 2; ++i) {
    SearchResponseMsg r = client.RecvResponse();
    got[r.request_id] = r;
  }
  EXPECT_TRUE(got[1].status.ok());
  EXPECT_EQ(got[2].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(got[2].status.message().find("queued"), std::string::npos) << got[2].status.message();
  EXPECT_EQ(slow.started(), 1);
}

// Sends n copies of one query at once; counts the answers that are ok and those shed
// (ResourceExhausted, whose messages go to `shed_messages`).
std::pair<int, int> SendBurstAndCount(Client& client, int n, std::vector<std::string>* shed_messages = nullptr) {
  SearchRequestMsg r;
  r.terms = {"w5"};
  for (int id = 1; id <= n; ++id) {
    r.request_id = static_cast<uint64_t>(id);
    client.Send(EncodeSearchRequest(r));
  }
  int ok = 0, shed = 0;
  for (int i = 0; i < n; ++i) {
    SearchResponseMsg resp = client.RecvResponse();
    if (resp.status.ok()) ++ok;
    if (resp.status.code() == StatusCode::kResourceExhausted) {
      ++shed;
      if (shed_messages != nullptr) shed_messages->push_back(resp.status.message());
    }
  }
  return {ok, shed};
}

// The executor holds each request 1 s: the whole burst is in (queued or shed) long before the
// first leaves, even on a loaded machine.
TEST_F(NodeTest, FullQueueShedsLoad) {
  SlowExecutor slow(&cpu_, std::chrono::milliseconds(1000));
  NodeServerOptions o;
  o.threads = 1;
  o.queue_capacity = 2;
  auto server = Start(&slow, o);
  Client client(ctx_, server->endpoint());
  const auto [ok, shed] = SendBurstAndCount(client, 6);
  // One running plus two queued at most; the rest shed at once.
  EXPECT_GE(ok, 2);
  EXPECT_LE(ok, 3);
  EXPECT_EQ(ok + shed, 6);
}

// Workers hand requests on at once, so the queue never fills; the node still sheds
// past queue_capacity + threads requests in flight (handed over and not yet answered), and every
// request is answered once, ok or shed.
TEST_F(NodeTest, AsyncExecuteShedsPastTheRequestsInFlight) {
  DeferredExecutor deferred(&cpu_, std::chrono::milliseconds(1000));
  NodeServerOptions o;
  o.threads = 1;
  o.queue_capacity = 2;
  auto server = Start(&deferred, o);
  Client client(ctx_, server->endpoint());
  std::vector<std::string> messages;
  const auto [ok, shed] = SendBurstAndCount(client, 8, &messages);
  for (const std::string& m : messages) EXPECT_NE(m.find("in flight"), std::string::npos) << m;
  EXPECT_EQ(ok, 3);  // queue_capacity + threads: the executor holds each for 1 s
  EXPECT_EQ(ok + shed, 8);
  EXPECT_EQ(deferred.started(), 3);
  server->Stop();
  EXPECT_EQ(server->in_flight(), 0u);
}

TEST_F(NodeTest, GarbageIsAnsweredOrDroppedAndTheNodeKeepsServing) {
  auto server = Start(&cpu_);
  Client client(ctx_, server->endpoint());
  std::mt19937_64 rng(3);
  // Random bytes: no request id to answer; dropped and counted.
  for (int i = 0; i < 200; ++i) {
    std::string junk(8 * (1 + rng() % 20) + (i % 3), '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    client.Send(junk);
  }
  // Truncated and bit-flipped valid requests.
  SearchRequestMsg good;
  good.request_id = 5;
  good.terms = {"w1"};
  const std::string frame = EncodeSearchRequest(good);
  for (size_t len = 0; len < frame.size(); len += 8) client.Send(frame.substr(0, len));
  // A wrong major version: answered with the request id.
  SearchRequestMsg v2 = good;
  v2.request_id = 777;
  client.Send(EncodeEnvelope(EnvelopeMsg{.major = 2, .minor = 0, .body = v2}));
  // One frame, without the delimiter: answered in one frame (kMinorOneFrame). Odd multipart
  // shapes (extra frames): refused.
  SearchRequestMsg odd = good;
  odd.request_id = 778;
  client.SendFrames({EncodeSearchRequest(odd)});
  odd.request_id = 781;
  client.SendFrames({"", "x", "y", "z", EncodeSearchRequest(odd)});
  // Invalid fields: k = 0.
  SearchRequestMsg badk = good;
  badk.request_id = 779;
  badk.k = 0;
  client.Send(EncodeSearchRequest(badk));
  // A message a node does not accept.
  SearchResponseMsg not_a_request;
  not_a_request.request_id = 780;
  client.Send(EncodeSearchResponse(not_a_request));
  // And finally a good request.
  good.request_id = 1000;
  client.Send(EncodeSearchRequest(good));

  std::map<uint64_t, SearchResponseMsg> got;
  std::map<uint64_t, size_t> frames;
  for (int i = 0; i < 6; ++i) {
    auto env = client.Recv(3000);
    if (!env) break;
    ASSERT_EQ(env->kind(), MessageKind::kSearchResponse);
    const auto& r = std::get<SearchResponseMsg>(env->body);
    got[r.request_id] = r;
    frames[r.request_id] = client.last_frames;
  }
  std::string ids;
  for (const auto& [id, r] : got) ids += std::to_string(id) + " ";
  ASSERT_EQ(got.size(), 6u) << ids;
  EXPECT_EQ(got[777].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got[777].status.message(), "unsupported protocol major version 2 (this node speaks 1)");
  ASSERT_TRUE(got[778].status.ok()) << got[778].status.ToString();
  EXPECT_EQ(got[778].hits, Reference(*shard_, good));
  EXPECT_EQ(frames[778], 1u);
  EXPECT_EQ(frames[1000], 2u);
  EXPECT_EQ(frames[781], 2u);
  EXPECT_EQ(got[781].status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got[781].status.message().find("got 5 frames"), std::string::npos) << got[781].status.message();
  EXPECT_EQ(got[779].status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got[779].status.message().find("k"), std::string::npos);
  EXPECT_EQ(got[780].status.code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(got[1000].status.ok()) << got[1000].status.ToString();
  EXPECT_EQ(got[1000].hits, Reference(*shard_, good));
  EXPECT_FALSE(client.Recv(200).has_value());  // nothing else was answered
  EXPECT_GE(server->dropped_frames(), 200u);
  const std::string text = metrics_.SerializeText();
  EXPECT_NE(text.find(R"(search_bad_requests_total{component="node",reason="unsupported_version"} 1)"),
            std::string::npos);
}

TEST_F(NodeTest, PingAnswersPongWithShardHealth) {
  auto server = Start(&cpu_);
  Client client(ctx_, server->endpoint());
  client.Send(EncodePing(PingMsg{31}));
  auto env = client.Recv();
  ASSERT_TRUE(env.has_value());
  ASSERT_EQ(env->kind(), MessageKind::kPong);
  const PongMsg& pong = std::get<PongMsg>(env->body);
  EXPECT_EQ(pong.request_id, 31u);
  EXPECT_TRUE(pong.status.ok());
  EXPECT_EQ(pong.health.shard_id, 0u);
  EXPECT_EQ(pong.health.num_shards, 1u);
  EXPECT_EQ(pong.health.doc_begin, 0u);
  EXPECT_EQ(pong.health.doc_end, kDocs);
  EXPECT_EQ(pong.health.num_docs_global, kDocs);
  EXPECT_EQ(pong.health.state, "serving");
  EXPECT_EQ(pong.health.analyzer_json, shard_->meta().analyzer.ToJson());
  EXPECT_EQ(pong.health.index_format_version, kIndexFormatVersion);
  EXPECT_FALSE(pong.health.gpu);
  // A ping with a wrong major version gets an error Pong.
  client.Send(EncodeEnvelope(EnvelopeMsg{.major = 9, .minor = 0, .body = PingMsg{32}}));
  env = client.Recv();
  ASSERT_TRUE(env.has_value());
  ASSERT_EQ(env->kind(), MessageKind::kPong);
  EXPECT_EQ(std::get<PongMsg>(env->body).request_id, 32u);
  EXPECT_EQ(std::get<PongMsg>(env->body).status.code(), StatusCode::kInvalidArgument);
}

// core/cpu_home.hpp: with nothing to do, the I/O thread and the ZeroMQ I/O thread behind its
// socket move to one CPU (so that a request reaches the I/O thread without waking another).
TEST_F(NodeTest, IdleIoThreadSharesACpuWithItsZeroMqIoThread) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
  auto server = Start(&cpu_);
  Client client(ctx_, server->endpoint());
  std::string io, zmq;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (uint64_t ping = 1; std::chrono::steady_clock::now() < until; ++ping) {
    client.Send(EncodePing(PingMsg{ping}));  // keeps the I/O thread turning (its window is 100 ms)
    ASSERT_TRUE(client.Recv().has_value());
    const auto threads = testing::ThreadsOf(::getpid());
    io = testing::CpusOfThreads(threads, "node-io");
    zmq = testing::CpusOfThreads(threads, "/ZMQbg/IO/");  // the node's context names its threads
    // The home pins its members one by one and then marks itself pinned: wait for the mark too.
    if (!io.empty() && io == zmq && io.find_first_of(",-") == std::string::npos &&
        testing::SeriesValue(metrics_.SerializeText(), "search_node_cpu_home_pinned") == 1)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(io.empty());
  EXPECT_EQ(io, zmq);
  ASSERT_EQ(io.find_first_of(",-"), std::string::npos) << io;  // one CPU
  EXPECT_NE(std::find(allowed.begin(), allowed.end(), std::stoi(io)), allowed.end()) << io;
  // The workers keep every CPU.
  EXPECT_NE(testing::CpusOfThreads(testing::ThreadsOf(::getpid()), "node-worker"), io);
  // And the metrics say so.
  const std::string text = metrics_.SerializeText();
  EXPECT_EQ(testing::SeriesValue(text, "search_node_cpu_home_pinned"), 1);
  EXPECT_GE(testing::SeriesValue(text, R"(search_node_cpu_home_moves_total{to="home"})"), 1);
}

TEST_F(NodeTest, StopDrainsInFlightWorkAndRefusesNewWork) {
  // 1 s a request: the drain lasts long enough for the request sent during it, even when loaded.
  SlowExecutor slow(&cpu_, std::chrono::milliseconds(1000));
  NodeServerOptions o;
  o.threads = 2;
  auto server = Start(&slow, o);
  Client client(ctx_, server->endpoint());
  const SearchRequestMsg r = SendSameQuery(client, 4);
  for (int i = 0; i < 2000 && server->in_flight() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(server->in_flight(), 4u);
  for (int i = 0; i < 5000 && slow.started() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // While draining: new requests are refused.
  StopWhileBusyAndCheck(*server, client, r, 4);
  EXPECT_EQ(slow.started(), 4);
}

TEST_F(NodeTest, ReplyToAVanishedPeerIsCountedAndDropped) {
  SlowExecutor slow(&cpu_, std::chrono::milliseconds(1000));  // still running when its peer goes, even when loaded
  auto server = Start(&slow);
  {
    Client gone(ctx_, server->endpoint());
    SearchRequestMsg r;
    r.request_id = 1;
    r.terms = {"w1"};
    gone.Send(EncodeSearchRequest(r));
    for (int i = 0; i < 200 && slow.started() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }  // the DEALER closes (linger 0) while its request runs
  // The I/O thread counts the unroutable reply as it sends it and the request as answered just
  // after: wait for both.
  for (int i = 0; i < 2000 && (server->unroutable_replies() < 1 || server->in_flight() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server->unroutable_replies(), 1u);
  EXPECT_EQ(server->in_flight(), 0u);
  // Others are still served.
  Client client(ctx_, server->endpoint());
  client.Send(EncodePing(PingMsg{2}));
  EXPECT_TRUE(client.Recv().has_value());
}

TEST_F(NodeTest, ForcedGpuOnACpuNodeIsUnavailable) {
  auto server = Start(&cpu_);
  Client client(ctx_, server->endpoint());
  SearchRequestMsg r;
  r.request_id = 8;
  r.terms = {"w1"};
  r.flags = kFlagForceGpu;
  client.Send(EncodeSearchRequest(r));
  EXPECT_EQ(client.RecvResponse().status.code(), StatusCode::kUnavailable);
}

TEST_F(NodeTest, BindFailureIsReported) {
  auto first = Start(&cpu_);
  NodeServerOptions o;
  o.listen = first->endpoint();
  NodeServer second(shard_, &cpu_, nullptr, o);
  Status st = second.Start();
  EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
  NodeServerOptions bad;
  bad.listen = "nonsense://x";
  NodeServer third(shard_, &cpu_, nullptr, bad);
  EXPECT_FALSE(third.Start().ok());
}

// A corrupt list: queries touching it are answered Corruption, the others still exactly, and the
// node's health turns "degraded" with the reason.
TEST(NodeCorruptionTest, CorruptListIsReportedAndTheRestIsServed) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/shard-0";
  ASSERT_TRUE(testing::WriteRandomShard(path, 800, 60, 5).ok());
  const Status c = testing::CorruptList(path, testing::Word(3));
  ASSERT_TRUE(c.ok()) << c.ToString();
  auto reader = ShardReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  CpuExecutorAdapter cpu(reader->get());
  Metrics metrics("node");
  NodeServerOptions o;
  o.listen = "tcp://127.0.0.1:*";
  NodeServer server(reader->get(), &cpu, &metrics, o);
  ASSERT_TRUE(server.Start().ok());
  zmq::context_t ctx(1);
  Client client(ctx, server.endpoint());
  client.Send(EncodePing(PingMsg{1}));
  auto pong = client.Recv();
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(std::get<PongMsg>(pong->body).health.state, "serving");
  SearchRequestMsg bad;
  bad.request_id = 2;
  bad.terms = {testing::Word(1), testing::Word(3)};
  bad.mode = QueryMode::kOr;
  bad.k = 10;
  client.Send(EncodeSearchRequest(bad));
  SearchResponseMsg r = client.RecvResponse();
  EXPECT_EQ(r.status.code(), StatusCode::kCorruption) << r.status.ToString();
  EXPECT_TRUE(r.hits.empty());
  SearchRequestMsg good = bad;
  good.request_id = 3;
  good.terms = {testing::Word(1), testing::Word(2)};
  client.Send(EncodeSearchRequest(good));
  r = client.RecvResponse();
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.hits, testing::Reference(**reader, good));
  client.Send(EncodePing(PingMsg{4}));
  pong = client.Recv();
  ASSERT_TRUE(pong.has_value());
  const std::string state = std::get<PongMsg>(pong->body).health.state;
  EXPECT_EQ(state.rfind("degraded: 1 request(s) hit corrupt data", 0), 0u) << state;
  server.Stop();
}

}  // namespace
}  // namespace search
