// IntegratorMetrics: the integrator's Prometheus series (component "integrator"), fed through the
// IntegratorObserver hooks. The request families it shares with the node (metrics/families.hpp,
// registered by Metrics):
//   search_requests_total{mode,status}, search_request_duration_seconds{mode} (end to end),
//   search_inflight_requests, search_deadline_exceeded_total, search_bad_requests_total{reason};
// and its own, registered here on the Metrics' registry (integrator_metrics.cpp lists them):
//   search_shard_request_duration_seconds{shard}, search_shard_requests_total{shard,status},
//   search_shard_up{shard}, search_http_auth_failures_total{status} (401, 403),
//   search_http_connections_refused_total{reason} (max_connections, header_timeout), search_late_replies_total, search_replica_retries_total,
//   search_replica_hedges_total (the fan-out's events), search_http_tls_handshake_failures_total
//   (the HTTPS front's) and search_result_cache_* (refreshed at scrape time from the cache).
// The shard label is the node's shard id once it has answered a ping, its position before.
// Thread-safety: request hooks run on HTTP threads (prometheus-cpp metrics are thread-safe); the
// per-shard pointer table is touched only by the fan-out I/O thread (every FanoutListener hook).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <functional>
#include <vector>

#include "core/cpu_home.hpp"
#include "integrator/integrator.hpp"
#include "metrics/metrics.hpp"

namespace search {

class IntegratorMetrics : public IntegratorObserver {
 public:
  // REQUIRES: `metrics` outlives this object.
  IntegratorMetrics(Metrics* metrics, size_t num_shards);
  ~IntegratorMetrics() override;

  // Refreshes the result-cache series from `cache` at every scrape until Detach().
  void AttachCache(const ResultCache* cache);
  // Refreshes search_integrator_cpu_home_* from `homes` (one state a fan-out lane: Integrator::CpuHomes)
  // at every scrape until Detach(); its first call sizes the series.
  void AttachCpuHomes(std::function<std::vector<CpuHomeState>()> homes);
  void Detach();

  void OnRequest(std::optional<QueryMode> mode, int http_status, bool partial, bool timed_out,
                 double seconds) override;
  void OnInFlight(int delta) override;
  void OnShardReply(size_t index, ShardCallState state, double seconds) override;
  void OnLateReply(size_t index) override;
  void OnMalformedReply(size_t index, const Status& why) override;
  void OnShardUp(size_t index, bool up) override;
  void OnHealth(size_t index, const ShardHealthMsg& health) override;
  void OnRetry(size_t index) override;
  void OnHedge(size_t index) override;
  void OnHttpAuthFailure(int http_status) override;
  void OnHttpConnectionRefused(const char* reason) override;
  void OnTlsHandshakeFailure() override;
  void OnPhase(RequestPhase phase, double seconds) override;

 private:
  struct ShardSeries {
    uint32_t label = 0;
    prometheus::Histogram* duration = nullptr;
    prometheus::Counter* ok = nullptr;
    prometheus::Counter* failed = nullptr;
    prometheus::Counter* timed_out = nullptr;
    prometheus::Gauge* up = nullptr;
    bool is_up = false;
  };
  void Bind(size_t index, uint32_t label);  // I/O thread (or the constructor)

  Metrics* metrics_;
  prometheus::Histogram::BucketBoundaries buckets_;
  prometheus::Family<prometheus::Histogram>* shard_duration_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* shard_requests_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* shard_up_family_ = nullptr;
  prometheus::Counter *cache_hits_ = nullptr, *cache_misses_ = nullptr, *cache_evictions_ = nullptr;
  prometheus::Gauge *cache_bytes_ = nullptr, *cache_entries_ = nullptr, *cache_capacity_ = nullptr;
  std::vector<ShardSeries> shards_;
  prometheus::Counter* late_replies_ = nullptr;
  prometheus::Counter* retries_ = nullptr;
  prometheus::Counter* hedges_ = nullptr;
  prometheus::Counter *auth_401_ = nullptr, *auth_403_ = nullptr;
  prometheus::Counter *refused_max_connections_ = nullptr, *refused_header_timeout_ = nullptr;
  prometheus::Counter* tls_handshake_failures_ = nullptr;
  std::array<prometheus::Histogram*, kNumRequestPhases> phases_{};
  int hook_id_ = 0, homes_hook_id_ = 0;
  prometheus::Family<prometheus::Gauge>* home_pinned_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* home_polling_family_ = nullptr;
  prometheus::Family<prometheus::Counter>* home_moves_family_ = nullptr;
};

}  // namespace search
