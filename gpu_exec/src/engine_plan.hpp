// The GPU engine's host planning (the top layer below gpu_engine.hpp's API): validates each
// query of a batch and keeps its host-side state through the rounds (QState), chooses each
// or-query's path (theta round, pruned, dense) from host metadata alone (list lengths, block
// counts and max scores), bounds each query's device scratch, and groups the queries into the
// launch sequences (Phase) that dispatch (dispatch.cuh) enqueues. No CUDA here.
// Thread-safety: functions over the caller's state; no shared data.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/query.hpp"
#include "core/query_tree.hpp"
#include "core/status.hpp"
#include "cpu_exec/cpu_executor.hpp"
#include "engine_desc.hpp"
#include "gpu_exec/gpu_engine.hpp"
#include "phrase_plan.hpp"

namespace search::gpu::engine_internal {

// Every scratch and staging piece starts on this boundary (Arena, GpuContext::Impl::Stage,
// RunRound's pinned layout), so that host and device layouts of the same pieces agree.
inline constexpr size_t kScratchAlign = 256;
constexpr size_t Align(size_t x) {
  return (x + kScratchAlign - 1) & ~(kScratchAlign - 1);
}

inline constexpr uint32_t kMaxBatchY = 4096;  // queries per launch sequence (gridDim.y)
// Device memory one or-sequence may take for its dense accumulators and keys.
inline constexpr uint64_t kOrGroupBytes = uint64_t{2} << 30;

// The launch sequences (phases) of a round; an or-query's path is one of the kOr kinds; a tree or
// count query runs kTree (with a top-k) or kTreeCount (k == 0: the count alone).
enum class PhaseKind : uint8_t { kAnd, kOrDense, kOrPruned, kTheta, kTopBlocks, kTree, kTreeCount };

// One query's host-side state through the rounds.
struct QState {
  Status status;
  bool done = false;
  QueryMode mode = QueryMode::kAnd;
  uint32_t k = 0;
  uint32_t n = 0;                // terms
  bool one_list_andor = false;   // an andor of one list, run as or (its or-resolution is its and-resolution)
  std::vector<DevList> present;  // canonical order, present terms only
  std::vector<float> max_score;  // per present list, sanitized (negative / NaN: +inf)
  // or planning (PlanOr): theta from the theta round (0: none), the list it is taken from, and
  // the pruned plan: essential lists, the other lists' bound per list, the candidate bound.
  float theta = 0.0f;
  uint32_t theta_slot = 0;
  // RequiredOr: a should list whose best documents may outscore the must list's (its max_score is
  // higher); the theta round also samples them (kNone: none). Theta is the higher of the two.
  uint32_t alt_theta_slot = kNone;
  PhaseKind or_path = PhaseKind::kOrDense;
  uint32_t ess_mask = 0;
  std::vector<float> rest;
  // Per essential list: the essential lists gathered before it (PlanOr), whose bounds rest leaves out.
  std::vector<uint32_t> omit;
  uint64_t cap = 0;
  // With theta: the gather bounds the other lists by their block maxima over each essential block,
  // not by their max_scores (kernel_or.cuh).
  bool bounded = false;
  bool overflow = false;  // the pruned attempt overflowed: rerun dense
  // The tree path (a tree or a count): the program the next tree phase runs (engine_desc.hpp's
  // ops over the present slots) and, for andor, the or-resolution's, run when the first finds
  // fewer than k hits.
  bool tree = false;
  bool count = false;
  std::vector<uint32_t> prog, prog_or;
  // A flat query with a count and k > 0 whose hits take the flat paths: its count (prog) comes from
  // a kTreeCount phase in the first round (the hits are not touched by it).
  bool count_phase = false;
  // A tree of one must term with should and must_not terms and a top k (RequiredOr): its hits
  // take the pruned or-path over the must and should lists (MaxScore's essential lists, theta
  // from the must list: each of its postings is a match); a candidate that the must list
  // (req_slot, probed first) does not hold is dropped, as one that a must_not list (excl_mask, a
  // bit per slot, bounds 0, never a source) holds. Where that path cannot run (no theta and many
  // postings, an overflow) the tree path (prog) instead.
  bool required_or = false;
  uint32_t req_slot = 0;
  uint32_t excl_mask = 0;
  // The tree's phrase leaves (phrase_plan.hpp): their slots follow the present terms' in present.
  std::vector<PhraseLeaf> phrases;

  SearchResult result;
  std::chrono::steady_clock::time_point t0;
};

// One launch sequence's host view: which queries, where their answers land in pinned memory.
struct Phase {
  PhaseKind kind = PhaseKind::kAnd;
  std::vector<uint32_t> ids;
  std::vector<uint32_t> hit_off;  // per query, into hits
  // kTheta: per entry, the list its sample is drawn from (a query with alt_theta_slot has two
  // entries in one phase: theta_slot's, then alt_theta_slot's).
  std::vector<uint32_t> theta_slot;
  uint32_t total_k = 0;
  QueryOut* h_out = nullptr;
  DevHit* h_hits = nullptr;
  size_t PinnedBytes() const { return Align(ids.size() * sizeof(QueryOut)) + Align(size_t{total_k} * sizeof(DevHit)); }
};

Phase MakePhase(PhaseKind kind, std::vector<uint32_t> ids, const std::vector<QState>& st);

// Validates one query and fills its state; false when it is already answered (s->status says how).
// A tree or count query is compiled for the tree path (s->tree, CompileTree).
// host_only: the lists' device blobs are not needed (AnswerFromLengths); a present slot's meta is
// then a placeholder that no kernel may read.
bool Prepare(const GpuShardView& shard, const GpuQueryInput& in, QState* s, bool host_only = false);

// The postfix program (engine_desc.hpp's tree ops) of `resolved` (no kDefault left), whose tokens
// are among the sorted `terms`; slot_of[i] is terms[i]'s present slot (kTreeAbsent: none).
// InvalidArgument for a bare clause, a token not in `terms`, a root that is no boolean or nesting
// past kTreeFrames; a phrase takes its slot from `phrases` (phrase_plan.hpp; nullptr: a phrase is
// GpuUnimplemented).
Status CompileTree(const QueryNode& resolved, std::span<const std::string> terms, std::span<const uint32_t> slot_of,
                   std::vector<uint32_t>* prog, PhraseCollector* phrases = nullptr);

// Whether an or-query takes the theta round first: a list, at least min_postings postings,
// and a list of at least k postings to take the k-th best contribution from (else theta would be
// 0). Sets theta_slot: the list of the highest max_score among those (fewer postings on ties).
// RequiredOr: the must list (each of its postings is a match), and alt_theta_slot the should list
// of the highest max_score when that is above the must list's: the sample of its best documents
// that the must list holds bounds theta too, higher where the must list's terms score low.
bool NeedTheta(QState& s, uint64_t min_postings);

// Plans an or-query given s.theta (0 when there was no theta round): lists taken by increasing
// max_score whose running sum times ScoreSlack stays below theta are non-essential (no document
// only they hold can reach theta <= the k-th best score; strict, so bounds of 0 never prune
// against theta 0); the rest are essential. An essential list's rest bounds the other lists but
// those essential ones with fewer postings (ties: the earlier slot; omit has their bits): a
// document such a list holds is gathered from it, so a document gathered from this one lacks them.
// The pruned path when theta > 0 (at most or_candidate_cap candidates) or the essential lists'
// postings are few, else the dense path.
void PlanOr(QState& s, uint32_t num_docs, const GpuContextOptions& o);

// The pruned path's probing steps (kernel_or.cuh): the lists by decreasing max_score (fewer
// postings first on ties), and per list (as a candidate's source) and step the bound of the
// lists probed after that step: with `progressive` (the query has theta > 0), their max_scores
// (candidates are dropped between steps), else +inf (none is).
void PlanSteps(const QState& s, OrPDesc& d, OrPList* pl, bool progressive);

// Whether an and-query is bounded (AndDesc: theta from a sample of its best lead contributions,
// then candidates dropped by their bounds), and how many lead postings its sample takes: 0 when
// it is not. Bounded: a top k (no count), at least min_lead postings in the shortest list, and,
// with the other lists' documents drawn independently, at least 4k expected matches; the sample
// expects 8k matches, within [256, 8192] postings and at most the list.
uint32_t AndSampleWant(const QState& s, uint32_t num_docs, uint64_t min_lead);

// Whether a probed list is decoded whole: the candidates outnumber its blocks kDenseFactor times.
inline bool ProbeDense(uint64_t cap, const DevList& l) {
  return cap >= kDenseFactor * l.num_blocks;
}

// The theta sample's buffer: twice the sample (the lowest sampled bin may hold more).
inline uint64_t SampleCap(uint32_t sample) {
  return uint64_t{2} * sample;
}

// The one-list top-k of one round (kTopBlocks, kernel_or.cuh's TopBlocksGatherKernel): for a
// query that would take the theta round (NeedTheta) with one list, no must_not list and k <=
// kTopBlocksMaxK. Its candidates are the postings that reach the floor of the k-th highest block
// max's bin: k of them when the maxima are attained, more on ties; past the buffer the query
// reruns on the theta path, as it does when TopBlocksExact fails.
inline constexpr uint32_t kTopBlocksMaxK = 1024;
inline bool TopBlocksEligible(const QState& s) {
  return s.present.size() == 1 && s.excl_mask == 0 && !s.required_or && s.k >= 1 && s.k <= kTopBlocksMaxK;
}
inline uint32_t TopBlocksCap(const QState& s) {
  return static_cast<uint32_t>(std::min<uint64_t>(s.present[0].count, uint64_t{8} * s.k + 1024));
}
// Whether a kTopBlocks answer is exact (s.theta: the floor F it read down to, hits best first):
// F = 0 read every posting; otherwise the k-th best must reach F * ScoreSlack(1), above every
// posting of the blocks not read (their maxima are below F; a score exceeds its block's maximum
// by less than the slack).
bool TopBlocksExact(const QState& s);

// Bytes of device scratch one query needs on each or-path: dense, pruned (PlanOr has set its
// cap) and the theta round.
uint64_t OrQueryBytes(const QState& s, uint32_t num_docs);
uint64_t OrPrunedBytes(const QState& s, uint32_t num_docs);
uint64_t ThetaBytes(const QState& s, uint32_t sample);
// The tree path: a bitmap per slot, and with k > 0 the ranked matches (at most TreeMatchBound),
// their tfs and scores, and the top-k keys.
uint64_t TreeBytes(const QState& s, uint32_t num_docs);

// A bound on the documents a tree program matches: a slot its list's count, a boolean with a must
// or filter clause the least of those clauses' bounds, one without the sum of its should clauses'.
uint64_t TreeMatchBound(std::span<const uint32_t> prog, std::span<const DevList> present);

// The exact count of a program that list lengths answer, as cpu_exec's CountTermBoolean does: a
// root boolean of term clauses whose required (must, filter) terms are one present list and no
// must_not term is present (that list's count; should clauses change no match), or without
// required terms one present should list and no must_not one; an absent required term, or no
// present required or should term, counts 0. False when the program is another shape (a decoded
// slot, meta == nullptr, has no exact length).
bool TreeCountFromLengths(std::span<const uint32_t> prog, std::span<const DevList> present, uint64_t* total);

// Whether a program is a root boolean of term clauses: one must clause of a present list, should
// and must_not clauses (absent terms among them add nothing), no filter, each slot once, the
// present should and must slots in increasing order when more than two (the or-path sums
// contributions in slot order, the tree in clause order: equal floats then). Sets *req to the must
// slot and *excl to the present must_not slots (a bit each). Its matches are the must list's
// postings that no must_not list holds; a match's score is its or-score over the other lists.
bool RequiredOr(std::span<const uint32_t> prog, std::span<const DevList> present, uint32_t* req, uint32_t* excl);

// Appends the phases for `ids`: chunks of at most kMaxBatchY queries (kMaxSpreadQueries for the
// pruned kinds); or-phases also bounded in memory (kOrGroupBytes).
void AddPhases(PhaseKind kind, const std::vector<uint32_t>& ids, const std::vector<QState>& st, uint32_t num_docs,
               const GpuContextOptions& o, std::vector<Phase>* phases);

}  // namespace search::gpu::engine_internal
