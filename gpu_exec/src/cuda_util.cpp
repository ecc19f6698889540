// cuda_util.hpp: CUDA errors as Status, device discovery, RAII owners.
#include "gpu_exec/cuda_util.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace search::gpu {

Status CudaStatus(cudaError_t e, const char* what, const char* where) {
  std::string msg = std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " + what +
                    " at " + where;
  if (e == cudaErrorMemoryAllocation) return Status::ResourceExhausted(std::move(msg));
  return Status::Unavailable(std::move(msg));
}

int GpuDeviceCount() {
  static const int count = [] {
    const char* off = std::getenv("SEARCH_GPU_DISABLE");
    if (off != nullptr && std::strcmp(off, "0") != 0 && *off != '\0') return 0;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky "no driver/device" error
      return 0;
    }
    return n;
  }();
  return count;
}

Status SetGpuBlockingSync() {
  SEARCH_CUDA_RETURN_IF_ERROR(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  return Status::Ok();
}

std::string GpuDescription() {
  if (GpuDeviceCount() == 0) {
    const char* off = std::getenv("SEARCH_GPU_DISABLE");
    if (off != nullptr && *off != '\0' && std::strcmp(off, "0") != 0) return "disabled by SEARCH_GPU_DISABLE";
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    return e == cudaSuccess ? std::string("no CUDA device") : std::string("no CUDA device: ") + cudaGetErrorString(e);
  }
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) return "CUDA device (unknown)";
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s, sm_%d%d, %.1f GiB", p.name, p.major, p.minor,
                static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

template <MemoryKind K>
Result<CudaMemory<K>> CudaMemory<K>::Allocate(size_t bytes) {
  CudaMemory b;
  if (bytes == 0) return b;
  if constexpr (K == MemoryKind::kDevice) {
    SEARCH_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.ptr_, bytes));
  } else {
    SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocHost(&b.ptr_, bytes));
  }
  b.size_ = bytes;
  return b;
}

template <MemoryKind K>
void CudaMemory<K>::Reset() {
  if (ptr_ != nullptr) {
    if constexpr (K == MemoryKind::kDevice) {
      (void)cudaFree(ptr_);
    } else {
      (void)cudaFreeHost(ptr_);
    }
  }
  ptr_ = nullptr;
  size_ = 0;
}

template class CudaMemory<MemoryKind::kDevice>;
template class CudaMemory<MemoryKind::kPinnedHost>;

Status StreamBuffer::Allocate(size_t bytes) {
  Reset();
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&ptr_, std::max<size_t>(bytes, 16), stream_));
  return Status::Ok();
}

void StreamBuffer::Reset() {
  if (ptr_ != nullptr) (void)cudaFreeAsync(ptr_, stream_);
  ptr_ = nullptr;
}

Result<DeviceMemoryInfo> GetDeviceMemoryInfo() {
  DeviceMemoryInfo info;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

Status MemsetAsync(void* d_dst, int value, size_t bytes, cudaStream_t stream) {
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_dst, value, bytes, stream));
  return Status::Ok();
}

Status CopyToHostAsync(void* h_dst, const void* d_src, size_t bytes, cudaStream_t stream) {
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_dst, d_src, bytes, cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

Status SynchronizeStream(cudaStream_t stream) {
  SEARCH_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return Status::Ok();
}

void ClearLastError() {
  (void)cudaGetLastError();
}

Result<Stream> Stream::Create() {
  Stream s;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.s_, cudaStreamNonBlocking));
  return s;
}

Status Stream::Synchronize() const {
  SEARCH_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_));
  return Status::Ok();
}

void Stream::Reset() {
  if (s_ != nullptr) (void)cudaStreamDestroy(s_);
  s_ = nullptr;
}

Result<Event> Event::Create(bool timing) {
  Event e;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  return e;
}

Status Event::Record(cudaStream_t stream) const {
  SEARCH_CUDA_RETURN_IF_ERROR(cudaEventRecord(e_, stream));
  return Status::Ok();
}

Result<bool> Event::Done() const {
  const cudaError_t e = cudaEventQuery(e_);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  return CudaStatus(e, "cudaEventQuery", __FILE__);
}

Status Event::Synchronize() const {
  SEARCH_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e_));
  return Status::Ok();
}

void Event::Reset() {
  if (e_ != nullptr) (void)cudaEventDestroy(e_);
  e_ = nullptr;
}

}  // namespace search::gpu
