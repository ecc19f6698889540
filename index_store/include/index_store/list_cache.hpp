// ListCache: the main-memory cache of posting lists above RocksDB, LRU under a byte budget.
// Entries are immutable CachedList objects handed out as shared_ptr, so an evicted list stays
// valid for queries still using it. Counters record hits, misses, inserts, evictions and bytes.
// The cache is split by term hash into shards, each its own LRU with an equal part of the budget
// and its own mutex (as RocksDB's LRUCache is): every query's every term passes through Lookup,
// from the node's request threads, the CPU engine's workers and the GPU dispatchers at once, and
// on one mutex those lookups queued behind each other at the node's highest rates. A list larger
// than its shard's part of the budget is not kept. Small budgets (under 2 x kMinShardBytes) keep
// one shard: one exact LRU over the whole budget.
// Thread-safety: all methods are thread-safe (a mutex per shard; lookups are short).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codec/block_codec.hpp"
#include "core/large_buffer.hpp"

namespace search {

// An owned, 64-byte aligned copy of a list blob (core/large_buffer.hpp) plus its parsed view.
struct CachedList {
  std::string term;
  LargeBuffer storage;
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
  static constexpr size_t kMinShardBytes = size_t{256} << 20;
  static constexpr size_t kMaxShards = 32;
  // shards: 0 = by the budget (one per kMinShardBytes, a power of two, up to kMaxShards).
  explicit ListCache(size_t capacity_bytes, size_t shards = 0);
  // nullptr on a miss (counted).
  std::shared_ptr<const CachedList> Lookup(std::string_view term);
  // Inserts (or replaces) and evicts least recently used entries beyond the budget. A list larger
  // than the whole budget is not kept (the caller still uses its shared_ptr).
  void Insert(std::shared_ptr<const CachedList> list);
  ListCacheStats stats() const;
  void Clear();
  size_t shards() const { return shards_.size(); }

 private:
  using LruList = std::list<std::shared_ptr<const CachedList>>;
  struct alignas(64) Shard {
    size_t capacity = 0;
    mutable std::mutex mu;
    LruList lru;                                                  // GUARDED_BY(mu), front = newest
    std::unordered_map<std::string_view, LruList::iterator> map;  // GUARDED_BY(mu), keys into lru
    size_t bytes = 0;                                             // GUARDED_BY(mu)
    std::atomic<uint64_t> hits{0}, misses{0}, inserts{0}, evictions{0};
  };
  Shard& ShardOf(std::string_view term);
  const size_t capacity_;
  std::vector<Shard> shards_;
};

}  // namespace search
