// GpuExecutorAdapter (see node/gpu_executor_adapter.hpp).
#include "node/gpu_executor_adapter.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "gpu_exec/cuda_util.hpp"
#include "index_store/shard_store.hpp"
#include "metrics/log.hpp"

namespace search {
namespace {

const Logger& Log() {
  static const Logger kLog("node");
  return kLog;
}

uint64_t MicrosSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
}

GpuFallbackReason ReasonFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kResourceExhausted:
      return GpuFallbackReason::kOutOfMemory;
    case StatusCode::kUnavailable:
      return GpuFallbackReason::kCudaError;
    case StatusCode::kCorruption:
      return GpuFallbackReason::kCorruption;
    case StatusCode::kInvalidArgument:
      return GpuFallbackReason::kUnsupported;  // the engine rejects the query
    default:
      return GpuFallbackReason::kOther;
  }
}

}  // namespace

// Term metadata (or its absence) per term, as CpuExecutor keeps it: bounded, cleared when full.
struct GpuExecutorAdapter::TermCache {
  static constexpr size_t kMaxEntries = size_t{1} << 16;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::mutex mu;
  std::unordered_map<std::string, std::optional<TermInfo>, Hash, std::equal_to<>> map;  // GUARDED_BY(mu)

  Result<std::optional<TermInfo>> Get(const ShardReader& shard, std::string_view term) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = map.find(term);
      if (it != map.end()) return it->second;
    }
    auto info = shard.GetTermInfo(term);
    if (!info.ok()) return info.status();
    std::lock_guard<std::mutex> lock(mu);
    if (map.size() >= kMaxEntries) map.clear();
    map.emplace(std::string(term), *info);
    return *info;
  }
};

Result<std::unique_ptr<GpuExecutorAdapter>> GpuExecutorAdapter::Create(const ShardReader* shard, Metrics* metrics,
                                                                       const GpuExecutorOptions& options) {
  if (shard == nullptr) return Status::InvalidArgument("GpuExecutorAdapter: no shard");
  if (!gpu::GpuAvailable()) return Status::Unavailable("no usable GPU (" + gpu::GpuDescription() + ")");
  GpuExecutorOptions opts = options;
  if (opts.cache_bytes == 0) {
    size_t free_bytes = 0, total_bytes = 0;
    SEARCH_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    opts.cache_bytes = free_bytes / 2;
  }
  gpu::GpuCacheOptions cache_options;
  cache_options.capacity_bytes = opts.cache_bytes;
  cache_options.staging_bytes = opts.staging_bytes;
  SEARCH_ASSIGN_OR_RETURN(auto cache, gpu::GpuListCache::Create(shard, cache_options));
  // One context up front: a GPU that cannot run the engine fails here, not on the first query.
  SEARCH_ASSIGN_OR_RETURN(auto ctx, gpu::GpuContext::Create(opts.context));
  std::unique_ptr<GpuExecutorAdapter> adapter(new GpuExecutorAdapter(shard, metrics, std::move(cache), opts));
  adapter->GiveContext(std::move(ctx));
  Log().Info() << "GPU executor on " << gpu::GpuDescription() << ": list cache " << (opts.cache_bytes >> 20)
               << " MiB, norms " << (adapter->cache_->stats().norm_bytes >> 10) << " KiB";
  return adapter;
}

GpuExecutorAdapter::GpuExecutorAdapter(const ShardReader* shard, Metrics* metrics,
                                       std::unique_ptr<gpu::GpuListCache> cache, const GpuExecutorOptions& options)
    : shard_(shard),
      metrics_(metrics),
      options_(options),
      cache_(std::move(cache)),
      cpu_(shard),
      terms_(std::make_shared<TermCache>()) {
  view_.d_norms = cache_->d_norms();
  view_.doc_begin = cache_->doc_begin();
  view_.num_docs = cache_->num_docs();
  view_.params = shard_->meta().bm25;
  if (metrics_ != nullptr) hook_id_ = metrics_->AddScrapeHook([this] { PublishCacheStats(); });
}

GpuExecutorAdapter::~GpuExecutorAdapter() {
  if (metrics_ != nullptr && hook_id_ != 0) metrics_->RemoveScrapeHook(hook_id_);
  std::lock_guard<std::mutex> lock(contexts_mu_);
  contexts_.clear();  // before the cache: contexts' streams are idle, nothing pins a list
}

uint64_t GpuExecutorAdapter::fallbacks_total() const {
  uint64_t n = 0;
  for (const auto& f : fallbacks_) n += f.load();
  return n;
}

void GpuExecutorAdapter::PublishCacheStats() {
  const gpu::GpuCacheStats s = cache_->stats();
  GpuCacheSnapshot snap;
  snap.hits = s.hits;
  snap.misses = s.misses;
  snap.evictions = s.evictions;
  snap.bytes_copied = s.bytes_copied;
  snap.failed_allocations = s.failed_allocations;
  snap.bytes = s.resident_bytes;
  snap.entries = s.resident_lists;
  snap.capacity_bytes = s.capacity_bytes;
  metrics_->SetGpuCache(snap);
}

Result<std::unique_ptr<gpu::GpuContext>> GpuExecutorAdapter::TakeContext() {
  {
    std::lock_guard<std::mutex> lock(contexts_mu_);
    if (!contexts_.empty()) {
      auto ctx = std::move(contexts_.back());
      contexts_.pop_back();
      return ctx;
    }
  }
  return gpu::GpuContext::Create(options_.context);
}

void GpuExecutorAdapter::GiveContext(std::unique_ptr<gpu::GpuContext> ctx) {
  std::lock_guard<std::mutex> lock(contexts_mu_);
  contexts_.push_back(std::move(ctx));
}

Result<ExecOutput> GpuExecutorAdapter::Execute(const Query& query, Deadline deadline, uint32_t flags) {
  const bool force_cpu = (flags & kFlagForceCpu) != 0;
  const bool force_gpu = (flags & kFlagForceGpu) != 0;
  if (force_cpu && force_gpu) return Status::InvalidArgument("flags force both the CPU and the GPU");
  if (force_cpu) return cpu_.Execute(query, deadline, flags);
  if (deadline != kNoDeadline && std::chrono::steady_clock::now() >= deadline) {
    return Status::DeadlineExceeded("deadline passed before execution");
  }
  SEARCH_RETURN_IF_ERROR(ValidateK(query.k));
  if (query.terms.size() > gpu::kGpuMaxTerms) {
    Status why = Status::Unavailable("the GPU engine runs at most " + std::to_string(gpu::kGpuMaxTerms) +
                                     " terms, the query has " + std::to_string(query.terms.size()));
    if (force_gpu) return why;
    return FallBack(GpuFallbackReason::kUnsupported, why, query, deadline, flags);
  }
  bool gpu_side = false;
  auto out = RunOnGpu(query, &gpu_side);
  if (out.ok() || !gpu_side || force_gpu) return out;
  return FallBack(ReasonFor(out.status()), out.status(), query, deadline, flags);
}

Result<ExecOutput> GpuExecutorAdapter::FallBack(GpuFallbackReason reason, const Status& why, const Query& query,
                                                Deadline deadline, uint32_t flags) {
  const uint64_t n = fallbacks_[static_cast<size_t>(reason)].fetch_add(1) + 1;
  if (metrics_ != nullptr) {
    metrics_->gpu_fallbacks(reason).Increment();
    metrics_->fallback_cpu().Increment();
  }
  // Out of memory is routine under load (the cache is full of pinned lists); CUDA errors and
  // corruption are not: warn about the first few of each reason, then log at debug level.
  const bool loud = reason != GpuFallbackReason::kOutOfMemory && n <= 10;
  (loud ? Log().Warn() : Log().Debug()) << "GPU query fell back to the CPU (" << GpuFallbackReasonLabel(reason) << ", #"
                                        << n << "): " << why.ToString();
  return cpu_.Execute(query, deadline, flags & ~kFlagForceGpu);
}

Result<ExecOutput> GpuExecutorAdapter::RunOnGpu(const Query& query, bool* gpu_side) {
  const auto t0 = std::chrono::steady_clock::now();
  *gpu_side = false;
  const ShardMeta& meta = shard_->meta();
  const size_t n = query.terms.size();

  // Host side, as CpuExecutor::Search: term metadata, lists through the main-memory cache.
  std::vector<std::shared_ptr<const CachedList>> lists(n);
  std::vector<float> idf(n, 0.0f);
  size_t fetched = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string& term = query.terms[i];
    auto info = terms_->Get(*shard_, term);
    if (!info.ok()) return info.status().WithContext("term '" + term + "'");
    if (!info->has_value()) {
      if (query.mode == QueryMode::kAnd) {  // an and-query with a term absent here matches nothing here
        ExecOutput empty;
        empty.processor = Processor::kGpu;
        empty.stats.lists = fetched;
        empty.stats.micros = MicrosSince(t0);
        return empty;
      }
      continue;
    }
    const TermInfo& ti = **info;
    if (ti.df > meta.stats.num_docs) {
      return Status::Corruption("term '" + term + "': df " + std::to_string(ti.df) + " exceeds N " +
                                std::to_string(meta.stats.num_docs));
    }
    auto list = shard_->GetList(term);
    if (!list.ok()) {
      if (list.status().code() == StatusCode::kNotFound) continue;
      return list.status().WithContext("term '" + term + "'");
    }
    lists[i] = std::move(list).value();
    idf[i] = Bm25Idf(meta.stats.num_docs, ti.df);
    ++fetched;
  }

  // Device side: every failure from here on falls back to the CPU.
  *gpu_side = true;
  SEARCH_ASSIGN_OR_RETURN(std::unique_ptr<gpu::GpuContext> ctx, TakeContext());
  cudaStream_t stream = ctx->stream();
  std::vector<std::shared_ptr<const gpu::DeviceList>> handles(n);  // pin the lists until the engine is done
  std::vector<gpu::GpuTermInput> inputs(n);
  Result<SearchResult> result = Status::Internal("not run");
  Status st;
  for (size_t i = 0; i < n && st.ok(); ++i) {
    if (lists[i] == nullptr) continue;
    auto h = cache_->Acquire(lists[i], stream);
    if (!h.ok()) {
      st = h.status();
      break;
    }
    handles[i] = std::move(h).value();
    inputs[i].list = &lists[i]->view;
    inputs[i].d_blob = handles[i]->d_blob;
    inputs[i].idf = idf[i];
  }
  if (st.ok()) {
    result = gpu::ExecuteQueryGpu(*ctx, view_, inputs, query.mode, query.k);
    if (!result.ok()) st = result.status();
  }
  if (!st.ok()) {
    // Copies or kernels may still be in flight after a failure: wait before the handles drop (an
    // unpinned list may be evicted and its memory reused). A context whose stream saw a CUDA
    // error is not reused.
    const cudaError_t sync = cudaStreamSynchronize(stream);
    if (sync != cudaSuccess || st.code() == StatusCode::kUnavailable) {
      (void)cudaGetLastError();
      ctx.reset();
    }
  }
  if (ctx != nullptr) GiveContext(std::move(ctx));
  handles.clear();
  if (!st.ok()) return st;

  *gpu_side = false;  // resolving external ids is host work the CPU path would repeat
  ExecOutput out;
  out.processor = Processor::kGpu;
  out.stats = result->stats;
  out.stats.lists = fetched;
  out.hits.reserve(result->hits.size());
  for (const ScoredDoc& d : result->hits) {
    auto id = shard_->GetExternalId(d.doc);
    if (!id.ok()) return id.status().WithContext("external id of doc " + std::to_string(d.doc));
    out.hits.push_back(HitMsg{d.doc, d.score, std::move(id).value()});
  }
  out.stats.micros = MicrosSince(t0);
  return out;
}

}  // namespace search
