// SchedPolicy: the CPU/GPU query scheduler's decisions, as a plain single-threaded state machine
// over explicit time points (so tests drive it with a fake clock). The threaded runtime
// (hybrid_scheduler.hpp) holds a lock around every call.
//
// Ding et al. 2009 §9: three queues. A job whose predicted cost ratio cpu/gpu is at least
// gpu_ratio goes to the GPU queue, at most cpu_ratio to the CPU queue, otherwise to the
// flexible queue. The GPU's predicted time is a job's share of its batch (what it costs the GPU's
// throughput), which on a fast GPU makes the ratio exceed gpu_ratio for nearly every query. Yet no
// query finishes on the GPU sooner than one query alone takes there (gpu_alone_us: the launches,
// copies and synchronization of a batch, whatever its size), and a query the CPU engine answers
// within that time is cheaper there than the GPU path's own host work for it. So in hybrid, a
// job predicted to take at most gpu_alone_us on the CPU (a "cheap" job) goes to the CPU queue
// whatever its ratio; the adaptive bound (cheap_step) lets that bound follow the queues. The node
// turns both on.
// With `balance` (hybrid), a job the ratio gives the CPU queue goes to the GPU queue instead
// while it would finish sooner there: the CPU's backlog plus its CPU time exceeds the GPU's
// backlog plus its GPU time, at least gpu_alone_us and, with batch_latency, a batch's run time
// (backlog: the queue's predicted work over the processor's parallelism; the CPU queue's cheap
// jobs over all its workers, which may run them). The ratio alone keeps feeding a saturated CPU
// the cheap queries it prefers while the GPU has room; stealing cannot fix that, as a GPU busy
// with its own queue never steals.
// An idle processor takes, in order:
//   1. the oldest urgent job preferring it (waited past urgent_fraction of its time to deadline;
//      Ding: "schedule it immediately on its preferred processor"), from its own queue or the
//      flexible one (a GPU-queue job prefers the GPU, a CPU-queue job the CPU), among each
//      queue's oldest urgent_window jobs;
//   2. the oldest job of its own queue;
//   3. the oldest flexible job;
//   4. a job stolen from the other processor's queue, if stealing pays: the thief's predicted time
//      (on the GPU at least gpu_alone_us) is no more than the owner's backlog (its queue's
//      predicted work over its parallelism) plus the owner's predicted time for it (likewise). Among the oldest steal_window jobs the one cheapest for
//      the thief is taken. Pinned jobs (forced by flags, or migrated mid-query) are never stolen.
//      Only mode kHybrid steals; kGriffin keeps Liu et al.'s placement by length ratio.
// The GPU takes batches (Ao et al. 2011 §3.1): it gathers jobs in the order above until their
// predicted GPU work reaches batch_work_us or max_batch jobs; a batch under the work threshold
// waits until its oldest job has been queued batch_wait, unless it holds an urgent job.
// Griffin (Liu et al. 2018 §3.2): a job the GPU hands back mid-query (its next intersection's
// length ratio passed the crossover) re-enters with EnqueueMigrated, pinned to the CPU ahead of
// every other CPU job.
// Thread-safety: none; the caller serializes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.hpp"
#include "sched/cost_model.hpp"

namespace search {

using SchedClock = std::chrono::steady_clock;
using SchedTime = SchedClock::time_point;

enum class SchedMode : uint8_t { kCpu, kGpu, kHybrid, kGriffin };
const char* SchedModeName(SchedMode m);  // "cpu", "gpu", "hybrid", "griffin"
// Parses "cpu" | "gpu" | "hybrid" | "griffin" (InvalidArgument otherwise).
Result<SchedMode> ParseSchedMode(std::string_view name);

enum class SchedQueue : uint8_t { kGpu = 0, kCpu = 1, kFlex = 2 };
inline constexpr size_t kNumSchedQueues = 3;
const char* SchedQueueName(SchedQueue q);  // "gpu", "cpu", "flexible"

struct SchedJob {
  uint64_t id = 0;
  SchedTime arrival{};
  SchedTime deadline = SchedTime::max();
  SchedTime enqueued{};    // set by the policy
  double cpu_us = 1;       // predicted run time on each processor
  double gpu_us = 1;
  Unit preferred = Unit::kCpu;
  std::optional<Unit> pinned;  // may only run there
  bool migrated = false;       // handed from the GPU to the CPU mid-query
  bool stolen = false;         // set when taken by the processor it did not prefer from its queue
  bool cheap = false;          // set by the policy: queued for the CPU as cheap (Cheap; or to explore)
  bool balanced = false;       // set by the policy: the balance rule moved it from the CPU queue to the GPU's
  SchedQueue queue = SchedQueue::kFlex;  // where the policy put it
};

struct SchedOptions {
  SchedMode mode = SchedMode::kHybrid;
  double gpu_ratio = 2.0;          // cpu_us / gpu_us at or above: GPU queue
  double cpu_ratio = 0.5;          // at or below: CPU queue
  double urgent_fraction = 0.5;    // of (deadline - arrival) waited: urgent
  bool steal = true;
  bool balance = true;             // hybrid: CPU-queue jobs go to the GPU while it finishes them sooner
  // One query alone on the GPU, in microseconds (its latency floor; the node measures it at
  // calibration). Hybrid: a job predicted to take at most this on the CPU is cheap (CPU queue).
  // 0: no cheap jobs, and the balance rule compares with the GPU's share alone.
  double gpu_alone_us = 0;
  // Exploration: the CPU's model learns only from jobs the CPU runs, so with cheap jobs alone it
  // would see just the queries it already predicts cheap, and a query it overrates would never
  // correct it (the share of cheap jobs would shrink below what the whole log's costs give). So
  // every explore_every-th job predicted at most explore_factor times
  // gpu_alone_us on the CPU, but not cheap, is queued as cheap too. 0: no exploration.
  uint32_t explore_every = 16;
  double explore_factor = 8;
  // Adaptive cheap threshold (hybrid, with gpu_alone_us > 0): the bound under which a job is cheap
  // moves with the queues instead of staying at gpu_alone_us. At each enqueue it rises by
  // cheap_step (a fraction) while the GPU's backlog exceeds the CPU's, and falls by it otherwise,
  // between gpu_alone_us and cheap_max_factor times that. So under load the CPU takes the queries
  // predicted cheapest on it, in that order, until its backlog matches the GPU's; at light load
  // (both queues empty) the bound rests at gpu_alone_us. The GPU path's time per query varies
  // about 5x (p10 to p90) while the CPU's spans three orders of magnitude, so each query moved to
  // the CPU this way frees roughly one query's worth of GPU time at the least CPU cost. 0: off
  // (the bound stays at gpu_alone_us).
  double cheap_step = 0;
  double cheap_max_factor = 16;
  // What moves the adaptive bound (cheap_step). 0: the GPU's backlog against the CPU's, above.
  // Above 0: the CPU's own room, so the bound rises while the CPU's backlog (its queue's predicted
  // work over the workers that may run it) is at most cheap_fill_us and falls once it is longer:
  // the CPU takes the queries predicted cheapest on it until it is full, whatever the GPU's queue
  // shows. Under load the GPU's dispatchers take its jobs at once, so its queued backlog stays near
  // zero while its batches run for milliseconds, and the GPU-against-CPU rule would leave the CPU
  // idle. Pair it with batch_latency, or the balance rule undoes it.
  double cheap_fill_us = 0;
  // Hybrid: a job's finish on the GPU counts a batch's run time as well (ObserveGpuBatch: the
  // runtime's batches, an EWMA), not only one query alone. A job queued for the GPU is answered
  // when its whole batch ends, and under load a batch runs for milliseconds while its queue's
  // predicted backlog (jobs' shares of batches) stays in the hundreds of microseconds: the balance
  // rule and stealing then sent the GPU queries the CPU would have answered sooner.
  bool batch_latency = false;
  // A thief chooses the job cheapest for it among the owner's oldest steal_window. Wider is closer
  // to the ideal split (the CPU takes the queries it answers cheapest; 64 was the best window in
  // bench/sched/sched_sim). The scan runs under the scheduler's lock, so it stays bounded.
  size_t steal_window = 64;
  // Urgency is looked for among each queue's oldest urgent_window jobs (queues are in enqueue
  // order, so the oldest, most likely urgent, come first). Every take runs under the scheduler's
  // one lock, and an overloaded node's queues hold thousands of jobs: a whole-queue scan per take
  // made the lock the bottleneck exactly when the node most needed it.
  size_t urgent_window = 64;
  // A GPU batch closes at this much predicted GPU work. The predictions are each job's share of
  // its batch's time, which grows as the GPU path saturates: a low bound then shrinks the batches
  // just when larger ones would amortize more, so the bound is high.
  double batch_work_us = 20000;
  size_t max_batch = 64;
  std::chrono::microseconds batch_wait{200};
  size_t cpu_parallelism = 1;      // CPU workers that may run any job now (for backlog estimates)
  size_t cpu_workers = 0;          // all of them, which may run cheap jobs (0: cpu_parallelism)
  size_t gpu_parallelism = 1;      // GPU dispatchers
};

struct GpuTake {
  std::vector<SchedJob> jobs;                // empty: nothing to run now
  SchedTime wake_at = SchedTime::max();      // when to ask again if nothing arrives
};

class SchedPolicy {
 public:
  explicit SchedPolicy(SchedOptions options);

  // Classifies and queues a job (sets enqueued, preferred, queue); returns the queue it joined.
  SchedQueue Enqueue(SchedJob job, SchedTime now);
  // A job the GPU handed back mid-query: pinned to the CPU, taken before other CPU work.
  void EnqueueMigrated(SchedJob job, SchedTime now);
  // A job that must rerun on the CPU (a GPU failure): pinned, ahead of other CPU work.
  void EnqueueCpuRetry(SchedJob job, SchedTime now) { EnqueueMigrated(std::move(job), now); }

  std::optional<SchedJob> TakeCpu(SchedTime now);
  // What a CPU worker takes while the host has no idle core for more CPU-engine work
  // (HybridScheduler's host-aware admission): TakeCpuOwn, an urgent job preferring the CPU or the
  // CPU queue's oldest (no flexible job, no stealing from the GPU); TakeCpuCheap, only a job
  // pinned to the CPU (a Griffin hand-off or a GPU failure's rerun) or a cheap one (Cheap), from
  // among the CPU queue's oldest urgent_window.
  std::optional<SchedJob> TakeCpuOwn(SchedTime now);
  std::optional<SchedJob> TakeCpuCheap();
  GpuTake TakeGpu(SchedTime now);
  // TakeGpu's wait rule: `now` where it would not wait for a fuller batch (one is ready, a job
  // preferring the GPU is urgent, or nothing is queued for the GPU), else when the oldest GPU job
  // will have waited batch_wait.
  SchedTime GpuReadyAt(SchedTime now) const;

  // Removes and returns every queued job (shutdown).
  std::vector<SchedJob> Drain();

  size_t queued(SchedQueue q) const { return queues_[static_cast<size_t>(q)].size(); }
  size_t queued_total() const;
  const SchedOptions& options() const { return options_; }
  // The CPU workers that may run at once now (the runtime lowers it while the host's cores are
  // busy): the CPU backlog divides by it.
  void set_cpu_parallelism(size_t n) { options_.cpu_parallelism = std::max<size_t>(n, 1); }
  // Jobs `balance` moved from the CPU queue to the GPU queue.
  uint64_t balanced() const { return balanced_; }
  // A GPU batch's run time, in microseconds, folded into an EWMA (weight 0.1 for the newest);
  // FinishOn counts it on the GPU with batch_latency.
  void ObserveGpuBatch(double run_us);
  double gpu_batch_us() const { return gpu_batch_us_; }

  // Whether a processor with nothing of its own to run would steal a job from the other's queue now
  // (hybrid with stealing: the job TakeOne's step 4 would take). The runtime wakes an idle worker
  // for the other processor's job only then: a wake-up that finds nothing worth stealing cost a
  // thread switch and a turn at the scheduler's lock for every job.
  bool WouldSteal(Unit thief) const { return StealCandidate(thief) >= 0; }
  // Where a job with these predictions goes under options.mode (no pinning, no balance).
  SchedQueue Classify(double cpu_us, double gpu_us) const;
  // Hybrid: a job predicted to take at most gpu_alone_us on the CPU (see the top of this file), or
  // under the adaptive bound.
  bool Cheap(double cpu_us) const;
  // The bound Cheap compares with: gpu_alone_us, or where cheap_step has moved it.
  double cheap_threshold_us() const { return cheap_threshold_us_; }
  // Jobs queued for the CPU as cheap (exploration included).
  uint64_t cheap() const { return cheap_; }

 private:
  bool Urgent(const SchedJob& j, SchedTime now) const;
  // Hybrid with cheap jobs on (gpu_alone_us > 0).
  bool CheapJobsOn() const { return options_.mode == SchedMode::kHybrid && options_.gpu_alone_us > 0; }
  // The adaptive bound's cap (cheap_max_factor times gpu_alone_us).
  double CheapCapUs() const { return options_.gpu_alone_us * options_.cheap_max_factor; }
  // One step of the adaptive cheap threshold (cheap_step), before a job is classified.
  void AdaptCheapThreshold();
  bool CanRun(const SchedJob& j, Unit u) const { return !j.pinned.has_value() || *j.pinned == u; }
  double Backlog(Unit u) const;
  // How long j takes once started on u: its predicted time, on the GPU at least gpu_alone_us
  // (and, with batch_latency, at least a batch's run time).
  double FinishOn(const SchedJob& j, Unit u) const;
  void Push(SchedJob job, SchedTime now, bool front);
  SchedJob Pop(SchedQueue q, size_t index);
  // Index in queue q of the oldest urgent job preferring u, or -1.
  long OldestUrgent(SchedQueue q, Unit u, SchedTime now) const;
  // Index in the other unit's queue of the job to steal for u, or -1.
  long StealCandidate(Unit thief) const;
  std::optional<SchedJob> TakeOne(Unit u, SchedTime now, bool allow_steal, bool allow_flex = true);

  SchedOptions options_;
  std::deque<SchedJob> queues_[kNumSchedQueues];
  double work_us_[kNumSchedQueues][kNumUnits] = {};  // predicted work queued, per queue and unit
  double cheap_cpu_us_ = 0;  // the CPU queue's cheap jobs' share of work_us_[kCpu][kCpu]
  uint64_t balanced_ = 0;
  uint64_t cheap_ = 0;
  uint64_t explore_seen_ = 0;  // jobs that could have been explored
  double cheap_threshold_us_ = 0;  // Cheap's bound (gpu_alone_us unless cheap_step moves it)
  double gpu_batch_us_ = 0;        // EWMA of the GPU's batch run times (ObserveGpuBatch)
};

}  // namespace search
