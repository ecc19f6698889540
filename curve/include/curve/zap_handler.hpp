// ZapHandler: the node's CURVE gatekeeper. It answers ZAP requests (ZeroMQ RFC 27) on
// inproc://zeromq.zap.01 of one ZeroMQ context from its own thread, accepting a CURVE peer only
// when its public key is in the allowed list, and watches one server socket's handshake failures
// through a socket monitor. Every refused peer is reported once to `on_refusal`, with its reason:
//   kUnknownKey    a CURVE client whose public key is not listed (the ZAP handler said 400);
//   kNoCurve       a peer of another mechanism (plain NULL ZeroMQ) against the CURVE server;
//   kBadHandshake  any other failed handshake: a wrong server key, garbage instead of ZMTP.
// A refused peer's connection is closed by libzmq before it can send a message: it gets nothing.
// Contract: Start() must return before the watched socket binds (a socket whose context has no ZAP
// handler lets every CURVE client in), and Stop() is called after the watched socket is closed and
// before the context is terminated.
// Thread-safety: Start and Stop from one controlling thread; on_refusal runs on the handler's thread;
// the counters may be read from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/status.hpp"

namespace search::curve {

enum class RefusalReason : uint8_t { kUnknownKey, kNoCurve, kBadHandshake };
inline constexpr size_t kRefusalReasons = 3;
// "unknown_key", "no_curve", "bad_handshake": the reason label of search_node_refused_peers_total.
const char* RefusalReasonName(RefusalReason reason);

class ZapHandler {
 public:
  using RefusalFn = std::function<void(RefusalReason)>;

  // Binds inproc://zeromq.zap.01 in `ctx`, monitors `watched` (the CURVE server socket, not yet
  // bound) and starts the thread. `allowed` holds Z85 public keys (InvalidArgument for a bad one).
  // IOError when the ZAP endpoint is taken (another handler in this context).
  static Result<std::unique_ptr<ZapHandler>> Start(zmq::context_t& ctx, zmq::socket_t& watched,
                                                   const std::vector<std::string>& allowed, RefusalFn on_refusal);
  ~ZapHandler();  // Stop()s
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Joins the thread and closes its sockets. Idempotent.
  void Stop();

  uint64_t accepted() const { return accepted_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  ZapHandler(zmq::socket_t zap, zmq::socket_t monitor, std::set<std::string> allowed, RefusalFn on_refusal);
  void Run();
  void Answer();        // one ZAP request
  void DrainMonitor();  // the monitor's queued events
  void Refuse(RefusalReason reason, std::string_view why);

  zmq::socket_t zap_, monitor_;
  std::set<std::string> allowed_;  // 32-byte binary public keys
  RefusalFn on_refusal_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0}, refused_{0};
  int64_t last_warn_ms_ = -1;  // the thread's: refusals are logged at most once a second
  uint64_t unlogged_ = 0;
  std::thread thread_;
};

}  // namespace search::curve
