// GpuCacheMetrics (no GPU needed): the GPU list cache's families are registered once with help on
// the registry given, Set copies a cache's counters (counters never go back), and a second
// GpuCacheMetrics on the same registry shares the series.
#include "gpu_cache/gpu_cache_metrics.hpp"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <string>

#include "../prometheus_text.hpp"

namespace search::gpu {
namespace {

using search::testing::SeriesValue;

std::string Text(prometheus::Registry& r) { return prometheus::TextSerializer().Serialize(r.Collect()); }

using search::testing::Count;

TEST(GpuCacheMetricsTest, FamiliesAreRegisteredOnceAndFollowTheCache) {
  prometheus::Registry r;
  GpuCacheMetrics m(r);
  GpuCacheMetrics again(r);
  GpuCacheStats s{.hits = 7, .misses = 2, .evictions = 1, .bytes_copied = 1 << 20, .resident_bytes = 4096,
                  .resident_lists = 5, .capacity_bytes = 1 << 30, .norm_bytes = 64, .failed_allocations = 3};
  m.Set(s);
  std::string t = Text(r);
  for (const char* name : {"search_gpu_cache_hits_total", "search_gpu_cache_misses_total",
                           "search_gpu_cache_evictions_total", "search_gpu_cache_copied_bytes_total",
                           "search_gpu_cache_failed_allocations_total", "search_gpu_cache_bytes",
                           "search_gpu_cache_entries", "search_gpu_cache_capacity_bytes"}) {
    EXPECT_EQ(Count(t, "# HELP " + std::string(name) + " "), 1u) << name;
    EXPECT_EQ(Count(t, "# TYPE " + std::string(name) + " "), 1u) << name;
  }
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_hits_total"), 7);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_misses_total"), 2);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_evictions_total"), 1);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_copied_bytes_total"), 1 << 20);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_failed_allocations_total"), 3);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_bytes"), 4096);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_entries"), 5);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_capacity_bytes"), 1 << 30);
  s.hits = 9;
  s.misses = 1;  // went back: the counter stays
  s.resident_bytes = 100;
  again.Set(s);
  t = Text(r);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_hits_total"), 9);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_misses_total"), 2);
  EXPECT_EQ(SeriesValue(t, "search_gpu_cache_bytes"), 100);
}

}  // namespace
}  // namespace search::gpu
