// LocalIndex: a whole index directory (every shard) opened in this process, searched on the CPU
// with each shard's top-k merged in docs/SCORING.md order. What `searchctl query` and `bench` use, and
// the single-process twin of the cluster.
// Thread-safety: Search is thread-safe after Open.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/analyzer.hpp"
#include "cpu_exec/cpu_executor.hpp"
#include "index_store/manifest.hpp"
#include "index_store/shard_store.hpp"

namespace search {

struct ExternalHit {
  uint32_t doc = 0;
  float score = 0.0f;
  std::string id;  // external id
};

class LocalIndex {
 public:
  static Result<std::unique_ptr<LocalIndex>> Open(const std::string& dir, const ShardReaderOptions& options = {});

  const Manifest& manifest() const { return manifest_; }
  const Analyzer& analyzer() const { return analyzer_; }
  size_t num_shards() const { return shards_.size(); }
  const ShardReader& shard(size_t i) const { return *shards_[i]; }

  // Analyzes `text` with the index's analyzer and searches every shard: the bag of words.
  Result<SearchResult> Search(std::string_view text, QueryMode mode, uint32_t k) const;
  // Any query (CpuExecutor::Search): a bag of words, or a tree (core/query_tree.hpp) with
  // query.terms = TreeTerms, with or without a count. andor is decided over the whole index: the
  // and-answer on every shard, and the or-answer on every shard only when the shards' and-hits sum
  // to fewer than k. With count, total is the sum of the shards' exact totals for the answer used.
  Result<SearchResult> Search(const Query& query) const;
  // Attaches external ids to hits.
  Result<std::vector<ExternalHit>> Resolve(const std::vector<ScoredDoc>& hits) const;

 private:
  Manifest manifest_;
  Analyzer analyzer_;
  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<CpuExecutor> executors_;  // one per shard, kept for its term memory
};

}  // namespace search
