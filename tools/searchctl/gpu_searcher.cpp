// GpuSearcher (gpu_searcher.hpp).
#include "gpu_searcher.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "core/topk.hpp"
#include "gpu_exec/device_positions.hpp"
#include "index_store/shard_store.hpp"

namespace search::cli {

struct GpuSearcher::Shard {
  const ShardReader* reader = nullptr;
  std::unique_ptr<gpu::GpuListCache> cache;
  gpu::GpuShardView view;
};

GpuSearcher::~GpuSearcher() = default;

Result<std::unique_ptr<GpuSearcher>> GpuSearcher::Create(const LocalIndex& index, size_t cache_bytes_per_shard) {
  std::unique_ptr<GpuSearcher> s(new GpuSearcher());
  s->index_ = &index;
  for (size_t i = 0; i < index.num_shards(); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->reader = &index.shard(i);
    gpu::GpuCacheOptions options;
    options.capacity_bytes = cache_bytes_per_shard;
    SEARCH_ASSIGN_OR_RETURN(shard->cache, gpu::GpuListCache::Create(shard->reader, options));
    const ShardMeta& meta = shard->reader->meta();
    shard->view.d_norms = shard->cache->d_norms();
    shard->view.doc_begin = meta.doc_begin;
    shard->view.num_docs = meta.doc_end - meta.doc_begin;
    shard->view.params = meta.bm25;
    shard->view.norm_floor = shard->cache->min_norm();
    s->shards_.push_back(std::move(shard));
  }
  return s;
}

Status GpuSearcher::RunAll(gpu::GpuContext& ctx, std::span<const Query> queries, QueryMode mode,
                           std::vector<Result<SearchResult>>* out) const {
  const size_t n = queries.size();
  out->assign(n, SearchResult{});
  for (size_t q = 0; q < n; ++q) (*out)[q]->has_total = queries[q].count;
  std::vector<std::vector<std::vector<ScoredDoc>>> per_shard(n);
  for (const auto& shard : shards_) {
    const ShardMeta& meta = shard->reader->meta();
    std::vector<std::vector<gpu::GpuTermInput>> inputs(n);
    std::vector<std::shared_ptr<const gpu::DeviceList>> held;  // pinned until the batch is done
    std::vector<gpu::GpuQueryInput> batch(n);
    std::vector<Status> prep(n);
    std::vector<std::vector<std::shared_ptr<const CachedList>>> host(n);  // per query and term
    std::vector<std::optional<SearchResult>> done(n);  // answered from list lengths
    std::vector<size_t> device;                        // the queries that run on the device
    for (size_t q = 0; q < n; ++q) {
      const Query& query = queries[q];
      inputs[q].resize(query.terms.size());
      host[q].resize(query.terms.size());
      batch[q].mode = mode;
      batch[q].k = query.k;
      batch[q].tree = query.tree.get();  // trees and counts: the engine's tree path
      batch[q].count = query.count;
      // Host metadata first (the reader remembers term entries; lists come through its main-memory
      // cache), as the CPU engine looks them up.
      for (size_t t = 0; t < query.terms.size() && prep[q].ok(); ++t) {
        const std::string& term = query.terms[t];
        auto info = shard->reader->GetTermInfo(term);
        if (!info.ok()) {
          prep[q] = info.status().WithContext("term '" + term + "'");
          break;
        }
        if (!info->has_value()) continue;  // no postings here: list stays nullptr
        auto list = shard->reader->GetList(term);
        if (!list.ok()) {
          if (list.status().code() == StatusCode::kNotFound) continue;
          prep[q] = list.status().WithContext("term '" + term + "'");
          break;
        }
        inputs[q][t].list = &(*list)->view;
        inputs[q][t].idf = Bm25Idf(meta.stats.num_docs, (**info).df);
        host[q][t] = std::move(list).value();
      }
      batch[q].terms = inputs[q];
      if (!prep[q].ok()) continue;
      // A count that list lengths answer needs no device list (nor any GPU work).
      if (auto answer = gpu::AnswerFromLengths(shard->view, batch[q])) {
        if (answer->ok())
          done[q] = std::move(*answer).value();
        else
          prep[q] = answer->status();
        continue;
      }
      device.push_back(q);
    }
    for (size_t q : device) {
      const Query& query = queries[q];
      const std::vector<std::string> phrase_tokens =
          query.tree != nullptr ? gpu::PhraseTokens(*query.tree) : std::vector<std::string>();
      for (size_t t = 0; t < query.terms.size() && prep[q].ok(); ++t) {
        if (inputs[q][t].list == nullptr) continue;
        const std::string& term = query.terms[t];
        auto dev = shard->cache->Acquire(host[q][t], ctx.stream());
        if (!dev.ok()) return dev.status().WithContext("term '" + term + "'");  // device trouble: the caller falls back
        inputs[q][t].d_blob = (*dev)->d_blob;
        const ListView& view = (*dev)->host->view;
        held.push_back(std::move(dev).value());
        if (!std::binary_search(phrase_tokens.begin(), phrase_tokens.end(), term)) continue;
        // A phrase token: its positions in the engine's layout too (gpu_exec/device_positions.hpp).
        auto pos = shard->cache->AcquireBuilt(
            gpu::PositionsKey(term),
            [&]() -> Result<std::vector<uint32_t>> {
              SEARCH_ASSIGN_OR_RETURN(auto positions, shard->reader->GetPositions(term));
              return gpu::BuildDevicePositions(view, positions->view);
            },
            ctx.stream());
        if (!pos.ok()) {
          if (pos.status().code() == StatusCode::kResourceExhausted || pos.status().code() == StatusCode::kUnavailable)
            return pos.status().WithContext("positions of '" + term + "'");  // device trouble
          prep[q] = pos.status().WithContext("positions of '" + term + "'");
          break;
        }
        inputs[q][t].d_positions = reinterpret_cast<const uint32_t*>((*pos)->d_blob);
        held.push_back(std::move(pos).value());
      }
    }
    std::vector<gpu::GpuQueryInput> run;
    for (size_t q : device) run.push_back(batch[q]);
    std::vector<Result<SearchResult>> results;
    if (!run.empty()) SEARCH_RETURN_IF_ERROR(gpu::ExecuteBatchGpu(ctx, shard->view, run, &results));
    for (size_t r = 0; r < device.size(); ++r) {
      if (!results[r].ok()) {
        prep[device[r]] = results[r].status();
      } else {
        done[device[r]] = std::move(results[r]).value();
      }
    }
    for (size_t q = 0; q < n; ++q) {
      if (!(*out)[q].ok()) continue;
      if (!prep[q].ok()) {
        (*out)[q] = prep[q];
      } else if (done[q].has_value()) {
        (*out)[q]->stats += done[q]->stats;
        (*out)[q]->total += done[q]->total;  // exact per shard: summed
        per_shard[q].push_back(std::move(done[q]->hits));
      }
    }
  }
  for (size_t q = 0; q < n; ++q) {
    if (!(*out)[q].ok()) continue;
    (*out)[q]->hits = per_shard[q].size() == 1 ? std::move(per_shard[q][0]) : MergeTopK(per_shard[q], queries[q].k);
  }
  return Status::Ok();
}

Status GpuSearcher::SearchBatch(gpu::GpuContext& ctx, std::span<const Query> queries,
                                std::vector<Result<SearchResult>>* out) const {
  if (queries.empty()) {
    out->clear();
    return Status::Ok();
  }
  const QueryMode mode = queries[0].mode;
  bool one_mode = true;
  for (const Query& q : queries) one_mode = one_mode && q.mode == mode;
  if (one_mode) return SearchMode(ctx, queries, mode, out);
  // Mixed modes (MakeQuery gives a bag of words of + or bare clauses its own flat mode): a batch
  // per mode.
  out->assign(queries.size(), Status::InvalidArgument("unknown query mode"));
  for (QueryMode m : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
    std::vector<Query> part;
    std::vector<size_t> where;
    for (size_t i = 0; i < queries.size(); ++i)
      if (queries[i].mode == m) {
        part.push_back(queries[i]);
        where.push_back(i);
      }
    if (part.empty()) continue;
    std::vector<Result<SearchResult>> got;
    SEARCH_RETURN_IF_ERROR(SearchMode(ctx, part, m, &got));
    for (size_t j = 0; j < where.size(); ++j) (*out)[where[j]] = std::move(got[j]);
  }
  return Status::Ok();
}

Status GpuSearcher::SearchMode(gpu::GpuContext& ctx, std::span<const Query> queries, QueryMode mode,
                               std::vector<Result<SearchResult>>* out) const {
  if (mode != QueryMode::kAndOr || shards_.size() == 1) return RunAll(ctx, queries, mode, out);
  // andor over several shards: and everywhere; or everywhere for the queries whose merged
  // and-hits are fewer than k.
  SEARCH_RETURN_IF_ERROR(RunAll(ctx, queries, QueryMode::kAnd, out));
  std::vector<Query> again;
  std::vector<size_t> where;
  for (size_t q = 0; q < queries.size(); ++q) {
    if ((*out)[q].ok() && (*out)[q]->hits.size() < queries[q].k) {
      again.push_back(queries[q]);
      where.push_back(q);
    }
  }
  if (again.empty()) return Status::Ok();
  std::vector<Result<SearchResult>> second;
  SEARCH_RETURN_IF_ERROR(RunAll(ctx, again, QueryMode::kOr, &second));
  for (size_t j = 0; j < where.size(); ++j) {
    if (second[j].ok()) second[j]->stats += (*out)[where[j]]->stats;
    (*out)[where[j]] = std::move(second[j]);
  }
  return Status::Ok();
}

void GpuSearcher::DropResident() const {
  for (const auto& s : shards_) s->cache->Clear();
}

gpu::GpuCacheStats GpuSearcher::stats() const {
  gpu::GpuCacheStats sum;
  for (const auto& s : shards_) {
    const auto st = s->cache->stats();
    sum.hits += st.hits;
    sum.misses += st.misses;
    sum.evictions += st.evictions;
    sum.bytes_copied += st.bytes_copied;
    sum.resident_bytes += st.resident_bytes;
    sum.resident_lists += st.resident_lists;
    sum.capacity_bytes += st.capacity_bytes;
    sum.norm_bytes += st.norm_bytes;
    sum.failed_allocations += st.failed_allocations;
  }
  return sum;
}

}  // namespace search::cli
