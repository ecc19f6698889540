// NodeMetrics: the node's families are registered once each with help, every processor's series
// exists from the start, the accessors move their own series, and a second NodeMetrics on the same
// registry shares them.
#include "node/node_metrics.hpp"

#include <gtest/gtest.h>

#include <string>

#include "../prometheus_text.hpp"
#include "metrics/metrics.hpp"

namespace search {
namespace {

using testing::Count;

TEST(NodeMetricsTest, FamiliesOnceWithHelpAndSeriesOfTheirOwn) {
  Metrics m("node");
  NodeMetrics a(m.registry());
  NodeMetrics b(m.registry());  // a second server in the process: the same series
  a.postings_decoded(Processor::kCpu).Increment(1000);
  b.postings_decoded(Processor::kCpu).Increment(24);
  a.slow_queries().Increment();
  a.queued().Set(3);
  b.unroutable_replies().Increment(2);
  a.queue_seconds(Processor::kGpu).Observe(0.0002);
  b.execution_seconds(Processor::kHybrid).Observe(0.5);
  const std::string t = m.SerializeText();
  for (const char* name :
       {"search_node_queue_seconds", "search_node_execution_seconds", "search_node_queued_requests",
        "search_node_unroutable_replies_total", "search_node_slow_queries_total", "search_postings_decoded_total",
        "search_blocks_decoded_total", "search_postings_scored_total", "search_gpu_fallbacks_total",
        "search_fallback_cpu_total", "search_gpu_batch_cpu_seconds_total", "search_node_fetches_total",
        "search_node_fetched_docs_total", "search_node_fetch_seconds", "search_node_io_thread_requests_total",
        "search_node_cpu_home_pinned", "search_node_cpu_home_polling",
        "search_node_cpu_home_moves_total"}) {
    EXPECT_EQ(Count(t, std::string("# HELP ") + name + " "), 1u) << name;
    EXPECT_EQ(Count(t, std::string("# TYPE ") + name + " "), 1u) << name;
  }
  EXPECT_EQ(testing::SeriesValue(t, R"(search_postings_decoded_total{processor="cpu"})"), 1024);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_postings_decoded_total{processor="gpu"})"), 0);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_blocks_decoded_total{processor="hybrid"})"), 0);
  EXPECT_EQ(testing::SeriesValue(t, "search_node_slow_queries_total"), 1);
  EXPECT_EQ(testing::SeriesValue(t, "search_node_queued_requests"), 3);
  EXPECT_EQ(testing::SeriesValue(t, "search_node_unroutable_replies_total"), 2);
  EXPECT_EQ(testing::SeriesValue(t, "search_node_cpu_home_pinned"), 0);
  EXPECT_EQ(testing::SeriesValue(t, "search_node_cpu_home_polling"), 0);
  a.SetCpuHome({.pinned = true, .polling = true, .moves_home = 4, .moves_out = 3});
  const std::string t2 = m.SerializeText();
  EXPECT_EQ(testing::SeriesValue(t2, "search_node_cpu_home_pinned"), 1);
  EXPECT_EQ(testing::SeriesValue(t2, "search_node_cpu_home_polling"), 1);
  EXPECT_EQ(testing::SeriesValue(t2, R"(search_node_cpu_home_moves_total{to="home"})"), 4);
  EXPECT_EQ(testing::SeriesValue(t2, R"(search_node_cpu_home_moves_total{to="out"})"), 3);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_node_queue_seconds_count{processor="gpu"})"), 1);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_node_queue_seconds_count{processor="cpu"})"), 0);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_node_execution_seconds_sum{processor="hybrid"})"), 0.5);
  a.fetches(true).Increment();
  b.fetches(false).Increment(2);
  a.fetched_docs().Increment(10);
  b.fetch_seconds().Observe(0.25);
  const std::string f = m.SerializeText();
  EXPECT_EQ(testing::SeriesValue(f, R"(search_node_fetches_total{status="ok"})"), 1);
  EXPECT_EQ(testing::SeriesValue(f, R"(search_node_fetches_total{status="error"})"), 2);
  EXPECT_EQ(testing::SeriesValue(f, "search_node_fetched_docs_total"), 10);
  EXPECT_EQ(testing::SeriesValue(f, "search_node_fetch_seconds_sum"), 0.25);
}

}  // namespace
}  // namespace search
