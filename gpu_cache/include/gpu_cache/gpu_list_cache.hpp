// GpuListCache: which of a shard's compressed posting lists (and blobs built from them, such as a
// term's positions in the GPU engine's layout: AcquireBuilt) live in GPU global memory, and how the
// others get there. Entries are whole list blobs (header, block metadata, payload: codec/FORMAT.md)
// in device memory under a byte budget, evicted least-recently-used; a miss copies the host list
// (a main-memory ListCache entry) through a pinned staging buffer with an asynchronous
// host-to-device copy on the caller's stream, so the copy overlaps other streams' kernels. The
// shard's BM25 document-length norms are resident for the cache's lifetime (Heo 2020 §4.3).
//
// Residency is visible (IsResident / ResidentBytes) so a scheduler can choose between waiting for
// a copy and running a query on the CPU. Counters: hits, misses, evictions, bytes copied,
// resident bytes and lists (exported by the node as Prometheus metrics).
//
// Memory: list blobs come from a stream-ordered device memory pool (cudaMemPoolCreate, release
// threshold = capacity; cudaMallocFromPoolAsync / cudaFreeAsync), never cudaMalloc/cudaFree per
// list (cudaFree synchronizes the device). Each blob is padded to a multiple of 256 bytes (at least
// 16 zero bytes past the list) so vector loads near its end stay inside the allocation.
// Copies: a few pinned staging buffers, each reused only after the event recorded behind its last
// copy has completed; a list larger than one buffer is copied in chunks. Each entry records a ready
// event after its copy; a hit while that event is pending makes its stream wait on it, and the
// first hit that finds it complete marks the entry copied, after which hits make no CUDA call.
//
// Lifetime: Acquire returns a handle that pins the entry (pinned entries are never evicted); an
// entry dropped while pinned (a failed copy) releases its device memory only when its last handle
// is gone. Callers drop handles after their stream has finished with the data (the engine
// synchronizes its stream before returning). Handles keep the cache's internals alive, so a handle
// may outlive the GpuListCache object (the memory is then freed with the last handle).
// Thread-safety: all methods are thread-safe (one mutex for the entries, one for the staging
// buffers; host-to-staging copies run outside the entry mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"
#include "index_store/list_cache.hpp"

struct CUstream_st;

namespace search {
class ShardReader;
}

namespace search::gpu {

struct GpuCacheOptions {
  size_t capacity_bytes = size_t{8} << 30;  // device bytes for list blobs (norms not counted)
  size_t staging_bytes = size_t{64} << 20;  // pinned staging for copies; larger lists go in chunks
};

struct GpuCacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0;
  uint64_t bytes_copied = 0;    // host-to-device bytes of list blobs
  uint64_t resident_bytes = 0;  // device bytes held by entries (lists and built blobs)
  uint64_t resident_lists = 0;  // entries (lists and built blobs)
  uint64_t capacity_bytes = 0;
  uint64_t norm_bytes = 0;          // the resident norms
  uint64_t failed_allocations = 0;  // misses that could not get device memory (list not cached)
};

// A list in device memory. `host` is the list it was copied from (its ListView for metadata); for
// a built blob (AcquireBuilt), its key and size only.
struct DeviceList {
  std::shared_ptr<const CachedList> host;
  const uint8_t* d_blob = nullptr;  // device copy of host->bytes(); 16-byte aligned at least (checked)
  size_t bytes = 0;                 // host->size; the allocation is padded past it with zeros
};

class GpuListCache {
 public:
  // Uploads the shard's norms (synchronously), creates the memory pool and the staging buffers.
  // Unavailable when there is no usable GPU (GpuAvailable() false, or the device lacks memory
  // pools); ResourceExhausted when the norms or the staging buffers do not fit.
  // REQUIRES: shard outlives the cache (and every handle).
  static Result<std::unique_ptr<GpuListCache>> Create(const ShardReader* shard, const GpuCacheOptions& options = {});
  ~GpuListCache();
  GpuListCache(const GpuListCache&) = delete;
  GpuListCache& operator=(const GpuListCache&) = delete;

  // The device copy of `list` (keyed by list->term). On a miss the copy is enqueued on `stream`;
  // work enqueued on `stream` after this call sees the data (a hit whose copy is still in flight
  // on another stream makes `stream` wait for it). ResourceExhausted when the list cannot get
  // device memory even after evicting every unpinned entry (also for a list larger than the whole
  // budget: counted in failed_allocations, nothing cached); Unavailable on a CUDA error.
  // REQUIRES: list != nullptr.
  Result<std::shared_ptr<const DeviceList>> Acquire(const std::shared_ptr<const CachedList>& list, CUstream_st* stream);

  // A blob built on the host only on a miss: the device copy of build()'s words under `key` (which
  // no term may equal: e.g. gpu_exec's PositionsKey(term), a term's positions in the GPU engine's
  // layout), in the same budget, LRU and pinning as lists. build runs outside the cache's lock;
  // its error is returned as it is (nothing cached). The entry keeps no host copy: its
  // DeviceList::host is a CachedList of the key and size alone. Errors otherwise as Acquire's.
  using BlobBuilder = std::function<Result<std::vector<uint32_t>>()>;
  Result<std::shared_ptr<const DeviceList>> AcquireBuilt(std::string_view key, const BlobBuilder& build,
                                                         CUstream_st* stream);

  // True when the term's list is cached (its copy may still be in flight).
  bool IsResident(std::string_view term) const;
  // Device-resident bytes of those of `terms` that are resident (for a cost model).
  uint64_t ResidentBytes(std::span<const std::string> terms) const;

  const float* d_norms() const;  // [doc - doc_begin], the shard's documents
  float min_norm() const;         // the smallest of them (0 with no documents or a negative/NaN norm)
  uint32_t doc_begin() const;
  uint32_t num_docs() const;

  GpuCacheStats stats() const;
  void Clear();  // drops every unpinned entry

  struct Impl;

 private:
  explicit GpuListCache(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // shared with outstanding handles
};

}  // namespace search::gpu
