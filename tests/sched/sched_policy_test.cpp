// SchedPolicy on a fake clock: queue choice by cost ratio, take order (urgent, own, flexible,
// steal), cost-aware stealing, deadline promotion, GPU batching by work and wait bounds,
// migrated and pinned jobs, and the single-processor modes.
#include "sched/sched_policy.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>

namespace search {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

const SchedTime kT0 = SchedTime{} + std::chrono::hours(1);

SchedJob Job(uint64_t id, double cpu_us, double gpu_us, SchedTime arrival = kT0,
             milliseconds deadline = milliseconds(500)) {
  SchedJob j;
  j.id = id;
  j.cpu_us = cpu_us;
  j.gpu_us = gpu_us;
  j.arrival = arrival;
  j.deadline = arrival + deadline;
  return j;
}

// The ratio's placement alone (BalanceSends... covers `balance`).
SchedOptions Hybrid() {
  SchedOptions o;
  o.mode = SchedMode::kHybrid;
  o.batch_wait = microseconds(200);
  o.batch_work_us = 1000;
  o.cpu_parallelism = 2;
  o.balance = false;
  return o;
}

TEST(SchedPolicyTest, QueuesByCostRatio) {
  SchedPolicy p(Hybrid());
  p.Enqueue(Job(1, 1000, 100), kT0);  // 10x faster on the GPU
  p.Enqueue(Job(2, 100, 1000), kT0);  // 10x faster on the CPU
  p.Enqueue(Job(3, 100, 120), kT0);   // comparable
  EXPECT_EQ(p.queued(SchedQueue::kGpu), 1u);
  EXPECT_EQ(p.queued(SchedQueue::kCpu), 1u);
  EXPECT_EQ(p.queued(SchedQueue::kFlex), 1u);
  EXPECT_EQ(p.Classify(200, 100), SchedQueue::kGpu);  // ratio 2: at the threshold
  EXPECT_EQ(p.Classify(50, 100), SchedQueue::kCpu);   // ratio 0.5
  EXPECT_EQ(p.Classify(150, 100), SchedQueue::kFlex);
}

// With balance, CPU-preferred jobs queue for the CPU until the CPU's backlog would make them
// finish later than on the GPU; the rest go to the GPU queue, and the GPU takes them.
TEST(SchedPolicyTest, BalanceSendsCpuJobsToTheGpuWhileItFinishesThemSooner) {
  SchedOptions o = Hybrid();
  o.balance = true;
  o.batch_wait = microseconds(0);
  SchedPolicy p(o);
  // 100 us on the CPU (2 workers), 300 on the GPU (1 dispatcher): the k-th job would finish on
  // the CPU at (k-1)*100/2 + 100, on the GPU (empty) at 300: jobs 1..5 queue for the CPU.
  for (uint64_t id = 1; id <= 5; ++id) p.Enqueue(Job(id, 100, 300), kT0);
  EXPECT_EQ(p.queued(SchedQueue::kCpu), 5u);
  EXPECT_EQ(p.balanced(), 0u);
  p.Enqueue(Job(6, 100, 300), kT0);  // 250 + 100 > 0 + 300
  EXPECT_EQ(p.queued(SchedQueue::kCpu), 5u);
  EXPECT_EQ(p.queued(SchedQueue::kGpu), 1u);
  EXPECT_EQ(p.balanced(), 1u);
  // The GPU's backlog now counts: 250 + 100 <= 300 + 300, so the next one waits for the CPU.
  p.Enqueue(Job(7, 100, 300), kT0);
  EXPECT_EQ(p.queued(SchedQueue::kCpu), 6u);
  // The GPU runs the moved job as its own (not stolen), preferring the GPU.
  GpuTake t = p.TakeGpu(kT0);
  ASSERT_FALSE(t.jobs.empty());
  EXPECT_EQ(t.jobs[0].id, 6u);
  EXPECT_TRUE(t.jobs[0].balanced);  // the job says so too (the scheduler trace)
  const std::optional<SchedJob> c = p.TakeCpu(kT0);
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->balanced);
  EXPECT_FALSE(t.jobs[0].stolen);
  EXPECT_EQ(t.jobs[0].preferred, Unit::kGpu);
  // Only the ratio's CPU queue is balanced: GPU-preferred and flexible jobs stay put.
  SchedPolicy q(o);
  for (uint64_t id = 1; id <= 20; ++id) q.Enqueue(Job(id, 100, 120), kT0);
  EXPECT_EQ(q.queued(SchedQueue::kFlex), 20u);
  // Pinned jobs are never moved, and griffin never balances (it places by the caller's choice).
  SchedOptions g = o;
  g.mode = SchedMode::kGriffin;
  for (const SchedOptions& opts : {o, g}) {
    SchedPolicy r(opts);
    for (uint64_t id = 1; id <= 20; ++id) {
      SchedJob j = Job(id, 100, 300);
      if (opts.mode == SchedMode::kHybrid) j.pinned = Unit::kCpu;
      j.preferred = Unit::kCpu;
      r.Enqueue(j, kT0);
    }
    EXPECT_EQ(r.queued(SchedQueue::kCpu), 20u) << SchedModeName(opts.mode);
    EXPECT_EQ(r.balanced(), 0u) << SchedModeName(opts.mode);
  }
}

// gpu_alone_us: a job the CPU answers within one GPU query's time alone is cheap and queues for
// the CPU whatever its ratio (on a fast GPU the batch share makes nearly every ratio exceed
// gpu_ratio); the balance rule compares the CPU's finish with the GPU's at no less than that time.
// Only hybrid has cheap jobs, and 0 turns them off.
TEST(SchedPolicyTest, CheapJobsQueueForTheCpuWhateverTheirRatio) {
  SchedOptions o = Hybrid();
  o.gpu_alone_us = 200;
  SchedPolicy p(o);
  EXPECT_EQ(p.Enqueue(Job(1, 150, 10), kT0), SchedQueue::kCpu);   // ratio 15, but cheap
  EXPECT_EQ(p.Enqueue(Job(2, 200, 10), kT0), SchedQueue::kCpu);   // at the bound
  EXPECT_EQ(p.Enqueue(Job(3, 250, 10), kT0), SchedQueue::kGpu);   // past it: the ratio decides
  EXPECT_EQ(p.Enqueue(Job(4, 250, 200), kT0), SchedQueue::kFlex);
  EXPECT_TRUE(p.Cheap(200));
  EXPECT_FALSE(p.Cheap(201));
  EXPECT_EQ(p.cheap(), 2u);
  EXPECT_EQ(p.TakeCpuCheap()->id, 1u);  // marked cheap in the queue
  for (SchedMode m : {SchedMode::kGpu, SchedMode::kCpu, SchedMode::kGriffin}) {
    SchedOptions other = o;
    other.mode = m;
    SchedPolicy q(other);
    EXPECT_FALSE(q.Cheap(150)) << SchedModeName(m);
  }
  SchedOptions off = Hybrid();
  SchedPolicy q(off);
  EXPECT_EQ(q.Enqueue(Job(8, 150, 10), kT0), SchedQueue::kGpu);
  EXPECT_FALSE(q.Cheap(150));
  EXPECT_EQ(q.cheap(), 0u);

  // An idle GPU steals a cheap job only where it would finish it sooner, counting its time alone:
  // one 100 us job (200 us alone on the GPU) stays; with four (a backlog of 200 us on 2 workers)
  // the GPU takes one.
  SchedOptions st = Hybrid();
  st.gpu_alone_us = 200;
  st.batch_wait = microseconds(0);
  SchedPolicy g(st);
  g.Enqueue(Job(1, 100, 10), kT0);
  EXPECT_TRUE(g.TakeGpu(kT0).jobs.empty());
  for (uint64_t id = 2; id <= 4; ++id) g.Enqueue(Job(id, 100, 10), kT0);
  GpuTake stolen = g.TakeGpu(kT0);
  ASSERT_FALSE(stolen.jobs.empty());
  EXPECT_TRUE(stolen.jobs[0].stolen);

  // Balance: 2 CPU workers, 100 us jobs, a GPU share of 10 us but 200 us alone. The k-th job
  // finishes on the CPU at (k-1)*100/2 + 100 and on the GPU (empty) no sooner than 200: jobs 1..3
  // queue for the CPU, the 4th (250 > 200) goes to the GPU. With the share alone (10 us) none
  // would have stayed: 100 on an idle CPU is later than 10.
  SchedOptions b = Hybrid();
  b.balance = true;
  b.gpu_alone_us = 200;
  SchedPolicy r(b);
  for (uint64_t id = 1; id <= 4; ++id) r.Enqueue(Job(id, 100, 10), kT0);
  EXPECT_EQ(r.queued(SchedQueue::kCpu), 3u);
  EXPECT_EQ(r.queued(SchedQueue::kGpu), 1u);
  EXPECT_EQ(r.balanced(), 1u);
  // With the host busy (one slot) but 4 workers, which all may run cheap jobs, the cheap backlog
  // divides by 4: (k-1)*100/4 + 100 <= 200 keeps jobs 1..5 on the CPU.
  SchedOptions busy = b;
  busy.cpu_parallelism = 1;
  busy.cpu_workers = 4;
  SchedPolicy r2(busy);
  for (uint64_t id = 1; id <= 6; ++id) r2.Enqueue(Job(id, 100, 10), kT0);
  EXPECT_EQ(r2.queued(SchedQueue::kCpu), 5u);
  EXPECT_EQ(r2.queued(SchedQueue::kGpu), 1u);
  b.gpu_alone_us = 0;
  b.cpu_ratio = 20;  // the ratio (10) gives the CPU queue without cheap jobs
  b.gpu_ratio = 40;
  SchedPolicy s(b);
  for (uint64_t id = 1; id <= 4; ++id) s.Enqueue(Job(id, 100, 10), kT0);
  EXPECT_EQ(s.queued(SchedQueue::kCpu), 0u);
  EXPECT_EQ(s.balanced(), 4u);
}

// Exploration: every explore_every-th job predicted between gpu_alone_us and explore_factor times
// it on the CPU is queued as cheap, pinned to the CPU (neither balanced away nor stolen), so the
// CPU's model also learns from queries it predicts dear. Dearer ones and other modes: never.
// The adaptive cheap bound (cheap_step): it rises while the GPU's queue is further behind than
// the CPU's, up to cheap_max_factor times gpu_alone_us, sending the CPU jobs it would have left to
// the GPU; it falls back to gpu_alone_us once the CPU is the one behind; off, it never moves.
TEST(SchedPolicyTest, AdaptiveCheapBoundFollowsTheBacklogs) {
  SchedOptions o = Hybrid();
  o.gpu_alone_us = 100;
  o.cheap_step = 0.1;
  o.cheap_max_factor = 4;
  o.explore_every = 0;
  SchedPolicy p(o);
  EXPECT_DOUBLE_EQ(p.cheap_threshold_us(), 100);
  EXPECT_EQ(p.Enqueue(Job(1, 300, 50), kT0), SchedQueue::kGpu);  // ratio 6, not cheap yet
  uint64_t id = 2;
  for (int i = 0; i < 10; ++i) p.Enqueue(Job(id++, 10000, 50), kT0);  // the GPU's backlog grows
  EXPECT_GT(p.cheap_threshold_us(), 100);
  for (int i = 0; i < 20; ++i) p.Enqueue(Job(id++, 10000, 50), kT0);
  EXPECT_DOUBLE_EQ(p.cheap_threshold_us(), 400);  // capped
  EXPECT_EQ(p.Enqueue(Job(100, 300, 50), kT0), SchedQueue::kCpu);  // the same job is cheap now
  EXPECT_EQ(p.Enqueue(Job(101, 500, 50), kT0), SchedQueue::kGpu);  // past the cap
  auto cheap = p.TakeCpuCheap();
  ASSERT_TRUE(cheap.has_value());
  EXPECT_EQ(cheap->id, 100u);
  EXPECT_TRUE(cheap->cheap);
  // The CPU falls behind (jobs the ratio gives it: 5 ms each on 2 workers): back to the floor.
  for (int i = 0; i < 40; ++i) p.Enqueue(Job(id++, 5000, 100000), kT0);
  EXPECT_DOUBLE_EQ(p.cheap_threshold_us(), 100);
  EXPECT_EQ(p.Enqueue(Job(102, 300, 50), kT0), SchedQueue::kGpu);

  // Off (the default), or without gpu_alone_us, the bound stays put.
  for (double alone : {100.0, 0.0}) {
    SchedOptions f = Hybrid();
    f.gpu_alone_us = alone;
    f.cheap_step = alone > 0 ? 0 : 0.1;
    f.explore_every = 0;
    SchedPolicy q(f);
    for (uint64_t j = 1; j <= 30; ++j) q.Enqueue(Job(j, 10000, 50), kT0);
    EXPECT_DOUBLE_EQ(q.cheap_threshold_us(), alone);
    EXPECT_EQ(q.Enqueue(Job(99, 300, 50), kT0), SchedQueue::kGpu);
  }
}

// Hybrid with cheap jobs up to 100 us, an adaptive bound of 10% steps capped at 400 us, the fill
// rule at fill_us (0: the GPU-behind rule) and no exploration.
SchedOptions FillRule(double fill_us) {
  SchedOptions o = Hybrid();
  o.gpu_alone_us = 100;
  o.cheap_step = 0.1;
  o.cheap_max_factor = 4;
  o.cheap_fill_us = fill_us;
  o.explore_every = 0;
  return o;
}

// cheap_fill_us: the adaptive bound follows the CPU's own room instead of the GPU's backlog. With
// the GPU's queue empty (its dispatchers take jobs at once) it still rises while the CPU's backlog
// is within cheap_fill_us, and falls once the CPU's queue holds more than that; the GPU-behind rule,
// on the same jobs, never rises.
TEST(SchedPolicyTest, CheapFillBoundFollowsTheCpusRoom) {
  for (double fill : {0.0, 500.0}) {
    SCOPED_TRACE(fill);
    SchedPolicy p(FillRule(fill));
    // Jobs the GPU takes at once: its queue stays empty, and so does the CPU's.
    uint64_t id = 1;
    for (int i = 0; i < 20; ++i) {
      p.Enqueue(Job(id++, 10000, 50), kT0);
      ASSERT_EQ(p.TakeGpu(kT0 + milliseconds(1)).jobs.size(), 1u);
    }
    if (fill > 0) {
      EXPECT_DOUBLE_EQ(p.cheap_threshold_us(), 400);  // the CPU has room: up to the cap
      EXPECT_EQ(p.Enqueue(Job(id++, 300, 50), kT0), SchedQueue::kCpu);
    } else {
      EXPECT_DOUBLE_EQ(p.cheap_threshold_us(), 100);  // nothing behind: at the floor
      EXPECT_EQ(p.Enqueue(Job(id++, 300, 50), kT0), SchedQueue::kGpu);
      continue;
    }
    // The CPU's queue fills (cheap jobs of 300 us on 2 workers): past 500 us of backlog the bound
    // falls back to the floor and the same job goes to the GPU again.
    for (int i = 0; i < 30; ++i) p.Enqueue(Job(id++, 90, 50), kT0);
    for (int i = 0; i < 20; ++i) p.Enqueue(Job(id++, 10000, 50), kT0);
    EXPECT_DOUBLE_EQ(p.cheap_threshold_us(), 100);
    EXPECT_EQ(p.Enqueue(Job(id++, 300, 50), kT0), SchedQueue::kGpu);
  }
}

// batch_latency: a job on the GPU finishes when its batch does, so the balance rule compares the
// CPU's backlog with a batch's run time (ObserveGpuBatch's EWMA), not only one query alone: a cheap
// job the CPU answers before a batch would stays on the CPU. Off, the same job goes to the GPU.
TEST(SchedPolicyTest, BatchLatencyKeepsJobsTheCpuAnswersBeforeABatch) {
  for (bool latency : {false, true}) {
    SCOPED_TRACE(latency);
    SchedOptions o = Hybrid();
    o.balance = true;
    o.gpu_alone_us = 1000;  // the cheap bound
    o.explore_every = 0;
    o.cpu_workers = 4;
    o.cpu_parallelism = 4;
    o.batch_latency = latency;
    SchedPolicy p(o);
    EXPECT_DOUBLE_EQ(p.gpu_batch_us(), 0);
    p.ObserveGpuBatch(5000);
    p.ObserveGpuBatch(0);  // ignored
    EXPECT_DOUBLE_EQ(p.gpu_batch_us(), 5000);
    // Cheap jobs for the CPU: with batches they all stay (its backlog: 10 x 800 / 4 = 2,000 us);
    // without, the balance rule sends the GPU those past one query alone there.
    for (uint64_t id = 1; id <= 10; ++id) p.Enqueue(Job(id, 800, 50), kT0);
    const uint64_t balanced = p.balanced();
    // With batches 2,000 + 800 on the CPU against 0 + 5,000 on the GPU; without, at least
    // 1,000 - 800 + 800 against max(50, 1,000) = 1,000 (the GPU's queue holds no work).
    EXPECT_EQ(p.Enqueue(Job(11, 800, 50), kT0), latency ? SchedQueue::kCpu : SchedQueue::kGpu);
    EXPECT_EQ(p.balanced(), balanced + (latency ? 0 : 1));
  }
  SchedPolicy q(Hybrid());
  q.ObserveGpuBatch(5000);
  q.ObserveGpuBatch(1000);
  EXPECT_DOUBLE_EQ(q.gpu_batch_us(), 0.9 * 5000 + 0.1 * 1000);
}

TEST(SchedPolicyTest, EveryNthNearlyCheapJobExploresTheCpu) {
  SchedOptions o = Hybrid();
  o.balance = true;
  o.gpu_alone_us = 200;
  o.explore_every = 4;
  o.explore_factor = 8;
  o.batch_wait = microseconds(0);
  SchedPolicy p(o);
  for (uint64_t id = 1; id <= 12; ++id) p.Enqueue(Job(id, 1000, 10), kT0);   // 5x the bound
  for (uint64_t id = 13; id <= 20; ++id) p.Enqueue(Job(id, 2000, 10), kT0);  // 10x: never
  EXPECT_EQ(p.queued(SchedQueue::kCpu), 3u);  // jobs 4, 8 and 12
  EXPECT_EQ(p.cheap(), 3u);
  EXPECT_EQ(p.balanced(), 0u);
  GpuTake g = p.TakeGpu(kT0);
  for (const SchedJob& j : g.jobs) EXPECT_FALSE(j.id <= 12 && j.id % 4 == 0) << j.id;  // none of them
  for (uint64_t want : {4u, 8u, 12u}) {
    auto j = p.TakeCpuCheap();
    ASSERT_TRUE(j.has_value());
    EXPECT_EQ(j->id, want);
    EXPECT_EQ(j->pinned, Unit::kCpu);
  }
  SchedOptions none = o;
  none.explore_every = 0;
  SchedPolicy q(none);
  for (uint64_t id = 1; id <= 12; ++id) q.Enqueue(Job(id, 1000, 10), kT0);
  EXPECT_EQ(q.queued(SchedQueue::kCpu), 0u);
}

// Past the host's admission, a CPU worker takes pinned or cheap jobs from the CPU queue's front
// window, and leaves the rest to the worker that drains it (TakeCpuOwn).
TEST(SchedPolicyTest, BusyHostCpuStillTakesCheapJobs) {
  SchedOptions o = Hybrid();
  o.gpu_alone_us = 200;
  o.cpu_ratio = 20;  // a 1000 us job with a 100 us share still queues for the CPU (ratio 10)
  o.gpu_ratio = 40;
  SchedPolicy p(o);
  p.Enqueue(Job(1, 1000, 100), kT0);  // cpu queue, not cheap
  p.Enqueue(Job(2, 150, 100), kT0);   // cheap
  p.Enqueue(Job(3, 1000, 100), kT0);
  EXPECT_EQ(p.queued(SchedQueue::kCpu), 3u);
  EXPECT_EQ(p.TakeCpuCheap()->id, 2u);
  EXPECT_FALSE(p.TakeCpuCheap().has_value());
  EXPECT_EQ(p.TakeCpuOwn(kT0)->id, 1u);
}

TEST(SchedPolicyTest, IdleCpuTakesOwnThenOldestFlexibleThenSteals) {
  SchedPolicy p(Hybrid());
  p.Enqueue(Job(1, 100, 1000), kT0);                       // cpu queue
  p.Enqueue(Job(2, 100, 120), kT0 + microseconds(1));      // flexible
  p.Enqueue(Job(3, 100, 110), kT0 + microseconds(2));      // flexible
  p.Enqueue(Job(4, 300, 100), kT0 + microseconds(3));      // gpu queue (ratio 3)
  const SchedTime now = kT0 + microseconds(10);
  EXPECT_EQ(p.TakeCpu(now)->id, 1u);
  EXPECT_EQ(p.TakeCpu(now)->id, 2u);
  EXPECT_EQ(p.TakeCpu(now)->id, 3u);
  // Only a GPU job is left: stolen when the CPU's 300 us beats the GPU's backlog (100) + 100?
  // No: 300 > 200, waiting for the GPU is faster. WouldSteal (what the runtime wakes an idle
  // worker for) agrees with the take.
  EXPECT_FALSE(p.WouldSteal(Unit::kCpu));
  EXPECT_FALSE(p.TakeCpu(now).has_value());
  // With a long GPU backlog it pays.
  for (uint64_t id = 10; id < 20; ++id) p.Enqueue(Job(id, 1000, 100, kT0 + microseconds(4)), now);
  EXPECT_TRUE(p.WouldSteal(Unit::kCpu));
  auto s = p.TakeCpu(now);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->stolen);
  EXPECT_EQ(s->id, 4u);  // the cheapest for the CPU among the oldest
}

// What a CPU worker takes past the host's idle cores (HybridScheduler's host-aware admission):
// TakeCpuOwn, urgent CPU work and its own queue but no flexible job and no steal; TakeCpuCheap,
// only jobs pinned to the CPU (no job is cheap here: gpu_alone_us is 0).
TEST(SchedPolicyTest, BusyHostCpuTakesOwnQueueOrPinnedOnly) {
  SchedPolicy p(Hybrid());
  p.Enqueue(Job(1, 100, 1000), kT0);                   // cpu queue
  p.Enqueue(Job(2, 100, 120), kT0 + microseconds(1));  // flexible
  for (uint64_t id = 10; id < 20; ++id) p.Enqueue(Job(id, 300, 100), kT0 + microseconds(2));  // gpu queue
  const SchedTime now = kT0 + microseconds(10);
  EXPECT_FALSE(p.TakeCpuCheap().has_value());
  EXPECT_EQ(p.TakeCpuOwn(now)->id, 1u);
  EXPECT_FALSE(p.TakeCpuOwn(now).has_value());  // neither the flexible job nor a steal
  SchedJob pinned = Job(3, 100, 1000, now);
  pinned.pinned = Unit::kCpu;
  p.Enqueue(pinned, now);
  p.Enqueue(Job(4, 100, 1000, now), now);  // cpu queue, behind the pinned one
  EXPECT_EQ(p.TakeCpuCheap()->id, 3u);
  EXPECT_FALSE(p.TakeCpuCheap().has_value());
  EXPECT_EQ(p.TakeCpuOwn(now)->id, 4u);
  // The full take still has the flexible job, then steals (a 10-job GPU backlog).
  EXPECT_EQ(p.TakeCpu(now)->id, 2u);
  auto s = p.TakeCpu(now);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->stolen);
}

TEST(SchedPolicyTest, GpuStealsFromTheCpuQueueWhenItPays) {
  SchedOptions o = Hybrid();
  o.batch_wait = microseconds(0);
  SchedPolicy p(o);
  // CPU-preferred jobs pile up (CPU backlog 20 * 100 / 2 workers = 1000 us).
  for (uint64_t id = 1; id <= 20; ++id) p.Enqueue(Job(id, 100, 300), kT0);
  EXPECT_TRUE(p.WouldSteal(Unit::kGpu));
  GpuTake t = p.TakeGpu(kT0);
  ASSERT_FALSE(t.jobs.empty());
  for (const SchedJob& j : t.jobs) EXPECT_TRUE(j.stolen);
  // Few CPU jobs: the GPU leaves them.
  SchedPolicy q(o);
  q.Enqueue(Job(1, 100, 300), kT0);
  EXPECT_FALSE(q.WouldSteal(Unit::kGpu));
  EXPECT_TRUE(q.TakeGpu(kT0).jobs.empty());
  // Griffin and stealing off: never.
  for (bool griffin : {true, false}) {
    SchedOptions g = o;
    if (griffin) g.mode = SchedMode::kGriffin; else g.steal = false;
    SchedPolicy r(g);
    for (uint64_t id = 1; id <= 20; ++id) r.Enqueue(Job(id, 100, 300), kT0);
    EXPECT_FALSE(r.WouldSteal(Unit::kGpu));
  }
}

// Hand-offs pinned to the CPU sit at the front of its queue; they must not hide the stealable
// jobs behind them from the GPU (they do not count against the steal window).
TEST(SchedPolicyTest, PinnedHandOffsDoNotUseUpTheStealWindow) {
  SchedOptions o = Hybrid();
  o.batch_wait = microseconds(0);
  o.steal_window = 4;
  SchedPolicy p(o);
  for (uint64_t id = 1; id <= 20; ++id) p.Enqueue(Job(id, 100, 300), kT0);
  for (uint64_t id = 100; id < 110; ++id) p.EnqueueMigrated(Job(id, 100, 10), kT0);
  GpuTake t = p.TakeGpu(kT0);
  ASSERT_FALSE(t.jobs.empty());
  for (const SchedJob& j : t.jobs) {
    EXPECT_LT(j.id, 100u) << "a pinned hand-off was given to the GPU";
    EXPECT_TRUE(j.stolen);
  }
}

// An idle CPU steals the GPU-queue job cheapest for it among the oldest steal_window: with the
// default window (64) it finds the cheap one twenty jobs deep, which a window of 8 cannot see.
TEST(SchedPolicyTest, TheStealWindowReachesTheJobCheapestForTheThief) {
  for (size_t window : {size_t{8}, SchedOptions{}.steal_window}) {
    SCOPED_TRACE(window);
    SchedOptions o = Hybrid();
    o.steal_window = window;
    SchedPolicy p(o);
    // Every job is faster on the GPU (GPU queue); all would be worth stealing (the GPU's backlog
    // is long); job 21 is by far the cheapest on the CPU.
    for (uint64_t id = 1; id <= 40; ++id) p.Enqueue(Job(id, id == 21 ? 2500 : 8000, 1000), kT0);
    auto j = p.TakeCpu(kT0);
    ASSERT_TRUE(j.has_value());
    EXPECT_TRUE(j->stolen);
    if (window >= 21) {
      EXPECT_EQ(j->id, 21u);
    } else {
      EXPECT_LE(j->id, window);
    }
  }
  EXPECT_GE(SchedOptions{}.steal_window, 64u);
}

TEST(SchedPolicyTest, UrgentJobRunsAtOnceOnItsPreferredProcessor) {
  SchedPolicy p(Hybrid());
  // A flexible job preferring the CPU, deadline 100 ms, arrived first.
  p.Enqueue(Job(1, 100, 120, kT0, milliseconds(100)), kT0);
  // CPU-queue jobs behind it that would normally come first (own queue before flexible).
  p.Enqueue(Job(2, 100, 1000, kT0 + milliseconds(1)), kT0 + milliseconds(1));
  p.Enqueue(Job(3, 100, 1000, kT0 + milliseconds(2)), kT0 + milliseconds(2));
  // Before half its deadline: own queue first.
  EXPECT_EQ(p.TakeCpu(kT0 + milliseconds(40))->id, 2u);
  // Past half its deadline: the urgent job jumps ahead.
  EXPECT_EQ(p.TakeCpu(kT0 + milliseconds(51))->id, 1u);
  EXPECT_EQ(p.TakeCpu(kT0 + milliseconds(51))->id, 3u);
}

// Urgency is looked for among each queue's oldest urgent_window jobs only (takes stay cheap on
// an overloaded node's long queues).
TEST(SchedPolicyTest, UrgencyIsSeenWithinTheWindow) {
  for (size_t window : {size_t{2}, size_t{64}}) {
    SCOPED_TRACE(window);
    SchedOptions o = Hybrid();
    o.urgent_window = window;
    SchedPolicy p(o);
    // Three flexible jobs preferring the CPU; only the third has a short deadline.
    p.Enqueue(Job(1, 100, 120, kT0, milliseconds(500)), kT0);
    p.Enqueue(Job(2, 100, 120, kT0, milliseconds(500)), kT0);
    p.Enqueue(Job(3, 100, 120, kT0, milliseconds(10)), kT0);
    p.Enqueue(Job(4, 100, 1000, kT0), kT0);  // the CPU queue
    const SchedTime now = kT0 + milliseconds(6);  // job 3 past half its deadline
    EXPECT_EQ(p.TakeCpu(now)->id, window > 2 ? 3u : 4u);
  }
}

TEST(SchedPolicyTest, UrgentGpuJobSkipsTheBatchWait) {
  SchedOptions o = Hybrid();
  o.batch_wait = milliseconds(5);
  SchedPolicy p(o);
  p.Enqueue(Job(1, 1000, 100, kT0, milliseconds(2)), kT0);
  EXPECT_TRUE(p.TakeGpu(kT0 + microseconds(100)).jobs.empty());  // not urgent, batch not full
  GpuTake t = p.TakeGpu(kT0 + milliseconds(1));                  // half of 2 ms: urgent
  ASSERT_EQ(t.jobs.size(), 1u);
  EXPECT_EQ(t.jobs[0].id, 1u);
}

TEST(SchedPolicyTest, GpuBatchesCloseOnWorkOrWait) {
  SchedOptions o = Hybrid();
  o.batch_work_us = 1000;
  o.max_batch = 8;
  o.batch_wait = microseconds(200);
  SchedPolicy p(o);
  p.Enqueue(Job(1, 1000, 100), kT0);
  p.Enqueue(Job(2, 1000, 100), kT0 + microseconds(50));
  // 200 us of work < 1000: wait until the oldest has waited 200 us (GpuReadyAt says when, and
  // the runtime wakes no other dispatcher for a job that joins the gathering batch before then).
  EXPECT_EQ(p.GpuReadyAt(kT0 + microseconds(60)), kT0 + microseconds(200));
  EXPECT_EQ(p.GpuReadyAt(kT0 + microseconds(200)), kT0 + microseconds(200));
  GpuTake t = p.TakeGpu(kT0 + microseconds(60));
  EXPECT_TRUE(t.jobs.empty());
  EXPECT_EQ(t.wake_at, kT0 + microseconds(200));
  t = p.TakeGpu(kT0 + microseconds(200));
  ASSERT_EQ(t.jobs.size(), 2u);
  EXPECT_EQ(t.jobs[0].id, 1u);
  EXPECT_EQ(t.jobs[1].id, 2u);
  EXPECT_EQ(p.GpuReadyAt(kT0 + microseconds(210)), kT0 + microseconds(210));  // nothing queued
  // Enough work: no wait, and the batch stops at the work threshold.
  for (uint64_t id = 10; id < 25; ++id) p.Enqueue(Job(id, 3000, 300), kT0);
  EXPECT_EQ(p.GpuReadyAt(kT0), kT0);
  t = p.TakeGpu(kT0);
  EXPECT_EQ(t.jobs.size(), 4u);  // 4 * 300 >= 1000
  // ...and at max_batch.
  SchedPolicy q(o);
  for (uint64_t id = 1; id <= 20; ++id) q.Enqueue(Job(id, 100, 10), kT0);
  EXPECT_EQ(q.TakeGpu(kT0).jobs.size(), 8u);
}

TEST(SchedPolicyTest, MigratedJobGoesFirstOnTheCpuAndIsNeverStolen) {
  SchedOptions o = Hybrid();
  o.batch_wait = microseconds(0);
  SchedPolicy p(o);
  for (uint64_t id = 1; id <= 5; ++id) p.Enqueue(Job(id, 100, 1000), kT0);
  SchedJob m = Job(99, 50, 10);  // would be a GPU job by cost
  p.EnqueueMigrated(m, kT0 + microseconds(5));
  EXPECT_TRUE(p.TakeGpu(kT0 + microseconds(5)).jobs.empty());  // pinned: the GPU cannot take it
  auto j = p.TakeCpu(kT0 + microseconds(5));
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(j->id, 99u);
  EXPECT_TRUE(j->migrated);
}

TEST(SchedPolicyTest, PinnedJobsStayOnTheirProcessor) {
  SchedOptions o = Hybrid();
  o.batch_wait = microseconds(0);
  SchedPolicy p(o);
  SchedJob g = Job(1, 10, 1000);  // CPU-cheap, but forced to the GPU
  g.pinned = Unit::kGpu;
  p.Enqueue(g, kT0);
  for (uint64_t id = 2; id < 40; ++id) p.Enqueue(Job(id, 10, 1000), kT0);  // long CPU backlog
  EXPECT_EQ(p.queued(SchedQueue::kGpu), 1u);
  // The CPU drains its own queue but never steals the pinned job.
  int cpu = 0;
  while (auto j = p.TakeCpu(kT0)) {
    EXPECT_NE(j->id, 1u);
    ++cpu;
  }
  EXPECT_EQ(cpu, 38);
  GpuTake t = p.TakeGpu(kT0);
  ASSERT_EQ(t.jobs.size(), 1u);
  EXPECT_EQ(t.jobs[0].id, 1u);
}

TEST(SchedPolicyTest, SingleProcessorModes) {
  SchedOptions o = Hybrid();
  o.mode = SchedMode::kCpu;
  SchedPolicy cpu(o);
  cpu.Enqueue(Job(1, 1000, 1), kT0);
  EXPECT_TRUE(cpu.TakeGpu(kT0 + milliseconds(1)).jobs.empty());
  EXPECT_EQ(cpu.TakeCpu(kT0)->id, 1u);

  o.mode = SchedMode::kGpu;
  o.batch_wait = microseconds(0);
  SchedPolicy gpu(o);
  gpu.Enqueue(Job(1, 1, 1000), kT0);
  EXPECT_FALSE(gpu.TakeCpu(kT0).has_value());  // CPU-cheap, still the GPU's
  ASSERT_EQ(gpu.TakeGpu(kT0).jobs.size(), 1u);
  gpu.EnqueueCpuRetry(Job(2, 1, 1000), kT0);  // a GPU failure: the CPU reruns it
  EXPECT_EQ(gpu.TakeCpu(kT0)->id, 2u);
}

TEST(SchedPolicyTest, GriffinPlacesByTheCallersChoiceWithoutFlexibleQueue) {
  SchedOptions o = Hybrid();
  o.mode = SchedMode::kGriffin;
  SchedPolicy p(o);
  SchedJob a = Job(1, 100, 120);
  a.preferred = Unit::kGpu;  // first intersection's ratio under the crossover
  p.Enqueue(a, kT0);
  SchedJob b = Job(2, 100, 120);
  b.preferred = Unit::kCpu;
  p.Enqueue(b, kT0);
  EXPECT_EQ(p.queued(SchedQueue::kGpu), 1u);
  EXPECT_EQ(p.queued(SchedQueue::kCpu), 1u);
  EXPECT_EQ(p.queued(SchedQueue::kFlex), 0u);
}

TEST(SchedPolicyTest, DrainEmptiesEveryQueue) {
  SchedPolicy p(Hybrid());
  p.Enqueue(Job(1, 1000, 100), kT0);
  p.Enqueue(Job(2, 100, 1000), kT0);
  p.Enqueue(Job(3, 100, 100), kT0);
  EXPECT_EQ(p.Drain().size(), 3u);
  EXPECT_EQ(p.queued_total(), 0u);
  EXPECT_FALSE(p.TakeCpu(kT0).has_value());
}

}  // namespace
}  // namespace search
