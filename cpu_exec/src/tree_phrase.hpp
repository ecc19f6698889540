// A sole phrase on the CPU, fast and exact: a resolved root boolean whose one clause is a phrase
// (kMust, kShould or kFilter), the search-benchmark-game's phrase category. Same matching, tf,
// idf and score as the tree evaluator (tree_query.hpp, docs/SCORING.md "Query language"):
//   documents  the two shortest lists' decoded blocks intersected eight docIDs against eight
//              (both sides' common lanes from one set of compares, compacted; when the second is
//              at least kProbeRatio times longer, each of the shortest's documents is looked up
//              in the other's block instead), each common document
//              then looked up in any other list (next_geq); one distinct token: its list; with a
//              count and three or more slots whose two shortest lists' tokens hold one slot each,
//              only the common documents where those two occur at their slots' distance (from
//              those two blocks' positions; a block ending there with few of them: only their
//              postings decoded, as the pair path) are looked up, and the other lists' positions read;
//   positions  per common document, each token's positions from its block's decoded positions
//              (PositionsView::DecodeBlockSums, once per block: running sums, a posting's
//              positions plus one base, the pair path comparing them by a per-document shift; a
//              count's two-token pair path decodes only the common postings of a block it leaves
//              with few of them, PositionsView::DecodePostings, and broadcasts the values of a
//              posting with one or two against the other's, else compares the two postings'
//              first positions before the rest), checked against the list's tf;
//   tf         the starts p with token i at p + i for every i: the rarest slot's positions,
//              shifted to starts, filtered through every other slot (eight against eight), on
//              the running sums as stored (each slot's values shifted by its posting's base);
//   top k      TopKHeap. With a count every common document's tf is computed, and its exact score
//              decides unless its score at the smallest possible norm (Bm25Norm of length 0 under
//              `params`: REQUIRES every norm to be a Bm25Norm under them) cannot beat the k-th.
//              Without one, once the heap is full, a document whose bound (the phrase's score at
//              the smallest token tf, first at the smallest norm, then at its own, times a margin:
//              BM25 grows with tf and a phrase's tf is at most each token's) times ScoreSlack
//              cannot beat the k-th is skipped before its positions are read, and whole docID
//              ranges whose block-max bound (each token's times idf_phrase / idf_token, the
//              smallest) cannot win are skipped undecoded.
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
#include "tree_query.hpp"

namespace search::cpu_internal {

// ExecuteTree's contract (tree_query.hpp) for a resolved tree of one phrase clause (kMust, kShould
// or kFilter); std::nullopt (nothing done) for any other tree, or when a token lacks positions or
// its positions do not match its list (the tree evaluator then gives the error). REQUIRES:
// k <= kMaxK, k > 0 or count.
Result<std::optional<SearchResult>> ExecuteSolePhrase(const QueryNode& tree, std::span<const std::string> terms,
                                                      std::span<const TreeTermInput> inputs,
                                                      std::span<const float> norms, uint32_t doc_begin, uint32_t k,
                                                      bool count, const Bm25Params& params);

}  // namespace search::cpu_internal
