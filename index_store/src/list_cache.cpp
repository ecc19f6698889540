// ListCache and CachedList (index_store/FORMAT.md "The list cache").
#include "index_store/list_cache.hpp"

#include <cstdlib>
#include <cstring>

#include "shard_format.hpp"

namespace search {

namespace {

// Each entry is charged its struct plus its blob (the term's bytes and the map node are small
// next to a posting list and are not counted).
size_t Charge(const CachedList& list) { return sizeof(CachedList) + list.size; }

constexpr size_t kAlign = 64;  // a cache line; also the widest SIMD load (AVX-512) in one piece

}  // namespace

Result<std::shared_ptr<const CachedList>> CachedList::Make(std::string_view term, std::string_view bytes) {
  auto list = std::make_shared<CachedList>();
  list->term.assign(term);
  // Rounded up to whole 64-byte lines plus one spare line, zero padded, so that a decoder's
  // vector loads running past the last byte stay inside the allocation.
  const size_t padded = (bytes.size() + kAlign - 1) / kAlign * kAlign + kAlign;
  auto* raw = static_cast<uint8_t*>(std::aligned_alloc(kAlign, padded));
  if (raw == nullptr) return Status::ResourceExhausted("cannot allocate " + std::to_string(padded) + " bytes for a list");
  list->storage = std::unique_ptr<uint8_t[], void (*)(uint8_t*)>(raw, [](uint8_t* p) { std::free(p); });
  if (!bytes.empty()) std::memcpy(raw, bytes.data(), bytes.size());
  std::memset(raw + bytes.size(), 0, padded - bytes.size());
  list->size = bytes.size();
  auto view = ListView::Parse(list->bytes(), /*verify_crc=*/true);
  if (!view.ok()) return Status::Corruption("list of term " + store::QuoteTerm(term) + ": " + view.status().message());
  list->view = *view;
  return std::shared_ptr<const CachedList>(std::move(list));
}

ListCache::ListCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

std::shared_ptr<const CachedList> ListCache::Lookup(std::string_view term) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(term);
  if (it == map_.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);  // most recently used to the front
  hits_.fetch_add(1, std::memory_order_relaxed);
  return *it->second;
}

void ListCache::Insert(std::shared_ptr<const CachedList> list) {
  if (!list) return;
  const size_t charge = Charge(*list);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = map_.find(list->term); it != map_.end()) {  // replace
    const auto old = it->second;
    map_.erase(it);
    bytes_ -= Charge(**old);
    lru_.erase(old);
  }
  if (charge > capacity_) return;  // never kept; the caller still holds it
  lru_.push_front(std::move(list));
  map_.emplace(std::string_view(lru_.front()->term), lru_.begin());
  bytes_ += charge;
  inserts_.fetch_add(1, std::memory_order_relaxed);
  while (bytes_ > capacity_) {  // the new entry fits alone, so this stops before reaching it
    const auto& victim = lru_.back();
    bytes_ -= Charge(*victim);
    map_.erase(std::string_view(victim->term));
    lru_.pop_back();
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

ListCacheStats ListCache::stats() const {
  ListCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.inserts = inserts_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  s.bytes = bytes_;
  s.entries = lru_.size();
  s.capacity_bytes = capacity_;
  return s;
}

void ListCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
  lru_.clear();
  bytes_ = 0;
}

}  // namespace search
