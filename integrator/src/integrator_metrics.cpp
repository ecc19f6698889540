#include "integrator/integrator_metrics.hpp"

#include <string>

#include "metrics/families.hpp"

namespace search {

IntegratorMetrics::IntegratorMetrics(Metrics* metrics, size_t num_shards) : metrics_(metrics), shards_(num_shards) {
  auto counter = [&](const families::Family& f) {
    return &prometheus::BuildCounter()
                .Name(std::string(f.name))
                .Help(std::string(f.help))
                .Register(metrics_->registry())
                .Add({{"component", metrics_->component()}});
  };
  late_replies_ = counter(families::kLateReplies);
  retries_ = counter(families::kReplicaRetries);
  hedges_ = counter(families::kReplicaHedges);
  for (size_t i = 0; i < num_shards; ++i) Bind(i, static_cast<uint32_t>(i));
}

void IntegratorMetrics::OnRetry(size_t) { retries_->Increment(); }
void IntegratorMetrics::OnHedge(size_t) { hedges_->Increment(); }

IntegratorMetrics::~IntegratorMetrics() { Detach(); }

void IntegratorMetrics::Bind(size_t index, uint32_t label) {
  ShardSeries& s = shards_[index];
  const bool rebind = s.up != nullptr;
  if (rebind && s.label == label) return;
  if (rebind) s.up->Set(0);  // the old label no longer names a live shard
  s.label = label;
  s.duration = &metrics_->shard_request_duration(label);
  s.ok = &metrics_->shard_requests(label, RequestStatus::kOk);
  s.failed = &metrics_->shard_requests(label, RequestStatus::kUnavailable);
  s.timed_out = &metrics_->shard_requests(label, RequestStatus::kDeadlineExceeded);
  s.up = &metrics_->shard_up(label);
  s.up->Set(s.is_up ? 1 : 0);
}

void IntegratorMetrics::AttachCache(const ResultCache* cache) {
  Detach();
  hook_id_ = metrics_->AddScrapeHook([this, cache] {
    const ResultCacheStats s = cache->stats();
    CacheSnapshot snap;
    snap.hits = s.hits;
    snap.misses = s.misses;
    snap.evictions = s.evictions;
    snap.bytes = s.bytes;
    snap.entries = s.entries;
    snap.capacity_bytes = s.capacity_bytes;
    metrics_->SetResultCache(snap, /*include_hit_counters=*/true);
  });
}

void IntegratorMetrics::Detach() {
  if (hook_id_) metrics_->RemoveScrapeHook(hook_id_);
  hook_id_ = 0;
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
