// The exact BM25 top-k on the CPU over one shard's compressed lists (cpu_exec/src has the
// algorithms: block_cursor.hpp, and_query.hpp, or_query.hpp).
//   and:   document-at-a-time over block cursors, the shortest list driving; blocks whose block-max
//          sum cannot beat the threshold are skipped by metadata alone, the driving block is
//          scored eight lanes at a time, and a longer list's block is decoded only when a
//          candidate whose bound can still beat the threshold falls in it.
//   or:    block-max MaxScore: lists sorted by max score, non-essential lists only probed, runs of
//          blocks whose block-max bound cannot beat the threshold skipped undecoded, essential
//          postings scored block-wise and accumulated per docID window. Exact: pruning compares
//          upper bounds multiplied by ScoreSlack so float rounding never drops a true top-k doc.
//   andor: and; when it yields fewer than k hits, or (Ding 2009 §8). Over several shards the
//          switch must be decided on the merged and-hits (LocalIndex does: run and everywhere, and
//          or everywhere only when the shards' and-hits sum to fewer than k), not per shard.
// Scores sum per-term contributions in canonical term order (core/bm25.hpp).
// Thread-safety: ExecuteQuery is reentrant; a CpuExecutor may serve many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "codec/block_codec.hpp"
#include "core/bm25.hpp"
#include "core/query.hpp"
#include "core/status.hpp"
#include "core/topk.hpp"

namespace search {

class ShardReader;
struct CachedList;

struct QueryStats {
  uint64_t lists = 0;            // lists fetched
  uint64_t blocks_decoded = 0;   // docID blocks decoded
  uint64_t freq_blocks_decoded = 0;
  uint64_t postings_decoded = 0; // docIDs decoded (sum of decoded blocks' counts)
  uint64_t postings_scored = 0;  // documents fully scored
  uint64_t bytes_touched = 0;    // compressed payload bytes of decoded blocks
  uint64_t micros = 0;           // wall time of the query
  QueryStats& operator+=(const QueryStats& o);
};

struct SearchResult {
  std::vector<ScoredDoc> hits;  // best first, at most k
  QueryStats stats;
  bool has_total = false;  // set when the query asked for a count (Query::count)
  uint64_t total = 0;      // then: the exact number of matching documents
};

// One query term as the engine sees it. list == nullptr: the term has no postings in this shard.
struct TermInput {
  const ListView* list = nullptr;
  float idf = 0.0f;
};

// Runs one query over lists given in canonical term order. `norms[doc - doc_begin]` is each
// document's BM25 length norm. REQUIRES: 1 <= k <= kMaxK; every list's docIDs lie in the norms'
// range. Corruption when a block fails to decode.
Result<SearchResult> ExecuteQuery(std::span<const TermInput> terms, const float* norms, uint32_t doc_begin,
                                  QueryMode mode, uint32_t k, const Bm25Params& params = {});
// The same with the norms' extent known: a list whose docIDs fall outside
// [doc_begin, doc_begin + norms.size()) (corrupted bytes parsed without CRC) is Corruption instead
// of a precondition violation. What CpuExecutor uses.
Result<SearchResult> ExecuteQuery(std::span<const TermInput> terms, std::span<const float> norms, uint32_t doc_begin,
                                  QueryMode mode, uint32_t k, const Bm25Params& params = {});

// Griffin's GPU -> CPU hand-off (Liu et al. 2018 §3.2): the and-part of a query restricted to
// `candidates` (strictly ascending docIDs, a superset of the and-answer: the intersection of some
// of the lists, computed on the GPU). Keeps the candidates present in every list, scored exactly as
// ExecuteQuery scores them (the same per-term contributions summed in canonical order), top k;
// mode kAndOr with fewer than k such hits runs the or-part over all lists, as ExecuteQuery does.
// kOr is InvalidArgument. Corruption when a block fails to decode or a candidate lies outside the
// norms.
Result<SearchResult> ExecuteQueryFromCandidates(std::span<const TermInput> terms, std::span<const float> norms,
                                                uint32_t doc_begin, std::span<const uint32_t> candidates,
                                                QueryMode mode, uint32_t k, const Bm25Params& params = {});

// One query term as a caller looked it up (ShardReader::GetTermInfo, GetList): absent here
// (present false), or its global df and its list (nullptr: the term has no list here). A caller
// that looks the terms up anyway (the node's scheduler, for its cost model) hands them on, so the
// thread that runs the query does not repeat the lookups.
struct PreparedTerm {
  bool present = false;
  uint32_t df = 0;
  std::shared_ptr<const CachedList> list;
};

// A query term as `prepared` has it (a caller's lookup), or else as the shard's own lookups give it
// (GetTermInfo, then GetList: NotFound is a term without postings here, list nullptr); present
// terms' df checked against N (Corruption). The shard's lookup errors come back with the term named.
Result<PreparedTerm> LookUpTerm(const ShardReader& shard, const std::string& term, const PreparedTerm* prepared);

// The executor over one open shard: looks the terms up (through the list cache) and runs them.
// Term metadata (TermInfo, or its absence) is remembered per executor after the first lookup, so
// keep one CpuExecutor per shard rather than one per query; copies share that memory.
class CpuExecutor {
 public:
  explicit CpuExecutor(const ShardReader* shard);
  // query.terms must be canonical (Analyzer::AnalyzeQuery). InvalidArgument for a bad k.
  // `prepared` (optional): one entry per term of query.terms, in its order, looked up in this
  // shard without an error; the lookups are then not repeated.
  // A query with a tree (core/query_tree.hpp; query.terms = TreeTerms) or a count runs through the
  // tree paths: a boolean of terms through src/tree_prune.hpp (counts by docID-set algebra, top k
  // with block-max pruning), a sole phrase through src/tree_phrase.hpp, any other tree through the
  // tree evaluator (src/tree_query.hpp); mode and / or resolves the tree's bare clauses, andor
  // runs the and-resolution and the or-resolution when that has fewer than k hits (this shard
  // alone: LocalIndex decides across shards). With count, has_total and total are the
  // exact number of matches of the answer used, and k == 0 asks for the count only. A flat query
  // without count keeps the block-max paths above. A phrase on a shard without positions is the
  // InvalidArgument the shard's lookup gives.
  Result<SearchResult> Search(const Query& query, const std::vector<PreparedTerm>* prepared = nullptr) const;
  // ExecuteQueryFromCandidates over the shard's lists (query.mode kAnd or kAndOr).
  Result<SearchResult> SearchFromCandidates(const Query& query, std::span<const uint32_t> candidates) const;

 private:
  struct Lookup;
  // The query's lists (held) and inputs; empty() when an and-query has a term absent here.
  Result<Lookup> LookUp(const Query& query, const std::vector<PreparedTerm>* prepared) const;
  // Search (candidates == nullptr) or SearchFromCandidates.
  Result<SearchResult> Run(const Query& query, const std::span<const uint32_t>* candidates,
                           const std::vector<PreparedTerm>* prepared) const;
  // Search for a query with a tree or a count.
  Result<SearchResult> RunTree(const Query& query, const std::vector<PreparedTerm>* prepared) const;
  const ShardReader* shard_;
};

}  // namespace search
