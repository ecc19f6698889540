// The query language's trees (core/query_tree.hpp) on the CPU, exact: a resolved tree (no
// Occur::kDefault left: ResolveMode) evaluated document-at-a-time over one shard's block cursors.
//   term     a BlockCursor over its list, scored Bm25TermScore(idf, tf, norm) as a flat query does;
//   phrase   the conjunction of its distinct tokens' cursors; at a common document the tokens'
//            positions (codec/positions_codec.hpp, decoded per block) give tf = the number of start
//            positions p where token i occurs at p + i for every i (overlaps and repeated tokens
//            included); idf = the float sum of the tokens' idfs in text order, repeats counted;
//            score = Bm25TermScore(phrase idf, tf, norm);
//   boolean  kMust and kFilter clauses intersected (leapfrog), kMustNot clauses skipped with
//            next_geq on their own cursors, kShould clauses a union when nothing is required;
//            score = the float sum in clause order of the matching kMust and kShould clauses'
//            scores (a nested boolean's score is computed first, then added). A boolean with only
//            kMustNot clauses matches nothing.
// Documents are visited in ascending docID order and top-k is kept by TopKHeap (query_engine.hpp),
// the order core/topk.hpp fixes. Pruning is exact (`bound * ScoreSlack(leaves) <= k-th score`):
//   with a count, every match is visited and counted, and one is scored only when the block-max
//            bound of the tree at it (terms: block maxima; phrases: each token's block maximum times
//            idf_p / idf_token; booleans: the sum over must and should clauses) can beat the k-th;
//   without, a docID range whose block-max bound cannot beat the k-th is skipped unvisited, and a
//            phrase that alone scores the query skips the positions of a document whose token
//            scores bound it below the k-th;
//   k == 0   counts only (no scoring; a lone term's count is its list's length).
// Thread-safety: ExecuteTree is reentrant; its cursors belong to one call.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "core/bm25.hpp"
#include "core/query_tree.hpp"
#include "core/status.hpp"
#include "cpu_exec/cpu_executor.hpp"

namespace search::cpu_internal {

// One distinct token of the tree as this shard has it.
struct TreeTermInput {
  const ListView* list = nullptr;            // nullptr: no postings here (matches nothing)
  const PositionsView* positions = nullptr;  // the list's positions; needed when a phrase holds the token
  float idf = 0.0f;                          // Bm25Idf from the global df
};

// Corruption unless `list`'s docIDs can lie in [doc_begin, doc_begin + num_docs) (its last block's
// last_doc does; the lower end is checked as blocks decode). nullptr passes.
Status CheckListRange(const ListView* list, uint32_t doc_begin, uint64_t num_docs);

// Evaluates `tree`, resolved (no kDefault), over one shard. `terms` are the distinct tokens the
// tree may name, sorted ascending, and inputs[i] is terms[i] here. `norms[doc - doc_begin]` is
// each document's BM25 norm. Returns the top k (k == 0: none) and, with `count`, the exact number
// of matching documents (has_total, total). InvalidArgument for a kDefault clause, a token not in
// `terms`, a phrase token without positions, or k == 0 without count or k > kMaxK; Corruption
// for a list or positions block that fails to decode or disagrees with its list.
Result<SearchResult> ExecuteTree(const QueryNode& tree, std::span<const std::string> terms,
                                 std::span<const TreeTermInput> inputs, std::span<const float> norms,
                                 uint32_t doc_begin, uint32_t k, bool count, const Bm25Params& params = {});

// The flat query {terms, mode} as a resolved tree: one term clause per term in the given order,
// kMust under kAnd, kShould under kOr. REQUIRES: mode is kAnd or kOr.
QueryNode FlatTree(std::span<const std::string> terms, QueryMode mode);

}  // namespace search::cpu_internal
