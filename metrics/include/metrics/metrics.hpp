// Metrics: a process's Prometheus registry over prometheus-cpp, its /metrics exposer and the
// shared latency buckets. A process makes one Metrics (its component label: "node",
// "integrator", ...), which registers the families listed in families.hpp (the request families
// shared by node and integrator) and hands out typed accessors, so callers never
// repeat label strings and labels stay bounded: mode in {and, or, andor}, status in
// RequestStatus, processor in {cpu, gpu, hybrid}, reason in BadRequestReason. A component with
// families of its own registers them on registry() itself (the integrator's: IntegratorMetrics;
// the shard reader's list cache: index_store's ShardMetrics; the GPU list cache: gpu_cache's
// GpuCacheMetrics; the node's: NodeMetrics and GpuExecutorMetrics; the scheduler's: sched/).
// StartExposer serves GET /metrics on HOST:PORT.
//
// Values computed elsewhere (a cache's counters and size) are refreshed at
// scrape time by scrape hooks (AddScrapeHook): the exposer and SerializeText run every hook before
// collecting. Counters fed from an external monotonic source use SetCounterTo.
//
// Latency histograms are in seconds with exponential buckets 50 us * 2^i up to 6.55 s.
// Thread-safety: all accessors and metric updates are thread-safe (prometheus-cpp metrics are);
// the returned references live as long as the Metrics. Hooks run on the exposer's thread: a hook
// must be removed (RemoveScrapeHook) before anything it captures dies.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "core/query.hpp"
#include "core/status.hpp"
#include "metrics/families.hpp"

namespace prometheus {
class Exposer;
}

namespace search {

// The status label of request counters: the StatusCode names in snake_case, plus "partial" (an
// integrator answer missing some shards).
enum class RequestStatus : uint8_t {
  kOk = 0, kPartial, kInvalidArgument, kNotFound, kCorruption, kIOError, kUnavailable,
  kDeadlineExceeded, kResourceExhausted, kInternal,
};
inline constexpr size_t kNumRequestStatus = 10;
RequestStatus ToRequestStatus(StatusCode code);  // kAlreadyExists -> kInternal
std::string_view RequestStatusLabel(RequestStatus s);

enum class BadRequestReason : uint8_t {
  kMalformed = 0,        // frame failed to parse (capnp) / body not parseable
  kUnsupportedVersion,   // unknown protocol major version
  kInvalidArgument,      // parsed but invalid fields (terms, k, mode)
  kBadFrames,            // wrong multipart shape (not [identity][empty][payload])
  kUnexpectedMessage,    // a message kind this process does not accept
  kHttpBadParameter,     // integrator: a bad HTTP parameter or body
};
inline constexpr size_t kNumBadRequestReasons = 6;
std::string_view BadRequestReasonLabel(BadRequestReason r);

// "and", "or", "andor" (the metrics label; same as QueryModeName).
std::string_view ModeLabel(QueryMode mode);

// The latency buckets: 50 us * 2^i, i = 0..17.
prometheus::Histogram::BucketBoundaries LatencyBuckets();


class Metrics {
 public:
  // `component`: the component label of this process, e.g. "node" or "integrator".
  explicit Metrics(std::string component);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  const std::string& component() const { return component_; }
  prometheus::Registry& registry() { return *registry_; }
  std::shared_ptr<prometheus::Registry> shared_registry() { return registry_; }

  // Serves GET /metrics on "HOST:PORT" (PORT 0 picks a free port). IOError when it cannot bind;
  // InvalidArgument when already started.
  [[nodiscard]] Status StartExposer(const std::string& host_port);
  void StopExposer();
  // The bound port, 0 when not serving.
  int exposer_port() const;

  // Scrape hooks: run (in registration order) before each collection. Returns an id.
  int AddScrapeHook(std::function<void()> hook);
  void RemoveScrapeHook(int id);
  void RunScrapeHooks();
  // The whole registry in Prometheus text format, after running the hooks.
  std::string SerializeText();

  // --- search requests (integrator end to end, node per request) ---
  prometheus::Counter& requests(QueryMode mode, RequestStatus status) {
    return *requests_[Idx(mode)][static_cast<size_t>(status)];
  }
  prometheus::Histogram& request_duration(QueryMode mode) { return *request_duration_[Idx(mode)]; }
  prometheus::Gauge& inflight() { return *inflight_; }
  prometheus::Counter& deadline_exceeded() { return *deadline_exceeded_; }
  prometheus::Counter& bad_requests(BadRequestReason r) { return *bad_requests_[static_cast<size_t>(r)]; }

 private:
  static size_t Idx(QueryMode m) { return static_cast<size_t>(m); }
  class HookedCollectable;

  std::string component_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram::BucketBoundaries buckets_;
  std::shared_ptr<HookedCollectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string exposer_host_;
  mutable std::mutex hooks_mu_;
  std::map<int, std::function<void()>> hooks_;  // GUARDED_BY(hooks_mu_)
  int next_hook_id_ = 1;                        // GUARDED_BY(hooks_mu_)
  std::mutex run_hooks_mu_;                     // serializes hook runs (exposer vs SerializeText)

  std::array<std::array<prometheus::Counter*, kNumRequestStatus>, 3> requests_{};
  std::array<prometheus::Histogram*, 3> request_duration_{};
  prometheus::Gauge* inflight_ = nullptr;
  prometheus::Counter* deadline_exceeded_ = nullptr;
  std::array<prometheus::Counter*, kNumBadRequestReasons> bad_requests_{};
  prometheus::Gauge* start_time_ = nullptr;
};

}  // namespace search
