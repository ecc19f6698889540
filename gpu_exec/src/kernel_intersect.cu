// Intersection kernels (intersect.hpp): binary search and merge path, plus the shared
// count -> scan -> copy compaction. Layers: IntersectGpu (temp layout, dispatch on the tuning) ->
// Binary/MergeKernel (per-CTA matches, compacted in shared order by a cub::BlockScan) ->
// cub::DeviceScan over the per-CTA counts -> CopyKernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/block/block_load.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <string>

#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/intersect.hpp"

namespace search::gpu {

const char* IntersectMethodName(IntersectMethod m) {
  return m == IntersectMethod::kBinarySearch ? "binary_search" : "merge_path";
}

std::string IntersectTuning::ToString() const {
  return "threads=" + std::to_string(threads_per_cta) + " items=" + std::to_string(items_per_thread);
}

namespace {

// Per-CTA bookkeeping in the temp memory. tile_a0[t]: the first a-index of CTA t (its matches go
// to tmp_* at tile_a0[t] + rank); tile_count[t]: its number of matches (tile_count[num_tiles] = 0
// so that the exclusive scan's last entry is the total).
struct IntersectParams {
  const uint32_t* a;
  const uint32_t* b;
  uint32_t na;
  uint32_t nb;
  uint32_t num_tiles;
  uint32_t* tmp_val;
  uint32_t* tmp_idx;
  uint32_t* tile_a0;  // num_tiles + 1 entries (merge path: the split of every tile boundary)
  uint32_t* tile_count;
};

// Index of the first element of b not less than v (nb if none).
__device__ __forceinline__ uint32_t LowerBound(const uint32_t* __restrict__ b, uint32_t nb, uint32_t v) {
  uint32_t lo = 0, n = nb;
  while (n > 0) {
    const uint32_t half = n >> 1;
    if (__ldg(b + lo + half) < v) {
      lo += half + 1;
      n -= half + 1;
    } else {
      n = half;
    }
  }
  return lo;
}

// Merge path: how many elements of a are among the first `diag` elements of merge(a, b), where
// ties take a first (a[i] <= b[j] -> a[i]). REQUIRES: diag <= na + nb.
template <class LoadA, class LoadB>
__device__ __forceinline__ uint32_t MergePathSplit(uint64_t diag, uint32_t na, uint32_t nb, LoadA a_at, LoadB b_at) {
  uint64_t lo = diag > nb ? diag - nb : 0;
  uint64_t hi = diag < na ? diag : na;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) >> 1;
    if (a_at(mid) <= b_at(diag - 1 - mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return static_cast<uint32_t>(lo);
}

template <uint32_t kThreads, uint32_t kItems>
__global__ void __launch_bounds__(kThreads) BinaryKernel(const IntersectParams p) {
  using Load = cub::BlockLoad<uint32_t, kThreads, kItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Scan::TempStorage scan;
  } smem;
  constexpr uint32_t kTile = kThreads * kItems;
  const uint32_t t = blockIdx.x;
  const uint32_t a0 = t * kTile;  // < na (t < num_tiles)
  const uint32_t valid = min(kTile, p.na - a0);
  uint32_t v[kItems];
  Load(smem.load).Load(p.a + a0, v, static_cast<int>(valid), 0u);
  __syncthreads();  // smem is reused by the scan
  uint32_t pos[kItems];
  uint32_t hit = 0, n = 0;
#pragma unroll
  for (uint32_t k = 0; k < kItems; ++k) {
    pos[k] = 0;
    if (threadIdx.x * kItems + k < valid) {
      pos[k] = LowerBound(p.b, p.nb, v[k]);
      if (pos[k] < p.nb && __ldg(p.b + pos[k]) == v[k]) {
        hit |= 1u << k;
        ++n;
      }
    }
  }
  uint32_t rank = 0, total = 0;
  Scan(smem.scan).ExclusiveSum(n, rank, total);
#pragma unroll
  for (uint32_t k = 0; k < kItems; ++k) {
    if ((hit >> k) & 1u) {
      p.tmp_val[a0 + rank] = v[k];
      p.tmp_idx[a0 + rank] = pos[k];
      ++rank;
    }
  }
  if (threadIdx.x == 0) {
    p.tile_count[t] = total;
    p.tile_a0[t] = a0;
    if (t == 0) p.tile_count[p.num_tiles] = 0;
  }
}

// tile_a0[t] = merge-path split of diagonal t * tile, for t = 0 .. num_tiles (one thread each).
// A separate kernel rather than each CTA searching its own two splits (the faster of the two in
// gpu_intersect_bench).
__global__ void PartitionKernel(const IntersectParams p, uint32_t tile) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t > p.num_tiles) return;
  const uint64_t total = uint64_t{p.na} + p.nb;
  const uint64_t diag = std::min<uint64_t>(uint64_t{t} * tile, total);
  const uint32_t* __restrict__ a = p.a;
  const uint32_t* __restrict__ b = p.b;
  auto a_at = [a](uint64_t i) { return __ldg(a + i); };
  auto b_at = [b](uint64_t i) { return __ldg(b + i); };
  p.tile_a0[t] = MergePathSplit(diag, p.na, p.nb, a_at, b_at);
}

template <uint32_t kThreads, uint32_t kItems>
__global__ void __launch_bounds__(kThreads) MergeKernel(const IntersectParams p) {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  constexpr uint32_t kTile = kThreads * kItems;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint32_t s_keys[kTile];
  const uint32_t t = blockIdx.x;
  const uint64_t d0 = uint64_t{t} * kTile;
  const uint64_t d1 = std::min<uint64_t>(d0 + kTile, uint64_t{p.na} + p.nb);
  const uint32_t a_begin = p.tile_a0[t], a_end = p.tile_a0[t + 1];
  const uint32_t b_begin = static_cast<uint32_t>(d0 - a_begin), b_end = static_cast<uint32_t>(d1 - a_end);
  const uint32_t a_len = a_end - a_begin, b_len = b_end - b_begin, len = a_len + b_len;
  for (uint32_t k = threadIdx.x; k < len; k += kThreads) {
    s_keys[k] = k < a_len ? __ldg(p.a + a_begin + k) : __ldg(p.b + b_begin + (k - a_len));
  }
  // The b element after this tile: an a element at the tile's end may equal it.
  const bool next_valid = b_end < p.nb;
  const uint32_t b_next = next_valid ? __ldg(p.b + b_end) : 0u;
  __syncthreads();
  const uint32_t* s_a = s_keys;
  const uint32_t* s_b = s_keys + a_len;
  const uint32_t ld0 = min(threadIdx.x * kItems, len);
  const uint32_t steps = min(ld0 + kItems, len) - ld0;
  auto a_at = [s_a](uint64_t i) { return s_a[i]; };
  auto b_at = [s_b](uint64_t i) { return s_b[i]; };
  const uint32_t i0 = MergePathSplit(ld0, a_len, b_len, a_at, b_at);
  const uint32_t j0 = ld0 - i0;

  // Serial merge of `steps` elements; calls emit(i, j) for each a[i] == b[j] (local indices; j may
  // be b_len, meaning b_next).
  auto merge = [&](auto&& emit) {
    uint32_t i = i0, j = j0;
    for (uint32_t s = 0; s < steps; ++s) {
      if (i < a_len && (j >= b_len || s_a[i] <= s_b[j])) {
        const bool match = j < b_len ? s_a[i] == s_b[j] : (next_valid && s_a[i] == b_next);
        if (match) emit(i, j);
        ++i;
      } else {
        ++j;
      }
    }
  };
  uint32_t n = 0;
  merge([&](uint32_t, uint32_t) { ++n; });
  uint32_t rank = 0, total = 0;
  Scan(scan_storage).ExclusiveSum(n, rank, total);
  merge([&](uint32_t i, uint32_t j) {
    p.tmp_val[a_begin + rank] = s_a[i];
    p.tmp_idx[a_begin + rank] = b_begin + j;
    ++rank;
  });
  if (threadIdx.x == 0) {
    p.tile_count[t] = total;
    if (t == 0) p.tile_count[p.num_tiles] = 0;
  }
}

// Moves CTA t's matches from tmp_* at tile_a0[t] to the output at tile_offset[t].
__global__ void CopyKernel(const IntersectParams p, const uint32_t* __restrict__ tile_offset, uint32_t* out,
                           uint32_t* out_idx, uint32_t* count) {
  const uint32_t t = blockIdx.x;
  const uint32_t cnt = p.tile_count[t], src = p.tile_a0[t], dst = tile_offset[t];
  for (uint32_t k = threadIdx.x; k < cnt; k += blockDim.x) {
    out[dst + k] = p.tmp_val[src + k];
    if (out_idx != nullptr) out_idx[dst + k] = p.tmp_idx[src + k];
  }
  if (t == 0 && threadIdx.x == 0) *count = tile_offset[p.num_tiles];
}

constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

template <uint32_t kThreads, uint32_t kItems>
Status LaunchMain(IntersectMethod method, const IntersectParams& p, cudaStream_t stream) {
  if (method == IntersectMethod::kBinarySearch) {
    BinaryKernel<kThreads, kItems><<<p.num_tiles, kThreads, 0, stream>>>(p);
  } else {
    constexpr uint32_t kPartThreads = 256;
    PartitionKernel<<<(p.num_tiles + 1 + kPartThreads - 1) / kPartThreads, kPartThreads, 0, stream>>>(
        p, kThreads * kItems);
    SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    MergeKernel<kThreads, kItems><<<p.num_tiles, kThreads, 0, stream>>>(p);
  }
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

template <uint32_t kThreads>
Status DispatchItems(IntersectMethod method, const IntersectParams& p, const IntersectTuning& t, cudaStream_t stream) {
  switch (t.items_per_thread) {
    case 4:
      return LaunchMain<kThreads, 4>(method, p, stream);
    case 8:
      return LaunchMain<kThreads, 8>(method, p, stream);
    case 16:
      return LaunchMain<kThreads, 16>(method, p, stream);
    default:
      return Status::InvalidArgument("IntersectTuning: unsupported " + t.ToString());
  }
}

bool SupportedTuning(const IntersectTuning& t) {
  return (t.threads_per_cta == 128 || t.threads_per_cta == 256) &&
         (t.items_per_thread == 4 || t.items_per_thread == 8 || t.items_per_thread == 16);
}

}  // namespace

Status IntersectGpu(IntersectMethod method, const uint32_t* d_a, uint32_t na, const uint32_t* d_b, uint32_t nb,
                    uint32_t* d_out, uint32_t* d_out_idx_b, uint32_t* d_count, void* d_temp, size_t& temp_bytes,
                    cudaStream_t stream, const IntersectTuning& tuning) {
  if (!SupportedTuning(tuning)) return Status::InvalidArgument("IntersectTuning: unsupported " + tuning.ToString());
  if (method != IntersectMethod::kBinarySearch && method != IntersectMethod::kMergePath) {
    return Status::InvalidArgument("IntersectGpu: unknown method");
  }
  const uint64_t tile = uint64_t{tuning.threads_per_cta} * tuning.items_per_thread;
  const uint64_t work = method == IntersectMethod::kBinarySearch ? uint64_t{na} : uint64_t{na} + nb;
  const bool empty = na == 0 || nb == 0;
  const auto num_tiles = static_cast<uint32_t>(empty ? 0 : (work + tile - 1) / tile);

  // Temp layout: tmp_val[na] | tmp_idx[na] | tile_a0[T+1] | tile_count[T+1] | tile_offset[T+1] | cub.
  size_t cub_bytes = 0;
  if (num_tiles > 0) {
    SEARCH_CUDA_RETURN_IF_ERROR(cub::DeviceScan::ExclusiveSum(nullptr, cub_bytes, static_cast<uint32_t*>(nullptr),
                                                              static_cast<uint32_t*>(nullptr), num_tiles + 1));
  }
  const size_t vec_bytes = AlignUp(sizeof(uint32_t) * size_t{na});
  const size_t tile_bytes = AlignUp(sizeof(uint32_t) * (size_t{num_tiles} + 1));
  const size_t need = empty ? 0 : 2 * vec_bytes + 3 * tile_bytes + AlignUp(cub_bytes);
  if (d_temp == nullptr) {
    temp_bytes = std::max<size_t>(need, 1);
    return Status::Ok();
  }
  if (temp_bytes < need) return Status::InvalidArgument("IntersectGpu: temp_bytes too small");
  if (d_count == nullptr || (!empty && (d_a == nullptr || d_b == nullptr || d_out == nullptr))) {
    return Status::InvalidArgument("IntersectGpu: null device pointer");
  }
  if (empty) {
    SEARCH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_count, 0, sizeof(uint32_t), stream));
    return Status::Ok();
  }
  auto* base = static_cast<uint8_t*>(d_temp);
  IntersectParams p{};
  p.a = d_a;
  p.b = d_b;
  p.na = na;
  p.nb = nb;
  p.num_tiles = num_tiles;
  p.tmp_val = reinterpret_cast<uint32_t*>(base);
  p.tmp_idx = reinterpret_cast<uint32_t*>(base + vec_bytes);
  p.tile_a0 = reinterpret_cast<uint32_t*>(base + 2 * vec_bytes);
  p.tile_count = reinterpret_cast<uint32_t*>(base + 2 * vec_bytes + tile_bytes);
  auto* tile_offset = reinterpret_cast<uint32_t*>(base + 2 * vec_bytes + 2 * tile_bytes);
  void* cub_temp = base + 2 * vec_bytes + 3 * tile_bytes;

  if (tuning.threads_per_cta == 128) {
    SEARCH_RETURN_IF_ERROR(DispatchItems<128>(method, p, tuning, stream));
  } else {
    SEARCH_RETURN_IF_ERROR(DispatchItems<256>(method, p, tuning, stream));
  }
  SEARCH_CUDA_RETURN_IF_ERROR(
      cub::DeviceScan::ExclusiveSum(cub_temp, cub_bytes, p.tile_count, tile_offset, num_tiles + 1, stream));
  CopyKernel<<<num_tiles, 128, 0, stream>>>(p, tile_offset, d_out, d_out_idx_b, d_count);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace search::gpu
