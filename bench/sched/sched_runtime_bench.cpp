// sched_runtime_bench: what the scheduler's threaded runtime (HybridScheduler) costs per job, apart
// from the processors. Request threads submit tasks in a loop to a HybridScheduler whose fake GPU
// sleeps a fixed time per batch (a blocking device wait, as the node's dispatchers do) and whose fake CPU engine
// spins a fixed time per job; a calibrated CostModel is fed as in the node. Prints the jobs a
// second, the process's CPU time per job, and the GPU dispatchers' own CPU time per job outside
// the fake device: taking a batch from the queues and finishing its jobs (the model's observation,
// the counters, waking each job's request thread).
//
// --async: as the node submits (NodeServer::ExecuteAsync): --submitters threads (the node's request workers)
// keep --threads jobs in flight through SubmitAsync without waiting for any one of them (a
// counting semaphore holds the window); each job's on_done, on the thread that finished it,
// frees its slot. Sync: --threads request threads, each blocked on its job until it is answered.
//
// usage: sched_runtime_bench [--mode gpu|hybrid|cpu] [--threads N] [--seconds S]
//          [--dispatchers D] [--cpu-workers W] [--batch-us U] [--cpu-us U] [--async [--submitters K]]

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/thread_cpu.hpp"
#include "sched/cost_model.hpp"
#include "sched/hybrid_scheduler.hpp"

namespace search {
namespace {

void Spin(double micros) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(micros);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// The fake processors. Each dispatcher thread's CPU time between leaving one RunGpuBatch and
// entering the next is the scheduler's own work for the batch it finished and the one it takes.
class FakeRunner : public SchedRunner {
 public:
  FakeRunner(double batch_us, double cpu_us) : batch_us_(batch_us), cpu_us_(cpu_us) {}
  void RunCpu(SchedTask& t) override {
    Spin(cpu_us_);
    t.status = Status::Ok();
  }
  void RunGpuBatch(std::span<SchedTask* const> batch) override {
    thread_local double left_at = -1;  // this dispatcher's CPU clock when it last left here
    const double entered = ThreadCpuMicros();
    if (left_at >= 0) outside_us_.fetch_add(static_cast<uint64_t>(entered - left_at));
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(batch_us_));
    for (SchedTask* t : batch) {
      t->outcome = GpuOutcome::kDone;
      t->status = Status::Ok();
    }
    jobs_.fetch_add(batch.size());
    batches_.fetch_add(1);
    left_at = ThreadCpuMicros();
  }
  uint64_t outside_us() const { return outside_us_.load(); }
  uint64_t jobs() const { return jobs_.load(); }
  uint64_t batches() const { return batches_.load(); }

 private:
  double batch_us_, cpu_us_;
  std::atomic<uint64_t> outside_us_{0}, jobs_{0}, batches_{0};
};

int Main(int argc, char** argv) {
  CLI::App app{"sched_runtime_bench: the scheduler runtime's own cost per job, with fake processors"};
  std::string mode_name = "gpu";
  size_t threads = 64, dispatchers = 4, cpu_workers = 2;
  double seconds = 3, batch_us = 500, cpu_us = 50;
  app.add_option("--mode", mode_name, "gpu, hybrid or cpu")->capture_default_str();
  app.add_option("--threads", threads, "request threads submitting in a loop")->capture_default_str();
  app.add_option("--seconds", seconds, "measured seconds")->capture_default_str();
  app.add_option("--dispatchers", dispatchers, "GPU dispatchers")->capture_default_str();
  app.add_option("--cpu-workers", cpu_workers, "CPU workers")->capture_default_str();
  app.add_option("--batch-us", batch_us, "the fake device's sleep per batch")->capture_default_str();
  app.add_option("--cpu-us", cpu_us, "the fake CPU engine's spin per job")->capture_default_str();
  bool async = false;
  size_t submitters = 4;
  app.add_flag("--async", async, "SubmitAsync from --submitters threads, --threads jobs in flight");
  app.add_option("--submitters", submitters, "with --async: threads submitting")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const Result<SchedMode> mode = ParseSchedMode(mode_name);
  if (!mode.ok()) {
    std::fprintf(stderr, "sched_runtime_bench: %s\n", mode.status().ToString().c_str());
    return 2;
  }

  // A calibrated model, so that every observation re-solves its fit as in the node.
  std::mt19937_64 rng(1);
  auto features = [&] {
    QueryFeatures f;
    f.terms = 2 + static_cast<uint32_t>(rng() % 3);
    f.shortest = 1000 + rng() % 100000;
    f.second = f.shortest + rng() % 1000000;
    f.total = f.second + rng() % 3000000;
    return f;
  };
  CostModel model;
  std::vector<CostSample> calib;
  for (int i = 0; i < 64; ++i) {
    const QueryFeatures f = features();
    calib.push_back({f, 20 + 1e-4 * static_cast<double>(f.total)});
  }
  model.Calibrate(Unit::kCpu, calib);
  model.Calibrate(Unit::kGpu, calib);
  std::vector<QueryFeatures> pool;
  for (int i = 0; i < 1024; ++i) pool.push_back(features());

  HybridSchedulerOptions o;
  o.policy.mode = *mode;
  o.cpu_workers = cpu_workers;
  o.gpu_dispatchers = *mode == SchedMode::kCpu ? 0 : dispatchers;
  FakeRunner runner(batch_us, cpu_us);
  HybridScheduler sched(o, &runner, &model, nullptr);
  sched.Start();

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> answered{0};
  std::vector<std::thread> clients;
  auto prepare = [&](SchedTask& task, size_t i) {
    task.features = pool[i % pool.size()];
    SchedJob& j = task.job;
    j = SchedJob{};
    j.arrival = SchedClock::now();
    if (!model.Predict(Unit::kCpu, task.features, &j.cpu_us)) j.cpu_us = 1;
    if (!model.Predict(Unit::kGpu, task.features, &j.gpu_us)) j.gpu_us = 1;
  };
  // --async: a window of `threads` task slots; a submitter takes a free slot (waiting while all
  // are in flight) and submits it; the finishing thread's on_done puts the slot back.
  std::vector<SchedTask> slots(async ? threads : 0);
  std::mutex free_mu;
  std::condition_variable free_cv;
  std::vector<size_t> free_slots;
  for (size_t k = 0; k < slots.size(); ++k) free_slots.push_back(k);
  std::atomic<size_t> in_flight{0};
  if (async) {
    for (size_t c = 0; c < submitters; ++c)
      clients.emplace_back([&, c] {
        size_t i = c * 37;
        while (!stop.load(std::memory_order_relaxed)) {
          size_t k;
          {
            std::unique_lock<std::mutex> lock(free_mu);
            free_cv.wait(lock, [&] { return !free_slots.empty() || stop.load(); });
            if (free_slots.empty()) break;
            k = free_slots.back();
            free_slots.pop_back();
          }
          SchedTask& task = slots[k];
          prepare(task, i++);
          in_flight.fetch_add(1);
          task.on_done = [&, k](SchedTask& t) {
            if (t.status.ok()) answered.fetch_add(1, std::memory_order_relaxed);
            {
              std::lock_guard<std::mutex> lock(free_mu);
              free_slots.push_back(k);
            }
            free_cv.notify_one();
            in_flight.fetch_sub(1);
          };
          if (!sched.SubmitAsync(task).ok()) {
            in_flight.fetch_sub(1);
            break;
          }
        }
      });
  } else {
    for (size_t c = 0; c < threads; ++c)
      clients.emplace_back([&, c] {
        size_t i = c * 37;
        while (!stop.load(std::memory_order_relaxed)) {
          SchedTask task;
          prepare(task, i++);
          if (sched.Submit(task).ok()) answered.fetch_add(1, std::memory_order_relaxed);
        }
      });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // warm-up
  const uint64_t a0 = answered.load(), j0 = runner.jobs(), b0 = runner.batches(), o0 = runner.outside_us();
  const double c0 = ProcessCpuMicros();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t a1 = answered.load(), j1 = runner.jobs(), b1 = runner.batches(), o1 = runner.outside_us();
  const double c1 = ProcessCpuMicros();
  stop = true;
  free_cv.notify_all();
  for (auto& t : clients) t.join();
  sched.Stop();  // answers what is still queued (Unavailable) through on_done
  while (in_flight.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  const double jobs = static_cast<double>(a1 - a0);
  const double gpu_jobs = static_cast<double>(j1 - j0);
  if (async)
    std::printf("mode %s, async: %zu submitters, %zu jobs in flight, %zu dispatchers, %zu CPU workers, batch %.0f us, "
                "cpu job %.0f us\n",
                mode_name.c_str(), submitters, threads, o.gpu_dispatchers, cpu_workers, batch_us, cpu_us);
  else
    std::printf("mode %s, %zu request threads, %zu dispatchers, %zu CPU workers, batch %.0f us, cpu job %.0f us\n",
                mode_name.c_str(), threads, o.gpu_dispatchers, cpu_workers, batch_us, cpu_us);
  std::printf("answered %.0f jobs/s; process CPU %.1f us a job; GPU jobs %.0f/s in batches of %.1f; "
              "dispatchers' own CPU %.2f us a GPU job\n",
              jobs / wall, jobs > 0 ? (c1 - c0) / jobs : 0.0, gpu_jobs / wall,
              b1 > b0 ? gpu_jobs / static_cast<double>(b1 - b0) : 0.0,
              gpu_jobs > 0 ? static_cast<double>(o1 - o0) / gpu_jobs : 0.0);
  return 0;
}

}  // namespace
}  // namespace search

int main(int argc, char** argv) { return search::Main(argc, argv); }
