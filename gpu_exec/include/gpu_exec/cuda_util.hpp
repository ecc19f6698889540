// CUDA plumbing shared by gpu_exec and gpu_cache, and the only CUDA API the rest of the code uses
// (node's GPU executor calls CUDA through it): every CUDA runtime call goes through
// SEARCH_CUDA_RETURN_IF_ERROR (CUB's CubDebug idea), which turns a cudaError_t into a Status
// (ResourceExhausted for out-of-memory, Unavailable otherwise) naming the call and the file:line;
// RAII owners for device memory (plain and stream-ordered), pinned host memory, streams and
// events; device discovery; Status-returning stream-ordered copies, fills and synchronization.
// Thread-safety: the free functions are thread-safe; each owner object is used by one thread at a
// time (moving it hands it over).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/status.hpp"

namespace search::gpu {

// A Status for a failed CUDA call: `what` is the call's text, `where` file:line.
Status CudaStatus(cudaError_t e, const char* what, const char* where);

#define SEARCH_CUDA_STRINGIFY2(x) #x
#define SEARCH_CUDA_STRINGIFY(x) SEARCH_CUDA_STRINGIFY2(x)
#define SEARCH_CUDA_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                           \
    const cudaError_t search_cuda_err_ = (expr);                                                 \
    if (search_cuda_err_ != cudaSuccess)                                                         \
      return ::search::gpu::CudaStatus(search_cuda_err_, #expr, __FILE__ ":" SEARCH_CUDA_STRINGIFY(__LINE__)); \
  } while (0)

// Number of usable CUDA devices (0 when there is no driver, no device, or the runtime fails).
// Cached after the first call. SEARCH_GPU_DISABLE=1 in the environment forces 0 (tests of the
// no-GPU paths on a machine with a GPU).
int GpuDeviceCount();
inline bool GpuAvailable() { return GpuDeviceCount() > 0; }
// "<device name>, sm_<major><minor>, <memory> GiB" of the current device, or the reason there is
// none.
std::string GpuDescription();

// Host threads that wait for the GPU sleep until it signals (cudaSetDeviceFlags'
// cudaDeviceScheduleBlockingSync) instead of CUDA's default heuristic, which spins while the
// process has fewer contexts than cores and so keeps a core busy for as long as the stream runs.
// Call before the process's first GPU work.
Status SetGpuBlockingSync();

// Memory from one allocate/free pair of the CUDA runtime, owned. Empty when size is 0.
enum class MemoryKind : uint8_t { kDevice, kPinnedHost };

template <MemoryKind K>
class CudaMemory {
 public:
  CudaMemory() = default;
  static Result<CudaMemory> Allocate(size_t bytes);
  ~CudaMemory() { Reset(); }
  CudaMemory(CudaMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  CudaMemory& operator=(CudaMemory&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t size() const { return size_; }
  void Reset();

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// Device memory (cudaMalloc/cudaFree).
using DeviceBuffer = CudaMemory<MemoryKind::kDevice>;
// Page-locked host memory (cudaMallocHost/cudaFreeHost), for asynchronous copies.
using PinnedBuffer = CudaMemory<MemoryKind::kPinnedHost>;
extern template class CudaMemory<MemoryKind::kDevice>;
extern template class CudaMemory<MemoryKind::kPinnedHost>;

// Device memory in stream order (cudaMallocAsync from the current device's default memory pool,
// cudaFreeAsync on the same stream): no cudaMalloc per use once the pool has grown, and memory is
// reused only after the stream's earlier work on it. The stream must outlive the buffer.
class StreamBuffer {
 public:
  explicit StreamBuffer(cudaStream_t stream) : stream_(stream) {}
  ~StreamBuffer() { Reset(); }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  // Frees the current memory (in stream order) and takes max(bytes, 16) uninitialized bytes.
  Status Allocate(size_t bytes);
  // Exchanges the memory of two buffers. REQUIRES: both on the same stream.
  void Swap(StreamBuffer& o) noexcept { std::swap(ptr_, o.ptr_); }
  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  void Reset();

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

// The current device's free and total memory (cudaMemGetInfo).
struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};
Result<DeviceMemoryInfo> GetDeviceMemoryInfo();

// Stream-ordered fill and device-to-host copy. For a copy that is truly asynchronous h_dst must be
// pinned; from pageable memory the call returns once the copy is done.
Status MemsetAsync(void* d_dst, int value, size_t bytes, cudaStream_t stream);
Status CopyToHostAsync(void* h_dst, const void* d_src, size_t bytes, cudaStream_t stream);
// Waits for the work queued on `stream` (one this code does not own, e.g. GpuContext::stream()).
Status SynchronizeStream(cudaStream_t stream);
// Clears the calling thread's last (non-sticky) CUDA error, after a failure has been reported as a
// Status, so that it is not reported again by the next unrelated call's error check.
void ClearLastError();

// A non-blocking stream (cudaStreamNonBlocking: no implicit sync with the legacy stream).
class Stream {
 public:
  Stream() = default;
  static Result<Stream> Create();
  ~Stream() { Reset(); }
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      Reset();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  Status Synchronize() const;
  void Reset();

 private:
  cudaStream_t s_ = nullptr;
};

// An event without timing (cudaEventDisableTiming) unless `timing`.
class Event {
 public:
  Event() = default;
  static Result<Event> Create(bool timing = false);
  ~Event() { Reset(); }
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    if (this != &o) {
      Reset();
      e_ = std::exchange(o.e_, nullptr);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  Status Record(cudaStream_t stream) const;
  // True when the work before the last Record has finished; Unavailable on a CUDA error.
  Result<bool> Done() const;
  Status Synchronize() const;
  void Reset();

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace search::gpu
