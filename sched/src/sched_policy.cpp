// sched_policy.hpp: queues, urgency, stealing and GPU batching.
#include "sched/sched_policy.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace search {

const char* SchedModeName(SchedMode m) {
  switch (m) {
    case SchedMode::kCpu:
      return "cpu";
    case SchedMode::kGpu:
      return "gpu";
    case SchedMode::kHybrid:
      return "hybrid";
    case SchedMode::kGriffin:
      return "griffin";
  }
  return "?";
}

Result<SchedMode> ParseSchedMode(std::string_view name) {
  if (name == "cpu") return SchedMode::kCpu;
  if (name == "gpu") return SchedMode::kGpu;
  if (name == "hybrid") return SchedMode::kHybrid;
  if (name == "griffin") return SchedMode::kGriffin;
  return Status::InvalidArgument("unknown scheduler '" + std::string(name) + "' (cpu, gpu, hybrid or griffin)");
}

const char* SchedQueueName(SchedQueue q) {
  switch (q) {
    case SchedQueue::kGpu:
      return "gpu";
    case SchedQueue::kCpu:
      return "cpu";
    case SchedQueue::kFlex:
      return "flexible";
  }
  return "?";
}

namespace {
SchedQueue QueueOf(Unit u) { return u == Unit::kGpu ? SchedQueue::kGpu : SchedQueue::kCpu; }
Unit Other(Unit u) { return u == Unit::kGpu ? Unit::kCpu : Unit::kGpu; }
double CostOn(const SchedJob& j, Unit u) { return u == Unit::kGpu ? j.gpu_us : j.cpu_us; }
}  // namespace

double SchedPolicy::FinishOn(const SchedJob& j, Unit u) const {
  if (u != Unit::kGpu) return j.cpu_us;
  return std::max({j.gpu_us, options_.gpu_alone_us, options_.batch_latency ? gpu_batch_us_ : 0.0});
}

void SchedPolicy::ObserveGpuBatch(double run_us) {
  if (!(run_us > 0)) return;
  gpu_batch_us_ = gpu_batch_us_ > 0 ? 0.9 * gpu_batch_us_ + 0.1 * run_us : run_us;
}

SchedPolicy::SchedPolicy(SchedOptions options) : options_(options) {
  options_.cpu_parallelism = std::max<size_t>(options_.cpu_parallelism, 1);
  options_.gpu_parallelism = std::max<size_t>(options_.gpu_parallelism, 1);
  options_.max_batch = std::max<size_t>(options_.max_batch, 1);
  options_.cheap_step = std::clamp(options_.cheap_step, 0.0, 1.0);
  options_.cheap_max_factor = std::max(options_.cheap_max_factor, 1.0);
  options_.cheap_fill_us = std::max(options_.cheap_fill_us, 0.0);
  cheap_threshold_us_ = options_.gpu_alone_us;
}

void SchedPolicy::AdaptCheapThreshold() {
  if (options_.cheap_step <= 0 || !CheapJobsOn()) return;
  const double lo = options_.gpu_alone_us, hi = CheapCapUs();
  // A GPU queue holds the batch being gathered, so under load the bound sits at its cap and the
  // balance rule decides which of the jobs under it the CPU keeps; the bound falls once the CPU's
  // queue is the longer one. (Requiring the GPU to be behind by one query alone as well kept the
  // bound near its floor.)
  // With cheap_fill_us the CPU's own room decides instead (sched_policy.hpp).
  const bool raise = options_.cheap_fill_us > 0 ? Backlog(Unit::kCpu) <= options_.cheap_fill_us
                                                : Backlog(Unit::kGpu) > Backlog(Unit::kCpu);
  cheap_threshold_us_ = std::clamp(cheap_threshold_us_ * (raise ? 1.0 + options_.cheap_step : 1.0 - options_.cheap_step), lo, hi);
}

bool SchedPolicy::Cheap(double cpu_us) const { return CheapJobsOn() && cpu_us <= cheap_threshold_us_; }

SchedQueue SchedPolicy::Classify(double cpu_us, double gpu_us) const {
  switch (options_.mode) {
    case SchedMode::kCpu:
      return SchedQueue::kCpu;
    case SchedMode::kGpu:
      return SchedQueue::kGpu;
    case SchedMode::kHybrid:
    case SchedMode::kGriffin:
      break;
  }
  if (Cheap(cpu_us)) return SchedQueue::kCpu;  // the CPU answers it before the GPU could
  const double ratio = cpu_us / std::max(gpu_us, 1e-9);
  if (ratio >= options_.gpu_ratio) return SchedQueue::kGpu;
  if (ratio <= options_.cpu_ratio) return SchedQueue::kCpu;
  return SchedQueue::kFlex;
}

size_t SchedPolicy::queued_total() const {
  size_t n = 0;
  for (const auto& q : queues_) n += q.size();
  return n;
}

void SchedPolicy::Push(SchedJob job, SchedTime now, bool front) {
  job.enqueued = now;
  const size_t q = static_cast<size_t>(job.queue);
  work_us_[q][0] += job.cpu_us;
  work_us_[q][1] += job.gpu_us;
  if (job.queue == SchedQueue::kCpu && job.cheap) cheap_cpu_us_ += job.cpu_us;
  if (front)
    queues_[q].push_front(std::move(job));
  else
    queues_[q].push_back(std::move(job));
}

SchedJob SchedPolicy::Pop(SchedQueue q, size_t index) {
  auto& dq = queues_[static_cast<size_t>(q)];
  SchedJob j = std::move(dq[index]);
  dq.erase(dq.begin() + static_cast<long>(index));
  double* w = work_us_[static_cast<size_t>(q)];
  w[0] = dq.empty() ? 0 : std::max(0.0, w[0] - j.cpu_us);
  w[1] = dq.empty() ? 0 : std::max(0.0, w[1] - j.gpu_us);
  if (q == SchedQueue::kCpu && j.cheap) cheap_cpu_us_ = dq.empty() ? 0 : std::max(0.0, cheap_cpu_us_ - j.cpu_us);
  return j;
}

SchedQueue SchedPolicy::Enqueue(SchedJob job, SchedTime now) {
  job.migrated = false;
  job.stolen = false;
  job.cheap = false;
  job.balanced = false;
  if (job.pinned.has_value()) {
    job.preferred = *job.pinned;
    job.queue = QueueOf(*job.pinned);
  } else if (options_.mode == SchedMode::kGriffin) {
    // Griffin places by the caller's choice (the first intersection's length ratio).
    job.queue = QueueOf(job.preferred);
  } else {
    AdaptCheapThreshold();
    job.queue = Classify(job.cpu_us, job.gpu_us);
    job.cheap = Cheap(job.cpu_us);
    bool explore = false;
    // Exploration's range is fixed by gpu_alone_us, not by the adaptive bound.
    if (!job.cheap && CheapJobsOn() && job.cpu_us <= options_.gpu_alone_us * std::max(options_.explore_factor, 1.0) &&
        options_.explore_every > 0 && ++explore_seen_ % options_.explore_every == 0) {
      // Explore (sched_policy.hpp, explore_every): it runs on the CPU, which the balance rule and
      // the GPU's stealing would otherwise undo, as they would for any job predicted this dear.
      explore = true;
      job.cheap = true;
      job.pinned = Unit::kCpu;
      job.queue = SchedQueue::kCpu;
    }
    // Earliest expected finish for what the ratio gives the CPU queue.
    if (job.queue == SchedQueue::kCpu && !explore && options_.balance && options_.mode == SchedMode::kHybrid &&
        Backlog(Unit::kCpu) + job.cpu_us > Backlog(Unit::kGpu) + FinishOn(job, Unit::kGpu)) {
      job.queue = SchedQueue::kGpu;
      job.balanced = true;
      ++balanced_;
    }
    if (job.queue != SchedQueue::kCpu) job.cheap = false;
    if (job.cheap) ++cheap_;
    if (job.queue == SchedQueue::kFlex)
      job.preferred = job.cpu_us <= job.gpu_us ? Unit::kCpu : Unit::kGpu;
    else
      job.preferred = job.queue == SchedQueue::kGpu ? Unit::kGpu : Unit::kCpu;
  }
  const SchedQueue q = job.queue;
  Push(std::move(job), now, false);
  return q;
}

void SchedPolicy::EnqueueMigrated(SchedJob job, SchedTime now) {
  job.cheap = false;
  job.pinned = Unit::kCpu;
  job.preferred = Unit::kCpu;
  job.migrated = true;
  job.queue = SchedQueue::kCpu;
  Push(std::move(job), now, true);
}

bool SchedPolicy::Urgent(const SchedJob& j, SchedTime now) const {
  if (j.deadline == SchedTime::max()) return false;
  const auto budget = j.deadline - j.arrival;
  return now - j.arrival >= std::chrono::duration_cast<SchedClock::duration>(budget * options_.urgent_fraction);
}

double SchedPolicy::Backlog(Unit u) const {
  const size_t q = static_cast<size_t>(QueueOf(u));
  if (u == Unit::kGpu) return work_us_[q][1] / static_cast<double>(options_.gpu_parallelism);
  const double cheap = std::min(cheap_cpu_us_, work_us_[q][0]);
  const size_t workers = std::max(options_.cpu_workers, options_.cpu_parallelism);
  return (work_us_[q][0] - cheap) / static_cast<double>(options_.cpu_parallelism) +
         cheap / static_cast<double>(workers);
}

long SchedPolicy::OldestUrgent(SchedQueue q, Unit u, SchedTime now) const {
  // Only the flexible queue mixes preferences: the other unit's queue holds no job preferring u.
  if (q != SchedQueue::kFlex && q != QueueOf(u)) return -1;
  const auto& dq = queues_[static_cast<size_t>(q)];
  const size_t n = std::min(dq.size(), std::max<size_t>(options_.urgent_window, 1));
  for (size_t i = 0; i < n; ++i)  // queues are in enqueue order; urgency by arrival
    if (dq[i].preferred == u && CanRun(dq[i], u) && Urgent(dq[i], now)) return static_cast<long>(i);
  return -1;
}

long SchedPolicy::StealCandidate(Unit thief) const {
  if (!options_.steal || options_.mode != SchedMode::kHybrid) return -1;  // griffin places, never steals
  const Unit owner = Other(thief);
  const auto& dq = queues_[static_cast<size_t>(QueueOf(owner))];
  const double backlog = Backlog(owner);
  long best = -1;
  double best_cost = 0;
  // The first steal_window jobs the thief may run: jobs pinned to the owner (Griffin hand-offs,
  // GPU retries, which go to the front of the CPU queue) neither qualify nor use up the window.
  size_t seen = 0;
  for (size_t i = 0; i < dq.size() && seen < options_.steal_window; ++i) {
    const SchedJob& j = dq[i];
    if (!CanRun(j, thief)) continue;
    ++seen;
    if (FinishOn(j, thief) > backlog + FinishOn(j, owner)) continue;  // waiting for the owner is faster
    const double cost = CostOn(j, thief);
    if (best < 0 || cost < best_cost) best = static_cast<long>(i), best_cost = cost;
  }
  return best;
}

std::optional<SchedJob> SchedPolicy::TakeOne(Unit u, SchedTime now, bool allow_steal, bool allow_flex) {
  // 1. The oldest urgent job preferring u, from its own queue or the flexible one (OldestUrgent).
  long best = -1;
  SchedQueue best_q = SchedQueue::kCpu;
  for (SchedQueue q : {SchedQueue::kGpu, SchedQueue::kCpu, SchedQueue::kFlex}) {
    const long i = OldestUrgent(q, u, now);
    if (i < 0) continue;
    if (best < 0 || queues_[static_cast<size_t>(q)][static_cast<size_t>(i)].arrival <
                        queues_[static_cast<size_t>(best_q)][static_cast<size_t>(best)].arrival)
      best = i, best_q = q;
  }
  if (best >= 0) return Pop(best_q, static_cast<size_t>(best));
  // 2. Its own queue (pinned jobs there are pinned to u).
  const SchedQueue own = QueueOf(u);
  if (!queues_[static_cast<size_t>(own)].empty()) return Pop(own, 0);
  // 3. The oldest flexible job.
  if (allow_flex && !queues_[static_cast<size_t>(SchedQueue::kFlex)].empty()) return Pop(SchedQueue::kFlex, 0);
  // 4. Steal.
  if (allow_steal) {
    const long s = StealCandidate(u);
    if (s >= 0) {
      SchedJob j = Pop(QueueOf(Other(u)), static_cast<size_t>(s));
      j.stolen = true;
      return j;
    }
  }
  return std::nullopt;
}

std::optional<SchedJob> SchedPolicy::TakeCpu(SchedTime now) {
  if (options_.mode == SchedMode::kGpu) {  // only jobs pinned to the CPU (retries)
    auto& dq = queues_[static_cast<size_t>(SchedQueue::kCpu)];
    if (dq.empty()) return std::nullopt;
    return Pop(SchedQueue::kCpu, 0);
  }
  return TakeOne(Unit::kCpu, now, true);
}

std::optional<SchedJob> SchedPolicy::TakeCpuOwn(SchedTime now) {
  return TakeOne(Unit::kCpu, now, /*allow_steal=*/false, /*allow_flex=*/false);
}

std::optional<SchedJob> SchedPolicy::TakeCpuCheap() {
  // Hand-offs and retries enter at the front, so the window finds them; a job pinned by its flags
  // further back is taken in queue order by the worker that drains the queue (TakeCpuOwn).
  const auto& dq = queues_[static_cast<size_t>(SchedQueue::kCpu)];
  const size_t n = std::min(dq.size(), std::max<size_t>(options_.urgent_window, 1));
  for (size_t i = 0; i < n; ++i)
    if (dq[i].pinned == Unit::kCpu || dq[i].cheap) return Pop(SchedQueue::kCpu, i);
  return std::nullopt;
}

SchedTime SchedPolicy::GpuReadyAt(SchedTime now) const {
  // Wait for a fuller batch? Only when what is queued for the GPU is under the work threshold,
  // no job preferring the GPU is urgent, and the oldest has waited less than batch_wait.
  const auto& gq = queues_[static_cast<size_t>(SchedQueue::kGpu)];
  const auto& fq = queues_[static_cast<size_t>(SchedQueue::kFlex)];
  const double available = work_us_[static_cast<size_t>(SchedQueue::kGpu)][1] +
                           work_us_[static_cast<size_t>(SchedQueue::kFlex)][1];
  const size_t count = gq.size() + fq.size();
  if (count > 0 && count < options_.max_batch && available < options_.batch_work_us) {
    bool urgent = false;
    SchedTime oldest = SchedTime::max();
    for (const auto* dq : {&gq, &fq})
      for (const SchedJob& j : *dq) {
        if (!CanRun(j, Unit::kGpu)) continue;
        oldest = std::min(oldest, j.enqueued);
        urgent = urgent || (j.preferred == Unit::kGpu && Urgent(j, now));
      }
    const SchedTime ready = oldest == SchedTime::max() ? oldest : oldest + options_.batch_wait;
    if (!urgent && now < ready) return ready;
  }
  return now;
}

GpuTake SchedPolicy::TakeGpu(SchedTime now) {
  GpuTake take;
  if (options_.mode == SchedMode::kCpu) return take;
  if (const SchedTime ready = GpuReadyAt(now); ready > now) {
    take.wake_at = ready;
    return take;
  }
  double work = 0;
  while (take.jobs.size() < options_.max_batch && work < options_.batch_work_us) {
    auto j = TakeOne(Unit::kGpu, now, true);
    if (!j.has_value()) break;
    work += j->gpu_us;
    take.jobs.push_back(std::move(*j));
  }
  return take;
}

std::vector<SchedJob> SchedPolicy::Drain() {
  std::vector<SchedJob> out;
  for (auto& dq : queues_) {
    for (SchedJob& j : dq) out.push_back(std::move(j));
    dq.clear();
  }
  for (auto& w : work_us_) w[0] = w[1] = 0;
  cheap_cpu_us_ = 0;
  return out;
}

}  // namespace search
