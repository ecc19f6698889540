// TermLruCache (ListCache, PositionsCache), CachedList and CachedPositions (index_store/FORMAT.md
// "The list cache").
#include "index_store/list_cache.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>

#include "shard_format.hpp"

namespace search {

namespace {

constexpr size_t kAlign = 64;  // a cache line; also the widest SIMD load (AVX-512) in one piece

}  // namespace

Result<std::shared_ptr<const CachedList>> CachedList::Make(std::string_view term, std::string_view bytes) {
  auto list = std::make_shared<CachedList>();
  list->term.assign(term);
  // Rounded up to whole 64-byte lines plus one spare line, zero padded, so that a decoder's
  // vector loads running past the last byte stay inside the allocation.
  const size_t padded = (bytes.size() + kAlign - 1) / kAlign * kAlign + kAlign;
  list->storage = LargeBuffer::Allocate(padded);
  uint8_t* raw = list->storage.get();
  if (raw == nullptr)
    return Status::ResourceExhausted("cannot allocate " + std::to_string(padded) + " bytes for a list");
  if (!bytes.empty()) std::memcpy(raw, bytes.data(), bytes.size());
  std::memset(raw + bytes.size(), 0, padded - bytes.size());
  list->size = bytes.size();
  auto view = ListView::Parse(list->bytes(), /*verify_crc=*/true);
  if (!view.ok()) return Status::Corruption("list of term " + store::QuoteTerm(term) + ": " + view.status().message());
  list->view = *view;
  list->group_maxima = list->view.ComputeGroupMaxima();
  list->view.set_group_maxima(list->group_maxima.data());
  return std::shared_ptr<const CachedList>(std::move(list));
}

Result<std::shared_ptr<const CachedPositions>> CachedPositions::Make(std::string_view term, std::string_view bytes,
                                                                     uint32_t count) {
  auto p = std::make_shared<CachedPositions>();
  p->term.assign(term);
  p->bytes.assign(bytes);
  auto view = PositionsView::Parse(p->bytes, count);
  if (!view.ok())
    return Status::Corruption("positions of term " + store::QuoteTerm(term) + ": " + view.status().message());
  p->view = *view;
  return std::shared_ptr<const CachedPositions>(std::move(p));
}

template <class Entry>
TermLruCache<Entry>::TermLruCache(size_t capacity_bytes, size_t shards)
    : capacity_(capacity_bytes), shards_([&] {
        size_t n = shards;
        if (n == 0) {
          n = 1;
          while (n * 2 <= kMaxShards && capacity_bytes / (n * 2) >= kMinShardBytes) n *= 2;
        }
        return std::max<size_t>(n, 1);
      }()) {
  // The budget split evenly; the first shards take the remainder, so the parts sum to it.
  for (size_t i = 0; i < shards_.size(); ++i)
    shards_[i].capacity = capacity_ / shards_.size() + (i < capacity_ % shards_.size() ? 1 : 0);
}

template <class Entry>
typename TermLruCache<Entry>::Shard& TermLruCache<Entry>::ShardOf(std::string_view term) {
  if (shards_.size() == 1) return shards_[0];
  // The high bits: the shard's own map buckets by the hash's low bits.
  const uint64_t h = std::hash<std::string_view>{}(term);
  return shards_[(h >> 40) % shards_.size()];
}

template <class Entry>
std::shared_ptr<const Entry> TermLruCache<Entry>::Lookup(std::string_view term) {
  Shard& sh = ShardOf(term);
  std::lock_guard<std::mutex> lock(sh.mu);
  auto it = sh.map.find(term);
  if (it == sh.map.end()) {
    sh.misses.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  sh.lru.splice(sh.lru.begin(), sh.lru, it->second);  // most recently used to the front
  sh.hits.fetch_add(1, std::memory_order_relaxed);
  return *it->second;
}

template <class Entry>
void TermLruCache<Entry>::Insert(std::shared_ptr<const Entry> list) {
  if (!list) return;
  const size_t charge = list->charge();
  Shard& sh = ShardOf(list->term);
  std::lock_guard<std::mutex> lock(sh.mu);
  if (auto it = sh.map.find(list->term); it != sh.map.end()) {  // replace
    const auto old = it->second;
    sh.map.erase(it);
    sh.bytes -= (*old)->charge();
    sh.lru.erase(old);
  }
  if (charge > sh.capacity) return;  // never kept; the caller still holds it
  sh.lru.push_front(std::move(list));
  sh.map.emplace(std::string_view(sh.lru.front()->term), sh.lru.begin());
  sh.bytes += charge;
  sh.inserts.fetch_add(1, std::memory_order_relaxed);
  while (sh.bytes > sh.capacity) {  // the new entry fits alone, so this stops before reaching it
    const auto& victim = sh.lru.back();
    sh.bytes -= victim->charge();
    sh.map.erase(std::string_view(victim->term));
    sh.lru.pop_back();
    sh.evictions.fetch_add(1, std::memory_order_relaxed);
  }
}

template <class Entry>
ListCacheStats TermLruCache<Entry>::stats() const {
  ListCacheStats s;
  s.capacity_bytes = capacity_;
  for (const Shard& sh : shards_) {
    s.hits += sh.hits.load(std::memory_order_relaxed);
    s.misses += sh.misses.load(std::memory_order_relaxed);
    s.inserts += sh.inserts.load(std::memory_order_relaxed);
    s.evictions += sh.evictions.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(sh.mu);
    s.bytes += sh.bytes;
    s.entries += sh.lru.size();
  }
  return s;
}

template <class Entry>
void TermLruCache<Entry>::Clear() {
  for (Shard& sh : shards_) {
    std::lock_guard<std::mutex> lock(sh.mu);
    sh.map.clear();
    sh.lru.clear();
    sh.bytes = 0;
  }
}

template class TermLruCache<CachedList>;
template class TermLruCache<CachedPositions>;
template class TermLruCache<CachedSourceBlock>;

}  // namespace search
