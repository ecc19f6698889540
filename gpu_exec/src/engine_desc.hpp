// The GPU engine's descriptors: what the host plans (engine_plan.hpp) and uploads (dispatch),
// and what the kernels read, one per query or per list of a batch. Plain structs of device
// pointers and counts, laid out alike on the host and the device; the host fills them, the
// kernels only read them (results go through the pointers they hold).
// Thread-safety: plain data.
#pragma once

#include <cmath>
#include <cstdint>

#include "codec/block_codec.hpp"
#include "core/host_device.hpp"

namespace search::gpu::engine_internal {

inline constexpr uint32_t kThreads = 256;  // every kernel: 8 warps per CTA
inline constexpr uint32_t kWarpsPerCta = kThreads / 32;
inline constexpr uint32_t kHistBits = 13;  // score-key bins for the top-k threshold
inline constexpr uint32_t kHistBins = 1u << kHistBits;
inline constexpr uint32_t kNone = 0xffffffffu;
inline constexpr uint32_t kMaxSteps = 32;  // == kGpuMaxTerms
inline constexpr uint32_t kErrCorrupt = 1u;
// A pruned or-query found more candidates than its buffer holds: the host reruns it dense.
inline constexpr uint32_t kErrOverflow = 2u;
// A later list is decoded whole when the candidates are at least this many times its block count
// (most blocks would hold a candidate anyway); otherwise only blocks holding candidates.
inline constexpr uint64_t kDenseFactor = 2;
// The linear bins of an and-query's lead contributions (AndDesc::lead_hist), over [0, its max_score].
inline constexpr uint32_t kLeadBins = 1024;

// One list of a query on the device.
struct DevList {
  const BlockMeta* meta = nullptr;
  const uint8_t* payload = nullptr;
  uint32_t count = 0;
  uint32_t num_blocks = 0;
  uint32_t base_doc = 0;
  float idf = 0.0f;
};

// What comes back to the host per query (zeroed before the launches).
struct QueryOut {
  uint32_t hits = 0;
  uint32_t error = 0;
  float theta = 0.0f;  // theta phase: the lower bound on the k-th best score (kernel_or.cuh)
  uint32_t total = 0;  // tree phases: the matching documents (kernel_tree.cuh)
  unsigned long long blocks = 0, postings = 0, bytes = 0, freq_blocks = 0, scored = 0;
};

struct ShardDev {
  const float* norms;
  uint32_t doc_begin;
  uint32_t num_docs;
  float k1;
  float norm_floor;  // <= every norm (0: unknown)
};

// One and-query. Lists are at lists[list_off + slot] in canonical order; step j handles slot
// step_slot[j] (steps: shortest list first).
// Bounded (lead_doc != nullptr; kernel_and.cuh): the shortest list is decoded into lead_doc with
// each posting's exact contribution (lead_score); the `sample` desc beside it takes the postings of
// the highest contributions (their lead_hist bins) through every step and scores them, and the
// k-th best of those real scores is theta (*theta); then only postings whose contribution plus the
// later lists' max_scores (rest) can reach theta are candidates, and at each step a candidate whose
// bound so far plus its located block's max plus the rest cannot is dropped before any decoding.
struct AndDesc {
  uint32_t n = 0;  // 0: nothing to do (a sample desc of a query that is not bounded)
  uint32_t cap = 0;  // the candidate buffers (main: the shortest list's count; sample: its buffer)
  uint32_t list_off = 0;
  uint32_t k = 0;
  uint32_t dense_mask = 0;  // bit j: step j may decode its whole list (when its candidates still outnumber
                            // its blocks kDenseFactor times; block b in slot b)
  uint8_t step_slot[kMaxSteps] = {};
  uint8_t slot_step[kMaxSteps] = {};
  uint32_t* cand_doc[2] = {};
  uint32_t* cand_orig[2] = {};  // the candidate's position in the shortest list
  uint32_t* cand_block = nullptr;
  uint32_t* posmat = nullptr;    // (n - 1) * pos_stride: position (block * 128 + i) in step j's list, by cand_orig
  uint32_t pos_stride = 0;       // the shortest list's count (the sample shares the main desc's posmat)
  uint32_t* decoded = nullptr;   // decoded blocks, 128 docIDs per slot
  uint32_t* needed = nullptr;    // per block of the current list: 1 when a candidate needs it (zeroed)
  uint32_t* slot_of = nullptr;   // per block: its slot in `decoded`
  uint32_t* counters = nullptr;  // [j]: candidates after step j; [kMaxSteps + j]: slots used (zeroed)
  float* scores = nullptr;       // survivors' scores and docs (cap)
  uint32_t* docs = nullptr;
  QueryOut* out = nullptr;
  // Bounded queries (both descs share the lead arrays; nullptr: not bounded).
  uint32_t lead_count = 0;         // postings of the shortest list
  uint32_t* lead_doc = nullptr;    // lead_count docIDs
  float* lead_score = nullptr;     // lead_count exact contributions
  float* bound = nullptr;          // per lead position: contribution plus the located block maxima so far
  uint32_t* lead_hist = nullptr;   // kLeadBins over lead_score (zeroed)
  uint32_t* sample_bin = nullptr;  // the lowest bin the sample takes
  float* theta = nullptr;          // main desc: the sample's k-th best score floor (zeroed: 0 prunes nothing)
  float lead_scale = 0.0f;         // kLeadBins / the shortest list's max_score
  float slack = 1.0f;              // ScoreSlack(n)
  uint32_t sample = 0;             // 1: this is the sample desc (its scores go to *theta, not the answer)
  uint32_t sample_want = 0;        // main desc: postings the sample should take (the lowest bin may add more)
  float rest[kMaxSteps] = {};      // main desc: sum of the max_scores of the steps after step j
};

// One or-query: its present lists at lists[list_off + i], i < m, in canonical order.
struct OrDesc {
  uint32_t m = 0;
  uint32_t list_off = 0;
  float* acc = nullptr;  // num_docs
  QueryOut* out = nullptr;
};

// Top-k input of one query: compact (scores[i], docs[i]) for i < *d_count, or dense
// (docs == nullptr: scores[i] is doc_begin + i's). Either way an item scored -0.0f is no document
// (a sum of non-negative contributions from 0.0f is never -0.0f).
struct TopkDesc {
  const float* scores = nullptr;
  const uint32_t* docs = nullptr;
  const uint32_t* d_count = nullptr;  // nullptr: n
  uint32_t n = 0;
  uint32_t k = 0;
  uint32_t seg_begin = 0;         // in the batch's key arrays
  uint32_t out_begin = 0;         // in the batch's hit array
  uint32_t key_cap = 0;           // the query's key segment (an invariant: more items at or above the
                                  // threshold bin than it holds set kErrOverflow, and none are selected)
  uint32_t* hist = nullptr;       // kHistBins (zeroed)
  uint32_t* sel_count = nullptr;  // (zeroed)
  int* seg_end = nullptr;
  QueryOut* out = nullptr;
};

struct DevHit {  // layout of ScoredDoc
  uint32_t doc;
  float score;
};

// An upper bound must be non-negative to be usable; anything else (a corrupted NaN or a negative)
// becomes +inf, which never prunes (cpu_exec's SanitizeBound).
SEARCH_HD inline float SanitizeBoundHD(float v) {
  return v >= 0.0f ? v : INFINITY;
}

// ------------------------------------------------------------------------------- pruned or

struct ThetaDesc {
  DevList list;
  uint32_t slot = 0;  // the list's canonical slot in the query
  uint32_t k = 0;
  uint32_t sample = 0;             // documents of `list` to score exactly (>= 1)
  uint32_t blocks = 0;             // blocks of the highest block maxima the round reads (>= k)
  uint32_t* block_hist = nullptr;  // kHistBins over the blocks' maxima (zeroed)
  uint32_t* block_bin = nullptr;   // the lowest block-max bin read
  uint32_t* hist = nullptr;        // kHistBins over the read blocks' contributions (zeroed)
  uint32_t* sample_bin = nullptr;  // ThetaSelectKernel's lowest sampled bin
  QueryOut* out = nullptr;         // theta lands in out->theta
  // 0: the list's k-th best contribution bounds nothing (must_not lists may exclude its
  // documents): theta comes from the sample's exact scores alone.
  uint32_t contrib_bound = 1;
};

// A one-list top-k (PhaseKind::kTopBlocks, kernel_or.cuh's TopBlocksGatherKernel), beside its
// ThetaDesc (list, k, blocks = k, block_hist, block_bin, out): the postings of the blocks of the k
// highest block maxima whose contribution reaches the floor of the lowest bin read (out->theta).
struct TopBlocksDesc {
  uint32_t cap = 0;           // the candidate buffer (past it: kErrOverflow)
  uint32_t* count = nullptr;  // candidates appended (zeroed; may run past cap)
  uint32_t* docs = nullptr;
  float* scores = nullptr;
};

// Per list of a pruned or-query (parallel to its DevList).
struct OrPList {
  float rest = 0.0f;       // bound of the other lists' summed contributions (essential lists)
  uint32_t omit = 0;       // essential: the lists rest leaves out (essential lists gathered before it)
  uint32_t essential = 0;  // 1: its documents are candidates
  uint32_t ess_off = 0;    // essential: the query's essential blocks in the lists before it
  uint32_t dense = 0;      // 1: decoded whole for probing (block b in slot b)
  uint32_t exclude = 0;    // 1: a must_not list: a candidate found in it is dropped, it adds nothing
  uint32_t require = 0;    // 1: the must list of a RequiredOr query: a candidate not in it is dropped
  uint32_t* decoded = nullptr;
  uint32_t* needed = nullptr;     // per block (zeroed; unused when dense)
  uint32_t* slot_of = nullptr;    // per block: its slot in decoded (set with the need_list entry)
  uint32_t* need_list = nullptr;  // the needed blocks, counters[1 + s] of them (slot j: entry j)
  // Progressive probing: after[t] bounds the contributions of the lists probed after step t to a
  // candidate taken from this list (this list itself excluded: its contribution is in the partial).
  float after[kMaxSteps] = {};
};

// A pruned candidate dropped by progressive probing (its src).
inline constexpr uint8_t kDeadSrc = 0xff;

struct OrPDesc {
  uint32_t m = 0;
  uint32_t list_off = 0;
  uint32_t ess_blocks = 0;  // the essential lists' blocks (OrGatherKernel's items)
  uint32_t cap = 0;         // the candidate buffer (past it: kErrOverflow)
  float theta = 0.0f;
  float slack = 1.0f;
  // 1 (with theta): the gather bounds the other lists' contributions by their block maxima over
  // each block's documents, then over each document's block, not by their max_scores (kernel_or.cuh).
  uint32_t bounded = 0;
  // 1: progressive probing drops a candidate at the block it is located in (OrLocateKernel) when
  // its partial score plus that block's max plus the later lists' bound cannot reach theta.
  uint32_t probe_bound = 0;
  uint32_t* bitmap = nullptr;    // a bit per shard document (zeroed)
  uint32_t* counters = nullptr;  // [0]: candidates, [1 + s]: needed blocks of list s (zeroed)
  uint32_t* cand = nullptr;      // cap docIDs
  uint8_t* src = nullptr;        // cap: the slot a candidate came from (its pos there is set)
  uint32_t* pos = nullptr;       // m * cap: list s's block, then position (kNone: absent)
  float* scores = nullptr;       // cap: the partial score while probing progressively, then the score
  QueryOut* out = nullptr;
  uint8_t order[kMaxSteps] = {};  // progressive probing: the slot probed at step t (t < m)
};

// The pruned kernels spread a launch's items over at most this many queries (kernel_or.cuh).
inline constexpr uint32_t kMaxSpreadQueries = kThreads;

// ------------------------------------------------------------------------------- trees

// A resolved query tree as a postfix program (engine_plan.cpp compiles it, kernel_tree.cuh runs
// it per word of 32 documents to match, per match to score), one uint32 per op: bits 0-1 the
// kind, 2-4 the occurrence (core Occur: the clause's occurrence in its parent boolean), 5 a flag,
// 8-15 a term slot.
//   kTreeBegin  opens a boolean (flag: it has a must or filter clause);
//   kTreeTerm   a term clause of the open boolean: the present term at `slot` (kTreeAbsent: a term
//               with no postings here, which matches nothing);
//   kTreeEnd    closes the open boolean, which is a clause (occurrence) of the one below it; the
//               root's end (occurrence 0) gives the document's answer.
inline constexpr uint32_t kTreeBegin = 0, kTreeTerm = 1, kTreeEnd = 2;
inline constexpr uint32_t kTreeAbsent = 0xff;
inline constexpr uint32_t kTreeFrames = 9;  // nested booleans: core's kMaxTreeDepth below the root
SEARCH_HD constexpr uint32_t TreeOp(uint32_t kind, uint32_t occur, uint32_t flag, uint32_t slot) {
  return kind | (occur << 2) | (flag << 5) | (slot << 8);
}

// A slot whose list is decoded already (DevList::meta == nullptr, e.g. a phrase): *d_len ascending
// docIDs of the shard and their tfs (> 0), at most cap. docs == nullptr: it matches nothing.
struct TreeLeaf {
  const uint32_t* docs = nullptr;
  const uint32_t* tfs = nullptr;
  const uint32_t* d_len = nullptr;
  uint32_t cap = 0;
};

// One tree-path query: its slots at lists[list_off + s] (and leaves[list_off + s]), s < m, its
// program at progs[prog_off], prog_len ops. Bitmaps have a bit per shard document, words =
// ceil(num_docs / 32): bit b of word w is the document doc_begin + 32w + b. The ranked pieces
// (k > 0) go by chunks of kThreads words.
struct TreeDesc {
  uint32_t m = 0;
  uint32_t list_off = 0;
  uint32_t prog_off = 0;
  uint32_t prog_len = 0;
  uint32_t cap = 0;               // a bound on the matches (k > 0: the compact arrays' length)
  uint32_t score_mask = 0;        // bit s: slot s's tf can reach the score (else its tfs are not gathered)
  uint32_t* bits = nullptr;       // m * words (zeroed): slot s's documents at bits[s * words ..]
  uint32_t* match = nullptr;      // k > 0: words, the query's matches
  uint32_t* wpre = nullptr;       // k > 0: words, the matches in the chunk's earlier words
  uint32_t* chunk_base = nullptr; // k > 0: per chunk, the matches before it
  uint32_t* tfc = nullptr;        // k > 0: m * cap, tfc[s * cap + r]: slot s's tf at the r-th match (where s has it)
  uint32_t* docs = nullptr;       // k > 0: cap, the r-th match's docID
  float* scores = nullptr;        // k > 0: cap, its score
  QueryOut* out = nullptr;        // out->total: the matches
};

}  // namespace search::gpu::engine_internal
