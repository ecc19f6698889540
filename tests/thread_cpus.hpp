// Test helper: the threads of a process (by /proc/PID/task) with their names and the CPUs each may
// run on (Cpus_allowed_list), to check where core/cpu_home.hpp put them.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <dirent.h>
#include <sched.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace search::testing {

struct ThreadCpus {
  pid_t tid = 0;
  std::string name;  // comm
  std::string cpus;  // Cpus_allowed_list, e.g. "3" or "0-15"
};

inline std::vector<ThreadCpus> ThreadsOf(pid_t pid) {
  std::vector<ThreadCpus> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    ThreadCpus t;
    t.tid = static_cast<pid_t>(std::stoi(e->d_name));
    std::ifstream comm(dir + "/" + e->d_name + "/comm");
    std::getline(comm, t.name);
    std::ifstream status(dir + "/" + e->d_name + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        t.cpus = line.substr(line.find_first_not_of(" \t", 18));
        break;
      }
    if (!t.name.empty()) out.push_back(std::move(t));
  }
  ::closedir(d);
  return out;
}

// The CPU list of the threads whose name contains `part` (all of them the same: that list; none or
// different lists: "").
inline std::string CpusOfThreads(const std::vector<ThreadCpus>& threads, const std::string& part) {
  std::string cpus;
  for (const ThreadCpus& t : threads) {
    if (t.name.find(part) == std::string::npos) continue;
    if (!cpus.empty() && cpus != t.cpus) return "";
    cpus = t.cpus;
  }
  return cpus;
}

// Whether this process may put a thread at SCHED_IDLE (the CPU homes' pollers need it; a sandbox
// may refuse), tried on a thread of its own.
inline bool SchedIdleAllowed() {
  bool ok = false;
  std::thread([&] {
    sched_param p{};
    ok = ::sched_setscheduler(0, SCHED_IDLE, &p) == 0;
  }).join();
  return ok;
}

}  // namespace search::testing
