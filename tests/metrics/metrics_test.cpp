// Metrics: every family registered once with help texts, typed accessors land on the right
// series, scrape hooks refresh values, and the exposer answers GET /metrics over HTTP.
#include "metrics/metrics.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "metrics/families.hpp"
#include "../prometheus_text.hpp"

namespace search {
namespace {

using testing::Count;

using testing::SeriesValue;

std::string HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (::send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return "";
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST(MetricsTest, EveryFamilyIsRegisteredOnceWithHelp) {
  Metrics m("node");
  const std::string text = m.SerializeText();
  for (const auto* f : {&families::kRequests, &families::kRequestDuration, &families::kInflight,
                        &families::kDeadlineExceeded, &families::kBadRequests, &families::kProcessStartTime}) {
    EXPECT_EQ(Count(text, "# HELP " + std::string(f->name) + " "), 1u) << f->name;
    EXPECT_EQ(Count(text, "# TYPE " + std::string(f->name) + " "), 1u) << f->name;
  }
  // Naming: counters end in _total, histograms are in seconds.
  EXPECT_NE(text.find("# TYPE search_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE search_request_duration_seconds histogram"), std::string::npos);
  EXPECT_GT(SeriesValue(text, "process_start_time_seconds"), 1.6e9);
}

TEST(MetricsTest, AccessorsIncrementTheirOwnSeries) {
  Metrics m("integrator");
  for (int i = 0; i < 3; ++i) m.requests(QueryMode::kAnd, RequestStatus::kOk).Increment();
  m.requests(QueryMode::kAndOr, ToRequestStatus(StatusCode::kDeadlineExceeded)).Increment();
  m.requests(QueryMode::kOr, RequestStatus::kPartial).Increment(2);
  m.request_duration(QueryMode::kOr).Observe(0.0002);  // 200 us
  m.request_duration(QueryMode::kOr).Observe(2.0);
  m.bad_requests(BadRequestReason::kUnsupportedVersion).Increment();
  m.inflight().Increment();
  const std::string t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_requests_total{component="integrator",mode="and",status="ok"})"), 3);
  EXPECT_EQ(SeriesValue(t, R"(search_requests_total{component="integrator",mode="andor",status="deadline_exceeded"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_requests_total{component="integrator",mode="or",status="partial"})"), 2);
  EXPECT_EQ(SeriesValue(t, R"(search_requests_total{component="integrator",mode="or",status="ok"})"), 0);
  EXPECT_EQ(SeriesValue(t, R"(search_request_duration_seconds_count{component="integrator",mode="or"})"), 2);
  EXPECT_DOUBLE_EQ(SeriesValue(t, R"(search_request_duration_seconds_sum{component="integrator",mode="or"})"), 2.0002);
  // 200 us falls in the 400 us bucket, not the 100 us one.
  EXPECT_EQ(SeriesValue(t, R"(search_request_duration_seconds_bucket{component="integrator",mode="or",le="0.0001"})"), 0);
  EXPECT_EQ(SeriesValue(t, R"(search_request_duration_seconds_bucket{component="integrator",mode="or",le="0.0004"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_request_duration_seconds_bucket{component="integrator",mode="or",le="+Inf"})"), 2);
  EXPECT_EQ(SeriesValue(t, R"(search_bad_requests_total{component="integrator",reason="unsupported_version"})"), 1);
  EXPECT_EQ(SeriesValue(t, R"(search_inflight_requests{component="integrator"})"), 1);
  // Nor are the node's (node/node_metrics.hpp, node/gpu_executor_metrics.hpp) or its scheduler's.
  EXPECT_EQ(t.find("search_gpu_fallbacks_total"), std::string::npos);
  EXPECT_EQ(t.find("search_node_"), std::string::npos);
  EXPECT_EQ(t.find("search_postings_decoded_total"), std::string::npos);
  EXPECT_EQ(t.find("search_sched_"), std::string::npos);
  // The integrator's own families are not the shared registry's.
  EXPECT_EQ(t.find("search_shard_up"), std::string::npos);
  EXPECT_EQ(t.find("search_result_cache"), std::string::npos);
}

TEST(MetricsTest, LatencyBucketsSpan50usTo5s) {
  auto b = LatencyBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 50e-6);
  EXPECT_GE(b.back(), 5.0);
  EXPECT_LT(b.back(), 10.0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_DOUBLE_EQ(b[i], 2 * b[i - 1]);
}

TEST(MetricsTest, ScrapeHooksRefreshSeriesUntilRemoved) {
  Metrics m("node");
  double queued = 3;
  int calls = 0;
  const int id = m.AddScrapeHook([&] {
    ++calls;
    m.inflight().Set(queued);
  });
  std::string t = m.SerializeText();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(SeriesValue(t, R"(search_inflight_requests{component="node"})"), 3);
  queued = 7;
  t = m.SerializeText();
  EXPECT_EQ(SeriesValue(t, R"(search_inflight_requests{component="node"})"), 7);
  m.RemoveScrapeHook(id);
  queued = 99;
  t = m.SerializeText();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(SeriesValue(t, R"(search_inflight_requests{component="node"})"), 7);
  // The shard reader's families are its own (index_store's ShardMetrics), not the registry's.
  EXPECT_EQ(t.find("search_list_cache"), std::string::npos);
}

TEST(MetricsTest, SetCounterToNeverGoesBackwards) {
  Metrics m("node");
  auto& c = m.deadline_exceeded();
  SetCounterTo(c, 5);
  EXPECT_EQ(c.Value(), 5);
  SetCounterTo(c, 3);
  EXPECT_EQ(c.Value(), 5);
  SetCounterTo(c, 8);
  EXPECT_EQ(c.Value(), 8);
}

TEST(MetricsTest, TwoInstancesDoNotShareSeries) {
  Metrics a("node"), b("node");
  a.deadline_exceeded().Increment();
  EXPECT_EQ(SeriesValue(b.SerializeText(), R"(search_deadline_exceeded_total{component="node"})"), 0);
  EXPECT_EQ(SeriesValue(a.SerializeText(), R"(search_deadline_exceeded_total{component="node"})"), 1);
}

TEST(MetricsTest, ExposerServesMetricsOverHttp) {
  Metrics m("node");
  ASSERT_TRUE(m.StartExposer("127.0.0.1:0").ok());
  const int port = m.exposer_port();
  ASSERT_GT(port, 0);
  m.requests(QueryMode::kOr, RequestStatus::kOk).Increment(7);
  int hook_calls = 0;
  const int id = m.AddScrapeHook([&] { ++hook_calls; });
  const std::string resp = HttpGet(port, "/metrics");
  m.RemoveScrapeHook(id);
  ASSERT_NE(resp.find("200 OK"), std::string::npos) << resp.substr(0, 200);
  const auto body = resp.substr(resp.find("\r\n\r\n") + 4);
  EXPECT_EQ(SeriesValue(body, R"(search_requests_total{component="node",mode="or",status="ok"})"), 7);
  EXPECT_EQ(hook_calls, 1);
  // A second exposer cannot take the same port; a second start on the same Metrics is refused.
  Metrics other("node");
  Status st = other.StartExposer("127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
  EXPECT_FALSE(m.StartExposer("127.0.0.1:0").ok());
  m.StopExposer();
  EXPECT_EQ(m.exposer_port(), 0);
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
}

}  // namespace
}  // namespace search
