// ScheduledExecutor (see node/scheduled_executor.hpp).
#include "node/scheduled_executor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/query_tree.hpp"
#include "index_store/shard_store.hpp"
#include "core/log.hpp"
#include "metrics/metrics.hpp"

namespace search {
namespace {

const Logger& Log() {
  static const Logger kLog("node");
  return kLog;
}

// The GPU tree and count path's cost per document and term, in microseconds of a batched GPU
// (a bit per document and term, every list decoded: BENCHMARKS.md "Query language").
constexpr double kGpuTreeUsPerDocTerm = 5e-7;
// The GPU phrase producer's cost per unit of QueryFeatures::phrase_work (a posting of a phrase's
// rarest token times the phrase's tokens), in microseconds of a batched GPU, beyond the boolean of
// the same tokens (bench/scripts/gpu_phrase_cost.sh; BENCHMARKS.md "Query language").
constexpr double kGpuPhraseUsPerWork = 5e-5;

// Adds the distinct phrases of `node` (their tokens) to `out`.
void CollectPhrases(const QueryNode& node, std::vector<const std::vector<std::string>*>* out) {
  if (node.kind == QueryNode::Kind::kPhrase) {
    for (const auto* p : *out)
      if (*p == node.tokens) return;
    out->push_back(&node.tokens);
  }
  for (const QueryNode::Clause& c : node.clauses) CollectPhrases(c.node, out);
}

double MicrosSince(SchedTime t0) { return std::chrono::duration<double, std::micro>(SchedClock::now() - t0).count(); }

}  // namespace

double GpuShapedUs(double predicted_us, uint64_t docs, size_t terms, uint64_t phrase_work) {
  const double doc_terms = static_cast<double>(docs) * static_cast<double>(std::max<size_t>(1, terms));
  const double tree_us = doc_terms * kGpuTreeUsPerDocTerm;
  return std::max(predicted_us, tree_us) + static_cast<double>(phrase_work) * kGpuPhraseUsPerWork;
}

// What a task carries: the query, the caller's deadline and flags, and the answer.
struct ScheduledExecutor::Call {
  const Query* query = nullptr;
  Deadline deadline = kNoDeadline;
  uint32_t flags = 0;
  bool step = false;                 // griffin: intersect on the GPU, hand the candidates to the CPU
  std::vector<uint32_t> candidates;  // the GPU's intersection, once migrated
  Result<ExecOutput> out = Status::Internal("not run");
  bool ids_pending = false;  // out's hits still need their external ids (Finalize resolves them)
  std::vector<PreparedTerm> prepared;  // the terms as Features looked them up (empty: not kept)
  bool cpu_predicted = false;  // the model predicted the CPU's time (job.cpu_us is not a stand-in)
};

class ScheduledExecutor::Runner final : public SchedRunner {
 public:
  Runner(CpuExecutorAdapter* cpu, BatchExecutor* gpu, double crossover) : cpu_(cpu), gpu_(gpu), crossover_(crossover) {}

  void RunCpu(SchedTask& task) override {
    auto* call = static_cast<Call*>(task.payload);
    // The external ids are left to Finalize, as a GPU answer's are: it runs on the thread that
    // answers the request (Execute's caller; with ExecuteAsync the finishing thread).
    if (task.migrated) {  // Griffin: the GPU's intersection, finished here
      call->out = cpu_->ExecuteFromCandidates(*call->query, call->candidates, call->deadline, false);
    } else {
      // The terms as the request's thread looked them up (Features), when it kept them.
      call->out = cpu_->Execute(*call->query, call->deadline, call->flags & ~(kFlagForceCpu | kFlagForceGpu),
                                call->prepared.empty() ? nullptr : &call->prepared, false);
    }
    call->ids_pending = call->out.ok();
    task.status = call->out.ok() ? Status::Ok() : call->out.status();
  }

  void RunGpuBatch(std::span<SchedTask* const> all) override {
    // Griffin steps one by one (each ends in a hand-off); whole queries as one batch.
    std::vector<SchedTask*> tasks;
    for (SchedTask* t : all) {
      auto* call = static_cast<Call*>(t->payload);
      if (!call->step || !t->may_migrate) {  // the whole query here
        tasks.push_back(t);
        continue;
      }
      auto prefix = gpu_->IntersectPrefix(*call->query, crossover_);
      if (prefix.ok()) {
        call->candidates = std::move(prefix->candidates);
        t->outcome = GpuOutcome::kMigrate;
      } else {
        t->status = prefix.status();
        t->outcome = GpuOutcome::kRetryCpu;
      }
    }
    if (tasks.empty()) return;
    std::vector<BatchItem> items(tasks.size());
    for (size_t i = 0; i < tasks.size(); ++i) {
      const Call& call = *static_cast<Call*>(tasks[i]->payload);
      items[i].query = call.query;
      items[i].prepared = call.prepared.empty() ? nullptr : &call.prepared;  // looked up on the request's thread
      items[i].resolve_ids = false;  // the caller's thread resolves them (Execute), not the dispatcher
    }
    gpu_->ExecuteBatch(items);
    for (size_t i = 0; i < tasks.size(); ++i) {
      SchedTask& t = *tasks[i];
      auto* call = static_cast<Call*>(t.payload);
      const bool forced = (call->flags & kFlagForceGpu) != 0;
      if (items[i].result.ok() || !items[i].retry_on_cpu || forced) {
        call->out = std::move(items[i].result);
        call->ids_pending = call->out.ok();
        t.status = call->out.ok() ? Status::Ok() : call->out.status();
        t.outcome = GpuOutcome::kDone;
      } else {
        t.status = items[i].result.status();
        t.outcome = GpuOutcome::kRetryCpu;
      }
    }
  }

 private:
  CpuExecutorAdapter* cpu_;
  BatchExecutor* gpu_;
  double crossover_;
};

ScheduledExecutor::ScheduledExecutor(const ShardReader* shard, BatchExecutor* gpu, ScheduledExecutorOptions options)
    : shard_(shard), gpu_(gpu), options_(options), cpu_(shard) {}

ScheduledExecutor::~ScheduledExecutor() {
  if (scheduler_) scheduler_->Stop();
}

Result<std::unique_ptr<ScheduledExecutor>> ScheduledExecutor::Create(const ShardReader* shard, BatchExecutor* gpu,
                                                                     Metrics* metrics,
                                                                     ScheduledExecutorOptions options) {
  if (shard == nullptr) return Status::InvalidArgument("ScheduledExecutor: no shard");
  if (gpu == nullptr && options.sched.policy.mode != SchedMode::kCpu) {
    return Status::Unavailable(std::string("scheduler '") + SchedModeName(options.sched.policy.mode) +
                               "' needs a GPU executor and this node has none");
  }
  if (options.sched.policy.mode == SchedMode::kCpu) gpu = nullptr;
  std::unique_ptr<ScheduledExecutor> e(new ScheduledExecutor(shard, gpu, options));
  SEARCH_RETURN_IF_ERROR(e->Calibrate());
  e->runner_ = std::make_unique<Runner>(&e->cpu_, gpu, e->options_.crossover);
  if (gpu != nullptr && metrics != nullptr) e->gpu_metrics_ = std::make_unique<GpuExecutorMetrics>(metrics->registry());
  HybridSchedulerOptions so = options.sched;
  so.policy.gpu_alone_us = e->options_.sched.policy.gpu_alone_us;  // measured by Calibrate when asked
  if (gpu == nullptr) so.gpu_dispatchers = 0;
  e->scheduler_ = std::make_unique<HybridScheduler>(so, e->runner_.get(), &e->model_, metrics);
  e->scheduler_->Start();
  if (const uint64_t failed = e->scheduler_->cpu_pin_failures(); failed > 0)
    Log().Warn() << failed << " of " << so.cpu_workers
                 << " CPU workers could not pin themselves to their own CPUs and run on the "
                    "node's other CPUs";
  LogLine line = Log().Info();
  line << "scheduler " << SchedModeName(options.sched.policy.mode) << ": " << so.cpu_workers << " CPU workers, "
       << so.gpu_dispatchers << " GPU dispatchers; calibrated on " << e->calibration_samples_[0] << " CPU and "
       << e->calibration_samples_[1] << " GPU runs; crossover " << e->options_.crossover;
  if (so.idle_cores) line << "; host-aware, idle reserve " << so.idle_reserve << " cores";
  if (so.policy.mode == SchedMode::kHybrid && so.policy.gpu_alone_us > 0)
    line << "; one query alone on the GPU " << static_cast<int>(so.policy.gpu_alone_us)
         << " us (queries predicted faster on the CPU run there"
         << (so.policy.cheap_step > 0 ? "; the bound adapts to the queues, up to " +
                                            std::to_string(static_cast<int>(so.policy.gpu_alone_us *
                                                                            so.policy.cheap_max_factor)) +
                                            " us)"
                                      : std::string(")"));
  if (so.policy.mode == SchedMode::kHybrid && so.policy.cheap_step > 0 && so.policy.cheap_fill_us > 0)
    line << "; fill rule: the bound rises while the CPU's backlog is at most "
         << static_cast<int>(so.policy.cheap_fill_us) << " us";
  if (so.policy.mode == SchedMode::kHybrid && so.policy.batch_latency) line << "; batch latency counted";
  if (!so.cpu_worker_cpus.empty()) line << "; CPU workers on " << so.cpu_worker_cpus.size() << " CPUs of their own";
  return e;
}

Result<QueryFeatures> ScheduledExecutor::Features(const Query& query, std::vector<PreparedTerm>* prepared) {
  QueryFeatures f;
  f.mode = query.mode;
  std::vector<uint64_t> counts;
  std::vector<uint64_t> term_counts(query.terms.size(), 0);  // per query.terms entry; 0: absent
  if (prepared != nullptr) prepared->assign(gpu_ != nullptr ? query.terms.size() : 0, PreparedTerm{});
  bool keep = prepared != nullptr && gpu_ != nullptr;
  for (size_t i = 0; i < query.terms.size(); ++i) {
    const std::string& term = query.terms[i];
    auto info = shard_->GetTermInfo(term);
    if (!info.ok()) return info.status().WithContext("term '" + term + "'");
    if (!info->has_value()) continue;
    counts.push_back((*info)->count);
    term_counts[i] = (*info)->count;
    f.total += (*info)->count;
    // Fetch the list into the main-memory cache here, on the caller's thread: whichever processor
    // runs the query reads it from there, and a cold fetch (RocksDB read and validation) on a GPU
    // dispatcher's thread would hold up its whole batch. A failure is left for the run to report
    // (nothing is kept then: the GPU executor looks the terms up again and meets it).
    if (gpu_ == nullptr) continue;
    auto list = shard_->GetList(term);
    if (!keep) continue;
    PreparedTerm& t = (*prepared)[i];
    t.present = true;
    t.df = (*info)->df;
    if (list.ok()) {
      t.list = std::move(list).value();
    } else if (list.status().code() != StatusCode::kNotFound) {
      keep = false;
    }
  }
  if (prepared != nullptr && !keep) prepared->clear();
  std::sort(counts.begin(), counts.end());
  f.terms = static_cast<uint32_t>(counts.size());
  f.shortest = counts.empty() ? 0 : counts[0];
  f.second = counts.size() < 2 ? 0 : counts[1];
  f.longest = counts.empty() ? 0 : counts.back();
  if (query.tree != nullptr) {
    std::vector<const std::vector<std::string>*> phrases;
    CollectPhrases(*query.tree, &phrases);
    for (const auto* tokens : phrases) {
      uint64_t rarest = std::numeric_limits<uint64_t>::max();
      for (const std::string& t : *tokens) {
        // query.terms is canonical (ascending, unique) and holds every token of the tree.
        const auto it = std::lower_bound(query.terms.begin(), query.terms.end(), t);
        const uint64_t n = it != query.terms.end() && *it == t ? term_counts[it - query.terms.begin()] : 0;
        rarest = std::min(rarest, n);
      }
      f.phrase_work += rarest * tokens->size();  // an absent token: the producer does not run
    }
  }
  if (gpu_ != nullptr) f.nonresident_bytes = gpu_->NonResidentBytes(query);
  return f;
}

Status ScheduledExecutor::Calibrate() {
  const auto t0 = SchedClock::now();
  const auto over = [&] { return SchedClock::now() - t0 > options_.calibration_budget; };
  // Terms by log2 of their list length, up to 16 per bucket (reservoir), from at most 2M terms.
  std::mt19937_64 rng(options_.seed);
  std::array<std::vector<std::string>, 33> buckets;
  std::array<uint64_t, 33> seen{};
  uint64_t visited = 0;
  SEARCH_RETURN_IF_ERROR(shard_->ForEachTerm([&](std::string_view term, const TermInfo& info) {
    if (info.count > 0) {
      const size_t b = std::min<size_t>(32, static_cast<size_t>(std::log2(static_cast<double>(info.count))));
      const uint64_t n = ++seen[b];
      if (buckets[b].size() < 16) {
        buckets[b].emplace_back(term);
      } else if (rng() % n < 16) {
        buckets[b][rng() % 16] = std::string(term);
      }
    }
    return ++visited < 2000000;
  }));
  std::vector<size_t> nonempty;
  for (size_t b = 0; b < buckets.size(); ++b)
    if (!buckets[b].empty()) nonempty.push_back(b);
  if (nonempty.empty()) return Status::Ok();  // an empty shard: nothing to learn; defaults apply

  std::vector<CostSample> cpu_samples, gpu_samples;
  std::vector<Query> gpu_queries;  // the calibration queries, for the batched GPU pass
  // One query alone on the GPU, as the scheduler runs it: its microseconds, or -1 if it failed.
  auto gpu_alone = [&](const Query& q) -> double {
    BatchItem item;
    item.query = &q;
    item.resolve_ids = false;  // as the scheduler runs it
    const auto t = SchedClock::now();
    gpu_->ExecuteBatch(std::span<BatchItem>(&item, 1));
    return item.result.ok() ? MicrosSince(t) : -1;
  };
  const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
  for (size_t i = 0; i < options_.calibration_queries && !over(); ++i) {
    Query q;
    q.mode = modes[i % 3];
    q.k = 10;
    const size_t n = 2 + rng() % 3;
    for (size_t t = 0; t < n; ++t) {
      const auto& b = buckets[nonempty[rng() % nonempty.size()]];
      q.terms.push_back(b[rng() % b.size()]);
    }
    std::sort(q.terms.begin(), q.terms.end());
    q.terms.erase(std::unique(q.terms.begin(), q.terms.end()), q.terms.end());
    SEARCH_ASSIGN_OR_RETURN(QueryFeatures f, Features(q));
    // CPU: once to warm the main-memory list cache, then measured.
    (void)cpu_.Execute(q, kNoDeadline, 0);
    auto c0 = SchedClock::now();
    auto cpu = cpu_.Execute(q, kNoDeadline, 0);
    if (cpu.ok()) cpu_samples.push_back({f, MicrosSince(c0)});
    if (gpu_ == nullptr) continue;
    // GPU, cold: alone, its lists copied first (what a non-resident list costs).
    if (const double us = gpu_alone(q); us >= 0) gpu_samples.push_back({f, us});
    gpu_queries.push_back(std::move(q));
  }
  // GPU, resident, as the scheduler runs it: in batches of up to max_batch, each batch's time
  // apportioned to its queries by postings. The online refresh observes apportioned batch times
  // too (HybridScheduler::GpuLoop), so the model learns the GPU's cost per query under batching
  // from the start, not one query's latency (which would make the CPU look cheaper than the GPU
  // for most queries).
  const size_t per_batch = std::max<size_t>(1, options_.sched.policy.max_batch);
  for (size_t b = 0; b < gpu_queries.size() && !over(); b += per_batch) {
    const size_t n = std::min(per_batch, gpu_queries.size() - b);
    std::vector<BatchItem> items(n);
    std::vector<QueryFeatures> feats(n);
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      items[i].query = &gpu_queries[b + i];
      items[i].resolve_ids = false;
      SEARCH_ASSIGN_OR_RETURN(feats[i], Features(gpu_queries[b + i]));
      total += std::max<double>(1.0, static_cast<double>(feats[i].total));
    }
    const auto t = SchedClock::now();
    gpu_->ExecuteBatch(items);
    const double us = MicrosSince(t);
    for (size_t i = 0; i < n; ++i)
      if (items[i].result.ok())
        gpu_samples.push_back({feats[i], us * std::max<double>(1.0, static_cast<double>(feats[i].total)) / total});
  }
  // One query alone on the GPU, its lists resident now: the GPU's latency floor, below which the
  // hybrid scheduler's cheap jobs go to the CPU (SchedPolicy::Cheap). The median of up to 16
  // and-queries (the other modes' when there are none).
  double& alone = options_.sched.policy.gpu_alone_us;
  if (alone < 0) {
    alone = 0;
    if (gpu_ != nullptr) {
      std::vector<double> and_us, other_us;
      for (size_t i = 0; i < gpu_queries.size() && and_us.size() < 16 && !over(); ++i) {
        const double us = gpu_alone(gpu_queries[i]);
        if (us >= 0) (gpu_queries[i].mode == QueryMode::kAnd ? and_us : other_us).push_back(us);
      }
      std::vector<double>& use = and_us.empty() ? other_us : and_us;
      if (!use.empty()) {
        std::nth_element(use.begin(), use.begin() + static_cast<long>(use.size() / 2), use.end());
        alone = use[use.size() / 2];
      }
    }
  }
  model_.Calibrate(Unit::kCpu, cpu_samples);
  model_.Calibrate(Unit::kGpu, gpu_samples);
  calibration_samples_[0] = cpu_samples.size();
  calibration_samples_[1] = gpu_samples.size();
  if (options_.crossover <= 0) {
    std::vector<uint64_t> shortest;
    for (const CostSample& c : cpu_samples) shortest.push_back(c.f.shortest);
    std::sort(shortest.begin(), shortest.end());
    options_.crossover = CalibrateCrossover(shortest.empty() ? 0 : shortest[shortest.size() / 2]);
  }
  return Status::Ok();
}

double ScheduledExecutor::CalibrateCrossover(uint64_t shortest) const {
  if (gpu_ == nullptr || shortest == 0) return 128;
  for (double r = 2; r <= 4096; r *= 2) {
    QueryFeatures f;
    f.mode = QueryMode::kAnd;
    f.terms = 2;
    f.shortest = shortest;
    f.second = static_cast<uint64_t>(static_cast<double>(shortest) * r);
    f.total = f.shortest + f.second;
    f.longest = f.second;
    double cpu = 0, gpu = 0;
    if (!model_.Predict(Unit::kCpu, f, &cpu) || !model_.Predict(Unit::kGpu, f, &gpu)) return 128;
    if (cpu <= gpu) return r;
  }
  return 4096;
}

Status ScheduledExecutor::Prepare(const Query& query, Deadline deadline, uint32_t flags, Call* call, SchedTask* task,
                                  double* features_s) {
  const bool force_cpu = (flags & kFlagForceCpu) != 0;
  const bool force_gpu = (flags & kFlagForceGpu) != 0;
  if (force_cpu && force_gpu) return Status::InvalidArgument("flags force both the CPU and the GPU");
  if (force_gpu && gpu_ == nullptr) return Status::Unavailable("this node runs no GPU executor");
  if (deadline != kNoDeadline && SchedClock::now() >= deadline) {
    return Status::DeadlineExceeded("deadline passed before execution");
  }
  if (!(query.count && query.k == 0)) SEARCH_RETURN_IF_ERROR(ValidateK(query.k));
  // A shape the GPU engine does not run (a phrase tree past its program's slots): the CPU engine's
  // alone (a GPU node counts it). Other phrase trees are GPU work like any tree.
  const std::optional<GpuUnsupportedReason> unsupported = GpuUnsupported(query);
  const bool cpu_only = unsupported.has_value();
  if (cpu_only && gpu_ != nullptr) {
    if (force_gpu) {
      return Status::Unavailable("the GPU engine does not run this query (" +
                                 std::string(GpuUnsupportedReasonLabel(*unsupported)) + ")");
    }
    if (gpu_metrics_ != nullptr) gpu_metrics_->CountUnsupported(*unsupported);
  }
  const SchedTime t_features = SchedClock::now();
  // A CPU-only query's terms the CPU engine looks up itself (with their positions): nothing kept.
  SEARCH_ASSIGN_OR_RETURN(QueryFeatures f, Features(query, cpu_only ? nullptr : &call->prepared));

  call->query = &query;
  call->deadline = deadline;
  call->flags = flags;
  task->payload = call;
  task->features = f;
  SchedJob& j = task->job;
  j.arrival = SchedClock::now();
  j.deadline = deadline == kNoDeadline ? SchedTime::max() : deadline;
  call->cpu_predicted = model_.Predict(Unit::kCpu, f, &j.cpu_us);
  if (!call->cpu_predicted) j.cpu_us = 1;
  if (gpu_ == nullptr || !model_.Predict(Unit::kGpu, f, &j.gpu_us)) j.gpu_us = gpu_ == nullptr ? 1e12 : 1;
  if (cpu_only) {
    j.gpu_us = 1e12;  // CPU work for the policy: its queue, never a GPU batch, never stolen
    j.pinned = Unit::kCpu;
  }
  // Trees and counts run on either engine, but the model's features (list lengths, terms, mode)
  // describe a pruned bag of words: the GPU evaluates a tree or a count exhaustively (its cost
  // ~ the shard's documents x the terms, a phrase's tokens among them), the CPU a tree by its own
  // rules. Their runs are not samples for the model (it still predicts them).
  const bool shaped = query.tree != nullptr || query.count;
  if (shaped) task->model_sample = false;
  if (shaped && gpu_ != nullptr && !cpu_only) {
    // The GPU's tree and count path decodes every list whole and sets and evaluates a bit per
    // document and term, so its time grows with the shard's documents times the terms, whatever
    // the model predicts for a pruned bag of words: the policy sees at least that, and a phrase's
    // producer on top (GpuShapedUs).
    const ShardMeta& meta = shard_->meta();
    j.gpu_us = GpuShapedUs(j.gpu_us, meta.doc_end - meta.doc_begin, query.terms.size(), f.phrase_work);
  }
  if (force_cpu) j.pinned = Unit::kCpu;
  if (force_gpu) j.pinned = Unit::kGpu;
  const double ratio = static_cast<double>(f.second) / std::max<double>(1.0, static_cast<double>(f.shortest));
  if (mode() == SchedMode::kGriffin) {
    if (query.mode != QueryMode::kOr && f.terms >= 2) {
      j.preferred = ratio < options_.crossover ? Unit::kGpu : Unit::kCpu;
    } else {
      j.preferred = j.cpu_us <= j.gpu_us ? Unit::kCpu : Unit::kGpu;
    }
  }
  // Hybrid and griffin: an and-query whose first intersection suits the GPU but with a list past
  // the crossover ahead intersects on the GPU (if the GPU takes it) and finishes on the CPU.
  call->step = !shaped && (mode() == SchedMode::kGriffin || mode() == SchedMode::kHybrid) &&
               query.mode != QueryMode::kOr &&
               f.terms >= 3 && ratio < options_.crossover && !force_cpu && !force_gpu &&
               static_cast<double>(f.longest) >= options_.crossover * static_cast<double>(f.shortest);
  *features_s = std::chrono::duration<double>(SchedClock::now() - t_features).count();
  scheduler_->ObserveHost(SchedHostPhase::kFeatures, *features_s);
  return Status::Ok();
}

Result<ExecOutput> ScheduledExecutor::Finalize(Call& call, SchedTask& task, const Status& submitted,
                                               double features_s) {
  if (!call.out.ok() && call.out.status().code() == StatusCode::kInternal && !submitted.ok()) return submitted;  // never ran
  if (!call.out.ok()) return std::move(call.out);
  if (task.retried) call.out->processor = Processor::kCpu;
  ExecTiming& tm = call.out->timing;
  tm.features_us = features_s * 1e6;
  tm.submit_us = task.submit_us;
  tm.wait_us = task.wait_us;
  tm.run_us = task.run_us;
  tm.return_us = task.return_us;
  tm.gpu_batch = task.gpu_batch;
  tm.migrated = task.migrated;
  tm.stolen = task.stolen;
  tm.retried = task.retried;
  if (call.ids_pending) {
    const SchedTime t_resolve = SchedClock::now();
    SEARCH_RETURN_IF_ERROR(ResolveExternalIds(*shard_, &call.out->hits));
    const double resolve_s = std::chrono::duration<double>(SchedClock::now() - t_resolve).count();
    tm.resolve_us = resolve_s * 1e6;
    scheduler_->ObserveHost(SchedHostPhase::kResolve, resolve_s);
  }
  return std::move(call.out);
}

Result<ExecOutput> ScheduledExecutor::Execute(const Query& query, Deadline deadline, uint32_t flags) {
  Call call;
  SchedTask task;
  double features_s = 0;
  SEARCH_RETURN_IF_ERROR(Prepare(query, deadline, flags, &call, &task, &features_s));
  const Status st = scheduler_->Submit(task);
  return Finalize(call, task, st, features_s);
}

// One ExecuteAsync's state, alive from the call until its answer is handed to `done`.
struct ScheduledExecutor::AsyncCall {
  Query query;
  Call call;
  SchedTask task;
  double features_s = 0;
  std::function<void(Result<ExecOutput>)> done;
};

void ScheduledExecutor::ExecuteAsync(Query query, Deadline deadline, uint32_t flags,
                                     std::function<void(Result<ExecOutput>)> done, double caller_max_us) {
  auto a = std::make_unique<AsyncCall>();
  a->query = std::move(query);
  a->done = std::move(done);
  if (Status st = Prepare(a->query, deadline, flags, &a->call, &a->task, &a->features_s); !st.ok()) {
    a->done(std::move(st));
    return;
  }
  const bool described = a->call.cpu_predicted && a->query.tree == nullptr && !a->query.count;
  a->task.caller_max_us = described || caller_max_us == kNoCallerBound ? caller_max_us : -1;  // -1: never
  AsyncCall* raw = a.get();
  raw->task.on_done = [this, raw](SchedTask&) {
    std::unique_ptr<AsyncCall> own(raw);
    Result<ExecOutput> out = Finalize(own->call, own->task, own->task.status, own->features_s);
    auto answer = std::move(own->done);
    own.reset();  // the state goes before the answer, which may start the next request
    answer(std::move(out));
  };
  if (Status st = scheduler_->SubmitAsync(raw->task); !st.ok()) {
    raw->task.on_done = nullptr;  // not queued: answered here
    raw->done(std::move(st));
    return;  // a still owns the state
  }
  a.release();  // owned by the task's on_done now
}

}  // namespace search
