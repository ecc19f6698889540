// Growing a process's file descriptor table before it starts threads.
//
// The kernel grows the table as descriptors are opened (64, 128, 256, 512, ... slots), and in a
// process with more than one thread every growth waits for an RCU grace period (fs/file.c,
// expand_fdtable: synchronize_rcu) while other threads opening a descriptor wait for the resize.
// With the CPUs busy a grace period can take milliseconds, so a load generator or an HTTP front
// that opens its connections as load rises stalls at each growth, in the middle of what it serves
// or measures. Grown once while the process has one thread, the table costs no grace period and
// never shrinks.
// Thread-safety: call before starting threads (it still works after; it then pays the wait once).
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace search {

// The number of descriptor slots a process's table has now ("FDSize" in /proc/PID/status): this
// process's by default, another's by its pid; 0 when it cannot be read.
inline int FdTableSlots(int pid = 0) {
  std::ifstream in(pid > 0 ? "/proc/" + std::to_string(pid) + "/status" : std::string("/proc/self/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("FDSize:", 0) == 0) return std::atoi(line.c_str() + 7);
  }
  return 0;
}

// Grows the table to hold descriptors 0..n-1 now, raising the soft RLIMIT_NOFILE toward n where
// the hard limit allows. Returns how many slots the process may now use without a growth: n, or
// less where the limit stops it. Opens and closes one descriptor; clobbers none (F_DUPFD takes the
// lowest free number at or above the one asked for).
inline int ReserveFdTable(int n) {
  if (n <= 0) return 0;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < static_cast<rlim_t>(n)) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(n) : std::min<rlim_t>(rl.rlim_max, n);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  const int limit = rl.rlim_cur == RLIM_INFINITY ? n : static_cast<int>(std::min<rlim_t>(rl.rlim_cur, n));
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const int top = ::fcntl(fd, F_DUPFD_CLOEXEC, std::max(limit - 1, 0));
  if (top >= 0) ::close(top);
  ::close(fd);
  return top >= 0 ? limit : 0;
}

}  // namespace search
