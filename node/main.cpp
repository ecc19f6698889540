// search-node: one shard of the index behind a ZeroMQ ROUTER (node/node_server.hpp).
//   search-node --index DIR/shard-<i> --listen tcp://HOST:PORT --metrics HOST:PORT
//               [--threads N] [--cache-mb M] [--queue Q] [--log-level L] [--slow-query-ms MS]
//               [--gpu auto|on|off] [--gpu-cache-bytes B]
//               [--scheduler auto|cpu|gpu|hybrid|griffin] [--sched-cpu-workers N] [--batch-wait-us U]
//               [--batch-work-us W] [--max-batch B] [--batch-split F] [--crossover R] [--calibration-queries Q]
//               [--sched-gpu-alone-us US] (and the other --sched-* flags: --help)
// --gpu auto (default): the GPU executor when built with CUDA and a GPU is usable, else the CPU;
// on: the GPU executor or exit 1 with the reason; off: the CPU executor.
// Prints one JSON line to stdout once serving:
//   {"event":"ready","listen":...,"metrics":...,"shard":i,"executor":"gpu"|"cpu",
//    "scheduler":"none"|"cpu"|"gpu"|"hybrid"|"griffin","gpu":bool}.
// --scheduler auto (default): hybrid (node/scheduled_executor.hpp) when the GPU executor runs,
// else the CPU engine directly; cpu runs the scheduler's queues on the CPU only.
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
#include "core/thread_slice.hpp"
#include "index_store/list_cache.hpp"  // SetDenseBitsDensity
#include "index_store/shard_store.hpp"
#include "metrics/log.hpp"
#include "metrics/metrics.hpp"
#include "node/executor.hpp"
#include "node/host_load.hpp"
#include "node/node_server.hpp"
#include "node/scheduled_executor.hpp"
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
  app.add_option("--index", index_dir, "shard directory, DIR/shard-<i>")->required();
  app.add_option("--listen", options.listen, "ZeroMQ endpoint to bind (tcp://HOST:PORT, PORT * = any)")
      ->capture_default_str();
  app.add_option("--metrics", metrics_addr, "HOST:PORT serving Prometheus /metrics (empty: none)");
  app.add_option("--threads", threads, "worker threads (0 = the CPUs this process may use)")->capture_default_str();
  app.add_option("--cache-mb", cache_mb,
                 "main-memory posting-list cache in MiB (0 = every list of the shard where that fits in half of "
                 "MemAvailable, else that half; the log says which); set it to leave memory to other processes")
      ->capture_default_str();
  size_t cache_shards = 0;
  app.add_option("--cache-shards", cache_shards,
                 "posting-list cache shards, each an LRU with its own lock (0 = one per 256 MiB of --cache-mb, up "
                 "to 32; 1 = one LRU over the whole budget)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{1024}));
  bool huge_pages = false;
  app.add_flag("--huge-pages", huge_pages,
               "keep the BM25 norms and every cached posting list of 2 MiB or more on transparent huge pages "
               "(madvise: the kernel's THP mode must be madvise or always): fewer TLB misses for the CPU engine's "
               "random reads; the ready line says huge_pages");
  uint32_t dense_bitmaps = kDefaultDenseBitsDensity;
  app.add_option("--dense-bitmaps", dense_bitmaps,
                 "a posting list loaded into the list cache that holds at least one document in D of its docID range "
                 "also keeps an exact bitmap of them (at most D/8 bytes a posting, counted in --cache-mb), and the "
                 "CPU engine's and-queries test candidates against it instead of decoding the list's blocks "
                 "(0 = none); the ready line says dense_bitmaps")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1u << 20));
  app.add_option("--queue", options.queue_capacity,
                 "queued requests before load shedding (with --async-execute: requests in flight beyond this plus "
                 "--threads)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--drain-timeout-ms", drain_ms, "how long SIGTERM waits for in-flight requests")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  app.add_option("--log-level", log_level, "debug|info|warn|error|off")->capture_default_str();
  // On by default since its request threads were cut to the cores: on a two-GPU H200 host both
  // gpu and hybrid then held a higher rate at every p99 bound than with a blocked request thread
  // per query, with 20% less node CPU a GPU query (BENCHMARKS.md, issue 6).
  options.async_execute = true;
  app.add_option("--async-execute", options.async_execute,
                 "workers hand each request to the executor and go on; the thread that finishes the query (a "
                 "scheduler's CPU worker or GPU dispatcher) sends its reply, so no worker waits per query (false: a "
                 "worker per request in flight, each waiting for its query)")
      ->capture_default_str();
  int64_t io_spin_us = 0;
  app.add_option("--io-spin-us", io_spin_us,
                 "after the I/O thread has sent or received anything it polls without sleeping this long, so that "
                 "replies queued meanwhile need no wake-up (0 = off: it sleeps in poll at once)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  int64_t thread_slice_us = 0;
  app.add_option("--thread-slice-us", thread_slice_us,
                 "EEVDF slice in microseconds (Linux 6.12+, 100 to 100000) of the threads that wake, hand a request "
                 "on and sleep: node-io, the workers, the GPU dispatchers and the answer threads (not the CPU "
                 "workers); woken on a busy CPU such a thread runs within it instead of the kernel's default "
                 "slice (3 ms on 8 or more CPUs). With the CPU workers at the node's nice value (--scheduler cpu "
                 "or gpu) a worker may run a CPU-engine query itself, then with this slice. 0 = the kernel's "
                 "default")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  app.add_option("--slow-query-ms", options.slow_query_ms,
                 "log (WARN, up to 20 lines a second) each request that spends this long in the node, with where "
                 "its time went: queue, scheduler phases, run, reply (0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3.6e6));
  std::string gpu_mode = "auto";
  size_t gpu_cache_bytes = 0;
  app.add_option("--gpu", gpu_mode, "auto: the GPU when there is one; on: require a GPU; off: CPU only")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--gpu-cache-bytes", gpu_cache_bytes,
                 "device memory for cached posting lists (0 = half of the GPU's free memory)")
      ->capture_default_str();
  int64_t gpu_preload_mb = -1;
  app.add_option("--gpu-preload-mb", gpu_preload_mb,
                 "at start, copy the longest posting lists (1024 postings or more) into the GPU list cache, "
                 "longest first, up to this many MiB (-1 = as many as fit in 90% of the cache; 0 = none, lists are "
                 "copied on first use); 0 for a faster start")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30));
  std::string gpu_sync = "auto";
  app.add_option("--gpu-sync", gpu_sync,
                 "how GPU dispatchers wait for their stream: auto (CUDA's choice: spin while there are fewer "
                 "contexts than cores), spin, yield, or block (sleep; gives the core to CPU workers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "spin", "yield", "block"}));
  size_t gpu_dispatchers = 0;  // 0: DefaultGpuDispatchers(the scheduler's mode)
  int sched_cpu_nice = -1;     // -1: DefaultCpuNice(the scheduler's mode)
  std::string sched_name = "auto";
  ScheduledExecutorOptions sched;
  size_t sched_cpu_workers = 0;
  int64_t batch_wait_us = 200;
  double sched_idle_reserve = -1;  // -1: DefaultIdleReserve(the CPUs this process may use)
  bool sched_host_aware = true;
  app.add_option("--scheduler", sched_name,
                 "auto: hybrid when the GPU executor runs, else the CPU engine directly; cpu|gpu|hybrid|griffin: "
                 "the CPU/GPU scheduler in that mode (gpu, hybrid and griffin need a GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "gpu", "hybrid", "griffin"}));
  std::string sched_trace_path;
  uint64_t sched_trace_every = 16;
  app.add_option("--sched-trace", sched_trace_path,
                 "write the scheduler's decisions to this CSV file, one line per sampled finished job: features, "
                 "predicted CPU and GPU times, queue (cheap, moved by the balance rule), where it ran, wait, run and "
                 "the time the cost model learned (at most 2,000,000 lines; empty: none)");
  app.add_option("--sched-trace-every", sched_trace_every, "--sched-trace: one finished job in this many")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--sched-cpu-workers", sched_cpu_workers, "scheduler CPU workers (0 = the CPUs this process may use)")
      ->capture_default_str();
  app.add_option("--gpu-dispatchers", gpu_dispatchers,
                 "scheduler threads running GPU batches at once, each on its own stream (0 = by scheduler: 4 for "
                 "gpu, 8 for griffin; hybrid 4 when its CPU workers have cores of their own, else 8)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{64}));
  app.add_option("--sched-balance", sched.sched.policy.balance,
                 "hybrid: a job the cost ratio gives the CPU goes to the GPU while the GPU would finish it sooner")
      ->capture_default_str();
  int64_t sched_cpu_cores = -1;  // -1: DefaultSchedCpuCores(the scheduler's mode, the CPUs this process may use)
  app.add_option("--sched-cpu-cores", sched_cpu_cores,
                 "give the scheduler's CPU workers this many of the CPUs this process may use (the last ones) to "
                 "themselves, and keep every other thread of the node (network, GPU dispatch) on the rest: the CPU "
                 "engine and the GPU path stop sharing cores, so --sched-cpu-nice and --sched-host-aware no longer "
                 "apply, --sched-cpu-workers defaults to this count, and under hybrid --sched-cheap-fill-us "
                 "defaults to 200 and --sched-batch-latency to true. Needs a scheduler and at least one CPU left "
                 "(-1 = by scheduler: under hybrid 5/8 of the CPUs, 10 of 16, when there are at least 8, else 0; "
                 "0 = off: every thread may run on every CPU)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{4096}));
  size_t sched_spill_workers = 0;
  app.add_option("--sched-spill-workers", sched_spill_workers,
                 "with --sched-cpu-cores: this many more CPU workers on the node's other CPUs (the GPU path's), "
                 "at --sched-spill-nice above the node's nice value, so the CPU engine uses what the network and "
                 "GPU-dispatch threads leave idle there and yields those cores when they wake (0 = none)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{4096}));
  app.add_option("--sched-cpu-spin-us", sched.sched.cpu_spin_us,
                 "with --sched-cpu-cores: an idle CPU worker watches for new work this long before it sleeps, "
                 "so a query queued meanwhile starts with no wake-up (0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100000.0));
  app.add_option("--sched-answer-threads", sched.sched.answer_threads,
                 "threads that answer what the CPU workers finish (with --async-execute: external ids, the reply), "
                 "so a worker takes its next job at once; they run on the node's CPUs other than the workers' "
                 "(0 = the worker answers)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{0}, size_t{256}));
  int sched_spill_nice = 10;
  app.add_option("--sched-spill-nice", sched_spill_nice,
                 "how much higher the spill workers' nice value is than the node's (--sched-spill-workers)")
      ->capture_default_str()
      ->check(CLI::Range(0, 19));
  bool sched_spill_idle = false;
  app.add_option("--sched-spill-idle", sched_spill_idle,
                 "run the spill workers (--sched-spill-workers) under SCHED_IDLE instead of --sched-spill-nice: a "
                 "network or GPU-dispatch thread woken on their CPU preempts them at once, and the kernel places "
                 "woken threads on a CPU running only them as on an idle one")
      ->capture_default_str();
  app.add_option("--sched-host-aware", sched_host_aware,
                 "hybrid: CPU workers start CPU-engine queries only while the host has idle cores "
                 "(/proc/stat), so the CPU engine does not starve the GPU path of host cores")
      ->capture_default_str();
  app.add_option("--sched-idle-reserve", sched_idle_reserve,
                 "host cores the CPU engine leaves idle (--sched-host-aware); -1 = 3/8 of the CPUs this process may use, "
                 "at least 1 (6 on 16)")
      ->capture_default_str()
      ->check(CLI::Range(-1.0, 1024.0));
  // Cheap jobs with the adaptive bound: hybrid sustained 1.2x gpu's rate at every p99 bound on the
  // two-GPU host, where the ratio and stealing alone gave 1.0x (BENCHMARKS.md, issue 6).
  sched.sched.policy.gpu_alone_us = -1;
  sched.sched.policy.cheap_step = 0.01;
  app.add_option("--sched-gpu-alone-us", sched.sched.policy.gpu_alone_us,
                 "hybrid: one query alone on the GPU, in microseconds; a query predicted to take at most this on the "
                 "CPU (or the adaptive bound, --sched-cheap-step) runs on the CPU (also past --sched-idle-reserve's "
                 "admission), and 1 in 16 of those predicted up to 8x this explore it. -1 = measured at calibration, "
                 "0 = off")
      ->capture_default_str()
      ->check(CLI::Range(-1.0, 1e7));
  app.add_option("--sched-cheap-step", sched.sched.policy.cheap_step,
                 "hybrid with --sched-gpu-alone-us: the cheap bound rises by this fraction at each enqueue while the "
                 "GPU's queue is further behind than the CPU's and falls by it otherwise, between one query alone on "
                 "the GPU and --sched-cheap-max-factor times that (0 = the bound stays at one query alone)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--sched-cheap-max-factor", sched.sched.policy.cheap_max_factor,
                 "hybrid with --sched-cheap-step: the adaptive cheap bound's cap, in multiples of one query alone on the GPU")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  CLI::Option* cheap_fill_opt = app.add_option("--sched-cheap-fill-us", sched.sched.policy.cheap_fill_us,
                 "hybrid with --sched-cheap-step: the cheap bound rises while the CPU's backlog (queued predicted work "
                 "over its workers) is at most this many microseconds and falls otherwise, so the CPU takes the "
                 "cheapest queries until it is full (0 = it follows the GPU's backlog against the CPU's); use with "
                 "--sched-batch-latency true; both are the default under hybrid with --sched-cpu-cores: 200)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--sched-cheap-fill-busy", sched.sched.policy.cheap_fill_busy,
                 "hybrid with the fill rule (--sched-cheap-fill-us): the cheap bound also rises while the CPU "
                 "workers' busy share (a time-weighted average over about 2 ms) is under this fraction, however long "
                 "their queue (0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--sched-cheap-fill-measured", sched.sched.policy.cheap_fill_measured,
                 "hybrid with the fill rule (--sched-cheap-fill-us): the CPU backlog it compares is the queued "
                 "predicted work times the CPU cost model's recent bias (actual over predicted time of the jobs it "
                 "learned from), so the rule keeps that much measured work queued a worker however the model was "
                 "calibrated (false: the predicted work)")
      ->capture_default_str();
  app.add_option("--sched-cheap-by-ratio", sched.sched.policy.cheap_by_ratio,
                 "hybrid: the cheap bound lets onto the CPU the queries it answers cheapest relative to the GPU "
                 "(predicted CPU time scaled by how much less than a typical query the query costs the GPU), not "
                 "the cheapest on the CPU alone; stealing picks likewise (false: the cheapest on the CPU)")
      ->capture_default_str();
  CLI::Option* batch_latency_opt = app.add_option("--sched-batch-latency", sched.sched.policy.batch_latency,
                 "hybrid: a job's finish on the GPU counts a GPU batch's run time (an average of the last batches), "
                 "so the balance rule and stealing keep on the CPU the queries it answers before a batch would "
                 "(default: true under hybrid with --sched-cpu-cores, else false)")
      ->capture_default_str();
  app.add_option("--sched-steal-window", sched.sched.policy.steal_window,
                 "an idle processor steals the job cheapest for it among the other queue's oldest this many")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{4096}));
  app.add_option("--sched-caller-runs", sched.sched.caller_runs,
                 "a request's own thread runs its CPU-engine job where an idle scheduler CPU worker would take it "
                 "at once, saving the hand-off to the worker and back (off with --sched-cpu-nice > 0, the default "
                 "under hybrid and griffin)")
      ->capture_default_str();
  app.add_option("--sched-cpu-nice", sched_cpu_nice,
                 "how much higher the scheduler's CPU workers' nice value is than the node's: CPU-engine queries "
                 "yield the cores to the node's network and GPU-dispatch threads when those wake (-1 = by "
                 "scheduler: 10 for hybrid and griffin, 0 for cpu and gpu)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 19));
  app.add_option("--batch-wait-us", batch_wait_us, "longest a GPU batch waits to fill")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  app.add_option("--batch-work-us", sched.sched.policy.batch_work_us, "predicted GPU work that closes a batch")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--max-batch", sched.sched.policy.max_batch, "most queries in one GPU batch")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{4096}));
  app.add_option("--batch-split", sched.sched.batch_split,
                 "a GPU batch's queries predicted to take more than this many times its median's GPU time run as "
                 "a second batch after the rest, so a few heavy queries do not hold the others for their whole run "
                 "(0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--crossover", sched.crossover,
                 "list length ratio at which an and-query leaves the GPU (0 = calibrated at start)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--calibration-queries", sched.calibration_queries, "queries of the start-up cost calibration")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto level = ParseLogLevel(log_level);
  if (!level.ok()) {
    std::cerr << "search-node: " << level.status().ToString() << "\n";
    return 2;
  }
  SetLogLevel(*level);
  const Logger log("node");
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
  // --sched-cpu-cores: this thread moves to the CPUs left to the rest of the node before any
  // other thread starts (RocksDB's, the exposer's, the server's inherit its mask); the
  // scheduler's CPU workers pin themselves to the dedicated ones.
  const std::vector<int> allowed_cpus = AllowedCpus();
  const size_t cpu_cores =
      sched_cpu_cores >= 0 ? static_cast<size_t>(sched_cpu_cores)
      : planned_sched.empty() ? 0
                              : DefaultSchedCpuCores(*ParseSchedMode(planned_sched), allowed_cpus.size());
  CpuSplit cpu_split;
  if (sched.sched.cpu_spin_us > 0 && cpu_cores == 0) {
    log.Error() << "--sched-cpu-spin-us needs the CPU workers to have cores of their own (--sched-cpu-cores, the "
                   "default under hybrid on 8 or more CPUs): a spinning worker holds its core";
    return 2;
  }
  if (sched_spill_workers > 0 && cpu_cores == 0) {
    log.Error() << "--sched-spill-workers needs the CPU workers to have cores of their own (--sched-cpu-cores, the "
                   "default under hybrid on 8 or more CPUs); the spill workers go on the node's other CPUs";
    return 2;
  }
  if (cpu_cores > 0) {
    if (planned_sched.empty()) {
      log.Error() << "--sched-cpu-cores needs a scheduler: with --scheduler auto and no usable GPU the node runs "
                     "the CPU engine directly (give --scheduler cpu, gpu, hybrid or griffin)";
      return 2;
    }
    if (cpu_cores >= allowed_cpus.size()) {
      log.Error() << "--sched-cpu-cores " << cpu_cores << ": this process may use " << allowed_cpus.size()
                  << " CPUs, and at least one must be left to the node's other threads";
      return 2;
    }
    cpu_split = SplitCpus(allowed_cpus, cpu_cores);
    if (!PinThisThread(cpu_split.rest)) {
      log.Error() << "--sched-cpu-cores: cannot set this process's CPU affinity";
      return 1;
    }
  }
  options.threads = threads;
  options.drain_timeout = std::chrono::milliseconds(drain_ms);
  options.io_spin = std::chrono::microseconds(io_spin_us);
  if (!ValidThreadSliceUs(thread_slice_us)) {
    log.Error() << "--thread-slice-us must be 0 (the kernel's default) or 100 to 100000";
    return 2;
  }
  options.thread_slice = std::chrono::microseconds(thread_slice_us);
  // The slice those threads get: asked and taken (a kernel before 6.12 takes none), else 0. Not
  // asked on this thread: the CPU workers it starts would inherit it.
  const int64_t thread_slice_taken =
      thread_slice_us > 0 && KernelTakesThreadSlice(std::chrono::microseconds(thread_slice_us)) ? thread_slice_us : 0;

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

  SetHugePages(huge_pages);  // before the shard's norms and lists are allocated
  SetDenseBitsDensity(dense_bitmaps);  // before any list is loaded (the GPU preload's included)
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
  reader_options.list_cache_shards = cache_shards;
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
      const Status sync = gpu::SetGpuSync(gpu_sync);  // before the first GPU work
      if (!sync.ok()) {
        log.Warn() << "--gpu-sync " << gpu_sync << " not applied: " << sync.ToString();
      } else if (gpu_sync != "auto") {
        log.Info() << "GPU dispatchers wait by " << gpu_sync;
      }
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
    log.Warn() << "no scheduler runs: the " << cpu_split.dedicated.size() << " CPUs set apart for its CPU workers go back to the node";
    if (!PinThisThread(allowed_cpus)) log.Warn() << "cannot restore this process's CPU affinity";
    cpu_split = CpuSplit{};
  }
  if (!sched_name.empty()) {
    sched.sched.policy.mode = *ParseSchedMode(sched_name);
    sched.sched.policy.batch_wait = std::chrono::microseconds(batch_wait_us);
    // The fill rule pays once the CPU workers have cores of their own (hybrid_scheduler.hpp).
    if (!cpu_split.dedicated.empty() && sched.sched.policy.mode == SchedMode::kHybrid) {
      if (cheap_fill_opt->count() == 0) sched.sched.policy.cheap_fill_us = kDefaultCheapFillUs;
      if (batch_latency_opt->count() == 0) sched.sched.policy.batch_latency = true;
    }
    // Options that only adjust the fill rule: refused without it.
    const SchedOptions& policy = sched.sched.policy;
    const bool fill_rule = policy.mode == SchedMode::kHybrid && policy.cheap_fill_us > 0 && policy.cheap_step > 0;
    for (const auto& [asked, flag] : {std::pair<bool, const char*>{policy.cheap_fill_measured, "--sched-cheap-fill-measured"},
                                      std::pair<bool, const char*>{policy.cheap_fill_busy > 0, "--sched-cheap-fill-busy"}})
      if (asked && !fill_rule) {
        log.Error() << flag << " needs the fill rule: --scheduler hybrid with --sched-cheap-step and "
                    << "--sched-cheap-fill-us above 0 (the default when the CPU workers have cores of their own)";
        return 2;
      }
    if (policy.cheap_by_ratio && policy.mode != SchedMode::kHybrid) {
      log.Error() << "--sched-cheap-by-ratio needs --scheduler hybrid (only hybrid has cheap jobs)";
      return 2;
    }
    sched.sched.cpu_workers = sched_cpu_workers != 0        ? sched_cpu_workers
                              : !cpu_split.dedicated.empty() ? cpu_split.dedicated.size()
                                                             : AvailableCores();
    sched.sched.cpu_worker_cpus = cpu_split.dedicated;
    if (sched_spill_workers > 0 && !cpu_split.dedicated.empty()) {  // checked above: they have cores of their own
      sched.sched.cpu_workers += sched_spill_workers;
      sched.sched.spill_workers = sched_spill_workers;
      sched.sched.spill_cpus = cpu_split.rest;
      sched.sched.spill_nice = sched_spill_nice;
      sched.sched.spill_idle = sched_spill_idle;
    }
    if (gpu_dispatchers == 0)
      gpu_dispatchers = DefaultGpuDispatchers(sched.sched.policy.mode, !cpu_split.dedicated.empty());
    sched.sched.thread_slice = options.thread_slice;  // the node server's hand-off threads' slice
    sched.sched.cpu_nice = sched_cpu_nice >= 0            ? sched_cpu_nice
                           : !cpu_split.dedicated.empty() ? 0  // nothing else runs on their cores
                                                          : DefaultCpuNice(sched.sched.policy.mode);
    if (!sched_trace_path.empty()) {
      auto t = SchedTrace::Open(sched_trace_path, sched_trace_every);
      if (!t.ok()) {
        log.Error() << "--sched-trace: " << t.status().ToString();
        return 1;
      }
      sched_trace = std::move(t).value();
      sched.sched.trace = sched_trace.get();
    }
    sched.sched.gpu_dispatchers = batch_gpu != nullptr ? gpu_dispatchers : 0;
    if (sched_host_aware && cpu_split.dedicated.empty()) {
      // A node pinned to part of the host (taskset, a container's cpuset) counts only its CPUs' idle time.
      std::vector<int> cpus = AllowedCpus();
      if (cpus.size() >= std::thread::hardware_concurrency()) cpus.clear();  // all of them: the aggregate line
      auto host = std::make_shared<HostLoad>(std::chrono::milliseconds(20), "/proc/stat", std::move(cpus));
      sched.sched.idle_cores = [host] { return host->IdleCores(); };
      sched.sched.idle_reserve = sched_idle_reserve >= 0
                                     ? sched_idle_reserve
                                     : DefaultIdleReserve(AvailableCores());
    }
    auto s = ScheduledExecutor::Create(shard->get(), batch_gpu, &metrics, sched);
    if (!s.ok()) {
      log.Error() << "--scheduler " << sched_name << ": " << s.status().ToString();
      return 1;
    }
    scheduled = std::move(s).value();
    // Server workers only wait on the scheduler: enough of them to fill its CPU workers and a
    // batch per GPU dispatcher. With --async-execute only an andor split's two runs wait (on the
    // worker); the others return at once, so --threads (default: the cores) is all there are:
    // a pool of hundreds mostly asleep cost a wake-up and a thread switch for nearly every
    // request, each a few microseconds of host CPU that the GPU path and the CPU engine share.
    const size_t base = threads != 0 ? threads : AvailableCores();
    options.threads = options.async_execute ? base : base + sched.sched.policy.max_batch * sched.sched.gpu_dispatchers;
  }
  Executor* serving = scheduled != nullptr ? scheduled.get() : executor.get();
  NodeServer server(shard->get(), serving, &metrics, options);
  if (Status st = server.start(); !st.ok()) {
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
                          {"sched_spill_workers", sched.sched.spill_workers},
                          {"sched_spill_idle", sched.sched.spill_idle},
                          {"batch_split", sched.sched.batch_split},
                          {"sched_cpu_spin_us", sched.sched.cpu_spin_us},
                          {"sched_answer_threads", sched.sched.answer_threads},
                          {"sched_cheap_fill_us", sched.sched.policy.cheap_fill_us},
                          {"sched_cheap_fill_busy", sched.sched.policy.cheap_fill_busy},
                          {"sched_cheap_fill_measured", sched.sched.policy.cheap_fill_measured},
                          {"sched_cheap_by_ratio", sched.sched.policy.cheap_by_ratio},
                          {"sched_batch_latency", sched.sched.policy.batch_latency},
                          {"io_spin_us", io_spin_us},
                          {"thread_slice_us", thread_slice_taken},
                          {"huge_pages", huge_pages},
                          {"dense_bitmaps", dense_bitmaps},
                          {"gpu", executor->has_gpu()}};
  std::cout << ready.dump() << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  log.Info() << "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", draining";
  server.stop();
  metrics.StopExposer();
  log.Info() << "exit";
  return 0;
}
