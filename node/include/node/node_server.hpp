// NodeServer: the shard node's service. A ZeroMQ ROUTER bound to `listen` receives
// [identity][empty][Envelope frame] or [identity][Envelope frame] messages (proto/search.capnp;
// one frame from integrators that know the node speaks kMinorOneFrame, and each reply takes its
// request's shape) from integrator DEALERs; one
// I/O thread owns the ROUTER and answers Pings itself; SearchRequests go through a job queue to a
// pool of worker threads that hand each to the Executor (ExecuteAsync) and take the next (on an
// idle node, nothing in flight, the I/O thread hands a search on itself and runs it when it is
// predicted short: node_server.cpp kIoThreadMaxUs; counted in search_node_io_thread_requests_total); the
// thread that finishes a query encodes its reply and hands it back to the I/O thread through a
// mutex-guarded queue plus an eventfd the I/O thread polls (no socket is ever shared between
// threads). FetchRequests (the fetch phase: stored sources and highlights, node/fetch.hpp) take the
// same queue and a worker answers each itself (short work: no executor). Requests in flight are bounded by queue_capacity plus the workers.
//
// Behaviour on the wire:
//   - undecodable frames: answered InvalidArgument ("malformed message: ...", or "unsupported
//     protocol major version ...") when a request id can be recovered, else counted and dropped;
//   - a request already past its deadline, or whose deadline passes while queued: DeadlineExceeded
//     without running; past the bound on requests in flight: ResourceExhausted (load shedding);
//   - while draining (after Stop()): new requests are answered Unavailable, Pings report "draining";
//   - a request that hits corrupt data (a search's lists, a fetch's source blocks) is answered
//     Corruption; the node keeps serving the others and Pings report "degraded: N request(s) hit
//     corrupt data (last: ...)".
// CURVE (curve_secret_key set): the ROUTER is a CurveZMQ server and a ZapHandler in the server's
// context (curve/zap_handler.hpp) admits only clients whose public key is in curve_clients; a
// refused peer gets nothing and is counted in search_node_refused_peers_total{reason}.
// Socket hygiene: LINGER 0, MAXMSGSIZE, explicit SNDHWM/RCVHWM, ROUTER_MANDATORY (a reply to a
// vanished peer, or to one whose pipe is full, is dropped and counted), ZMTP heartbeats.
// Thread-safety: Start() and Stop() from one controlling thread; accessors are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.hpp"
#include "node/executor.hpp"
#include "node/node_metrics.hpp"

namespace search {

class Metrics;
class ShardReader;

struct NodeServerOptions {
  std::string listen = "tcp://127.0.0.1:*";  // a ZeroMQ endpoint; port "*" picks a free one
  size_t threads = 0;                         // workers; 0 = hardware threads
  size_t queue_capacity = 1024;               // requests in flight beyond this plus `threads` are shed
  int sndhwm = 10000;                         // messages per peer pipe
  int rcvhwm = 10000;
  int64_t max_msg_bytes = int64_t{16} << 20;  // ZMQ_MAXMSGSIZE (= proto kMaxFrameBytes)
  int heartbeat_ivl_ms = 1000;
  int heartbeat_timeout_ms = 5000;
  int heartbeat_ttl_ms = 5000;
  std::chrono::milliseconds drain_timeout{10000};  // Stop() gives in-flight work this long
  // Slow-query log: a request whose time in the node (received to reply sent) reaches this many
  // milliseconds is logged at WARN as one "slow query:" line of key=value fields (queue, execute
  // phases, reply; see node_server.cpp) and counted in search_node_slow_queries_total. 0: off.
  double slow_query_ms = 0;
  size_t slow_log_per_second = 20;  // lines logged per second at most; the rest counted, not logged
  // The I/O thread's longest sleep in poll with nothing to do (it wakes for requests and queued
  // replies; this bounds how late it notices a stop or anything else). Tests raise it so that a
  // lost wake-up shows as a timeout.
  std::chrono::milliseconds io_poll{200};
  // CURVE: the node's Z85 secret key (empty: plain ZeroMQ) and the Z85 public keys of the clients
  // it admits (curve/curve_keys.hpp). REQUIRES: curve_clients not empty when the key is set.
  std::string curve_secret_key;
  std::vector<std::string> curve_clients;
};

class NodeServer {
 public:
  // REQUIRES: shard, executor and metrics outlive the server. metrics may be nullptr.
  NodeServer(const ShardReader* shard, Executor* executor, Metrics* metrics, NodeServerOptions options);
  ~NodeServer();  // Stop()s if running
  NodeServer(const NodeServer&) = delete;
  NodeServer& operator=(const NodeServer&) = delete;

  // Binds and starts the I/O thread and workers. IOError when the endpoint cannot be bound.
  [[nodiscard]] Status Start();
  // Stops accepting (new requests answered Unavailable), waits for in-flight requests to be
  // answered (up to drain_timeout), then closes the socket and joins every thread. Idempotent.
  void Stop();
  // Asks the server to stop without waiting (async-signal-safe: one atomic store, one write(2)).
  void RequestStop();

  // The bound endpoint (ZMQ_LAST_ENDPOINT), e.g. "tcp://127.0.0.1:40123". Valid after Start().
  const std::string& endpoint() const { return endpoint_; }
  bool running() const { return running_.load(); }

  // Counters, for tests and health.
  uint64_t in_flight() const { return in_flight_.load(); }
  uint64_t queued() const;
  uint64_t unroutable_replies() const { return unroutable_.load(); }
  uint64_t dropped_frames() const { return dropped_.load(); }
  bool curve() const { return !options_.curve_secret_key.empty(); }
  // Peers refused by CURVE (all reasons; 0 without CURVE).
  uint64_t refused_peers() const;

 private:
  struct Impl;
  struct Job;
  void IoLoop();
  void WorkerLoop();
  // Hands the request to the executor's ExecuteAsync; the thread that finishes the query answers
  // it (Respond), and this worker takes the next request at once. Every request but an andor
  // split's (two runs in a row, on the worker) goes this way, so no worker waits per query;
  // Stop() waits for every request handed over to be answered.
  // caller_max_us: the executor's (Executor::ExecuteAsync); the I/O thread's bound when it hands
  // on a request itself.
  void ExecuteAsync(Job job, std::chrono::steady_clock::time_point start, double caller_max_us);
  // An andor split's OR answer: its hits, and its total when the request asked for a count.
  struct SplitOr {
    std::vector<HitMsg> hits;
    uint64_t total = 0;
  };
  // Builds, counts and queues the reply to a request (out: the executor's answer or an error;
  // ran_executor: the request reached the executor; split_or: an andor split's OR answer).
  void Respond(Job& job, std::chrono::steady_clock::time_point start, Result<ExecOutput> out, bool ran_executor,
               std::optional<SplitOr> split_or = std::nullopt);
  // Answers a FetchRequest job on the calling worker (node/fetch.hpp FetchDocs) and queues the reply;
  // Corruption counts towards the degraded health, as a search's does.
  void Fetch(Job& job, std::chrono::steady_clock::time_point start);

  const ShardReader* shard_;
  Executor* executor_;
  Metrics* metrics_;
  std::unique_ptr<NodeMetrics> node_metrics_;  // the node's own families; set with metrics_
  NodeServerOptions options_;
  std::unique_ptr<Impl> impl_;
  std::string endpoint_;
  std::thread io_thread_;
  std::vector<std::thread> workers_;
  std::atomic<bool> running_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<uint64_t> unroutable_{0};
  std::atomic<uint64_t> dropped_{0};
  int hook_id_ = 0;
};

}  // namespace search
