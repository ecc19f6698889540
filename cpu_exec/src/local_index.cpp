#include "cpu_exec/local_index.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace search {

namespace {

uint64_t MicrosSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
}

// Shard i's metadata must agree with its manifest entry and the manifest's global statistics,
// or BM25 on that shard would not be the collection's BM25.
Status CheckShard(const Manifest& m, const ShardEntry& e, const ShardMeta& meta) {
  const std::string name = "shard " + std::to_string(e.id) + " (" + e.path + ")";
  if (meta.doc_begin != e.doc_begin || meta.doc_end != e.doc_end)
    return Status::Corruption(name + ": docID range [" + std::to_string(meta.doc_begin) + ", " +
                              std::to_string(meta.doc_end) + ") differs from the manifest's [" +
                              std::to_string(e.doc_begin) + ", " + std::to_string(e.doc_end) + ")");
  if (meta.stats.num_docs != m.stats.num_docs || meta.stats.total_tokens != m.stats.total_tokens)
    return Status::Corruption(name + ": collection statistics (N " + std::to_string(meta.stats.num_docs) +
                              ") differ from the manifest's (N " + std::to_string(m.stats.num_docs) + ")");
  if (meta.analyzer != m.analyzer) return Status::Corruption(name + ": analyzer differs from the manifest's");
  if (meta.bm25.k1 != m.bm25.k1 || meta.bm25.b != m.bm25.b)
    return Status::Corruption(name + ": BM25 parameters differ from the manifest's");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<LocalIndex>> LocalIndex::Open(const std::string& dir, const ShardReaderOptions& options) {
  auto index = std::unique_ptr<LocalIndex>(new LocalIndex());
  SEARCH_ASSIGN_OR_RETURN(index->manifest_, Manifest::Read(dir));
  const Manifest& m = index->manifest_;
  SEARCH_ASSIGN_OR_RETURN(index->analyzer_, Analyzer::Create(m.analyzer));
  if (m.shards.empty()) return Status::Corruption(dir + ": the manifest lists no shards");
  uint32_t expect_begin = 0;
  for (const ShardEntry& e : m.shards) {
    if (e.doc_begin != expect_begin || e.doc_end < e.doc_begin)
      return Status::Corruption(dir + ": shard " + std::to_string(e.id) + " does not continue the docID ranges at " +
                                std::to_string(expect_begin));
    expect_begin = e.doc_end;
    auto reader = ShardReader::Open(dir + "/" + e.path, options);
    if (!reader.ok()) return reader.status().WithContext("opening shard " + std::to_string(e.id));
    SEARCH_RETURN_IF_ERROR(CheckShard(m, e, (*reader)->meta()));
    index->shards_.push_back(std::move(reader).value());
    index->executors_.emplace_back(index->shards_.back().get());
  }
  if (expect_begin != m.stats.num_docs)
    return Status::Corruption(dir + ": shards cover " + std::to_string(expect_begin) + " documents, N is " +
                              std::to_string(m.stats.num_docs));
  return index;
}

Result<SearchResult> LocalIndex::Search(std::string_view text, QueryMode mode, uint32_t k) const {
  SEARCH_RETURN_IF_ERROR(ValidateK(k));
  Query q;
  q.terms = analyzer_.AnalyzeQuery(text);
  q.mode = mode;
  q.k = k;
  return Search(q);
}

Result<SearchResult> LocalIndex::Search(const Query& query) const {
  const auto t0 = std::chrono::steady_clock::now();
  if (!(query.count && query.k == 0)) SEARCH_RETURN_IF_ERROR(ValidateK(query.k));
  SearchResult out;
  out.has_total = query.count;
  // Runs one mode on every shard and merges; with a count, the shards' totals are summed. andor
  // is decided globally, not per shard: the collection's and-query has >= k hits exactly when the
  // shards' (each capped at k) sum to >= k.
  auto run_all = [&](QueryMode mode) -> Result<std::vector<ScoredDoc>> {
    Query q = query;
    q.mode = mode;
    std::vector<std::vector<ScoredDoc>> per_shard;
    per_shard.reserve(shards_.size());
    out.total = 0;
    for (const CpuExecutor& exec : executors_) {
      auto r = exec.Search(q);
      if (!r.ok()) return r.status();
      out.stats += r->stats;
      out.total += r->total;
      per_shard.push_back(std::move(r->hits));
    }
    if (per_shard.size() == 1) return std::move(per_shard[0]);
    return MergeTopK(per_shard, query.k);
  };
  if (query.mode == QueryMode::kAndOr) {
    SEARCH_ASSIGN_OR_RETURN(out.hits, run_all(QueryMode::kAnd));
    if (out.hits.size() < query.k) {  // k == 0 (a count only): the and-answer's count
      SEARCH_ASSIGN_OR_RETURN(out.hits, run_all(QueryMode::kOr));
    }
  } else {
    SEARCH_ASSIGN_OR_RETURN(out.hits, run_all(query.mode));
  }
  out.stats.micros = MicrosSince(t0);
  return out;
}

Result<std::vector<ExternalHit>> LocalIndex::Resolve(const std::vector<ScoredDoc>& hits) const {
  std::vector<ExternalHit> out;
  out.reserve(hits.size());
  for (const ScoredDoc& h : hits) {
    // The first shard whose range ends after the doc (ranges are contiguous and ascending).
    auto it = std::upper_bound(manifest_.shards.begin(), manifest_.shards.end(), h.doc,
                               [](uint32_t doc, const ShardEntry& e) { return doc < e.doc_end; });
    if (it == manifest_.shards.end() || h.doc < it->doc_begin)
      return Status::InvalidArgument("docID " + std::to_string(h.doc) + " is not in the index");
    const size_t i = static_cast<size_t>(it - manifest_.shards.begin());
    SEARCH_ASSIGN_OR_RETURN(std::string id, shards_[i]->GetExternalId(h.doc));
    out.push_back(ExternalHit{h.doc, h.score, std::move(id)});
  }
  return out;
}

}  // namespace search
