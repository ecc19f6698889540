// StatsWindow: the recent request rate and latency percentiles the status page shows (/stats).
// Per-second request counters over the last kSeconds seconds give the rate; a ring of the last
// kSamples latencies (younger than kSeconds) gives the percentiles. Prometheus histograms are the
// durable record; this is the live view.
// Thread-safety: thread-safe (one mutex; Record is a few stores).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace search {

class StatsWindow {
 public:
  static constexpr int kSeconds = 10;
  static constexpr size_t kSamples = 4096;
  using Clock = std::chrono::steady_clock;

  void Record(double latency_seconds, Clock::time_point now = Clock::now());

  struct Snapshot {
    double qps = 0;  // requests per second over the last complete seconds of the window
    double p50 = 0, p95 = 0, p99 = 0, p999 = 0, max = 0;  // seconds
    size_t samples = 0;
  };
  Snapshot Take(Clock::time_point now = Clock::now()) const;

 private:
  static int64_t SecondOf(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  }
  struct Sample {
    Clock::time_point at;
    double seconds;
  };
  mutable std::mutex mu_;
  std::array<int64_t, kSeconds + 1> bucket_second_{};  // GUARDED_BY(mu_)
  std::array<uint64_t, kSeconds + 1> bucket_count_{};  // GUARDED_BY(mu_)
  std::vector<Sample> ring_;                           // GUARDED_BY(mu_)
  size_t next_ = 0;                                    // GUARDED_BY(mu_)
};

}  // namespace search
