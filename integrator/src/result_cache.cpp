#include "integrator/result_cache.hpp"

#include "core/query_tree.hpp"

namespace search {

std::string ResultCacheKey(const std::vector<std::string>& canonical_terms, QueryMode mode, uint32_t k) {
  std::string key;
  size_t n = 16;
  for (const auto& t : canonical_terms) n += t.size() + 1;
  key.reserve(n);
  for (size_t i = 0; i < canonical_terms.size(); ++i) {
    if (i) key.push_back(' ');
    key += canonical_terms[i];
  }
  // '\n' cannot appear in a term either: it separates the terms from the mode and k.
  key.push_back('\n');
  key += QueryModeName(mode);
  key.push_back('\n');
  key += std::to_string(k);
  return key;
}

std::string ResultCacheKey(const Query& query, bool source, bool highlight) {
  std::string key;
  if (query.tree == nullptr) {
    key = ResultCacheKey(query.terms, query.mode, query.k);
  } else {
    key.push_back('\x01');
    key += CanonicalKey(*query.tree);
    key.push_back('\n');
    key += QueryModeName(query.mode);
    key.push_back('\n');
    key += std::to_string(query.k);
  }
  if (query.count) key += "\ncount";
  if (source) key += "\nsource";
  if (highlight) key += "\nhighlight";
  return key;
}

size_t ResultCache::EntryBytes(const std::string& key, const std::vector<MergedHit>& hits) {
  // List node + map node + bucket estimate, the key held twice (list entry and map), the hits.
  size_t bytes = sizeof(Entry) + 64 + 2 * (key.size() + sizeof(std::string));
  bytes += hits.size() * sizeof(MergedHit);
  // Short strings live inside std::string's small buffer (15 bytes with libstdc++).
  auto heap = [](const std::string& s) { return s.size() > 15 ? s.size() + 1 : 0; };
  for (const auto& h : hits) {
    bytes += heap(h.external_id) + heap(h.source) + heap(h.source_missing);
    bytes += h.highlights.size() * sizeof(std::string);
    for (const auto& f : h.highlights) bytes += heap(f);
  }
  return bytes;
}

std::optional<std::vector<MergedHit>> ResultCache::Lookup(const std::string& key, std::optional<uint64_t>* total) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  if (total != nullptr) *total = it->second->total;
  return it->second->hits;
}

bool ResultCache::Insert(const std::string& key, std::vector<MergedHit> hits, std::optional<uint64_t> total) {
  const size_t bytes = EntryBytes(key, hits);
  std::lock_guard lock(mu_);
  if (bytes > capacity_) {
    ++stats_.rejected;
    return false;
  }
  auto it = index_.find(key);
  if (it != index_.end()) {
    stats_.bytes -= it->second->bytes;
    it->second->hits = std::move(hits);
    it->second->total = total;
    it->second->bytes = bytes;
    stats_.bytes += bytes;
    lru_.splice(lru_.begin(), lru_, it->second);
  } else {
    lru_.push_front(Entry{key, std::move(hits), total, bytes});
    index_.emplace(key, lru_.begin());
    stats_.bytes += bytes;
    ++stats_.entries;
  }
  ++stats_.inserts;
  EvictUntilFits();
  return true;
}

void ResultCache::EvictUntilFits() {
  // The newest entry (front) fits on its own, so this never evicts it.
  while (stats_.bytes > capacity_ && !lru_.empty()) {
    Entry& victim = lru_.back();
    stats_.bytes -= victim.bytes;
    --stats_.entries;
    ++stats_.evictions;
    index_.erase(victim.key);
    lru_.pop_back();
  }
}

void ResultCache::Clear() {
  std::lock_guard lock(mu_);
  lru_.clear();
  index_.clear();
  stats_.bytes = 0;
  stats_.entries = 0;
}

ResultCacheStats ResultCache::stats() const {
  std::lock_guard lock(mu_);
  ResultCacheStats s = stats_;
  s.capacity_bytes = capacity_;
  return s;
}

}  // namespace search
