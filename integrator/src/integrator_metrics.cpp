#include "integrator/integrator_metrics.hpp"

#include <string>
#include <string_view>

#include "metrics/families.hpp"

namespace search {
namespace {

// The integrator's own metric families (names, help texts; labels in the comments). Dashboards,
// alerts and tests refer to these names.
using families::Family;
// Per shard. Labels: shard.
constexpr Family kShardRequestDuration{"search_shard_request_duration_seconds",
                                       "Integrator-observed round trip to one shard node in seconds."};
// Labels: shard, status.
constexpr Family kShardRequests{"search_shard_requests_total",
                                "Requests sent by the integrator to a shard node, by outcome."};
constexpr Family kShardUp{"search_shard_up", "1 when the shard node answers health checks, else 0."};
// The fan-out's events. Labels: component.
constexpr Family kLateReplies{"search_late_replies_total",
                              "Shard replies the integrator dropped because their request had already completed."};
constexpr Family kReplicaRetries{"search_replica_retries_total",
                                 "Shard requests resent to another replica after the first failed."};
constexpr Family kReplicaHedges{
    "search_replica_hedges_total", "Shard requests also sent to another replica after the first stayed silent past its p95."};
// The HTTP front. Labels: component.
constexpr Family kTlsHandshakeFailures{
    "search_http_tls_handshake_failures_total",
    "HTTPS connections closed before their TLS handshake completed (failed, stalled past the I/O timeout, or cut "
    "short by the client)."};
// The HTTP front's refusals. Labels: component, status (401, 403).
constexpr Family kHttpAuthFailures{"search_http_auth_failures_total",
                                   "HTTP requests refused for their API key: 401 missing or malformed, 403 wrong."};
// Labels: component, reason (max_connections, header_timeout).
constexpr Family kHttpConnectionsRefused{
    "search_http_connections_refused_total",
    "HTTP connections closed by the front: over the connection limit when accepted, or headers not in within the "
    "header timeout."};
// A search's phases (RequestPhase). Labels: component, phase.
constexpr Family kRequestPhase{"search_request_phase_seconds",
                               "Where a search's time goes in the integrator, by phase: parse, to_lane (hand-off to a "
                               "fan-out lane), node_queue, engine and transport (of the last shard's round trip), "
                               "to_loop (hand-back to the HTTP loop), fetch (the documents' round), answer (merge, JSON, write)."};
// The result cache.
constexpr Family kResultCacheHits{"search_result_cache_hits_total", "Result cache hits."};
constexpr Family kResultCacheMisses{"search_result_cache_misses_total", "Result cache misses."};
constexpr Family kResultCacheEvictions{"search_result_cache_evictions_total", "Result cache evictions."};
constexpr Family kResultCacheBytes{"search_result_cache_bytes", "Bytes held by the result cache."};
constexpr Family kResultCacheEntries{"search_result_cache_entries", "Entries in the result cache."};
constexpr Family kResultCacheCapacity{"search_result_cache_capacity_bytes", "Byte budget of the result cache."};
constexpr Family kCpuHomePinned{"search_integrator_cpu_home_pinned",
                                "1 while a fan-out lane's I/O thread, its ZeroMQ I/O thread and the HTTP loops that "
                                "feed it share their home CPU (little load), 0 while they may run on every CPU, by lane."};
constexpr Family kCpuHomePolling{"search_integrator_cpu_home_polling",
                                 "1 while an idle-priority thread spins on a lane's home CPU (at home and serving: it "
                                 "keeps that CPU from halting between requests), by lane."};
constexpr Family kCpuHomeMoves{"search_integrator_cpu_home_moves_total",
                               "Moves of a lane's threads to their home CPU (to=home: under a quarter of a CPU busy) "
                               "and back to every CPU (to=out: over half), by lane."};

}  // namespace

IntegratorMetrics::IntegratorMetrics(Metrics* metrics, size_t num_shards)
    : metrics_(metrics), buckets_(LatencyBuckets()), shards_(num_shards) {
  prometheus::Registry& r = metrics_->registry();
  const prometheus::Labels component{{"component", metrics_->component()}};
  late_replies_ = &CounterFamily(r, kLateReplies).Add(component);
  retries_ = &CounterFamily(r, kReplicaRetries).Add(component);
  hedges_ = &CounterFamily(r, kReplicaHedges).Add(component);
  auto& auth = CounterFamily(r, kHttpAuthFailures);
  auth_401_ = &auth.Add({{"component", metrics_->component()}, {"status", "401"}});
  auth_403_ = &auth.Add({{"component", metrics_->component()}, {"status", "403"}});
  auto& refused = CounterFamily(r, kHttpConnectionsRefused);
  refused_max_connections_ = &refused.Add({{"component", metrics_->component()}, {"reason", "max_connections"}});
  refused_header_timeout_ = &refused.Add({{"component", metrics_->component()}, {"reason", "header_timeout"}});
  tls_handshake_failures_ = &CounterFamily(r, kTlsHandshakeFailures).Add(component);
  auto& phases = HistogramFamily(r, kRequestPhase);
  // Microseconds to milliseconds: the phases of a fast path are tens of microseconds.
  const prometheus::Histogram::BucketBoundaries phase_buckets{5e-6,   1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
                                                              5e-4,   1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
                                                              5e-2,   0.1,  0.25,   0.5};
  for (int p = 0; p < kNumRequestPhases; ++p)
    phases_[p] = &phases.Add(
        {{"component", metrics_->component()}, {"phase", RequestPhaseName(static_cast<RequestPhase>(p))}},
        phase_buckets);
  shard_duration_family_ = &HistogramFamily(r, kShardRequestDuration);
  shard_requests_family_ = &CounterFamily(r, kShardRequests);
  shard_up_family_ = &GaugeFamily(r, kShardUp);
  cache_hits_ = &CounterFamily(r, kResultCacheHits).Add({});
  cache_misses_ = &CounterFamily(r, kResultCacheMisses).Add({});
  cache_evictions_ = &CounterFamily(r, kResultCacheEvictions).Add({});
  cache_bytes_ = &GaugeFamily(r, kResultCacheBytes).Add({});
  cache_entries_ = &GaugeFamily(r, kResultCacheEntries).Add({});
  cache_capacity_ = &GaugeFamily(r, kResultCacheCapacity).Add({});
  home_pinned_family_ = &GaugeFamily(r, kCpuHomePinned);
  home_polling_family_ = &GaugeFamily(r, kCpuHomePolling);
  home_moves_family_ = &CounterFamily(r, kCpuHomeMoves);
  for (size_t i = 0; i < num_shards; ++i) Bind(i, static_cast<uint32_t>(i));
}

void IntegratorMetrics::OnRetry(size_t) { retries_->Increment(); }
void IntegratorMetrics::OnHedge(size_t) { hedges_->Increment(); }
void IntegratorMetrics::OnHttpAuthFailure(int http_status) {
  (http_status == 401 ? auth_401_ : auth_403_)->Increment();
}
void IntegratorMetrics::OnHttpConnectionRefused(const char* reason) {
  (std::string_view(reason) == "max_connections" ? refused_max_connections_ : refused_header_timeout_)->Increment();
}
void IntegratorMetrics::OnTlsHandshakeFailure() { tls_handshake_failures_->Increment(); }
void IntegratorMetrics::OnPhase(RequestPhase phase, double seconds) { phases_[static_cast<int>(phase)]->Observe(seconds); }

IntegratorMetrics::~IntegratorMetrics() { Detach(); }

void IntegratorMetrics::Bind(size_t index, uint32_t label) {
  ShardSeries& s = shards_[index];
  const bool rebind = s.up != nullptr;
  if (rebind && s.label == label) return;
  if (rebind) s.up->Set(0);  // the old label no longer names a live shard
  s.label = label;
  const std::string shard = std::to_string(label);
  auto requests = [&](RequestStatus status) {
    return &shard_requests_family_->Add({{"shard", shard}, {"status", std::string(RequestStatusLabel(status))}});
  };
  s.duration = &shard_duration_family_->Add({{"shard", shard}}, buckets_);
  s.ok = requests(RequestStatus::kOk);
  s.failed = requests(RequestStatus::kUnavailable);
  s.timed_out = requests(RequestStatus::kDeadlineExceeded);
  s.up = &shard_up_family_->Add({{"shard", shard}});
  s.up->Set(s.is_up ? 1 : 0);
}

void IntegratorMetrics::AttachCache(const ResultCache* cache) {
  Detach();
  hook_id_ = metrics_->AddScrapeHook([this, cache] {
    const ResultCacheStats s = cache->stats();
    SetCounterTo(*cache_hits_, static_cast<double>(s.hits));
    SetCounterTo(*cache_misses_, static_cast<double>(s.misses));
    SetCounterTo(*cache_evictions_, static_cast<double>(s.evictions));
    cache_bytes_->Set(static_cast<double>(s.bytes));
    cache_entries_->Set(static_cast<double>(s.entries));
    cache_capacity_->Set(static_cast<double>(s.capacity_bytes));
  });
}

void IntegratorMetrics::AttachCpuHomes(std::function<std::vector<CpuHomeState>()> homes) {
  if (homes_hook_id_) metrics_->RemoveScrapeHook(homes_hook_id_);
  struct Lane {
    prometheus::Gauge *pinned, *polling;
    prometheus::Counter *home, *out;
  };
  std::vector<Lane> lanes;
  for (size_t i = 0; i < homes().size(); ++i) {
    const std::string lane = std::to_string(i);
    lanes.push_back({&home_pinned_family_->Add({{"lane", lane}}), &home_polling_family_->Add({{"lane", lane}}),
                     &home_moves_family_->Add({{"lane", lane}, {"to", "home"}}),
                     &home_moves_family_->Add({{"lane", lane}, {"to", "out"}})});
  }
  homes_hook_id_ = metrics_->AddScrapeHook([homes = std::move(homes), lanes = std::move(lanes)] {
    const std::vector<CpuHomeState> now = homes();
    for (size_t i = 0; i < now.size() && i < lanes.size(); ++i) {
      lanes[i].pinned->Set(now[i].pinned ? 1 : 0);
      lanes[i].polling->Set(now[i].polling ? 1 : 0);
      SetCounterTo(*lanes[i].home, static_cast<double>(now[i].moves_home));
      SetCounterTo(*lanes[i].out, static_cast<double>(now[i].moves_out));
    }
  });
}

void IntegratorMetrics::Detach() {
  if (hook_id_) metrics_->RemoveScrapeHook(hook_id_);
  hook_id_ = 0;
  if (homes_hook_id_) metrics_->RemoveScrapeHook(homes_hook_id_);
  homes_hook_id_ = 0;
}

void IntegratorMetrics::OnRequest(std::optional<QueryMode> mode, int http_status, bool partial, bool timed_out,
                                  double seconds) {
  if (http_status == 400) metrics_->bad_requests(BadRequestReason::kHttpBadParameter).Increment();
  if (timed_out) metrics_->deadline_exceeded().Increment();
  if (!mode) return;  // the mode label is bounded to and|or|andor: an unparsed request has none
  RequestStatus status = RequestStatus::kInternal;
  switch (http_status) {
    case 200: status = partial ? RequestStatus::kPartial : RequestStatus::kOk; break;
    case 400: status = RequestStatus::kInvalidArgument; break;
    case 429: status = RequestStatus::kResourceExhausted; break;
    case 503: status = RequestStatus::kUnavailable; break;
    default: break;
  }
  metrics_->requests(*mode, status).Increment();
  metrics_->request_duration(*mode).Observe(seconds);
}

void IntegratorMetrics::OnInFlight(int delta) { metrics_->inflight().Increment(delta); }

void IntegratorMetrics::OnShardReply(size_t index, ShardCallState state, double seconds) {
  ShardSeries& s = shards_[index];
  switch (state) {
    case ShardCallState::kOk:
      s.ok->Increment();
      s.duration->Observe(seconds);
      break;
    case ShardCallState::kTimedOut: s.timed_out->Increment(); break;
    default: s.failed->Increment(); break;
  }
}

void IntegratorMetrics::OnLateReply(size_t) { late_replies_->Increment(); }

void IntegratorMetrics::OnMalformedReply(size_t, const Status&) {
  metrics_->bad_requests(BadRequestReason::kMalformed).Increment();
}

void IntegratorMetrics::OnShardUp(size_t index, bool up) {
  shards_[index].is_up = up;
  shards_[index].up->Set(up ? 1 : 0);
}

void IntegratorMetrics::OnHealth(size_t index, const ShardHealthMsg& health) { Bind(index, health.shard_id); }

}  // namespace search
