// searchctl bench: closed-loop throughput and latency of LocalIndex::Search (--engine cpu) or of
// the GPU engine (--engine gpu: GpuSearcher, --batch queries per launch sequence). T threads each
// loop over the query list (thread t starts at query t * Q / T) for --seconds after a --warmup, and
// one JSON line summarises: QPS, exact latency percentiles from the sorted sample (a query's
// latency is its batch's), and per-query work. A run that is not --cold first answers every query
// of the file once, untimed, so that the measured window sees the lists cached (in main memory, and
// on the GPU as far as its cache holds them) rather than read from RocksDB or copied over PCIe.
// The defaults are the measured best: every CPU, batches of 64 on the GPU, caches sized from the
// index and the machine (core/cache_sizing.hpp; one line on stderr says how).
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <latch>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "args.hpp"
#include "common.hpp"
#include "core/cache_sizing.hpp"
#include "core/cpus.hpp"
#include "core/parallel_for.hpp"
#include "core/query_parser.hpp"
#include "core/query_tree.hpp"
#include "core/thread_cpu.hpp"
#include "cpu_exec/local_index.hpp"
#include "index_store/manifest.hpp"
#include "index_store/shard_store.hpp"
#ifdef SEARCH_HAVE_GPU
#include "gpu_exec/cuda_util.hpp"
#include "gpu_searcher.hpp"
#endif

namespace search::cli {

namespace {

using Clock = std::chrono::steady_clock;

// searchctl bench's experimental settings (--tuning KEY=VALUE), all in this one table: thresholds
// of the GPU engine's or-path choice (gpu::GpuContextOptions) that measurements have not settled.
// Unset: the engine's default.
struct BenchTuning {
  std::optional<uint64_t> gpu_or_theta_min_postings;
  std::optional<uint64_t> gpu_or_pruned_divisor;
  std::optional<uint64_t> gpu_and_bound_min_lead;
};

struct BenchTuningKey {
  std::string_view key;
  uint64_t max;
  std::optional<uint64_t> BenchTuning::*field;
  std::string_view help;
};

constexpr BenchTuningKey kBenchTuningKeys[] = {
    {"gpu-or-theta-min-postings", uint64_t{1} << 40, &BenchTuning::gpu_or_theta_min_postings,
     "gpu: or-queries of at least this many postings take the theta round first (default 16384)"},
    {"gpu-or-pruned-divisor", uint64_t{1} << 31, &BenchTuning::gpu_or_pruned_divisor,
     "gpu: or-queries without theta take the pruned path when their essential lists hold at most docs / this "
     "postings; 0: every or-query dense (default 8)"},
    {"gpu-and-bound-min-lead", uint64_t{1} << 40, &BenchTuning::gpu_and_bound_min_lead,
     "gpu: and-queries whose shortest list holds at least this many postings are bounded by theta from a sample "
     "(default 16384)"},
};

std::string BenchTuningHelp() {
  std::string out;
  for (const BenchTuningKey& k : kBenchTuningKeys)
    out += "\n  " + std::string(k.key) + " (0.." + std::to_string(k.max) + "): " + std::string(k.help);
  return out;
}

// Applies one "KEY=VALUE"; InvalidArgument naming the key or the text for anything else.
Status ApplyBenchTuning(std::string_view key_value, BenchTuning* tuning) {
  const size_t eq = key_value.find('=');
  if (eq == std::string_view::npos)
    return Status::InvalidArgument("--tuning takes KEY=VALUE, not '" + std::string(key_value) + "'");
  const std::string_view key = key_value.substr(0, eq), value = key_value.substr(eq + 1);
  for (const BenchTuningKey& k : kBenchTuningKeys) {
    if (k.key != key) continue;
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v > k.max)
      return Status::InvalidArgument("--tuning " + std::string(key) + " must be an integer in [0, " +
                                     std::to_string(k.max) + "], not '" + std::string(value) + "'");
    tuning->*k.field = v;
    return Status::Ok();
  }
  std::string known;
  for (const BenchTuningKey& k : kBenchTuningKeys) known += (known.empty() ? "" : ", ") + std::string(k.key);
  return Status::InvalidArgument("unknown --tuning key '" + std::string(key) + "' (searchctl bench knows " + known + ")");
}

struct ThreadTally {
  std::vector<double> latencies_us;
  uint64_t queries = 0, postings = 0, blocks = 0, bytes = 0, hits = 0, scored = 0, total = 0;
  Status error;
};

}  // namespace

CLI::App* AddBenchCommand(CLI::App& app, BenchArgs* a) {
  CLI::App* cmd = app.add_subcommand("bench", "Measure query throughput and latency on the CPU or the GPU");
  cmd->footer(
      "Prints one JSON line: command, mode, k, threads, queries (completed), qps, mean/p50/p95/p99/p999 latency\n"
      "in microseconds (parsing and analysis + search, without resolving external ids), and per-query means of\n"
      "postings and blocks decoded, compressed bytes touched, hits and (topcount, count) matches. Every query of the file is answered\n"
      "once, untimed, first, on every available core whatever --threads (unless --cold). --engine gpu adds\n"
      "the GPU cache counters and the engine's "
      "time per call: gpu_enqueue_us_per_call (host planning and launching), gpu_wait_us_per_call.\n"
      "--per-query FILE: each query of the file timed alone on one thread after the run, one CSV row each:\n"
      "query (its number, from 1), terms, shortest, second, total (its lists' postings), us (CPU: the fastest\n"
      "of two runs; GPU: a batch of --batch copies of it, per copy), postings_decoded, hits, us_first (the\n"
      "first run alone: its lists not yet in the core's caches unless the query before used them; GPU: us).");
  cmd->add_option("--index", a->index, "index directory")->required();
  cmd->add_option("--queries", a->queries,
                  "file of queries, one per line, in the query language (+a -b \"a phrase\" (groups); a bag of words "
                  "is the flat query of --mode)")
      ->required();
  cmd->add_option("--command", a->command,
                  "top: the k best; topcount: the k best and the exact number of matches; count: the number of "
                  "matches only")
      ->capture_default_str();
  cmd->add_option("--mode", a->mode, "and | or | andor: the query semantics to measure")->capture_default_str();
  cmd->add_option("--k", a->k, "hits per query (1..10000)")->capture_default_str();
  cmd->add_option("--threads", a->threads,
                  "client threads (0 = the CPUs this process may use); lower it to measure latency at light load")
      ->capture_default_str();
  cmd->add_option("--seconds", a->seconds, "measured duration; raise it when runs disagree")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "seconds run before measuring, not counted; raise it when runs disagree")
      ->capture_default_str();
  cmd->add_option("--engine", a->engine,
                  "cpu | gpu: the engine to measure (gpu: terms, phrases, groups and counts)")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch,
                  "gpu: queries per launch sequence; lower it to trade throughput for latency")
      ->capture_default_str();
  cmd->add_option("--gpu-cache-mib", a->gpu_cache_mib,
                  "gpu: GPU list cache per shard in MiB (0 = half of the GPU's free memory, shared by the shards); "
                  "set it to leave GPU memory to others")
      ->capture_default_str();
  cmd->add_flag("--cold", a->cold,
                "measure cold caches: no untimed pass over the queries first; gpu: also empty the GPU list cache "
                "before every batch (every list copied over PCIe)");
  cmd->add_option("--tuning", a->tuning,
                  "KEY=VALUE, repeatable: an experimental setting; most runs set none (the defaults are the "
                  "engine's measured behaviour). Keys:" + BenchTuningHelp())
      ->allow_extra_args(false);
  cmd->add_option("--verify", a->verify,
                  "gpu: after the run, check the first N queries' hits and totals against the CPU engine "
                  "(verify_mismatches); "
                  "set it after changing the GPU engine")
      ->capture_default_str();
  cmd->add_option("--per-query", a->per_query,
                  "after the run, time every query alone into this CSV (columns below); set it to study which "
                  "queries cost what");
  cmd->add_option("--list-cache-mib", a->list_cache_mib,
                  "main-memory list cache per shard in MiB (0 = every list where that fits in half of MemAvailable, "
                  "else that half; stderr says which); set it to measure a smaller cache")
      ->capture_default_str();
  return cmd;
}

int RunBench(const BenchArgs& a) {
  auto mode = CheckModeAndK(a.mode, a.k);
  if (!mode.ok()) return ReportError("bench", mode.status(), kExitUsage);
  if (a.threads > 4096)
    return ReportError("bench", Status::InvalidArgument("--threads must be between 0 and 4096"), kExitUsage);
  const uint32_t threads = a.threads > 0 ? a.threads : AvailableCores();
  // The untimed first pass loads the caches on every available core, whatever --threads measures:
  // at --threads 1 the GPU prewarm of a 25.2M-document shard took 20 s of a 30 s run.
  const uint32_t warm_threads = std::max(threads, AvailableCores());
  if (!(a.seconds > 0 && a.seconds <= 86400) || !(a.warmup >= 0 && a.warmup <= 86400))
    return ReportError("bench", Status::InvalidArgument("--seconds must be in (0, 86400], --warmup in [0, 86400]"),
                       kExitUsage);
  BenchTuning tuning;
  for (const std::string& kv : a.tuning) {
    if (Status st = ApplyBenchTuning(kv, &tuning); !st.ok()) return ReportError("bench", st, kExitUsage);
  }
  auto queries = ReadQueryFile(a.queries);
  if (!queries.ok()) return ReportError("bench", queries.status(), kExitFailure);
  if (queries->empty()) return ReportError("bench", Status::InvalidArgument("the query file is empty"), kExitFailure);
  if (a.engine != "cpu" && a.engine != "gpu")
    return ReportError("bench", Status::InvalidArgument("--engine must be cpu or gpu"), kExitUsage);
  if (a.batch == 0 || a.batch > 4096)
    return ReportError("bench", Status::InvalidArgument("--batch must be between 1 and 4096"), kExitUsage);
  const bool gpu = a.engine == "gpu";
  if (a.command != "top" && a.command != "topcount" && a.command != "count")
    return ReportError("bench", Status::InvalidArgument("--command must be top, topcount or count"), kExitUsage);
  const bool count = a.command != "top";
  const uint32_t query_k = a.command == "count" ? 0 : static_cast<uint32_t>(a.k);
  // Opened before the run, so a bad path costs no run.
  std::ofstream per_query;
  if (!a.per_query.empty()) {
    per_query.open(a.per_query, std::ios::trunc);
    if (!per_query)
      return ReportError("bench", Status::IOError("cannot open the --per-query file " + a.per_query), kExitFailure);
  }
  ShardReaderOptions reader_options;
  if (a.list_cache_mib > 0) {
    reader_options.list_cache_bytes = static_cast<size_t>(a.list_cache_mib) << 20;
  } else {  // sized from the index's lists and the machine's available memory
    auto manifest = Manifest::Read(a.index);
    if (!manifest.ok())
      return ReportError("bench", manifest.status().WithContext("cannot open index " + a.index), kExitFailure);
    std::vector<std::string> shard_dirs;
    for (const ShardEntry& e : manifest->shards) shard_dirs.push_back(a.index + "/" + e.path);
    auto plan = PlanListCache(shard_dirs, MemAvailableBytes());
    if (!plan.ok()) return ReportError("bench", plan.status().WithContext("cannot open index " + a.index), kExitFailure);
    std::cerr << "searchctl bench: " << plan->total.Describe("list cache") << std::endl;
    // LocalIndex gives every shard one size: the largest part (equal shards get equal parts).
    reader_options.list_cache_bytes =
        plan->per_shard.empty() ? 0 : *std::max_element(plan->per_shard.begin(), plan->per_shard.end());
  }
  auto index = LocalIndex::Open(a.index, reader_options);
  if (!index.ok())
    return ReportError("bench", index.status().WithContext("cannot open index " + a.index), kExitFailure);
  const LocalIndex& idx = **index;
  const std::vector<std::string>& qs = *queries;
  const uint32_t batch = gpu ? a.batch : 1;
  // A query as the engines take it: parsed (and analyzed) on every run, as a server does per request.
  auto parse_query = [&](size_t i) -> Result<Query> {
    SEARCH_ASSIGN_OR_RETURN(QueryNode tree, ParseQuerySyntax(qs[i % qs.size()], idx.analyzer()));
    return MakeQuery(std::move(tree), *mode, query_k, count);
  };
  for (size_t i = 0; i < qs.size(); ++i) {  // every query checked before the run
    auto q = parse_query(i);
    if (!q.ok()) return ReportError("bench", q.status().WithContext("query " + std::to_string(i + 1)), kExitUsage);
  }
#ifdef SEARCH_HAVE_GPU
  std::unique_ptr<GpuSearcher> searcher;
  if (gpu) {
    if (!gpu::GpuAvailable())
      return ReportError("bench", Status::Unavailable("--engine gpu: " + gpu::GpuDescription()), kExitFailure);
    size_t gpu_cache_bytes = static_cast<size_t>(a.gpu_cache_mib) << 20;
    if (gpu_cache_bytes == 0) {  // a share of the GPU's free memory
      auto mem = gpu::GetDeviceMemoryInfo();
      if (!mem.ok()) return ReportError("bench", mem.status().WithContext("--engine gpu"), kExitFailure);
      const CacheSizing sizing = SizeGpuListCache(mem->free_bytes, idx.num_shards());
      std::cerr << "searchctl bench: " << sizing.Describe("GPU list cache per shard") << std::endl;
      gpu_cache_bytes = sizing.bytes;
    }
    auto s = GpuSearcher::Create(idx, gpu_cache_bytes);
    if (!s.ok()) return ReportError("bench", s.status(), kExitFailure);
    searcher = std::move(s).value();
  }
  auto make_query = [&](size_t i) { return *parse_query(i); };
  gpu::GpuContextOptions ctx_options;
  if (tuning.gpu_or_theta_min_postings) ctx_options.or_theta_min_postings = *tuning.gpu_or_theta_min_postings;
  if (tuning.gpu_or_pruned_divisor) ctx_options.or_pruned_divisor = static_cast<uint32_t>(*tuning.gpu_or_pruned_divisor);
  if (tuning.gpu_and_bound_min_lead) ctx_options.and_bound_min_lead = *tuning.gpu_and_bound_min_lead;
  double prewarm_s = 0;
  if (gpu && !a.cold) {
    // Every query once, in batches of 64 spread over warm_threads (each with its own context):
    // reading and decompressing the lists is host work that one thread would serialize.
    const auto t0 = Clock::now();
    constexpr size_t kPrewarmBatch = 64;
    std::atomic<size_t> next{0};
    std::mutex failure_mu;
    Status failure;
    std::vector<std::thread> warm;
    for (uint32_t t = 0; t < warm_threads; ++t)
      warm.emplace_back([&] {
        auto ctx = gpu::GpuContext::Create(ctx_options);
        Status st = ctx.status();
        std::vector<Result<SearchResult>> ignored;
        for (size_t i; st.ok() && (i = next.fetch_add(kPrewarmBatch)) < qs.size();) {
          std::vector<Query> queries;
          for (size_t j = i; j < std::min(qs.size(), i + kPrewarmBatch); ++j) queries.push_back(make_query(j));
          st = searcher->SearchBatch(**ctx, queries, &ignored);
        }
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(failure_mu);
          if (failure.ok()) failure = st;
          next.store(qs.size());  // the others stop too
        }
      });
    for (auto& th : warm) th.join();
    if (!failure.ok()) return ReportError("bench", failure.WithContext("GPU prewarm"), kExitFailure);
    prewarm_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
#else
  if (gpu)
    return ReportError("bench", Status::Unavailable("--engine gpu: this searchctl was built without CUDA"),
                       kExitFailure);
#endif
  double cpu_prewarm_s = 0;
  if (!gpu && !a.cold) {
    const auto t0 = Clock::now();
    ParallelFor(qs.size(), warm_threads, [&](size_t i) { (void)idx.Search(*parse_query(i)); });
    cpu_prewarm_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // Runs the batch of queries starting at i (wrapping around the list).
  using Batch = std::vector<Result<SearchResult>>;
  struct Worker {
#ifdef SEARCH_HAVE_GPU
    std::unique_ptr<gpu::GpuContext> ctx;
#endif
  };
  auto run_batch = [&](Worker& w, size_t i, Batch* out) -> Status {
    out->clear();
    if (!gpu) {
      Result<Query> q = parse_query(i);
      out->push_back(q.ok() ? idx.Search(*q) : Result<SearchResult>(q.status()));
      return Status::Ok();
    }
#ifdef SEARCH_HAVE_GPU
    if (!w.ctx) {
      SEARCH_ASSIGN_OR_RETURN(w.ctx, gpu::GpuContext::Create(ctx_options));
    }
    std::vector<Query> queries;
    for (uint32_t j = 0; j < batch; ++j) queries.push_back(make_query(i + j));
    if (a.cold) searcher->DropResident();
    return searcher->SearchBatch(*w.ctx, queries, out);
#else
    (void)w;
    return Status::Unavailable("no GPU engine");
#endif
  };

  std::vector<ThreadTally> tallies(threads);
  std::latch ready(threads + 1);
  std::atomic<bool> failed{false};
  Clock::time_point measure_start, measure_end;
  auto worker = [&](uint32_t t) {
    ThreadTally& tally = tallies[t];
    size_t i = qs.size() * t / threads;
    ready.arrive_and_wait();
    const auto warm_end =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.warmup));
    const auto end = warm_end + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
    Worker w;
    Batch results;
    for (auto now = Clock::now(); now < end && !failed.load(std::memory_order_relaxed);) {
      Status st = run_batch(w, i, &results);
      const auto after = Clock::now();
      for (size_t j = 0; st.ok() && j < results.size(); ++j) {
        if (!results[j].ok()) st = results[j].status().WithContext("query '" + qs[(i + j) % qs.size()] + "'");
      }
      if (!st.ok()) {
        tally.error = st;
        failed.store(true);
        break;
      }
      if (now >= warm_end) {
        const double us = std::chrono::duration<double, std::micro>(after - now).count();
        for (const auto& r : results) {
          tally.latencies_us.push_back(us);
          ++tally.queries;
          tally.postings += r->stats.postings_decoded;
          tally.scored += r->stats.postings_scored;
          tally.blocks += r->stats.blocks_decoded;
          tally.bytes += r->stats.bytes_touched;
          tally.hits += r->hits.size();
          tally.total += r->total;
        }
      }
      now = after;
      i = (i + batch) % qs.size();
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  ready.arrive_and_wait();
  const auto start = Clock::now();
  measure_start = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.warmup));
  // The process's CPU time (and the GPU engine's time split) over the measured window only.
  double cpu0 = 0;
#ifdef SEARCH_HAVE_GPU
  gpu::GpuEngineTimes times0, times1;
#endif
  std::thread timer([&, when = measure_start] {
    std::this_thread::sleep_until(when);
    cpu0 = ProcessCpuMicros();
#ifdef SEARCH_HAVE_GPU
    if (gpu) times0 = gpu::EngineTimes();
#endif
  });
  for (auto& th : pool) th.join();
  measure_end = Clock::now();
  timer.join();
  const double cpu_us = ProcessCpuMicros() - cpu0;
#ifdef SEARCH_HAVE_GPU
  if (gpu) times1 = gpu::EngineTimes();
#endif
  for (const auto& t : tallies) {
    if (!t.error.ok()) return ReportError("bench", t.error, kExitFailure);
  }

  std::vector<double> all;
  ThreadTally sum;
  for (auto& t : tallies) {
    all.insert(all.end(), t.latencies_us.begin(), t.latencies_us.end());
    sum.queries += t.queries;
    sum.postings += t.postings;
    sum.scored += t.scored;
    sum.blocks += t.blocks;
    sum.bytes += t.bytes;
    sum.hits += t.hits;
    sum.total += t.total;
  }
  std::sort(all.begin(), all.end());
  const double n = std::max<double>(1, static_cast<double>(sum.queries));
  double mean = 0;
  for (double v : all) mean += v;
  const double elapsed = std::max(1e-9, std::chrono::duration<double>(measure_end - measure_start).count());
  nlohmann::ordered_json out;
  out["engine"] = a.engine;
  if (gpu) {
    out["batch"] = batch;
    out["cold"] = a.cold;
  }
  out["command"] = a.command;
  out["mode"] = std::string(QueryModeName(*mode));
  out["k"] = query_k;
  out["threads"] = threads;
  {
    // What the runs left in the main-memory list and positions caches, and their budget (the two
    // share each shard's list cache budget).
    uint64_t cached = 0, capacity = 0;
    for (size_t i = 0; i < idx.num_shards(); ++i) {
      for (const ListCacheStats& cs : {idx.shard(i).list_cache().stats(), idx.shard(i).positions_cache().stats()}) {
        cached += cs.bytes;
        capacity += cs.capacity_bytes;
      }
    }
    out["list_cache_bytes"] = cached;
    out["list_cache_capacity_bytes"] = capacity;
  }
  out["queries"] = sum.queries;
  out["qps"] = static_cast<double>(sum.queries) / elapsed;
  out["mean_us"] = all.empty() ? 0.0 : mean / static_cast<double>(all.size());
  out["p50_us"] = Percentile(all, 0.50);
  out["p95_us"] = Percentile(all, 0.95);
  out["p99_us"] = Percentile(all, 0.99);
  out["p999_us"] = Percentile(all, 0.999);
  // Host CPU per query (all of the process's threads, waits that spin included).
  out["cpu_us_per_query"] = cpu_us / n;
  out["postings_decoded_per_query"] = static_cast<double>(sum.postings) / n;
  out["blocks_decoded_per_query"] = static_cast<double>(sum.blocks) / n;
  out["scored_per_query"] = static_cast<double>(sum.scored) / n;
  if (!gpu && !a.cold) out["cpu_prewarm_s"] = cpu_prewarm_s;
  out["bytes_touched_per_query"] = static_cast<double>(sum.bytes) / n;
  out["hits_per_query"] = static_cast<double>(sum.hits) / n;
  if (count) out["total_per_query"] = static_cast<double>(sum.total) / n;
#ifdef SEARCH_HAVE_GPU
  if (searcher) {
    const gpu::GpuCacheStats cs = searcher->stats();
    out["gpu_cache_hits"] = cs.hits;
    out["gpu_cache_misses"] = cs.misses;
    out["gpu_bytes_copied"] = cs.bytes_copied;
    out["gpu_resident_bytes"] = cs.resident_bytes;
    out["gpu_prewarm_s"] = prewarm_s;
    out["gpu_or_theta_min_postings"] = ctx_options.or_theta_min_postings;
    out["gpu_or_pruned_divisor"] = ctx_options.or_pruned_divisor;
    out["gpu_or_candidate_cap"] = ctx_options.or_candidate_cap;
    out["gpu_or_theta_sample"] = ctx_options.or_theta_sample;
    out["gpu_and_bound_min_lead"] = ctx_options.and_bound_min_lead;
    // How the timed window's or-queries ran (andor's or-parts included).
    out["gpu_or_theta"] = times1.or_theta - times0.or_theta;
    out["gpu_or_pruned"] = times1.or_pruned - times0.or_pruned;
    out["gpu_or_dense"] = times1.or_dense - times0.or_dense;
    out["gpu_or_overflow"] = times1.or_overflow - times0.or_overflow;
    out["gpu_top_blocks"] = times1.top_blocks - times0.top_blocks;
    out["gpu_top_blocks_rerun"] = times1.top_blocks_rerun - times0.top_blocks_rerun;
    out["gpu_and_bounded"] = times1.and_bounded - times0.and_bounded;
    // Runs of the tree path (trees and counts), and the count-only ones among them.
    out["gpu_tree"] = times1.tree - times0.tree;
    out["gpu_tree_count_only"] = times1.tree_count_only - times0.tree_count_only;
    const uint64_t ratio_n = times1.theta_ratio_n - times0.theta_ratio_n;
    if (ratio_n > 0)  // mean theta / k-th best score of the or-queries with theta
      out["gpu_or_theta_ratio"] = static_cast<double>(times1.theta_ratio_ppm - times0.theta_ratio_ppm) / 1e6 / ratio_n;
    // Per engine call (one shard's batch): host planning and launching, waiting for the GPU, the
    // whole call; and the rounds (host synchronizations) it took.
    const double calls = std::max<double>(1, static_cast<double>(times1.calls - times0.calls));
    out["gpu_calls"] = times1.calls - times0.calls;
    out["gpu_rounds_per_call"] = static_cast<double>(times1.rounds - times0.rounds) / calls;
    out["gpu_enqueue_us_per_call"] = static_cast<double>(times1.enqueue_ns - times0.enqueue_ns) / 1e3 / calls;
    out["gpu_wait_us_per_call"] = static_cast<double>(times1.wait_ns - times0.wait_ns) / 1e3 / calls;
    out["gpu_engine_us_per_call"] = static_cast<double>(times1.total_ns - times0.total_ns) / 1e3 / calls;
  }
#endif
  if (per_query.is_open()) {  // each query alone, on one thread, after the run (caches warm)
    [[maybe_unused]] Worker w;  // its GPU context (GPU builds only)
    Batch results;
    per_query << "query,terms,shortest,second,total,us,postings_decoded,hits,us_first\n";
    for (size_t i = 0; i < qs.size(); ++i) {
      const std::vector<std::string> terms = parse_query(i)->terms;
      std::vector<uint64_t> lens;
      for (const std::string& term : terms) {
        uint64_t n = 0;
        for (size_t sh = 0; sh < idx.num_shards(); ++sh) {
          auto info = idx.shard(sh).GetTermInfo(term);
          if (info.ok() && info->has_value()) n += (*info)->count;
        }
        lens.push_back(n);
      }
      std::sort(lens.begin(), lens.end());
      uint64_t total = 0;
      for (uint64_t n : lens) total += n;
      double best_us = 0;
      double first_us = 0;
      const int runs = gpu ? 1 : 2;
      for (int r = 0; r < runs; ++r) {
        const auto t0 = Clock::now();
        Status st;
        if (gpu) {
#ifdef SEARCH_HAVE_GPU
          if (!w.ctx) {
            auto ctx = gpu::GpuContext::Create(ctx_options);
            if (!ctx.ok()) return ReportError("bench", ctx.status().WithContext("--per-query"), kExitFailure);
            w.ctx = std::move(ctx).value();
          }
          std::vector<Query> copies(batch, make_query(i));
          st = searcher->SearchBatch(*w.ctx, copies, &results);
#endif
        } else {
          results.clear();
          results.push_back(idx.Search(*parse_query(i)));
        }
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / batch;
        for (size_t j = 0; st.ok() && j < results.size(); ++j)
          if (!results[j].ok()) st = results[j].status();
        if (!st.ok() || results.empty())
          return ReportError("bench", st.WithContext("--per-query: query '" + qs[i] + "'"), kExitFailure);
        if (r == 0) first_us = us;
        best_us = r == 0 ? us : std::min(best_us, us);
      }
      const SearchResult& r0 = *results.front();
      per_query << (i + 1) << ',' << terms.size() << ',' << (lens.empty() ? 0 : lens[0]) << ','
                << (lens.size() < 2 ? 0 : lens[1]) << ',' << total << ',' << best_us << ','
                << r0.stats.postings_decoded << ',' << r0.hits.size() << ',' << first_us << '\n';
    }
    per_query.flush();
    if (!per_query) return ReportError("bench", Status::IOError("cannot write " + a.per_query), kExitFailure);
    out["per_query_file"] = a.per_query;
  }
#ifdef SEARCH_HAVE_GPU
  if (searcher && a.verify > 0) {  // exactness at scale: GPU batches against the CPU engine
    const size_t nv = std::min<size_t>(a.verify, qs.size());
    std::atomic<uint64_t> mismatches{0};
    std::atomic<size_t> next{0};
    Status verify_error;
    std::mutex mu;
    std::vector<std::thread> vpool;
    for (uint32_t t = 0; t < std::min<uint32_t>(threads, 16); ++t)
      vpool.emplace_back([&] {
        auto ctx = gpu::GpuContext::Create(ctx_options);
        while (ctx.ok()) {
          const size_t i = next.fetch_add(batch);
          if (i >= nv) break;
          std::vector<Query> queries;
          for (size_t j = i; j < std::min(nv, i + batch); ++j) queries.push_back(make_query(j));
          Batch got;
          Status st = searcher->SearchBatch(**ctx, queries, &got);
          for (size_t j = 0; st.ok() && j < queries.size(); ++j) {
            const Result<SearchResult> want = idx.Search(queries[j]);
            if (!want.ok() || !got[j].ok()) {
              st = !want.ok() ? want.status() : got[j].status();
            } else if (want->hits != got[j]->hits || want->has_total != got[j]->has_total ||
                       want->total != got[j]->total) {
              mismatches.fetch_add(1);
            }
          }
          if (!st.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            verify_error = st.WithContext("--verify");
            return;
          }
        }
        if (!ctx.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          verify_error = ctx.status();
        }
      });
    for (auto& th : vpool) th.join();
    if (!verify_error.ok()) return ReportError("bench", verify_error, kExitFailure);
    out["verified"] = nv;
    out["verify_mismatches"] = mismatches.load();
  }
#endif
  std::cout << out.dump() << std::endl;
  return kExitOk;
}

}  // namespace search::cli
