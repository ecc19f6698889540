// CostModel: recovers a known cost law from samples, predicts by relative error, falls back to
// another mode's fit, and follows a change of law online (Observe) with a falling error.
#include "sched/cost_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <random>
#include <span>
#include <thread>
#include <vector>

namespace search {
namespace {

QueryFeatures RandomFeatures(std::mt19937_64& rng, QueryMode mode) {
  QueryFeatures f;
  f.mode = mode;
  f.terms = 2 + static_cast<uint32_t>(rng() % 4);
  f.shortest = 1000 + rng() % 2000000;
  f.second = f.shortest + rng() % 3000000;
  f.total = f.second + (f.terms - 2) * (rng() % 5000000);
  f.nonresident_bytes = rng() % 2 == 0 ? 0 : rng() % 20000000;
  return f;
}

// A GPU-like law: launch overhead, a cost per posting, the PCIe copy of non-resident bytes.
double GpuLaw(const QueryFeatures& f, double scale = 1.0) {
  return scale * (40.0 + 0.0004 * static_cast<double>(f.total) + 0.02 * static_cast<double>(f.nonresident_bytes) * 1e-3);
}
// A CPU-like law: driven by the shortest list and its skipping into the others.
double CpuLaw(const QueryFeatures& f) {
  return 5.0 + 0.004 * static_cast<double>(f.shortest) + 0.0001 * static_cast<double>(f.total) + 3.0 * f.terms;
}

TEST(CostModelTest, NoPredictionBeforeCalibration) {
  CostModel m;
  double us = 0;
  EXPECT_FALSE(m.Predict(Unit::kCpu, QueryFeatures{}, &us));
  EXPECT_EQ(m.Observe(Unit::kCpu, QueryFeatures{}, 10.0), -1.0);
  EXPECT_EQ(m.samples(Unit::kCpu, QueryMode::kAnd), 1u);
}

TEST(CostModelTest, RecoversLinearLawsWithSmallRelativeError) {
  std::mt19937_64 rng(1);
  CostModelOptions linear;
  linear.cpu_power_law = false;
  CostModel m(linear);
  std::vector<CostSample> cpu, gpu;
  for (int i = 0; i < 200; ++i) {
    const QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    cpu.push_back({f, CpuLaw(f)});
    gpu.push_back({f, GpuLaw(f)});
  }
  m.Calibrate(Unit::kCpu, cpu);
  m.Calibrate(Unit::kGpu, gpu);
  double worst_cpu = 0, worst_gpu = 0;
  for (int i = 0; i < 200; ++i) {
    const QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    double c = 0, g = 0;
    ASSERT_TRUE(m.Predict(Unit::kCpu, f, &c));
    ASSERT_TRUE(m.Predict(Unit::kGpu, f, &g));
    worst_cpu = std::max(worst_cpu, std::fabs(c - CpuLaw(f)) / CpuLaw(f));
    worst_gpu = std::max(worst_gpu, std::fabs(g - GpuLaw(f)) / GpuLaw(f));
  }
  EXPECT_LT(worst_cpu, 0.01);
  EXPECT_LT(worst_gpu, 0.01);
}

// The CPU's default form: a power law of the lists' lengths (the CPU engine skips through the
// longer lists by the shorter one's docIDs) is recovered; the linear form cannot follow it over
// four orders of magnitude of list lengths.
double CpuPowerLaw(const QueryFeatures& f) {
  const double s = static_cast<double>(f.shortest), t = static_cast<double>(f.total);
  return 2.0 * std::pow(s, 0.6) * std::pow(t / s, 0.1) * std::pow(1.1, f.terms);
}

TEST(CostModelTest, CpuFitsAPowerLawByDefault) {
  std::mt19937_64 rng(4);
  auto features = [&] {
    QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    f.shortest = 10 + rng() % 10 * (uint64_t{1} << (rng() % 18));  // 10 to 2.4M postings
    f.second = f.shortest + rng() % 3000000;
    f.total = f.second + (f.terms - 2) * (rng() % 5000000);
    return f;
  };
  std::vector<CostSample> samples;
  for (int i = 0; i < 48; ++i) {
    const QueryFeatures f = features();
    samples.push_back({f, CpuPowerLaw(f)});
  }
  CostModel power;
  CostModelOptions o;
  o.cpu_power_law = false;
  CostModel linear(o);
  power.Calibrate(Unit::kCpu, samples);
  linear.Calibrate(Unit::kCpu, samples);
  double worst_power = 0, median_linear = 0;
  std::vector<double> linear_errors;
  for (int i = 0; i < 200; ++i) {
    const QueryFeatures f = features();
    double p = 0, l = 0;
    ASSERT_TRUE(power.Predict(Unit::kCpu, f, &p));
    ASSERT_TRUE(linear.Predict(Unit::kCpu, f, &l));
    worst_power = std::max(worst_power, std::fabs(p - CpuPowerLaw(f)) / CpuPowerLaw(f));
    linear_errors.push_back(std::fabs(l - CpuPowerLaw(f)) / CpuPowerLaw(f));
  }
  std::sort(linear_errors.begin(), linear_errors.end());
  median_linear = linear_errors[linear_errors.size() / 2];
  EXPECT_LT(worst_power, 0.05);  // ln(1 + postings) is not quite ln(postings) for the shortest lists
  EXPECT_GT(median_linear, 0.1);
  // Far past anything seen, the exponent is held at 10x the slowest sample.
  QueryFeatures huge = features();
  huge.shortest = huge.second = huge.total = uint64_t{1} << 50;
  double us = 0;
  ASSERT_TRUE(power.Predict(Unit::kCpu, huge, &us));
  double slowest = 0;
  for (const CostSample& c : samples) slowest = std::max(slowest, c.micros);
  EXPECT_LE(us, 10 * slowest * 1.0001);
  EXPECT_GT(us, slowest);
}

TEST(CostModelTest, ModeWithoutSamplesUsesAnotherModesFit) {
  std::mt19937_64 rng(2);
  CostModel m;
  std::vector<CostSample> s;
  for (int i = 0; i < 50; ++i) {
    const QueryFeatures f = RandomFeatures(rng, QueryMode::kOr);
    s.push_back({f, GpuLaw(f)});
  }
  m.Calibrate(Unit::kGpu, s);
  QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
  double us = 0;
  ASSERT_TRUE(m.Predict(Unit::kGpu, f, &us));
  EXPECT_NEAR(us, GpuLaw(f), 0.02 * GpuLaw(f));
  EXPECT_FALSE(m.Predict(Unit::kCpu, f, &us));
}

TEST(CostModelTest, OnlineObservationsFollowAChangedLaw) {
  std::mt19937_64 rng(3);
  CostModelOptions o;
  o.decay = 0.98;
  CostModel m(o);
  std::vector<CostSample> s;
  for (int i = 0; i < 100; ++i) {
    const QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    s.push_back({f, GpuLaw(f)});
  }
  m.Calibrate(Unit::kGpu, s);
  // The device gets three times slower (e.g. a co-tenant): the first errors are ~200%.
  double first = 0, last = 0;
  for (int i = 0; i < 400; ++i) {
    const QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    const double err = m.Observe(Unit::kGpu, f, GpuLaw(f, 3.0));
    ASSERT_GE(err, 0.0);
    if (i == 0) first = err;
    last = err;
  }
  EXPECT_GT(first, 0.6);
  EXPECT_LT(last, 0.05);
  EXPECT_GT(m.mean_relative_error(Unit::kGpu), 0.0);
  EXPECT_LT(m.mean_relative_error(Unit::kGpu), 0.1);
}

TEST(CostModelTest, PredictionsStayPositive) {
  CostModel m;
  std::vector<CostSample> s;
  for (int i = 0; i < 20; ++i) {
    QueryFeatures f;
    f.total = f.shortest = 1000u * static_cast<uint64_t>(i + 1);
    f.terms = 1;
    s.push_back({f, 100.0 - i});  // decreasing with size: a fit extrapolates below zero
  }
  m.Calibrate(Unit::kCpu, s);
  QueryFeatures huge;
  huge.total = huge.shortest = 1000000000;
  huge.terms = 1;
  double us = -1;
  ASSERT_TRUE(m.Predict(Unit::kCpu, huge, &us));
  EXPECT_GT(us, 0.0);
}

// A GPU batch's jobs go to the model at once (ObserveBatch): the statistics, and so every later
// prediction, are those of observing them one at a time; the errors are measured against the
// model as it stood before the batch.
TEST(CostModelTest, ObservingABatchEqualsObservingItsJobsInTurn) {
  std::mt19937_64 rng(7);
  std::vector<CostSample> calib;
  for (int i = 0; i < 40; ++i) {
    QueryFeatures f = RandomFeatures(rng, i % 3 == 0 ? QueryMode::kOr : QueryMode::kAnd);
    calib.push_back({f, GpuLaw(f)});
  }
  CostModel one, batched;
  one.Calibrate(Unit::kGpu, calib);
  batched.Calibrate(Unit::kGpu, calib);
  std::vector<CostSample> batch;
  for (int i = 0; i < 32; ++i) {
    QueryFeatures f = RandomFeatures(rng, i % 4 == 0 ? QueryMode::kOr : QueryMode::kAnd);
    batch.push_back({f, GpuLaw(f, 2.0)});  // the law changed: the fits must move
  }
  // Mean relative error of a model over the batch's own jobs.
  auto batch_error = [&](const CostModel& m) {
    double sum = 0;
    for (const CostSample& c : batch) {
      double p = 0;
      EXPECT_TRUE(m.Predict(Unit::kGpu, c.f, &p));
      sum += std::fabs(p - c.micros) / c.micros;
    }
    return sum / static_cast<double>(batch.size());
  };
  const double before = batch_error(batched);
  // The first error of the batch, against the model before it: the same for both.
  const double first = one.Observe(Unit::kGpu, batch[0].f, batch[0].micros);
  for (size_t i = 1; i < batch.size(); ++i) one.Observe(Unit::kGpu, batch[i].f, batch[i].micros);
  const double error = batched.ObserveBatch(Unit::kGpu, batch);
  EXPECT_EQ(error, batched.mean_relative_error(Unit::kGpu));
  EXPECT_GT(first, 0.3);  // twice the calibrated law
  EXPECT_GT(error, 0.0);
  for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr}) {
    EXPECT_EQ(one.samples(Unit::kGpu, mode), batched.samples(Unit::kGpu, mode));
    for (int i = 0; i < 20; ++i) {
      const QueryFeatures f = RandomFeatures(rng, mode);
      double a = 0, b = 0;
      ASSERT_TRUE(one.Predict(Unit::kGpu, f, &a));
      ASSERT_TRUE(batched.Predict(Unit::kGpu, f, &b));
      EXPECT_NEAR(a, b, 1e-9 * a);
    }
  }
  EXPECT_LT(batch_error(batched), 0.8 * before);  // the batch moved the fits towards the doubled law
  // An empty batch changes nothing.
  EXPECT_EQ(batched.ObserveBatch(Unit::kGpu, {}), error);
  EXPECT_EQ(batched.samples(Unit::kGpu, QueryMode::kAnd), one.samples(Unit::kGpu, QueryMode::kAnd));
}

// A tally sums the samples' observed times and what the model had predicted for each before the
// batch folded them in; samples the model had no prediction for (none yet) add nothing to it.
TEST(CostModelTest, ObserveBatchTalliesObservedAndPredictedWork) {
  std::mt19937_64 rng(5);
  std::vector<CostSample> calib, batch;
  for (int i = 0; i < 40; ++i) {
    QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    calib.push_back({f, GpuLaw(f)});
  }
  for (int i = 0; i < 16; ++i) {
    QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    batch.push_back({f, GpuLaw(f, 3.0)});  // three times what the model learned
  }
  CostModel m;
  m.Calibrate(Unit::kGpu, calib);
  double observed = 0, predicted = 0;
  for (const CostSample& c : batch) {
    double p = 0;
    ASSERT_TRUE(m.Predict(Unit::kGpu, c.f, &p));
    observed += c.micros;
    predicted += p;
  }
  ModelTally tally;
  m.ObserveBatch(Unit::kGpu, batch, &tally);
  EXPECT_NEAR(tally.observed_us, observed, 1e-9 * observed);
  EXPECT_NEAR(tally.predicted_us, predicted, 1e-9 * predicted);
  EXPECT_GT(tally.observed_us / tally.predicted_us, 2.0);  // the bias shows
  // Before any calibration there is no prediction: nothing is tallied, yet the samples are folded.
  CostModel fresh;
  ModelTally none;
  const std::optional<double> e = fresh.TryObserveBatch(Unit::kGpu, std::span(batch).first(4), &none);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(none.observed_us, 0.0);
  EXPECT_EQ(none.predicted_us, 0.0);
  EXPECT_EQ(fresh.samples(Unit::kGpu, QueryMode::kAnd), 4u);
}

// TryObserveBatch on a model nobody else holds folds exactly what ObserveBatch does. While other
// threads predict and observe all the time, every try either folds its batch or leaves the model
// untouched (nullopt): the samples counted are exactly those of the tries that returned a value.
TEST(CostModelTest, TryObserveBatchFoldsWhatObserveBatchDoesOrNothing) {
  std::mt19937_64 rng(11);
  std::vector<CostSample> batch;
  for (int i = 0; i < 24; ++i) {
    QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    batch.push_back({f, GpuLaw(f)});
  }
  CostModel a, b;
  const double ea = a.ObserveBatch(Unit::kCpu, batch);
  const std::optional<double> eb = b.TryObserveBatch(Unit::kCpu, batch);
  ASSERT_TRUE(eb.has_value());
  EXPECT_EQ(ea, *eb);
  EXPECT_EQ(a.samples(Unit::kCpu, QueryMode::kAnd), b.samples(Unit::kCpu, QueryMode::kAnd));
  for (int i = 0; i < 20; ++i) {
    const QueryFeatures f = RandomFeatures(rng, QueryMode::kAnd);
    double pa = 0, pb = 0;
    ASSERT_TRUE(a.Predict(Unit::kCpu, f, &pa));
    ASSERT_TRUE(b.Predict(Unit::kCpu, f, &pb));
    EXPECT_EQ(pa, pb);
  }

  CostModel m;
  m.Calibrate(Unit::kCpu, batch);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> others{0};
  std::vector<std::thread> busy;
  for (int t = 0; t < 3; ++t)
    busy.emplace_back([&, t] {
      std::mt19937_64 r(100 + t);
      while (!done.load()) {
        double p = 0;
        (void)m.Predict(Unit::kCpu, RandomFeatures(r, QueryMode::kAnd), &p);
        if (t == 0) {
          const QueryFeatures f = RandomFeatures(r, QueryMode::kAnd);
          m.Observe(Unit::kCpu, f, GpuLaw(f));
          others.fetch_add(1);
        }
      }
    });
  uint64_t folded = 0, refused = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::optional<double> e = m.TryObserveBatch(Unit::kCpu, std::span(batch).first(3));
    if (e.has_value()) {
      ++folded;
      EXPECT_GE(*e, 0.0);
    } else {
      ++refused;
    }
  }
  done = true;
  for (auto& t : busy) t.join();
  EXPECT_EQ(folded + refused, 2000u);
  EXPECT_EQ(m.samples(Unit::kCpu, QueryMode::kAnd), batch.size() + 3 * folded + others.load());
}

}  // namespace
}  // namespace search
