// A thread's EEVDF slice: how long the kernel lets it run before another runnable thread on its
// CPU may take over, and so how soon it runs when it wakes on a busy CPU.
//
// Linux 6.6+ schedules ordinary (SCHED_OTHER) threads with EEVDF: each runnable thread gets a
// virtual deadline one slice after it became eligible, and the earliest deadline runs. The default
// slice is 0.75 ms x (1 + log2 of the CPUs, at most 8), 3 ms on a guest of eight or more; a thread
// woken on a CPU that another thread is using waits up to that long. Since Linux
// 6.12 a thread may ask for its own slice (sched_setattr's sched_runtime, 0.1-100 ms, no privilege
// needed): a short one gives it an early deadline, so it runs soon after it wakes, and lets it
// preempt a thread with a longer one.
//
// A serving path hands each request from thread to thread (HTTP worker, fan-out, ZeroMQ, the node's
// I/O, its scheduler, back); with the CPUs 60-70% busy every hand-off may wait a slice. Threads
// that sleep, wake, hand on and sleep again gain from a short slice; threads that compute
// (the CPU engine's workers) keep the default, so they are the ones that yield.
//
// SetThreadSlice: the calling thread's slice, its policy and nice value unchanged; false when the
// kernel refused it or takes no custom slices (before 6.12: the call succeeds and does nothing).
// KernelTakesThreadSlice: whether SetThreadSlice(slice) would succeed, asked on a passing thread.
// A thread's slice passes to the threads it starts.
// ThreadSliceNs: a thread's slice as the kernel uses it ("se.slice" in /proc/PID/task/TID/sched:
// the default or the custom one): this process's thread by default, another process's by its pid;
// -1 where it cannot be read.
// Thread-safety: SetThreadSlice touches only the calling thread; ThreadSliceNs only reads.
#pragma once

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

namespace search {

namespace detail {
// The kernel's struct sched_attr (include/uapi/linux/sched/types.h); glibc declares no wrapper.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};
}  // namespace detail

// The smallest and largest slice the kernel accepts (kernel/sched/syscalls.c clamps to these).
inline constexpr std::chrono::microseconds kMinThreadSlice{100};
inline constexpr std::chrono::microseconds kMaxThreadSlice{100000};

// A --thread-slice-us / --slice-us value: 0 (the kernel's default) or within the kernel's range.
inline bool ValidThreadSliceUs(int64_t us) {
  return us == 0 || (us >= kMinThreadSlice.count() && us <= kMaxThreadSlice.count());
}

inline int64_t ThreadSliceNs(int tid = 0, int pid = 0) {
  const int t = tid > 0 ? tid : static_cast<int>(syscall(SYS_gettid));
  std::ifstream in((pid > 0 ? "/proc/" + std::to_string(pid) : std::string("/proc/self")) + "/task/" + std::to_string(t) +
                   "/sched");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("se.slice", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) return -1;
    try {
      return static_cast<int64_t>(std::stoll(line.substr(colon + 1)));
    } catch (...) {
      return -1;
    }
  }
  return -1;
}

inline bool SetThreadSlice(std::chrono::microseconds slice) {
  if (slice < kMinThreadSlice || slice > kMaxThreadSlice) return false;
  detail::SchedAttr attr{};
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return false;
  // Only the fair class takes a slice; a real-time or deadline thread is left as it is.
  if (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH) return false;
  attr.size = sizeof attr;
  attr.sched_flags = 0;
  attr.sched_runtime = static_cast<uint64_t>(std::chrono::nanoseconds(slice).count());
  if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0) return false;
  detail::SchedAttr now{};
  if (syscall(SYS_sched_getattr, 0, &now, sizeof now, 0) != 0) return false;
  return now.sched_runtime == attr.sched_runtime;  // an older kernel reads back 0
}

// Whether the kernel takes `slice` for a thread, asked on a thread of its own: a thread's slice
// passes to the threads it starts, so a process that gives only some threads a short one must not
// ask on the thread that starts the rest.
inline bool KernelTakesThreadSlice(std::chrono::microseconds slice) {
  bool taken = false;
  std::thread([&] { taken = SetThreadSlice(slice); }).join();
  return taken;
}

}  // namespace search
