// CostModel: predicts how long a query takes on the CPU and on the GPU from its features (Ding
// 2009 §9: shortest and second-shortest list lengths, total postings, number of terms; plus the
// mode and the bytes of its lists not resident in GPU memory, which a GPU run must first copy).
//
// One model per (processor, mode). The GPU's is linear over the feature vector
//   [1, shortest, second, total, terms, total * log2(total / shortest), nonresident]
// (postings in millions, bytes in MB), fitted by weighted least squares with weights 1 / t^2, so
// that it minimises relative (not absolute) error: query times span four orders of magnitude and
// a 1 ms error on a 100 µs query matters as much as 100 ms on a 10 s one. The CPU's (with
// CostModelOptions::cpu_power_law, the default) is a power law: log t is fitted, by least
// squares, as linear in
//   [1, ln shortest, ln second, ln total, terms, ln(1 + shortest * log2(total / shortest)), ln(1 + nonresident)]
// (ln of 1 + postings). The CPU engine's and-queries skip through the longer lists by the shorter
// one's docIDs, so their time grows as a power of the lists' lengths, not as a sum (the power
// law fits a query log's measured times better than a linear form: `bench/scripts/hybrid_split.py
// --fit-check`). A power law predicts the median time of queries like this one, not the mean (which is higher by the spread). Observations enter as
// exponentially decayed sufficient statistics (forgetting factor `decay` per observation), so
// Observe() refreshes the model online; the normal equations are re-solved (7x7, ridge-damped) on
// every observation, and once per call for ObserveBatch (a GPU batch's jobs: the same statistics,
// one solve and one turn at the lock instead of one per job on the dispatcher's thread). A model
// with fewer than min_samples observations predicts from the other modes' model of the same
// processor if it has one, else it has no prediction (Predict returns false) and callers must
// calibrate first.
//
// Calibrate(): the node's start-up fit. The caller runs a short sample of queries on each
// processor and passes the measured times; nothing is hand-set.
// Relative error |predicted - actual| / actual of each observation (measured before it is folded
// in) is kept as an EWMA per processor and returned by Observe for the metric.
// Thread-safety: one internal reader-writer lock; Predict and the accessors share it (every request
// thread predicts twice per query), the observers take it alone.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>

#include "core/query.hpp"

namespace search {

enum class Unit : uint8_t { kCpu = 0, kGpu = 1 };  // a processor the scheduler runs work on
inline constexpr size_t kNumUnits = 2;
const char* UnitName(Unit u);  // "cpu", "gpu"

struct QueryFeatures {
  uint64_t shortest = 0;          // postings of the shortest list present
  uint64_t second = 0;            // of the second shortest (0 with one list)
  uint64_t total = 0;             // postings of all lists present
  uint32_t terms = 0;             // lists present
  uint64_t nonresident_bytes = 0;  // bytes of the lists not in GPU memory (a GPU run copies them)
  uint64_t longest = 0;           // postings of the longest list (placement only, not a model input)
  // The GPU phrase producer's work (placement only, not a model input): over the tree's distinct
  // phrases whose tokens are all present, the rarest token's postings times the phrase's tokens
  // (repeats counted). 0 for a flat query or a tree without phrases.
  uint64_t phrase_work = 0;
  QueryMode mode = QueryMode::kAnd;
};

struct CostSample {
  QueryFeatures f;
  double micros = 0;  // measured run time
};

struct CostModelOptions {
  double decay = 0.995;      // weight kept by older observations per new one
  double ridge = 1e-9;       // relative damping of the normal equations' diagonal
  uint32_t min_samples = 8;  // per (unit, mode) before its own fit is used
  double min_micros = 1.0;   // predictions are clamped below at this
  bool cpu_power_law = true; // the CPU's model fits log t (see above); false: linear like the GPU's
};

// What observations that had a prediction took and what the model had predicted for them
// (before folding them in), summed: observed_us / predicted_us is the model's bias on this work
// (above 1: it predicts too little, as a power law's median does for a mean).
struct ModelTally {
  double observed_us = 0;
  double predicted_us = 0;
};

class CostModel {
 public:
  static constexpr size_t kDims = 7;
  explicit CostModel(CostModelOptions options = {});

  // Folds every sample in (Observe without the error bookkeeping).
  void Calibrate(Unit unit, std::span<const CostSample> samples);
  // Folds one measured run in; returns its relative prediction error (-1 when there was no
  // prediction yet).
  double Observe(Unit unit, const QueryFeatures& f, double micros);
  // Folds several measured runs in under one lock with one re-solve per fit touched: the
  // statistics (and so every later prediction) are those of Observe on each in turn; each
  // sample's error is measured against the model as it was before the call. Returns the
  // processor's mean relative error afterwards (mean_relative_error). With `tally`, adds the
  // samples' observed and predicted times to it.
  double ObserveBatch(Unit unit, std::span<const CostSample> samples, ModelTally* tally = nullptr);
  // ObserveBatch only if the model's lock is free now; nullopt (nothing folded) when another thread
  // holds it, shared or not. A busy node's CPU workers keep their samples and fold them later,
  // instead of each waiting for the lock behind the predictions of every arriving query.
  std::optional<double> TryObserveBatch(Unit unit, std::span<const CostSample> samples, ModelTally* tally = nullptr);
  // Predicted microseconds; false when neither this mode's nor another mode's model of `unit`
  // has enough samples.
  bool Predict(Unit unit, const QueryFeatures& f, double* micros) const;
  // EWMA (weight 0.05) of relative errors seen by Observe; 0 before any.
  double mean_relative_error(Unit unit) const;
  uint64_t samples(Unit unit, QueryMode mode) const;

  static std::array<double, kDims> Features(const QueryFeatures& f);
  static std::array<double, kDims> LogFeatures(const QueryFeatures& f);

 private:
  struct Fit {
    std::array<double, kDims * kDims> a{};  // sum w x x^T (decayed)
    std::array<double, kDims> b{};          // sum w x y
    std::array<double, kDims> theta{};      // solution
    uint64_t n = 0;
    double min_y = 0, max_y = 0;
    bool power = false;  // fits log t on LogFeatures
  };
  // Folds one observation into the fit's statistics; RefitLocked re-solves them.
  void AccumulateLocked(Fit& fit, const QueryFeatures& f, double micros);
  void RefitLocked(Fit& fit);
  // Accumulates every sample into its mode's fit of `unit`, then re-solves each fit touched once.
  void FoldLocked(Unit unit, std::span<const CostSample> samples);
  // ObserveBatch's work under the lock (ObserveBatch, TryObserveBatch).
  double ObserveBatchLocked(Unit unit, std::span<const CostSample> samples, ModelTally* tally);
  // The relative error of the current model on one observation (-1: no prediction yet), folded
  // into the EWMA.
  double TrackErrorLocked(Unit unit, const QueryFeatures& f, double micros, ModelTally* tally = nullptr);
  bool PredictLocked(const Fit& fit, const QueryFeatures& f, double* micros) const;
  const Fit* UsableLocked(Unit unit, QueryMode mode) const;

  CostModelOptions options_;
  mutable std::shared_mutex mu_;
  std::array<std::array<Fit, 3>, kNumUnits> fits_;  // GUARDED_BY(mu_) [unit][mode]
  std::array<double, kNumUnits> error_{};            // GUARDED_BY(mu_)
  std::array<bool, kNumUnits> has_error_{};          // GUARDED_BY(mu_)
};

}  // namespace search
