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

std::optional<uint64_t> MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return ParseMemAvailable(text.str());
}

}  // namespace search
