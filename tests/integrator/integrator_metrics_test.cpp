// IntegratorMetrics: the integrator registers its own families (per shard, the fan-out's events,
// the result cache) on the process's registry, once each with help, and its hooks land on the
// right series; a shard's label follows its reported id.
#include "integrator/integrator_metrics.hpp"

#include <gtest/gtest.h>

#include <string>

#include "../prometheus_text.hpp"

namespace search {
namespace {

using testing::SeriesValue;

using testing::Count;

TEST(IntegratorMetricsTest, OwnFamiliesAreRegisteredOnceWithHelp) {
  Metrics m("integrator");
  IntegratorMetrics im(&m, 2);
  const std::string t = m.SerializeText();
  for (const char* name :
       {"search_shard_request_duration_seconds", "search_shard_requests_total", "search_shard_up",
        "search_late_replies_total", "search_replica_retries_total", "search_replica_hedges_total",
        "search_result_cache_hits_total", "search_result_cache_misses_total", "search_result_cache_evictions_total",
        "search_result_cache_bytes", "search_result_cache_entries", "search_result_cache_capacity_bytes"}) {
    EXPECT_EQ(Count(t, "# HELP " + std::string(name) + " "), 1u) << name;
    EXPECT_EQ(Count(t, "# TYPE " + std::string(name) + " "), 1u) << name;
  }
  EXPECT_NE(t.find("# TYPE search_shard_request_duration_seconds histogram"), std::string::npos);
  // The shared request families are still there, from Metrics.
  EXPECT_EQ(Count(t, "# TYPE search_requests_total counter"), 1u);
}

// The HTTP front's refusals: API-key failures by status, closed connections by reason, each series
// there (at 0) before the first event.
TEST(IntegratorMetricsTest, HttpRefusalsLandOnTheirSeries) {
  Metrics m("integrator");
  IntegratorMetrics im(&m, 1);
  std::string t = m.SerializeText();
  EXPECT_EQ(Count(t, "# TYPE search_http_auth_failures_total counter"), 1u);
  EXPECT_EQ(Count(t, "# TYPE search_http_connections_refused_total counter"), 1u);
  EXPECT_EQ(SeriesValue(t, R"(search_http_auth_failures_total{component="integrator",status="401"})"), 0);
  EXPECT_EQ(SeriesValue(t, R"(search_http_connections_refused_total{component="integrator",reason="header_timeout"})"), 0);
  im.OnHttpAuthFailure(401);
  im.OnHttpAuthFailure(403);
  im.OnHttpAuthFailure(403);
  im.OnHttpConnectionRefused("max_connections");
  im.OnHttpConnectionRefused("header_timeout");
  im.OnHttpConnectionRefused("header_timeout");
  im.OnHttpConnectionRefused("header_timeout");
  t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_http_auth_failures_total{component="integrator",status="401"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_http_auth_failures_total{component="integrator",status="403"})"), 2);
  EXPECT_EQ(SeriesValue(t, R"(search_http_connections_refused_total{component="integrator",reason="max_connections"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_http_connections_refused_total{component="integrator",reason="header_timeout"})"), 3);
}

TEST(IntegratorMetricsTest, PhasesLandOnTheirSeries) {
  Metrics m("integrator");
  IntegratorMetrics im(&m, 1);
  im.OnPhase(RequestPhase::kParse, 0.00001);
  im.OnPhase(RequestPhase::kTransport, 0.0002);
  im.OnPhase(RequestPhase::kTransport, 0.0004);
  const std::string t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_request_phase_seconds_count{component="integrator",phase="parse"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_request_phase_seconds_count{component="integrator",phase="transport"})"), 2);
  EXPECT_NEAR(SeriesValue(t, R"(search_request_phase_seconds_sum{component="integrator",phase="transport"})"), 0.0006,
              1e-9);
  EXPECT_EQ(SeriesValue(t, R"(search_request_phase_seconds_count{component="integrator",phase="engine"})"), 0);
  for (int p = 0; p < kNumRequestPhases; ++p)
    EXPECT_NE(t.find(std::string("phase=\"") + RequestPhaseName(static_cast<RequestPhase>(p)) + "\""), std::string::npos);
}

TEST(IntegratorMetricsTest, HooksLandOnTheirSeries) {
  Metrics m("integrator");
  IntegratorMetrics im(&m, 3);
  im.OnShardReply(2, ShardCallState::kOk, 0.001);
  im.OnShardReply(2, ShardCallState::kFailed, 0.5);
  im.OnShardReply(2, ShardCallState::kTimedOut, 0.5);
  im.OnShardReply(2, ShardCallState::kTimedOut, 0.5);
  im.OnShardUp(2, true);
  im.OnLateReply(1);
  im.OnRetry(0);
  im.OnHedge(0);
  im.OnHedge(1);
  im.OnRequest(QueryMode::kOr, 200, /*partial=*/true, /*timed_out=*/true, 0.0002);
  std::string t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_shard_request_duration_seconds_count{shard="2"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_shard_requests_total{shard="2",status="ok"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_shard_requests_total{shard="2",status="unavailable"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_shard_requests_total{shard="2",status="deadline_exceeded"})"), 2);
  EXPECT_EQ(SeriesValue(t, R"(search_shard_up{shard="2"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_shard_up{shard="1"})"), 0);
  EXPECT_EQ(SeriesValue(t, R"(search_late_replies_total{component="integrator"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_replica_retries_total{component="integrator"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_replica_hedges_total{component="integrator"})"), 2);
  EXPECT_EQ(SeriesValue(t, R"(search_requests_total{component="integrator",mode="or",status="partial"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_deadline_exceeded_total{component="integrator"})"), 1);
  // Position 2 reports shard id 7: its series move to that label, the old one reads down.
  ShardHealthMsg h;
  h.shard_id = 7;
  im.OnHealth(2, h);
  im.OnShardReply(2, ShardCallState::kOk, 0.001);
  t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_shard_requests_total{shard="7",status="ok"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_shard_up{shard="7"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_shard_up{shard="2"})"), 0);
}

TEST(IntegratorMetricsTest, ResultCacheSeriesFollowTheCacheAtScrapeTime) {
  Metrics m("integrator");
  ResultCache cache(1 << 20);
  IntegratorMetrics im(&m, 1);
  im.AttachCache(&cache);
  EXPECT_FALSE(cache.Lookup("a b").has_value());
  ASSERT_TRUE(cache.Insert("a b", {MergedHit{1, 2.0f, 0, "d1"}}));
  EXPECT_TRUE(cache.Lookup("a b").has_value());
  std::string t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, "search_result_cache_hits_total"), 1);
  EXPECT_EQ(SeriesValue(t, "search_result_cache_misses_total"), 1);
  EXPECT_EQ(SeriesValue(t, "search_result_cache_entries"), 1);
  EXPECT_GT(SeriesValue(t, "search_result_cache_bytes"), 0);
  EXPECT_EQ(SeriesValue(t, "search_result_cache_capacity_bytes"), 1 << 20);
  // Detached: the series keep their last values.
  im.Detach();
  EXPECT_TRUE(cache.Lookup("a b").has_value());
  t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, "search_result_cache_hits_total"), 1);
}

TEST(IntegratorMetricsTest, CpuHomeSeriesFollowTheLanesAtScrapeTime) {
  Metrics m("integrator");
  IntegratorMetrics im(&m, 1);
  std::vector<CpuHomeState> lanes = {{.pinned = true, .polling = true, .moves_home = 3, .moves_out = 2},
                                     {.pinned = false, .polling = false, .moves_home = 1, .moves_out = 1}};
  im.AttachCpuHomes([&] { return lanes; });
  std::string t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_pinned{lane="0"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_pinned{lane="1"})"), 0);
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_polling{lane="0"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_polling{lane="1"})"), 0);
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_moves_total{lane="0",to="home"})"), 3);
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_moves_total{lane="0",to="out"})"), 2);
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_moves_total{lane="1",to="home"})"), 1);
  lanes[1] = {.pinned = true, .polling = false, .moves_home = 2, .moves_out = 1};
  t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_pinned{lane="1"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_polling{lane="1"})"), 0);
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_moves_total{lane="1",to="home"})"), 2);
  im.Detach();  // the function is not called again
  lanes.clear();
  t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_integrator_cpu_home_pinned{lane="1"})"), 1);
}

}  // namespace
}  // namespace search
