// ResultCache: the integrator's cache of complete merged answers (their hits, and their exact total
// when counted), an LRU under a byte budget. Keyed by the query (ResultCacheKey): canonical terms
// or the canonical tree, mode, k and whether it counts; the terms are the analyzer's canonical
// output (unique, sorted), so "B a a" and "a b" share an entry. Only complete answers (every shard answered, none
// timed out) may be inserted; the caller enforces that. An entry larger than the whole budget is
// not kept; a budget of 0 disables the cache. Byte accounting is an estimate of the heap the entry
// holds (key, hit structs, external ids, sources and highlight fragments, list node), so the budget
// bounds real memory within a small constant factor.
// Thread-safety: every method is thread-safe (one mutex; lookups copy the hits out under it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/query.hpp"

namespace search {

// One hit of a merged answer as the integrator returns it.
struct MergedHit {
  uint32_t doc = 0;    // global docID
  float score = 0.0f;
  uint32_t shard = 0;  // the shard that answered it
  std::string external_id;
  // The fetch phase's, when the search asked for them (else empty):
  bool has_source = false;
  std::string source{};        // with has_source: the stored JSON object, byte for byte
  std::string source_missing{};  // the source was asked for but is absent: "not stored", "fetch failed"
  std::vector<std::string> highlights{};  // highlight.contents, best first
  bool operator==(const MergedHit&) const = default;
};

// The cache key: canonical terms joined by a single space (terms never hold spaces: the analyzer
// splits on them), then the mode name and k. Two queries with the same analyzed terms, mode and
// k map to the same key.
std::string ResultCacheKey(const std::vector<std::string>& canonical_terms, QueryMode mode, uint32_t k);
// The key of a Query: a bag of words as above (plus "\ncount" when it counts); a tree as a 0x01
// byte (which no analyzed term starts with), its CanonicalKey, the mode, k and "\ncount" when it
// counts. Trees that Canonicalize makes equal share an entry. With `source` or `highlight` (what
// the fetch phase adds to each hit) "\nsource" and "\nhighlight" follow: answers with and without
// documents are different entries.
std::string ResultCacheKey(const Query& query, bool source = false, bool highlight = false);

struct ResultCacheStats {
  uint64_t hits = 0, misses = 0, inserts = 0, evictions = 0, rejected = 0;  // rejected: too big
  size_t bytes = 0, entries = 0, capacity_bytes = 0;
};

class ResultCache {
 public:
  explicit ResultCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  ResultCache(const ResultCache&) = delete;
  ResultCache& operator=(const ResultCache&) = delete;

  // The cached hits for `key` (and marks the entry most recently used), or nullopt (a miss).
  // `total`, when given, gets the entry's total (nullopt: inserted without one).
  std::optional<std::vector<MergedHit>> Lookup(const std::string& key, std::optional<uint64_t>* total = nullptr);
  // Inserts or replaces; evicts least recently used entries until the budget holds. Returns false
  // when the entry alone exceeds the budget (nothing is stored).
  bool Insert(const std::string& key, std::vector<MergedHit> hits, std::optional<uint64_t> total = std::nullopt);
  void Clear();

  ResultCacheStats stats() const;
  size_t capacity_bytes() const { return capacity_; }
  // The bytes an entry is charged.
  static size_t EntryBytes(const std::string& key, const std::vector<MergedHit>& hits);

 private:
  struct Entry {
    std::string key;
    std::vector<MergedHit> hits;
    std::optional<uint64_t> total;
    size_t bytes = 0;
  };
  void EvictUntilFits();  // REQUIRES: mu_ held

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // GUARDED_BY(mu_); front = most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;  // GUARDED_BY(mu_)
  ResultCacheStats stats_;  // GUARDED_BY(mu_); bytes/entries kept current
};

}  // namespace search
