// search-integrator: the cluster's query front (integrator/integrator.hpp, http_front.hpp).
//   search-integrator --shards tcp://h1:p1,tcp://h2:p2,... --http HOST:PORT --metrics HOST:PORT
//   (a shard's replicas separated by "|": --shards tcp://a:7001|tcp://b:7001,tcp://c:7002|tcp://d:7002)
//                     [--cache-mb M] [--timeout-ms T] [--index DIR] [--max-inflight N]
//                     [--http-engine threads|loops] [--http-loops N]
//                     [--http-threads N] [--http-keep-alive-requests R] [--http-close-after-wait-ms W]
//                     [--fanout-lanes L] [--ping-ms P] [--log-level L]
// PORT 0 picks a free port. Prints one JSON line to stdout once serving:
//   {"event":"ready","http":"HOST:PORT","metrics":"HOST:PORT","shards":N,"fanout_lanes":L}
// SIGTERM / SIGINT: stop accepting, finish in-flight requests, exit 0.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <sstream>
#include <thread>

#include "core/cpus.hpp"
#include "core/fd_table.hpp"
#include "core/signals.hpp"
#include "core/thread_slice.hpp"
#include "integrator/http_front.hpp"
#include "integrator/integrator.hpp"
#include "integrator/integrator_metrics.hpp"
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
  int http_threads = 64, ping_ms = 1000;
  size_t http_keep_alive_requests = HttpFrontOptions{}.keep_alive_max_requests;
  int http_close_after_wait_ms = static_cast<int>(HttpFrontOptions{}.close_after_wait.count());
  app.add_option("--shards", shards, "comma-separated shards, each tcp://HOST:PORT or replicas tcp://A:P|tcp://B:P")
      ->required();
  app.add_option("--http", http_addr, "HOST:PORT of the HTTP API (PORT 0 = any)")->capture_default_str();
  app.add_option("--metrics", metrics_addr, "HOST:PORT serving Prometheus /metrics (empty: none)")
      ->capture_default_str();
  app.add_option("--cache-mb", cache_mb, "result cache budget in MiB (0 disables it)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  app.add_option("--timeout-ms", options.default_timeout_ms, "default per-request deadline in ms")
      ->capture_default_str()
      ->check(CLI::Range(1u, kMaxTimeoutMs));
  app.add_option("--index", options.index_dir, "index directory: take the analyzer from its manifest.json");
  app.add_option("--max-inflight", options.max_inflight,
                 "searches running plus requests queued for a worker before answering 429")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  std::string http_engine = "loops";
  int http_loops = 0;
  app.add_option("--http-engine", http_engine,
                 "loops: event loops (--http-loops), any number of connections each, a search not holding a thread "
                 "while it waits; threads: cpp-httplib, a worker thread per open connection (--http-threads)")
      ->capture_default_str()
      ->check(CLI::IsMember({"threads", "loops"}));
  app.add_option("--http-loops", http_loops,
                 "event-loop threads of --http-engine loops (0: one per 2 CPUs the integrator may use, 1 to 16)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--http-threads", http_threads, "HTTP worker threads (--http-engine threads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--http-keep-alive-requests", http_keep_alive_requests,
                 "requests one kept-alive HTTP connection may carry before the integrator closes it (while a "
                 "connection waits for one of the --http-threads workers, every answer closes its connection)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--http-close-after-wait-ms", http_close_after_wait_ms,
                 "how long a connection must have waited for an HTTP worker before answers close their "
                 "connections for it (0: as soon as one waits)")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  options.fanout_lanes = DefaultFanoutLanes(AvailableCores());
  app.add_option("--fanout-lanes", options.fanout_lanes,
                 "fan-out I/O threads, each with its own connections to every node; searches take them in turn "
                 "(default: 2 where the integrator may use 8 or more CPUs, else 1)")
      ->capture_default_str()
      ->check(CLI::Range(1u, kMaxFanoutLanes));
  int64_t thread_slice_us = 0;
  app.add_option("--thread-slice-us", thread_slice_us,
                 "EEVDF slice in microseconds (Linux 6.12+, 100 to 100000) of the HTTP workers, the accepting "
                 "thread and the fan-out threads: woken by a request or an answer on a busy CPU, each runs within "
                 "it instead of the kernel's default slice (3 ms on 8 or more CPUs). 0 = the kernel's default")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  app.add_option("--ping-ms", ping_ms, "health-check ping interval in ms")
      ->capture_default_str()
      ->check(CLI::Range(10, 60000));
  app.add_option("--log-level", log_level, "debug|info|warn|error|off")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto level = ParseLogLevel(log_level);
  if (!level.ok()) {
    std::cerr << "search-integrator: " << level.status().ToString() << "\n";
    return 2;
  }
  SetLogLevel(*level);
  const Logger log("integrator");
  options.shards = SplitList(shards);
  options.cache_bytes = cache_mb << 20;
  options.fanout.ping_interval = std::chrono::milliseconds(ping_ms);
  HttpFrontOptions http;
  http.threads = http_threads;
  http.engine = http_engine == "loops" ? HttpEngine::kLoops : HttpEngine::kThreads;
  http.loops = http_loops > 0 ? http_loops : DefaultHttpLoops(AvailableCores());
  http.keep_alive_max_requests = http_keep_alive_requests;
  http.close_after_wait = std::chrono::milliseconds(http_close_after_wait_ms);
  if (!ValidThreadSliceUs(thread_slice_us)) {
    std::cerr << "search-integrator: --thread-slice-us must be 0 (the kernel's default) or 100 to 100000\n";
    return 2;
  }
  http.thread_slice = std::chrono::microseconds(thread_slice_us);
  options.fanout.thread_slice = http.thread_slice;
  const int64_t thread_slice_taken =
      thread_slice_us > 0 && KernelTakesThreadSlice(http.thread_slice) ? thread_slice_us : 0;
  if (!SplitHostPort(http_addr, &http.host, &http.port)) {
    std::cerr << "search-integrator: --http must be HOST:PORT (got '" << http_addr << "')\n";
    return 2;
  }

  // Signals are taken synchronously by a sigwait thread: block them before any thread starts.
  const sigset_t signals = BlockStopSignals();
  // The descriptor table sized for the HTTP connections (kept-alive ones and those queued for a
  // worker) and the fan-out's sockets while there is one thread: grown later, each growth would
  // stall the accepting thread for an RCU grace period (core/fd_table.hpp).
  // (The loops take any number of connections: room for 4,096 of them before a growth.)
  ReserveFdTable(2 * (http.engine == HttpEngine::kLoops ? std::max(http_threads, 2048) : http_threads) + 256);

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
                          {"metrics", metrics_bound},
                          {"shards", options.shards.size()},
                          {"fanout_lanes", options.fanout_lanes},
                          {"http_engine", http_engine},
                          {"http_loops", http.engine == HttpEngine::kLoops ? http.loops : 0},
                          {"thread_slice_us", thread_slice_taken}};
  std::cout << ready.dump() << std::endl;
  log.Info() << "serving http://" << http.host << ":" << front.port() << " over " << options.shards.size()
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
