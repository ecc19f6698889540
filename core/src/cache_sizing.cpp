// SizeListCache and MemAvailable (core/cache_sizing.hpp).
#include "core/cache_sizing.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace search {

namespace {

std::string Mib(uint64_t bytes) { return std::to_string((bytes + (uint64_t{1} << 19)) >> 20) + " MiB"; }

}  // namespace

std::string CacheSizing::Describe(std::string_view what) const {
  std::string line(what);
  line += " " + Mib(bytes) + ": " + reason + " (from " + source + ")";
  return line;
}

CacheSizing SizeListCache(uint64_t needed, std::string source, std::optional<uint64_t> mem_available,
                          double share) {
  CacheSizing s;
  s.needed = needed;
  s.source = std::move(source);
  share = std::clamp(share, 0.0, 1.0);
  const int percent = static_cast<int>(std::lround(share * 100));
  if (!mem_available) {
    s.bytes = std::min(needed, kListCacheFallbackBytes);
    s.reason = "the lists need " + Mib(needed) + ", MemAvailable unreadable, so at most " + Mib(kListCacheFallbackBytes);
    return s;
  }
  const auto cap = static_cast<uint64_t>(static_cast<double>(*mem_available) * share);
  if (needed <= cap) {
    s.bytes = std::min(cap, needed + needed / kListCacheHeadroomDivisor);
    s.reason = "every list, plus headroom for the cache's hash shards: the lists need " + Mib(needed) + ", within " +
               std::to_string(percent) + "% of MemAvailable " + Mib(*mem_available);
  } else {
    s.bytes = cap;
    s.reason = "the lists need " + Mib(needed) + ", more than " + std::to_string(percent) + "% of MemAvailable " +
               Mib(*mem_available) + ": capped at that share (the rest are read from RocksDB)";
  }
  return s;
}

CacheSizing SizeGpuListCache(uint64_t free_bytes, size_t shards) {
  shards = std::max<size_t>(1, shards);
  CacheSizing s;
  s.bytes = static_cast<uint64_t>(static_cast<double>(free_bytes) * kGpuListCacheShare) / shards;
  s.needed = s.bytes;
  s.source = "the GPU's free memory";
  s.reason = std::to_string(static_cast<int>(std::lround(kGpuListCacheShare * 100))) + "% of the free " +
             Mib(free_bytes) + (shards > 1 ? ", shared by " + std::to_string(shards) + " shards" : std::string()) +
             "; the rest is left to the engine's buffers";
  return s;
}

std::optional<uint64_t> ParseMemAvailable(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  for (size_t pos = 0; pos < meminfo.size();) {
    size_t eol = meminfo.find('\n', pos);
    if (eol == std::string_view::npos) eol = meminfo.size();
    std::string_view line = meminfo.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    uint64_t kib = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc() || end == line.data()) return std::nullopt;
    std::string_view unit(end, static_cast<size_t>(line.data() + line.size() - end));
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (unit != "kB" || kib > (UINT64_MAX >> 10)) return std::nullopt;
    return kib << 10;
  }
  return std::nullopt;
}

namespace {

std::optional<uint64_t> ParseBytes(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::optional<uint64_t> CgroupMemoryRoom(std::string_view memory_max, std::string_view memory_current) {
  const auto max = ParseBytes(memory_max);
  const auto current = ParseBytes(memory_current);
  if (!max || !current) return std::nullopt;
  return *max > *current ? *max - *current : 0;
}

std::optional<uint64_t> MemAvailableBytes() {
  std::optional<uint64_t> avail = ParseMemAvailable(ReadText("/proc/meminfo"));
  if (!avail) return std::nullopt;
  // cgroup v1: the memory controller's limit as the process sees it (a container's own cgroup).
  if (auto room = CgroupMemoryRoom(ReadText("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
                                   ReadText("/sys/fs/cgroup/memory/memory.usage_in_bytes")))
    avail = std::min(*avail, *room);
  // cgroup v2: "0::/PATH" in /proc/self/cgroup; the limits of PATH and of each ancestor.
  const std::string self = ReadText("/proc/self/cgroup");
  const size_t at = self.find("0::");
  if (at == std::string::npos || (at > 0 && self[at - 1] != '\n')) return avail;
  std::string path = self.substr(at + 3, self.find('\n', at) - at - 3);
  while (true) {
    const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
    if (auto room = CgroupMemoryRoom(ReadText(dir + "/memory.max"), ReadText(dir + "/memory.current")))
      avail = std::min(*avail, *room);
    if (path.empty() || path == "/") break;
    const size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return avail;
}

}  // namespace search
