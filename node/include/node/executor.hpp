// Executor: what a shard node runs a query on. The node's server only sees this interface; the
// CPU engine (CpuExecutorAdapter), the GPU executor (GpuExecutorAdapter) and the CPU/GPU
// scheduler over both (ScheduledExecutor) implement it. Hits come back best first (score desc, docID asc) with external ids.
// Thread-safety: Execute may be called from many worker threads at once; implementations must
// be thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/query.hpp"
#include "core/status.hpp"
#include "cpu_exec/cpu_executor.hpp"
#include "index_store/list_cache.hpp"
#include "node/gpu_executor_metrics.hpp"
#include "proto/wire.hpp"

namespace search {

class ShardReader;

// Where one query's time went inside an executor, in microseconds (the scheduled executor fills
// it; 0 where a phase does not apply). For the node's slow-query log.
struct ExecTiming {
  double features_us = 0;  // list lookups and cost prediction before scheduling
  double submit_us = 0;    // waiting for the scheduler's lock to enqueue
  double wait_us = 0;      // queued, summed over the query's visits to the queues
  double run_us = 0;       // running: a CPU run, or the whole GPU batch the query rode in
  double return_us = 0;    // from the runner's finish to the caller's wake-up
  double resolve_us = 0;   // external ids looked up after the run
  uint32_t gpu_batch = 0;  // queries in the GPU batch it ran in (0: none)
  bool migrated = false;   // began on the GPU, finished on the CPU
  bool stolen = false;     // taken by the processor it did not prefer
  bool retried = false;    // rerun on the CPU after a GPU failure
  // Adds another execution of the same request (an andor split's OR after its AND), as
  // QueryStats::operator+= does: times summed, the larger batch, the flags or-ed.
  ExecTiming& operator+=(const ExecTiming& o);
};

struct ExecOutput {
  std::vector<HitMsg> hits;  // best first, at most k, external ids resolved
  bool has_total = false;    // the query asked for a count (Query::count)
  uint64_t total = 0;        // then: the exact number of matching documents in this shard
  QueryStats stats;
  Processor processor = Processor::kCpu;  // where it actually ran
  ExecTiming timing;
};

// Whether the GPU engine cannot run `query`, and why. It runs bags of words, trees of terms and
// phrases (+, -, filters, groups) and counts, a tree in a program of at most kGpuTreeSlots slots
// (one per distinct term leaf and one per distinct phrase: gpu_exec's kMaxSteps): a tree with a
// phrase past that is kPhrase, and a GPU node runs it on the CPU engine and counts it
// (search_node_gpu_unsupported_total).
inline constexpr size_t kGpuTreeSlots = 32;
std::optional<GpuUnsupportedReason> GpuUnsupported(const Query& query);

// Fills the hits' external ids from the shard (one RocksDB MultiGet for the whole top-k).
Status ResolveExternalIds(const ShardReader& shard, std::vector<HitMsg>* hits);

using Deadline = std::chrono::steady_clock::time_point;
inline constexpr Deadline kNoDeadline = Deadline::max();

// ExecuteAsync's caller_max_us when the caller may run any query itself.
inline constexpr double kNoCallerBound = std::numeric_limits<double>::infinity();

class Executor {
 public:
  virtual ~Executor() = default;
  // "cpu", "gpu", "scheduler", ... for logs.
  virtual std::string_view name() const = 0;
  // True when a GPU executor is active behind this one (reported in ShardHealth.gpu).
  virtual bool has_gpu() const { return false; }
  // REQUIRES: query.terms canonical (unique, ascending; with a tree, its TreeTerms). `flags` are
  // SearchRequest.flags (kFlagForceCpu / kFlagForceGpu). DeadlineExceeded when the deadline has
  // passed before the work starts (engines may also stop between phases); InvalidArgument for a
  // bad k (0 is allowed with count) or a query the index cannot answer (a phrase without
  // positions); Unavailable when a forced processor does not exist here or cannot run the query
  // (kFlagForceGpu with a query GpuUnsupported names). With query.count the answer carries the
  // exact total (ExecOutput::has_total).
  virtual Result<ExecOutput> Execute(const Query& query, Deadline deadline, uint32_t flags) = 0;
  // Execute without holding the calling thread: `done` gets the answer, perhaps on another thread
  // (the one that finished the query) and perhaps before this returns. The query is the call's
  // own (moved in; kept until the answer). Default: Execute, then done, on the calling thread.
  // caller_max_us (honoured where BoundsCaller()): the calling thread runs the query itself only
  // when it is predicted to take at most this many microseconds, and hands it to the executor's
  // own threads otherwise (infinity: no bound). The node's I/O thread passes one when it takes a
  // query itself (node_server.hpp).
  virtual void ExecuteAsync(Query query, Deadline deadline, uint32_t flags,
                            std::function<void(Result<ExecOutput>)> done, double caller_max_us = kNoCallerBound) {
    (void)caller_max_us;
    done(Execute(query, deadline, flags));
  }
  // Whether ExecuteAsync honours caller_max_us (the default runs every query on the caller).
  virtual bool BoundsCaller() const { return false; }
};

// A processor that answers batches of queries in one go (the GPU executor; unit tests use fakes).
// The node's scheduler (scheduled_executor.hpp) hands it the GPU's batches.
// PreparedTerm (a query term as the caller looked it up) is cpu_exec's: the CPU engine takes them too.

struct BatchItem {
  const Query* query = nullptr;
  // Optional: the query's terms (one entry each, in query.terms' order) already looked up by the
  // caller without an error, so the processor's thread does not repeat the lookups (the node's
  // scheduler looks them up on the request's thread for the cost model's features anyway).
  const std::vector<PreparedTerm>* prepared = nullptr;
  Result<ExecOutput> result = Status::Internal("not run");
  // Set when the failure was the processor's own (a CUDA error, device memory, a query it does
  // not run): the scheduler reruns the query on the CPU. Host-side errors the CPU would hit too
  // (a corrupt term entry, a missing document) are returned as they are.
  bool retry_on_cpu = false;
  // False: the answer's hits come without external ids (empty strings) and the caller resolves
  // them (ResolveExternalIds) on its own thread, off the processor's critical path: the node's
  // scheduler does, so a GPU batch's dispatcher does not spend its time on k RocksDB reads per
  // query while the GPU waits.
  bool resolve_ids = true;
};

class BatchExecutor {
 public:
  virtual ~BatchExecutor() = default;
  virtual std::string_view batch_name() const = 0;
  // Answers every item (sets result and retry_on_cpu). Thread-safe.
  virtual void ExecuteBatch(std::span<BatchItem> items) = 0;
  // Bytes of the query's lists that a run would first have to copy into the processor's memory
  // (the cost model's feature); 0 when unknown.
  virtual uint64_t NonResidentBytes(const Query& query) { (void)query; return 0; }

  // Griffin's first steps (Liu et al. 2018 §3.2) for an and/andor query of at least two lists:
  // intersects its lists shortest first, continuing while the next list is shorter than
  // `crossover` times the running intersection, and returns that intersection's docIDs
  // (ascending) and how many lists it covers. The CPU finishes the query from them
  // (CpuExecutorAdapter::ExecuteFromCandidates). Any error means: run the whole query on the CPU.
  struct Prefix {
    std::vector<uint32_t> candidates;
    size_t lists_done = 0;
  };
  virtual Result<Prefix> IntersectPrefix(const Query& query, double crossover) {
    (void)query;
    (void)crossover;
    return Status::Unavailable("this executor has no intersection step");
  }
};

// The CPU engine over one open shard: CpuExecutor::Search, then ShardReader::GetExternalId.
class CpuExecutorAdapter final : public Executor {
 public:
  // REQUIRES: shard outlives the adapter.
  explicit CpuExecutorAdapter(const ShardReader* shard);
  std::string_view name() const override { return "cpu"; }
  Result<ExecOutput> Execute(const Query& query, Deadline deadline, uint32_t flags) override;
  // The same over terms the caller already looked up (CpuExecutor::Search's `prepared`; nullptr:
  // looked up here). resolve_ids false: the hits come without their external ids (empty strings)
  // and the caller resolves them (ResolveExternalIds) on a thread of its choice, as BatchItem's.
  Result<ExecOutput> Execute(const Query& query, Deadline deadline, uint32_t flags,
                             const std::vector<PreparedTerm>* prepared, bool resolve_ids = true);
  // Finishes an and/andor query from a candidate superset of its and-answer (Griffin's hand-off):
  // CpuExecutor::SearchFromCandidates. Processor kHybrid. resolve_ids as for Execute.
  Result<ExecOutput> ExecuteFromCandidates(const Query& query, std::span<const uint32_t> candidates, Deadline deadline,
                                           bool resolve_ids = true);

 private:
  Result<ExecOutput> ToOutput(const SearchResult& r, Processor p, bool resolve_ids) const;
  const ShardReader* shard_;
  CpuExecutor executor_;
};

}  // namespace search
