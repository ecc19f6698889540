// GpuListCache (see gpu_cache/gpu_list_cache.hpp): the entry table and its LRU, the stream-ordered
// memory pool, and the chunked copies through pinned staging buffers.
#include "gpu_cache/gpu_list_cache.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "gpu_exec/cuda_util.hpp"
#include "index_store/shard_store.hpp"

namespace search::gpu {
namespace {

constexpr size_t kAllocAlign = 256;  // allocation granularity (and padding) of list blobs
constexpr size_t kTailPad = 16;      // zero bytes at least past each blob (vector loads near the end)
constexpr size_t kNumStaging = 4;    // pinned staging buffers: copies of several threads overlap
constexpr size_t kMinStagingBuffer = 256;
constexpr uintptr_t kRequiredAlign = 16;  // what the engine's loads need (gpu_engine.hpp)

size_t PaddedBytes(size_t n) {
  return (n + kTailPad + kAllocAlign - 1) / kAllocAlign * kAllocAlign;
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

enum class EntryState : uint8_t {
  kCopying,  // allocated, the copy is being enqueued (ready not recorded yet)
  kReady,    // ready recorded after the copy: other streams wait on it
  kFailed,   // the copy could not be enqueued; removed from the table
};

struct Entry {
  DeviceList dl;                // immutable once the entry is in the table
  void* d_ptr = nullptr;        // the pool allocation (dl.d_blob)
  size_t alloc_bytes = 0;       // PaddedBytes(dl.bytes)
  cudaEvent_t ready = nullptr;  // recorded on the copying stream after the copy
  // Set once `ready` was seen complete: later acquirers need not order their streams after it, so
  // a hit on a copied entry makes no CUDA call (a cudaStreamWaitEvent per list of every query
  // would serialize the threads in the driver).
  std::atomic<bool> copied{false};
  // The rest GUARDED_BY(Impl::mu).
  EntryState state = EntryState::kCopying;
  uint32_t pins = 0;  // outstanding handles (plus the copying thread's own)
  std::list<Entry*>::iterator lru_it;
};

// A cache key for messages: a term, or a built blob's key with its '\0' shown as '#'.
std::string PrintableKey(std::string key) {
  for (char& c : key)
    if (c == '\0') c = '#';
  return key;
}

// "812 bytes", "3.50 MiB".
std::string HumanBytes(size_t bytes) {
  if (bytes < (size_t{1} << 20)) return std::to_string(bytes) + " bytes";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

struct GpuListCache::Impl : std::enable_shared_from_this<GpuListCache::Impl> {
  const ShardReader* shard = nullptr;
  GpuCacheOptions options;
  DeviceBuffer d_norms;
  uint32_t doc_begin = 0;
  uint32_t num_docs = 0;
  float min_norm = 0.0f;
  cudaMemPool_t pool = nullptr;
  Stream aux;  // frees that have no caller stream (Clear, destruction)

  mutable std::mutex mu;
  std::condition_variable copied_cv;  // some entry left kCopying
  std::unordered_map<std::string, std::shared_ptr<Entry>, StringHash, std::equal_to<>> table;  // GUARDED_BY(mu)
  std::list<Entry*> lru;  // GUARDED_BY(mu), front = most recently used; every table entry
  size_t used_bytes = 0;  // GUARDED_BY(mu), allocation bytes of the table's entries (<= capacity)
  uint64_t hits = 0, misses = 0, evictions = 0, bytes_copied = 0, failed_allocations = 0;  // GUARDED_BY(mu)

  struct Staging {
    PinnedBuffer buf;
    Event done;         // recorded after the last copy out of buf
    bool busy = false;  // GUARDED_BY(staging_mu): a thread is filling it
  };
  std::mutex staging_mu;
  std::condition_variable staging_cv;
  std::vector<Staging> staging;
  size_t next_staging = 0;  // GUARDED_BY(staging_mu)

  ~Impl() {
    // No handle is left (handles own a reference to the Impl), so nothing is pinned.
    for (Entry* e : lru) Release(*e, aux.get());
    lru.clear();
    table.clear();
    if (aux.get() != nullptr) (void)cudaStreamSynchronize(aux.get());
    for (Staging& s : staging) {
      if (s.done.get() != nullptr) (void)s.done.Synchronize();
    }
    if (pool != nullptr) (void)cudaMemPoolDestroy(pool);
  }

  // Frees an entry's device memory, stream-ordered on `stream` after its copy.
  static void Release(Entry& e, cudaStream_t stream) {
    if (e.ready != nullptr) {
      (void)cudaStreamWaitEvent(stream, e.ready, 0);
      (void)cudaEventDestroy(e.ready);
      e.ready = nullptr;
    }
    if (e.d_ptr != nullptr) (void)cudaFreeAsync(e.d_ptr, stream);
    e.d_ptr = nullptr;
    e.dl.d_blob = nullptr;
  }

  // Drops `e` from the table and the LRU. REQUIRES: mu held, e in the table.
  void Unlink(Entry& e) {
    lru.erase(e.lru_it);
    used_bytes -= e.alloc_bytes;
    table.erase(e.dl.host->term);  // last: may destroy the entry's table reference
  }

  // Evicts the least recently used unpinned entry, freeing it on `stream`. False when every entry
  // is pinned. REQUIRES: mu held.
  bool EvictOne(cudaStream_t stream) {
    for (auto it = lru.rbegin(); it != lru.rend(); ++it) {
      Entry* e = *it;
      if (e->pins != 0) continue;
      auto keep = table.find(e->dl.host->term)->second;  // alive past Unlink
      Unlink(*e);
      Release(*e, stream);
      ++evictions;
      return true;
    }
    return false;
  }

  std::shared_ptr<const DeviceList> MakeHandle(std::shared_ptr<Entry> e) {
    const DeviceList* dl = &e->dl;
    return std::shared_ptr<const DeviceList>(dl, [impl = shared_from_this(), e = std::move(e)](const DeviceList*) {
      std::lock_guard<std::mutex> lock(impl->mu);
      --e->pins;
    });
  }

  // A staging buffer for this thread alone: preferably one whose last copy has finished.
  size_t TakeStaging() {
    std::unique_lock<std::mutex> lock(staging_mu);
    for (;;) {
      for (size_t i = 0; i < staging.size(); ++i) {
        const size_t j = (next_staging + i) % staging.size();
        if (!staging[j].busy && cudaEventQuery(staging[j].done.get()) == cudaSuccess) {
          staging[j].busy = true;
          next_staging = (j + 1) % staging.size();
          return j;
        }
      }
      for (size_t i = 0; i < staging.size(); ++i) {
        const size_t j = (next_staging + i) % staging.size();
        if (!staging[j].busy) {
          staging[j].busy = true;
          next_staging = (j + 1) % staging.size();
          return j;
        }
      }
      staging_cv.wait(lock);
    }
  }
  std::optional<Result<std::shared_ptr<const DeviceList>>> Hit(std::string_view key, std::unique_lock<std::mutex>& lock,
                                                               cudaStream_t stream);
  Result<std::shared_ptr<const DeviceList>> Insert(std::shared_ptr<const CachedList> host, const uint8_t* src, size_t n,
                                                   std::unique_lock<std::mutex>& lock, cudaStream_t stream);

  void GiveStaging(size_t i) {
    {
      std::lock_guard<std::mutex> lock(staging_mu);
      staging[i].busy = false;
    }
    staging_cv.notify_one();
  }

  // Enqueues the copy of `list` into d_dst (then zeroes the padding up to alloc_bytes) on
  // `stream` and records `ready` behind it.
  Status CopyIn(const uint8_t* src, size_t n, uint8_t* d_dst, size_t alloc_bytes, cudaEvent_t ready,
                cudaStream_t stream) {
    for (size_t off = 0; off < n;) {
      const size_t i = TakeStaging();
      Staging& s = staging[i];
      const size_t chunk = std::min(n - off, s.buf.size());
      Status st = s.done.Synchronize();  // the buffer's previous copy has finished reading it
      if (st.ok()) {
        std::memcpy(s.buf.get(), src + off, chunk);
        const cudaError_t e = cudaMemcpyAsync(d_dst + off, s.buf.get(), chunk, cudaMemcpyHostToDevice, stream);
        if (e != cudaSuccess) {
          st = CudaStatus(e, "cudaMemcpyAsync(list chunk)", __FILE__);
        } else {
          st = s.done.Record(stream);
        }
      }
      GiveStaging(i);
      SEARCH_RETURN_IF_ERROR(st);
      off += chunk;
    }
    if (alloc_bytes > n) SEARCH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_dst + n, 0, alloc_bytes - n, stream));
    SEARCH_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready, stream));
    return Status::Ok();
  }
};

GpuListCache::GpuListCache(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuListCache::~GpuListCache() = default;

Result<std::unique_ptr<GpuListCache>> GpuListCache::Create(const ShardReader* shard, const GpuCacheOptions& options) {
  if (shard == nullptr) return Status::InvalidArgument("GpuListCache: no shard");
  if (!GpuAvailable()) return Status::Unavailable("GpuListCache: no usable GPU (" + GpuDescription() + ")");
  int device = 0;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  int pools = 0;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  if (pools == 0) return Status::Unavailable("GpuListCache: the device does not support stream-ordered memory pools");

  auto impl = std::make_shared<Impl>();
  impl->shard = shard;
  impl->options = options;
  const ShardMeta& meta = shard->meta();
  if (meta.doc_end < meta.doc_begin) return Status::Corruption("GpuListCache: shard doc range is inverted");
  impl->doc_begin = meta.doc_begin;
  impl->num_docs = meta.doc_end - meta.doc_begin;
  if (impl->num_docs > 0) {
    const size_t norm_bytes = size_t{impl->num_docs} * sizeof(float);
    SEARCH_ASSIGN_OR_RETURN(impl->d_norms, DeviceBuffer::Allocate(norm_bytes));
    SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpy(impl->d_norms.get(), shard->norms(), norm_bytes, cudaMemcpyHostToDevice));
    float lo = std::numeric_limits<float>::infinity();
    for (uint32_t i = 0; i < impl->num_docs; ++i) {
      const float v = shard->norms()[i];
      if (!(v >= 0.0f)) {  // negative or NaN: no usable floor
        lo = 0.0f;
        break;
      }
      lo = std::min(lo, v);
    }
    impl->min_norm = lo;
  }

  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&impl->pool, &props));
  // Keep up to the whole budget in the pool between frees and allocations (no release to the OS).
  uint64_t threshold = options.capacity_bytes;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAttribute(impl->pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  SEARCH_ASSIGN_OR_RETURN(impl->aux, Stream::Create());

  size_t per_buffer = std::max(options.staging_bytes / kNumStaging, kMinStagingBuffer);
  per_buffer = (per_buffer + 15) / 16 * 16;
  impl->staging.resize(kNumStaging);
  for (auto& s : impl->staging) {
    SEARCH_ASSIGN_OR_RETURN(s.buf, PinnedBuffer::Allocate(per_buffer));
    SEARCH_ASSIGN_OR_RETURN(s.done, Event::Create());
  }
  return std::unique_ptr<GpuListCache>(new GpuListCache(std::move(impl)));
}

// A hit on `key`: the pinned handle (the stream ordered after a copy in flight); std::nullopt on a
// miss. REQUIRES: lock holds m.mu; it is released on a hit.
std::optional<Result<std::shared_ptr<const DeviceList>>> GpuListCache::Impl::Hit(std::string_view key,
                                                                                 std::unique_lock<std::mutex>& lock,
                                                                                 cudaStream_t stream) {
  for (;;) {
    auto it = table.find(key);
    if (it == table.end()) return std::nullopt;
    std::shared_ptr<Entry> e = it->second;
    if (e->state == EntryState::kCopying) {
      // Another thread is enqueueing the copy (its ready event is not recorded yet). Look again
      // afterwards: the copy may have failed, or the entry been evicted once its copier let go.
      copied_cv.wait(lock, [&] { return e->state != EntryState::kCopying; });
      continue;
    }
    ++e->pins;
    ++hits;
    lru.splice(lru.begin(), lru, e->lru_it);
    lock.unlock();
    auto handle = MakeHandle(e);  // unpins on every return path
    if (e->copied.load(std::memory_order_acquire)) return handle;
    // Orders this stream after the copy, unless the copy has finished: then the list's bytes are
    // in device memory for every later launch on any stream, and no later acquirer waits either.
    const cudaError_t done = cudaEventQuery(e->ready);
    if (done == cudaSuccess) {
      e->copied.store(true, std::memory_order_release);
      return handle;
    }
    if (done != cudaErrorNotReady) return CudaStatus(done, "cudaEventQuery(list copy)", __FILE__);
    if (const cudaError_t w = cudaStreamWaitEvent(stream, e->ready, 0); w != cudaSuccess)
      return CudaStatus(w, "cudaStreamWaitEvent(list copy)", __FILE__);
    return handle;
  }
}

// A miss: make room, allocate from the pool, publish the entry (kCopying) for host->term, copy
// src[0, n) unlocked. REQUIRES: lock holds m.mu (released on return).
Result<std::shared_ptr<const DeviceList>> GpuListCache::Impl::Insert(std::shared_ptr<const CachedList> host,
                                                                     const uint8_t* src, size_t n,
                                                                     std::unique_lock<std::mutex>& lock,
                                                                     cudaStream_t stream) {
  Impl& m = *this;
  ++m.misses;
  const size_t need = PaddedBytes(n);
  const size_t capacity = m.options.capacity_bytes;
  auto exhausted = [&](const std::string& why) {
    ++m.failed_allocations;
    return Status::ResourceExhausted("GPU list cache: entry '" + PrintableKey(host->term) + "' (" + HumanBytes(need) +
                                     ") " + why);
  };
  if (need > capacity) return exhausted("exceeds the whole budget of " + HumanBytes(capacity));
  while (m.used_bytes + need > capacity) {
    if (!m.EvictOne(stream)) {
      return exhausted("does not fit: " + HumanBytes(m.used_bytes) + " of " + HumanBytes(capacity) +
                       " held by pinned lists");
    }
  }
  void* d_ptr = nullptr;
  for (;;) {
    const cudaError_t err = cudaMallocFromPoolAsync(&d_ptr, need, m.pool, stream);
    if (err == cudaSuccess) break;
    if (err != cudaErrorMemoryAllocation) return CudaStatus(err, "cudaMallocFromPoolAsync", __FILE__);
    (void)cudaGetLastError();  // out of memory is not sticky; clear it
    // The device is fuller than the budget assumed (other allocations): give back cached lists.
    if (!m.EvictOne(stream)) return exhausted("cannot be allocated: the device is out of memory");
  }
  if (reinterpret_cast<uintptr_t>(d_ptr) % kRequiredAlign != 0) {
    (void)cudaFreeAsync(d_ptr, stream);
    return Status::Internal("GPU list cache: pool allocation is not 16-byte aligned");
  }
  cudaEvent_t ready = nullptr;
  if (const cudaError_t err = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming); err != cudaSuccess) {
    (void)cudaFreeAsync(d_ptr, stream);
    return CudaStatus(err, "cudaEventCreateWithFlags", __FILE__);
  }
  const std::string key = host->term;
  auto e = std::make_shared<Entry>();
  e->dl.host = std::move(host);
  e->dl.d_blob = static_cast<const uint8_t*>(d_ptr);
  e->dl.bytes = n;
  e->d_ptr = d_ptr;
  e->alloc_bytes = need;
  e->ready = ready;
  e->state = EntryState::kCopying;
  e->pins = 1;  // the handle returned below
  m.lru.push_front(e.get());
  e->lru_it = m.lru.begin();
  m.table.emplace(key, e);
  m.used_bytes += need;
  lock.unlock();

  Status st = m.CopyIn(src, n, static_cast<uint8_t*>(d_ptr), need, ready, stream);

  lock.lock();
  if (!st.ok()) {
    e->state = EntryState::kFailed;
    m.Unlink(*e);
    Impl::Release(*e, stream);  // after whatever part of the copy was enqueued
    --e->pins;
    lock.unlock();
    m.copied_cv.notify_all();
    return st.WithContext("copying '" + PrintableKey(key) + "' to the GPU");
  }
  e->state = EntryState::kReady;
  m.bytes_copied += n;
  lock.unlock();
  m.copied_cv.notify_all();
  return m.MakeHandle(std::move(e));
}

Result<std::shared_ptr<const DeviceList>> GpuListCache::Acquire(const std::shared_ptr<const CachedList>& list,
                                                                CUstream_st* stream) {
  if (list == nullptr) return Status::InvalidArgument("GpuListCache::Acquire: no list");
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (auto hit = impl_->Hit(list->term, lock, stream)) return std::move(*hit);
  return impl_->Insert(list, list->storage.get(), list->size, lock, stream);
}

Result<std::shared_ptr<const DeviceList>> GpuListCache::AcquireBuilt(std::string_view key, const BlobBuilder& build,
                                                                     CUstream_st* stream) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  if (auto hit = m.Hit(key, lock, stream)) return std::move(*hit);
  lock.unlock();
  SEARCH_ASSIGN_OR_RETURN(const std::vector<uint32_t> words, build());  // outside the lock
  auto stub = std::make_shared<CachedList>();  // the key and size only: no host copy is kept
  stub->term = std::string(key);
  const size_t bytes = words.size() * sizeof(uint32_t);
  stub->size = bytes;
  lock.lock();
  if (auto hit = m.Hit(key, lock, stream)) return std::move(*hit);  // another thread built it meanwhile
  return m.Insert(std::move(stub), reinterpret_cast<const uint8_t*>(words.data()), bytes, lock, stream);
}

bool GpuListCache::IsResident(std::string_view term) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->table.find(term) != impl_->table.end();
}

uint64_t GpuListCache::ResidentBytes(std::span<const std::string> terms) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  uint64_t total = 0;
  for (const std::string& t : terms) {
    auto it = impl_->table.find(t);
    if (it != impl_->table.end()) total += it->second->dl.bytes;
  }
  return total;
}

const float* GpuListCache::d_norms() const {
  return impl_->d_norms.as<const float>();
}
float GpuListCache::min_norm() const {
  return impl_->min_norm;
}
uint32_t GpuListCache::doc_begin() const {
  return impl_->doc_begin;
}
uint32_t GpuListCache::num_docs() const {
  return impl_->num_docs;
}

GpuCacheStats GpuListCache::stats() const {
  const Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  GpuCacheStats s;
  s.hits = m.hits;
  s.misses = m.misses;
  s.evictions = m.evictions;
  s.bytes_copied = m.bytes_copied;
  s.resident_bytes = m.used_bytes;
  s.resident_lists = m.table.size();
  s.capacity_bytes = m.options.capacity_bytes;
  s.norm_bytes = m.d_norms.size();
  s.failed_allocations = m.failed_allocations;
  return s;
}

void GpuListCache::Clear() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  for (auto it = m.lru.begin(); it != m.lru.end();) {
    Entry* e = *it++;
    if (e->pins != 0) continue;
    auto keep = m.table.find(e->dl.host->term)->second;
    m.Unlink(*e);
    Impl::Release(*e, m.aux.get());
  }
}

}  // namespace search::gpu
