// ShardMetrics: the list cache's and the external-id lookups' families are registered once with
// help on the registry given, Set copies a reader's counters (counters never go back), and a
// second ShardMetrics on the same registry shares the series.
#include "index_store/shard_metrics.hpp"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <string>

#include "../prometheus_text.hpp"

namespace search {
namespace {

using testing::SeriesValue;

std::string Text(prometheus::Registry& r) { return prometheus::TextSerializer().Serialize(r.Collect()); }

using testing::Count;

TEST(ShardMetricsTest, FamiliesAreRegisteredOnceAndFollowTheReader) {
  prometheus::Registry r;
  ShardMetrics m(r);
  ShardMetrics again(r);  // same registry: the same series
  ListCacheStats s{.hits = 10, .misses = 4, .inserts = 4, .evictions = 1, .bytes = 4096, .entries = 3,
                   .capacity_bytes = 1 << 20};
  m.Set(s, ExternalIdStats{.memo_hits = 5, .reads = 2});
  std::string t = Text(r);
  for (const char* name : {"search_list_cache_hits_total", "search_list_cache_misses_total",
                           "search_list_cache_evictions_total", "search_list_cache_bytes", "search_list_cache_entries",
                           "search_list_cache_capacity_bytes", "search_external_id_lookups_total"}) {
    EXPECT_EQ(Count(t, "# HELP " + std::string(name) + " "), 1u) << name;
    EXPECT_EQ(Count(t, "# TYPE " + std::string(name) + " "), 1u) << name;
  }
  EXPECT_NE(t.find("# TYPE search_list_cache_hits_total counter"), std::string::npos);
  EXPECT_NE(t.find("# TYPE search_list_cache_bytes gauge"), std::string::npos);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_hits_total"), 10);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_misses_total"), 4);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_evictions_total"), 1);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_bytes"), 4096);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_entries"), 3);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_capacity_bytes"), 1 << 20);
  EXPECT_EQ(SeriesValue(t, R"(search_external_id_lookups_total{source="memo"})"), 5);
  EXPECT_EQ(SeriesValue(t, R"(search_external_id_lookups_total{source="rocksdb"})"), 2);
  // Later totals: counters follow, gauges take the value; a counter that went back stays put.
  s.hits = 25;
  s.misses = 3;
  s.bytes = 100;
  again.Set(s, ExternalIdStats{.memo_hits = 6, .reads = 2});
  t = Text(r);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_hits_total"), 25);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_misses_total"), 4);
  EXPECT_EQ(SeriesValue(t, "search_list_cache_bytes"), 100);
  EXPECT_EQ(SeriesValue(t, R"(search_external_id_lookups_total{source="memo"})"), 6);
}

}  // namespace
}  // namespace search
