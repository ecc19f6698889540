// host_load.hpp: idle cores from /proc/stat's aggregate "cpu" line.
#include "node/host_load.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <thread>

namespace search {

HostLoad::HostLoad(std::chrono::microseconds min_interval, std::string stat_path)
    : min_interval_(min_interval), path_(std::move(stat_path)) {
  if (Read(&idle_, &total_)) last_ = std::chrono::steady_clock::now();
}

bool HostLoad::Read(uint64_t* idle, uint64_t* total) {
  std::ifstream in(path_);
  std::string line;
  if (!in || !std::getline(in, line) || line.rfind("cpu ", 0) != 0) return false;
  // The aggregate line sums the per-CPU lines that follow it: idle cores are its idle share
  // times their number (in a container, /proc/stat is the host's: the host's cores).
  std::string other;
  size_t cpus = 0;
  while (std::getline(in, other) && other.rfind("cpu", 0) == 0)
    if (other.size() > 3 && std::isdigit(static_cast<unsigned char>(other[3]))) ++cpus;
  cores_ = cpus > 0 ? static_cast<double>(cpus) : static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  std::istringstream fields(line.substr(4));
  // user nice system idle iowait irq softirq steal (guest time is already in user)
  uint64_t v[8] = {};
  size_t n = 0;
  while (n < 8 && fields >> v[n]) ++n;
  if (n < 4) return false;
  *idle = v[3] + (n > 4 ? v[4] : 0);
  *total = 0;
  for (size_t i = 0; i < n; ++i) *total += v[i];
  return true;
}

double HostLoad::IdleCores() {
  const auto now = std::chrono::steady_clock::now();
  if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < min_interval_) return answer_;
  uint64_t idle = 0, total = 0;
  if (!Read(&idle, &total)) return answer_ = -1;
  if (last_ != std::chrono::steady_clock::time_point{} && total > total_) {
    answer_ = cores_ * static_cast<double>(idle - std::min(idle, idle_)) / static_cast<double>(total - total_);
  }
  idle_ = idle;
  total_ = total;
  last_ = now;
  return answer_;
}

}  // namespace search
