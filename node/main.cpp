// search-node: one shard of the index behind a ZeroMQ ROUTER (node/node_server.hpp).
//   search-node --index DIR/shard-<i> --listen tcp://HOST:PORT --metrics HOST:PORT
//               [--threads N] [--cache-mb M] [--queue Q] [--log-level L]
// Prints one JSON line to stdout once serving: {"event":"ready","listen":...,"metrics":...,"shard":i}.
// SIGTERM / SIGINT: stop accepting, drain in-flight requests, exit 0.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <pthread.h>

#include "index_store/shard_store.hpp"
#include "metrics/log.hpp"
#include "metrics/metrics.hpp"
#include "node/executor.hpp"
#include "node/node_server.hpp"

int main(int argc, char** argv) {
  using namespace search;
  CLI::App app{"search-node: serves one index shard over ZeroMQ + Cap'n Proto"};
  std::string index_dir, metrics_addr, log_level = "info";
  NodeServerOptions options;
  options.listen = "tcp://127.0.0.1:5555";
  size_t cache_mb = 256, threads = 0;
  int drain_ms = 10000;
  app.add_option("--index", index_dir, "shard directory, DIR/shard-<i>")->required();
  app.add_option("--listen", options.listen, "ZeroMQ endpoint to bind (tcp://HOST:PORT, PORT * = any)")
      ->capture_default_str();
  app.add_option("--metrics", metrics_addr, "HOST:PORT serving Prometheus /metrics (empty: none)");
  app.add_option("--threads", threads, "worker threads (0 = hardware threads)")->capture_default_str();
  app.add_option("--cache-mb", cache_mb, "posting-list cache budget in MiB")->capture_default_str();
  app.add_option("--queue", options.queue_capacity, "queued requests before load shedding")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--drain-timeout-ms", drain_ms, "how long SIGTERM waits for in-flight requests")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  app.add_option("--log-level", log_level, "debug|info|warn|error|off")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto level = ParseLogLevel(log_level);
  if (!level.ok()) {
    std::cerr << "search-node: " << level.status().ToString() << "\n";
    return 2;
  }
  SetLogLevel(*level);
  const Logger log("node");
  options.threads = threads;
  options.drain_timeout = std::chrono::milliseconds(drain_ms);

  // Signals are taken synchronously by sigwait below: block them before any thread starts, so
  // every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  ShardReaderOptions reader_options;
  reader_options.list_cache_bytes = cache_mb << 20;
  auto shard = ShardReader::Open(index_dir, reader_options);
  if (!shard.ok()) {
    log.Error() << "cannot open shard " << index_dir << ": " << shard.status().ToString();
    return 1;
  }
  Metrics metrics("node");
  if (!metrics_addr.empty()) {
    Status st = metrics.StartExposer(metrics_addr);
    if (!st.ok()) {
      log.Error() << st.ToString();
      return 1;
    }
  }
  CpuExecutorAdapter executor(shard->get());
  NodeServer server(shard->get(), &executor, &metrics, options);
  if (Status st = server.start(); !st.ok()) {
    log.Error() << st.ToString();
    return 1;
  }
  nlohmann::json ready = {{"event", "ready"},
                          {"listen", server.endpoint()},
                          {"metrics", metrics_addr.empty() ? std::string()
                                                           : metrics_addr.substr(0, metrics_addr.rfind(':')) + ":" +
                                                                 std::to_string(metrics.exposer_port())},
                          {"shard", (*shard)->meta().shard_id}};
  std::cout << ready.dump() << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  log.Info() << "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", draining";
  server.stop();
  metrics.StopExposer();
  log.Info() << "exit";
  return 0;
}
