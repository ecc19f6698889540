// ListCache: the main-memory cache of posting lists above RocksDB, LRU under a byte budget.
// Entries are immutable CachedList objects handed out as shared_ptr, so an evicted list stays
// valid for queries still using it. Counters record hits, misses, inserts, evictions and bytes.
// Thread-safety: all methods are thread-safe (one mutex; lookups are short).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "codec/block_codec.hpp"

namespace search {

// An owned, 64-byte aligned copy of a list blob plus its parsed view.
struct CachedList {
  std::string term;
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> storage{nullptr, [](uint8_t*) {}};
  size_t size = 0;
  ListView view;
  std::string_view bytes() const { return {reinterpret_cast<const char*>(storage.get()), size}; }
  // Copies `bytes` into aligned storage and parses (with CRC check).
  static Result<std::shared_ptr<const CachedList>> Make(std::string_view term, std::string_view bytes);
};

struct ListCacheStats {
  uint64_t hits = 0, misses = 0, inserts = 0, evictions = 0;
  uint64_t bytes = 0, entries = 0, capacity_bytes = 0;
};

class ListCache {
 public:
  explicit ListCache(size_t capacity_bytes);
  // nullptr on a miss (counted).
  std::shared_ptr<const CachedList> Lookup(std::string_view term);
  // Inserts (or replaces) and evicts least recently used entries beyond the budget. A list larger
  // than the whole budget is not kept (the caller still uses its shared_ptr).
  void Insert(std::shared_ptr<const CachedList> list);
  ListCacheStats stats() const;
  void Clear();

 private:
  using LruList = std::list<std::shared_ptr<const CachedList>>;
  const size_t capacity_;
  mutable std::mutex mu_;
  LruList lru_;                                                   // GUARDED_BY(mu_), front = newest
  std::unordered_map<std::string_view, LruList::iterator> map_;  // GUARDED_BY(mu_), keys into lru_
  size_t bytes_ = 0;                                              // GUARDED_BY(mu_)
  std::atomic<uint64_t> hits_{0}, misses_{0}, inserts_{0}, evictions_{0};
};

}  // namespace search
