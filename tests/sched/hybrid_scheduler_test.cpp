// HybridScheduler with fake processors on real threads: every submitted task is answered exactly
// once with the right answer under every mode; GPU failures mid-batch rerun on the CPU; Griffin
// hand-offs finish on the CPU; expired tasks are not run; the cost model is fed; Stop() answers.
#include "sched/hybrid_scheduler.hpp"

#include "core/cpus.hpp"
#include "core/thread_cpu.hpp"
#include "metrics/metrics.hpp"
#include "../prometheus_text.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

namespace search {
namespace {

// The "query": compute 3 * x + 1. The GPU part computes 3 * x (stage 1); the CPU finishes any stage.
struct Work {
  int64_t x = 0;
  int64_t answer = -1;
  int stage = 0;          // 1 after the GPU's first step
  bool fail_on_gpu = false;
  bool migrate = false;   // the GPU hands it over after stage 1
};

class FakeRunner : public SchedRunner {
 public:
  void RunCpu(SchedTask& t) override {
    auto* w = static_cast<Work*>(t.payload);
    cpu_runs.fetch_add(1);
    const int running = cpu_running.fetch_add(1) + 1;
    for (int m = max_cpu_running.load(); running > m && !max_cpu_running.compare_exchange_weak(m, running);) {
    }
    errno = 0;
    cpu_nice = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>(t.job.cpu_us)));
    cpu_running.fetch_sub(1);
    const int64_t partial = w->stage == 1 ? w->answer : 3 * w->x;
    w->answer = partial + 1;
    t.status = Status::Ok();
  }
  void RunGpuBatch(std::span<SchedTask* const> batch) override {
    gpu_batches.fetch_add(1);
    max_batch = std::max<size_t>(max_batch.load(), batch.size());
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    // Host work of the batch on the dispatcher's thread: gpu_spin_us of this thread's CPU time
    // (unlike the sleep), however often the host preempts it.
    for (const double end = ThreadCpuMicros() + gpu_spin_us; ThreadCpuMicros() < end;) {
    }
    for (SchedTask* t : batch) {
      auto* w = static_cast<Work*>(t->payload);
      gpu_runs.fetch_add(1);
      if (w->fail_on_gpu) {
        t->outcome = GpuOutcome::kRetryCpu;
        t->status = Status::Unavailable("injected CUDA error");
        continue;
      }
      w->answer = 3 * w->x;
      if (!t->may_migrate) refused_migrations.fetch_add(w->migrate ? 1 : 0);
      if (w->migrate && t->may_migrate) {
        w->stage = 1;
        t->outcome = GpuOutcome::kMigrate;
        continue;
      }
      w->answer += 1;
      t->outcome = GpuOutcome::kDone;
      t->status = Status::Ok();
    }
  }
  std::atomic<int> cpu_runs{0}, gpu_runs{0}, gpu_batches{0}, refused_migrations{0};
  std::atomic<int> cpu_running{0}, max_cpu_running{0};  // CPU runs at once
  std::atomic<size_t> max_batch{0};
  std::atomic<int> cpu_nice{-100};  // the nice value the last CPU run saw
  int gpu_spin_us = 0;              // CPU time each GPU batch spends on its dispatcher's thread
};

HybridSchedulerOptions Options(SchedMode mode) {
  HybridSchedulerOptions o;
  o.policy.mode = mode;
  o.policy.batch_wait = std::chrono::microseconds(300);
  o.policy.batch_work_us = 2000;
  o.cpu_workers = 3;
  o.gpu_dispatchers = 1;
  return o;
}

// A job far cheaper on the CPU: the CPU queue, never balanced or stolen to the GPU.
void PreferCpu(SchedTask& t) {
  t.job.cpu_us = 400;
  t.job.gpu_us = 1e7;
  t.job.preferred = Unit::kCpu;
}

struct Done {
  Unit ran_on = Unit::kCpu;
  bool migrated = false, retried = false;
};

// Submits n tasks from `threads` client threads; checks every answer.
void RunClients(HybridScheduler& s, int n, int threads, std::function<void(int, Work&, SchedTask&)> setup,
                std::vector<Done>* tasks_out = nullptr) {
  std::vector<Work> work(n);
  std::vector<SchedTask> tasks(n);
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < threads; ++c)
    clients.emplace_back([&] {
      for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
        work[i].x = i;
        tasks[i].payload = &work[i];
        tasks[i].job.arrival = SchedClock::now();
        tasks[i].job.deadline = tasks[i].job.arrival + std::chrono::seconds(30);
        setup(i, work[i], tasks[i]);
        const Status st = s.Submit(tasks[i]);
        EXPECT_TRUE(st.ok()) << i << ": " << st.ToString();
      }
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(work[i].answer, 3 * i + 1) << "task " << i;
  if (tasks_out != nullptr) {
    tasks_out->clear();
    for (auto& t : tasks) tasks_out->push_back(Done{t.ran_on, t.migrated, t.retried});
  }
}

TEST(HybridSchedulerTest, EveryModeAnswersEveryTaskOnce) {
  for (SchedMode mode : {SchedMode::kCpu, SchedMode::kGpu, SchedMode::kHybrid, SchedMode::kGriffin}) {
    SCOPED_TRACE(SchedModeName(mode));
    FakeRunner r;
    CostModel model;
    HybridScheduler s(Options(mode), &r, &model, nullptr);
    s.Start();
    std::mt19937_64 rng(7);
    std::vector<double> cpu_us(400), gpu_us(400);
    for (int i = 0; i < 400; ++i) cpu_us[i] = 5 + rng() % 200, gpu_us[i] = 5 + rng() % 200;
    RunClients(s, 400, 8, [&](int i, Work&, SchedTask& t) {
      t.job.cpu_us = cpu_us[i];
      t.job.gpu_us = gpu_us[i];
      t.job.preferred = i % 2 == 0 ? Unit::kGpu : Unit::kCpu;  // griffin's choice
      t.features.total = static_cast<uint64_t>(i) * 1000;
      t.features.shortest = 100;
      t.features.terms = 2;
    });
    const SchedStatsSnapshot st = s.stats();
    EXPECT_EQ(st.jobs[0] + st.jobs[1], 400u);
    EXPECT_EQ(static_cast<uint64_t>(r.cpu_runs + r.gpu_runs), 400u);
    if (mode == SchedMode::kCpu) {
      EXPECT_EQ(r.gpu_runs, 0);
    }
    if (mode == SchedMode::kGpu) {
      EXPECT_EQ(r.cpu_runs, 0);
    }
    if (mode == SchedMode::kHybrid || mode == SchedMode::kGriffin) {
      EXPECT_GT(r.cpu_runs, 0);
      EXPECT_GT(r.gpu_runs, 0);
    }
    // The model saw the runs of each processor used (a CPU worker's samples are folded in by the
    // time it stops).
    s.Stop();
    EXPECT_EQ(model.samples(Unit::kCpu, QueryMode::kAnd) + model.samples(Unit::kGpu, QueryMode::kAnd), 400u);
  }
}

// SchedTask::model_sample false (query trees, counts, phrases): the job runs as any other, on
// either processor, and neither processor's model learns from it; the others still teach it.
TEST(HybridSchedulerTest, TasksThatAreNotModelSamplesTeachNeitherModel) {
  for (SchedMode mode : {SchedMode::kCpu, SchedMode::kGpu}) {
    SCOPED_TRACE(SchedModeName(mode));
    FakeRunner r;
    CostModel model;
    HybridScheduler s(Options(mode), &r, &model, nullptr);
    s.Start();
    RunClients(s, 200, 4, [&](int i, Work&, SchedTask& t) {
      t.job.cpu_us = 20;
      t.job.gpu_us = 20;
      t.features.total = static_cast<uint64_t>(i) * 1000;
      t.features.shortest = 100;
      t.features.terms = 2;
      t.model_sample = i % 4 == 0;  // 50 of 200
    });
    s.Stop();
    EXPECT_EQ(r.cpu_runs + r.gpu_runs, 200);
    EXPECT_EQ(mode == SchedMode::kGpu ? r.gpu_runs.load() : r.cpu_runs.load(), 200);
    EXPECT_EQ(model.samples(Unit::kCpu, QueryMode::kAnd) + model.samples(Unit::kGpu, QueryMode::kAnd), 50u);
  }
}

// The trace (search-node --tuning trace=FILE): one CSV line per every-th finished job, with where it ran and what the model
// learned; a bad path or every = 0 is refused.
TEST(HybridSchedulerTest, TraceRecordsEveryNthFinishedJob) {
  char dir_template[] = "/tmp/sched_trace_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  for (uint64_t every : {1u, 4u}) {
    SCOPED_TRACE("every " + std::to_string(every));
    const std::string path = dir + "/trace-" + std::to_string(every) + ".csv";
    auto opened = SchedTrace::Open(path, every);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<SchedTrace> trace = std::move(opened).value();
    FakeRunner r;
    CostModel model;
    HybridSchedulerOptions o = Options(SchedMode::kHybrid);
    o.trace = trace.get();
    {
      HybridScheduler s(o, &r, &model, nullptr);
      s.Start();
      RunClients(s, 40, 4, [](int i, Work&, SchedTask& t) {
        if (i % 2 == 0) {
          PreferCpu(t);
          t.job.cpu_us = 50;
        } else {
          t.job.cpu_us = 1e6;  // the GPU's
          t.job.gpu_us = 10;
          t.job.preferred = Unit::kGpu;
        }
        t.features.terms = 2;
        t.features.shortest = 100 + static_cast<uint64_t>(i);
        t.features.total = 1000;
      });
      s.Stop();
    }
    EXPECT_EQ(trace->recorded(), 40 / every);
    trace.reset();  // flushes and closes
    FILE* f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::vector<std::string> lines;
    char buf[1024];
    while (std::fgets(buf, sizeof buf, f) != nullptr) lines.emplace_back(buf);
    std::fclose(f);
    ASSERT_EQ(lines.size(), 1 + 40 / every);
    EXPECT_EQ(lines[0], std::string(SchedTrace::Header()) + "\n");
    int cpu = 0, gpu = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      std::vector<std::string> cells;
      std::string cell;
      for (char c : lines[i]) {
        if (c == ',' || c == '\n') {
          cells.push_back(cell);
          cell.clear();
        } else {
          cell += c;
        }
      }
      ASSERT_EQ(cells.size(), 22u) << lines[i];
      EXPECT_EQ(cells[2], "and");
      EXPECT_EQ(cells[3], "2");
      const bool on_gpu = cells[16] == "gpu";
      (on_gpu ? gpu : cpu) += 1;
      // A CPU run teaches the model its CPU time; the prediction the policy used is in the line.
      if (!on_gpu) {
        EXPECT_GE(std::stod(cells[19]), 0) << lines[i];
      }
      EXPECT_TRUE(cells[8] == "50.0" || cells[8] == "1000000.0") << lines[i];
      EXPECT_EQ(cells[21], "1") << lines[i];
    }
    EXPECT_GT(cpu, 0);
    EXPECT_GT(gpu, 0);
  }
  auto zero = SchedTrace::Open(dir + "/zero.csv", 0);
  EXPECT_FALSE(zero.ok());
  auto bad = SchedTrace::Open(dir + "/no/such/dir/trace.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("cannot create"), std::string::npos) << bad.status().ToString();
}

TEST(HybridSchedulerTest, GpuBatchesGatherQueuedJobs) {
  FakeRunner r;
  HybridSchedulerOptions o = Options(SchedMode::kGpu);
  o.policy.batch_wait = std::chrono::milliseconds(2);
  o.policy.batch_work_us = 1e9;
  o.policy.max_batch = 16;
  HybridScheduler s(o, &r, nullptr, nullptr);
  s.Start();
  RunClients(s, 64, 16, [](int, Work&, SchedTask& t) { t.job.gpu_us = 10; });
  EXPECT_GT(r.max_batch.load(), 1u);
  EXPECT_LE(r.max_batch.load(), 16u);
  EXPECT_LT(r.gpu_batches.load(), 64);
  // The batches' run times reach the policy (SchedOptions::batch_latency's estimate).
  EXPECT_GT(s.stats().gpu_batch_us, 0);
}

// A GPU failure in a batch reruns that job on the CPU; the batch's other jobs are answered.
TEST(HybridSchedulerTest, GpuFailureMidBatchRerunsOnTheCpu) {
  for (SchedMode mode : {SchedMode::kGpu, SchedMode::kHybrid}) {
    SCOPED_TRACE(SchedModeName(mode));
    FakeRunner r;
    HybridScheduler s(Options(mode), &r, nullptr, nullptr);
    s.Start();
    std::vector<Done> done;
    RunClients(
        s, 200, 8,
        [](int i, Work& w, SchedTask& t) {
          t.job.cpu_us = 1000;  // GPU-preferred
          t.job.gpu_us = i % 5 == 0 ? 100 : 10;
          w.fail_on_gpu = i % 3 == 0;
        },
        &done);
    const SchedStatsSnapshot st = s.stats();
    uint64_t retried = 0;
    for (int i = 0; i < 200; ++i) {
      if (i % 3 == 0 && done[i].retried) {
        ++retried;
        EXPECT_EQ(done[i].ran_on, Unit::kCpu);
      }
    }
    EXPECT_EQ(st.gpu_retries, retried);
    EXPECT_GT(retried, 0u);
  }
}

TEST(HybridSchedulerTest, GriffinHandOffsFinishOnTheCpu) {
  FakeRunner r;
  HybridScheduler s(Options(SchedMode::kGriffin), &r, nullptr, nullptr);
  s.Start();
  std::vector<Done> done;
  RunClients(
      s, 120, 6,
      [](int i, Work& w, SchedTask& t) {
        t.job.preferred = Unit::kGpu;
        t.job.cpu_us = 5000;  // stealing never pays
        t.job.gpu_us = 50;
        w.migrate = i % 2 == 1;
      },
      &done);
  uint64_t migrated = 0;
  for (int i = 0; i < 120; ++i)
    if (done[i].migrated) {
      ++migrated;
      EXPECT_EQ(done[i].ran_on, Unit::kCpu);
      EXPECT_EQ(i % 2, 1);
    }
  EXPECT_EQ(s.stats().migrations, migrated);
  EXPECT_GT(migrated, 0u);
}

// Hybrid hands a query's remainder to the CPU only while a CPU worker is idle: with the one
// worker held by a long pinned task the GPU finishes every query itself; once it is free, the
// hand-offs happen. Griffin (above) hands off regardless.
TEST(HybridSchedulerTest, HybridMigratesOnlyWhileACpuWorkerIsIdle) {
  FakeRunner r;
  HybridSchedulerOptions o = Options(SchedMode::kHybrid);
  o.cpu_workers = 1;
  HybridScheduler s(o, &r, nullptr, nullptr);
  s.Start();
  auto gpu_job = [](int, Work& w, SchedTask& t) {
    t.job.cpu_us = 5000;  // the GPU queue; the CPU never steals it
    t.job.gpu_us = 50;
    w.migrate = true;
  };
  // Phase 1: the CPU worker runs a 400 ms pinned task meanwhile.
  Work long_work;
  long_work.x = 7;
  SchedTask long_task;
  long_task.payload = &long_work;
  long_task.job.arrival = SchedClock::now();
  long_task.job.deadline = long_task.job.arrival + std::chrono::seconds(30);
  long_task.job.pinned = Unit::kCpu;
  long_task.job.cpu_us = 400000;
  std::thread holder([&] { EXPECT_TRUE(s.Submit(long_task).ok()); });
  while (r.cpu_runs.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = SchedClock::now();
  std::vector<Done> done;
  RunClients(s, 40, 4, gpu_job, &done);
  const bool within = SchedClock::now() - t0 < std::chrono::milliseconds(350);
  holder.join();
  EXPECT_EQ(long_work.answer, 22);
  if (within) {  // (a very slow machine may outlast the long task: then only the totals count)
    EXPECT_EQ(s.stats().migrations, 0u);
    EXPECT_EQ(r.refused_migrations.load(), 40);
    for (const Done& d : done) EXPECT_EQ(d.ran_on, Unit::kGpu);
  }
  // Phase 2: one query at a time, the worker idle: each is handed off. A worker counts as busy
  // until it is back at the scheduler's lock, just after it answers; each query waits for that, so
  // a loaded host (ctest -j) cannot make the dispatcher see the worker still busy.
  const uint64_t before = s.stats().migrations;
  RunClients(s, 10, 1, [&](int i, Work& w, SchedTask& t) {
    while (s.stats().cpu_busy != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    gpu_job(i, w, t);
  }, &done);
  EXPECT_EQ(s.stats().migrations - before, 10u);
  for (const Done& d : done) {
    EXPECT_TRUE(d.migrated);
    EXPECT_EQ(d.ran_on, Unit::kCpu);
  }
}

TEST(HybridSchedulerTest, ExpiredTaskIsNotRun) {
  FakeRunner r;
  HybridScheduler s(Options(SchedMode::kHybrid), &r, nullptr, nullptr);
  s.Start();
  Work w;
  SchedTask t;
  t.payload = &w;
  t.job.arrival = SchedClock::now() - std::chrono::seconds(2);
  t.job.deadline = SchedClock::now() - std::chrono::seconds(1);
  const Status st = s.Submit(t);
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(w.answer, -1);
  EXPECT_EQ(r.cpu_runs + r.gpu_runs, 0);
  const SchedStatsSnapshot snap = s.stats();
  EXPECT_EQ(snap.deadline_misses[0] + snap.deadline_misses[1], 1u);
}

// SubmitAsync: no caller waits; each task's on_done runs once, when it is answered, on whichever
// thread finished it (a worker, a dispatcher, or the submitting thread running it itself), with
// every answer exact in every mode, hand-offs and GPU failures included.
TEST(HybridSchedulerTest, SubmitAsyncAnswersEveryTaskOnceThroughOnDone) {
  for (SchedMode mode : {SchedMode::kCpu, SchedMode::kGpu, SchedMode::kHybrid, SchedMode::kGriffin}) {
    SCOPED_TRACE(SchedModeName(mode));
    FakeRunner r;
    HybridScheduler s(Options(mode), &r, nullptr, nullptr);
    s.Start();
    constexpr int kN = 300;
    std::vector<Work> work(kN);
    std::vector<SchedTask> tasks(kN);
    std::vector<std::atomic<int>> answered(kN);
    std::mutex mu;
    std::condition_variable cv;
    int left = kN;
    std::vector<std::thread> clients;
    std::atomic<int> next{0};
    for (int c = 0; c < 6; ++c)
      clients.emplace_back([&] {
        for (int i = next.fetch_add(1); i < kN; i = next.fetch_add(1)) {
          work[i].x = i;
          work[i].migrate = i % 7 == 0;
          work[i].fail_on_gpu = i % 11 == 0;
          SchedTask& t = tasks[i];
          t.payload = &work[i];
          t.job.arrival = SchedClock::now();
          t.job.deadline = t.job.arrival + std::chrono::seconds(30);
          t.job.cpu_us = i % 2 == 0 ? 50 : 5000;
          t.job.gpu_us = 100;
          t.job.preferred = i % 2 == 0 ? Unit::kCpu : Unit::kGpu;
          t.on_done = [&, i](SchedTask& done) {
            EXPECT_EQ(&done, &tasks[i]);
            answered[i].fetch_add(1);
            std::lock_guard<std::mutex> lock(mu);
            if (--left == 0) cv.notify_all();
          };
          const Status st = s.SubmitAsync(t);
          EXPECT_TRUE(st.ok()) << st.ToString();
        }
      });
    for (auto& t : clients) t.join();
    {
      std::unique_lock<std::mutex> lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return left == 0; }));
    }
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(answered[i].load(), 1) << i;
      EXPECT_TRUE(tasks[i].status.ok()) << i << ": " << tasks[i].status.ToString();
      EXPECT_EQ(work[i].answer, 3 * i + 1) << i;
      EXPECT_FALSE(static_cast<bool>(tasks[i].on_done));  // cleared before it ran
    }
    s.Stop();
  }
}

// Stop() answers queued async tasks Unavailable through on_done, outside the scheduler's lock (an
// on_done may submit again and be refused); after stop, SubmitAsync refuses without calling it,
// and a task without on_done is refused.
TEST(HybridSchedulerTest, StopAnswersQueuedAsyncTasks) {
  FakeRunner r;
  HybridSchedulerOptions o = Options(SchedMode::kGpu);
  o.policy.batch_wait = std::chrono::seconds(30);  // the batch waits: the tasks stay queued
  o.policy.batch_work_us = 1e12;
  o.policy.max_batch = 1000;
  HybridScheduler s(o, &r, nullptr, nullptr);
  s.Start();
  std::vector<Work> work(5);
  std::vector<SchedTask> tasks(5);
  std::atomic<int> unavailable{0}, refused_again{0};
  for (int i = 0; i < 5; ++i) {
    tasks[i].payload = &work[i];
    tasks[i].job.arrival = SchedClock::now();
    tasks[i].job.gpu_us = 10;
    tasks[i].on_done = [&, i](SchedTask& t) {
      if (t.status.code() == StatusCode::kUnavailable) unavailable.fetch_add(1);
      SchedTask again;
      again.payload = &work[i];
      again.on_done = [](SchedTask&) { ADD_FAILURE() << "a refused task's on_done ran"; };
      if (s.SubmitAsync(again).code() == StatusCode::kUnavailable) refused_again.fetch_add(1);
    };
    ASSERT_TRUE(s.SubmitAsync(tasks[i]).ok());
  }
  s.Stop();
  EXPECT_EQ(unavailable.load(), 5);
  EXPECT_EQ(refused_again.load(), 5);
  EXPECT_EQ(r.gpu_runs.load(), 0);
  SchedTask late;
  late.on_done = [](SchedTask&) { ADD_FAILURE() << "on_done ran for a refused task"; };
  EXPECT_EQ(s.SubmitAsync(late).code(), StatusCode::kUnavailable);
  SchedTask bare;
  EXPECT_EQ(s.SubmitAsync(bare).code(), StatusCode::kInvalidArgument);
}

TEST(HybridSchedulerTest, SubmitAfterStopIsUnavailable) {
  FakeRunner r;
  HybridScheduler s(Options(SchedMode::kHybrid), &r, nullptr, nullptr);
  s.Start();
  s.Stop();
  Work w;
  SchedTask t;
  t.payload = &w;
  EXPECT_EQ(s.Submit(t).code(), StatusCode::kUnavailable);
  s.Stop();  // idempotent
}

}  // namespace
}  // namespace search

namespace search {
namespace {

// Host-aware admission (hybrid): with no idle core on the host, no CPU slot, so one CPU worker
// at a time drains the CPU queue (the others wait, or the GPU takes the work); with idle cores,
// all of them may run; pinned work (hand-offs, GPU failures' reruns) always runs; the other modes
// ignore the host.
TEST(HybridSchedulerTest, HostAwareAdmissionRunsCpuWorkOnlyOnIdleCores) {
  struct Case {
    SchedMode mode;
    double idle;
    bool pinned;
    int max_running;  // 0: more than one
    int slots;        // -1: not checked
  };
  for (const Case& c : {Case{SchedMode::kHybrid, 0.0, false, 1, 0}, Case{SchedMode::kHybrid, 100.0, false, 0, 4},
                        Case{SchedMode::kHybrid, 0.0, true, 0, -1}, Case{SchedMode::kGriffin, 0.0, false, 0, 4},
                        Case{SchedMode::kCpu, 0.0, false, 0, 4}, Case{SchedMode::kHybrid, -1.0, false, 0, 4}}) {
    SCOPED_TRACE(std::string(SchedModeName(c.mode)) + " idle " + std::to_string(c.idle) +
                 (c.pinned ? " pinned" : ""));
    FakeRunner r;
    CostModel model;
    HybridSchedulerOptions o = Options(c.mode);
    o.cpu_workers = 4;
    std::atomic<int> asked{0};
    o.idle_cores = [&] {
      asked.fetch_add(1);
      return c.idle;
    };
    HybridScheduler s(o, &r, &model, nullptr);
    s.Start();
    RunClients(s, 120, 8, [&](int, Work&, SchedTask& t) {
      PreferCpu(t);
      if (c.pinned) t.job.pinned = Unit::kCpu;
    });
    EXPECT_EQ(r.gpu_runs.load(), 0);
    EXPECT_EQ(r.cpu_runs.load(), 120);
    if (c.max_running > 0) {
      EXPECT_EQ(r.max_cpu_running.load(), c.max_running);
    } else {
      EXPECT_GT(r.max_cpu_running.load(), 1);
      EXPECT_LE(r.max_cpu_running.load(), 4);
    }
    if (c.slots >= 0) {
      EXPECT_EQ(s.stats().cpu_slots, static_cast<size_t>(c.slots));
    }
    if (c.mode != SchedMode::kHybrid) {
      EXPECT_EQ(asked.load(), 0);  // only hybrid chooses where CPU-engine work runs
    } else {
      EXPECT_GT(asked.load(), 0);
    }
    s.Stop();
  }
}

// The CPU workers' nice value by scheduler: lowered only where they share the host with the GPU path.
TEST(HybridSchedulerTest, DefaultCpuNiceByMode) {
  EXPECT_EQ(DefaultCpuNice(SchedMode::kCpu), 0);
  EXPECT_EQ(DefaultCpuNice(SchedMode::kGpu), 0);
  EXPECT_EQ(DefaultCpuNice(SchedMode::kHybrid), 10);
  EXPECT_EQ(DefaultCpuNice(SchedMode::kGriffin), 10);
}

// The node's default sched_cpu_cores by scheduler and CPUs: under hybrid 5/8 of them (rounded) from 8
// CPUs on, always leaving some to the GPU path; otherwise shared (0).
TEST(HybridSchedulerTest, DefaultSchedCpuCoresByModeAndCpus) {
  EXPECT_EQ(DefaultSchedCpuCores(SchedMode::kHybrid, 16), 10u);
  EXPECT_EQ(DefaultSchedCpuCores(SchedMode::kHybrid, 8), 5u);
  EXPECT_EQ(DefaultSchedCpuCores(SchedMode::kHybrid, 12), 8u);
  EXPECT_EQ(DefaultSchedCpuCores(SchedMode::kHybrid, 64), 40u);
  EXPECT_EQ(DefaultSchedCpuCores(SchedMode::kHybrid, 7), 0u);
  EXPECT_EQ(DefaultSchedCpuCores(SchedMode::kHybrid, 2), 0u);
  for (size_t cpus = 8; cpus <= 256; ++cpus) {
    const size_t n = DefaultSchedCpuCores(SchedMode::kHybrid, cpus);
    EXPECT_GE(n, 1u) << cpus;
    EXPECT_GE(cpus - n, 3u) << cpus;
  }
  for (SchedMode m : {SchedMode::kCpu, SchedMode::kGpu, SchedMode::kGriffin}) {
    EXPECT_EQ(DefaultSchedCpuCores(m, 16), 0u);
    EXPECT_EQ(DefaultSchedCpuCores(m, 64), 0u);
  }
  EXPECT_GT(kDefaultCheapFillUs, 0.0);
}

// The node's GPU dispatchers by scheduler: fewer, larger batches when every job goes to the GPU.
TEST(HybridSchedulerTest, DefaultGpuDispatchersByMode) {
  EXPECT_EQ(DefaultGpuDispatchers(SchedMode::kCpu), 0u);
  EXPECT_EQ(DefaultGpuDispatchers(SchedMode::kGpu), 4u);
  EXPECT_EQ(DefaultGpuDispatchers(SchedMode::kHybrid), 8u);
  EXPECT_EQ(DefaultGpuDispatchers(SchedMode::kGriffin), 8u);
  // With the CPU workers on cores of their own, hybrid's GPU path keeps the rest: fewer, larger batches.
  EXPECT_EQ(DefaultGpuDispatchers(SchedMode::kHybrid, true), 4u);
  EXPECT_EQ(DefaultGpuDispatchers(SchedMode::kGriffin, true), 8u);
  EXPECT_EQ(DefaultGpuDispatchers(SchedMode::kGpu, true), 4u);
}

// idle_reserve: the CPU engine leaves that many of the host's idle cores alone. With 5 idle, a
// reserve of 6 gives no slot (one worker drains the CPU queue alone), a reserve of 1 all four.
// The node's default reserve is 3/8 of the cores, at least 1.
TEST(HybridSchedulerTest, IdleReserveLeavesThatManyCoresToTheHost) {
  EXPECT_EQ(DefaultIdleReserve(16), 6.0);
  EXPECT_EQ(DefaultIdleReserve(8), 3.0);
  EXPECT_EQ(DefaultIdleReserve(64), 24.0);
  EXPECT_EQ(DefaultIdleReserve(2), 1.0);
  EXPECT_EQ(DefaultIdleReserve(1), 1.0);
  for (double reserve : {6.0, 1.0}) {
    SCOPED_TRACE("reserve " + std::to_string(reserve));
    FakeRunner r;
    CostModel model;
    HybridSchedulerOptions o = Options(SchedMode::kHybrid);
    o.cpu_workers = 4;
    o.idle_reserve = reserve;
    o.idle_cores = [] { return 5.0; };
    HybridScheduler s(o, &r, &model, nullptr);
    s.Start();
    RunClients(s, 120, 8, [](int, Work&, SchedTask& t) { PreferCpu(t); });
    EXPECT_EQ(r.cpu_runs.load(), 120);
    if (reserve > 5) {
      EXPECT_EQ(r.max_cpu_running.load(), 1);
      EXPECT_EQ(s.stats().cpu_slots, 0u);
    } else {
      EXPECT_GT(r.max_cpu_running.load(), 1);
      EXPECT_EQ(s.stats().cpu_slots, 4u);
    }
    s.Stop();
  }
}

// Cheap jobs (SchedPolicy::Cheap) run on the CPU even with no idle core on the host, on as many
// workers as there are (they cost the host less than the GPU path's own work for them); the
// others, which the ratio gives the GPU, run there.
TEST(HybridSchedulerTest, CheapJobsRunOnTheCpuPastTheAdmission) {
  FakeRunner r;
  CostModel model;
  HybridSchedulerOptions o = Options(SchedMode::kHybrid);
  o.cpu_workers = 4;
  o.policy.gpu_alone_us = 2000;
  // Every cheap job stays on the CPU: neither the balance rule nor the GPU's stealing moves one
  // (both are sched_policy_test's).
  o.policy.balance = false;
  o.policy.steal = false;
  o.idle_cores = [] { return 0.0; };  // no slot: without the cheap rule one worker at a time
  HybridScheduler s(o, &r, &model, nullptr);
  s.Start();
  std::vector<Done> done;
  RunClients(
      s, 200, 16,
      [](int i, Work&, SchedTask& t) {
        t.job.cpu_us = i % 2 == 0 ? 1500 : 1e5;  // odd ones: 100 ms on the CPU, never cheap
        t.job.gpu_us = 10;
      },
      &done);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(done[i].ran_on, i % 2 == 0 ? Unit::kCpu : Unit::kGpu) << i;
  EXPECT_EQ(r.cpu_runs.load(), 100);
  EXPECT_GT(r.max_cpu_running.load(), 1);
  EXPECT_LE(r.max_cpu_running.load(), 4);
  // The slots as the last job's runner leaves them: it may still be between answering its task
  // and giving its slot back when the clients return.
  for (int i = 0; i < 2000 && s.stats().cpu_slots != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.stats().cpu_slots, 0u);
  s.Stop();
}

TEST(HybridSchedulerTest, QueuedCpuWorkSpreadsOnceTheHostHasRoom) {
  // The host is busy at first (no idle core): one worker drains the CPU queue alone while the
  // others sleep, and one of them polls the host. When cores go idle, the queued work must spread
  // over the workers again (the poller takes a job and wakes the next) with every task answered.
  FakeRunner r;
  CostModel model;
  HybridSchedulerOptions o = Options(SchedMode::kHybrid);
  o.cpu_workers = 4;
  o.idle_reserve = 0;
  std::atomic<bool> room{false};
  o.idle_cores = [&] { return room.load() ? 100.0 : 0.0; };
  HybridScheduler s(o, &r, &model, nullptr);
  s.Start();
  std::atomic<int> submitted{0};
  std::thread opener([&] {
    while (submitted.load() < 40) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(r.max_cpu_running.load(), 1);  // one at a time while the host had no room
    room = true;
  });
  RunClients(s, 400, 16, [&](int, Work&, SchedTask& t) {
    t.job.cpu_us = 2000;
    t.job.gpu_us = 1e7;
    t.job.preferred = Unit::kCpu;
    submitted.fetch_add(1);
  });
  opener.join();
  EXPECT_EQ(r.cpu_runs.load(), 400);
  EXPECT_EQ(r.gpu_runs.load(), 0);
  EXPECT_GT(r.max_cpu_running.load(), 1);
  EXPECT_EQ(s.stats().cpu_slots, 4u);
  s.Stop();
}

TEST(HybridSchedulerTest, CpuWorkersRunAtTheirNiceValue) {
  errno = 0;
  const int base = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  for (int nice : {0, 5}) {
    SCOPED_TRACE("cpu_nice " + std::to_string(nice));
    FakeRunner r;
    CostModel model;
    HybridSchedulerOptions o = Options(SchedMode::kCpu);
    o.cpu_nice = nice;
    HybridScheduler s(o, &r, &model, nullptr);
    s.Start();
    RunClients(s, 20, 2, [](int, Work&, SchedTask& t) { t.job.cpu_us = 50; });
    EXPECT_EQ(r.cpu_nice.load(), nice == 0 ? base : std::min(19, base + nice));
    s.Stop();
  }
  errno = 0;
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), base);  // the calling thread's own is untouched
}

// cpu_worker_cpus: every CPU job runs on a worker pinned to those CPUs (never on the submitting
// thread, even with caller_runs), and the submitting thread's own mask is untouched.
TEST(HybridSchedulerTest, CpuWorkersRunOnTheirOwnCpus) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs, has " << allowed.size();
  class MaskRecorder : public SchedRunner {
   public:
    void RunCpu(SchedTask& t) override {
      std::lock_guard lock(mu);
      masks.push_back(AllowedCpus());
      threads.push_back(std::this_thread::get_id());
      cpus.push_back(sched_getcpu());
      t.status = Status::Ok();
    }
    void RunGpuBatch(std::span<SchedTask* const>) override {}
    std::mutex mu;
    std::vector<std::vector<int>> masks;
    std::vector<std::thread::id> threads;
    std::vector<int> cpus;
  };
  const CpuSplit split = SplitCpus(allowed, 1);
  ASSERT_EQ(split.dedicated, std::vector<int>{allowed.back()});
  ASSERT_EQ(split.rest.size(), allowed.size() - 1);
  for (SchedMode mode : {SchedMode::kCpu, SchedMode::kHybrid}) {
    SCOPED_TRACE(SchedModeName(mode));
    MaskRecorder r;
    HybridSchedulerOptions o = Options(mode);
    o.cpu_workers = 2;
    o.caller_runs = true;  // overridden: the caller is not on the workers' CPUs
    o.cpu_worker_cpus = split.dedicated;
    HybridScheduler s(o, &r, nullptr, nullptr);
    EXPECT_FALSE(s.options().caller_runs);
    s.Start();
    for (int i = 0; i < 8; ++i) {
      SchedTask t;
      t.job.arrival = SchedClock::now();
      t.job.deadline = t.job.arrival + std::chrono::seconds(30);
      PreferCpu(t);
      t.job.cpu_us = 10;
      ASSERT_TRUE(s.Submit(t).ok());
      EXPECT_EQ(t.ran_on, Unit::kCpu);
    }
    s.Stop();
    EXPECT_EQ(s.cpu_pin_failures(), 0u);
    ASSERT_EQ(r.masks.size(), 8u);
    for (size_t i = 0; i < r.masks.size(); ++i) {
      EXPECT_EQ(r.masks[i], split.dedicated) << "job " << i;
      EXPECT_EQ(r.cpus[i], split.dedicated[0]) << "job " << i;
      EXPECT_NE(r.threads[i], std::this_thread::get_id()) << "job " << i;
    }
  }
  EXPECT_EQ(AllowedCpus(), allowed);  // this thread's own mask is untouched
}

// CPUs the kernel refuses (here one the host does not have): Start() returns with every worker's
// failure counted and in the gauge, and the workers still answer, on the CPUs they inherited.
TEST(HybridSchedulerTest, CpuWorkersThatCannotPinAreCountedAtStartAndStillRun) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  ASSERT_LT(allowed.back(), CPU_SETSIZE - 1);
  class Counter : public SchedRunner {
   public:
    void RunCpu(SchedTask& t) override {
      runs.fetch_add(1);
      t.status = Status::Ok();
    }
    void RunGpuBatch(std::span<SchedTask* const>) override {}
    std::atomic<int> runs{0};
  } r;
  CostModel model;
  Metrics metrics("node");
  HybridSchedulerOptions o = Options(SchedMode::kCpu);
  o.cpu_workers = 3;
  o.cpu_worker_cpus = {CPU_SETSIZE - 1};
  HybridScheduler s(o, &r, &model, &metrics);
  s.Start();
  EXPECT_EQ(s.cpu_pin_failures(), 3u);  // known when Start() returns, not once jobs run
  const std::string text = metrics.SerializeText();
  EXPECT_NE(text.find("\nsearch_sched_cpu_pin_failures 3\n"), std::string::npos) << text;
  for (int i = 0; i < 4; ++i) {
    SchedTask t;
    t.job.arrival = SchedClock::now();
    t.job.deadline = t.job.arrival + std::chrono::seconds(30);
    PreferCpu(t);
    ASSERT_TRUE(s.Submit(t).ok());
    EXPECT_TRUE(t.status.ok());
    EXPECT_EQ(t.ran_on, Unit::kCpu);
  }
  s.Stop();
  EXPECT_EQ(r.runs.load(), 4);
  EXPECT_EQ(AllowedCpus(), allowed);
}

// caller_runs: a CPU job that an idle CPU worker would take at once runs on the thread that
// submitted it (no hand-off to a worker and back); with it off, or with every CPU worker busy,
// a worker runs it. Either way the answer and the counts are the same.
TEST(HybridSchedulerTest, CallerRunsCpuWorkAnIdleWorkerWouldTake) {
  class ThreadRecorder : public SchedRunner {
   public:
    void RunCpu(SchedTask& t) override {
      std::unique_lock lock(mu);
      threads.push_back(std::this_thread::get_id());
      cv.wait(lock, [&] { return !block; });
      t.status = Status::Ok();
    }
    void RunGpuBatch(std::span<SchedTask* const>) override {}
    std::mutex mu;
    std::condition_variable cv;
    bool block = false;
    std::vector<std::thread::id> threads;
  };
  auto submit = [](HybridScheduler& s, double caller_max_us = std::numeric_limits<double>::infinity()) {
    SchedTask t;
    t.job.arrival = SchedClock::now();
    t.job.deadline = t.job.arrival + std::chrono::seconds(30);
    t.job.cpu_us = 10;
    t.job.gpu_us = 1000;
    t.caller_max_us = caller_max_us;
    return s.Submit(t);
  };
  for (bool caller_runs : {true, false}) {
    SCOPED_TRACE(caller_runs);
    ThreadRecorder r;
    HybridSchedulerOptions o = Options(SchedMode::kCpu);
    o.cpu_workers = 1;
    o.caller_runs = caller_runs;
    HybridScheduler s(o, &r, nullptr, nullptr);
    s.Start();
    ASSERT_TRUE(submit(s).ok());
    ASSERT_EQ(r.threads.size(), 1u);
    EXPECT_EQ(r.threads[0] == std::this_thread::get_id(), caller_runs);
    EXPECT_EQ(s.stats().jobs[0], 1u);
  }
  // A bounded caller (SchedTask::caller_max_us, the node's I/O thread) runs only a job predicted
  // within its bound: the 10-us job at a bound of 10 and 50, a worker's at 9.9 and "never" (-1).
  for (double bound : {10.0, 50.0, 9.9, -1.0}) {
    SCOPED_TRACE(bound);
    ThreadRecorder r;
    HybridSchedulerOptions o = Options(SchedMode::kCpu);
    o.cpu_workers = 1;
    HybridScheduler s(o, &r, nullptr, nullptr);
    s.Start();
    ASSERT_TRUE(submit(s, bound).ok());
    ASSERT_EQ(r.threads.size(), 1u);
    EXPECT_EQ(r.threads[0] == std::this_thread::get_id(), bound >= 10);
    EXPECT_EQ(s.stats().jobs[0], 1u);
  }
  // The one CPU slot busy (a job blocked in the runner): the next job waits and runs on whichever
  // thread takes it after the first, not beside it.
  ThreadRecorder r;
  HybridSchedulerOptions o = Options(SchedMode::kCpu);
  o.cpu_workers = 1;
  HybridScheduler s(o, &r, nullptr, nullptr);
  s.Start();
  {
    std::lock_guard lock(r.mu);
    r.block = true;
  }
  std::thread first([&] { EXPECT_TRUE(submit(s).ok()); });
  for (int i = 0; i < 2000; ++i) {
    {
      std::lock_guard lock(r.mu);
      if (!r.threads.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::thread second([&] { EXPECT_TRUE(submit(s).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard lock(r.mu);
    EXPECT_EQ(r.threads.size(), 1u);  // the second waits for the slot
    r.block = false;
  }
  r.cv.notify_all();
  first.join();
  second.join();
  EXPECT_EQ(r.threads.size(), 2u);
  EXPECT_EQ(s.stats().jobs[0], 2u);
}

using testing::SeriesValue;

// The GPU dispatchers' CPU time is counted in two parts: inside the runner's batches (their host
// work; a device wait that sleeps costs none) and the scheduler's own (taking batches, answering).
TEST(HybridSchedulerTest, DispatcherCpuTimeIsSplitBetweenBatchesAndScheduling) {
  FakeRunner r;
  r.gpu_spin_us = 2000;
  CostModel model;
  Metrics metrics("node");
  HybridScheduler s(Options(SchedMode::kGpu), &r, &model, &metrics);
  s.Start();
  RunClients(s, 60, 6, [](int, Work&, SchedTask& t) {
    t.job.cpu_us = 100;
    t.job.gpu_us = 100;
  });
  s.Stop();
  const std::string text = metrics.SerializeText();
  auto value = [&](const std::string& series) { return SeriesValue(text, series); };
  const double batch = value("search_sched_gpu_dispatch_cpu_seconds_total{part=\"batch\"}");
  const double sched = value("search_sched_gpu_dispatch_cpu_seconds_total{part=\"scheduler\"}");
  const int batches = r.gpu_batches.load();
  ASSERT_GT(batches, 0);
  // Each batch spun 2 ms of its thread's CPU time; the sleeps before it cost none.
  EXPECT_GE(batch, batches * 2e-3) << text;
  EXPECT_LT(batch, batches * 2e-3 * 1.5 + 0.05);
  EXPECT_GE(sched, 0.0);
  EXPECT_LT(sched, batch);
}

// n async CPU-preferred tasks of cpu_us each (the fake engine sleeps that long); each one's
// on_done runs body(i), then counts it answered. Wait() returns once all are (false after 60 s).
struct AsyncCpuTasks {
  explicit AsyncCpuTasks(int n) : work(n), tasks(n), left(n) {}
  void Submit(HybridScheduler& s, double cpu_us, std::function<void(int)> body) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      work[i].x = static_cast<int64_t>(i);
      SchedTask& t = tasks[i];
      t.payload = &work[i];
      t.job.arrival = SchedClock::now();
      t.job.deadline = t.job.arrival + std::chrono::seconds(30);
      PreferCpu(t);
      t.job.cpu_us = cpu_us;
      t.on_done = [this, body, i](SchedTask&) {
        body(static_cast<int>(i));
        std::lock_guard<std::mutex> lock(mu);
        if (--left == 0) cv.notify_all();
      };
      ASSERT_TRUE(s.SubmitAsync(t).ok());
    }
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return left == 0; });
  }
  std::vector<Work> work;
  std::vector<SchedTask> tasks;
  std::mutex mu;
  std::condition_variable cv;
  int left;
};

// A CPU worker's time with a job is counted in parts: the engine's run, then, while the worker
// takes nothing else, the job's accounting, its answer's on_done and the wait for the scheduler's
// lock. Here each run sleeps 10 ms and each on_done 40 ms: gaps that a loaded machine's sleep and
// wake-up noise (milliseconds) cannot close.
TEST(HybridSchedulerTest, CpuWorkerTimeIsSplitBetweenRunAndFinish) {
  FakeRunner r;
  Metrics metrics("node");
  HybridScheduler s(Options(SchedMode::kCpu), &r, nullptr, &metrics);
  s.Start();
  constexpr int kN = 30;
  AsyncCpuTasks jobs(kN);
  jobs.Submit(s, 10000, [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(40)); });
  ASSERT_TRUE(jobs.Wait());
  s.Stop();
  const std::string text = metrics.SerializeText();
  auto value = [&](const std::string& series) { return SeriesValue(text, series); };
  const double run = value("search_sched_cpu_worker_seconds_total{part=\"run\"}");
  const double account = value("search_sched_cpu_worker_seconds_total{part=\"account\"}");
  const double answer = value("search_sched_cpu_worker_seconds_total{part=\"answer\"}");
  const double lock = value("search_sched_cpu_worker_seconds_total{part=\"lock\"}");
  EXPECT_EQ(r.cpu_runs.load(), kN);
  EXPECT_GE(run, kN * 10e-3) << text;
  EXPECT_GE(answer, kN * 40e-3) << text;
  EXPECT_LT(run, answer);  // 10 ms against 40 ms a job, each plus its scheduling noise
  // Neither the run's sleep nor on_done's is counted as accounting or the lock's wait (either
  // would add at least `run`: 5 ms a job of slack for the real accounting and lock waits).
  EXPECT_GE(account, 0.0) << text;
  EXPECT_GE(lock, 0.0) << text;
  EXPECT_LT(account + lock, run / 2) << text;
}

// A CPU worker keeps its jobs' model samples and folds them in when the model's lock is free (at
// least kFoldEvery at a time), and all that are left before it waits for work: once the jobs are
// answered and the workers idle, the model holds every one, with the scheduler still running.
TEST(HybridSchedulerTest, CpuWorkersFoldTheirModelSamplesBeforeTheyIdle) {
  FakeRunner r;
  CostModel model;
  Metrics metrics("node");
  HybridSchedulerOptions o = Options(SchedMode::kCpu);
  o.cpu_workers = 3;
  o.caller_runs = false;  // the workers run every job (a caller's run observes at once)
  HybridScheduler s(o, &r, &model, &metrics);
  s.Start();
  constexpr int kN = 45;  // not a multiple of kFoldEvery per worker: some are left at the end
  AsyncCpuTasks jobs(kN);
  for (int i = 0; i < kN; ++i) jobs.tasks[i].features.total = static_cast<uint64_t>(i) * 100;
  jobs.Submit(s, 200, [](int) {});
  ASSERT_TRUE(jobs.Wait());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (model.samples(Unit::kCpu, QueryMode::kAnd) < kN && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(model.samples(Unit::kCpu, QueryMode::kAnd), static_cast<uint64_t>(kN));
  EXPECT_EQ(r.cpu_runs.load(), kN);
  const std::string text = metrics.SerializeText();
  EXPECT_GE(SeriesValue(text, "search_sched_prediction_error_ratio{processor=\"cpu\"}"), 0.0) << text;
  // What the model learned from, with a prediction (FakeRunner's jobs take no CPU time: only the
  // predictions are sure to be above 0), and nothing on the GPU.
  EXPECT_GT(SeriesValue(text, "search_sched_model_predicted_seconds_total{processor=\"cpu\"}"), 0.0) << text;
  EXPECT_GE(SeriesValue(text, "search_sched_model_observed_seconds_total{processor=\"cpu\"}"), 0.0) << text;
  EXPECT_EQ(SeriesValue(text, "search_sched_model_predicted_seconds_total{processor=\"gpu\"}"), 0.0) << text;
  s.Stop();
  EXPECT_EQ(model.samples(Unit::kCpu, QueryMode::kAnd), static_cast<uint64_t>(kN));
}

}  // namespace
}  // namespace search
