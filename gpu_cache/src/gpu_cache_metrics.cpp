// The GPU list cache's metric families (see gpu_cache/gpu_cache_metrics.hpp).
#include "gpu_cache/gpu_cache_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <string>
#include <string_view>

namespace search::gpu {
namespace {

// The families: names (dashboards, alerts and tests refer to them) and help texts.
struct Family {
  std::string_view name, help;
};
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

prometheus::Counter* Counter(prometheus::Registry& r, const Family& f) {
  return &prometheus::BuildCounter().Name(std::string(f.name)).Help(std::string(f.help)).Register(r).Add({});
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

GpuCacheMetrics::GpuCacheMetrics(prometheus::Registry& r)
    : hits_(Counter(r, kHits)),
      misses_(Counter(r, kMisses)),
      evictions_(Counter(r, kEvictions)),
      copied_(Counter(r, kCopiedBytes)),
      failed_(Counter(r, kFailedAllocations)),
      bytes_(Gauge(r, kBytes)),
      entries_(Gauge(r, kEntries)),
      capacity_(Gauge(r, kCapacity)) {}

void GpuCacheMetrics::Set(const GpuCacheStats& s) {
  CounterTo(*hits_, s.hits);
  CounterTo(*misses_, s.misses);
  CounterTo(*evictions_, s.evictions);
  CounterTo(*copied_, s.bytes_copied);
  CounterTo(*failed_, s.failed_allocations);
  bytes_->Set(static_cast<double>(s.resident_bytes));
  entries_->Set(static_cast<double>(s.resident_lists));
  capacity_->Set(static_cast<double>(s.capacity_bytes));
}

}  // namespace search::gpu
