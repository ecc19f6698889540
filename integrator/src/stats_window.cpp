#include "integrator/stats_window.hpp"

#include <algorithm>

namespace search {

void StatsWindow::Record(double latency_seconds, Clock::time_point now) {
  const int64_t sec = SecondOf(now);
  std::lock_guard lock(mu_);
  const size_t b = static_cast<size_t>(sec % (kSeconds + 1));
  if (bucket_second_[b] != sec) {
    bucket_second_[b] = sec;
    bucket_count_[b] = 0;
  }
  ++bucket_count_[b];
  if (ring_.size() < kSamples) {
    ring_.push_back({now, latency_seconds});
  } else {
    ring_[next_] = {now, latency_seconds};
    next_ = (next_ + 1) % kSamples;
  }
}

StatsWindow::Snapshot StatsWindow::Take(Clock::time_point now) const {
  Snapshot s;
  const int64_t sec = SecondOf(now);
  std::vector<double> lat;
  {
    std::lock_guard lock(mu_);
    // The current second is incomplete: the rate uses the kSeconds seconds before it.
    uint64_t total = 0;
    for (size_t b = 0; b < bucket_second_.size(); ++b)
      if (bucket_second_[b] < sec && bucket_second_[b] >= sec - kSeconds) total += bucket_count_[b];
    s.qps = static_cast<double>(total) / kSeconds;
    lat.reserve(ring_.size());
    for (const auto& x : ring_)
      if (now - x.at <= std::chrono::seconds(kSeconds)) lat.push_back(x.seconds);
  }
  s.samples = lat.size();
  if (lat.empty()) return s;
  std::sort(lat.begin(), lat.end());
  auto q = [&](double p) {
    size_t i = static_cast<size_t>(p * static_cast<double>(lat.size()));
    return lat[std::min(i, lat.size() - 1)];
  };
  s.p50 = q(0.50);
  s.p95 = q(0.95);
  s.p99 = q(0.99);
  s.p999 = q(0.999);
  s.max = lat.back();
  return s;
}

}  // namespace search
