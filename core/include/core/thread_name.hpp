// SetThreadName: names the calling thread (Linux keeps 15 characters) so that `top -H`, `ps -L`,
// /proc/PID/task/*/comm and profilers show which of a process's threads use the cores.
// Thread-safety: names only the calling thread.
#pragma once

#include <pthread.h>

#include <string>

namespace search {

inline void SetThreadName(const std::string& name) {
  (void)pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace search
