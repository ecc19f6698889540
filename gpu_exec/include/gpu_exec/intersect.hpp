// GPU intersection of two sorted docID arrays in device memory (Liu et al. 2018 "Griffin" §3.1.2,
// Fig. 8): a short list `a` against a long list `b`, by
//   - kBinarySearch: every element of a does a lower_bound in b (cost ~ |a| log |b|), or
//   - kMergePath:    the merge of a and b is cut into equal diagonal ranges (merge-path
//                    partitioning: a binary search on each diagonal), one per CTA, staged in shared
//                    memory and cut again per thread; each thread merges its range serially and emits
//                    the matches (cost ~ |a| + |b|).
// Output: the common elements in ascending order (d_out), each with its index in b (d_out_idx_b,
// e.g. to fetch its tf), and their number (*d_count, a device word). Deterministic.
//
// Both kernels write each CTA's matches compacted into a temporary array at the CTA's first a-index
// (a CTA's matches are a subset of its own a range, so |a| entries suffice), then an exclusive scan
// of the per-CTA counts (CUB) places them, and a copy kernel moves them to the output.
// Temporary memory is the caller's, CUB style: call once with d_temp == nullptr to get temp_bytes.
//
// Thread-safety: stateless; concurrent calls with distinct outputs and temp memory are safe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace search::gpu {

enum class IntersectMethod : uint8_t { kBinarySearch, kMergePath };
const char* IntersectMethodName(IntersectMethod m);

// Launch shape (swept by bench/gpu_exec/gpu_intersect_bench). Supported: threads_per_cta in
// {128, 256}, items_per_thread in {4, 8, 16}; InvalidArgument otherwise. Binary search: a CTA
// handles threads * items elements of a; merge path: threads * items merge steps (diagonals).
struct IntersectTuning {
  uint32_t threads_per_cta = 128;
  uint32_t items_per_thread = 8;
  std::string ToString() const;
};

// Intersects a[0 .. na) and b[0 .. nb) (device arrays). On return (asynchronously, on `stream`)
// d_out[0 .. *d_count) holds the common elements ascending and, if d_out_idx_b is not null,
// d_out_idx_b[k] is the position of d_out[k] in b.
// REQUIRES: a and b strictly increasing (posting lists; with duplicates the result is unspecified
// but in bounds); d_out and d_out_idx_b hold min(na, nb) entries; d_count is a device uint32.
// Temp memory: when d_temp is nullptr only temp_bytes is set (depends on na, nb, method and tuning);
// otherwise temp_bytes must be at least that. Any of na, nb may be 0 (count 0). The method works
// for either order of sizes; kBinarySearch costs |a| log |b|, so pass the shorter list as a.
Status IntersectGpu(IntersectMethod method, const uint32_t* d_a, uint32_t na, const uint32_t* d_b, uint32_t nb,
                    uint32_t* d_out, uint32_t* d_out_idx_b, uint32_t* d_count, void* d_temp, size_t& temp_bytes,
                    cudaStream_t stream, const IntersectTuning& tuning = {});

}  // namespace search::gpu
