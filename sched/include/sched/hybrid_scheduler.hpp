// HybridScheduler: the threaded runtime around SchedPolicy. Callers Submit a task and block until
// a processor has run it (or SubmitAsync it, and its on_done answers it on the finishing thread);
// cpu_workers threads take CPU work one job at a time (a caller whose job a worker would take at
// once runs it itself: caller_runs), gpu_dispatchers threads take GPU batches
// (SchedPolicy::TakeGpu) and run them through the runner.
//
// What runs a job is the SchedRunner's business (the node's: the CPU engine and the GPU executor;
// tests': fake processors); a GPU batch reports each task's GpuOutcome (sched_task.hpp).
// Deadlines: a task whose deadline passed before it was taken is answered DeadlineExceeded by the
// scheduler without running (counted as a deadline miss of the processor that took it); a task
// finishing after its deadline is counted as a miss too (its answer is still returned).
// Every run time is fed to the cost model (CostModel::Observe) unless the task is migrated (a
// partial run), and the relative prediction error is kept per processor: a GPU job's share of its
// batch's wall time, a CPU job's CPU time (its worker thread's, without waits for a core).
// Stop(): queued tasks are answered Unavailable; running ones finish. Submit after Stop() is
// answered Unavailable.
// Per job the runtime keeps off its one lock what it can: Submit waits for its answer on the
// task's own lock, and a dispatcher finishing a batch feeds the model once
// (CostModel::ObserveBatch) and takes no scheduler lock per job. bench/sched/sched_runtime_bench
// measures the runtime's own cost with fake processors.
// Metrics: the search_sched_* families (registered by the scheduler when given a Metrics).
// Thread-safety: Submit and SubmitAsync may be called from any number of threads; Start/Stop from one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/status.hpp"
#include "sched/cost_model.hpp"
#include "sched/sched_policy.hpp"
#include "sched/sched_task.hpp"
#include "sched/sched_trace.hpp"

namespace search {

class Metrics;

// Host time a query spends around the scheduler, outside its queue wait and its run (the
// search_sched_host_seconds histogram): kFeatures, the caller's feature lookup and predictions;
// kSubmit, from Submit's call to the job being queued (the scheduler lock); kReturn, from the
// processor finishing the job to Submit returning (the caller's wake-up and its turn at the
// task's own lock); kResolve, reading an answer's external ids (either processor's).
enum class SchedHostPhase : uint8_t { kFeatures = 0, kSubmit = 1, kReturn = 2, kResolve = 3 };
inline constexpr size_t kNumSchedHostPhases = 4;
const char* SchedHostPhaseName(SchedHostPhase p);  // "features", "submit", "return", "resolve"

class SchedRunner {
 public:
  virtual ~SchedRunner() = default;
  // Runs (or, for a migrated task, finishes) the task on the CPU; sets task.status.
  virtual void RunCpu(SchedTask& task) = 0;
  // Runs the batch on the GPU; sets each task's status and outcome.
  virtual void RunGpuBatch(std::span<SchedTask* const> tasks) = 0;
};

struct SchedStatsSnapshot {
  uint64_t jobs[kNumUnits] = {};             // finished on each processor
  uint64_t stolen[kNumUnits] = {};           // taken by the processor that did not prefer them
  uint64_t deadline_misses[kNumUnits] = {};
  uint64_t migrations = 0;                   // GPU -> CPU mid-query hand-offs
  uint64_t balanced = 0;                     // CPU-queue jobs sent to the GPU queue (SchedOptions::balance)
  uint64_t cheap = 0;                        // jobs queued for the CPU as cheap (SchedOptions::gpu_alone_us)
  double cheap_threshold_us = 0;             // SchedPolicy::cheap_threshold_us now
  double gpu_batch_us = 0;                   // SchedPolicy::gpu_batch_us: the GPU batches' run time (EWMA)
  uint64_t gpu_retries = 0;                  // GPU failures rerun on the CPU
  uint64_t gpu_batches = 0;
  size_t cpu_slots = 0;                      // CPU workers allowed to run unpinned jobs now
  size_t cpu_busy = 0;                       // CPU workers counted busy now (until back at the lock)
  uint64_t queued[kNumSchedQueues] = {};
  double prediction_error[kNumUnits] = {};   // CostModel::mean_relative_error
};

// The node's defaults, each the setting that measured best (BENCHMARKS.md, the hybrid node):
// HybridSchedulerOptions::idle_reserve on a host of `cores` hardware threads: 3/8 of them, at
// least 1 (the serving path's threads keep that many cores from the CPU engine).
double DefaultIdleReserve(size_t cores);

// HybridSchedulerOptions::gpu_dispatchers for a scheduler mode: 4 for gpu, 8 for griffin, 0 for
// cpu; for hybrid 4 when its CPU workers have cores of their own (`cpu_cores_apart`), else 8
// (on shared cores the CPU takes the cheap jobs and the GPU's batches are smaller).
size_t DefaultGpuDispatchers(SchedMode mode, bool cpu_cores_apart = false);

// HybridSchedulerOptions::cpu_nice for a scheduler mode: 10 for hybrid and griffin, 0 for cpu and
// gpu. With the CPU engine beside the GPU path, the GPU dispatchers and the request threads then
// take a core back from a CPU-engine query when they wake. Under cpu every worker would be
// lowered alike, and under gpu the CPU workers only take the GPU's failures.
int DefaultCpuNice(SchedMode mode);

// CPUs given to the CPU workers alone on a node that may use `cpus` CPUs: under hybrid, 5/8 of
// them (rounded; 10 of 16) when there are at least 8, else 0 (the CPU engine and the GPU path
// share every CPU, with DefaultCpuNice and the idle reserve). Under cpu, gpu and griffin, 0. With
// the CPU workers on cores of their own the node also turns on the fill rule
// (kDefaultCheapFillUs, SchedOptions::batch_latency).
size_t DefaultSchedCpuCores(SchedMode mode, size_t cpus);

// The fill rule's target (SchedOptions::cheap_fill_us) under hybrid when the CPU workers have
// cores of their own: 200 us of predicted work queued a worker.
inline constexpr double kDefaultCheapFillUs = 200.0;

struct HybridSchedulerOptions {
  SchedOptions policy;
  size_t cpu_workers = 1;
  size_t gpu_dispatchers = 1;  // 0 with mode kCpu
  // Host-aware CPU admission (mode hybrid). The CPU engine and the GPU path share the host's
  // cores: the GPU's dispatchers, the node's network threads and whatever else runs there. A
  // CPU-engine query costs far more core time than the same query's host share on the GPU path,
  // so a CPU worker starting one while the host has no idle core slows the GPU path by more than
  // it adds. With idle_cores set (HostLoad::IdleCores in the node; a fake in tests), the slots
  // are floor(running + idle_cores() - idle_reserve), between 0 and cpu_workers: within them a
  // CPU worker takes any job; past them one worker (when none runs) still takes the CPU queue's
  // jobs, so none starves, but takes no flexible job and steals nothing, and the others take only
  // jobs pinned to the CPU (hand-offs, GPU failures), which always run, and cheap jobs
  // (SchedPolicy::Cheap: the CPU answers them within one GPU query's time alone, so they cost the
  // host little more than the GPU path's own work for them would). The policy's CPU backlog
  // divides by the slots (at least 1), so the balance rule sends work to the GPU while the host
  // is busy, and hybrid hands a query's remainder to the CPU only within them. A negative
  // idle_cores() (unknown) sets no limit.
  std::function<double()> idle_cores;
  double idle_reserve = 1.0;  // the node sets DefaultIdleReserve(cores) unless told otherwise
  // How much higher the CPU workers' nice value is than the process's (0: the same). A CPU-engine
  // query holds a core for milliseconds; at a higher nice value the node's network and
  // GPU-dispatch threads (and, on a shared host, the integrator) take the core back when they
  // wake, instead of queueing behind it.
  int cpu_nice = 0;
  // Submit's caller runs a CPU job itself where an idle CPU worker would take it at once (within
  // the slots above), instead of waking a worker and sleeping until it finishes: two wake-ups and
  // two context switches less per CPU-engine query. The CPU workers still take everything else
  // (queued work, flexible jobs, steals, hand-offs, GPU retries). Off with cpu_nice > 0 (the
  // caller runs at the process's nice value).
  bool caller_runs = true;
  // CPUs of the CPU workers' own (search-node --tuning sched_cpu_cores): each worker pins itself
  // to them, and the node keeps its other threads off them, so the CPU engine and the GPU path no
  // longer share cores and neither the nice value nor the host-aware admission has to keep them
  // apart. Submit's caller then never runs CPU work (caller_runs off: it
  // runs on the GPU path's cores). Empty: the workers run wherever the process may.
  std::vector<int> cpu_worker_cpus;
  // Each finished job's decisions to a CSV file (search-node --tuning trace=FILE), before it is
  // answered; nullptr: none. REQUIRES: outlives the scheduler.
  SchedTrace* trace = nullptr;
};


class HybridScheduler {
 public:
  // REQUIRES: runner, model (and metrics, which may be nullptr) outlive the scheduler.
  HybridScheduler(HybridSchedulerOptions options, SchedRunner* runner, CostModel* model, Metrics* metrics);
  ~HybridScheduler();  // Stop()s
  HybridScheduler(const HybridScheduler&) = delete;
  HybridScheduler& operator=(const HybridScheduler&) = delete;

  void Start();
  void Stop();

  // Queues the task (job.arrival/deadline/predictions/pinned set by the caller) and blocks until
  // it is answered; returns task.status.
  Status Submit(SchedTask& task);
  // Queues the task and returns at once; task.on_done (required) is called when it is answered
  // (perhaps before this returns: the caller may run a CPU job itself, as Submit's does). An error
  // (the scheduler not running) means the task was not queued and on_done will not be called.
  // No thread waits per job: the node answers a request from the thread that finishes it.
  Status SubmitAsync(SchedTask& task);

  SchedStatsSnapshot stats() const;
  const HybridSchedulerOptions& options() const { return options_; }
  // CPU workers that could not pin themselves to cpu_worker_cpus (they run on the CPUs they
  // inherited); final once Start() has returned, and the gauge search_sched_cpu_pin_failures.
  uint64_t cpu_pin_failures() const { return pin_failures_.load(); }
  // Records a caller-side phase's host time (no-op without metrics); Submit records kSubmit and
  // kReturn itself.
  void ObserveHost(SchedHostPhase phase, double seconds);

 private:
  struct MetricSet;
  void CpuLoop();
  void GpuLoop();
  // Runs one GPU batch on the calling dispatcher (no lock held) and answers, or queues for the
  // CPU, each of its jobs; returns the batch's run time. account(part) charges the dispatcher's
  // CPU time since the last call to part (0: the batch, 1: the scheduler).
  double RunGpuBatch(std::vector<SchedTask*>& batch, const std::function<void(int)>& account);
  // Runs a job TakeCpu/TakeCpuOwn/TakeCpuCheap returned, as a CPU worker, on the calling thread (a
  // worker's, or Submit's caller with caller_runs). REQUIRES: lock holds mu_; held again on return.
  void RunCpuJob(std::unique_lock<std::mutex>& lock, const SchedJob& j, SchedTime now,
                 std::vector<CostSample>* stash = nullptr);
  // Jobs a CPU worker might take (the GPU queue's only by stealing, which needs room anyway).
  bool CpuWorkQueuedLocked() const {
    return policy_.queued(SchedQueue::kCpu) + policy_.queued(SchedQueue::kFlex) > 0;
  }
  // A CPU worker should look at the queues: one sleeping worker is woken. REQUIRES: mu_ held.
  void WakeCpuLocked();
  // Counts the job, observes it in the model (run_us goes to the run-time metric; the model
  // observes model_us, run_us when negative) and completes it. Takes no scheduler lock.
  // answer_at, if given, is set when the accounting is done and the answer begins.
  // stash (a CPU worker's own): the model's sample goes there and is folded in only when the
  // model's lock is free (FoldStash), not waited for.
  void Finish(SchedTask& task, Unit unit, double run_us, bool observe, double model_us = -1,
              SchedTime* answer_at = nullptr, std::vector<CostSample>* stash = nullptr);
  // Folds a CPU worker's stashed samples into the model: with force, waiting for its lock; else
  // only if the lock is free now, and then not before there are kFoldEvery of them. Cleared once
  // folded. Takes no scheduler lock.
  void FoldStash(std::vector<CostSample>& stash, bool force);
  // After the model learned from jobs of `unit`: sets the prediction-error gauge and adds the
  // tally to the model's observed and predicted counters (with metrics).
  void PublishModel(Unit unit, double error, const ModelTally& tally);
  static constexpr size_t kFoldEvery = 8;
  static constexpr size_t kMaxStash = 256;  // past it the worker waits for the model's lock
  // The CPU workers that may run unpinned jobs now (options_.idle_cores); updates the policy.
  size_t CpuSlotsLocked();
  // Marks the task answered and wakes its Submit, or calls its on_done (SubmitAsync). Takes only
  // the task's lock: callable with or without mu_ held (the order is mu_, then a task's) for
  // Submit's tasks; an on_done task's only without mu_. The task may be gone once it returns.
  static void Complete(SchedTask& task);
  // Queues the task (Submit and SubmitAsync): the policy, the metrics, the wake-ups, and the caller
  // running a CPU job where caller_runs lets it. Sets task.submit_us before the task can finish.
  Status Enqueue(SchedTask& task);
  SchedTask* TaskOf(const SchedJob& j) const { return reinterpret_cast<SchedTask*>(j.id); }

  HybridSchedulerOptions options_;
  SchedRunner* runner_;
  CostModel* model_;
  std::unique_ptr<MetricSet> metrics_;
  mutable std::mutex mu_;
  std::condition_variable cpu_cv_, gpu_cv_;
  size_t gpu_timed_waiters_ = 0;  // dispatchers waiting for a gathering batch's wait to end (mu_)
  SchedPolicy policy_;  // GUARDED_BY(mu_)
  bool stopping_ = false;  // GUARDED_BY(mu_)
  bool started_ = false;
  size_t cpu_busy_ = 0;    // GUARDED_BY(mu_): CPU workers running a task
  size_t cpu_slots_ = 0;   // GUARDED_BY(mu_): CpuSlotsLocked's last answer
  bool cpu_poller_ = false;  // GUARDED_BY(mu_): a CPU worker is polling the host for room (CpuLoop)
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> jobs_[kNumUnits] = {}, stolen_[kNumUnits] = {}, misses_[kNumUnits] = {};
  std::atomic<uint64_t> migrations_{0}, retries_{0}, batches_{0};
  std::atomic<uint64_t> pin_failures_{0};  // CPU workers whose cpu_worker_cpus the kernel refused
};

}  // namespace search
