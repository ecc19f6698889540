// ListCache: the main-memory cache of posting lists above RocksDB, LRU under a byte budget.
// Entries are immutable CachedList objects handed out as shared_ptr, so an evicted list stays
// valid for queries still using it. Counters record hits, misses, inserts, evictions and bytes.
// The cache is split by term hash into shards, each its own LRU with an equal part of the budget
// and its own mutex (as RocksDB's LRUCache is): every query's every term passes through Lookup,
// from the node's request threads, the CPU engine's workers and the GPU dispatchers at once, and
// on one mutex those lookups queued behind each other at the node's highest rates. A list larger
// than its shard's part of the budget is not kept. Small budgets (under 2 x kMinShardBytes) keep
// one shard: one exact LRU over the whole budget.
// PositionsCache is the same LRU over CachedPositions (a term's positions blob, parsed): a shard's
// reader keeps lists and positions in two of them, the list cache budget shared between them.
// SourceCache is the same LRU over decoded source blocks (CachedSourceBlock), for GetSources.
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
#include "codec/positions_codec.hpp"
#include "core/large_buffer.hpp"
#include "index_store/source_block.hpp"

namespace search {

// An owned, 64-byte aligned copy of a list blob (core/large_buffer.hpp) plus its parsed view.
struct CachedList {
  std::string term;
  LargeBuffer storage;
  size_t size = 0;
  ListView view;
  // ListView::ComputeGroupMaxima(), which the view points at: 4 bytes a 64 blocks (of at least
  // 1,024 bytes of metadata), left out of charge() so that ShardListCacheNeed can plan from sizes.
  std::vector<float> group_maxima;
  std::string_view bytes() const { return {reinterpret_cast<const char*>(storage.get()), size}; }
  size_t charge() const { return sizeof(CachedList) + size; }
  // Copies `bytes` into aligned storage and parses (with CRC check).
  static Result<std::shared_ptr<const CachedList>> Make(std::string_view term, std::string_view bytes);
};

// A term's positions blob (codec/FORMAT.md "Positions"), owned, and its view parsed with the list's
// count (the CRC checked). The view points into `bytes`, which never moves (the object is only
// handed out as shared_ptr<const>).
struct CachedPositions {
  std::string term;
  std::string bytes;
  PositionsView view;
  size_t charge() const { return sizeof(CachedPositions) + bytes.size(); }
  // Copies `bytes` and parses them for a list of `count` postings: Corruption naming the term
  // when they fail validation.
  static Result<std::shared_ptr<const CachedPositions>> Make(std::string_view term, std::string_view bytes,
                                                             uint32_t count);
};

// A decoded source block (source_block.hpp) of a shard, keyed ("term") by its first docID as 4
// big-endian bytes.
struct CachedSourceBlock {
  std::string term;
  DecodedSourceBlock block;
  size_t charge() const { return sizeof(CachedSourceBlock) + block.bytes(); }
};

struct ListCacheStats {
  uint64_t hits = 0, misses = 0, inserts = 0, evictions = 0;
  uint64_t bytes = 0, entries = 0, capacity_bytes = 0;
};

// The sharded LRU of immutable per-term entries under a byte budget. Entry has `std::string term`
// and `size_t charge() const` (the bytes it is charged). Instantiated for CachedList and
// CachedPositions (list_cache.cpp).
template <class Entry>
class TermLruCache {
 public:
  static constexpr size_t kMinShardBytes = size_t{256} << 20;
  static constexpr size_t kMaxShards = 32;
  // shards: 0 = by the budget (one per kMinShardBytes, a power of two, up to kMaxShards).
  explicit TermLruCache(size_t capacity_bytes, size_t shards = 0);
  // nullptr on a miss (counted).
  std::shared_ptr<const Entry> Lookup(std::string_view term);
  // Inserts (or replaces) and evicts least recently used entries beyond the budget. An entry
  // larger than its shard's budget is not kept (the caller still uses its shared_ptr).
  void Insert(std::shared_ptr<const Entry> entry);
  ListCacheStats stats() const;
  void Clear();
  size_t shards() const { return shards_.size(); }

 private:
  using LruList = std::list<std::shared_ptr<const Entry>>;
  struct alignas(64) Shard {
    size_t capacity = 0;
    mutable std::mutex mu;
    LruList lru;                                                  // GUARDED_BY(mu), front = newest
    std::unordered_map<std::string_view, typename LruList::iterator> map;  // GUARDED_BY(mu), keys into lru
    size_t bytes = 0;                                             // GUARDED_BY(mu)
    std::atomic<uint64_t> hits{0}, misses{0}, inserts{0}, evictions{0};
  };
  Shard& ShardOf(std::string_view term);
  const size_t capacity_;
  std::vector<Shard> shards_;
};

class ListCache final : public TermLruCache<CachedList> {
 public:
  using TermLruCache::TermLruCache;
};

class PositionsCache final : public TermLruCache<CachedPositions> {
 public:
  using TermLruCache::TermLruCache;
};

// The ShardReader's cache of decoded source blocks (GetSources).
class SourceCache final : public TermLruCache<CachedSourceBlock> {
 public:
  using TermLruCache::TermLruCache;
};

}  // namespace search
