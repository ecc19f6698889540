// ThreadCpuMicros: the calling thread's CPU time so far, in microseconds (0 where the clock is
// unavailable): what a thread's work cost apart from its waits (for a core, a lock, a device).
// Thread-safety: reads only the calling thread's clock.
#pragma once

#include <time.h>

namespace search {

inline double ThreadCpuMicros() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

}  // namespace search
