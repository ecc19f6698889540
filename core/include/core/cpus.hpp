// The CPUs this process may run on (its affinity mask: taskset, a container's cpuset), and how
// many: a node pinned to part of a host sizes its workers and judges idle cores by those CPUs,
// not by every core the host has (std::thread::hardware_concurrency counts those).
// Thread-safety: reads the calling thread's mask; call before starting threads to see the process's.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace search {

// The CPU numbers in the calling thread's affinity mask, ascending; empty when it cannot be read.
inline std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// How many CPUs this process may use (at least 1).
inline unsigned AvailableCores() {
  const size_t n = AllowedCpus().size();
  return n > 0 ? static_cast<unsigned>(n) : std::max(1u, std::thread::hardware_concurrency());
}

// Pins the calling thread (and the threads it starts afterwards, which inherit its mask) to
// `cpus`; false (the mask unchanged) when `cpus` is empty or the kernel refuses it.
inline bool PinThisThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// Splits `allowed` (ascending, as AllowedCpus gives it) into the last `n` CPUs, dedicated to one
// kind of thread, and the rest. REQUIRES: 0 < n < allowed.size().
struct CpuSplit {
  std::vector<int> rest, dedicated;
};
inline CpuSplit SplitCpus(const std::vector<int>& allowed, size_t n) {
  CpuSplit s;
  const size_t k = allowed.size() - std::min(n, allowed.size());
  s.rest.assign(allowed.begin(), allowed.begin() + static_cast<long>(k));
  s.dedicated.assign(allowed.begin() + static_cast<long>(k), allowed.end());
  return s;
}

}  // namespace search
