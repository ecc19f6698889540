// Term booleans (tree_count.hpp) on the CPU with dynamic pruning: the fast paths CpuExecutor
// tries before the exhaustive tree evaluator (tree_query.hpp), with the same answers.
//   count     CountTermBoolean (docID-set algebra, nothing scored), separately from the top k,
//             so pruning never touches it;
//   top k     a bag of distinct terms (every clause kMust, or every clause kShould) runs the flat
//             block-max paths (ExecuteQuery: and / or). Otherwise, when some clause is required
//             (kMust or kFilter): TopRequired below. Should clauses with kMustNot ones and no
//             required clause are left to the tree evaluator.
// TopRequired: the shortest required list drives, a block at a time. While the heap is full, the
// docID range ahead is bounded from block metadata (the kMust and kShould lists' block maxima; a
// should list whose decoded block shows no document before some docID adds nothing up to there,
// so a rare optional term does not hold a frequent required one back) and skipped undecoded when
// the bound cannot beat the threshold; a driving block that passes is scored eight lanes at a
// time and a document goes on only while its lead score plus the other lists' bounds can beat
// the threshold: into the other required lists (next_geq), past the excluded ones (next_geq, no
// frequency decoded), then the kMust lists are scored and the kShould lists probed while the
// partial score plus their block maxima can still win. Scores are the float sum in clause order
// (ScoreSheet by clause index); every bound comparison is `bound * ScoreSlack(clauses) <= thr`.
// Once the heap is full and the scored required lists' maxima alone cannot beat the threshold,
// only documents with some kShould match can enter: when the kShould lists hold under half the
// lead's postings they drive from there on, their blocks skipped undecoded against the required
// lists' block maxima over the same range, and a candidate probed into the required lists only
// while its optional scores plus their block maxima can win.
// Thread-safety: reentrant; cursors and buffers belong to one call.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/bm25.hpp"
#include "core/query_tree.hpp"
#include "core/status.hpp"
#include "cpu_exec/cpu_executor.hpp"
#include "tree_count.hpp"
#include "tree_query.hpp"

namespace search::cpu_internal {

// ExecuteTree's contract (tree_query.hpp) for a resolved term boolean, answered by the paths
// above; std::nullopt (nothing done) when `tree` is not a term boolean, or when k > 0 and it has
// kShould clauses, no required one, and is no bag of distinct terms. REQUIRES: k <= kMaxK, k > 0
// or count.
Result<std::optional<SearchResult>> ExecuteTermBoolean(const QueryNode& tree, std::span<const std::string> terms,
                                                       std::span<const TreeTermInput> inputs,
                                                       std::span<const float> norms, uint32_t doc_begin, uint32_t k,
                                                       bool count, const Bm25Params& params);

}  // namespace search::cpu_internal
