// host_load.hpp: idle cores from /proc/stat's aggregate "cpu" line.
#include "sched/host_load.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <thread>

namespace search {

HostLoad::HostLoad(std::chrono::microseconds min_interval, std::string stat_path, std::vector<int> cpus)
    : min_interval_(min_interval), path_(std::move(stat_path)), cpus_(std::move(cpus)) {
  std::sort(cpus_.begin(), cpus_.end());
  if (Read(&idle_, &total_)) last_ = std::chrono::steady_clock::now();
}

bool HostLoad::Read(uint64_t* idle, uint64_t* total) {
  std::ifstream in(path_);
  std::string line;
  if (!in || !std::getline(in, line) || line.rfind("cpu ", 0) != 0) return false;
  // The aggregate line sums the per-CPU lines that follow it: idle cores are its idle share
  // times their number (in a container, /proc/stat is the host's: the host's cores). With cpus_,
  // the sum of those CPUs' own lines instead.
  // Fields: user nice system idle iowait irq softirq steal (guest time is already in user).
  auto ticks = [](const std::string& fields_text, uint64_t* idle, uint64_t* total) {
    std::istringstream fields(fields_text);
    uint64_t v[8] = {};
    size_t n = 0;
    while (n < 8 && fields >> v[n]) ++n;
    if (n < 4) return false;
    *idle = v[3] + (n > 4 ? v[4] : 0);
    *total = 0;
    for (size_t i = 0; i < n; ++i) *total += v[i];
    return true;
  };
  std::string other;
  size_t cpus = 0, mine = 0;
  uint64_t my_idle = 0, my_total = 0;
  while (std::getline(in, other) && other.rfind("cpu", 0) == 0) {
    if (other.size() <= 3 || !std::isdigit(static_cast<unsigned char>(other[3]))) continue;
    ++cpus;
    if (cpus_.empty()) continue;
    const size_t space = other.find(' ');
    int id = -1;
    try {
      id = std::stoi(other.substr(3, space == std::string::npos ? std::string::npos : space - 3));
    } catch (const std::exception&) {
      continue;
    }
    if (space == std::string::npos || !std::binary_search(cpus_.begin(), cpus_.end(), id)) continue;
    uint64_t i = 0, t = 0;
    if (!ticks(other.substr(space + 1), &i, &t)) return false;
    my_idle += i;
    my_total += t;
    ++mine;
  }
  if (!cpus_.empty()) {
    if (mine == 0) return false;  // none of the mask's CPUs has a line
    cores_ = static_cast<double>(mine);
    *idle = my_idle;
    *total = my_total;
    return true;
  }
  cores_ = cpus > 0 ? static_cast<double>(cpus) : static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  return ticks(line.substr(4), idle, total);
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
