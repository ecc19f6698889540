// The shard reader's metric families (see index_store/shard_metrics.hpp).
#include "index_store/shard_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <string>
#include <string_view>

namespace search {
namespace {

// The families: names (dashboards, alerts and tests refer to them) and help texts.
struct Family {
  std::string_view name, help;
};
constexpr Family kListCacheHits{"search_list_cache_hits_total", "Posting-list cache hits."};
constexpr Family kListCacheMisses{"search_list_cache_misses_total", "Posting-list cache misses."};
constexpr Family kListCacheEvictions{"search_list_cache_evictions_total", "Posting-list cache evictions."};
constexpr Family kListCacheBytes{"search_list_cache_bytes", "Bytes held by the posting-list cache."};
constexpr Family kListCacheEntries{"search_list_cache_entries", "Lists held by the posting-list cache."};
constexpr Family kListCacheCapacity{"search_list_cache_capacity_bytes", "Byte budget of the posting-list cache."};
// Labels: source (memo: remembered; rocksdb: read).
constexpr Family kExternalIdLookups{"search_external_id_lookups_total",
                                    "External ids of hits looked up, by source: memo (remembered) or rocksdb (read)."};

prometheus::Family<prometheus::Counter>& Counters(prometheus::Registry& r, const Family& f) {
  return prometheus::BuildCounter().Name(std::string(f.name)).Help(std::string(f.help)).Register(r);
}
prometheus::Gauge* Gauge(prometheus::Registry& r, const Family& f) {
  return &prometheus::BuildGauge().Name(std::string(f.name)).Help(std::string(f.help)).Register(r).Add({});
}

// Moves a counter up to an external monotonic total (never down).
void CounterTo(prometheus::Counter& c, uint64_t total) {
  const double delta = static_cast<double>(total) - c.Value();
  if (delta > 0) c.Increment(delta);
}

}  // namespace

ShardMetrics::ShardMetrics(prometheus::Registry& r)
    : hits_(&Counters(r, kListCacheHits).Add({})),
      misses_(&Counters(r, kListCacheMisses).Add({})),
      evictions_(&Counters(r, kListCacheEvictions).Add({})),
      id_memo_(&Counters(r, kExternalIdLookups).Add({{"source", "memo"}})),
      id_reads_(&Counters(r, kExternalIdLookups).Add({{"source", "rocksdb"}})),
      bytes_(Gauge(r, kListCacheBytes)),
      entries_(Gauge(r, kListCacheEntries)),
      capacity_(Gauge(r, kListCacheCapacity)) {}

void ShardMetrics::Set(const ListCacheStats& cache, const ExternalIdStats& ids) {
  CounterTo(*hits_, cache.hits);
  CounterTo(*misses_, cache.misses);
  CounterTo(*evictions_, cache.evictions);
  bytes_->Set(static_cast<double>(cache.bytes));
  entries_->Set(static_cast<double>(cache.entries));
  capacity_->Set(static_cast<double>(cache.capacity_bytes));
  CounterTo(*id_memo_, ids.memo_hits);
  CounterTo(*id_reads_, ids.reads);
}

}  // namespace search
