// GpuExecutorMetrics: the GPU executor's families are registered once each with help, a fallback
// counts in its reason's series and in the total, batch times follow the executor's running
// totals and never go back, and the labels are the documented ones.
#include "node/gpu_executor_metrics.hpp"

#include <gtest/gtest.h>

#include <string>

#include "../prometheus_text.hpp"
#include "metrics/metrics.hpp"

namespace search {
namespace {

using testing::Count;

TEST(GpuExecutorMetricsTest, FallbacksCountByReasonAndInAll) {
  Metrics m("node");
  GpuExecutorMetrics g(m.registry());
  GpuExecutorMetrics again(m.registry());  // the same families and series
  g.CountFallback(GpuFallbackReason::kOutOfMemory);
  again.CountFallback(GpuFallbackReason::kCudaError);
  g.CountFallback(GpuFallbackReason::kCudaError);
  const std::string t = m.SerializeText();
  for (const char* name : {"search_fallback_cpu_total", "search_gpu_fallbacks_total",
                           "search_gpu_batch_cpu_seconds_total", "search_gpu_batch_seconds_total"}) {
    EXPECT_EQ(Count(t, std::string("# HELP ") + name + " "), 1u) << name;
    EXPECT_EQ(Count(t, std::string("# TYPE ") + name + " counter"), 1u) << name;
  }
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_fallbacks_total{reason="out_of_memory"})"), 1);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_fallbacks_total{reason="cuda_error"})"), 2);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_fallbacks_total{reason="unsupported"})"), 0);
  EXPECT_EQ(testing::SeriesValue(t, "search_fallback_cpu_total"), 3);
  EXPECT_EQ(GpuFallbackReasonLabel(GpuFallbackReason::kCorruption), "corruption");
  EXPECT_EQ(GpuFallbackReasonLabel(static_cast<GpuFallbackReason>(99)), "other");
}

TEST(GpuExecutorMetricsTest, UnsupportedShapesCountByReason) {
  Metrics m("node");
  GpuExecutorMetrics g(m.registry());
  GpuExecutorMetrics again(m.registry());
  g.CountUnsupported(GpuUnsupportedReason::kPhrase);
  again.CountUnsupported(GpuUnsupportedReason::kPhrase);
  g.CountUnsupported(GpuUnsupportedReason::kPhrase);
  const std::string t = m.SerializeText();
  EXPECT_EQ(Count(t, "# HELP search_node_gpu_unsupported_total "), 1u);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_node_gpu_unsupported_total{reason="phrase"})"), 3);
  // The GPU engine runs trees and counts: phrase is the only reason (one series).
  EXPECT_EQ(Count(t, "search_node_gpu_unsupported_total{reason="), 1u);
  EXPECT_EQ(testing::SeriesValue(t, "search_fallback_cpu_total"), 0);  // not a GPU failure
  EXPECT_EQ(GpuUnsupportedReasonLabel(GpuUnsupportedReason::kPhrase), "phrase");
}

TEST(GpuExecutorMetricsTest, BatchTimesFollowTheExecutorsTotals) {
  Metrics m("node");
  GpuExecutorMetrics g(m.registry());
  g.SetBatchTimes({0.5, 1.25, 2.0, 0.25}, {1, 2, 8, 0.5});
  g.SetBatchTimes({0.75, 1.25, 3.0, 0.125}, {1, 2, 9, 1});  // a part that went back is kept, never lowered
  const std::string t = m.SerializeText();
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_batch_seconds_total{part="engine"})"), 9.0);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_batch_seconds_total{part="finish"})"), 1.0);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_batch_cpu_seconds_total{part="prepare"})"), 0.75);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_batch_cpu_seconds_total{part="acquire"})"), 1.25);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_batch_cpu_seconds_total{part="engine"})"), 3.0);
  EXPECT_EQ(testing::SeriesValue(t, R"(search_gpu_batch_cpu_seconds_total{part="finish"})"), 0.25);
  EXPECT_EQ(GpuBatchPartLabel(GpuBatchPart::kAcquire), "acquire");
}

}  // namespace
}  // namespace search
