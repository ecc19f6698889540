// ScheduledExecutor: the shard node's CPU/GPU scheduler as an Executor. Each query's
// features (its lists' lengths in this shard, number of terms, mode, bytes not resident in GPU
// memory) go through the CostModel to a predicted CPU and GPU time; the HybridScheduler queues it
// (Ding's three queues, stealing, deadline urgency, GPU batches) and blocks the calling worker
// until a processor has answered.
//
// Modes (--scheduler): cpu (every query on the CPU workers, through the same queues, so its
// latency is comparable), gpu (every query on the GPU; only GPU failures rerun on the CPU), hybrid
// (Ding 2009 §9) and griffin (Liu 2018 §3.2: an and/andor query starts on the GPU when the length
// ratio of its two shortest lists is under the crossover, else on the CPU; or-queries go where the
// model predicts them faster; no stealing). Intra-query migration (hybrid and griffin): an
// and/andor query whose two shortest lists are within the crossover, run by the GPU, whose longest list
// is at least the crossover times its shortest runs BatchExecutor::IntersectPrefix there (lists
// intersected shortest first while the next one is under the crossover times the running
// intersection), and the docIDs go to the CPU (GpuOutcome::kMigrate), which finishes the query
// from them (CpuExecutorAdapter::ExecuteFromCandidates: exact, the same scores). Answers report
// Processor::kHybrid.
//
// Calibration (Create): a short run on this node's own index and hardware fits the cost model:
// terms sampled from the shard by list length (log2 buckets), random 2-4 term queries in every
// mode, each run on the CPU (warm) and on the GPU (alone and cold; then resident, in batches of up
// to max_batch whose time is apportioned by postings, as the online refresh apportions a batch's
// time), within a time budget.
// Nothing is hand-set; the model then follows observed run times online. With
// sched.policy.gpu_alone_us = -1 (the node's setting) calibration also times up
// to 16 of its and-queries alone on the GPU, lists resident, and the median becomes the bound of
// hybrid's cheap jobs (SchedPolicy::Cheap); 0 leaves them off, a positive value is used as given.
// Query trees and counts run on either engine (no Griffin step: the intersection prefix is a flat
// query's) and are not samples for the cost model (SchedTask::model_sample: their features do not
// describe their cost); phrase trees among them. Shapes the GPU engine does not run (GpuUnsupported:
// a phrase tree past the GPU program's slots) run on the CPU engine: pinned to the CPU, predicted
// there alone (no GPU estimate), and counted on a GPU node in
// search_node_gpu_unsupported_total{reason}.
// Flags: kFlagForceCpu / kFlagForceGpu pin the query (Unavailable for the GPU when there is none,
// or when the GPU engine cannot run the query).
// Never a wrong or lost answer: a GPU failure reruns the query on the CPU.
// Thread-safety: Execute may be called from many threads at once.
#pragma once

#include <chrono>
#include <memory>

#include "sched/cost_model.hpp"
#include "node/executor.hpp"
#include "sched/hybrid_scheduler.hpp"

namespace search {

class Metrics;
class ShardReader;

struct ScheduledExecutorOptions {
  HybridSchedulerOptions sched;
  // GPU while (next list / running intersection) < crossover. 0: calibrated at start from the cost
  // model (the smallest power-of-two ratio at which a two-list and-query is predicted faster on
  // the CPU, for the calibration queries' median shortest list; 128 when there is no GPU fit).
  double crossover = 0;
  size_t calibration_queries = 48;
  std::chrono::milliseconds calibration_budget{4000};
  uint64_t seed = 1;
};

// The GPU time the policy sees for a query tree or count, in microseconds of a batched GPU, from
// the model's prediction for a pruned bag of words of its terms (`predicted_us`): at least the tree
// path's (a bit per document and term: `docs` x `terms`, at least one), plus the phrase producer's
// work (QueryFeatures::phrase_work), which the bag of words does not describe. The constants are
// measured (BENCHMARKS.md "Query language").
double GpuShapedUs(double predicted_us, uint64_t docs, size_t terms, uint64_t phrase_work);

class ScheduledExecutor final : public Executor {
 public:
  // gpu may be nullptr only in mode cpu. Calibrates, then starts the scheduler.
  // REQUIRES: shard, gpu and metrics (nullable) outlive the executor.
  static Result<std::unique_ptr<ScheduledExecutor>> Create(const ShardReader* shard, BatchExecutor* gpu,
                                                           Metrics* metrics, ScheduledExecutorOptions options);
  ~ScheduledExecutor() override;

  std::string_view name() const override { return "scheduler"; }
  bool has_gpu() const override { return gpu_ != nullptr; }
  Result<ExecOutput> Execute(const Query& query, Deadline deadline, uint32_t flags) override;
  // The scheduler's SubmitAsync: no thread waits for the job; `done` runs on the thread that
  // finishes it (a CPU worker, a GPU dispatcher, or this caller when it runs the job itself).
  // caller_max_us: SchedTask::caller_max_us (a query tree or count, whose cost the model does not
  // describe, and a query the model cannot predict never run on a bounded caller).
  void ExecuteAsync(Query query, Deadline deadline, uint32_t flags, std::function<void(Result<ExecOutput>)> done,
                    double caller_max_us = kNoCallerBound) override;
  bool BoundsCaller() const override { return true; }

  // The query's features as this shard sees them. With a GPU executor it also brings the query's
  // lists into the shard's main-memory list cache (on the calling thread, not a GPU dispatcher's)
  // and, when `prepared` is given and every lookup succeeded, keeps them there (one entry per
  // term) for the GPU batch (BatchItem::prepared); otherwise `prepared` is left empty.
  Result<QueryFeatures> Features(const Query& query, std::vector<PreparedTerm>* prepared = nullptr);
  CostModel& model() { return model_; }
  HybridScheduler& scheduler() { return *scheduler_; }
  SchedMode mode() const { return options_.sched.policy.mode; }
  // Samples the calibration run produced per processor.
  size_t calibration_samples(Unit u) const { return calibration_samples_[static_cast<size_t>(u)]; }
  double crossover() const { return options_.crossover; }

 private:
  class Runner;
  struct Call;
  struct AsyncCall;
  // Execute's parts around the scheduler: the checks, the features and the job (Prepare; an error
  // means nothing was queued), and the answer from the finished task (Finalize).
  Status Prepare(const Query& query, Deadline deadline, uint32_t flags, Call* call, SchedTask* task,
                 double* features_s);
  Result<ExecOutput> Finalize(Call& call, SchedTask& task, const Status& submitted, double features_s);
  ScheduledExecutor(const ShardReader* shard, BatchExecutor* gpu, ScheduledExecutorOptions options);
  Status Calibrate();
  // The crossover from the fitted model (options.crossover == 0).
  double CalibrateCrossover(uint64_t shortest) const;

  const ShardReader* shard_;
  BatchExecutor* gpu_;
  ScheduledExecutorOptions options_;
  CpuExecutorAdapter cpu_;
  CostModel model_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<HybridScheduler> scheduler_;
  std::unique_ptr<GpuExecutorMetrics> gpu_metrics_;  // with a GPU and metrics: the unsupported shapes' counter
  size_t calibration_samples_[kNumUnits] = {};
};

}  // namespace search
