// GpuExecutorAdapter (see node/gpu_executor_adapter.hpp).
#include "node/gpu_executor_adapter.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cache_sizing.hpp"
#include "core/parallel_for.hpp"
#include "core/thread_cpu.hpp"
#include "gpu_cache/gpu_cache_metrics.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/decode.hpp"
#include "gpu_exec/device_positions.hpp"
#include "gpu_exec/intersect.hpp"
#include "index_store/shard_store.hpp"
#include "core/log.hpp"

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

Result<std::unique_ptr<GpuExecutorAdapter>> GpuExecutorAdapter::Create(const ShardReader* shard, Metrics* metrics,
                                                                       const GpuExecutorOptions& options) {
  if (shard == nullptr) return Status::InvalidArgument("GpuExecutorAdapter: no shard");
  if (!gpu::GpuAvailable()) return Status::Unavailable("no usable GPU (" + gpu::GpuDescription() + ")");
  GpuExecutorOptions opts = options;
  if (opts.cache_bytes == 0) {  // the default share of the GPU's free memory (core/cache_sizing.hpp)
    SEARCH_ASSIGN_OR_RETURN(const gpu::DeviceMemoryInfo memory, gpu::GetDeviceMemoryInfo());
    const CacheSizing sizing = SizeGpuListCache(memory.free_bytes, 1);
    Log().Info() << sizing.Describe("GPU list cache");
    opts.cache_bytes = sizing.bytes;
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
      cpu_(shard) {
  view_.d_norms = cache_->d_norms();
  view_.doc_begin = cache_->doc_begin();
  view_.num_docs = cache_->num_docs();
  view_.params = shard_->meta().bm25;
  view_.norm_floor = cache_->min_norm();
  if (metrics_ != nullptr) {
    gpu_metrics_ = std::make_unique<GpuExecutorMetrics>(metrics_->registry());
    auto cache_metrics = std::make_shared<gpu::GpuCacheMetrics>(metrics_->registry());
    hook_id_ = metrics_->AddScrapeHook([this, cache_metrics] {
      cache_metrics->Set(cache_->stats());
      PublishBatchTimes();
    });
  }
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

void GpuExecutorAdapter::PublishBatchTimes() {
  std::array<double, kNumGpuBatchParts> cpu{}, wall{};
  for (size_t i = 0; i < kNumGpuBatchParts; ++i) {
    cpu[i] = static_cast<double>(batch_cpu_ns_[i].load()) * 1e-9;
    wall[i] = static_cast<double>(batch_wall_ns_[i].load()) * 1e-9;
  }
  gpu_metrics_->SetBatchTimes(cpu, wall);
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
  if (const auto why = GpuUnsupported(query)) {  // a shape the GPU engine does not run: the CPU's
    if (force_gpu) {
      return Status::Unavailable("the GPU engine does not run this query (" +
                                 std::string(GpuUnsupportedReasonLabel(*why)) + ")");
    }
    if (gpu_metrics_ != nullptr) gpu_metrics_->CountUnsupported(*why);
    return cpu_.Execute(query, deadline, flags);
  }
  if (deadline != kNoDeadline && std::chrono::steady_clock::now() >= deadline) {
    return Status::DeadlineExceeded("deadline passed before execution");
  }
  if (!(query.count && query.k == 0)) SEARCH_RETURN_IF_ERROR(ValidateK(query.k));
  BatchItem item;
  item.query = &query;
  RunBatch(std::span<BatchItem>(&item, 1), /*count_fallbacks=*/!force_gpu);
  if (item.result.ok() || !item.retry_on_cpu || force_gpu) return std::move(item.result);
  return cpu_.Execute(query, deadline, flags & ~kFlagForceGpu);
}

void GpuExecutorAdapter::ExecuteBatch(std::span<BatchItem> items) { RunBatch(items, true); }

uint64_t GpuExecutorAdapter::NonResidentBytes(const Query& query) {
  // The present terms' list bytes less the resident ones': one acquisition of the GPU list cache's
  // lock a query (ResidentBytes), not one a term. That lock is the one the GPU dispatchers take to
  // acquire a batch's lists, and every request thread asks this for its query's features. A
  // resident list's bytes are its encoded blob's, as TermInfo::list_bytes says.
  uint64_t bytes = 0;
  std::vector<std::string> present;
  present.reserve(query.terms.size());
  for (const std::string& term : query.terms) {
    auto info = shard_->GetTermInfo(term);  // the reader remembers entries
    if (!info.ok() || !info->has_value()) continue;
    bytes += (*info)->list_bytes;
    present.push_back(term);
  }
  if (present.empty()) return 0;
  const uint64_t resident = cache_->ResidentBytes(present);
  return resident < bytes ? bytes - resident : 0;
}

Result<GpuPreloadStats> GpuExecutorAdapter::Preload(uint64_t max_bytes, uint32_t min_postings) {
  const auto t0 = std::chrono::steady_clock::now();
  GpuPreloadStats out;
  const uint64_t budget = std::min<uint64_t>(max_bytes, cache_->stats().capacity_bytes / 10 * 9);
  if (budget == 0) return out;
  // The longest lists whose bytes sum to at most the budget: a min-heap on bytes, the smallest
  // dropped while the sum is over.
  using Entry = std::pair<uint32_t, std::string>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  uint64_t total = 0;
  SEARCH_RETURN_IF_ERROR(shard_->ForEachTerm([&](std::string_view term, const TermInfo& info) {
    if (info.count < min_postings || info.list_bytes == 0 || info.list_bytes > budget) return true;
    if (total + info.list_bytes > budget && !heap.empty() && heap.top().first >= info.list_bytes) return true;
    heap.emplace(info.list_bytes, std::string(term));
    total += info.list_bytes;
    while (total > budget) {
      total -= heap.top().first;
      heap.pop();
    }
    return true;
  }));
  std::vector<Entry> terms;
  terms.reserve(heap.size());
  for (; !heap.empty(); heap.pop()) terms.push_back(std::move(const_cast<Entry&>(heap.top())));
  std::reverse(terms.begin(), terms.end());  // longest first
  SEARCH_ASSIGN_OR_RETURN(auto ctx, TakeContext());
  auto* const stream = ctx->stream();
  // Handles pin their entries until the stream has finished the copies: synchronize and let go
  // every kChunkBytes so the host lists can be released.
  constexpr uint64_t kChunkBytes = uint64_t{256} << 20;
  std::vector<std::shared_ptr<const gpu::DeviceList>> pinned;
  uint64_t pinned_bytes = 0;
  auto release = [&]() -> Status {
    Status synced = gpu::SynchronizeStream(stream);
    pinned.clear();
    pinned_bytes = 0;
    return synced;
  };
  // Reading and decompressing the lists is host work: a chunk of about kChunkBytes is fetched by
  // several threads at once, then copied to the device in order by this one.
  const uint32_t fetchers = std::clamp<uint32_t>(std::thread::hardware_concurrency(), 1, 16);
  Status st;
  bool full = false;
  for (size_t begin = 0, end = 0; begin < terms.size() && st.ok() && !full; begin = end) {
    end = begin;
    for (uint64_t chunk_bytes = 0; end < terms.size() && chunk_bytes < kChunkBytes; ++end)
      chunk_bytes += terms[end].first;
    std::vector<Result<std::shared_ptr<const CachedList>>> lists(end - begin, Status::Internal("not fetched"));
    ParallelFor(end - begin, fetchers, [&](size_t i) { lists[i] = shard_->GetList(terms[begin + i].second); });
    for (auto& list : lists) {
      if (!list.ok()) {
        st = list.status();
        break;
      }
      auto h = cache_->Acquire(*list, stream);
      if (!h.ok()) {
        if (h.status().code() == StatusCode::kResourceExhausted) {
          out.cache_full = full = true;
        } else {
          st = h.status();
        }
        break;
      }
      out.lists++;
      out.bytes += (*list)->bytes().size();
      pinned_bytes += (*list)->bytes().size();
      pinned.push_back(std::move(h).value());
      if (pinned_bytes >= kChunkBytes) {
        st = release();
        if (!st.ok()) break;
      }
    }
  }
  const Status synced = release();
  if (st.ok()) st = synced;
  if (synced.ok()) GiveContext(std::move(ctx));  // a context that saw a CUDA error is dropped
  if (!st.ok()) return st;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

void GpuExecutorAdapter::CountFallback(GpuFallbackReason reason, const Status& why) {
  const uint64_t n = fallbacks_[static_cast<size_t>(reason)].fetch_add(1) + 1;
  if (gpu_metrics_ != nullptr) gpu_metrics_->CountFallback(reason);
  // Out of memory is routine under load (the cache is full of pinned lists); CUDA errors and
  // corruption are not: warn about the first few of each reason, then log at debug level.
  const bool loud = reason != GpuFallbackReason::kOutOfMemory && n <= 10;
  (loud ? Log().Warn() : Log().Debug()) << "GPU query fell back to the CPU (" << GpuFallbackReasonLabel(reason) << ", #"
                                        << n << "): " << why.ToString();
}

// One query's host-side state: as CpuExecutor::Search, term metadata and lists through the
// main-memory cache.
struct GpuExecutorAdapter::Prepared {
  std::vector<std::shared_ptr<const CachedList>> lists;
  std::vector<float> idf;
  size_t fetched = 0;
  bool empty = false;  // a flat and-query with a term absent here: answered without the GPU
  std::vector<bool> phrase;  // per term: a token of a phrase (its positions go to the device too)
  std::vector<std::shared_ptr<const gpu::DeviceList>> handles;  // pin the lists until the engine is done
  std::vector<gpu::GpuTermInput> inputs;
};

Status GpuExecutorAdapter::PrepareHost(const Query& query, const std::vector<PreparedTerm>* prepared, Prepared* p) {
  const ShardMeta& meta = shard_->meta();
  const size_t n = query.terms.size();
  p->lists.assign(n, nullptr);
  p->idf.assign(n, 0.0f);
  // The terms as the caller looked them up (BatchItem::prepared), or looked up here; one set of rules.
  const bool looked_up = prepared != nullptr && prepared->size() == n;
  const std::vector<std::string> phrase_tokens =
      query.tree != nullptr ? gpu::PhraseTokens(*query.tree) : std::vector<std::string>();
  // A phrase on a shard without positions: the reader's InvalidArgument, as the CPU engine says it.
  if (!phrase_tokens.empty() && !shard_->has_positions()) {
    auto none = shard_->GetPositions(phrase_tokens[0]);
    return none.ok() ? Status::Internal("the shard has no positions but answered for '" + phrase_tokens[0] + "'")
                     : none.status();
  }
  p->phrase.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    p->phrase[i] = std::binary_search(phrase_tokens.begin(), phrase_tokens.end(), query.terms[i]);
    SEARCH_ASSIGN_OR_RETURN(PreparedTerm t, LookUpTerm(*shard_, query.terms[i], looked_up ? &(*prepared)[i] : nullptr));
    if (!t.present) {
      // A flat and-query with a term absent here matches nothing here. Not a tree: `+a -absent`,
      // or `a absent` under or, still matches.
      if (query.tree == nullptr && query.mode == QueryMode::kAnd) {
        p->empty = true;
        return Status::Ok();
      }
      continue;
    }
    if (t.list == nullptr) continue;  // the term has no postings in this shard
    p->lists[i] = std::move(t.list);
    p->idf[i] = Bm25Idf(meta.stats.num_docs, t.df);
    ++p->fetched;
  }
  return Status::Ok();
}

Result<ExecOutput> GpuExecutorAdapter::ToOutput(const SearchResult& r, size_t fetched, uint64_t micros,
                                                bool resolve_ids) const {
  ExecOutput out;
  out.processor = Processor::kGpu;
  out.stats = r.stats;
  out.stats.lists = fetched;
  out.has_total = r.has_total;
  out.total = r.total;
  out.hits.reserve(r.hits.size());
  for (const ScoredDoc& d : r.hits) out.hits.push_back(HitMsg{d.doc, d.score, {}});
  if (resolve_ids) SEARCH_RETURN_IF_ERROR(ResolveExternalIds(*shard_, &out.hits));
  out.stats.micros = micros;
  return out;
}

void GpuExecutorAdapter::RunBatch(std::span<BatchItem> items, bool count_fallbacks) {
  const auto t0 = std::chrono::steady_clock::now();
  // The calling thread's CPU and wall time, charged to one part at each boundary (the metrics).
  double cpu_mark = ThreadCpuMicros();
  auto wall_mark = t0;
  auto charge = [&](GpuBatchPart part) {
    const auto i = static_cast<size_t>(part);
    const double now = ThreadCpuMicros();
    if (now > cpu_mark) batch_cpu_ns_[i].fetch_add(static_cast<uint64_t>((now - cpu_mark) * 1e3), std::memory_order_relaxed);
    cpu_mark = now;
    const auto wall_now = std::chrono::steady_clock::now();
    batch_wall_ns_[i].fetch_add(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall_now - wall_mark).count()),
        std::memory_order_relaxed);
    wall_mark = wall_now;
  };
  auto gpu_failed = [&](BatchItem& item, const Status& why) {
    item.result = why;
    item.retry_on_cpu = true;
    if (count_fallbacks) CountFallback(ReasonFor(why), why);
  };
  // Host side: a failure here is the query's own (the CPU would hit it too).
  std::vector<Prepared> prep(items.size());
  std::vector<size_t> device;  // items that go to the GPU
  for (size_t i = 0; i < items.size(); ++i) {
    BatchItem& item = items[i];
    item.retry_on_cpu = false;
    const Query& q = *item.query;
    if (const auto why = GpuUnsupported(q)) {  // callers keep these on the CPU (ScheduledExecutor)
      gpu_failed(item, gpu::GpuUnimplemented("the GPU engine does not run this query (" +
                                             std::string(GpuUnsupportedReasonLabel(*why)) + ")"));
      continue;
    }
    if (Status k = q.count && q.k == 0 ? Status::Ok() : ValidateK(q.k); !k.ok()) {  // k 0: the count alone
      item.result = k;
      continue;
    }
    if (q.terms.size() > gpu::kGpuMaxTerms) {
      gpu_failed(item, gpu::GpuUnimplemented("the GPU engine runs at most " + std::to_string(gpu::kGpuMaxTerms) +
                                             " terms, the query has " + std::to_string(q.terms.size())));
      continue;
    }
    if (Status st = PrepareHost(q, item.prepared, &prep[i]); !st.ok()) {
      item.result = st;
      continue;
    }
    if (prep[i].empty) {
      ExecOutput empty;
      empty.processor = Processor::kGpu;
      empty.has_total = q.count;  // total 0
      empty.stats.lists = prep[i].fetched;
      empty.stats.micros = MicrosSince(t0);
      item.result = std::move(empty);
      continue;
    }
    if (q.count && q.k == 0) {  // a count that list lengths answer: no device list, no GPU work
      std::vector<gpu::GpuTermInput> host(prep[i].lists.size());
      for (size_t t = 0; t < host.size(); ++t) {
        if (prep[i].lists[t] == nullptr) continue;
        host[t].list = &prep[i].lists[t]->view;
        host[t].idf = prep[i].idf[t];
      }
      if (auto answer = gpu::AnswerFromLengths(view_, gpu::GpuQueryInput{host, q.mode, q.k, q.tree.get(), q.count})) {
        if (answer->ok())
          item.result = ToOutput(**answer, prep[i].fetched, MicrosSince(t0), item.resolve_ids);
        else
          gpu_failed(item, answer->status());  // as the engine's errors: the CPU reruns it
        continue;
      }
    }
    device.push_back(i);
  }
  charge(GpuBatchPart::kPrepare);
  if (device.empty()) return;

  // Device side: every failure from here on is the GPU's (the CPU reruns the query).
  auto ctx_or = TakeContext();
  if (!ctx_or.ok()) {
    for (size_t i : device) gpu_failed(items[i], ctx_or.status());
    return;
  }
  std::unique_ptr<gpu::GpuContext> ctx = std::move(ctx_or).value();
  auto* const stream = ctx->stream();
  std::vector<size_t> run;  // items whose lists are all resident
  for (size_t i : device) {
    Prepared& p = prep[i];
    const size_t n = p.lists.size();
    p.handles.resize(n);
    p.inputs.resize(n);
    Status st;
    for (size_t t = 0; t < n && st.ok(); ++t) {
      if (p.lists[t] == nullptr) continue;
      auto h = cache_->Acquire(p.lists[t], stream);
      if (!h.ok()) {
        st = h.status();
        break;
      }
      p.handles[t] = std::move(h).value();
      p.inputs[t].list = &p.lists[t]->view;
      p.inputs[t].d_blob = p.handles[t]->d_blob;
      p.inputs[t].idf = p.idf[t];
      if (!p.phrase[t]) continue;
      // A phrase token's positions in the engine's layout, built from the host's list and
      // positions on a miss (device_positions.hpp); they share the cache's budget with the lists.
      const ListView& view = p.lists[t]->view;
      const std::string& term = items[i].query->terms[t];
      auto ph = cache_->AcquireBuilt(
          gpu::PositionsKey(term),
          [&]() -> Result<std::vector<uint32_t>> {
            SEARCH_ASSIGN_OR_RETURN(auto positions, shard_->GetPositions(term));
            return gpu::BuildDevicePositions(view, positions->view);
          },
          stream);
      if (!ph.ok()) {
        st = ph.status();
        break;
      }
      p.inputs[t].d_positions = reinterpret_cast<const uint32_t*>((*ph)->d_blob);
      p.handles.push_back(std::move(ph).value());
    }
    if (!st.ok()) {
      p.handles.clear();
      gpu_failed(items[i], st);
      continue;
    }
    run.push_back(i);
  }
  charge(GpuBatchPart::kAcquire);
  Status st;
  std::vector<Result<SearchResult>> results;
  if (!run.empty()) {
    std::vector<gpu::GpuQueryInput> batch;
    batch.reserve(run.size());
    for (size_t i : run) {  // inputs in query.terms' order (a tree's TreeTerms); items' queries outlive the call
      const Query& q = *items[i].query;
      batch.push_back(gpu::GpuQueryInput{prep[i].inputs, q.mode, q.k, q.tree.get(), q.count});
    }
    st = gpu::ExecuteBatchGpu(*ctx, view_, batch, &results);
    if (st.ok() && results.size() != run.size()) st = Status::Internal("GPU batch answered the wrong number of queries");
  }
  charge(GpuBatchPart::kEngine);
  // Copies or kernels may still be in flight after a failure: wait before the handles drop (an
  // unpinned list may be evicted and its memory reused). A context whose stream saw a CUDA error
  // is not reused.
  const Status synced = gpu::SynchronizeStream(stream);
  if (!synced.ok() || st.code() == StatusCode::kUnavailable) {
    gpu::ClearLastError();
    ctx.reset();
  }
  if (ctx != nullptr) GiveContext(std::move(ctx));
  for (size_t i : device) prep[i].handles.clear();
  const uint64_t micros = MicrosSince(t0);
  for (size_t r = 0; r < run.size(); ++r) {
    BatchItem& item = items[run[r]];
    if (!st.ok()) {
      gpu_failed(item, st);
    } else if (!results[r].ok()) {
      gpu_failed(item, results[r].status());
    } else {
      item.result = ToOutput(*results[r], prep[run[r]].fetched, micros, item.resolve_ids);  // host errors: returned as they are
    }
  }
  charge(GpuBatchPart::kFinish);
}

Result<BatchExecutor::Prefix> GpuExecutorAdapter::IntersectPrefix(const Query& query, double crossover) {
  if (query.mode == QueryMode::kOr) return Status::InvalidArgument("an or-query has no intersection");
  if (query.tree != nullptr || query.count)  // the scheduler steps flat queries only
    return Status::InvalidArgument("a query tree or a count has no intersection prefix");
  Prepared p;
  SEARCH_RETURN_IF_ERROR(PrepareHost(query, nullptr, &p));
  Prefix out;
  if (p.empty) return out;  // an and-term absent here: no candidates
  std::vector<size_t> order;
  for (size_t i = 0; i < p.lists.size(); ++i)
    if (p.lists[i] != nullptr) order.push_back(i);
  if (order.size() < 2) return Status::InvalidArgument("fewer than two lists: nothing to intersect");
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return p.lists[a]->view.count() < p.lists[b]->view.count(); });

  SEARCH_ASSIGN_OR_RETURN(std::unique_ptr<gpu::GpuContext> ctx, TakeContext());
  auto* const stream = ctx->stream();
  std::vector<std::shared_ptr<const gpu::DeviceList>> handles;  // pinned until the stream is done
  Status st = [&]() -> Status {
    gpu::StreamBuffer cur(stream), next(stream), inter(stream), temp(stream), words(stream);
    SEARCH_RETURN_IF_ERROR(words.Allocate(2 * sizeof(uint32_t)));  // [0] decode error, [1] count
    SEARCH_RETURN_IF_ERROR(gpu::MemsetAsync(words.get(), 0, 2 * sizeof(uint32_t), stream));
    auto acquire = [&](size_t i) -> Result<const uint8_t*> {
      SEARCH_ASSIGN_OR_RETURN(auto h, cache_->Acquire(p.lists[i], stream));
      handles.push_back(h);
      return h->d_blob;
    };
    const ListView& first = p.lists[order[0]]->view;
    uint64_t size = first.count();
    SEARCH_RETURN_IF_ERROR(cur.Allocate(size * sizeof(uint32_t)));
    SEARCH_ASSIGN_OR_RETURN(const uint8_t* blob0, acquire(order[0]));
    SEARCH_RETURN_IF_ERROR(gpu::DecodeListGpu(blob0, first, cur.as<uint32_t>(), nullptr, words.as<uint32_t>(), stream));
    out.lists_done = 1;
    for (size_t j = 1; j < order.size() && size > 0; ++j) {
      const ListView& v = p.lists[order[j]]->view;
      const uint64_t len = v.count();
      if (j >= 2 && static_cast<double>(len) >= crossover * static_cast<double>(size)) break;  // hand off
      SEARCH_RETURN_IF_ERROR(next.Allocate(len * sizeof(uint32_t)));
      SEARCH_ASSIGN_OR_RETURN(const uint8_t* blob, acquire(order[j]));
      SEARCH_RETURN_IF_ERROR(gpu::DecodeListGpu(blob, v, next.as<uint32_t>(), nullptr, words.as<uint32_t>(), stream));
      const gpu::IntersectMethod method = len <= 8 * size && size >= (uint64_t{1} << 20)
                                              ? gpu::IntersectMethod::kMergePath
                                              : gpu::IntersectMethod::kBinarySearch;
      size_t temp_bytes = 0;
      const auto na = static_cast<uint32_t>(size), nb = static_cast<uint32_t>(len);
      SEARCH_RETURN_IF_ERROR(gpu::IntersectGpu(method, cur.as<uint32_t>(), na, next.as<uint32_t>(), nb, nullptr, nullptr,
                                               nullptr, nullptr, temp_bytes, stream));
      SEARCH_RETURN_IF_ERROR(temp.Allocate(temp_bytes));
      SEARCH_RETURN_IF_ERROR(inter.Allocate(size * sizeof(uint32_t)));
      SEARCH_RETURN_IF_ERROR(gpu::IntersectGpu(method, cur.as<uint32_t>(), na, next.as<uint32_t>(), nb,
                                               inter.as<uint32_t>(), nullptr, words.as<uint32_t>() + 1,
                                               temp.as<void>(), temp_bytes, stream));
      uint32_t count = 0;
      SEARCH_RETURN_IF_ERROR(gpu::CopyToHostAsync(&count, words.as<uint32_t>() + 1, sizeof(uint32_t), stream));
      SEARCH_RETURN_IF_ERROR(gpu::CheckDecodeError(words.as<uint32_t>(), stream));  // synchronizes
      cur.Swap(inter);
      size = std::min<uint64_t>(count, size);
      ++out.lists_done;
    }
    out.candidates.resize(size);
    if (size > 0) {
      SEARCH_RETURN_IF_ERROR(
          gpu::CopyToHostAsync(out.candidates.data(), cur.get(), size * sizeof(uint32_t), stream));
    }
    SEARCH_RETURN_IF_ERROR(gpu::CheckDecodeError(words.as<uint32_t>(), stream));
    return Status::Ok();
  }();
  // The buffers' frees are queued on the stream; wait for them before the lists are unpinned.
  const Status synced = gpu::SynchronizeStream(stream);
  if (!synced.ok() || st.code() == StatusCode::kUnavailable) {
    gpu::ClearLastError();
    ctx.reset();
  }
  if (ctx != nullptr) GiveContext(std::move(ctx));
  handles.clear();
  if (!st.ok()) {
    CountFallback(ReasonFor(st), st);
    return st;
  }
  return out;
}

}  // namespace search
