#include "node/node_metrics.hpp"

#include <string>

#include "metrics/families.hpp"
#include "metrics/metrics.hpp"  // LatencyBuckets

namespace search {
namespace {

// The node's metric families (names, help texts; labels in the comments). Dashboards, alerts and
// tests refer to these names.
using families::Family;
// Labels: processor (cpu|gpu|hybrid).
constexpr Family kNodeQueue{"search_node_queue_seconds",
                            "Time a request waited in the node's queue for a worker, in seconds."};
constexpr Family kNodeExecution{"search_node_execution_seconds", "Time a node spent executing a request, in seconds."};
constexpr Family kPostingsDecoded{"search_postings_decoded_total", "Posting docIDs decoded, by processor."};
constexpr Family kBlocksDecoded{"search_blocks_decoded_total", "Posting blocks decoded, by processor."};
constexpr Family kPostingsScored{"search_postings_scored_total", "Documents fully scored, by processor."};
// No labels.
constexpr Family kNodeQueued{"search_node_queued_requests", "Requests waiting in the node's queue."};
constexpr Family kNodeUnroutable{"search_node_unroutable_replies_total",
                                 "Replies dropped because their peer had disconnected."};
constexpr Family kNodeSlowQueries{"search_node_slow_queries_total",
                                  "Requests that reached the node's --slow-query-ms (logged up to a rate)."};

constexpr Family kNodeCpuHomePinned{"search_node_cpu_home_pinned",
                                    "1 while the node's I/O thread and its ZeroMQ I/O thread share their home CPU "
                                    "(little load), 0 while they may run on every CPU of the node's."};
constexpr Family kNodeCpuHomeMoves{"search_node_cpu_home_moves_total",
                                   "Moves of the node's I/O thread and its ZeroMQ I/O thread to their home CPU "
                                   "(to=home: under a quarter of a CPU busy) and back to every CPU (to=out: over half)."};
constexpr Family kNodeCpuHomePolling{"search_node_cpu_home_polling",
                                     "1 while an idle-priority thread spins on the home CPU of the node's I/O thread "
                                     "(at home and serving: it keeps that CPU from halting between requests)."};
constexpr Family kNodeIoThreadRequests{"search_node_io_thread_requests_total",
                                       "Searches that reached an idle node and were handed to the engine by its I/O "
                                       "thread, without a worker (run there too when predicted short)."};

// CURVE (curve/zap_handler.hpp). Labels: reason (unknown_key|no_curve|bad_handshake).
constexpr Family kNodeRefusedPeers{"search_node_refused_peers_total",
                                   "Peers the CURVE node refused (answered nothing), by reason: unknown_key (a client "
                                   "key not in --curve-clients), no_curve (plain ZeroMQ), bad_handshake (any other "
                                   "failed handshake: a wrong server key, bytes that are not ZMTP)."};
// No labels.
constexpr Family kNodeCurve{"search_node_curve", "1 when the node serves CurveZMQ only (--curve-key), 0 for plain "
                                                 "ZeroMQ."};

// The fetch phase. Labels: status (ok|error).
constexpr Family kNodeFetches{"search_node_fetches_total",
                              "Fetch requests (stored sources and highlights of a search's final hits) answered, "
                              "by status."};
// No labels.
constexpr Family kNodeFetchedDocs{"search_node_fetched_docs_total", "Documents the node's fetch requests asked for."};
constexpr Family kNodeFetchSeconds{"search_node_fetch_seconds",
                                   "Time a node spent answering a fetch request (sources, highlights, encoding), "
                                   "in seconds."};

constexpr std::array<Processor, 3> kProcessors = {Processor::kCpu, Processor::kGpu, Processor::kHybrid};

}  // namespace

NodeMetrics::NodeMetrics(prometheus::Registry& r) : gpu_executor_(r) {
  const prometheus::Histogram::BucketBoundaries buckets = LatencyBuckets();
  auto& queue = HistogramFamily(r, kNodeQueue);
  auto& exec = HistogramFamily(r, kNodeExecution);
  auto& postings = CounterFamily(r, kPostingsDecoded);
  auto& blocks = CounterFamily(r, kBlocksDecoded);
  auto& scored = CounterFamily(r, kPostingsScored);
  for (Processor p : kProcessors) {
    const prometheus::Labels l{{"processor", std::string(ProcessorName(p))}};
    queue_[Idx(p)] = &queue.Add(l, buckets);
    exec_[Idx(p)] = &exec.Add(l, buckets);
    postings_decoded_[Idx(p)] = &postings.Add(l);
    blocks_decoded_[Idx(p)] = &blocks.Add(l);
    postings_scored_[Idx(p)] = &scored.Add(l);
  }
  queued_ = &GaugeFamily(r, kNodeQueued)
                 .Add({});
  unroutable_ = &CounterFamily(r, kNodeUnroutable).Add({});
  slow_queries_ = &CounterFamily(r, kNodeSlowQueries).Add({});
  io_thread_requests_ = &CounterFamily(r, kNodeIoThreadRequests).Add({});
  auto& fetches = CounterFamily(r, kNodeFetches);
  fetches_[0] = &fetches.Add({{"status", "ok"}});
  fetches_[1] = &fetches.Add({{"status", "error"}});
  fetched_docs_ = &CounterFamily(r, kNodeFetchedDocs).Add({});
  fetch_seconds_ = &HistogramFamily(r, kNodeFetchSeconds).Add({}, buckets);
  auto& refused = CounterFamily(r, kNodeRefusedPeers);
  for (size_t i = 0; i < curve::kRefusalReasons; ++i)
    refused_peers_[i] = &refused.Add({{"reason", curve::RefusalReasonName(static_cast<curve::RefusalReason>(i))}});
  curve_ = &GaugeFamily(r, kNodeCurve)
                .Add({});
  cpu_home_pinned_ = &GaugeFamily(r, kNodeCpuHomePinned)
                          .Add({});
  cpu_home_polling_ = &GaugeFamily(r, kNodeCpuHomePolling)
                           .Add({});
  auto& moves = CounterFamily(r, kNodeCpuHomeMoves);
  cpu_home_moves_[0] = &moves.Add({{"to", "home"}});
  cpu_home_moves_[1] = &moves.Add({{"to", "out"}});
}

void NodeMetrics::SetCpuHome(const CpuHomeState& s) {
  cpu_home_pinned_->Set(s.pinned ? 1 : 0);
  cpu_home_polling_->Set(s.polling ? 1 : 0);
  SetCounterTo(*cpu_home_moves_[0], static_cast<double>(s.moves_home));
  SetCounterTo(*cpu_home_moves_[1], static_cast<double>(s.moves_out));
}

}  // namespace search
