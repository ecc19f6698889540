// The CPUs this process may run on (its affinity mask: taskset, a container's cpuset), and how
// many: a node pinned to part of a host sizes its workers and judges idle cores by those CPUs,
// not by every core the host has (std::thread::hardware_concurrency counts those).
// Thread-safety: reads the calling thread's mask; call before starting threads to see the process's.
#pragma once

#include <sched.h>

#include <algorithm>
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

}  // namespace search
