// HostLoad: how many of the host's cores are idle, from /proc/stat (all processes: on a node
// host the CPU engine's workers compete with the GPU path's threads, the node's network threads
// and whatever else runs there, e.g. an integrator). IdleCores() is the idle share of the time
// since the previous sample, times the cores; samples closer than `min_interval` apart return the
// previous answer, so callers may ask on every scheduling decision (/proc/stat counts in clock
// ticks, 10 ms on most kernels: 20 ms on 16 cores resolves about half a core). Given `cpus` (the
// node's affinity mask, AllowedCpus(), when it is pinned to part of the host) only those CPUs'
// lines count: the cores outside the mask are no room for the node's CPU workers.
// Thread-safety: not thread-safe; the hybrid scheduler calls it under its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace search {

class HostLoad {
 public:
  explicit HostLoad(std::chrono::microseconds min_interval = std::chrono::milliseconds(20),
                    std::string stat_path = "/proc/stat", std::vector<int> cpus = {});
  // Idle cores over the last interval; -1 when /proc/stat cannot be read (no limit applies).
  double IdleCores();

 private:
  bool Read(uint64_t* idle, uint64_t* total);  // also counts the cores (cpuN lines)
  std::chrono::microseconds min_interval_;
  std::string path_;
  std::vector<int> cpus_;  // empty: every CPU (the aggregate line); else these cpuN lines alone
  std::chrono::steady_clock::time_point last_{};
  uint64_t idle_ = 0, total_ = 0;
  double cores_ = 1;  // per-CPU lines in the last read (of cpus_, when given)
  double answer_ = -1;
};

}  // namespace search
