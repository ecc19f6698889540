// The GPU list cache's metric families (see gpu_cache/gpu_cache_metrics.hpp).
#include "gpu_cache/gpu_cache_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <string>
#include <string_view>

#include "metrics/families.hpp"

namespace search::gpu {
namespace {

using families::Family;  // names (dashboards, alerts and tests refer to them) and help texts
constexpr Family kHits{"search_gpu_cache_hits_total", "GPU posting-list cache hits."};
constexpr Family kMisses{"search_gpu_cache_misses_total", "GPU posting-list cache misses."};
constexpr Family kEvictions{"search_gpu_cache_evictions_total", "GPU posting-list cache evictions."};
constexpr Family kCopiedBytes{"search_gpu_cache_copied_bytes_total",
                              "Bytes of posting lists copied from host to GPU memory."};
constexpr Family kFailedAllocations{"search_gpu_cache_failed_allocations_total",
                                    "GPU cache misses that could not get device memory (the query ran on the CPU)."};
constexpr Family kBytes{"search_gpu_cache_bytes", "Device bytes held by the GPU posting-list cache."};
constexpr Family kEntries{"search_gpu_cache_entries", "Lists held by the GPU posting-list cache."};
constexpr Family kCapacity{"search_gpu_cache_capacity_bytes", "Device byte budget of the GPU posting-list cache."};

}  // namespace

GpuCacheMetrics::GpuCacheMetrics(prometheus::Registry& r)
    : hits_(&CounterFamily(r, kHits).Add({})),
      misses_(&CounterFamily(r, kMisses).Add({})),
      evictions_(&CounterFamily(r, kEvictions).Add({})),
      copied_(&CounterFamily(r, kCopiedBytes).Add({})),
      failed_(&CounterFamily(r, kFailedAllocations).Add({})),
      bytes_(&GaugeFamily(r, kBytes).Add({})),
      entries_(&GaugeFamily(r, kEntries).Add({})),
      capacity_(&GaugeFamily(r, kCapacity).Add({})) {}

void GpuCacheMetrics::Set(const GpuCacheStats& s) {
  SetCounterTo(*hits_, static_cast<double>(s.hits));
  SetCounterTo(*misses_, static_cast<double>(s.misses));
  SetCounterTo(*evictions_, static_cast<double>(s.evictions));
  SetCounterTo(*copied_, static_cast<double>(s.bytes_copied));
  SetCounterTo(*failed_, static_cast<double>(s.failed_allocations));
  bytes_->Set(static_cast<double>(s.resident_bytes));
  entries_->Set(static_cast<double>(s.resident_lists));
  capacity_->Set(static_cast<double>(s.capacity_bytes));
}

}  // namespace search::gpu
