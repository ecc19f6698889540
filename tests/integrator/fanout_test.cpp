// Fanout against in-process fake nodes: complete answers, deadlines, late replies, malformed
// replies, unreachable shards, health from pongs and shutdown with work outstanding.
#include "integrator/fanout.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "fake_node.hpp"

namespace search {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::AnswerWith;
using testing::FakeNode;

class CountingListener : public FanoutListener {
 public:
  void OnLateReply(size_t) override { ++late; }
  void OnMalformedReply(size_t, const Status&) override { ++malformed; }
  void OnShardUp(size_t i, bool up) override { up ? ++ups : ++downs; (void)i; }
  std::atomic<int> late{0}, malformed{0}, ups{0}, downs{0};
};

FanoutOptions Options(std::vector<std::string> endpoints) {
  FanoutOptions o;
  o.endpoints = std::move(endpoints);
  o.ping_interval = 50ms;
  o.reconnect_ivl_ms = 20;
  o.reconnect_ivl_max_ms = 100;
  return o;
}

SearchRequestMsg Request(uint32_t k = 10) {
  SearchRequestMsg r;
  r.terms = {"alpha", "beta"};
  r.mode = QueryMode::kOr;
  r.k = k;
  r.deadline_unix_micros = 0;
  return r;
}

// Waits until every shard is up (its first pong arrived).
bool WaitAllUp(const Fanout& f, std::chrono::milliseconds limit = 5s) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    auto h = f.Health();
    if (std::all_of(h.begin(), h.end(), [](const auto& s) { return s.state == "up"; })) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Every replica up, not only every shard (a shard is up while any of its replicas is): the
// replica choice prefers up replicas, so until the last one's first pong it gets no search.
bool WaitEveryReplicaUp(const Fanout& f, std::chrono::milliseconds limit = 5s) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    auto h = f.Health();
    if (std::all_of(h.begin(), h.end(), [](const auto& s) { return s.replicas_up == s.replicas; })) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(Fanout, AllShardsAnswer) {
  FakeNode a(0, AnswerWith(0, {{1, 2.0f, "d1"}, {3, 1.0f, "d3"}}), 2);
  FakeNode b(1, AnswerWith(1, {{600, 1.5f, "d600"}}), 2);
  CountingListener l;
  auto f = Fanout::Start(Options({a.endpoint(), b.endpoint()}), &l);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(WaitAllUp(**f));
  auto r = (*f)->Search(Request(), Clock::now() + 2s);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].state, ShardCallState::kOk);
  EXPECT_EQ(r[1].state, ShardCallState::kOk);
  ASSERT_EQ(r[0].hits.size(), 2u);
  EXPECT_EQ(r[0].hits[0], (MergedHit{1, 2.0f, 0, "d1"}));
  EXPECT_EQ(r[1].hits[0], (MergedHit{600, 1.5f, 1, "d600"}));
  EXPECT_EQ(r[1].shard, 1u);
  // Both nodes saw the same request with distinct ids per search.
  auto second = (*f)->Search(Request(3), Clock::now() + 2s);
  ASSERT_EQ(a.requests().size(), 2u);
  EXPECT_NE(a.requests()[0].request_id, a.requests()[1].request_id);
  EXPECT_EQ(a.requests()[0].request_id, b.requests()[0].request_id);
  EXPECT_EQ(a.requests()[1].k, 3u);
  EXPECT_EQ(a.requests()[0].terms, (std::vector<std::string>{"alpha", "beta"}));
  auto h = (*f)->Health();
  EXPECT_EQ(h[1].shard, 1u);
  EXPECT_GE(h[1].last_seen_ms, 0);
  EXPECT_EQ(l.late, 0);
}

// A node of kMinorOneFrame gets its messages as one frame (one CURVE box each, not two) once its
// first pong said so; an older node only ever gets [empty][message], and both answer.
TEST(Fanout, OneFrameMessagesOnlyToNodesThatSpeakThem) {
  FakeNode now(0, AnswerWith(0, {{1, 2.0f, "d1"}}), 2);
  FakeNode old(1, AnswerWith(1, {{600, 1.5f, "d600"}}), 2);
  old.set_minor(kMinorOneFrame - 1);
  CountingListener l;
  auto f = Fanout::Start(Options({now.endpoint(), old.endpoint()}), &l);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(WaitAllUp(**f));
  for (int i = 0; i < 3; ++i) {
    auto r = (*f)->Search(Request(), Clock::now() + 2s);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].state, ShardCallState::kOk) << r[0].reason;
    EXPECT_EQ(r[1].state, ShardCallState::kOk) << r[1].reason;
    ASSERT_EQ(r[0].hits.size(), 1u);
    EXPECT_EQ(r[1].hits.size(), 1u);
  }
  EXPECT_GE(now.one_frame_messages(), 3);  // the searches, and the pings after the first
  EXPECT_GE(now.delimited_messages(), 1);  // the first ping, before its pong told the node's minor
  EXPECT_EQ(old.one_frame_messages(), 0);
  EXPECT_GE(old.delimited_messages(), 4);
  EXPECT_EQ(l.malformed, 0);
}

TEST(Fanout, SlowShardTimesOutAndItsLateReplyIsDropped) {
  FakeNode fast(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2);
  FakeNode slow(1, AnswerWith(1, {{900, 9.0f, "y"}}), 2);
  slow.set_delay(60s);  // held far past the deadline, until ReleaseHeld
  CountingListener l;
  auto f = Fanout::Start(Options({fast.endpoint(), slow.endpoint()}), &l);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  const auto t0 = Clock::now();
  auto r = (*f)->Search(Request(), t0 + 100ms);
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, 95ms);
  EXPECT_LT(took, 10s);  // the deadline, not the slow shard (60 s), ends the wait
  EXPECT_EQ(r[0].state, ShardCallState::kOk);
  EXPECT_EQ(r[1].state, ShardCallState::kTimedOut);
  EXPECT_NE(r[1].reason.find("deadline"), std::string::npos);
  EXPECT_TRUE(r[1].hits.empty());
  // The slow reply arrives later and is dropped by request id.
  slow.ReleaseHeld();
  const auto end = Clock::now() + 10s;
  while (l.late == 0 && Clock::now() < end) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(l.late, 1);
}

TEST(Fanout, ErrorStatusAndDeadlineExceededFromANode) {
  FakeNode bad(0, [](const SearchRequestMsg&) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg r;
    r.status = Status::Corruption("block 7 failed its CRC");
    return r;
  });
  FakeNode late(1, [](const SearchRequestMsg&) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg r;
    r.shard_id = 1;
    r.status = Status::DeadlineExceeded("deadline passed in the queue");
    return r;
  });
  auto f = Fanout::Start(Options({bad.endpoint(), late.endpoint()}), nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  auto r = (*f)->Search(Request(), Clock::now() + 2s);
  EXPECT_EQ(r[0].state, ShardCallState::kFailed);
  EXPECT_NE(r[0].reason.find("block 7 failed its CRC"), std::string::npos);
  EXPECT_EQ(r[1].state, ShardCallState::kTimedOut);
  EXPECT_NE(r[1].reason.find("deadline passed in the queue"), std::string::npos);
}

TEST(Fanout, MalformedReplyIsCountedAndNeverCrashes) {
  FakeNode g(0, AnswerWith(0, {{1, 1.0f, "x"}}));
  g.set_garble(true);
  CountingListener l;
  auto f = Fanout::Start(Options({g.endpoint()}), &l);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  auto r = (*f)->Search(Request(), Clock::now() + 150ms);
  EXPECT_NE(r[0].state, ShardCallState::kOk);
  // The garbled reply may come after the deadline on a loaded machine: it is counted all the same.
  const auto end = Clock::now() + 10s;
  while (l.malformed == 0 && Clock::now() < end) std::this_thread::sleep_for(10ms);
  EXPECT_GE(l.malformed, 1);
}

TEST(Fanout, UnreachableShardFailsAtOnce) {
  FakeNode ok(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2);
  // A port nothing listens on: bind and close a socket to find one.
  std::string dead;
  {
    zmq::context_t ctx;
    zmq::socket_t s(ctx, zmq::socket_type::router);
    s.set(zmq::sockopt::linger, 0);
    s.bind("tcp://127.0.0.1:*");
    dead = s.get(zmq::sockopt::last_endpoint);
  }
  auto f = Fanout::Start(Options({ok.endpoint(), dead}), nullptr);
  ASSERT_TRUE(f.ok());
  const auto end = Clock::now() + 3s;
  while ((*f)->Health()[0].state != "up" && Clock::now() < end) std::this_thread::sleep_for(10ms);
  const auto t0 = Clock::now();
  auto r = (*f)->Search(Request(), t0 + 60s);
  EXPECT_LT(Clock::now() - t0, 10s);  // no waiting for the deadline (60 s)
  EXPECT_EQ(r[0].state, ShardCallState::kOk);
  EXPECT_EQ(r[1].state, ShardCallState::kFailed);
  EXPECT_NE(r[1].reason.find("not connected"), std::string::npos);
  auto h = (*f)->Health();
  EXPECT_EQ(h[1].state, "down");
  EXPECT_EQ(h[1].last_seen_ms, -1);
}

TEST(Fanout, ShardGoesDownWhenPongsStopAndUpAgain) {
  FakeNode n(0, AnswerWith(0, {}));
  CountingListener l;
  auto f = Fanout::Start(Options({n.endpoint()}), &l);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  n.set_answer_pings(false);
  auto end = Clock::now() + 3s;
  while ((*f)->Health()[0].state == "up" && Clock::now() < end) std::this_thread::sleep_for(10ms);
  EXPECT_EQ((*f)->Health()[0].state, "down");
  EXPECT_FALSE((*f)->AllUp());
  n.set_answer_pings(true);
  EXPECT_TRUE(WaitAllUp(**f));
  EXPECT_TRUE((*f)->AllUp());
  EXPECT_GE(l.downs, 1);
  EXPECT_GE(l.ups, 2);
  auto reported = (*f)->LastReportedHealth();
  ASSERT_TRUE(reported[0].has_value());
  EXPECT_EQ(reported[0]->analyzer_json, AnalyzerConfig{}.ToJson());
}

TEST(Fanout, NodeDisappearingFailsOutstandingWorkEarly) {
  auto n = std::make_unique<FakeNode>(0, [](const SearchRequestMsg&) { return std::optional<SearchResponseMsg>(); });
  auto f = Fanout::Start(Options({n->endpoint()}), nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  std::thread killer([&] {
    std::this_thread::sleep_for(100ms);
    n.reset();  // closes the node's socket: the connection drops
  });
  const auto t0 = Clock::now();
  auto r = (*f)->Search(Request(), t0 + 60s);
  killer.join();
  EXPECT_LT(Clock::now() - t0, 10s);  // the dropped connection, not the deadline (60 s), ends the wait
  EXPECT_EQ(r[0].state, ShardCallState::kFailed);
  EXPECT_NE(r[0].reason.find("lost"), std::string::npos);
}

TEST(Fanout, StopCompletesOutstandingSearches) {
  FakeNode silent(0, [](const SearchRequestMsg&) { return std::optional<SearchResponseMsg>(); });
  auto f = Fanout::Start(Options({silent.endpoint()}), nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  std::vector<ShardCallResult> r;
  std::thread t([&] { r = (*f)->Search(Request(), Clock::now() + 60s); });
  std::this_thread::sleep_for(100ms);
  const auto t0 = Clock::now();
  (*f)->Stop();
  t.join();
  EXPECT_LT(Clock::now() - t0, 10s);  // Stop, not the deadline (60 s), ends the search
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].state, ShardCallState::kFailed);
  EXPECT_NE(r[0].reason.find("shutting down"), std::string::npos);
  // Later searches fail at once.
  auto later = (*f)->Search(Request(), Clock::now() + 10s);
  EXPECT_EQ(later[0].state, ShardCallState::kFailed);
}

TEST(Fanout, BadEndpointIsAnError) {
  auto f = Fanout::Start(Options({"tcp://127.0.0.1:notaport"}), nullptr);
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(Fanout::Start(Options({}), nullptr).ok());
}

TEST(Fanout, ManyConcurrentSearches) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2), b(1, AnswerWith(1, {{2, 2.0f, "y"}}), 2);
  auto f = Fanout::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto r = (*f)->Search(Request(), Clock::now() + 2s);
        if (r[0].state == ShardCallState::kOk && r[1].state == ShardCallState::kOk && r[1].hits[0].doc == 2) ++ok;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 1600);
}

// Submissions wake the I/O thread only when it may be blocked in poll (core/wake_fd.hpp). With pings
// 30 s apart and deadlines a minute away, nothing else would wake an idle thread for a search whose
// wake-up was lost: it would wait out the ping interval. Four threads search with pauses of 0-2 ms
// (the thread idle in between, or busy with another's search), and every search is answered in
// well under the interval (5 s: a hang detector, not a speed bound).
TEST(Fanout, EverySearchWakesAnIdleIoThread) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2), b(1, AnswerWith(1, {{2, 2.0f, "y"}}), 2);
  auto opts = Options({a.endpoint(), b.endpoint()});
  opts.ping_interval = 30s;
  auto f = Fanout::Start(opts, nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));  // the first pings go out at the handshakes
  EXPECT_TRUE((*f)->AllUp());
  std::atomic<int> ok{0};
  std::atomic<int64_t> slowest_ms{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 150; ++i) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        const auto t0 = Clock::now();
        auto r = (*f)->Search(Request(), Clock::now() + 60s);
        const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        int64_t seen = slowest_ms.load();
        while (ms > seen && !slowest_ms.compare_exchange_weak(seen, ms)) {
        }
        if (r[0].state == ShardCallState::kOk && r[1].state == ShardCallState::kOk) ++ok;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 600);
  EXPECT_LT(slowest_ms.load(), 10000);  // a missed wake-up waits for the next ping (30 s)
}

std::string DeadEndpoint() {
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind("tcp://127.0.0.1:*");
  return s.get(zmq::sockopt::last_endpoint);
}

// Replicas: a dead replica costs nothing (the live one answers every search at once); with two
// live replicas concurrent searches spread over both; health counts replicas.
TEST(Fanout, ReplicasSpreadLoadAndSurviveADeadOne) {
  FakeNode a(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2), b(0, AnswerWith(0, {{1, 1.0f, "x"}}), 2);
  FakeNode c(1, AnswerWith(1, {{2, 2.0f, "y"}}), 2);
  const std::string dead = DeadEndpoint();
  auto f = Fanout::Start(Options({dead + "|" + a.endpoint(), c.endpoint()}), nullptr);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(WaitAllUp(**f));
  auto h = (*f)->Health();
  EXPECT_EQ(h[0].replicas, 2u);
  EXPECT_EQ(h[0].replicas_up, 1u);
  EXPECT_EQ(h[0].state, "up");
  for (int i = 0; i < 30; ++i) {
    const auto t0 = Clock::now();
    auto r = (*f)->Search(Request(), t0 + 30s);
    EXPECT_EQ(r[0].state, ShardCallState::kOk) << r[0].reason;
    EXPECT_EQ(r[1].state, ShardCallState::kOk);
    ASSERT_LT(Clock::now() - t0, 10s);  // never the deadline (30 s): the dead replica costs nothing
  }
  EXPECT_EQ(a.requests().size(), 30u);

  auto g = Fanout::Start(Options({a.endpoint() + "|" + b.endpoint()}), nullptr);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(WaitAllUp(**g));
  a.set_delay(5ms);
  b.set_delay(5ms);
  const size_t a0 = a.requests().size(), b0 = b.requests().size();
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 10; ++i) ok += (*g)->Search(Request(), Clock::now() + 2s)[0].state == ShardCallState::kOk;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok, 80);
  EXPECT_GT(a.requests().size() - a0, 10u);
  EXPECT_GT(b.requests().size() - b0, 10u);
}

// A replica answering errors: every search is retried on the other replica and completes.
TEST(Fanout, FailedReplicaIsRetriedOnAnother) {
  FakeNode bad(0, [](const SearchRequestMsg& req) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg m;
    m.request_id = req.request_id;
    m.status = Status::Corruption("a corrupt list on this replica");
    return m;
  });
  FakeNode good(0, AnswerWith(0, {{5, 1.0f, "z"}}));
  auto f = Fanout::Start(Options({bad.endpoint() + "|" + good.endpoint()}), nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  for (int i = 0; i < 20; ++i) {
    auto r = (*f)->Search(Request(), Clock::now() + 2s);
    ASSERT_EQ(r[0].state, ShardCallState::kOk) << r[0].reason;
    EXPECT_EQ(r[0].hits.size(), 1u);
  }
  EXPECT_GT((*f)->retries(), 0u);
  EXPECT_EQ(good.requests().size(), 20u);
  // Both replicas failing: the shard fails, with the last reason.
  FakeNode bad2(0, [](const SearchRequestMsg& req) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg m;
    m.request_id = req.request_id;
    m.status = Status::Unavailable("overloaded");
    return m;
  });
  auto g = Fanout::Start(Options({bad.endpoint() + "|" + bad2.endpoint()}), nullptr);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(WaitAllUp(**g));
  auto r = (*g)->Search(Request(), Clock::now() + 2s);
  EXPECT_EQ(r[0].state, ShardCallState::kFailed);
}

// A silent replica (stopped, not disconnected) is hedged: the other replica answers long before
// the deadline.
TEST(Fanout, SilentReplicaIsHedged) {
  FakeNode silent(0, [](const SearchRequestMsg&) { return std::optional<SearchResponseMsg>(); });
  FakeNode good(0, AnswerWith(0, {{5, 1.0f, "z"}}));
  FanoutOptions o = Options({silent.endpoint() + "|" + good.endpoint()});
  o.hedge_default = 20ms;
  auto f = Fanout::Start(o, nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  int ok = 0;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    auto r = (*f)->Search(Request(), t0 + 30s);
    ok += r[0].state == ShardCallState::kOk;
    ASSERT_LT(Clock::now() - t0, 10s);  // far below the 30 s deadline
  }
  EXPECT_EQ(ok, 20);
  EXPECT_GT((*f)->hedges(), 0u);
  // Hedging off: a search that lands on the silent replica waits for the deadline. (Both replicas
  // up first: while the silent one's first pong was still on its way every search went to the
  // other, and none timed out, on a busy 2-core CI machine.)
  o.hedge = false;
  auto g = Fanout::Start(o, nullptr);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(WaitEveryReplicaUp(**g));
  int timed_out = 0;
  for (int i = 0; i < 6; ++i)
    timed_out += (*g)->Search(Request(), Clock::now() + 100ms)[0].state == ShardCallState::kTimedOut;
  EXPECT_GT(timed_out, 0);
  EXPECT_EQ((*g)->hedges(), 0u);
}

TEST(Fanout, EmptyReplicaIsAnError) {
  EXPECT_FALSE(Fanout::Start(Options({"tcp://127.0.0.1:1||tcp://127.0.0.1:2"}), nullptr).ok());
  EXPECT_FALSE(Fanout::Start(Options({"|"}), nullptr).ok());
}

// ---- SearchAsync ----

// What SearchAsync's callback saw: each call's results and thread, and whether SearchAsync had
// returned by then.
struct AsyncLog {
  std::mutex mu;
  std::vector<std::vector<ShardCallResult>> results;
  std::vector<std::thread::id> threads;
  std::vector<bool> after_return;
  std::atomic<bool> returned{false};
  std::atomic<int> calls{0};
};

std::shared_ptr<AsyncLog> StartAsync(Fanout& f, SearchRequestMsg req, Clock::time_point deadline) {
  auto log = std::make_shared<AsyncLog>();
  f.SearchAsync(std::move(req), deadline, [log](std::vector<ShardCallResult> r) {
    std::lock_guard lock(log->mu);
    log->results.push_back(std::move(r));
    log->threads.push_back(std::this_thread::get_id());
    log->after_return.push_back(log->returned.load());
    ++log->calls;
  });
  log->returned = true;
  return log;
}

bool WaitCalls(const AsyncLog& log, int n, std::chrono::milliseconds limit = 5s) {
  const auto end = Clock::now() + limit;
  while (log.calls.load() < n && Clock::now() < end) std::this_thread::sleep_for(1ms);
  return log.calls.load() >= n;
}

// Everything but the latency.
void ExpectSameResults(const std::vector<ShardCallResult>& a, const std::vector<ShardCallResult>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a[i].state, b[i].state);
    EXPECT_EQ(a[i].shard, b[i].shard);
    EXPECT_EQ(a[i].reason, b[i].reason);
    EXPECT_EQ(a[i].hits, b[i].hits);
    EXPECT_EQ(a[i].or_hits, b[i].or_hits);
    EXPECT_EQ(a[i].has_or_hits, b[i].has_or_hits);
    EXPECT_EQ(a[i].doc_begin, b[i].doc_begin);
    EXPECT_EQ(a[i].doc_end, b[i].doc_end);
  }
}

// SearchAsync's callback gets what Search returns, exactly once, on a thread other than the
// caller's (the I/O thread), after SearchAsync returned: answers, the andor split's OR hits, and a
// shard timed out at the deadline.
TEST(Fanout, SearchAsyncGetsWhatSearchReturnsOnceOnTheIoThread) {
  FakeNode a(0, AnswerWith(0, {{1, 2.0f, "d1"}, {3, 1.0f, "d3"}}), 2);
  FakeNode b(1, [](const SearchRequestMsg& req) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg r;
    r.shard_id = 1;
    r.hits = {{600, 1.5f, "d600"}};
    r.or_hits = {{600, 1.5f, "d600"}, {601, 0.5f, "d601"}};
    r.has_or_hits = (req.flags & kFlagAndOrSplit) != 0;
    if (!r.has_or_hits) r.or_hits.clear();
    r.doc_begin = 500;
    r.doc_end = 1000;
    return r;
  }, 2);
  auto f = Fanout::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  for (uint32_t flags : {0u, kFlagAndOrSplit}) {
    SCOPED_TRACE(flags);
    SearchRequestMsg req = Request();
    req.flags = flags;
    auto blocking = (*f)->Search(req, Clock::now() + 2s);
    auto log = StartAsync(**f, req, Clock::now() + 2s);
    ASSERT_TRUE(WaitCalls(*log, 1));
    std::this_thread::sleep_for(50ms);  // a second call would come now
    std::lock_guard lock(log->mu);
    ASSERT_EQ(log->calls.load(), 1);
    EXPECT_NE(log->threads[0], std::this_thread::get_id());
    EXPECT_TRUE(log->after_return[0]);
    ASSERT_EQ(log->results[0].size(), 2u);
    EXPECT_EQ(log->results[0][0].state, ShardCallState::kOk);
    EXPECT_EQ(log->results[0][1].hits[0], (MergedHit{600, 1.5f, 1, "d600"}));
    EXPECT_EQ(log->results[0][1].has_or_hits, flags != 0);
    ExpectSameResults(log->results[0], blocking);
  }
  ASSERT_EQ(a.requests().size(), 4u);
  EXPECT_EQ(a.requests()[3].flags, kFlagAndOrSplit);
  EXPECT_NE(a.requests()[2].request_id, a.requests()[3].request_id);
  // A slow shard (held far past the deadline): timed out at the deadline, as Search's. SearchAsync
  // does not wait for it: the callback comes after SearchAsync returned.
  b.set_delay(60s);
  const auto t0 = Clock::now();
  auto log = StartAsync(**f, Request(), t0 + 1s);
  ASSERT_TRUE(WaitCalls(*log, 1, 30s));
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, 950ms);
  EXPECT_LT(took, 10s);  // the deadline, not the slow shard (60 s)
  auto blocking = (*f)->Search(Request(), Clock::now() + 100ms);
  std::this_thread::sleep_for(50ms);
  std::lock_guard lock(log->mu);
  ASSERT_EQ(log->calls.load(), 1);
  EXPECT_NE(log->threads[0], std::this_thread::get_id());
  EXPECT_TRUE(log->after_return[0]) << "SearchAsync waited for the deadline";
  EXPECT_EQ(log->results[0][0].state, ShardCallState::kOk);
  EXPECT_EQ(log->results[0][1].state, ShardCallState::kTimedOut);
  ExpectSameResults(log->results[0], blocking);
}

// Stop completes an outstanding SearchAsync (once, every shard failed, "shutting down") before it
// returns; after Stop, SearchAsync calls back at once, on the calling thread, the same way.
TEST(Fanout, SearchAsyncAfterStopFailsAtOnceOnTheCallingThread) {
  FakeNode silent(0, [](const SearchRequestMsg&) { return std::optional<SearchResponseMsg>(); }, 2);
  FakeNode ok(1, AnswerWith(1, {{2, 2.0f, "y"}}), 2);
  auto f = Fanout::Start(Options({silent.endpoint(), ok.endpoint()}), nullptr);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WaitAllUp(**f));
  auto outstanding = StartAsync(**f, Request(), Clock::now() + 60s);
  const auto end = Clock::now() + 3s;
  while (silent.requests().empty() && Clock::now() < end) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(silent.requests().size(), 1u);
  const auto t0 = Clock::now();
  (*f)->Stop();
  EXPECT_LT(Clock::now() - t0, 10s);  // not the deadline (60 s)
  {
    std::lock_guard lock(outstanding->mu);
    ASSERT_EQ(outstanding->calls.load(), 1);  // by the time Stop returned
    EXPECT_NE(outstanding->threads[0], std::this_thread::get_id());
    ASSERT_EQ(outstanding->results[0].size(), 2u);
    EXPECT_EQ(outstanding->results[0][0].state, ShardCallState::kFailed);
    EXPECT_NE(outstanding->results[0][0].reason.find("shutting down"), std::string::npos);
  }
  auto later = StartAsync(**f, Request(), Clock::now() + 10s);
  std::this_thread::sleep_for(50ms);
  std::lock_guard lock(later->mu);
  ASSERT_EQ(later->calls.load(), 1);
  EXPECT_EQ(later->threads[0], std::this_thread::get_id());
  EXPECT_FALSE(later->after_return[0]) << "not called before SearchAsync returned";
  ASSERT_EQ(later->results[0].size(), 2u);
  for (const auto& r : later->results[0]) {
    EXPECT_EQ(r.state, ShardCallState::kFailed);
    EXPECT_NE(r.reason.find("shutting down"), std::string::npos) << r.reason;
    EXPECT_TRUE(r.hits.empty());
  }
  EXPECT_EQ(later->results[0][1].shard, 1u);
  EXPECT_EQ(outstanding->calls.load(), 1);
}

}  // namespace
}  // namespace search
