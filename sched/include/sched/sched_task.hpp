// SchedTask: one unit of work for the scheduler (HybridScheduler) and its runner (SchedRunner):
// the job the policy places, the query's features for the cost model, the runner's payload and
// verdict, and what the scheduler records about it (where it ran, waits, run time, hand-offs).
// GpuOutcome: what a GPU batch reports for each of its tasks:
//   kDone      answered (its result is in the task),
//   kMigrate   Griffin's hand-off: the task (its intermediate state in the payload) continues on
//              the CPU,
//   kRetryCpu  the GPU could not run it: it reruns on the CPU, pinned there, ahead of other CPU
//              work. Never lost, never answered wrongly.
// Thread-safety: a task is touched by one thread at a time (its submitter, then the processor
// that runs it, then its waiter or on_done), handed over under the scheduler's locks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>

#include "core/status.hpp"
#include "sched/cost_model.hpp"
#include "sched/sched_policy.hpp"

namespace search {

enum class GpuOutcome : uint8_t { kDone, kMigrate, kRetryCpu };

// One unit of work. The runner owns the payload's meaning (query, result, intermediate state).
struct SchedTask {
  SchedJob job;
  QueryFeatures features;
  void* payload = nullptr;
  Status status;  // the runner's verdict (set by RunCpu / RunGpuBatch)
  GpuOutcome outcome = GpuOutcome::kDone;
  Unit ran_on = Unit::kCpu;  // the processor that finished it
  bool migrated = false;     // ran partly on the GPU, finished on the CPU
  bool retried = false;      // rerun on the CPU after a GPU failure
  double wait_us = 0;        // queued time, summed over its visits to the queues
  double run_us = 0;         // run time: CPU runs plus the wall time of its GPU batch
  uint32_t gpu_batch = 0;    // jobs in the last GPU batch it ran in (0: none)
  bool stolen = false;       // some visit was taken by the processor it did not prefer
  double submit_us = 0;      // Submit: waiting for the scheduler's lock to enqueue
  double return_us = 0;      // Submit: from the finish to the caller's wake-up
  // Set by the scheduler before each GPU visit: whether the runner may stop a query midway and
  // hand it to the CPU (kMigrate). Hybrid allows it only while a CPU worker would take it at once
  // (within the CPU slots, nothing queued ahead of it).
  bool may_migrate = true;
  // False: the cost model does not learn from this task's run, on either processor (a query whose
  // cost its features do not describe, such as a query tree or a count); it is still predicted.
  bool model_sample = true;
  // caller_runs (hybrid_scheduler.hpp) for a caller that must not be held long: the caller runs
  // the job itself only when its predicted CPU time (job.cpu_us) is at most this many
  // microseconds; a job predicted longer goes to a CPU worker (infinity: no bound; negative: never).
  double caller_max_us = std::numeric_limits<double>::infinity();
  // SubmitAsync: called once when the job is answered, on the thread that finished it (a CPU
  // worker, a GPU dispatcher, SubmitAsync's own caller when it runs the job, or Stop()), never
  // under the scheduler's lock; it may destroy the task.
  std::function<void(SchedTask&)> on_done;

 private:
  friend class HybridScheduler;
  // Completion: the task's own lock, not the scheduler's, so a finished job's waiter wakes without
  // a turn at the scheduler lock and a dispatcher finishing a batch takes it no more per job.
  std::mutex done_mu_;
  bool done_ = false;        // GUARDED_BY(done_mu_) once queued
  SchedTime finished_at_{};  // when done_ was set
  std::condition_variable cv_;
};

}  // namespace search
