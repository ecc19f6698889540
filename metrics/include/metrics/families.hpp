// Metric families: names (Prometheus naming: base units, _total for counters, _seconds / _bytes
// for units), label names and help texts. Metrics (metrics.hpp) registers these (the request
// families shared by node and integrator, and the node's) exactly once; a component with
// families of its own lists and registers them itself (the integrator: integrator_metrics.cpp;
// the shard reader's list cache: index_store/src/shard_metrics.cpp).
// Dashboards, alerts and tests refer to these names.
// Thread-safety: constants.
#pragma once

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

// Node. Labels: processor (cpu|gpu|hybrid).
inline constexpr Family kNodeQueue{"search_node_queue_seconds",
                                   "Time a request waited in the node's queue for a worker, in seconds."};
inline constexpr Family kNodeExecution{"search_node_execution_seconds",
                                       "Time a node spent executing a request, in seconds."};
inline constexpr Family kNodeQueued{"search_node_queued_requests", "Requests waiting in the node's queue."};
inline constexpr Family kNodeUnroutable{"search_node_unroutable_replies_total",
                                        "Replies dropped because their peer had disconnected."};
inline constexpr Family kNodeSlowQueries{"search_node_slow_queries_total",
                                         "Requests that reached the node's --slow-query-ms (logged up to a rate)."};
inline constexpr Family kPostingsDecoded{"search_postings_decoded_total", "Posting docIDs decoded, by processor."};
inline constexpr Family kBlocksDecoded{"search_blocks_decoded_total", "Posting blocks decoded, by processor."};
inline constexpr Family kPostingsScored{"search_postings_scored_total", "Documents fully scored, by processor."};
inline constexpr Family kFallbackCpu{"search_fallback_cpu_total",
                                     "Queries the GPU engine handed back to the CPU executor."};

// Node GPU executor. Labels: reason (GpuFallbackReason labels: cuda_error, out_of_memory,
// unsupported, corruption, other).
inline constexpr Family kGpuFallbacks{"search_gpu_fallbacks_total",
                                      "Queries the GPU executor could not run and reran on the CPU, by reason."};
// Node GPU list cache (GpuListCache::stats()).
inline constexpr Family kGpuCacheHits{"search_gpu_cache_hits_total", "GPU posting-list cache hits."};
inline constexpr Family kGpuCacheMisses{"search_gpu_cache_misses_total", "GPU posting-list cache misses."};
inline constexpr Family kGpuCacheEvictions{"search_gpu_cache_evictions_total", "GPU posting-list cache evictions."};
inline constexpr Family kGpuCacheCopiedBytes{"search_gpu_cache_copied_bytes_total",
                                             "Bytes of posting lists copied from host to GPU memory."};
inline constexpr Family kGpuCacheFailedAllocations{
    "search_gpu_cache_failed_allocations_total",
    "GPU cache misses that could not get device memory (the query ran on the CPU)."};
inline constexpr Family kGpuCacheBytes{"search_gpu_cache_bytes", "Device bytes held by the GPU posting-list cache."};
inline constexpr Family kGpuCacheEntries{"search_gpu_cache_entries", "Lists held by the GPU posting-list cache."};
inline constexpr Family kGpuCacheCapacity{"search_gpu_cache_capacity_bytes",
                                          "Device byte budget of the GPU posting-list cache."};
inline constexpr Family kGpuBatchCpu{
    "search_gpu_batch_cpu_seconds_total",
    "CPU time of the GPU executor's batches on their calling threads, by part: prepare (term metadata and "
    "main-memory lists), acquire (pinning the lists in the GPU list cache, copies of those not resident), "
    "engine (planning, uploads, launches, waits that do not sleep, reading the answers back) and finish "
    "(synchronizing the stream, building the answers)."};
inline constexpr Family kGpuBatchWall{
    "search_gpu_batch_seconds_total",
    "Wall time of the GPU executor's batches on their calling threads, by the parts of "
    "search_gpu_batch_cpu_seconds_total; beyond their CPU time: device waits, lock waits, time off the core."};

// Node CPU/GPU scheduler (node/hybrid_scheduler.hpp). Labels: processor (cpu|gpu); queue
// (gpu|cpu|flexible) for the queue length.
inline constexpr Family kSchedQueueLength{"search_sched_queue_length",
                                          "Jobs waiting in the scheduler's queue (gpu, cpu or flexible)."};
inline constexpr Family kSchedWait{"search_sched_wait_seconds",
                                   "Time a job waited in the scheduler's queues before a processor took it."};
inline constexpr Family kSchedRun{"search_sched_run_seconds", "Time a processor spent running a job, in seconds."};
inline constexpr Family kSchedJobs{"search_sched_jobs_total", "Jobs finished, by the processor that finished them."};
inline constexpr Family kSchedStolen{"search_sched_stolen_total",
                                     "Jobs taken by the processor that did not prefer them (work stealing)."};
inline constexpr Family kSchedMigrations{"search_sched_migrations_total",
                                         "Queries handed from the GPU to the CPU mid-query (Griffin)."};
inline constexpr Family kSchedBalanced{
    "search_sched_balanced_total",
    "Jobs the cost ratio gave the CPU queue that went to the GPU queue, which would finish them sooner."};
inline constexpr Family kSchedCheap{
    "search_sched_cheap_total",
    "Jobs queued for the CPU as cheap: predicted to take no longer there than one query alone on the GPU (hybrid)."};
inline constexpr Family kSchedCheapThreshold{
    "search_sched_cheap_threshold_seconds",
    "Predicted CPU time under which a job is cheap and queues for the CPU (hybrid): one query's time alone on "
    "the GPU, or higher while the adaptive bound (--sched-cheap-step) finds the GPU behind the CPU."};
inline constexpr Family kSchedCpuSlots{
    "search_sched_cpu_slots",
    "CPU workers allowed to run CPU-engine queries now: the host's idle cores allow them (hybrid)."};
inline constexpr Family kSchedCpuWorker{
    "search_sched_cpu_worker_seconds_total",
    "Wall time of the scheduler's CPU workers with a job, by part: run (inside the CPU engine), then until "
    "the worker is back at the scheduler: account (the job's counters, the cost model, the trace), answer "
    "(its on_done: the node's reply, or the hand-off to an answer thread) and lock (the wait for the "
    "scheduler's lock). A worker is taken for all four; only run is in search_sched_run_seconds."};
inline constexpr Family kSchedCpuPinFailures{
    "search_sched_cpu_pin_failures",
    "CPU workers that could not pin themselves to the CPUs --sched-cpu-cores gave them (they run on the node's "
    "other CPUs); 0 without the option."};
inline constexpr Family kSchedHost{
    "search_sched_host_seconds",
    "Host time a query spends around the scheduler, outside its queue wait and run: phase features (feature "
    "lookup, predictions), submit (queueing, the scheduler lock), return (wake-up after its processor finished), "
    "resolve (an answer's external ids, after its CPU job or GPU batch)."};
inline constexpr Family kSchedGpuRetries{"search_sched_gpu_retries_total",
                                         "Jobs the GPU could not run that reran on the CPU."};
inline constexpr Family kSchedDeadlineMisses{"search_sched_deadline_misses_total",
                                             "Jobs answered after their deadline, or expired in the queue."};
inline constexpr Family kSchedGpuBatches{"search_sched_gpu_batches_total", "GPU batches run by the scheduler."};
inline constexpr Family kSchedDispatchCpu{
    "search_sched_gpu_dispatch_cpu_seconds_total",
    "CPU time of the GPU dispatcher threads: part batch (inside the GPU executor: preparing, launching and "
    "finishing a batch's queries; a device wait that sleeps costs none) and part scheduler (taking batches "
    "from the queues, feeding the cost model, answering the jobs)."};
inline constexpr Family kSchedModelObserved{
    "search_sched_model_observed_seconds_total",
    "Run time (CPU jobs: the worker's CPU time) of the jobs the cost model learned from that it had a prediction "
    "for; over search_sched_model_predicted_seconds_total, the model's bias on the work it saw (above 1: it "
    "predicts too little)."};
inline constexpr Family kSchedModelPredicted{
    "search_sched_model_predicted_seconds_total",
    "What the cost model had predicted for those jobs before it learned from them."};
inline constexpr Family kSchedPredictionError{
    "search_sched_prediction_error_ratio",
    "Relative error |predicted - actual| / actual of the cost model's run-time predictions."};

// Process.
inline constexpr Family kProcessStartTime{"process_start_time_seconds",
                                          "Start time of the process since the Unix epoch in seconds."};

}  // namespace search::families
