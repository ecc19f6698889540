// The exact BM25 top-k on the CPU over one shard's compressed lists.
//   and:   document-at-a-time over block cursors, lists from shortest to longest; a block of a
//          longer list is decoded only when a candidate can fall in it (skip by last_doc).
//   or:    block-max MaxScore: lists sorted by max score, non-essential lists only probed, blocks
//          whose block-max bound cannot beat the threshold skipped. Exact: pruning compares
//          upper bounds multiplied by kScoreSlack so float rounding never drops a true top-k doc.
//   andor: and; when it yields fewer than k hits, or (Ding 2009 §8).
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

// The executor over one open shard: looks the terms up (through the list cache) and runs them.
class CpuExecutor {
 public:
  explicit CpuExecutor(const ShardReader* shard) : shard_(shard) {}
  // query.terms must be canonical (Analyzer::AnalyzeQuery). InvalidArgument for a bad k.
  Result<SearchResult> Search(const Query& query) const;

 private:
  const ShardReader* shard_;
};

}  // namespace search
