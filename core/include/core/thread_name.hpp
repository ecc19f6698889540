// SetThreadName: names the calling thread (Linux keeps 15 characters) so that `top -H`, `ps -L`,
// /proc/PID/task/*/comm and profilers show which of a process's threads use the cores.
// RaiseThreadNice: the calling thread's nice value (Linux schedules each thread by its own; raising
// it needs no privilege). Throughput work at a higher nice value yields the cores to
// latency-critical threads when they need them and runs at full speed when they do not.
// SetThreadIdlePolicy: the calling thread under SCHED_IDLE (no privilege needed): it runs only on
// what the CPU's other threads leave, a thread of any other policy woken on its CPU preempts it at
// once, and the kernel's wake-up placement counts a CPU running only such threads as idle. For
// throughput work on cores that latency-critical threads also use.
// Thread-safety: all three touch only the calling thread.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace search {

inline void SetThreadName(const std::string& name) {
  (void)pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

// Raises the calling thread's nice value by `delta` (to at most 19); false when the kernel refused.
inline bool RaiseThreadNice(int delta) {
  const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (now == -1 && errno != 0) return false;
  return setpriority(PRIO_PROCESS, tid, std::min(19, now + delta)) == 0;
}

// Moves the calling thread to SCHED_IDLE; false when the kernel refused (it keeps its policy).
inline bool SetThreadIdlePolicy() {
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  sched_param param{};
  param.sched_priority = 0;
  return sched_setscheduler(tid, SCHED_IDLE, &param) == 0;
}

}  // namespace search
