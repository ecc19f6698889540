// search-node: one shard of the index behind a ZeroMQ ROUTER (node/node_server.hpp).
//   search-node --index DIR/shard-<i> --listen tcp://HOST:PORT --metrics HOST:PORT
//               [--threads N] [--cache-mb M] [--queue Q] [--drain-timeout-ms MS] [--log-level L]
//               [--slow-query-ms MS] [--gpu auto|on|off] [--gpu-cache-bytes B] [--gpu-preload-mb M]
//               [--scheduler auto|cpu|gpu|hybrid|griffin] [--tuning KEY=VALUE|FILE ...]
// --gpu auto (default): the GPU executor when built with CUDA and a GPU is usable, else the CPU;
// on: the GPU executor or exit 1 with the reason; off: the CPU executor.
// --scheduler auto (default): hybrid (node/scheduled_executor.hpp) when the GPU executor runs,
// else the CPU engine directly; cpu runs the scheduler's queues on the CPU only.
// --tuning: the experimental knobs of node/tuning.hpp (one table; --help lists it). A bad option,
// an unknown tuning key or a bad value exits 2 with the reason.
// Prints one JSON line to stdout once serving:
//   {"event":"ready","listen":...,"metrics":...,"shard":i,"executor":"gpu"|"cpu",
//    "scheduler":"none"|"cpu"|"gpu"|"hybrid"|"griffin","gpu":bool,...}.
// --curve-key FILE --curve-clients FILE: serve CurveZMQ only, to the listed client keys
// (curve/curve_keys.hpp; docs/OPERATIONS.md "CURVE keys"). Without them the node serves plain
// ZeroMQ, says so in a WARN line, and listens only on loopback unless --insecure (else exit 2).
// The ready line says which: "curve":bool.
// SIGTERM / SIGINT: stop accepting, drain in-flight requests, exit 0.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <pthread.h>
#include <thread>

#include "core/cache_sizing.hpp"
#include "core/cpus.hpp"
#include "core/large_buffer.hpp"
#include "core/signals.hpp"
#include "curve/curve_keys.hpp"
#include "index_store/shard_store.hpp"
#include "core/log.hpp"
#include "metrics/metrics.hpp"
#include "node/executor.hpp"
#include "sched/host_load.hpp"
#include "node/node_server.hpp"
#include "node/scheduled_executor.hpp"
#include "node/tuning.hpp"
#ifdef SEARCH_HAVE_GPU
#include "gpu_exec/cuda_util.hpp"
#include "node/gpu_executor_adapter.hpp"
#endif

int main(int argc, char** argv) {
  using namespace search;
  CLI::App app{"search-node: serves one index shard over ZeroMQ + Cap'n Proto"};
  std::string index_dir, metrics_addr, log_level = "info";
  NodeServerOptions options;
  options.listen = "tcp://127.0.0.1:5555";
  size_t cache_mb = 0, threads = 0;
  int drain_ms = 10000;
  app.add_option("--index", index_dir, "the shard to serve: DIR/shard-<i> as searchctl index wrote it")->required();
  app.add_option("--listen", options.listen,
                 "ZeroMQ endpoint the integrator connects to (tcp://HOST:PORT; PORT * = any free one): set it per node")
      ->capture_default_str();
  app.add_option("--metrics", metrics_addr,
                 "HOST:PORT to serve Prometheus /metrics on (empty: none); set it to monitor the node");
  app.add_option("--threads", threads,
                 "request threads (0 = the CPUs this process may use); lower it only to leave CPUs to other processes")
      ->capture_default_str();
  app.add_option("--cache-mb", cache_mb,
                 "main-memory posting-list cache in MiB (0 = every list of the shard where that fits in half of "
                 "MemAvailable, else that half; the log says which); set it to leave memory to other processes")
      ->capture_default_str();
  app.add_option("--queue", options.queue_capacity,
                 "requests in flight beyond this plus --threads are refused at once (load shedding); raise it "
                 "when the node sheds load its clients would rather wait for")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--drain-timeout-ms", drain_ms,
                 "how long SIGTERM waits for in-flight requests before exiting; raise it for long queries")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  // Security (docs/RELIABILITY.md "Security"): without --curve-key the node serves plain ZeroMQ,
  // only on loopback unless --insecure.
  bool insecure = false;
  app.add_flag("--insecure", insecure,
               "serve plain ZeroMQ (no CURVE) beyond loopback: any peer that reaches the port can query the shard");
  std::string curve_key_file, curve_clients_file;
  app.add_option("--curve-key", curve_key_file,
                 "the node's CURVE secret key file (searchctl keygen's PREFIX.key, mode 0600): serve CurveZMQ only");
  app.add_option("--curve-clients", curve_clients_file,
                 "the client public keys the node admits, one Z85 key a line (# comments); with --curve-key");
  app.add_option("--log-level", log_level, "debug|info|warn|error|off; debug to see each start-up step")
      ->capture_default_str();
  app.add_option("--slow-query-ms", options.slow_query_ms,
                 "log (WARN, up to 20 lines a second) each request that spends this long in the node, with where "
                 "its time went (0 = off); set it to find what makes a tail slow")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3.6e6));
  std::string gpu_mode = "auto";
  size_t gpu_cache_bytes = 0;
  app.add_option("--gpu", gpu_mode,
                 "auto: the GPU when there is one; on: fail without a GPU (GPU hosts); off: CPU only, to leave "
                 "the GPU to others")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--gpu-cache-bytes", gpu_cache_bytes,
                 "device memory for cached posting lists (0 = half of the GPU's free memory); set it when other "
                 "processes share the GPU")
      ->capture_default_str();
  int64_t gpu_preload_mb = -1;
  app.add_option("--gpu-preload-mb", gpu_preload_mb,
                 "at start, copy the longest posting lists (1024 postings or more) into the GPU list cache, "
                 "longest first, up to this many MiB (-1 = as many as fit in 90% of the cache; 0 = none, lists are "
                 "copied on first use); 0 for a faster start")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30));
  std::string sched_name = "auto";
  app.add_option("--scheduler", sched_name,
                 "where queries run: auto = hybrid when the GPU executor runs, else the CPU engine directly; "
                 "cpu|gpu|hybrid|griffin force one scheduler mode (gpu, hybrid and griffin need a GPU), to "
                 "compare them")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "gpu", "hybrid", "griffin"}));
  std::vector<std::string> tuning_args;
  app.add_option("--tuning", tuning_args,
                 "KEY=VALUE, or a file of KEY=VALUE lines (repeatable): experimental knobs, for experiments "
                 "and tests; keys below")
      ->allow_extra_args(false);
  app.footer("--tuning keys:\n" + TuningHelp());
  CLI11_PARSE(app, argc, argv);
  // Security, before anything is opened or bound: CURVE keys, or plain ZeroMQ on loopback only.
  if (curve_key_file.empty() != curve_clients_file.empty()) {
    std::cerr << "search-node: --curve-key and --curve-clients go together\n";
    return 2;
  }
  if (!curve_key_file.empty()) {
    if (!curve::CurveAvailable()) {
      std::cerr << "search-node: --curve-key: this libzmq was built without CURVE (libsodium)\n";
      return 2;
    }
    auto keys = curve::ReadSecretKeyFile(curve_key_file);
    if (!keys.ok()) {
      std::cerr << "search-node: --curve-key: " << keys.status().message() << "\n";
      return 2;
    }
    auto clients = curve::ReadClientKeys(curve_clients_file);
    if (!clients.ok()) {
      std::cerr << "search-node: --curve-clients: " << clients.status().message() << "\n";
      return 2;
    }
    options.curve_secret_key = keys->secret_key;
    options.curve_clients = std::move(clients).value();
  } else if (!insecure && !curve::IsLoopbackEndpoint(options.listen)) {
    std::cerr << "search-node: --listen " << options.listen
              << " is beyond loopback and the node has no --curve-key: anyone who reaches the port could query "
                 "the shard. Give --curve-key and --curve-clients (docs/OPERATIONS.md \"CURVE keys\"), listen on "
                 "tcp://127.0.0.1, or pass --insecure\n";
    return 2;
  }
  NodeTuning tuning;
  for (const std::string& arg : tuning_args) {
    if (Status st = ApplyTuningArg(arg, &tuning); !st.ok()) {
      std::cerr << "search-node: " << st.message() << "\n";
      return 2;
    }
  }

  auto level = ParseLogLevel(log_level);
  if (!level.ok()) {
    std::cerr << "search-node: " << level.status().ToString() << "\n";
    return 2;
  }
  SetLogLevel(*level);
  const Logger log("node");
  if (options.curve_secret_key.empty()) {
    log.Warn() << "INSECURE: serving plain ZeroMQ without CURVE on " << options.listen
               << ": any peer that reaches it can query this shard"
               << (insecure ? " (--insecure)" : " (loopback only; --curve-key to secure it)");
  }
  // Signals are taken synchronously by sigwait below: block them before any thread starts, so
  // every thread inherits the mask.
  const sigset_t signals = BlockStopSignals();
  // --scheduler auto is hybrid when a GPU is usable: probed here (CUDA's own threads, started by
  // the probe, keep every CPU), because the split below must know the scheduler before the node's
  // other threads start.
  std::string planned_sched = sched_name;
  if (planned_sched == "auto") {
    planned_sched.clear();
#ifdef SEARCH_HAVE_GPU
    if (gpu_mode != "off" && gpu::GpuAvailable()) planned_sched = "hybrid";
#endif
  }
  // sched_cpu_cores: this thread moves to the CPUs left to the rest of the node before any
  // other thread starts (RocksDB's, the exposer's, the server's inherit its mask); the
  // scheduler's CPU workers pin themselves to the dedicated ones.
  const std::vector<int> allowed_cpus = AllowedCpus();
  const size_t cpu_cores =
      tuning.sched_cpu_cores >= 0 ? static_cast<size_t>(tuning.sched_cpu_cores)
      : planned_sched.empty()     ? 0
                                  : DefaultSchedCpuCores(*ParseSchedMode(planned_sched), allowed_cpus.size());
  CpuSplit cpu_split;
  if (cpu_cores > 0) {
    if (planned_sched.empty()) {
      log.Error() << "--tuning sched_cpu_cores needs a scheduler: with --scheduler auto and no usable GPU the node "
                     "runs the CPU engine directly (give --scheduler cpu, gpu, hybrid or griffin)";
      return 2;
    }
    if (cpu_cores >= allowed_cpus.size()) {
      log.Error() << "--tuning sched_cpu_cores=" << cpu_cores << ": this process may use " << allowed_cpus.size()
                  << " CPUs, and at least one must be left to the node's other threads";
      return 2;
    }
    cpu_split = SplitCpus(allowed_cpus, cpu_cores);
    if (!PinThisThread(cpu_split.rest)) {
      log.Error() << "--tuning sched_cpu_cores: cannot set this process's CPU affinity";
      return 1;
    }
  }
  options.threads = threads;
  options.drain_timeout = std::chrono::milliseconds(drain_ms);

  // --gpu on without a GPU: fail before anything is opened (after the signal mask: CUDA's
  // initialization may start threads, which must inherit it).
#ifdef SEARCH_HAVE_GPU
  if (gpu_mode == "on" && !gpu::GpuAvailable()) {
    log.Error() << "--gpu on: no usable GPU (" << gpu::GpuDescription() << ")";
    return 1;
  }
#else
  if (gpu_mode == "on") {
    log.Error() << "--gpu on: this search-node was built without GPU support (SEARCH_CUDA=OFF or no CUDA compiler)";
    return 1;
  }
#endif

  ShardReaderOptions reader_options;
  reader_options.list_cache_bytes = cache_mb << 20;
  if (cache_mb == 0) {  // sized from the shard's lists and the machine's available memory
    auto plan = PlanListCache({index_dir}, MemAvailableBytes());
    if (!plan.ok()) {
      log.Error() << "cannot open shard " << index_dir << ": " << plan.status().ToString();
      return 1;
    }
    log.Info() << plan->total.Describe("list cache");
    reader_options.list_cache_bytes = plan->per_shard.at(0);
  }
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
  std::unique_ptr<Executor> executor;
  BatchExecutor* batch_gpu = nullptr;
  if (gpu_mode != "off") {
#ifdef SEARCH_HAVE_GPU
    if (!gpu::GpuAvailable()) {
      log.Info() << "no usable GPU (" << gpu::GpuDescription() << "): serving on the CPU";
    } else {
      // GPU dispatchers sleep while their stream runs, leaving the core to the node's other
      // threads (before the first GPU work; CUDA's default would spin).
      if (const Status sync = gpu::SetGpuBlockingSync(); !sync.ok())
        log.Warn() << "GPU dispatchers spin (blocking sync not applied): " << sync.ToString();
      GpuExecutorOptions gpu_options;
      gpu_options.cache_bytes = gpu_cache_bytes;
      auto gpu_executor = GpuExecutorAdapter::Create(shard->get(), &metrics, gpu_options);
      if (gpu_executor.ok() && gpu_preload_mb != 0) {
        // -1: no bound of its own (Preload stops at 90% of the cache's capacity).
        auto pre = (*gpu_executor)->Preload(gpu_preload_mb < 0 ? UINT64_MAX : uint64_t(gpu_preload_mb) << 20);
        if (pre.ok()) {
          log.Info() << "GPU preload: " << pre->lists << " lists, " << (pre->bytes >> 20) << " MiB in " << pre->seconds
                     << " s" << (pre->cache_full ? " (the list cache is full)" : "");
        } else {
          log.Warn() << "GPU preload stopped (lists are copied on first use): " << pre.status().ToString();
        }
      }
      if (gpu_executor.ok()) {
        batch_gpu = gpu_executor->get();
        executor = std::move(gpu_executor).value();
      } else if (gpu_mode == "on") {
        log.Error() << "--gpu on: cannot start the GPU executor: " << gpu_executor.status().ToString();
        return 1;
      } else {
        log.Warn() << "cannot start the GPU executor, serving on the CPU: " << gpu_executor.status().ToString();
      }
    }
#else
    (void)gpu_cache_bytes;
    (void)gpu_preload_mb;
#endif
  }
  if (executor == nullptr) executor = std::make_unique<CpuExecutorAdapter>(shard->get());
  // The scheduler over the executors above (they stay alive below it).
  std::unique_ptr<SchedTrace> sched_trace;  // outlives the scheduler below
  std::unique_ptr<Executor> scheduled;
  if (sched_name == "auto") sched_name = batch_gpu != nullptr ? "hybrid" : "";
  if (sched_name.empty() && !cpu_split.dedicated.empty()) {
    // The GPU was there at the probe but its executor did not start: no scheduler runs, so the
    // CPU engine's server threads (started below) get every CPU back.
    log.Warn() << "no scheduler runs: the " << cpu_split.dedicated.size()
               << " CPUs set apart for its CPU workers go back to the node";
    if (!PinThisThread(allowed_cpus)) log.Warn() << "cannot restore this process's CPU affinity";
    cpu_split = CpuSplit{};
  }
  ScheduledExecutorOptions sched;
  if (!sched_name.empty()) {
    SchedOptions& policy = sched.sched.policy;
    policy.mode = *ParseSchedMode(sched_name);
    const bool cores_apart = !cpu_split.dedicated.empty();
    // Hybrid's cheap jobs: the CPU takes the queries it answers within one query's time alone on
    // the GPU (measured at calibration), with the bound adapting to the queues (sched_policy.hpp).
    policy.gpu_alone_us = -1;
    policy.cheap_step = 0.01;
    // With the CPU workers on cores of their own, the fill rule and the batch latency.
    if (cores_apart && policy.mode == SchedMode::kHybrid) {
      policy.cheap_fill_us = kDefaultCheapFillUs;
      policy.batch_latency = true;
    }
    sched.calibration_queries = tuning.calibration_queries;
    sched.sched.cpu_workers = cores_apart ? cpu_split.dedicated.size() : AvailableCores();
    sched.sched.cpu_worker_cpus = cpu_split.dedicated;
    sched.sched.cpu_nice = cores_apart ? 0  // nothing else runs on their cores
                                       : DefaultCpuNice(policy.mode);
    if (!tuning.trace.empty()) {
      auto t = SchedTrace::Open(tuning.trace, tuning.trace_every);
      if (!t.ok()) {
        log.Error() << "--tuning trace: " << t.status().ToString();
        return 1;
      }
      sched_trace = std::move(t).value();
      sched.sched.trace = sched_trace.get();
    }
    sched.sched.gpu_dispatchers = batch_gpu != nullptr ? DefaultGpuDispatchers(policy.mode, cores_apart) : 0;
    if (!cores_apart) {
      // Host-aware admission: the CPU engine starts queries only while the host has idle cores.
      // A node pinned to part of the host (taskset, a container's cpuset) counts only its CPUs.
      std::vector<int> cpus = AllowedCpus();
      if (cpus.size() >= std::thread::hardware_concurrency()) cpus.clear();  // all of them: the aggregate line
      auto host = std::make_shared<HostLoad>(std::chrono::milliseconds(20), "/proc/stat", std::move(cpus));
      sched.sched.idle_cores = [host] { return host->IdleCores(); };
      sched.sched.idle_reserve = DefaultIdleReserve(AvailableCores());
    }
    auto s = ScheduledExecutor::Create(shard->get(), batch_gpu, &metrics, sched);
    if (!s.ok()) {
      log.Error() << "--scheduler " << sched_name << ": " << s.status().ToString();
      return 1;
    }
    scheduled = std::move(s).value();
    // Server workers hand each request on and return (NodeServer::ExecuteAsync): --threads, by
    // default the CPUs this thread may use, is all there are.
    options.threads = threads != 0 ? threads : AvailableCores();
  }
  Executor* serving = scheduled != nullptr ? scheduled.get() : executor.get();
  NodeServer server(shard->get(), serving, &metrics, options);
  if (Status st = server.Start(); !st.ok()) {
    log.Error() << st.ToString();
    return 1;
  }
  nlohmann::json ready = {{"event", "ready"},
                          {"listen", server.endpoint()},
                          {"metrics", metrics_addr.empty() ? std::string()
                                                           : metrics_addr.substr(0, metrics_addr.rfind(':')) + ":" +
                                                                 std::to_string(metrics.exposer_port())},
                          {"shard", (*shard)->meta().shard_id},
                          {"executor", std::string(executor->name())},
                          {"scheduler", sched_name.empty() ? std::string("none") : sched_name},
                          {"gpu_dispatchers", sched.sched.gpu_dispatchers},
                          {"sched_cpu_nice", sched.sched.cpu_nice},
                          {"sched_cpu_cores", cpu_split.dedicated},
                          {"sched_cheap_fill_us", sched.sched.policy.cheap_fill_us},
                          {"sched_batch_latency", sched.sched.policy.batch_latency},
                          {"gpu", executor->has_gpu()},
                          {"curve", server.curve()}};
  std::cout << ready.dump() << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  log.Info() << "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", draining";
  server.Stop();
  metrics.StopExposer();
  log.Info() << "exit";
  return 0;
}
