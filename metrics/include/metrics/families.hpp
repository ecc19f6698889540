// Metric families: names (Prometheus naming: base units, _total for counters, _seconds / _bytes
// for units), label names and help texts. Metrics (metrics.hpp) registers these (the request
// families shared by node and integrator, and the node's) exactly once; a component with
// families of its own lists and registers them itself (the integrator: integrator_metrics.cpp;
// the shard reader's list cache: index_store/src/shard_metrics.cpp; the GPU list cache:
// gpu_cache/src/gpu_cache_metrics.cpp).
// Dashboards, alerts and tests refer to these names. Every component registers its families
// through CounterFamily / GaugeFamily / HistogramFamily below (library search_metric_families:
// prometheus-cpp core only, so that a library without an exposer can use them).
// Thread-safety: constants; the functions as prometheus-cpp's registry and metrics are.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string_view>

namespace search::families {

struct Family {
  std::string_view name;
  std::string_view help;
};

// Requests. Labels: component, mode (and|or|andor), status (RequestStatus labels).
inline constexpr Family kRequests{"search_requests_total",
                                  "Search requests answered, by component, query mode and outcome."};
// Labels: component, mode. Integrator: end to end (HTTP in to HTTP out); node: receive to reply.
inline constexpr Family kRequestDuration{"search_request_duration_seconds",
                                         "Search request latency in seconds, by component and query mode."};
// Labels: component.
inline constexpr Family kInflight{"search_inflight_requests", "Search requests currently being processed."};
inline constexpr Family kDeadlineExceeded{"search_deadline_exceeded_total",
                                          "Requests whose deadline passed before they were answered in full."};
// Labels: component, reason (BadRequestReason labels).
inline constexpr Family kBadRequests{"search_bad_requests_total",
                                     "Rejected requests (malformed, unsupported version, invalid fields), by reason."};

// The node's own families: node/src/node_metrics.cpp (its GPU executor's:
// node/src/gpu_executor_metrics.cpp); its scheduler's: sched/src/hybrid_scheduler.cpp.

// Process.
inline constexpr Family kProcessStartTime{"process_start_time_seconds",
                                          "Start time of the process since the Unix epoch in seconds."};

}  // namespace search::families

namespace search {

// Registers the family `f` (its name and help) in `r` (again: the same family).
prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& r, const families::Family& f);
prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& r, const families::Family& f);
prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& r, const families::Family& f);

// Adds max(0, value - current) so a prometheus counter follows an external monotonic counter.
void SetCounterTo(prometheus::Counter& counter, double value);

}  // namespace search
