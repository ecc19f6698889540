// NodeMetrics: the shard node's own metric families (the node's queue and execution times, its
// queued requests, unroutable replies, slow queries and searches its I/O thread took, the postings its engines decoded and
// scored, by processor, the peers a CURVE node refused, by reason, and the fetch phase: fetches by status, documents fetched, fetch time), registered with their help texts on the registry it is given, with its
// GPU executor's (GpuExecutorMetrics: zero on a node without a GPU, so dashboards read 0 rather
// than nothing). The request families a node shares with the integrator stay with Metrics.
// Contract: registering on a registry that already has these families (another NodeMetrics, a
// second server in one process) shares their series.
// Thread-safety: the accessors may be called from any thread; prometheus-cpp's series are
// thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>

#include "core/cpu_home.hpp"
#include "core/query.hpp"
#include "curve/zap_handler.hpp"
#include "node/gpu_executor_metrics.hpp"

namespace search {

class NodeMetrics {
 public:
  explicit NodeMetrics(prometheus::Registry& registry);

  prometheus::Histogram& queue_seconds(Processor p) { return *queue_[Idx(p)]; }
  prometheus::Histogram& execution_seconds(Processor p) { return *exec_[Idx(p)]; }
  prometheus::Gauge& queued() { return *queued_; }
  prometheus::Counter& unroutable_replies() { return *unroutable_; }
  prometheus::Counter& slow_queries() { return *slow_queries_; }
  // Searches an idle node's I/O thread handed to the engine itself (node_server.hpp).
  prometheus::Counter& io_thread_requests() { return *io_thread_requests_; }
  prometheus::Counter& postings_decoded(Processor p) { return *postings_decoded_[Idx(p)]; }
  prometheus::Counter& blocks_decoded(Processor p) { return *blocks_decoded_[Idx(p)]; }
  prometheus::Counter& postings_scored(Processor p) { return *postings_scored_[Idx(p)]; }
  // The fetch phase (FetchRequests): answered ok or with an error, the documents asked for, and the
  // time from a worker's take to the encoded reply.
  prometheus::Counter& fetches(bool ok) { return *fetches_[ok ? 0 : 1]; }
  prometheus::Counter& fetched_docs() { return *fetched_docs_; }
  prometheus::Histogram& fetch_seconds() { return *fetch_seconds_; }
  // CURVE: peers refused (answered nothing), by reason; whether the node serves CURVE only (1/0).
  prometheus::Counter& refused_peers(curve::RefusalReason r) { return *refused_peers_[static_cast<size_t>(r)]; }
  prometheus::Gauge& curve() { return *curve_; }
  // CPU home (core/cpu_home.hpp) of the I/O thread and its ZeroMQ I/O thread, at scrape time.
  void SetCpuHome(const CpuHomeState& s);

 private:
  static size_t Idx(Processor p) { return static_cast<size_t>(p); }
  std::array<prometheus::Histogram*, 3> queue_{}, exec_{};
  std::array<prometheus::Counter*, 3> postings_decoded_{}, blocks_decoded_{}, postings_scored_{};
  prometheus::Gauge* queued_ = nullptr;
  prometheus::Counter* unroutable_ = nullptr;
  prometheus::Counter* slow_queries_ = nullptr;
  prometheus::Counter* io_thread_requests_ = nullptr;
  std::array<prometheus::Counter*, 2> fetches_{};
  prometheus::Counter* fetched_docs_ = nullptr;
  prometheus::Histogram* fetch_seconds_ = nullptr;
  std::array<prometheus::Counter*, curve::kRefusalReasons> refused_peers_{};
  prometheus::Gauge* curve_ = nullptr;
  prometheus::Gauge* cpu_home_pinned_ = nullptr;
  prometheus::Gauge* cpu_home_polling_ = nullptr;
  std::array<prometheus::Counter*, 2> cpu_home_moves_{};  // home, out
  GpuExecutorMetrics gpu_executor_;  // registered with the node's; the GPU executor shares its series
};

}  // namespace search
