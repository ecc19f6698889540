// Default sizes of the caches that hold posting lists, from what the index needs and what the
// machine has, so that a user who passes no size gets the speed of a hand-sized one.
//
// SizeListCache is the one rule for the main-memory list cache (search-node --cache-mb 0,
// searchctl bench --list-cache-mib 0): every list of the shards served, where that fits in
// kListCacheMemoryShare of the memory the kernel says is available (/proc/meminfo MemAvailable),
// else that share. The inputs are plain numbers, so the rule is tested with made-up machines;
// MemAvailableBytes reads the real one.
// Thread-safety: plain values and free functions; MemAvailableBytes reads a file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace search {

// The part of MemAvailable the list cache may take when the lists do not all fit: the rest is
// left to the process's other memory (norms, RocksDB's block cache, buffers) and to the host.
inline constexpr double kListCacheMemoryShare = 0.5;
// Room above the lists' own charge when they all fit (needed / kListCacheHeadroomDivisor): the cache
// splits its budget over hash shards (index_store/list_cache.hpp), which never fill evenly.
inline constexpr uint64_t kListCacheHeadroomDivisor = 8;
// The budget when MemAvailable cannot be read (no /proc): the lists, up to this.
inline constexpr uint64_t kListCacheFallbackBytes = uint64_t{256} << 20;

// A cache size and why it was chosen.
struct CacheSizing {
  uint64_t bytes = 0;        // the budget chosen
  uint64_t needed = 0;       // what holding every list would take
  std::string source;        // where `needed` came from
  std::string reason;        // why `bytes` is what it is
  // One line for the start-up log: "list cache 812 MiB: ... (source); reason".
  std::string Describe(std::string_view what) const;
};

// The main-memory list cache for lists whose cache charge sums to `needed` bytes (read from
// `source`): `needed` and its headroom when `needed` is at most `share` of `mem_available` (the
// headroom as far as the share allows), else that share; without `mem_available` (nullopt), `needed`
// up to kListCacheFallbackBytes. REQUIRES: 0 < share <= 1.
CacheSizing SizeListCache(uint64_t needed, std::string source, std::optional<uint64_t> mem_available,
                          double share = kListCacheMemoryShare);

// The part of the GPU's free memory its list cache takes by default (search-node --gpu-cache-bytes 0,
// searchctl bench --gpu-cache-mib 0): the rest is left to the engine's per-query buffers.
inline constexpr double kGpuListCacheShare = 0.5;
// The GPU list cache of each of `shards` shards served from one GPU with `free_bytes` free:
// kGpuListCacheShare of it, shared equally. REQUIRES: shards >= 1.
CacheSizing SizeGpuListCache(uint64_t free_bytes, size_t shards);

// MemAvailable of a /proc/meminfo text, in bytes; nullopt when the line is absent or malformed.
std::optional<uint64_t> ParseMemAvailable(std::string_view meminfo);
// The room a cgroup memory limit leaves: the limit minus the usage, from the two files' texts (v2
// memory.max and memory.current, v1 memory.limit_in_bytes and memory.usage_in_bytes); nullopt when
// there is no limit ("max") or a text is malformed.
std::optional<uint64_t> CgroupMemoryRoom(std::string_view memory_max, std::string_view memory_current);
// The memory this process may still take, in bytes: MemAvailable (/proc/meminfo), lowered to the
// room its cgroup's memory limits leave (v1: the memory controller's root as mounted; v2: its own
// cgroup and every ancestor), since a container's /proc/meminfo shows the host's memory; nullopt
// when MemAvailable cannot be read.
std::optional<uint64_t> MemAvailableBytes();

}  // namespace search
