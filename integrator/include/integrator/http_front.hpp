// HttpFront: the integrator's HTTP API, a thin layer over Integrator, served by a few event loops of
// our own (integrator/src/http_loops.hpp): any number of connections each, pipelining, chunked
// bodies, and no thread held while a search waits for the shards.
//   GET  /search?q=&k=&mode=&timeout_ms=   POST /search {"q","k","mode","timeout_ms"}
//   GET  /health   cluster health (green | yellow | red) and per-shard state
//   GET  /stats    live numbers for the status page (QPS, latency percentiles, cache)
//   GET  /         the status page (HTML; refreshes itself from /health and /stats every second)
// Anything else is 404 with the JSON error shape; bodies over kMaxBodyBytes are refused (413).
// With HttpFrontOptions::tls the same API is served over TLS only (tls_context.hpp), the
// handshakes run by the same loops.
// Thread-safety: Listen blocks in the calling thread, serving on it and the other loops' threads;
// Stop may be called from any thread (a signal-watching thread) and makes Listen return after
// in-flight requests finished.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "core/status.hpp"
#include "integrator/api_keys.hpp"
#include "integrator/integrator.hpp"
#include "integrator/tls_context.hpp"

namespace search {

inline constexpr size_t kMaxBodyBytes = size_t{1} << 20;

struct HttpFrontOptions {
  std::string host = "127.0.0.1";
  int port = 9200;
  int loops = 2;               // event-loop threads (DefaultHttpLoops)
  int keep_alive_seconds = 2;  // bounds how long an idle keep-alive connection delays shutdown
  // Requests a kept-alive connection may carry before the server closes it ("Connection: close"):
  // 1000, as nginx; over HTTPS each new connection costs a (resumed) handshake.
  size_t keep_alive_max_requests = 1000;
  // API keys every request must carry but OpenWithoutApiKey's (null: none asked); open_health
  // leaves GET /health open too.
  std::shared_ptr<const ApiKeys> api_keys;
  bool open_health = false;
  // Connections open at once; one more is closed as soon as accepted. 0: no limit.
  // search-integrator's default: DefaultMaxConnections(its descriptor limit).
  size_t max_connections = 0;
  // HTTPS: every connection's bytes through TLS (tls_context.hpp); null: plain HTTP.
  std::shared_ptr<const TlsServerContext> tls;
};

// --http-loops' default for an integrator that may use `cpus` CPUs: one loop per 2 of them, rounded
// up, 1 to 16. A loop reads, parses, analyzes, merges and writes every request of its connections,
// so too few loops fall behind at high rates: on 3 CPUs one loop was a whole core at 41k q/s and
// capped the served rate there, where two held 50-61k (BENCHMARKS.md, issue 52's goal 2).
constexpr int DefaultHttpLoops(unsigned cpus) { return static_cast<int>(std::clamp(cpus / 2 + cpus % 2, 1u, 16u)); }

// --max-connections' default under a descriptor limit (RLIMIT_NOFILE) of `fd_limit`: all but an
// eighth of it (at least 256) kept for the fan-out's sockets, files and the metrics listener.
constexpr size_t DefaultMaxConnections(uint64_t fd_limit) {
  const uint64_t keep = fd_limit / 8 > 256 ? fd_limit / 8 : 256;
  return fd_limit > keep + 16 ? static_cast<size_t>(fd_limit - keep) : 16;
}

// True for a --http host that listens on loopback only: "localhost", an IPv4 address in 127.0.0.0/8,
// "::1" (or "[::1]"). Anything else (0.0.0.0, ::, another address, a host name) may be reached from
// other machines.
bool IsLoopbackHttpHost(const std::string& host);

// The status page served at /.
const std::string& StatusPageHtml();

// True for the requests HttpFrontOptions::api_keys does not guard: GET or HEAD of / (the status
// page: static HTML and script that hold no data; its own fetches carry the key it asks the user
// for), and of /health when open_health. Any other method, path or query needs the key.
bool OpenWithoutApiKey(const std::string& method, const std::string& path, bool open_health);

class HttpFront {
 public:
  HttpFront(Integrator* integrator, HttpFrontOptions options);
  ~HttpFront();
  // Binds the port (IOError when it cannot). Port 0 picks a free port, see port().
  Status Bind();
  int port() const { return bound_port_; }
  // Serves until Stop(). REQUIRES: Bind() succeeded.
  void Listen();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int bound_port_ = 0;
};

}  // namespace search
