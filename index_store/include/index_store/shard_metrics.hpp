// ShardMetrics: the shard reader's Prometheus families, registered on a registry passed in (the
// serving process's): its main-memory list cache (search_list_cache_*) and where hits' external
// ids came from (search_external_id_lookups_total{source="memo"|"rocksdb"}). Set copies a
// reader's counters into them, from a scrape hook (counters only move forward).
// Thread-safety: Set may run on any thread, one call at a time; the registry must outlive this.
#pragma once

#include "index_store/list_cache.hpp"
#include "index_store/shard_store.hpp"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
}  // namespace prometheus

namespace search {

class ShardMetrics {
 public:
  // Registers the families (again on the same registry: the same series).
  explicit ShardMetrics(prometheus::Registry& registry);

  void Set(const ListCacheStats& cache, const ExternalIdStats& ids);

 private:
  prometheus::Counter *hits_, *misses_, *evictions_, *id_memo_, *id_reads_;
  prometheus::Gauge *bytes_, *entries_, *capacity_;
};

}  // namespace search
