// HttpLoops: HttpFront's event-driven engine (its only one). A few event loops, each a
// thread with its own epoll set, share the listening socket (EPOLLEXCLUSIVE: a new connection wakes
// one of them) and serve every connection they accept without a thread of its own: read, parse
// (http_request_parser.hpp), route, answer. A search does not block its loop: the loop hands it to
// Integrator::HandleSearchAsync, the fan-out's I/O thread hands each round's results back through
// the loop's mailbox (a locked queue and an eventfd written only while the loop may sleep,
// core/wake_fd.hpp), and the loop merges, writes the answer and reads the connection's next
// request. So a connection costs a buffer, not a thread; a request costs the loop a read and a
// write plus its share of one epoll_wait, and no thread hand-off beyond the fan-out's.
//
// HTTP/1.1 and 1.0 with keep-alive (HTTP/1.0 only when asked), pipelined requests answered in
// order (one at a time per connection), chunked request bodies. A connection is closed after
// keep_alive_max_requests requests (its last answer says "Connection: close"), when idle longer
// than keep_alive_seconds between requests, when a request stays incomplete or an answer unsent
// for 5 s, and after any malformed request (answered first: 400, 413, 414, 431, 501, 505).
// HTTPS (HttpFrontOptions::tls): each connection's TLS handshake runs in its loop like its reads
// and writes, never blocking it; a handshake not completed 5 s after the accept, failed (a plain
// HTTP request, garbage, an old protocol version) or cut short by the client closes the connection
// and is counted (tls_handshake_failures, IntegratorObserver::OnTlsHandshakeFailure). Keep-alive
// and pipelining are the same over TLS.
// Hostile clients: a request whose line and headers are not all in 10 s after its first byte is
// closed without an answer (a header timeout: slowloris); beyond max_connections open, a new
// connection is closed as soon as it is accepted. Both are counted (connections_refused,
// IntegratorObserver::OnHttpConnectionRefused: "header_timeout", "max_connections").
// API keys (HttpFrontOptions::api_keys): every request but OpenWithoutApiKey's (GET /, and GET /health
// with open_health) must carry a right key (api_keys.hpp); else 401 (with WWW-Authenticate: ApiKey) or 403, counted
// (auth_failures, OnHttpAuthFailure), and the connection is kept.
// Stop: no new connections; idle ones close; the loops return once every search in progress has
// been answered and written (at most 5 s more).
// Thread-safety: Stop may be called from any thread; Listen blocks the calling thread (it runs the
// first loop).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.hpp"
#include "integrator/http_front.hpp"
#include "integrator/integrator.hpp"

namespace search {

class HttpLoops {
 public:
  HttpLoops(Integrator* integrator, const HttpFrontOptions& options);
  ~HttpLoops();
  Status Bind();  // IOError when the address cannot be bound
  int port() const { return port_; }
  void Listen();
  void Stop();
  // Connections open now over every loop (for tests and /stats-like reports).
  size_t open_connections() const { return open_.load(std::memory_order_relaxed); }
  // Connections closed for the limit or the header timeout, and requests refused 401 / 403, since the start.
  uint64_t connections_refused() const { return connections_refused_.load(std::memory_order_relaxed); }
  uint64_t auth_failures(int status) const {
    return auth_failures_[status == 401 ? 0 : 1].load(std::memory_order_relaxed);
  }
  // HTTPS connections closed before their handshake completed, since the start.
  uint64_t tls_handshake_failures() const { return tls_handshake_failures_.load(std::memory_order_relaxed); }

  class Loop;

 private:
  Integrator* integrator_;
  HttpFrontOptions options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> open_{0};
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> auth_failures_[2] = {0, 0};  // 401, 403
  std::atomic<uint64_t> tls_handshake_failures_{0};
  std::atomic<size_t> next_loop_{0};  // the loop the next accepted connection goes to (in turn)
  std::vector<std::unique_ptr<Loop>> loops_;
};

}  // namespace search
