// Exact counts of a *term boolean* without scoring: a resolved root boolean (no Occur::kDefault
// left) whose every clause is a term, the shape of the search-benchmark-game's categories term,
// intersection (+a +b), union (a b), intersection_union (+a b) and negated (+a -b).
// Counting follows docs/SCORING.md's matching rule by docID-set algebra, decoding docIDs only
// (no frequency is decoded, nothing is scored):
//   required (kMust / kFilter) clauses:  |R1 ∩ R2 ∩ ... \ (N1 ∪ N2 ...)|, should clauses ignored
//            (they cannot change whether a document matches); one required list and no kMustNot
//            clause: the list's count; one of each: |a| - |a ∩ b|, the shorter of the two driving
//            the intersection. Otherwise the shortest required list drives, a decoded block at a
//            time; its docIDs are filtered through the other lists by a branch-free merge inside
//            their decoded blocks, blocks between candidates skipped by metadata alone.
//   no required clause:  |S1 ∪ S2 ∪ ... \ (N1 ∪ ...)| in a bitset over the shard's docIDs (one
//            should list and no kMustNot: its count; two lists of very different lengths:
//            |a| + |b| - |a ∩ b|, the intersection skipping through the longer one).
//   kMustNot clauses only: 0.
// Thread-safety: pure functions; every cursor and buffer belongs to one call.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/query_tree.hpp"
#include "core/status.hpp"
#include "cpu_exec/cpu_executor.hpp"
#include "tree_query.hpp"

namespace search::cpu_internal {

// One clause of a term boolean: its occurrence, its token's input on this shard, and its index
// among the root's clauses (the order its score is added in).
struct TermClause {
  Occur occur = Occur::kMust;
  const TreeTermInput* input = nullptr;
  uint32_t index = 0;
};

// True when `tree` is a boolean whose clauses are all terms with a resolved occurrence (kMust,
// kShould, kMustNot, kFilter) and a token among `terms` (sorted ascending; inputs[i] is terms[i]);
// fills `out` with them in clause order. False (out unspecified) otherwise.
bool AsTermBoolean(const QueryNode& tree, std::span<const std::string> terms, std::span<const TreeTermInput> inputs,
                   std::vector<TermClause>* out);

// The exact number of documents of [doc_begin, doc_begin + num_docs) that the term boolean
// matches. REQUIRES: every clause's list passed CheckListRange for that range. Corruption when a
// block fails to decode; decodes are counted in `stats`.
Result<uint64_t> CountTermBoolean(std::span<const TermClause> clauses, uint32_t doc_begin, uint64_t num_docs,
                                  QueryStats* stats);

}  // namespace search::cpu_internal
