// host_jitter: measures how late sleeping threads wake on this host, to tell a benchmark's tail
// latency apart from stalls of the host itself (a hypervisor descheduling the VM, the kernel, other
// tenants). Each of --threads threads sleeps --period-us at a time (absolute deadlines) and, when
// it wakes more than --threshold-ms late, writes one line to --out (default stdout):
//   <boottime_s> <thread> <late_ms>
// boottime_s is CLOCK_BOOTTIME in seconds, the clock of /proc/uptime, so a script can match the
// lines to its own steps. Runs for --seconds (0: until SIGTERM / SIGINT), then prints one summary
// line to stderr: wake-ups, the late ones, the latest, and the time spent late.
//   host_jitter --threads 2 --threshold-ms 4 --out stalls.txt --seconds 0 &
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>


namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

double Now(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Stats {
  unsigned long long wakeups = 0, late = 0;
  double max_late_ms = 0, late_ms_total = 0;
};

// Parses a positive number of the flag `name`; exits with a usage error otherwise.
double Positive(const char* name, const char* value, bool allow_zero) {
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(allow_zero ? v >= 0 : v > 0) || v > 1e9) {
    std::fprintf(stderr, "host_jitter: %s wants a %s number, got '%s'\n", name, allow_zero ? "non-negative" : "positive",
                 value);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double period_us = 1000, threshold_ms = 4, seconds = 0;
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: host_jitter [--threads N] [--period-us P] [--threshold-ms T] [--seconds S] [--out FILE]\n"
          "Writes '<boottime_s> <thread> <late_ms>' for each wake-up more than T ms late.\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "host_jitter: %s needs a value (see --help)\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--threads") {
      threads = static_cast<int>(Positive("--threads", v, false));
      if (threads > 1024) threads = 1024;
    } else if (a == "--period-us") {
      period_us = Positive("--period-us", v, false);
    } else if (a == "--threshold-ms") {
      threshold_ms = Positive("--threshold-ms", v, true);
    } else if (a == "--seconds") {
      seconds = Positive("--seconds", v, true);
    } else if (a == "--out") {
      out_path = v;
    } else {
      std::fprintf(stderr, "host_jitter: unknown flag %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  FILE* out = stdout;
  if (!out_path.empty() && (out = std::fopen(out_path.c_str(), "w")) == nullptr) {
    std::fprintf(stderr, "host_jitter: cannot open %s: %s\n", out_path.c_str(), std::strerror(errno));
    return 1;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  const double end = seconds > 0 ? Now(CLOCK_MONOTONIC) + seconds : 0;
  std::mutex mu;
  Stats total;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      Stats s;
      const long step_ns = static_cast<long>(period_us * 1e3);
      timespec next{};
      clock_gettime(CLOCK_MONOTONIC, &next);
      while (!g_stop && (end == 0 || Now(CLOCK_MONOTONIC) < end)) {
        next.tv_nsec += step_ns;
        while (next.tv_nsec >= 1000000000L) {
          next.tv_nsec -= 1000000000L;
          ++next.tv_sec;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
        timespec woke{};
        clock_gettime(CLOCK_MONOTONIC, &woke);
        const double late_ms = static_cast<double>(woke.tv_sec - next.tv_sec) * 1e3 +
                               static_cast<double>(woke.tv_nsec - next.tv_nsec) * 1e-6;
        ++s.wakeups;
        if (late_ms > threshold_ms) {
          ++s.late;
          s.late_ms_total += late_ms;
          if (late_ms > s.max_late_ms) s.max_late_ms = late_ms;
          std::lock_guard<std::mutex> lock(mu);
          std::fprintf(out, "%.6f %d %.3f\n", Now(CLOCK_BOOTTIME), t, late_ms);
          std::fflush(out);
        }
        // After a stall, start again from now rather than firing the missed periods at once.
        if (late_ms > period_us * 1e-3) next = woke;
      }
      std::lock_guard<std::mutex> lock(mu);
      total.wakeups += s.wakeups;
      total.late += s.late;
      total.late_ms_total += s.late_ms_total;
      if (s.max_late_ms > total.max_late_ms) total.max_late_ms = s.max_late_ms;
    });
  }
  for (auto& t : ts) t.join();
  if (out != stdout) std::fclose(out);
  std::fprintf(stderr,
               "host_jitter: %llu wake-ups, %llu more than %.3f ms late, latest %.3f ms, %.1f ms late in all\n",
               total.wakeups, total.late, threshold_ms, total.max_late_ms, total.late_ms_total);
  return 0;
}
