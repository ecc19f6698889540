// GpuCacheMetrics: the GPU list cache's Prometheus families (search_gpu_cache_*), registered on a
// registry passed in (the serving process's). Set copies a cache's counters into them, from a
// scrape hook (counters only move forward).
// Thread-safety: Set may run on any thread, one call at a time; the registry must outlive this.
#pragma once

#include "gpu_cache/gpu_list_cache.hpp"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
}  // namespace prometheus

namespace search::gpu {

class GpuCacheMetrics {
 public:
  // Registers the families (again on the same registry: the same series).
  explicit GpuCacheMetrics(prometheus::Registry& registry);

  void Set(const GpuCacheStats& s);

 private:
  prometheus::Counter *hits_, *misses_, *evictions_, *copied_, *failed_;
  prometheus::Gauge *bytes_, *entries_, *capacity_;
};

}  // namespace search::gpu
