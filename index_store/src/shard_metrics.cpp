// The shard reader's metric families (see index_store/shard_metrics.hpp).
#include "index_store/shard_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <string>
#include <string_view>

#include "metrics/families.hpp"

namespace search {
namespace {

using families::Family;  // names (dashboards, alerts and tests refer to them) and help texts
constexpr Family kListCacheHits{"search_list_cache_hits_total", "Posting-list cache hits."};
constexpr Family kListCacheMisses{"search_list_cache_misses_total", "Posting-list cache misses."};
constexpr Family kListCacheEvictions{"search_list_cache_evictions_total", "Posting-list cache evictions."};
constexpr Family kListCacheBytes{"search_list_cache_bytes", "Bytes held by the posting-list cache."};
constexpr Family kListCacheEntries{"search_list_cache_entries", "Lists held by the posting-list cache."};
constexpr Family kListCacheCapacity{"search_list_cache_capacity_bytes", "Byte budget of the posting-list cache."};
// Labels: source (memo: remembered; rocksdb: read).
constexpr Family kExternalIdLookups{"search_external_id_lookups_total",
                                    "External ids of hits looked up, by source: memo (remembered) or rocksdb (read)."};

}  // namespace

ShardMetrics::ShardMetrics(prometheus::Registry& r)
    : hits_(&CounterFamily(r, kListCacheHits).Add({})),
      misses_(&CounterFamily(r, kListCacheMisses).Add({})),
      evictions_(&CounterFamily(r, kListCacheEvictions).Add({})),
      id_memo_(&CounterFamily(r, kExternalIdLookups).Add({{"source", "memo"}})),
      id_reads_(&CounterFamily(r, kExternalIdLookups).Add({{"source", "rocksdb"}})),
      bytes_(&GaugeFamily(r, kListCacheBytes).Add({})),
      entries_(&GaugeFamily(r, kListCacheEntries).Add({})),
      capacity_(&GaugeFamily(r, kListCacheCapacity).Add({})) {}

void ShardMetrics::Set(const ListCacheStats& cache, const ExternalIdStats& ids) {
  SetCounterTo(*hits_, static_cast<double>(cache.hits));
  SetCounterTo(*misses_, static_cast<double>(cache.misses));
  SetCounterTo(*evictions_, static_cast<double>(cache.evictions));
  bytes_->Set(static_cast<double>(cache.bytes));
  entries_->Set(static_cast<double>(cache.entries));
  capacity_->Set(static_cast<double>(cache.capacity_bytes));
  SetCounterTo(*id_memo_, static_cast<double>(ids.memo_hits));
  SetCounterTo(*id_reads_, static_cast<double>(ids.reads));
}

}  // namespace search
