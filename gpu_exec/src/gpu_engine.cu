// gpu_engine.hpp: the host API. Per batch: validate each query and plan its path (engine_plan.hpp),
// then at most four rounds of launch sequences (dispatch.cuh), each ending in one synchronization:
// (1) and, or without theta, theta for the other or-queries, trees and counts; (2) those
// or-queries, andor's or-part (or its theta), the trees' andor or-resolution; (3) andor's or-part
// that waited for theta; each round also reruns dense the pruned queries of the round before that
// overflowed (a fourth round only for those of the third).
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dispatch.cuh"
#include "engine_plan.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/gpu_engine.hpp"

namespace search::gpu {

using namespace engine_internal;  // NOLINT(google-build-using-namespace): the engine's layers

GpuContext::GpuContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuContext::~GpuContext() = default;
CUstream_st* GpuContext::stream() const {
  return impl_->stream.get();
}

Result<std::unique_ptr<GpuContext>> GpuContext::Create(const GpuContextOptions& options) {
  if (options.or_candidate_cap == 0 || options.or_candidate_cap > (uint32_t{1} << 30) || options.or_theta_sample == 0 ||
      options.or_theta_sample > (uint32_t{1} << 24))
    return Status::InvalidArgument(
        "GpuContextOptions: or_candidate_cap must be in [1, 2^30], or_theta_sample in [1, 2^24]");
  if (!GpuAvailable()) return Status::Unavailable("GpuContext: " + GpuDescription());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  int device = 0;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  SEARCH_ASSIGN_OR_RETURN(impl->stream, Stream::Create());
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&impl->pool, &props));
  uint64_t keep = std::numeric_limits<uint64_t>::max();  // never give memory back between batches
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(impl->pool, cudaMemPoolAttrReleaseThreshold, &keep));
  if (options.scratch_bytes > 0) {  // reserve: the pool keeps what it grew to
    void* p = nullptr;
    SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocFromPoolAsync(&p, options.scratch_bytes, impl->pool, impl->stream.get()));
    SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(p, impl->stream.get()));
    SEARCH_RETURN_IF_ERROR(impl->stream.Synchronize());
  }
  return std::unique_ptr<GpuContext>(new GpuContext(std::move(impl)));
}

namespace engine_internal {
EngineCounters& Counters() {
  static EngineCounters counters;
  return counters;
}
}  // namespace engine_internal

namespace {
uint64_t NanosSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

uint64_t MicrosSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
}
}  // namespace

Status GpuUnimplemented(std::string what) {
  return Status::InvalidArgument(std::string(kGpuUnimplementedPrefix) + what);
}

bool IsGpuUnimplemented(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument && s.message().rfind(kGpuUnimplementedPrefix, 0) == 0;
}

Status ExecuteBatchGpu(GpuContext& ctx, const GpuShardView& shard, std::span<const GpuQueryInput> queries,
                       std::vector<Result<SearchResult>>* out) {
  const auto t0 = std::chrono::steady_clock::now();
  EngineCounters& c = Counters();
  out->clear();
  const size_t nq = queries.size();
  std::vector<QState> st(nq);
  std::vector<uint32_t> and_ids, or_ids, tree_ids, count_ids;
  for (uint32_t i = 0; i < nq; ++i) {
    QState& s = st[i];
    s.t0 = t0;
    if (!Prepare(shard, queries[i], &s)) {
      s.done = true;
      continue;
    }
    if (s.tree) {
      tree_ids.push_back(i);
      continue;
    }
    if (s.count_phase) count_ids.push_back(i);  // its count beside its flat path
    const bool all = s.present.size() == s.n;
    // One list: and, or and andor all ask for its k best documents, which the or path finds by
    // its block maxima (theta from the k highest blocks) instead of scoring every posting.
    if (all && s.n == 1) {
      if (s.count) s.result.total = s.present[0].count;  // its matches: the list's documents
      s.one_list_andor = s.mode == QueryMode::kAndOr;
      s.mode = QueryMode::kOr;
    }
    if (s.mode == QueryMode::kOr) {
      if (s.present.empty())
        s.done = true;
      else
        or_ids.push_back(i);
    } else if (all) {
      and_ids.push_back(i);
    } else {
      // and with a term absent here matches nothing; andor then runs or.
      s.result.stats.lists += s.present.size();
      if (s.mode == QueryMode::kAnd || s.present.empty())
        s.done = true;
      else
        or_ids.push_back(i);
    }
  }
  // A floor that is not a positive finite number bounds nothing: no tf-only bounds.
  const float floor = std::isfinite(shard.norm_floor) && shard.norm_floor > 0.0f ? shard.norm_floor : 0.0f;
  const ShardDev dev{shard.d_norms, shard.doc_begin, shard.num_docs, shard.params.k1, floor};
  const GpuContextOptions& opt = ctx.impl().options;
  // A RequiredOr query off the pruned path takes the tree path (the dense path scores every list).
  auto to_tree = [&](const std::vector<uint32_t>& ids, std::vector<Phase>* phases) {
    for (uint32_t id : ids) st[id].tree = true;
    c.tree.fetch_add(ids.size(), std::memory_order_relaxed);
    AddPhases(PhaseKind::kTree, ids, st, shard.num_docs, opt, phases);
  };
  // Or-queries: those that need theta wait one round for it (`wait`), but a query of one list
  // (TopBlocksEligible) takes its top blocks in this round when `top` is given; the others are
  // planned now.
  auto plan_or = [&](const std::vector<uint32_t>& ids, bool may_wait, std::vector<uint32_t>* wait,
                     std::vector<Phase>* phases, std::vector<uint32_t>* top = nullptr) {
    std::vector<uint32_t> dense, pruned, trees;
    const size_t waited = wait != nullptr ? wait->size() : 0, topped = top != nullptr ? top->size() : 0;
    for (uint32_t id : ids) {
      QState& s = st[id];
      if (!s.status.ok()) continue;
      if (may_wait && opt.or_pruned_divisor != 0 && NeedTheta(s, opt.or_theta_min_postings)) {
        (top != nullptr && TopBlocksEligible(s) ? top : wait)->push_back(id);
        continue;
      }
      PlanOr(s, shard.num_docs, opt);
      (s.or_path == PhaseKind::kOrPruned ? pruned : s.required_or ? trees : dense).push_back(id);
    }
    to_tree(trees, phases);
    c.or_theta.fetch_add(wait != nullptr ? wait->size() - waited : 0, std::memory_order_relaxed);
    if (top != nullptr) {
      c.top_blocks.fetch_add(top->size() - topped, std::memory_order_relaxed);
      AddPhases(PhaseKind::kTopBlocks, std::vector<uint32_t>(top->begin() + topped, top->end()), st, shard.num_docs,
                opt, phases);
    }
    c.or_pruned.fetch_add(pruned.size(), std::memory_order_relaxed);
    c.or_dense.fetch_add(dense.size(), std::memory_order_relaxed);
    AddPhases(PhaseKind::kOrDense, dense, st, shard.num_docs, opt, phases);
    AddPhases(PhaseKind::kOrPruned, pruned, st, shard.num_docs, opt, phases);
    if (wait != nullptr)  // this call's (a round may add to `wait` twice)
      AddPhases(PhaseKind::kTheta, std::vector<uint32_t>(wait->begin() + waited, wait->end()), st, shard.num_docs, opt,
                phases);
  };
  // Pruned attempts of the last round that overflowed their candidates: dense in this one.
  auto rerun_overflow = [&](std::vector<Phase>* phases) {
    std::vector<uint32_t> ids, trees;
    for (uint32_t i = 0; i < nq; ++i)
      if (st[i].overflow && st[i].status.ok()) {
        st[i].overflow = false;
        st[i].or_path = PhaseKind::kOrDense;
        (st[i].required_or ? trees : ids).push_back(i);
      }
    c.or_overflow.fetch_add(ids.size() + trees.size(), std::memory_order_relaxed);
    c.or_dense.fetch_add(ids.size(), std::memory_order_relaxed);
    AddPhases(PhaseKind::kOrDense, ids, st, shard.num_docs, opt, phases);
    to_tree(trees, phases);
  };
  // Tree-path queries: with a top-k, or counts alone (k == 0).
  auto plan_tree = [&](const std::vector<uint32_t>& ids, std::vector<Phase>* phases) {
    std::vector<uint32_t> top, counts;
    for (uint32_t id : ids) (st[id].k > 0 ? top : counts).push_back(id);
    c.tree.fetch_add(ids.size(), std::memory_order_relaxed);
    c.tree_count_only.fetch_add(counts.size(), std::memory_order_relaxed);
    AddPhases(PhaseKind::kTree, top, st, shard.num_docs, opt, phases);
    AddPhases(PhaseKind::kTreeCount, counts, st, shard.num_docs, opt, phases);
  };
  auto run = [&](std::vector<Phase>& phases) -> Status {
    Status r = RunRound(ctx.impl(), dev, phases, st);
    if (!r.ok()) {
      out->clear();
      for (size_t i = 0; i < nq; ++i) out->emplace_back(r);
    }
    return r;
  };
  // Round 1: and (and the and-part of andor), or planned without theta, theta for the rest of or.
  std::vector<Phase> phases;
  std::vector<uint32_t> wait1, wait2, top;
  AddPhases(PhaseKind::kAnd, and_ids, st, shard.num_docs, opt, &phases);
  plan_or(or_ids, true, &wait1, &phases, &top);
  plan_tree(tree_ids, &phases);
  AddPhases(PhaseKind::kTreeCount, count_ids, st, shard.num_docs, opt, &phases);
  SEARCH_RETURN_IF_ERROR(run(phases));
  // Round 2: the or-queries that waited for theta; andor's or-part (and found fewer than k); the
  // one-list queries whose top blocks were not enough take the theta path (theta now, round 3).
  phases.clear();
  std::vector<uint32_t> rerun;
  for (uint32_t id : top) {
    QState& s = st[id];
    if (!s.status.ok() || (!s.overflow && TopBlocksExact(s))) continue;
    if (!s.overflow) s.result.stats.lists -= s.present.size();  // counted again when it answers
    s.overflow = false;
    s.theta = 0.0f;
    s.result.hits.clear();
    rerun.push_back(id);
  }
  c.top_blocks_rerun.fetch_add(rerun.size(), std::memory_order_relaxed);
  plan_or(rerun, true, &wait2, &phases);
  rerun_overflow(&phases);
  plan_or(wait1, false, nullptr, &phases);
  std::vector<uint32_t> or2;
  for (uint32_t id : and_ids)
    if (st[id].mode == QueryMode::kAndOr && st[id].status.ok() && st[id].result.hits.size() < st[id].k) {
      st[id].result.hits.clear();
      or2.push_back(id);
    }
  plan_or(or2, true, &wait2, &phases);
  // The tree path's andor: the or-resolution where the and-resolution found fewer than k hits.
  std::vector<uint32_t> tree2;
  for (uint32_t id : tree_ids)
    if (st[id].mode == QueryMode::kAndOr && st[id].status.ok() && st[id].result.hits.size() < st[id].k) {
      st[id].result.hits.clear();
      st[id].prog = std::move(st[id].prog_or);
      tree2.push_back(id);
    }
  plan_tree(tree2, &phases);
  SEARCH_RETURN_IF_ERROR(run(phases));
  // Round 3: andor's or-part that waited for theta (and round 2's overflows).
  phases.clear();
  rerun_overflow(&phases);
  plan_or(wait2, false, nullptr, &phases);
  SEARCH_RETURN_IF_ERROR(run(phases));
  // Round 4, only when round 3 overflowed.
  phases.clear();
  rerun_overflow(&phases);
  SEARCH_RETURN_IF_ERROR(run(phases));
  const uint64_t micros = MicrosSince(t0);
  c.calls.fetch_add(1, std::memory_order_relaxed);
  c.total_ns.fetch_add(NanosSince(t0), std::memory_order_relaxed);
  out->reserve(nq);
  for (size_t i = 0; i < nq; ++i) {
    QState& s = st[i];
    if (s.status.ok() && s.theta > 0.0f && s.result.hits.size() == s.k && s.result.hits.back().score > 0.0f) {
      c.theta_ratio_ppm.fetch_add(static_cast<uint64_t>(1e6 * s.theta / s.result.hits.back().score),
                                  std::memory_order_relaxed);
      c.theta_ratio_n.fetch_add(1, std::memory_order_relaxed);
    }
    if (!s.status.ok()) {
      out->emplace_back(s.status);
      continue;
    }
    // The CPU engine runs andor's or-resolution after fewer than k hits: its lists count again.
    if (s.one_list_andor && s.result.hits.size() < s.k) s.result.stats.lists += s.present.size();
    s.result.stats.micros = micros;
    out->emplace_back(std::move(s.result));
  }
  return Status::Ok();
}

GpuEngineTimes EngineTimes() {
  const EngineCounters& c = Counters();
  GpuEngineTimes t;
  t.calls = c.calls.load(std::memory_order_relaxed);
  t.rounds = c.rounds.load(std::memory_order_relaxed);
  t.enqueue_ns = c.enqueue_ns.load(std::memory_order_relaxed);
  t.wait_ns = c.wait_ns.load(std::memory_order_relaxed);
  t.total_ns = c.total_ns.load(std::memory_order_relaxed);
  t.or_theta = c.or_theta.load(std::memory_order_relaxed);
  t.or_pruned = c.or_pruned.load(std::memory_order_relaxed);
  t.or_dense = c.or_dense.load(std::memory_order_relaxed);
  t.or_overflow = c.or_overflow.load(std::memory_order_relaxed);
  t.top_blocks = c.top_blocks.load(std::memory_order_relaxed);
  t.top_blocks_rerun = c.top_blocks_rerun.load(std::memory_order_relaxed);
  t.tree = c.tree.load(std::memory_order_relaxed);
  t.tree_count_only = c.tree_count_only.load(std::memory_order_relaxed);
  t.and_bounded = c.and_bounded.load(std::memory_order_relaxed);
  t.theta_ratio_ppm = c.theta_ratio_ppm.load(std::memory_order_relaxed);
  t.theta_ratio_n = c.theta_ratio_n.load(std::memory_order_relaxed);
  return t;
}

namespace {
bool HasPhrase(const QueryNode& node) {
  if (node.kind == QueryNode::Kind::kPhrase) return true;
  for (const QueryNode::Clause& c : node.clauses)
    if (HasPhrase(c.node)) return true;
  return false;
}
}  // namespace

std::optional<Result<SearchResult>> AnswerFromLengths(const GpuShardView& shard, const GpuQueryInput& in) {
  if (!in.count || in.k != 0 || (in.tree != nullptr && HasPhrase(*in.tree))) return std::nullopt;
  QState s;
  if (Prepare(shard, in, &s, /*host_only=*/true)) return std::nullopt;  // the device's work
  if (!s.status.ok()) return Result<SearchResult>(s.status);
  return Result<SearchResult>(std::move(s.result));
}

Result<SearchResult> ExecuteQueryGpu(GpuContext& ctx, const GpuShardView& shard, std::span<const GpuTermInput> terms,
                                     QueryMode mode, uint32_t k) {
  GpuQueryInput q;
  q.terms = terms;
  q.mode = mode;
  q.k = k;
  std::vector<Result<SearchResult>> out;
  SEARCH_RETURN_IF_ERROR(ExecuteBatchGpu(ctx, shard, std::span<const GpuQueryInput>(&q, 1), &out));
  return std::move(out[0]);
}

}  // namespace search::gpu
