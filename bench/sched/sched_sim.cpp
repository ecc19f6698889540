// sched_sim: the node's scheduling policy (SchedPolicy, the code the node runs) driven in virtual
// time by a query log's measured per-query costs, without a GPU or a cluster: what latency and
// sustained rate does each policy reach against Poisson arrivals, when the processors cost what
// `searchctl bench --per-query` measured? It separates the policy's share of the Fig. 7 result
// from the host's: no serving path, no host contention, no noise but what --noise adds
// to the predictions.
//
// Model. CPU: --cpu-workers cores, a job takes its measured CPU time (times --cpu-scale). GPU:
// --gpu-dispatchers batches in flight on one device; a batch's kernels take the sum of its jobs'
// per-copy GPU times (the batch-of-32 file), scaled so that the device alone sustains --gpu-qps
// over the log, run one batch at a time on the device, and each batch adds --gpu-latency-us of
// launch and synchronisation that overlaps other batches. Predictions: the measured times times
// exp(N(0, --noise)) (0: exact). A job taken after its deadline is answered at once as missed.
// Load generator: open loop by default; with --connections N, as `searchctl loadgen` over N
// kept-alive connections: an arrival waits (FIFO) for a free connection, which it then holds for
// --path-us of serving path (integrator, HTTP) plus its time in the node; its latency counts
// from its arrival, so the wait is in it. With --batch-latency the policy counts a batch's run
// time in a job's finish on the GPU (SchedOptions::batch_latency).
//
// usage: sched_sim --cpu CPU.csv[.gz] --gpu GPU32.csv[.gz] --gpu-qps 40000 [--modes gpu,hybrid]
//                  [--start 10000 --factor 1.2 --steps 12] [--seconds 5] [--cpu-workers 16] ...
// Prints a table per mode: rate, mean / p99 latency, miss ratio, CPU share; then each mode's
// sustained rate (at most --miss-limit misses; default 1%), hybrid's over gpu's, and each mode's
// highest rate within p99 bounds of 10 to 250 ms (as bench/scripts/plot_fig7.py reads a Fig. 7 sweep).
#include <zlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sched/sched_policy.hpp"

namespace search {
namespace {

struct QueryCost {
  double cpu_us = 0, gpu_us = 0;
};

// "query,...,us,..." CSV (searchctl bench --per-query): query number -> us.
// `column`: the time column (us, or us_first for the CPU engine's first run).
bool ReadPerQuery(const std::string& path, const std::string& column, std::map<uint64_t, double>* out,
                  std::string* error) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    *error = "cannot open " + path;
    return false;
  }
  char buf[4096];
  int us_col = -1;
  bool header = true;
  while (gzgets(f, buf, sizeof buf) != nullptr) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (header) {
      for (size_t i = 0; i < cells.size(); ++i)
        if (cells[i] == column) us_col = static_cast<int>(i);
      header = false;
      if (cells.empty() || cells[0] != "query" || us_col < 0) {
        gzclose(f);
        *error = path + ": not a --per-query file (needs columns query and " + column + ")";
        return false;
      }
      continue;
    }
    if (static_cast<int>(cells.size()) <= us_col) continue;
    try {
      (*out)[std::stoull(cells[0])] = std::stod(cells[static_cast<size_t>(us_col)]);
    } catch (const std::exception&) {
      gzclose(f);
      *error = path + ": bad line: " + line.substr(0, 80);
      return false;
    }
  }
  gzclose(f);
  if (out->empty()) {
    *error = path + ": no queries";
    return false;
  }
  return true;
}

struct Options {
  std::string cpu_file, gpu_file;
  std::string cpu_column = "us";
  double gpu_qps = 40000;
  double gpu_latency_us = 150;
  double cpu_scale = 1;
  size_t cpu_workers = 16, gpu_dispatchers = 4;
  double start = 10000, factor = 1.2;
  int steps = 12;
  double seconds = 5, warmup = 1;
  double deadline_ms = 500, miss_limit = 0.01;
  double noise = 0;
  double cpu_bias = 1;  // the CPU's predictions are 1 / cpu_bias of the times (actual / predicted)
  double gpu_alone_us = 0;  // cheap jobs (SchedOptions::gpu_alone_us); 0 off
  bool balance = true, steal = true, batch_latency = false;
  // The adaptive bound.
  double cheap_step = 0, cheap_max_factor = SchedOptions{}.cheap_max_factor, cheap_fill_us = 0;
  size_t connections = 0;  // 0: open loop
  double path_us = 0;      // serving path outside the node a request holds its connection for
  size_t steal_window = SchedOptions{}.steal_window;
  // GPU batches (SchedOptions::batch_work_us, max_batch, batch_wait), the node's defaults.
  double batch_work_us = SchedOptions{}.batch_work_us;
  size_t max_batch = SchedOptions{}.max_batch;
  double batch_wait_us = static_cast<double>(SchedOptions{}.batch_wait.count());
  std::string modes = "gpu,hybrid";
  uint64_t seed = 1;
};

struct StepResult {
  double rate = 0, mean_ms = 0, p99_ms = 0, miss = 0, cpu_share = 0, cpu_busy = 0;
};

using Us = std::chrono::duration<double, std::micro>;

SchedTime At(double us) { return SchedTime{} + std::chrono::duration_cast<SchedClock::duration>(Us(us)); }
double UsOf(SchedTime t) { return std::chrono::duration_cast<Us>(t - SchedTime{}).count(); }

StepResult Simulate(const Options& o, SchedMode mode, const std::vector<QueryCost>& costs, double gpu_scale,
                    double rate) {
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(rate / 1e6);  // per us
  std::normal_distribution<double> err(0.0, o.noise);
  struct Job {
    double arrival_us, cpu_us, gpu_us;
    bool measured;
  };
  std::vector<Job> jobs;
  const double end_us = (o.warmup + o.seconds) * 1e6;
  size_t q = rng() % costs.size();
  for (double t = gap(rng); t < end_us; t += gap(rng)) {
    jobs.push_back({t, costs[q].cpu_us * o.cpu_scale, costs[q].gpu_us * gpu_scale, t >= o.warmup * 1e6});
    q = (q + 1) % costs.size();
  }
  SchedOptions so;
  so.mode = mode;
  so.balance = o.balance;
  so.steal = o.steal;
  so.steal_window = o.steal_window;
  so.batch_work_us = o.batch_work_us;
  so.max_batch = o.max_batch;
  so.batch_wait = std::chrono::microseconds(static_cast<int64_t>(o.batch_wait_us));
  so.gpu_alone_us = mode == SchedMode::kHybrid ? o.gpu_alone_us : 0;
  so.batch_latency = o.batch_latency;
  so.cheap_step = o.cheap_step;
  so.cheap_max_factor = o.cheap_max_factor;
  so.cheap_fill_us = o.cheap_fill_us;
  so.cpu_parallelism = o.cpu_workers;
  so.cpu_workers = o.cpu_workers;
  so.gpu_parallelism = o.gpu_dispatchers;
  SchedPolicy policy(so);

  // Events: (time, kind, index): kind 0 arrival, 1 CPU done (index: job), 2 GPU batch done
  // (index: batch), 3 GPU wake, 4 a connection freed (index: unused).
  using Event = std::tuple<double, int, size_t>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  for (size_t i = 0; i < jobs.size(); ++i) events.emplace(jobs[i].arrival_us, 0, i);
  std::vector<double> done_us(jobs.size(), -1);
  const double deadline_us = o.deadline_ms * 1000;
  size_t free_conns = o.connections;
  std::deque<size_t> waiting;  // arrivals waiting for a connection, oldest first
  // A request reaches the node when it has a connection; the node's deadline counts from then.
  auto submit = [&](size_t index, double now) {
    const Job& j = jobs[index];
    SchedJob sj;
    sj.id = index;
    sj.arrival = At(now);
    sj.deadline = At(now + deadline_us);
    sj.cpu_us = (o.noise > 0 ? j.cpu_us * std::exp(err(rng)) : j.cpu_us) / o.cpu_bias;
    sj.gpu_us = o.noise > 0 ? j.gpu_us * std::exp(err(rng)) : j.gpu_us;
    if (mode == SchedMode::kGriffin) sj.preferred = Unit::kGpu;
    policy.Enqueue(sj, At(now));
  };
  // The node answered job i at `now`: its connection is free once the answer has gone back.
  auto answer = [&](size_t i, double now) {
    done_us[i] = now + o.path_us;
    if (o.connections > 0) events.emplace(now + o.path_us, 4, 0);
  };
  std::vector<bool> on_cpu(jobs.size(), false);
  std::vector<std::vector<size_t>> batches;
  std::vector<double> batch_run_us;  // from a batch's take to its end
  size_t idle_cpu = mode == SchedMode::kGpu ? 0 : o.cpu_workers;
  size_t idle_gpu = mode == SchedMode::kCpu ? 0 : o.gpu_dispatchers;
  double device_free_us = 0;
  double cpu_run_us = 0;  // CPU time of the jobs started after the warm-up
  double wake_pending = -1;
  while (!events.empty()) {
    const auto [now, kind, index] = events.top();
    events.pop();
    const SchedTime t = At(now);
    if (kind == 0) {
      if (o.connections == 0) {
        submit(index, now);
      } else if (free_conns > 0) {
        --free_conns;
        submit(index, now);
      } else {
        waiting.push_back(index);
      }
    } else if (kind == 1) {
      answer(index, now);
      ++idle_cpu;
    } else if (kind == 2) {
      for (size_t i : batches[index]) answer(i, now);
      policy.ObserveGpuBatch(batch_run_us[index]);
      ++idle_gpu;
    } else if (kind == 4) {
      if (waiting.empty()) {
        ++free_conns;
      } else {
        submit(waiting.front(), now);
        waiting.pop_front();
      }
    } else if (now == wake_pending) {
      wake_pending = -1;
    }
    while (idle_cpu > 0) {
      auto j = policy.TakeCpu(t);
      if (!j) break;
      on_cpu[j->id] = true;
      if (t > j->deadline) {
        answer(j->id, now);  // answered DeadlineExceeded without running
        continue;
      }
      --idle_cpu;
      if (now >= o.warmup * 1e6) cpu_run_us += jobs[j->id].cpu_us;
      events.emplace(now + jobs[j->id].cpu_us, 1, j->id);
    }
    while (idle_gpu > 0) {
      GpuTake take = policy.TakeGpu(t);
      if (take.jobs.empty()) {
        if (take.wake_at != SchedTime::max()) {
          const double w = std::max(UsOf(take.wake_at), now + 1);  // never the same instant again
          if (wake_pending < 0 || w < wake_pending) {
            wake_pending = w;
            events.emplace(w, 3, 0);
          }
        }
        break;
      }
      std::vector<size_t> batch;
      double work = 0;
      for (const SchedJob& j : take.jobs) {
        if (t > j.deadline) {
          answer(j.id, now);
          continue;
        }
        batch.push_back(j.id);
        work += jobs[j.id].gpu_us;
      }
      if (batch.empty()) continue;
      const double start = std::max(now, device_free_us);
      device_free_us = start + work;
      batches.push_back(std::move(batch));
      batch_run_us.push_back(device_free_us + o.gpu_latency_us - now);
      --idle_gpu;
      events.emplace(device_free_us + o.gpu_latency_us, 2, batches.size() - 1);
    }
  }
  StepResult r;
  r.rate = rate;
  std::vector<double> lat;
  size_t misses = 0, cpu = 0;
  double sum = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].measured) continue;
    const double l = done_us[i] - jobs[i].arrival_us;
    lat.push_back(l);
    sum += l;
    misses += l > deadline_us ? 1 : 0;
    cpu += on_cpu[i] ? 1 : 0;
  }
  if (lat.empty()) return r;
  std::sort(lat.begin(), lat.end());
  r.mean_ms = sum / static_cast<double>(lat.size()) / 1000;
  r.p99_ms = lat[std::min(lat.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(lat.size())))] / 1000;
  r.miss = static_cast<double>(misses) / static_cast<double>(lat.size());
  r.cpu_share = static_cast<double>(cpu) / static_cast<double>(lat.size());
  r.cpu_busy = cpu_run_us / (static_cast<double>(std::max<size_t>(o.cpu_workers, 1)) * o.seconds * 1e6);
  return r;
}

int Run(const Options& o) {
  std::map<uint64_t, double> cpu, gpu;
  std::string error;
  if (!ReadPerQuery(o.cpu_file, o.cpu_column, &cpu, &error) || !ReadPerQuery(o.gpu_file, "us", &gpu, &error)) {
    std::cerr << "sched_sim: " << error << "\n";
    return 1;
  }
  std::vector<QueryCost> costs;
  double gpu_sum = 0;
  for (const auto& [query, us] : cpu) {
    auto g = gpu.find(query);
    if (g == gpu.end()) continue;
    costs.push_back({us, g->second});
    gpu_sum += g->second;
  }
  if (costs.empty()) {
    std::cerr << "sched_sim: the two files share no query\n";
    return 1;
  }
  // The device alone sustains gpu_qps over the log: mean work per query 1e6 / gpu_qps us.
  const double gpu_scale = 1e6 / o.gpu_qps / (gpu_sum / static_cast<double>(costs.size()));
  std::printf("sched_sim: %zu queries; GPU work scaled x%.3f (alone %.0f q/s), %zu CPU workers, %zu dispatchers, "
              "noise %.2f, cheap jobs %s\n",
              costs.size(), gpu_scale, o.gpu_qps, o.cpu_workers, o.gpu_dispatchers, o.noise,
              o.gpu_alone_us > 0 ? (std::to_string(static_cast<int>(o.gpu_alone_us)) + " us").c_str() : "off");
  std::map<std::string, double> sustained;
  // The highest rate of each mode whose p99 is within each bound (plot_fig7.py's bounds).
  const std::vector<double> bounds = {10, 25, 50, 100, 250};
  std::map<std::string, std::vector<double>> at_bound;
  std::stringstream ms(o.modes);
  for (std::string name; std::getline(ms, name, ',');) {
    SchedMode mode;
    if (name == "cpu") mode = SchedMode::kCpu;
    else if (name == "gpu") mode = SchedMode::kGpu;
    else if (name == "hybrid") mode = SchedMode::kHybrid;
    else if (name == "griffin") mode = SchedMode::kGriffin;
    else {
      std::cerr << "sched_sim: unknown mode " << name << " (cpu, gpu, hybrid, griffin)\n";
      return 2;
    }
    std::printf("\n| %s q/s | mean ms | p99 ms | misses | on the CPU | CPU workers busy |\n|---|---|---|---|---|---|\n",
                name.c_str());
    double rate = o.start;
    sustained[name] = 0;
    at_bound[name].assign(bounds.size(), 0);
    for (int s = 0; s < o.steps; ++s) {
      const StepResult r = Simulate(o, mode, costs, gpu_scale, rate);
      std::printf("| %.0f | %.3f | %.3f | %.2f%% | %.1f%% | %.1f%% |\n", rate, r.mean_ms, r.p99_ms, 100 * r.miss,
                  100 * r.cpu_share, 100 * r.cpu_busy);
      if (r.miss <= o.miss_limit) sustained[name] = rate;
      for (size_t b = 0; b < bounds.size(); ++b)
        if (r.p99_ms <= bounds[b] && r.miss <= o.miss_limit) at_bound[name][b] = rate;
      if (r.miss > 0.05) break;
      rate *= o.factor;
    }
  }
  std::printf("\nsustained (at most %.1f%% misses):", 100 * o.miss_limit);
  for (const auto& [name, r] : sustained) std::printf(" %s %.0f q/s;", name.c_str(), r);
  std::printf("\n");
  if (sustained.count("hybrid") && sustained.count("gpu") && sustained["gpu"] > 0)
    std::printf("hybrid / gpu: %.2fx\n", sustained["hybrid"] / sustained["gpu"]);
  std::printf("\n| mode |");
  for (double b : bounds) std::printf(" p99 <= %.0f ms |", b);
  std::printf("\n|---|");
  for (size_t b = 0; b < bounds.size(); ++b) std::printf("---|");
  std::printf("\n");
  for (const auto& [name, rates] : at_bound) {
    std::printf("| %s |", name.c_str());
    for (double r : rates) std::printf(" %.0f |", r);
    std::printf("\n");
  }
  if (at_bound.count("hybrid") && at_bound.count("gpu")) {
    std::printf("| hybrid / gpu |");
    for (size_t b = 0; b < bounds.size(); ++b) {
      const double g = at_bound["gpu"][b], h = at_bound["hybrid"][b];
      if (g > 0) std::printf(" %.2fx |", h / g);
      else std::printf(" - |");
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace search

int main(int argc, char** argv) {
  search::Options o;
  CLI::App app{"The node's scheduling policy in virtual time over a log's measured per-query costs"};
  app.add_option("--cpu", o.cpu_file, "CPU engine's per-query file (searchctl bench --per-query)")->required();
  app.add_option("--gpu", o.gpu_file, "GPU's per-query file, per copy in a batch")->required();
  app.add_option("--gpu-qps", o.gpu_qps, "the rate the GPU alone sustains over the log")->capture_default_str();
  app.add_option("--gpu-latency-us", o.gpu_latency_us, "a batch's launch and synchronisation (overlaps)")
      ->capture_default_str();
  app.add_option("--cpu-column", o.cpu_column,
                 "the CPU file's time column: us (the faster of two runs, caches warm) or us_first (the first run, "
                 "as a served query finds the caches)")
      ->capture_default_str();
  app.add_option("--cpu-scale", o.cpu_scale, "CPU times multiplied by this (a busy host)")->capture_default_str();
  app.add_option("--cpu-workers", o.cpu_workers, "cores for the CPU engine")->capture_default_str();
  app.add_option("--gpu-dispatchers", o.gpu_dispatchers, "batches in flight")->capture_default_str();
  app.add_option("--modes", o.modes, "comma-separated: cpu, gpu, hybrid, griffin")->capture_default_str();
  app.add_option("--start", o.start, "first rate, q/s")->capture_default_str();
  app.add_option("--factor", o.factor, "rate step factor")->capture_default_str();
  app.add_option("--steps", o.steps, "rates per mode at most")->capture_default_str();
  app.add_option("--seconds", o.seconds, "measured arrivals per rate")->capture_default_str();
  app.add_option("--deadline-ms", o.deadline_ms, "per-query deadline")->capture_default_str();
  app.add_option("--miss-limit", o.miss_limit, "misses allowed at a sustained rate")->capture_default_str();
  app.add_option("--noise", o.noise, "prediction error: predictions are times x exp(N(0, noise))")
      ->capture_default_str();
  app.add_option("--cpu-bias", o.cpu_bias,
                 "the CPU cost model's bias: its predictions are the times (with --noise) over this (actual / "
                 "predicted; 1: none)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--gpu-alone-us", o.gpu_alone_us, "hybrid's cheap-job bound (0: off)")->capture_default_str();
  app.add_option("--balance", o.balance, "hybrid's balance rule")->capture_default_str();
  app.add_option("--steal", o.steal, "stealing")->capture_default_str();
  app.add_option("--steal-window", o.steal_window, "oldest jobs a thief chooses among")->capture_default_str();
  app.add_option("--batch-work-us", o.batch_work_us, "predicted GPU work that closes a batch")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9));
  app.add_option("--max-batch", o.max_batch, "most jobs in one GPU batch")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{4096}));
  app.add_option("--batch-wait-us", o.batch_wait_us, "longest a GPU batch waits to fill")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--seed", o.seed, "arrivals and noise")->capture_default_str();
  app.add_option("--connections", o.connections,
                 "the load generator's connections (0: open loop); an arrival waits for a free one")
      ->capture_default_str();
  app.add_option("--path-us", o.path_us, "serving path outside the node a request spends (and holds its connection)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--batch-latency", o.batch_latency, "hybrid: a batch's run time counts in a job's GPU finish")
      ->capture_default_str();
  app.add_option("--cheap-step", o.cheap_step, "hybrid: the adaptive cheap bound's step (0: fixed at --gpu-alone-us)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--cheap-max-factor", o.cheap_max_factor, "the adaptive bound's cap, in multiples of --gpu-alone-us")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--cheap-fill-us", o.cheap_fill_us,
                 "the adaptive bound follows the CPU's backlog against this (0: the GPU's backlog against the CPU's)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  CLI11_PARSE(app, argc, argv);
  if (o.gpu_qps <= 0 || o.start <= 0 || o.factor <= 1 || o.cpu_workers == 0 || o.gpu_dispatchers == 0) {
    std::cerr << "sched_sim: --gpu-qps, --start, --cpu-workers and --gpu-dispatchers must be positive, --factor > 1\n";
    return 2;
  }
  return search::Run(o);
}
