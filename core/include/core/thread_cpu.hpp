// ThreadCpuMicros: the calling thread's CPU time so far, in microseconds (0 where the clock is
// unavailable): what a thread's work cost apart from its waits (for a core, a lock, a device).
// ProcessCpuMicros: the same for the whole process (every thread, user and system time).
// Thread-safety: reads only the calling thread's (or process's) clock.
#pragma once

#include <time.h>

namespace search {

inline double CpuClockMicros(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

inline double ThreadCpuMicros() { return CpuClockMicros(CLOCK_THREAD_CPUTIME_ID); }
inline double ProcessCpuMicros() { return CpuClockMicros(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace search
