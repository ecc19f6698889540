// cost_model.hpp: decayed (weighted) least squares per (processor, mode), linear or on log t.
#include "sched/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace search {

const char* UnitName(Unit u) { return u == Unit::kGpu ? "gpu" : "cpu"; }

CostModel::CostModel(CostModelOptions options) : options_(options) {
  for (Fit& fit : fits_[static_cast<size_t>(Unit::kCpu)]) fit.power = options_.cpu_power_law;
}

std::array<double, CostModel::kDims> CostModel::LogFeatures(const QueryFeatures& f) {
  const auto ln1 = [](double v) { return std::log1p(std::max(v, 0.0)); };
  const double skew = f.shortest > 0 && f.total > f.shortest
                          ? static_cast<double>(f.shortest) *
                                std::log2(static_cast<double>(f.total) / static_cast<double>(f.shortest))
                          : 0.0;
  return {1.0,
          ln1(static_cast<double>(f.shortest)),
          ln1(static_cast<double>(f.second)),
          ln1(static_cast<double>(f.total)),
          static_cast<double>(f.terms),
          ln1(skew),
          ln1(static_cast<double>(f.nonresident_bytes))};
}

std::array<double, CostModel::kDims> CostModel::Features(const QueryFeatures& f) {
  const double m = 1e-6;
  const double shortest = static_cast<double>(f.shortest) * m;
  const double total = static_cast<double>(f.total) * m;
  // Skipping cost of intersecting the short list into the long ones: |short| log(|long| / |short|).
  const double skew = f.shortest > 0 && f.total > f.shortest
                          ? shortest * std::log2(static_cast<double>(f.total) / static_cast<double>(f.shortest))
                          : 0.0;
  return {1.0,
          shortest,
          static_cast<double>(f.second) * m,
          total,
          static_cast<double>(f.terms),
          skew,
          static_cast<double>(f.nonresident_bytes) * m};
}

namespace {

// Solves (a + damping) x = b by Gaussian elimination with partial pivoting; false if singular.
bool Solve(std::array<double, CostModel::kDims * CostModel::kDims> a, std::array<double, CostModel::kDims> b,
           double ridge, std::array<double, CostModel::kDims>* x) {
  constexpr size_t n = CostModel::kDims;
  // Scale-free damping: each diagonal grows by `ridge` of itself (a feature that never varied,
  // e.g. no non-resident bytes yet, has a zero column: the tiny floor keeps it solvable at 0).
  for (size_t i = 0; i < n; ++i) a[i * n + i] = a[i * n + i] * (1 + ridge) + 1e-18;
  for (size_t col = 0; col < n; ++col) {
    size_t piv = col;
    for (size_t r = col + 1; r < n; ++r)
      if (std::fabs(a[r * n + col]) > std::fabs(a[piv * n + col])) piv = r;
    if (std::fabs(a[piv * n + col]) < 1e-300) return false;
    if (piv != col) {
      for (size_t c = 0; c < n; ++c) std::swap(a[col * n + c], a[piv * n + c]);
      std::swap(b[col], b[piv]);
    }
    for (size_t r = col + 1; r < n; ++r) {
      const double f = a[r * n + col] / a[col * n + col];
      if (f == 0) continue;
      for (size_t c = col; c < n; ++c) a[r * n + c] -= f * a[col * n + c];
      b[r] -= f * b[col];
    }
  }
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t c = i + 1; c < n; ++c) s -= a[i * n + c] * (*x)[c];
    (*x)[i] = s / a[i * n + i];
    if (!std::isfinite((*x)[i])) return false;
  }
  return true;
}

}  // namespace

void CostModel::AccumulateLocked(Fit& fit, const QueryFeatures& f, double micros) {
  const double y = std::max(micros, options_.min_micros);
  // Linear: weights 1 / y^2 on y (relative error). Power law: log y, unweighted (the same).
  const auto x = fit.power ? LogFeatures(f) : Features(f);
  const double w = fit.power ? 1.0 : 1.0 / (y * y);
  const double target = fit.power ? std::log(y) : y;
  constexpr size_t n = kDims;
  for (double& v : fit.a) v *= options_.decay;
  for (double& v : fit.b) v *= options_.decay;
  for (size_t i = 0; i < n; ++i) {
    fit.b[i] += w * x[i] * target;
    for (size_t j = 0; j < n; ++j) fit.a[i * n + j] += w * x[i] * x[j];
  }
  fit.min_y = fit.n == 0 ? y : std::min(fit.min_y, y);
  fit.max_y = fit.n == 0 ? y : std::max(fit.max_y, y);
  ++fit.n;
}

void CostModel::RefitLocked(Fit& fit) {
  std::array<double, kDims> theta{};
  if (Solve(fit.a, fit.b, options_.ridge, &theta)) fit.theta = theta;
}

bool CostModel::PredictLocked(const Fit& fit, const QueryFeatures& f, double* micros) const {
  const auto x = fit.power ? LogFeatures(f) : Features(f);
  double y = 0;
  for (size_t i = 0; i < kDims; ++i) y += fit.theta[i] * x[i];
  if (fit.power) {
    // Far outside the samples an exponent can run away: no more than 10x the slowest seen.
    y = std::exp(std::min(y, std::log(10 * std::max(fit.max_y, options_.min_micros))));
  }
  // A linear fit can dip below what any query ever took (or below 0): clamp at a tenth of the
  // fastest seen.
  *micros = std::max({y, 0.1 * fit.min_y, options_.min_micros});
  return true;
}

const CostModel::Fit* CostModel::UsableLocked(Unit unit, QueryMode mode) const {
  const auto& per_mode = fits_[static_cast<size_t>(unit)];
  const Fit& own = per_mode[static_cast<size_t>(mode)];
  if (own.n >= options_.min_samples) return &own;
  const Fit* best = nullptr;
  for (const Fit& other : per_mode)
    if (other.n >= options_.min_samples && (best == nullptr || other.n > best->n)) best = &other;
  return best;
}

void CostModel::FoldLocked(Unit unit, std::span<const CostSample> samples) {
  auto& per_mode = fits_[static_cast<size_t>(unit)];
  std::array<bool, 3> touched{};
  for (const CostSample& s : samples) {
    AccumulateLocked(per_mode[static_cast<size_t>(s.f.mode)], s.f, s.micros);
    touched[static_cast<size_t>(s.f.mode)] = true;
  }
  for (size_t m = 0; m < touched.size(); ++m)
    if (touched[m]) RefitLocked(per_mode[m]);
}

void CostModel::Calibrate(Unit unit, std::span<const CostSample> samples) {
  std::unique_lock lock(mu_);
  FoldLocked(unit, samples);
}

double CostModel::TrackErrorLocked(Unit unit, const QueryFeatures& f, double micros, ModelTally* tally) {
  const Fit* usable = UsableLocked(unit, f.mode);
  if (usable == nullptr || micros <= 0) return -1;
  const size_t u = static_cast<size_t>(unit);
  double pred = 0;
  PredictLocked(*usable, f, &pred);
  if (tally != nullptr) {
    tally->observed_us += micros;
    tally->predicted_us += pred;
  }
  const double err = std::fabs(pred - micros) / micros;
  error_[u] = has_error_[u] ? 0.95 * error_[u] + 0.05 * err : err;
  has_error_[u] = true;
  return err;
}

double CostModel::Observe(Unit unit, const QueryFeatures& f, double micros) {
  std::unique_lock lock(mu_);
  const double err = TrackErrorLocked(unit, f, micros);
  Fit& fit = fits_[static_cast<size_t>(unit)][static_cast<size_t>(f.mode)];
  AccumulateLocked(fit, f, micros);
  RefitLocked(fit);
  return err;
}

double CostModel::ObserveBatchLocked(Unit unit, std::span<const CostSample> samples, ModelTally* tally) {
  // Every error against the model as it stood before the batch; then the statistics.
  for (const CostSample& s : samples) TrackErrorLocked(unit, s.f, s.micros, tally);
  FoldLocked(unit, samples);
  return error_[static_cast<size_t>(unit)];
}

double CostModel::ObserveBatch(Unit unit, std::span<const CostSample> samples, ModelTally* tally) {
  std::unique_lock lock(mu_);
  return ObserveBatchLocked(unit, samples, tally);
}

std::optional<double> CostModel::TryObserveBatch(Unit unit, std::span<const CostSample> samples, ModelTally* tally) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  return ObserveBatchLocked(unit, samples, tally);
}

bool CostModel::Predict(Unit unit, const QueryFeatures& f, double* micros) const {
  std::shared_lock lock(mu_);
  const Fit* usable = UsableLocked(unit, f.mode);
  if (usable == nullptr) return false;
  return PredictLocked(*usable, f, micros);
}

double CostModel::mean_relative_error(Unit unit) const {
  std::shared_lock lock(mu_);
  return error_[static_cast<size_t>(unit)];
}

uint64_t CostModel::samples(Unit unit, QueryMode mode) const {
  std::shared_lock lock(mu_);
  return fits_[static_cast<size_t>(unit)][static_cast<size_t>(mode)].n;
}

}  // namespace search
