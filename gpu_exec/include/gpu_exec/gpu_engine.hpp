// The exact BM25 top-k on the GPU over one shard's compressed lists, for one query or a batch:
// the same answers as cpu_exec's ExecuteQuery (documents and order identical; scores summed in
// canonical term order with the same float operations, so equal to the last bit).
//
// Lists are read in the codec block format (codec/FORMAT.md) straight from device memory (a
// GpuListCache entry or any device copy of CachedList::bytes()); the host keeps the parsed
// ListView for metadata (lengths, block counts) that sizes the launches.
//   and:   lists shortest first; the shortest is decoded whole (its postings are the candidates);
//          for each longer list every candidate binary-searches the skip array (BlockMeta.last_doc)
//          for its block (Ding 2009 §8) and only the blocks holding candidates are decoded, a warp
//          per block, into compacted slots; when the candidates outnumber the list's blocks
//          (kDenseFactor) the whole list is decoded instead (the comparable-lengths case, Liu 2018
//          §3.1.2; the lookup is still a per-candidate binary search, not a merge path). Survivors
//          are appended unordered; frequencies are read (FreqAt) only for the final survivors,
//          whose contributions are summed in canonical order with the resident norms. A step
//          whose candidates no longer outnumber its list's blocks kDenseFactor times decodes only
//          their blocks, whatever the shortest list's length.
//          bounded (a top k, the shortest list >= and_bound_min_lead postings, >= 4k matches
//            expected from the lengths; AndSampleWant): the shortest list is decoded with each
//            posting's exact contribution; a sample of its highest contributions (expected to hold
//            8k matches, 256 to 8,192 postings) goes through the same steps and is scored, and the
//            floor of its k-th best score is theta (real documents: a lower bound on the k-th
//            best; 0 when the sample matched fewer than k). Then a posting is a candidate only if
//            its contribution plus the other lists' max_scores can reach theta, and at each step
//            a candidate whose bound (its contribution plus the block maxima of the blocks it
//            was located in so far plus the later lists' max_scores) cannot reach theta is dropped
//            before any block is decoded for it (docs/SCORING.md's slack, core/score_slack.hpp).
//            No extra host synchronization: theta stays on the device.
//   or:    exact pruned (the GPU analogue of MaxScore, kernel_or.cuh):
//          theta: the list of the highest max_score among those with >= k postings is scored whole
//            into a fine histogram; the floor of the bin holding its k-th best contribution is a
//            lower bound on the query's k-th best score (a float sum of non-negative contributions
//            is >= each of them). The documents of that list's best contributions (or_theta_sample
//            of them) are then scored exactly over every list, and the floor of the bin holding
//            their k-th best exact score raises theta (any k real documents' scores bound the k-th
//            best from below). One host synchronization brings theta back.
//          essential lists: taken by increasing max_score, the lists whose running sum times the
//            pruning slack (ScoreSlack, core/score_slack.hpp) stays strictly below theta are
//            non-essential: a document only they hold cannot reach the top k. A candidate is a document of an
//            essential list whose own contribution plus the other lists' max_scores can reach
//            theta (whole blocks skipped by their block max), less the essential lists of fewer
//            postings: a document one of those holds is gathered from it. The other lists' bound is
//            tighter than their max_scores: per block
//            the highest block max of their blocks over its documents, per document the block max
//            of the block that can hold it (as block-max MaxScore bounds a document on the CPU).
//          pruned: the candidates (deduped by a bitmap over the shard; each keeps its position
//            in the list it came from) are found in the other lists as and does (only the
//            blocks holding candidates decoded, binary search in the block), but each located in
//            the skip array from a guess at the list's even spread, then galloping (LocateBlock),
//            one list per step by decreasing max_score; with theta, after each step a
//            candidate whose contributions found so far plus the max_scores of the lists still
//            to probe cannot reach theta is dropped (MaxScore's probing of its non-essential
//            lists), so later lists are searched for the survivors only; a candidate is dropped
//            already at the block it is located in when that block's max stands in for the
//            contribution and the bound still falls short (block-max MaxScore), before the block
//            is decoded for it.
//            Contributions are summed in canonical order. More than or_candidate_cap candidates
//            rerun the query dense.
//          dense fallback for queries without theta whose essential lists hold more than
//            num_docs / 8 postings (or when the bounds are inconsistent): a per-query accumulator
//            over the shard's documents (-0.0f = no posting), lists added one launch per slot.
//          Queries of few postings or without a list of >= k postings skip the theta round (all
//          lists essential). A single term (k <= 1024, no must_not) skips it: one round decodes
//          the blocks whose maxima reach the bin of its k-th highest block max and takes its
//          postings that reach that bin's floor F; exact when the k-th best reaches F times the
//          score slack (every other block's maximum is below F), else (ties, a full buffer) the
//          query reruns with the theta round.
//   andor: and; if fewer than k hits, or (Ding §8): a second round for those queries only.
//   trees and counts (GpuQueryInput::tree or ::count): exhaustive, no pruning. The tree is
//          resolved (ResolveMode; andor: the and-resolution, then the or-resolution in a second
//          round when the first has fewer than k hits, as CpuExecutor decides it per shard) and
//          compiled on the host into a postfix program (begin boolean, term clause, end boolean).
//          Counts that list lengths answer take no GPU work (as cpu_exec's CountTermBoolean: one
//          required term and no must_not term counts that list's length, should clauses aside; a
//          sole should term its length); a bag of words with a count and k > 0 takes the flat
//          paths for its hits and counts as the and-path's survivors (and), a length, or a
//          count-only tree phase beside the or-path (or). A root boolean of one must term with
//          should and must_not terms (`+a b`, `+a -b`) and a top k takes the pruned or-path over
//          its must and should lists (theta from the must list's contributions, or with must_not
//          terms from the sample's exact scores, and from a second sample of the should list of
//          the highest max_score when that is above the must list's), probing the must list
//          first: a candidate it does not hold is dropped, as one that a must_not list holds
//          (never a source); the must list, when essential, is the only source;
//          the count is the must list's length, or with must_not terms a count-only tree phase;
//          where that path cannot run (no theta and many postings, an overflow) the tree path
//          below. Otherwise every slot gets a bit per
//          shard document: a present term's list decoded whole (docIDs only), a warp per block,
//          its bits set; a phrase leaf is a slot too, its documents and tfs from the
//          phrase producer (dispatch_phrase.cu: a thread per posting of its rarest token finds the
//          document in the other tokens' docIDs by binary search and counts the start positions
//          where every token follows, from positions resident in device_positions.hpp's layout;
//          the matches compacted in docID order; idf the float sum of the tokens' idfs in text
//          order); then a thread per word of 32 documents runs the program on bits (match rules
//          of core/query_tree.hpp: must and filter AND, must_not AND NOT, should OR where a
//          boolean has no must) and counts the matches (popcount). With k > 0 the matches are
//          ranked (a scan per chunk of words), each slot's tfs gathered at its matches (the
//          lists decoded again, tfs too), and the matches alone scored (docs/SCORING.md "Query
//          language": a term Bm25TermScore(idf, tf, norm); a boolean the float sum in clause
//          order of its matching must and should clauses, a group's sum computed first); the
//          top-k tail below picks the k best. The same documents, order, float bits and totals
//          as cpu_exec's tree evaluator (ExecuteTree).
//   top-k: a 13-bit score histogram finds the bin of the k-th score; the candidates at or above it
//          are sorted by the 64-bit key (score, ~docID) with cub::DeviceSegmentedSort: exactly
//          docs/SCORING.md's order (score desc, docID asc) whatever the compaction order.
// A batch runs as one launch sequence for all its queries (Ao 2011 §3.1): every kernel takes the
// batch's per-query descriptors (blockIdx.y = query). Scratch comes from the context's
// stream-ordered pool (one allocation per sequence); the host synchronizes once per round, at
// most four rounds per batch: (1) and, or without theta, theta for the other or-queries, trees
// and counts; (2) those or-queries, andor's or-part (or its theta), the trees' andor or-part;
// (3) andor's or-part that waited for theta; each round also reruns dense the pruned queries of
// the round before that overflowed (a fourth round only for those of the third).
// Errors per query: InvalidArgument (k; a tree whose terms are not TreeTerms, or with a bare
// clause left after resolution; a phrase token without positions), GpuUnimplemented (>
// kGpuMaxTerms terms, more than kMaxSteps present terms and phrases), Corruption (a
// list past the shard's documents, a block that fails to decode or starts below the shard).
// The GPU decodes different blocks than the CPU's pruned traversal, so a corrupt block may be
// reported by one engine and not the other; answers of intact lists are identical.
// Layers (gpu_exec/src, as in CUB): this API (gpu_engine.cu: rounds) -> host planning
// (engine_plan.hpp: validation, path choice, scratch bounds) -> dispatch (dispatch.cuh: grids,
// scratch layout, uploads, launches) -> kernels (kernel_and/or/or_dense/topk.cuh) -> warp
// primitives (engine_device.cuh, warp_decode.cuh); engine_desc.hpp holds the descriptors the host
// fills and the kernels read.
// Thread-safety: a GpuContext (stream + scratch memory) is used by one thread at a time; the
// free functions are reentrant given distinct contexts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "core/bm25.hpp"
#include "core/query.hpp"
#include "core/query_tree.hpp"
#include "core/status.hpp"
#include "cpu_exec/cpu_executor.hpp"

// cudaStream_t without including the CUDA headers here.
struct CUstream_st;

namespace search::gpu {

// Queries with more terms than this run on the CPU (the engine returns GpuUnimplemented).
inline constexpr uint32_t kGpuMaxTerms = 32;

// core/status.hpp has no Unimplemented code: the engine reports work it does not take (more than
// kGpuMaxTerms terms) as InvalidArgument whose message starts with this prefix; callers test it
// with IsGpuUnimplemented and rerun the query on the CPU.
inline constexpr const char* kGpuUnimplementedPrefix = "unimplemented on the GPU: ";
Status GpuUnimplemented(std::string what);
bool IsGpuUnimplemented(const Status& s);

// One query term on the device. list/d_blob == nullptr: no postings in this shard.
struct GpuTermInput {
  const ListView* list = nullptr;  // host view of the blob (metadata for sizing)
  const uint8_t* d_blob = nullptr;  // device copy of list->bytes(), 16-byte aligned
  float idf = 0.0f;
  // The term's positions in device_positions.hpp's layout (list->count() postings): needed for
  // every present token of a phrase, else unused.
  const uint32_t* d_positions = nullptr;
};

// One query of a batch: terms in canonical order (as for ExecuteQuery).
// With `tree` or `count` the query takes the tree path (see "trees and counts" above):
//   tree   the query's canonical tree (Query::tree, mode not yet resolved; terms, phrases, groups),
//          and terms[i] is the input of TreeTerms(*tree)[i] (Query::terms; a phrase's tokens with
//          d_positions); nullptr with count: the flat query {terms, mode};
//   count  also return the exact number of matches (has_total, total); k == 0 then asks for the
//          count alone.
// The caller keeps *tree alive until ExecuteBatchGpu returns.
struct GpuQueryInput {
  std::span<const GpuTermInput> terms;
  QueryMode mode = QueryMode::kAnd;
  uint32_t k = 10;
  const QueryNode* tree = nullptr;
  bool count = false;
};

// The shard's document range on the device: d_norms[doc - doc_begin] for doc in
// [doc_begin, doc_begin + num_docs) (resident, e.g. GpuListCache::d_norms()).
struct GpuShardView {
  const float* d_norms = nullptr;
  uint32_t doc_begin = 0;
  uint32_t num_docs = 0;
  Bm25Params params;
  // A lower bound on every norm (GpuListCache::min_norm()). With one > 0 the pruned or-path
  // bounds a posting's contribution from its tf alone and reads the norm only when that bound
  // can reach theta; 0: unknown (every norm read).
  float norm_floor = 0.0f;
};

struct GpuContextOptions {
  // Initial scratch reservation; the context's stream-ordered pool grows past it on demand and
  // keeps what it grew to (no cudaMalloc per query after warm-up).
  size_t scratch_bytes = size_t{256} << 20;
  // Or-path choice. The defaults are the engine's behaviour; tests change them to force each
  // path on small shards (answers are the same on every path).
  // or-queries of at least this many postings (and >= 2 lists) take the theta round first;
  uint64_t or_theta_min_postings = uint64_t{1} << 14;
  // the pruned path runs for every query that got a theta > 0, and for the others when the
  // essential lists hold <= num_docs / or_pruned_divisor postings (0: never; the dense
  // accumulator always);
  uint32_t or_pruned_divisor = 8;
  // candidates a pruned query with theta > 0 may collect (1 .. 2^30); past it the query reruns
  // dense (a round later). 2^22: at 25.2M documents 2^20 left ~1.8% of or-queries to rerun dense
  // and 2^24 sized buffers past need (both slower on the three logs measured, BENCHMARKS.md);
  uint32_t or_candidate_cap = uint32_t{1} << 22;
  // a pruned query with theta bounds the other lists by their blocks over each document (false: by
  // their max_scores, for tests; at 25.2M documents it ran 5-14% more or-queries a second than
  // false, and bounding queries of 3-6 lists too (not only 2 and overfull ones) 0.5-4% more on each
  // of five logs: BENCHMARKS.md).
  bool or_bounded_gather = true;
  // progressive probing drops a candidate at its block of the step's list, before that block is
  // decoded, when its partial score plus that block's max plus the later lists' max_scores cannot
  // reach theta (false: only after the probe, by the list's found contribution, for tests; at
  // 25.2M documents true decoded 5-6% fewer postings and ran 1-2% more or-queries a second on
  // each of five logs: BENCHMARKS.md).
  bool or_probe_block_bound = true;
  // documents of the theta list (its best contributions) scored exactly in the theta round to
  // raise theta (1 .. 2^24; 256 and 4096 were 2-21% slower on five logs at 25.2M documents).
  uint32_t or_theta_sample = 1024;
  // and-queries whose shortest list holds at least this many postings (and that expect enough
  // matches) are bounded: theta from a sample of their best lead postings, then a candidate is
  // dropped where its bound (its lead contribution, the block maxima found so far, the other
  // lists' max_scores) cannot reach theta, before the longer lists' blocks are decoded.
  uint64_t and_bound_min_lead = uint64_t{1} << 14;
};

// A stream and its scratch memory (a stream-ordered device memory pool plus pinned host buffers
// for results). Create one per worker thread.
class GpuContext {
 public:
  static Result<std::unique_ptr<GpuContext>> Create(const GpuContextOptions& options = {});
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;
  CUstream_st* stream() const;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit GpuContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Runs a batch of queries on ctx's stream and waits for them. out[i] is query i's answer (hits
// best first, at most k; with count, has_total and the exact total; stats filled as the CPU engine
// fills them where they apply). A query that fails alone (InvalidArgument k, Unimplemented for
// more than kGpuMaxTerms terms, Corruption of a block) gets its own error; a CUDA error fails the whole call (Unavailable / ResourceExhausted)
// and the caller reruns the batch on the CPU.
// REQUIRES: every list's docIDs lie in the shard view's range; device blobs stay valid until return.
Status ExecuteBatchGpu(GpuContext& ctx, const GpuShardView& shard, std::span<const GpuQueryInput> queries,
                       std::vector<Result<SearchResult>>* out);

// A count-only query (in.count, in.k == 0) that list lengths answer (the shapes of "trees and
// counts" above) answered from the host views alone: in.terms[i].list (nullptr: absent here) is
// read for its length and range, d_blob is neither needed nor read. The answer (or error) is what
// ExecuteBatchGpu gives the same query, stats.micros aside. nullopt: the query needs the device.
// Lets a caller skip acquiring device lists for such queries. Reentrant.
std::optional<Result<SearchResult>> AnswerFromLengths(const GpuShardView& shard, const GpuQueryInput& in);

// Where ExecuteBatchGpu's time goes, summed over every call in the process (all contexts):
// host planning and launching (enqueue), waiting for the stream (wait), and the whole call (total).
// enqueue >> wait: the host's launches bound the rate; wait >> enqueue: the GPU's work does.
// Also how or-queries (and andor's or-parts) were run: with a theta round, on the pruned path,
// on the dense path, and pruned attempts that overflowed their candidate buffer and reran dense
// (counted in or_dense too); and the tree path's runs. A query of one list that would take the
// theta round takes its top blocks in one round instead (top_blocks), and reruns on the theta
// path when they were not enough (top_blocks_rerun, counted in or_theta then).
struct GpuEngineTimes {
  uint64_t calls = 0, rounds = 0;
  uint64_t enqueue_ns = 0, wait_ns = 0, total_ns = 0;
  uint64_t or_theta = 0, or_pruned = 0, or_dense = 0, or_overflow = 0;
  uint64_t top_blocks = 0, top_blocks_rerun = 0;
  // Tree-path runs (trees and counts; andor's or-resolution counted apart), count-only among them.
  uint64_t tree = 0, tree_count_only = 0;
  // and-queries bounded by theta from a sample (GpuContextOptions::and_bound_min_lead).
  uint64_t and_bounded = 0;
  // Quality of theta: over queries with theta > 0 that found k hits, the sum of theta / (k-th
  // best score) in millionths, and their number (1e6 when theta is the k-th best score itself).
  uint64_t theta_ratio_ppm = 0, theta_ratio_n = 0;
};
GpuEngineTimes EngineTimes();

// One query: ExecuteBatchGpu with a batch of one.
Result<SearchResult> ExecuteQueryGpu(GpuContext& ctx, const GpuShardView& shard, std::span<const GpuTermInput> terms,
                                     QueryMode mode, uint32_t k);

}  // namespace search::gpu
