// search-integrator: the cluster's query front (integrator/integrator.hpp, http_front.hpp).
//   search-integrator --shards tcp://h1:p1,tcp://h2:p2,... --http HOST:PORT --metrics HOST:PORT
//   (a shard's replicas separated by "|": --shards tcp://a:7001|tcp://b:7001,tcp://c:7002|tcp://d:7002)
//                     [--cache-mb M] [--timeout-ms T] [--index DIR] [--max-inflight N]
//                     [--http-loops N] [--http-keep-alive-requests R] [--ping-ms P] [--log-level L]
//                     [--api-keys FILE [--open-health]] [--max-connections N] [--insecure]
//                     [--tls-cert FILE --tls-key FILE]   (HTTPS: PEM chain and key, both or neither)
// --http beyond loopback needs TLS and --api-keys, or --insecure (else exit 2, before binding).
// --curve-key FILE --curve-servers FILE: CurveZMQ to the nodes (curve/curve_keys.hpp). Without
// them: plain ZeroMQ, to loopback endpoints only unless --insecure (else exit 2).
// Fan-out lanes (I/O threads to the nodes) are sized from the CPUs it may use (DefaultFanoutLanes).
// PORT 0 picks a free port. Prints one JSON line to stdout once serving:
//   {"event":"ready","http":"HOST:PORT","tls":false,"metrics":"HOST:PORT","shards":N,"fanout_lanes":L,
//    "curve":bool}   ("curve":true: CurveZMQ to every node)
//   ("tls":true: the "http" address serves HTTPS only.)
// SIGTERM / SIGINT: stop accepting, finish in-flight requests, exit 0.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <sstream>
#include <thread>

#include "core/cpus.hpp"
#include "core/fd_table.hpp"
#include "core/signals.hpp"
#include "curve/curve_keys.hpp"
#include "integrator/api_keys.hpp"
#include "integrator/http_front.hpp"
#include "integrator/integrator.hpp"
#include "integrator/integrator_metrics.hpp"
#include "integrator/tls_context.hpp"
#include "core/log.hpp"
#include "metrics/metrics.hpp"

namespace {

bool SplitHostPort(const std::string& s, std::string* host, int* port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  *host = s.substr(0, colon);
  const std::string p = s.substr(colon + 1);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  *port = std::stoi(p);
  return *port <= 65535;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace search;
  CLI::App app{"search-integrator: HTTP front of the search cluster (fan-out, merge, result cache)"};
  std::string shards, http_addr = "127.0.0.1:9200", metrics_addr = "127.0.0.1:9201", log_level = "info";
  IntegratorOptions options;
  size_t cache_mb = 64;
  int ping_ms = 1000;
  size_t http_keep_alive_requests = HttpFrontOptions{}.keep_alive_max_requests;
  app.add_option("--shards", shards,
                 "comma-separated shards in shard order, each tcp://HOST:PORT, or its replicas tcp://A:P|tcp://B:P")
      ->required();
  app.add_option("--http", http_addr, "HOST:PORT of the HTTP API (PORT 0 = any); set it to serve beyond localhost")
      ->capture_default_str();
  app.add_option("--metrics", metrics_addr, "HOST:PORT serving Prometheus /metrics (empty: none)")
      ->capture_default_str();
  app.add_option("--cache-mb", cache_mb,
                 "result cache in MiB (0 disables it); 0 when measuring the nodes, more for repetitive traffic")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  app.add_option("--timeout-ms", options.default_timeout_ms,
                 "deadline of a request that gives no timeout_ms; raise it for slow shards or long queries")
      ->capture_default_str()
      ->check(CLI::Range(1u, kMaxTimeoutMs));
  app.add_option("--index", options.index_dir,
                 "index directory whose manifest.json gives the analyzer; set it when the index is not analyzed "
                 "by the default analyzer");
  app.add_option("--max-inflight", options.max_inflight,
                 "searches running plus requests queued before answering 429; raise it when clients would rather "
                 "wait than be refused")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  int http_loops = 0;
  app.add_option("--http-loops", http_loops,
                 "event-loop threads (0: one per 2 CPUs the integrator may use, rounded up, 1 to 16); lower it to leave CPUs to "
                 "a node on the same host")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--http-keep-alive-requests", http_keep_alive_requests,
                 "requests one kept-alive connection carries before the integrator closes it; raise it when "
                 "clients pay for reconnects")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  options.fanout_lanes = DefaultFanoutLanes(AvailableCores());
  app.add_option("--ping-ms", ping_ms,
                 "health-check ping interval in ms; lower it to notice a dead replica sooner")
      ->capture_default_str()
      ->check(CLI::Range(10, 60000));
  app.add_option("--log-level", log_level, "debug|info|warn|error|off; debug to follow requests")
      ->capture_default_str();
  // Security (docs/RELIABILITY.md "Security"). Without it the integrator serves plain HTTP and talks
  // plain ZeroMQ, and only on loopback; --insecure allows that anywhere.
  bool insecure = false;
  app.add_flag("--insecure", insecure,
               "allow plain HTTP without API keys, and plain ZeroMQ to the nodes, beyond loopback (tests, one "
               "trusted machine)");
  std::string tls_cert, tls_key;
  app.add_option("--tls-cert", tls_cert,
                 "serve HTTPS: PEM file of the server's certificate, then any intermediates (with --tls-key)");
  app.add_option("--tls-key", tls_key,
                 "serve HTTPS: PEM file of the certificate's private key, unencrypted, mode 0600 (with --tls-cert)");
  std::string api_keys_file;
  app.add_option("--api-keys", api_keys_file,
                 "require an API key on every request (Authorization: ApiKey base64(id:key)): the file of salted "
                 "hashes `searchctl apikey create --file FILE` writes");
  bool open_health = false;
  app.add_flag("--open-health", open_health,
               "with --api-keys, leave GET /health open (for load balancers' health checks)");
  size_t max_connections = 0;
  app.add_option("--max-connections", max_connections,
                 "HTTP connections open at once; more are closed as soon as accepted (default: the descriptor "
                 "limit less an eighth, at least 256, kept for the rest)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  std::string curve_key_file, curve_servers_file;
  app.add_option("--curve-key", curve_key_file,
                 "the integrator's CURVE secret key file (searchctl keygen's PREFIX.key, mode 0600): talk CurveZMQ "
                 "to the nodes");
  app.add_option("--curve-servers", curve_servers_file,
                 "the nodes' CURVE public keys: lines `ENDPOINT PUBLIC_KEY`, or one line with a key for every node; "
                 "with --curve-key");
  CLI11_PARSE(app, argc, argv);
  (void)insecure;  // read by the HTTP binding rule and the fan-out's CURVE settings

  auto level = ParseLogLevel(log_level);
  if (!level.ok()) {
    std::cerr << "search-integrator: " << level.status().ToString() << "\n";
    return 2;
  }
  SetLogLevel(*level);
  const Logger log("integrator");
  options.shards = SplitList(shards);
  if (auto curve_keys = curve::ClientKeysForFlags(curve_key_file, curve_servers_file, insecure, options.shards);
      !curve_keys.ok()) {
    std::cerr << "search-integrator: " << curve_keys.status().message() << "\n";
    return 2;
  } else {
    options.fanout.curve = std::move(curve_keys).value();
  }
  if (!options.fanout.curve.has_value())
    log.Warn() << "INSECURE: plain ZeroMQ to the nodes (no --curve-key): queries and answers cross in clear";
  options.cache_bytes = cache_mb << 20;
  options.fanout.ping_interval = std::chrono::milliseconds(ping_ms);
  HttpFrontOptions http;
  http.loops = http_loops > 0 ? http_loops : DefaultHttpLoops(AvailableCores());
  http.keep_alive_max_requests = http_keep_alive_requests;
  if (!SplitHostPort(http_addr, &http.host, &http.port)) {
    std::cerr << "search-integrator: --http must be HOST:PORT (got '" << http_addr << "')\n";
    return 2;
  }
  if (tls_cert.empty() != tls_key.empty()) {
    std::cerr << "search-integrator: --tls-cert and --tls-key go together (HTTPS needs the certificate and its key)\n";
    return 2;
  }
  if (!tls_cert.empty()) {
    auto tls = TlsServerContext::Load(tls_cert, tls_key);
    if (!tls.ok()) {
      std::cerr << "search-integrator: " << tls.status().message() << "\n";
      return 2;
    }
    http.tls = *tls;
  }

  if (!api_keys_file.empty()) {
    auto keys = ApiKeys::Load(api_keys_file);
    if (!keys.ok()) {
      std::cerr << "search-integrator: " << keys.status().message() << "\n";
      return 2;
    }
    http.api_keys = *keys;
  } else if (open_health) {
    std::cerr << "search-integrator: --open-health goes with --api-keys (without keys every route is open)\n";
    return 2;
  }
  http.open_health = open_health;
  // The binding rule: beyond loopback only with TLS and API keys, or --insecure.
  if (!IsLoopbackHttpHost(http.host) && !insecure && (http.tls == nullptr || http.api_keys == nullptr)) {
    std::cerr << "search-integrator: --http " << http_addr << " is beyond loopback without "
              << (http.tls == nullptr && http.api_keys == nullptr ? "TLS and API keys"
                  : http.tls == nullptr                          ? "TLS"
                                                                 : "API keys")
              << ": give --tls-cert, --tls-key and --api-keys (or --insecure, for tests and a trusted network)\n";
    return 2;
  }
  if (http.api_keys == nullptr && !IsLoopbackHttpHost(http.host))
    log.Warn() << "INSECURE: HTTP on " << http_addr
               << " without API keys (--insecure): anyone who reaches it may search";

  // Signals are taken synchronously by a sigwait thread: block them before any thread starts.
  const sigset_t signals = BlockStopSignals();
  // The descriptor table sized for the HTTP connections and the fan-out's sockets while there is
  // one thread: grown later, each growth would stall the loops for an RCU grace period
  // (core/fd_table.hpp). The loops take any number of connections: room for 4,096 before a growth.
  ReserveFdTable(2 * 2048 + 256);
  if (max_connections == 0) {
    rlimit rl{};
    const uint64_t fd_limit =
        ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 1u << 20;
    max_connections = DefaultMaxConnections(fd_limit);
  }
  http.max_connections = max_connections;

  Metrics metrics("integrator");
  if (!metrics_addr.empty()) {
    if (Status st = metrics.StartExposer(metrics_addr); !st.ok()) {
      log.Error() << st.ToString();
      return 1;
    }
  }
  IntegratorMetrics observer(&metrics, options.shards.size());
  auto integrator = Integrator::Start(options, &observer);
  if (!integrator.ok()) {
    log.Error() << integrator.status().ToString();
    return 1;
  }
  observer.AttachCache(&(*integrator)->cache());
  observer.AttachCpuHomes([in = integrator->get()] { return in->CpuHomes(); });
  HttpFront front(integrator->get(), http);
  if (Status st = front.Bind(); !st.ok()) {
    log.Error() << st.ToString();
    return 1;
  }

  std::atomic<bool> listening_done{false};
  std::atomic<bool> got_signal{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (listening_done.load()) return;  // woken by main after Listen returned on its own
    got_signal = true;
    log.Info() << "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", draining";
    // Stop() is a no-op until the server loop runs: repeat until Listen has returned.
    while (!listening_done.load()) {
      front.Stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });

  const std::string metrics_bound =
      metrics_addr.empty() ? std::string()
                           : metrics_addr.substr(0, metrics_addr.rfind(':')) + ":" + std::to_string(metrics.exposer_port());
  nlohmann::json ready = {{"event", "ready"},
                          {"http", http.host + ":" + std::to_string(front.port())},
                          {"tls", http.tls != nullptr},
                          {"metrics", metrics_bound},
                          {"shards", options.shards.size()},
                          {"fanout_lanes", options.fanout_lanes},
                          {"curve", options.fanout.curve.has_value()},
                          {"http_loops", http.loops}};
  std::cout << ready.dump() << std::endl;
  log.Info() << "serving " << (http.tls ? "https://" : "http://") << http.host << ":" << front.port() << " over "
             << options.shards.size()
             << " shards (" << shards << "), metrics on " << metrics_bound;

  front.Listen();  // returns after Stop(), once in-flight requests finished
  listening_done = true;
  if (!got_signal.load()) pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  (*integrator)->Stop();
  observer.Detach();
  metrics.StopExposer();
  log.Info() << "exit";
  return got_signal.load() ? 0 : 1;
}
