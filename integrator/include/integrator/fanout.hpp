// Fanout: the integrator's side of the wire. One ZeroMQ DEALER socket per shard endpoint, all
// owned by a single I/O thread that zmq::polls them together with an eventfd through which caller
// threads submit requests (a mutex-guarded queue; the eventfd is written only when the thread may
// be blocked in poll), and one inproc PAIR per DEALER carrying its connection events
// (zmq_socket_monitor).
//
// Search() encodes one SearchRequest with a fresh request id and an absolute deadline, the I/O
// thread sends it to every shard and collects the replies; the caller blocks on a condition
// variable until every shard has answered or the deadline passes. A shard that is not connected
// fails at once; a shard whose connection drops fails when the drop is seen; a shard silent until
// the deadline is timed out. Replies that arrive after their request completed are dropped by
// request id (and reported to the listener as late). Search() never waits much beyond the deadline:
// even a stuck I/O thread only delays it by a bounded grace period.
//
// Replicas: a shard may list several endpoints ("a|b|c"), each its own DEALER. A search goes to
// one replica per shard: up before merely connected, then the fewest outstanding requests, then
// the lowest recent median latency. A replica that fails (an error reply other than
// DeadlineExceeded, a malformed reply, a dropped connection) is replaced by the next one while the
// deadline allows (an InvalidArgument answer is the request's own fault: not retried; a reply
// from a node of wire minor 0 to a request with a tree or a count, which it ignored, is a failure
// naming the version); one still silent after its own p95 latency (hedge_min at least, hedge_default
// until it has history) is hedged: the next replica gets the request too and the first answer
// wins. A shard fails only when every replica it was sent to has failed or the deadline passes.
// Fetch(): the fetch phase of query-then-fetch. A FetchRequest goes to each shard given one (only
// the shards that own final hits), to a replica chosen, retried and hedged as a search's, under the
// search's deadline; the others are not asked. A replica whose pongs and replies come in envelopes
// older than wire minor 2 (it cannot read a FetchRequest and would stay silent) is not sent one: a
// shard with no other replica fails at once, naming the version.
// Health: every ping_interval each replica gets a Ping; a shard is up while it is connected and its
// last Pong (or reply) is younger than missed_pongs_down intervals. Pongs carry the node's
// ShardHealth (analyzer, docID range, load), kept per shard and reported to the listener.
//
// CURVE (options.curve set): every DEALER is a CurveZMQ client with the integrator's key pair and
// its endpoint's server key (curve/curve_keys.hpp); a node that refuses the key never completes the
// handshake, so its replica is never connected and counts as down. Connection events are the
// handshake's, CURVE or not.
// Socket hygiene, as the node: LINGER 0, MAXMSGSIZE, explicit HWMs, IMMEDIATE (no queueing towards a
// shard that is not connected), ZMTP heartbeats, bounded reconnect intervals.
// Thread-safety: Search, Health and Stop are thread-safe; the listener is called on the I/O thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_home.hpp"
#include "core/status.hpp"
#include "curve/curve_keys.hpp"
#include "integrator/answer.hpp"
#include "integrator/result_cache.hpp"
#include "proto/wire.hpp"

namespace search {

struct FanoutOptions {
  // One per shard: "tcp://host:port", or its replicas "tcp://a:port|tcp://b:port|...".
  std::vector<std::string> endpoints;
  bool hedge = true;                                     // hedge slow replicas (below)
  std::chrono::microseconds hedge_min{2000};             // never sooner than this
  std::chrono::microseconds hedge_default{20000};        // before a replica has 8 latency samples
  std::chrono::milliseconds ping_interval{1000};
  int missed_pongs_down = 3;            // down after this many ping intervals without a pong
  int send_hwm = 10000, recv_hwm = 10000;
  int reconnect_ivl_ms = 100, reconnect_ivl_max_ms = 1000;
  int heartbeat_ivl_ms = 1000, heartbeat_timeout_ms = 3000;
  std::chrono::milliseconds grace{2000};  // how long a caller waits past its deadline at most
  // CurveZMQ to the nodes (nullopt: plain ZeroMQ). Start() refuses an endpoint without a server key.
  std::optional<curve::ClientKeys> curve;
  // A CPU of this process's for the I/O thread, the ZeroMQ I/O thread behind its sockets and the
  // threads that JoinHome, while together they are mostly idle (core/cpu_home.hpp); -1: none.
  int home_cpu = -1;
};

enum class ShardCallState : uint8_t { kPending, kOk, kFailed, kTimedOut };

struct ShardCallResult {
  ShardCallState state = ShardCallState::kPending;
  uint32_t shard = 0;      // the node's shard id (its position in endpoints until known)
  std::string reason;      // why it failed or timed out
  std::vector<MergedHit> hits;  // kOk only; best first
  std::vector<MergedHit> or_hits;  // kOk with has_or_hits: the andor split's OR top-k
  bool has_or_hits = false;
  bool has_total = false;  // kOk, the request counted: total (and with has_or_hits or_total) set
  uint64_t total = 0, or_total = 0;
  Status node_status;  // kFailed by the node's InvalidArgument answer: that answer (never retried)
  std::vector<FetchedDocMsg> docs;  // a fetch, kOk: one per requested doc, in the request's order
  uint32_t doc_begin = 0, doc_end = 0;  // kOk: the shard's docID range (coverage)
  uint64_t latency_us = 0;
  // Where the call's time went: when the lane took it up (and sent it) and when this shard's
  // answer settled it, on the lane's thread; for kOk, the node's time in its queue and its engine
  // (the reply's ExecStats).
  std::chrono::steady_clock::time_point sent_at{}, settled_at{};
  uint64_t node_queue_us = 0, node_run_us = 0;
};

// Events for metrics and logs; every method is called on the I/O thread and must not block.
class FanoutListener {
 public:
  virtual ~FanoutListener() = default;
  virtual void OnShardReply(size_t /*index*/, ShardCallState /*state*/, double /*seconds*/) {}
  virtual void OnLateReply(size_t /*index*/) {}
  virtual void OnMalformedReply(size_t /*index*/, const Status& /*why*/) {}
  virtual void OnShardUp(size_t /*index*/, bool /*up*/) {}
  virtual void OnHealth(size_t /*index*/, const ShardHealthMsg& /*health*/) {}
  virtual void OnRetry(size_t /*index*/) {}  // a failed request resent to another replica
  virtual void OnHedge(size_t /*index*/) {}  // a slow request also sent to another replica
};

class Fanout {
 public:
  // Creates the sockets, connects them and starts the I/O thread. InvalidArgument for a bad
  // endpoint. `listener` may be null; it must outlive the Fanout.
  static Result<std::unique_ptr<Fanout>> Start(FanoutOptions options, FanoutListener* listener);
  ~Fanout();  // Stop()s

  size_t num_shards() const { return options_.endpoints.size(); }
  const std::vector<std::string>& endpoints() const { return options_.endpoints; }

  // Sends `request` (its request_id is replaced, deadline_unix_micros must be set by the caller) to
  // every shard and returns one result per endpoint, in endpoint order, by `deadline`.
  std::vector<ShardCallResult> Search(SearchRequestMsg request, std::chrono::steady_clock::time_point deadline);

  // The same without blocking: `done` gets the results Search() would return, exactly once, on the I/O
  // thread (on the calling thread when the Fanout has stopped). It must be quick: every search of
  // this Fanout waits for it. A stuck I/O thread delays it without bound; a caller that must answer
  // anyway keeps its own timer (the grace period of Search()).
  using SearchCallback = std::function<void(std::vector<ShardCallResult>)>;
  void SearchAsync(SearchRequestMsg request, std::chrono::steady_clock::time_point deadline, SearchCallback done);

  // The fetch phase: requests[i], when set, goes to shard i (endpoint order; its request_id is
  // replaced, deadline_unix_micros must be set). One result per endpoint: a shard not asked is kOk
  // with no docs; an asked one kOk with its docs, or failed or timed out as a search's.
  // REQUIRES: requests.size() == num_shards().
  std::vector<ShardCallResult> Fetch(std::vector<std::optional<FetchRequestMsg>> requests,
                                     std::chrono::steady_clock::time_point deadline);
  void FetchAsync(std::vector<std::optional<FetchRequestMsg>> requests, std::chrono::steady_clock::time_point deadline,
                  SearchCallback done);

  // Per-shard health as of now (up while any replica is up; the freshest up replica's report).
  std::vector<ShardHealthView> Health() const;
  // Whether every shard is up now (one atomic load: cheap enough to ask per search).
  bool AllUp() const;
  uint64_t retries() const;  // requests resent to another replica after a failure
  uint64_t hedges() const;   // requests also sent to another replica after the first's p95
  // The last ShardHealth each node reported (nullopt before its first pong).
  std::vector<std::optional<ShardHealthMsg>> LastReportedHealth() const;

  // Adds the calling thread to the I/O thread's CPU home (FanoutOptions::home_cpu; nothing without
  // one), as a thread that hands it searches; LeaveHome takes it out and gives it every CPU back.
  void JoinHome();
  void LeaveHome();
  // The CPU home's state (nullopt without one).
  std::optional<CpuHomeState> HomeState() const;

  // Completes every outstanding search as failed ("integrator shutting down"), stops the I/O
  // thread and closes the sockets. Later Search() calls fail at once. Idempotent.
  void Stop();

 private:
  struct Call;
  struct Impl;
  Fanout(FanoutOptions options, FanoutListener* listener);
  // A call for `request` (given a fresh request id) by `deadline`, encoded, not yet submitted.
  std::shared_ptr<Call> NewCall(SearchRequestMsg& request, std::chrono::steady_clock::time_point deadline);
  std::shared_ptr<Call> NewFetchCall(std::vector<std::optional<FetchRequestMsg>>& requests,
                                     std::chrono::steady_clock::time_point deadline);
  std::vector<ShardCallResult> Wait(const std::shared_ptr<Call>& call);  // Search()'s and Fetch()'s wait
  void Submit(const std::shared_ptr<Call>& call);

  FanoutOptions options_;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> next_id_;
  std::atomic<bool> stopped_{false};
  std::thread io_thread_;
  std::mutex stop_mu_;
};

}  // namespace search
