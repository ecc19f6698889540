// hybrid_scheduler.hpp: worker loops over SchedPolicy.
#include "sched/hybrid_scheduler.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <cmath>
#include <latch>
#include <memory>
#include <string>

#include "core/cpus.hpp"
#include "core/thread_cpu.hpp"
#include "core/thread_name.hpp"
#include "metrics/families.hpp"
#include "metrics/metrics.hpp"

namespace search {

namespace {
double MicrosBetween(SchedTime a, SchedTime b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

using families::Family;
// The scheduler's metric families (names and help texts; labels in the comments), registered by
// MetricSet on the registry it is given. Dashboards, alerts and tests refer to these names.
// Labels: processor (cpu|gpu); queue (gpu|cpu|flexible) for the queue length.
constexpr Family kSchedQueueLength{"search_sched_queue_length",
                                   "Jobs waiting in the scheduler's queue (gpu, cpu or flexible)."};
constexpr Family kSchedWait{"search_sched_wait_seconds",
                            "Time a job waited in the scheduler's queues before a processor took it."};
constexpr Family kSchedRun{"search_sched_run_seconds", "Time a processor spent running a job, in seconds."};
constexpr Family kSchedJobs{"search_sched_jobs_total", "Jobs finished, by the processor that finished them."};
constexpr Family kSchedStolen{"search_sched_stolen_total",
                              "Jobs taken by the processor that did not prefer them (work stealing)."};
constexpr Family kSchedMigrations{"search_sched_migrations_total",
                                  "Queries handed from the GPU to the CPU mid-query (Griffin)."};
constexpr Family kSchedBalanced{
    "search_sched_balanced_total",
    "Jobs the cost ratio gave the CPU queue that went to the GPU queue, which would finish them sooner."};
constexpr Family kSchedCheap{
    "search_sched_cheap_total",
    "Jobs queued for the CPU as cheap: predicted to take no longer there than one query alone on the GPU (hybrid)."};
constexpr Family kSchedCheapThreshold{
    "search_sched_cheap_threshold_seconds",
    "Predicted CPU time under which a job is cheap and queues for the CPU (hybrid): one query's time alone on "
    "the GPU, or higher while the adaptive bound finds the GPU behind the CPU."};
constexpr Family kSchedCpuSlots{
    "search_sched_cpu_slots",
    "CPU workers allowed to run CPU-engine queries now: the host's idle cores allow them (hybrid)."};
constexpr Family kSchedCpuWorker{
    "search_sched_cpu_worker_seconds_total",
    "Wall time of the scheduler's CPU workers with a job, by part: run (inside the CPU engine), then until "
    "the worker is back at the scheduler: account (the job's counters, the cost model, the trace), answer "
    "(its on_done: the node's reply) and lock (the wait for the "
    "scheduler's lock). A worker is taken for all four; only run is in search_sched_run_seconds."};
constexpr Family kSchedCpuPinFailures{
    "search_sched_cpu_pin_failures",
    "CPU workers that could not pin themselves to the CPUs of their own they were given (they run on the "
    "process's other CPUs); 0 when none were given."};
constexpr Family kSchedHost{
    "search_sched_host_seconds",
    "Host time a query spends around the scheduler, outside its queue wait and run: phase features (feature "
    "lookup, predictions), submit (queueing, the scheduler lock), return (wake-up after its processor finished), "
    "resolve (an answer's external ids, after its CPU job or GPU batch)."};
constexpr Family kSchedGpuRetries{"search_sched_gpu_retries_total",
                                  "Jobs the GPU could not run that reran on the CPU."};
constexpr Family kSchedDeadlineMisses{"search_sched_deadline_misses_total",
                                      "Jobs answered after their deadline, or expired in the queue."};
constexpr Family kSchedGpuBatches{"search_sched_gpu_batches_total", "GPU batches run by the scheduler."};
constexpr Family kSchedDispatchCpu{
    "search_sched_gpu_dispatch_cpu_seconds_total",
    "CPU time of the GPU dispatcher threads: part batch (inside the GPU executor: preparing, launching and "
    "finishing a batch's queries; a device wait that sleeps costs none) and part scheduler (taking batches "
    "from the queues, feeding the cost model, answering the jobs)."};
constexpr Family kSchedModelObserved{
    "search_sched_model_observed_seconds_total",
    "Run time (CPU jobs: the worker's CPU time) of the jobs the cost model learned from that it had a prediction "
    "for; over search_sched_model_predicted_seconds_total, the model's bias on the work it saw (above 1: it "
    "predicts too little)."};
constexpr Family kSchedModelPredicted{"search_sched_model_predicted_seconds_total",
                                      "What the cost model had predicted for those jobs before it learned from them."};
constexpr Family kSchedPredictionError{
    "search_sched_prediction_error_ratio",
    "Relative error |predicted - actual| / actual of the cost model's run-time predictions."};

}  // namespace

const char* SchedHostPhaseName(SchedHostPhase p) {
  switch (p) {
    case SchedHostPhase::kFeatures:
      return "features";
    case SchedHostPhase::kSubmit:
      return "submit";
    case SchedHostPhase::kReturn:
      return "return";
    case SchedHostPhase::kResolve:
      return "resolve";
  }
  return "?";
}

struct HybridScheduler::MetricSet {
  prometheus::Gauge* queue[kNumSchedQueues] = {};
  prometheus::Histogram* wait[kNumUnits] = {};
  prometheus::Histogram* run[kNumUnits] = {};
  prometheus::Counter* jobs[kNumUnits] = {};
  prometheus::Counter* stolen[kNumUnits] = {};
  prometheus::Counter* misses[kNumUnits] = {};
  prometheus::Gauge* error[kNumUnits] = {};
  prometheus::Counter* model_observed[kNumUnits] = {};
  prometheus::Counter* model_predicted[kNumUnits] = {};
  prometheus::Counter* migrations = nullptr;
  prometheus::Counter* balanced = nullptr;
  prometheus::Counter* cheap = nullptr;
  prometheus::Counter* retries = nullptr;
  prometheus::Counter* batches = nullptr;
  prometheus::Counter* dispatch_cpu[2] = {};  // [0] part="batch", [1] part="scheduler"
  prometheus::Gauge* cpu_slots = nullptr;
  prometheus::Gauge* cpu_pin_failures = nullptr;
  prometheus::Counter* cpu_worker[4] = {};  // part= run, account, answer, lock
  prometheus::Gauge* cheap_threshold = nullptr;
  prometheus::Histogram* host[kNumSchedHostPhases] = {};

  explicit MetricSet(Metrics& m) {
    auto& r = m.registry();
    auto& q = GaugeFamily(r, kSchedQueueLength);
    for (size_t i = 0; i < kNumSchedQueues; ++i)
      queue[i] = &q.Add({{"queue", SchedQueueName(static_cast<SchedQueue>(i))}});
    auto& w = HistogramFamily(r, kSchedWait);
    auto& rn = HistogramFamily(r, kSchedRun);
    auto& j = CounterFamily(r, kSchedJobs);
    auto& s = CounterFamily(r, kSchedStolen);
    auto& d = CounterFamily(r, kSchedDeadlineMisses);
    auto& e = GaugeFamily(r, kSchedPredictionError);
    auto& mo = CounterFamily(r, kSchedModelObserved);
    auto& mp = CounterFamily(r, kSchedModelPredicted);
    for (size_t u = 0; u < kNumUnits; ++u) {
      const prometheus::Labels l{{"processor", UnitName(static_cast<Unit>(u))}};
      wait[u] = &w.Add(l, LatencyBuckets());
      run[u] = &rn.Add(l, LatencyBuckets());
      jobs[u] = &j.Add(l);
      stolen[u] = &s.Add(l);
      misses[u] = &d.Add(l);
      error[u] = &e.Add(l);
      model_observed[u] = &mo.Add(l);
      model_predicted[u] = &mp.Add(l);
    }
    migrations = &CounterFamily(r, kSchedMigrations).Add({});
    balanced = &CounterFamily(r, kSchedBalanced).Add({});
    cheap = &CounterFamily(r, kSchedCheap).Add({});
    retries = &CounterFamily(r, kSchedGpuRetries).Add({});
    batches = &CounterFamily(r, kSchedGpuBatches).Add({});
    auto& dc = CounterFamily(r, kSchedDispatchCpu);
    dispatch_cpu[0] = &dc.Add({{"part", "batch"}});
    dispatch_cpu[1] = &dc.Add({{"part", "scheduler"}});
    cpu_slots = &GaugeFamily(r, kSchedCpuSlots).Add({});
    cpu_pin_failures = &GaugeFamily(r, kSchedCpuPinFailures).Add({});
    auto& cw = CounterFamily(r, kSchedCpuWorker);
    cpu_worker[0] = &cw.Add({{"part", "run"}});
    cpu_worker[1] = &cw.Add({{"part", "account"}});
    cpu_worker[2] = &cw.Add({{"part", "answer"}});
    cpu_worker[3] = &cw.Add({{"part", "lock"}});
    cheap_threshold = &GaugeFamily(r, kSchedCheapThreshold).Add({});
    auto& h = HistogramFamily(r, kSchedHost);
    for (size_t p = 0; p < kNumSchedHostPhases; ++p)
      host[p] = &h.Add({{"phase", SchedHostPhaseName(static_cast<SchedHostPhase>(p))}}, LatencyBuckets());
  }
};

HybridScheduler::HybridScheduler(HybridSchedulerOptions options, SchedRunner* runner, CostModel* model,
                                 Metrics* metrics)
    : options_(options), runner_(runner), model_(model), policy_([&] {
        SchedOptions p = options.policy;
        p.cpu_parallelism = std::max<size_t>(options.cpu_workers, 1);
        p.cpu_workers = p.cpu_parallelism;
        p.gpu_parallelism = std::max<size_t>(options.gpu_dispatchers, 1);
        return p;
      }()) {
  options_.cpu_workers = std::max<size_t>(options_.cpu_workers, 1);
  if (options_.policy.mode == SchedMode::kCpu) options_.gpu_dispatchers = 0;
  // Only hybrid: griffin keeps Liu et al.'s placement (and cpu and gpu have no choice to make).
  if (options_.policy.mode != SchedMode::kHybrid) options_.idle_cores = nullptr;
  if (!options_.cpu_worker_cpus.empty()) options_.caller_runs = false;  // the caller is on the GPU path's cores
  cpu_slots_ = options_.cpu_workers;
  if (metrics != nullptr) {
    metrics_ = std::make_unique<MetricSet>(*metrics);
    metrics_->cpu_slots->Set(static_cast<double>(cpu_slots_));
  }
}

HybridScheduler::~HybridScheduler() { Stop(); }

void HybridScheduler::Start() {
  if (started_) return;
  started_ = true;
  // Each CPU worker pins itself before it takes a job; Start() returns once all have tried, so
  // cpu_pin_failures() (and its gauge) is final when the caller reports the start.
  // (Shared: the last worker may still be inside count_down when wait returns.)
  auto pinned = std::make_shared<std::latch>(static_cast<std::ptrdiff_t>(options_.cpu_workers));
  for (size_t i = 0; i < options_.cpu_workers; ++i)
    threads_.emplace_back([this, pinned] {
      SetThreadName("sched-cpu");
      if (!options_.cpu_worker_cpus.empty() && !PinThisThread(options_.cpu_worker_cpus)) pin_failures_.fetch_add(1);
      pinned->count_down();
      if (options_.cpu_nice > 0) (void)RaiseThreadNice(options_.cpu_nice);
      CpuLoop();
    });
  pinned->wait();
  if (metrics_) metrics_->cpu_pin_failures->Set(static_cast<double>(pin_failures_.load()));
  for (size_t i = 0; i < options_.gpu_dispatchers; ++i)
    threads_.emplace_back([this] {
      SetThreadName("sched-gpu");
      GpuLoop();
    });
}

void HybridScheduler::Stop() {
  std::vector<SchedTask*> drained;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    for (SchedJob& j : policy_.Drain()) drained.push_back(TaskOf(j));
  }
  for (SchedTask* t : drained) {  // outside the lock: an on_done may submit again (and be refused)
    t->status = Status::Unavailable("scheduler stopped");
    Complete(*t);
  }
  cpu_cv_.notify_all();
  gpu_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void HybridScheduler::ObserveHost(SchedHostPhase phase, double seconds) {
  if (metrics_) metrics_->host[static_cast<size_t>(phase)]->Observe(seconds);
}

double DefaultIdleReserve(size_t cores) { return std::max(1.0, std::floor(static_cast<double>(cores) * 3 / 8)); }

int DefaultCpuNice(SchedMode mode) {
  return mode == SchedMode::kHybrid || mode == SchedMode::kGriffin ? 10 : 0;
}

size_t DefaultSchedCpuCores(SchedMode mode, size_t cpus) {
  if (mode != SchedMode::kHybrid || cpus < 8) return 0;
  return (cpus * 5 + 4) / 8;
}

size_t DefaultGpuDispatchers(SchedMode mode, bool cpu_cores_apart) {
  switch (mode) {
    case SchedMode::kCpu:
      return 0;
    case SchedMode::kGpu:
      return 4;
    case SchedMode::kHybrid:
      return cpu_cores_apart ? 4 : 8;
    case SchedMode::kGriffin:
      return 8;
  }
  return 8;
}

Status HybridScheduler::Enqueue(SchedTask& task) {
  const SchedTime called = SchedClock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_ || !started_) return Status::Unavailable("scheduler not running");
  task.done_ = false;
  task.wait_us = 0;
  task.run_us = 0;
  task.gpu_batch = 0;
  task.stolen = false;
  task.return_us = 0;
  task.job.id = reinterpret_cast<uint64_t>(&task);
  const uint64_t balanced = policy_.balanced();
  const uint64_t cheap_before = policy_.cheap();
  const SchedTime queued_at = SchedClock::now();
  // Before the job is queued: once it is, it may finish (and an async task be gone) at any time.
  task.submit_us = MicrosBetween(called, queued_at);
  const bool async = static_cast<bool>(task.on_done);
  const double submit_s = task.submit_us * 1e-6;
  const SchedQueue queue = policy_.Enqueue(task.job, queued_at);
  const bool cheap = policy_.cheap() != cheap_before;
  if (metrics_) {
    for (size_t q = 0; q < kNumSchedQueues; ++q)
      metrics_->queue[q]->Set(static_cast<double>(policy_.queued(static_cast<SchedQueue>(q))));
    if (policy_.balanced() != balanced) metrics_->balanced->Increment();
    if (cheap) metrics_->cheap->Increment();
    metrics_->cheap_threshold->Set(policy_.cheap_threshold_us() * 1e-6);
  }
  // A CPU worker is woken for a GPU-queue job only where it could steal it: in hybrid, with an
  // admitted worker idle. Waking one per submission regardless cost a futex wake, a context
  // switch and a turn at this lock for nothing at every GPU job (the GPU scheduler's CPU workers
  // run only pinned work, which EnqueueMigrated's path wakes them for).
  // Likewise a CPU- or flexible-queue job wakes one only where a waiting worker could take it:
  // within the CPU slots, or the first worker when none runs, or any for a pinned job. Past the
  // slots, the running workers take it as they finish, or the one polling worker (CpuLoop) does
  // once the host has room: a wake-up there only cost every waiting worker a turn at this lock.
  // Likewise a dispatcher is woken for a CPU-queue job only where it would steal one, and a CPU
  // worker for a GPU-queue job only where it would (SchedPolicy::WouldSteal): in hybrid under load
  // nearly every job found a worker of the other processor idle, and waking it for a steal that did
  // not pay cost a thread switch and a turn at this lock per job.
  const bool pinned_cpu = task.job.pinned == Unit::kCpu;
  const uint64_t id = task.job.id;
  auto wake_for_it = [&] {
    const bool room = cpu_busy_ < cpu_slots_;
    if ((queue != SchedQueue::kGpu && (room || cpu_busy_ == 0 || pinned_cpu || cheap)) ||
        (queue == SchedQueue::kGpu && room && policy_.WouldSteal(Unit::kCpu)))
      WakeCpuLocked();
    // A dispatcher already waiting for the gathering batch's wait to end (GpuLoop) takes this job
    // with it then: another is woken only once a batch is ready now (full, or urgent).
    if (queue != SchedQueue::kCpu ? gpu_timed_waiters_ == 0 || policy_.GpuReadyAt(queued_at) <= queued_at
                                  : policy_.WouldSteal(Unit::kGpu))
      gpu_cv_.notify_one();
  };
  // The caller runs CPU work itself where a CPU worker would take it now (caller_runs): it would
  // only block here while a worker ran the job, and handing the job over and back cost two
  // wake-ups and two context switches. What it takes is what an idle worker would (the policy's
  // order, so perhaps an older job; then its own is handed on as usual, before that run).
  // A bounded caller (task.caller_max_us) runs only a job predicted within its bound; it takes
  // what the policy hands it, which is its own job whenever nothing else is queued (the node's
  // I/O thread bounds itself only then).
  if (options_.caller_runs && queue != SchedQueue::kGpu && options_.cpu_nice == 0 &&
      task.job.cpu_us <= task.caller_max_us && cpu_busy_ < CpuSlotsLocked()) {
    const SchedTime now = SchedClock::now();
    const std::optional<SchedJob> taken = policy_.TakeCpu(now);
    if (!taken.has_value() || taken->id != id) wake_for_it();
    if (taken.has_value()) {
      RunCpuJob(lock, *taken, now);  // may answer this task (an async one is gone then)
      (void)CpuSlotsLocked();  // the slots (and their gauge) as a worker ending a job would leave them
      // A worker finishing a job goes on to the next; the caller does not, so it hands on what
      // was queued meanwhile (jobs that found no room wait for a running worker to finish, and
      // in hybrid an idle one may steal from the GPU queue).
      if (CpuWorkQueuedLocked() || policy_.WouldSteal(Unit::kCpu)) WakeCpuLocked();
    }
  } else {
    wake_for_it();
  }
  lock.unlock();
  if (async && metrics_) ObserveHost(SchedHostPhase::kSubmit, submit_s);
  return Status::Ok();
}

Status HybridScheduler::SubmitAsync(SchedTask& task) {
  if (!task.on_done) return Status::InvalidArgument("SubmitAsync: the task has no on_done");
  return Enqueue(task);
}

Status HybridScheduler::Submit(SchedTask& task) {
  task.on_done = nullptr;
  SEARCH_RETURN_IF_ERROR(Enqueue(task));
  SchedTime finished;
  {
    std::unique_lock<std::mutex> done(task.done_mu_);
    task.cv_.wait(done, [&] { return task.done_; });
    finished = task.finished_at_;
  }
  const SchedTime back = SchedClock::now();
  task.return_us = MicrosBetween(finished, back);
  if (metrics_) {
    ObserveHost(SchedHostPhase::kSubmit, task.submit_us * 1e-6);
    ObserveHost(SchedHostPhase::kReturn, task.return_us * 1e-6);
  }
  return task.status;
}

void HybridScheduler::Complete(SchedTask& task) {
  if (task.on_done) {  // SubmitAsync: nobody waits; the callback answers (and may free) the task
    task.finished_at_ = SchedClock::now();
    auto done = std::move(task.on_done);
    task.on_done = nullptr;
    done(task);
    return;
  }
  std::lock_guard<std::mutex> lock(task.done_mu_);
  task.done_ = true;
  task.finished_at_ = SchedClock::now();
  task.cv_.notify_one();
}

void HybridScheduler::FoldStash(std::vector<CostSample>& stash, bool force) {
  if (stash.empty() || model_ == nullptr) return;
  if (!force && stash.size() < kFoldEvery) return;
  ModelTally tally;
  const std::optional<double> error = force || stash.size() >= kMaxStash
                                         ? std::optional<double>(model_->ObserveBatch(Unit::kCpu, stash, &tally))
                                         : model_->TryObserveBatch(Unit::kCpu, stash, &tally);
  if (!error.has_value()) return;
  stash.clear();
  PublishModel(Unit::kCpu, *error, tally);
}

void HybridScheduler::PublishModel(Unit unit, double error, const ModelTally& tally) {
  if (metrics_ == nullptr) return;
  const size_t u = static_cast<size_t>(unit);
  metrics_->error[u]->Set(error);
  metrics_->model_observed[u]->Increment(tally.observed_us * 1e-6);
  metrics_->model_predicted[u]->Increment(tally.predicted_us * 1e-6);
}

void HybridScheduler::Finish(SchedTask& task, Unit unit, double run_us, bool observe, double model_us,
                             SchedTime* answer_at, std::vector<CostSample>* stash) {
  const size_t u = static_cast<size_t>(unit);
  task.ran_on = unit;
  jobs_[u].fetch_add(1);
  const bool late = SchedClock::now() > task.job.deadline;
  if (late) misses_[u].fetch_add(1);
  if (metrics_) {
    metrics_->jobs[u]->Increment();
    metrics_->run[u]->Observe(run_us * 1e-6);
    if (late) metrics_->misses[u]->Increment();
  }
  const double sample_us = model_us >= 0 ? model_us : run_us;  // what the model learns from it
  if (observe && model_ != nullptr && task.status.ok()) {
    if (stash != nullptr) {
      // A CPU worker's: the model's lock is taken by every arriving query's prediction, so the
      // workers fold their samples in when the lock is free rather than wait for it per job.
      stash->push_back(CostSample{task.features, sample_us});
      FoldStash(*stash, false);
    } else {  // one lock: ObserveBatch returns the error metric's value (Observe a sample's own error)
      const CostSample sample{task.features, sample_us};
      ModelTally tally;
      const double error = model_->ObserveBatch(unit, std::span(&sample, 1), &tally);
      PublishModel(unit, error, tally);
    }
  }
  if (options_.trace != nullptr) options_.trace->Record(task, unit, observe ? sample_us : -1);
  if (answer_at != nullptr) *answer_at = SchedClock::now();
  Complete(task);
}

size_t HybridScheduler::CpuSlotsLocked() {
  if (!options_.idle_cores) return cpu_slots_;
  const double idle = options_.idle_cores();
  size_t slots = options_.cpu_workers;
  if (idle >= 0) {
    const double allowed = std::floor(static_cast<double>(cpu_busy_) + idle - options_.idle_reserve);
    slots = static_cast<size_t>(std::clamp(allowed, 0.0, static_cast<double>(options_.cpu_workers)));
  }
  if (slots != cpu_slots_) {
    cpu_slots_ = slots;
    policy_.set_cpu_parallelism(slots);
    if (metrics_) metrics_->cpu_slots->Set(static_cast<double>(slots));
  }
  return slots;
}

void HybridScheduler::WakeCpuLocked() { cpu_cv_.notify_one(); }

void HybridScheduler::CpuLoop() {
  std::vector<CostSample> stash;  // this worker's model samples not yet folded in (FoldStash)
  stash.reserve(kMaxStash);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const SchedTime now = SchedClock::now();
    // Host-aware admission: within the slots the host's idle cores allow, a worker takes any job
    // (its queue, flexible ones, steals); past them, the first worker still drains the CPU queue
    // (so no job there starves) and the others take only pinned work; the rest waits, or goes to
    // the GPU (the balance rule sees the CPU backlog over the slots).
    const bool admit = cpu_busy_ < CpuSlotsLocked();
    std::optional<SchedJob> j = admit              ? policy_.TakeCpu(now)
                                : cpu_busy_ == 0 ? policy_.TakeCpuOwn(now)
                                                 : policy_.TakeCpuCheap();
    if (!j.has_value()) {
      // Nothing to take: the stashed samples go into the model before the worker waits (without
      // the scheduler's lock; then it looks again).
      if (!stash.empty()) {
        lock.unlock();
        FoldStash(stash, true);
        lock.lock();
        continue;
      }
      // Work is queued but the host has no room for it: one worker looks at the host again every
      // 2 ms; the others sleep until woken (a job they may take, or the poller's hand-on below).
      // Every idle worker polling made 16 workers take this lock 500 times a second each, with
      // the node at its busiest.
      if (!admit && !cpu_poller_ && CpuWorkQueuedLocked()) {
        cpu_poller_ = true;
        cpu_cv_.wait_for(lock, std::chrono::milliseconds(2));
        cpu_poller_ = false;
      } else {
        cpu_cv_.wait(lock);
      }
      continue;
    }
    RunCpuJob(lock, *j, now, &stash);
  }
  lock.unlock();
  FoldStash(stash, true);
}

void HybridScheduler::RunCpuJob(std::unique_lock<std::mutex>& lock, const SchedJob& j, SchedTime now,
                                std::vector<CostSample>* stash) {
  // More work queued behind this job: wake another worker to look at it (and to take over the
  // polling this worker may have done).
  if (CpuWorkQueuedLocked()) WakeCpuLocked();
  if (metrics_)
    for (size_t q = 0; q < kNumSchedQueues; ++q)
      metrics_->queue[q]->Set(static_cast<double>(policy_.queued(static_cast<SchedQueue>(q))));
  SchedTask& t = *TaskOf(j);
  const double waited = MicrosBetween(j.enqueued, now);
  const bool stolen = j.stolen;
  t.job = j;
  ++cpu_busy_;
  lock.unlock();
  t.wait_us += waited;
  t.stolen = t.stolen || stolen;
  if (stolen) {
    stolen_[0].fetch_add(1);
    if (metrics_) metrics_->stolen[0]->Increment();
  }
  if (metrics_) metrics_->wait[0]->Observe(waited * 1e-6);
  // Set once the engine has run, once Finish turns to the answer, and once it returns (the task
  // may be gone after Finish).
  SchedTime ran_until{}, answer_at{}, finished{};
  if (now > t.job.deadline) {
    t.status = Status::DeadlineExceeded("deadline passed while queued");
    Finish(t, Unit::kCpu, 0, false);
  } else {
    const SchedTime t0 = SchedClock::now();
    const double cpu0 = ThreadCpuMicros();
    runner_->RunCpu(t);
    ran_until = SchedClock::now();
    const double run_us = MicrosBetween(t0, ran_until);
    const double cpu_us = ThreadCpuMicros() - cpu0;
    t.run_us += run_us;
    if (metrics_) metrics_->cpu_worker[0]->Increment(run_us * 1e-6);
    // A migrated task's CPU part is not a whole query: not a sample for the model (nor is a task
    // whose shape the features do not describe: SchedTask::model_sample). The model
    // learns the CPU time the query took (this thread's), not its wall time: on a busy host the
    // wall time also holds the waits for a core, which made the model think the CPU slower the
    // busier the host got, and send it fewer cheap queries just when the GPU needed the relief.
    Finish(t, Unit::kCpu, run_us, !t.migrated && !t.retried && t.model_sample, cpu_us > 0 ? cpu_us : run_us,
           metrics_ ? &answer_at : nullptr, stash);
    if (metrics_) finished = SchedClock::now();
  }
  lock.lock();
  const SchedTime back = metrics_ ? SchedClock::now() : SchedTime{};
  // The worker's time after the run: not the engine's, yet the worker took no other job meanwhile.
  // Finish's accounting (counters, the cost model, the trace), the answer (on_done: the node's
  // reply), and the wait for this lock.
  if (metrics_ && ran_until != SchedTime{}) {
    metrics_->cpu_worker[1]->Increment(MicrosBetween(ran_until, answer_at) * 1e-6);
    metrics_->cpu_worker[2]->Increment(MicrosBetween(answer_at, finished) * 1e-6);
    metrics_->cpu_worker[3]->Increment(MicrosBetween(finished, back) * 1e-6);
  }
  --cpu_busy_;
}

void HybridScheduler::GpuLoop() {
  // This dispatcher's CPU time, split into the runner's batches and the rest (the scheduler's own
  // work: taking batches, feeding the model, answering jobs; waits for work cost none).
  double cpu_mark = ThreadCpuMicros();
  auto account = [&](int part) {
    const double now = ThreadCpuMicros();
    if (metrics_ && now > cpu_mark) metrics_->dispatch_cpu[part]->Increment((now - cpu_mark) * 1e-6);
    cpu_mark = now;
  };
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const SchedTime now = SchedClock::now();
    GpuTake take = policy_.TakeGpu(now);
    if (take.jobs.empty()) {
      if (take.wake_at == SchedTime::max()) {
        gpu_cv_.wait(lock);
      } else {
        ++gpu_timed_waiters_;
        gpu_cv_.wait_until(lock, take.wake_at);
        --gpu_timed_waiters_;
      }
      continue;
    }
    if (metrics_)
      for (size_t q = 0; q < kNumSchedQueues; ++q)
        metrics_->queue[q]->Set(static_cast<double>(policy_.queued(static_cast<SchedQueue>(q))));
    // Hybrid hands a query's remainder to the CPU only while a CPU worker would take it at once
    // (idle and nothing queued for it); with the CPU saturated the GPU finishes the query. Griffin
    // always hands off past the crossover, as Liu 2018 does.
    const bool may_migrate = options_.policy.mode != SchedMode::kHybrid ||
                             cpu_busy_ + policy_.queued(SchedQueue::kCpu) < CpuSlotsLocked();
    for (SchedJob& j : take.jobs) TaskOf(j)->may_migrate = may_migrate;
    lock.unlock();
    std::vector<SchedTask*> batch;
    for (SchedJob& j : take.jobs) {
      SchedTask& t = *TaskOf(j);
      const double waited = MicrosBetween(j.enqueued, now);
      t.job = j;
      t.wait_us += waited;
      if (metrics_) metrics_->wait[1]->Observe(waited * 1e-6);
      t.stolen = t.stolen || j.stolen;
      if (j.stolen) {
        stolen_[1].fetch_add(1);
        if (metrics_) metrics_->stolen[1]->Increment();
      }
      if (now > j.deadline) {
        t.status = Status::DeadlineExceeded("deadline passed while queued");
        Finish(t, Unit::kGpu, 0, false);
        continue;
      }
      t.outcome = GpuOutcome::kDone;
      batch.push_back(&t);
    }
    const double run_us = batch.empty() ? 0 : RunGpuBatch(batch, account);
    account(1);
    lock.lock();
    if (run_us > 0) policy_.ObserveGpuBatch(run_us);
  }
}

double HybridScheduler::RunGpuBatch(std::vector<SchedTask*>& batch, const std::function<void(int)>& account) {
  double predicted = 0;
  for (const SchedTask* t : batch) predicted += std::max(t->job.gpu_us, 1e-3);
  const SchedTime t0 = SchedClock::now();
  account(1);
  runner_->RunGpuBatch(batch);
  account(0);
  const double run_us = MicrosBetween(t0, SchedClock::now());
  batches_.fetch_add(1);
  if (metrics_) metrics_->batches->Increment();
  std::vector<SchedTask*> to_cpu;
  // The batch's time, apportioned to its queries by their predicted GPU time.
  auto share = [&](const SchedTask& t) { return run_us * std::max(t.job.gpu_us, 1e-3) / predicted; };
  // The answered jobs' times go to the model in one observation (one lock, one re-solve)
  // before any of them is finished, as one at a time did.
  if (model_ != nullptr) {
    std::vector<CostSample> seen;
    seen.reserve(batch.size());
    for (const SchedTask* t : batch)
      if (t->outcome == GpuOutcome::kDone && t->status.ok() && t->model_sample)
        seen.push_back(CostSample{t->features, share(*t)});
    if (!seen.empty()) {
      ModelTally tally;
      const double error = model_->ObserveBatch(Unit::kGpu, seen, &tally);
      PublishModel(Unit::kGpu, error, tally);
    }
  }
  for (SchedTask* t : batch) {
    t->run_us += run_us;
    t->gpu_batch = static_cast<uint32_t>(batch.size());
    switch (t->outcome) {
      case GpuOutcome::kDone:
        Finish(*t, Unit::kGpu, share(*t), false);
        break;
      case GpuOutcome::kMigrate:
        t->migrated = true;
        migrations_.fetch_add(1);
        if (metrics_) metrics_->migrations->Increment();
        to_cpu.push_back(t);
        break;
      case GpuOutcome::kRetryCpu:
        t->retried = true;
        retries_.fetch_add(1);
        if (metrics_) metrics_->retries->Increment();
        to_cpu.push_back(t);
        break;
    }
  }
  if (!to_cpu.empty()) {
    std::vector<SchedTask*> refused;
    {
      std::lock_guard<std::mutex> relock(mu_);
      for (SchedTask* t : to_cpu) {
        if (stopping_) {
          refused.push_back(t);
        } else {
          policy_.EnqueueMigrated(t->job, SchedClock::now());
        }
      }
    }
    cpu_cv_.notify_all();
    for (SchedTask* t : refused) {  // outside the lock (an on_done may run)
      t->status = Status::Unavailable("scheduler stopped");
      Complete(*t);
    }
  }
  return run_us;
}

SchedStatsSnapshot HybridScheduler::stats() const {
  SchedStatsSnapshot s;
  for (size_t u = 0; u < kNumUnits; ++u) {
    s.jobs[u] = jobs_[u].load();
    s.stolen[u] = stolen_[u].load();
    s.deadline_misses[u] = misses_[u].load();
    if (model_ != nullptr) s.prediction_error[u] = model_->mean_relative_error(static_cast<Unit>(u));
  }
  s.migrations = migrations_.load();
  s.gpu_retries = retries_.load();
  s.gpu_batches = batches_.load();
  std::lock_guard<std::mutex> lock(mu_);
  s.cpu_slots = cpu_slots_;
  s.cpu_busy = cpu_busy_;
  s.balanced = policy_.balanced();
  s.cheap = policy_.cheap();
  s.cheap_threshold_us = policy_.cheap_threshold_us();
  s.gpu_batch_us = policy_.gpu_batch_us();
  for (size_t q = 0; q < kNumSchedQueues; ++q) s.queued[q] = policy_.queued(static_cast<SchedQueue>(q));
  return s;
}

}  // namespace search
