// Decode kernels: one warp per codec block, several blocks per warp and per CTA (decode.hpp).
// Layers: host API (DecodeListGpu / DecodeBlocksGpu) -> dispatch on DecodeTuning -> DecodeKernel ->
// per-lane unpack of 4 values (UnpackLane4) + warp scan.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/decode.hpp"
#include "warp_decode.cuh"

namespace search::gpu {

std::string DecodeTuning::ToString() const {
  return "threads=" + std::to_string(threads_per_cta) + " blocks/warp=" + std::to_string(blocks_per_warp);
}

namespace {

constexpr uint32_t kFullMask = 0xffffffffu;

struct DecodeParams {
  const uint4* meta;          // BlockMeta[num_blocks] as uint4 (16-byte aligned)
  const uint8_t* payload;     // payload section start
  const uint32_t* block_ids;  // nullptr: slot s decodes block s
  uint32_t num_blocks;
  uint32_t num_slots;
  uint32_t base_doc;
  bool vec_out;  // docs/tfs 16-byte aligned: full blocks use 16-byte stores
  uint32_t* docs;
  uint32_t* tfs;  // nullable
  uint32_t* error;
};

// Lane columns c0 .. c0+3 of row w of a full block's payload (8-lane vertical layout). For an odd
// width the row b / 2 is the 16-bit tail row: u16 at byte 32 * w + 2 * column.
// REQUIRES: words 16-byte aligned, c0 in {0, 4}, row w inside the payload.
__device__ __forceinline__ uint4 LoadRow(const uint32_t* __restrict__ words, uint32_t bits, uint32_t w, uint32_t c0) {
  if ((bits & 1u) != 0 && w == (bits >> 1)) {
    const uint2 h = __ldg(reinterpret_cast<const uint2*>(reinterpret_cast<const uint16_t*>(words + 8u * w) + c0));
    return make_uint4(h.x & 0xffffu, h.x >> 16, h.y & 0xffffu, h.y >> 16);
  }
  return __ldg(reinterpret_cast<const uint4*>(words + 8u * w + c0));
}

// The rows a lane needs for its values 4 * lane .. 4 * lane + 3 of a full block: they are slot
// lane / 2 of lane columns 4 * (lane % 2) .. +3, so they share one stream position p = slot * bits
// and come from row p / 32 and, when the slot straddles a word, row p / 32 + 1.
struct LaneRows {
  uint4 lo;
  uint4 hi;
};

__device__ __forceinline__ LaneRows LoadLaneRows(const uint32_t* __restrict__ words, uint32_t bits, uint32_t lane) {
  LaneRows r{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
  if (bits == 0) return r;
  const uint32_t c0 = (lane & 1u) * 4u, p = (lane >> 1) * bits, w = p >> 5, sh = p & 31u;
  r.lo = LoadRow(words, bits, w, c0);
  if (sh + bits > 32u) r.hi = LoadRow(words, bits, w + 1, c0);
  return r;
}

__device__ __forceinline__ void ExtractLane4(const LaneRows& r, uint32_t bits, uint32_t lane, uint32_t (&v)[4]) {
  const uint32_t sh = ((lane >> 1) * bits) & 31u;
  const uint32_t mask = bits >= 32u ? 0xffffffffu : ((1u << bits) - 1u);
  // __funnelshift_r(lo, hi, sh) = low 32 bits of (hi:lo) >> sh; hi is 0 unless the value straddles.
  v[0] = __funnelshift_r(r.lo.x, r.hi.x, sh) & mask;
  v[1] = __funnelshift_r(r.lo.y, r.hi.y, sh) & mask;
  v[2] = __funnelshift_r(r.lo.z, r.hi.z, sh) & mask;
  v[3] = __funnelshift_r(r.lo.w, r.hi.w, sh) & mask;
}

// Values 4 * lane .. +3 of a payload through the generic path (short blocks, unaligned payloads).
__device__ __forceinline__ void UnpackLane4Slow(const uint32_t* __restrict__ words, uint32_t count, uint32_t bits,
                                                uint32_t lane, uint32_t (&v)[4]) {
#pragma unroll
  for (uint32_t r = 0; r < 4; ++r) {
    const uint32_t i = lane * 4u + r;
    v[r] = i < count ? UnpackValue(words, count, bits, i) : 0u;
  }
}

__device__ __forceinline__ uint32_t MetaCount(const uint4& m) {
  return m.z >> 16;
}
__device__ __forceinline__ uint32_t MetaDocBits(const uint4& m) {
  return m.z & 0xffu;
}
__device__ __forceinline__ uint32_t MetaFreqBits(const uint4& m) {
  return (m.z >> 8) & 0xffu;
}

__device__ __forceinline__ void StoreLane4(uint32_t* __restrict__ out, uint32_t count, bool vec, uint32_t lane,
                                           const uint32_t (&v)[4]) {
  if (vec && count == kBlockSize) {
    reinterpret_cast<uint4*>(out)[lane] = make_uint4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (uint32_t r = 0; r < 4; ++r) {
      if (lane * 4u + r < count) out[lane * 4u + r] = v[r];
    }
  }
}

// One slot's work: block index, metadata, block_base, and whether the fast path applies.
struct Job {
  uint4 meta;     // BlockMeta as (last_doc, offset, doc_bits | freq_bits << 8 | count << 16, max_score)
  uint32_t base;  // block_base(j)
  uint32_t slot;
  bool live;  // a valid block to decode (false past the end and for a bad index)
  bool fast;  // full block with a 16-byte aligned payload (always, for the canonical writer)
};

// Loads slot's metadata (broadcast loads: every lane reads the same 16 bytes).
__device__ __forceinline__ Job FetchJob(const DecodeParams& p, uint32_t slot, uint32_t lane) {
  Job job{make_uint4(0, 0, 0, 0), 0, slot, false, false};
  if (slot >= p.num_slots) return job;
  const uint32_t j = p.block_ids != nullptr ? __ldg(p.block_ids + slot) : slot;
  if (j >= p.num_blocks) {
    if (lane == 0) atomicOr(p.error, kDecodeErrorBadBlock);
    return job;
  }
  job.live = true;
  job.meta = __ldg(p.meta + j);
  job.base = j == 0 ? p.base_doc : __ldg(&p.meta[j - 1].x) + 1u;  // block_base(j) = last_doc(j-1) + 1
  return job;
}

// Issues the payload loads of a fast job (docs, and tfs when kWithTfs).
template <bool kWithTfs>
__device__ __forceinline__ void FetchRows(const DecodeParams& p, Job& job, uint32_t lane, LaneRows& doc_rows,
                                          LaneRows& tf_rows) {
  const uint8_t* block = p.payload + job.meta.y;
  job.fast = job.live && MetaCount(job.meta) == kBlockSize && (reinterpret_cast<uintptr_t>(block) & 15u) == 0;
  doc_rows = LaneRows{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
  if constexpr (kWithTfs) tf_rows = doc_rows;
  if (job.fast) {
    const uint32_t db = MetaDocBits(job.meta);
    doc_rows = LoadLaneRows(reinterpret_cast<const uint32_t*>(block), db, lane);
    if constexpr (kWithTfs) {
      tf_rows = LoadLaneRows(reinterpret_cast<const uint32_t*>(block + 16u * db), MetaFreqBits(job.meta), lane);
    }
  }
}

// Decodes a live job (its rows already loaded when fast), checks it, stores slot's outputs.
template <bool kWithTfs>
__device__ __forceinline__ void DecodeJob(const DecodeParams& p, const Job& job, uint32_t lane,
                                          const LaneRows& doc_rows, const LaneRows& tf_rows) {
  const uint32_t count = MetaCount(job.meta), db = MetaDocBits(job.meta);
  const auto* words = reinterpret_cast<const uint32_t*>(p.payload + job.meta.y);
  uint32_t g[4];
  if (job.fast) {
    ExtractLane4(doc_rows, db, lane, g);
  } else {
    UnpackLane4Slow(words, count, db, lane, g);
  }
  // x[r] = sum over this lane's values <= r of (gap + 1); values past count add 0.
  uint32_t x[4];
  uint32_t run = 0;
#pragma unroll
  for (uint32_t r = 0; r < 4; ++r) {
    run += lane * 4u + r < count ? g[r] + 1u : 0u;
    x[r] = run;
  }
  uint32_t incl = run;
#pragma unroll
  for (uint32_t d = 1; d < 32; d <<= 1) {
    const uint32_t up = __shfl_up_sync(kFullMask, incl, d);
    if (lane >= d) incl += up;
  }
  // doc[i] = block_base - 1 + sum_{j <= i} (g[j] + 1), all mod 2^32. Each step adds 1 .. 2^32,
  // so the true sum passes 2^32 - 1 exactly where a 32-bit docID fails to increase (FORMAT.md).
  const uint32_t start = job.base - 1u + (incl - run);  // previous lane's last docID
  uint32_t docs[4];
  bool ok = true;
  uint32_t prev = start;
#pragma unroll
  for (uint32_t r = 0; r < 4; ++r) {
    const uint32_t i = lane * 4u + r;
    docs[r] = start + x[r];
    if (i < count) {
      ok &= i == 0 ? docs[r] >= job.base : docs[r] > prev;
      if (i == count - 1) ok &= docs[r] == job.meta.x;
    }
    prev = docs[r];
  }
  if (!ok) atomicOr(p.error, kDecodeErrorCorrupt);
  const size_t out_base = static_cast<size_t>(job.slot) * kBlockSize;
  StoreLane4(p.docs + out_base, count, p.vec_out, lane, docs);

  if constexpr (kWithTfs) {
    const uint32_t fb = MetaFreqBits(job.meta);
    uint32_t f[4];
    if (job.fast) {
      ExtractLane4(tf_rows, fb, lane, f);
    } else {
      UnpackLane4Slow(words + PackedBytes(count, db) / 4u, count, fb, lane, f);
    }
#pragma unroll
    for (uint32_t r = 0; r < 4; ++r) f[r] += 1u;
    StoreLane4(p.tfs + out_base, count, p.vec_out, lane, f);
  }
}

// Occupancy target (resident threads per SM) for __launch_bounds__: all 2048 for one block per warp
// (<= 32 registers); fewer when a warp keeps the payload rows of several blocks (and their tfs) in
// registers at once, so that they do not spill.
template <uint32_t kThreads, uint32_t kBlocksPerWarp, bool kWithTfs>
constexpr uint32_t MinCtasPerSm() {
  constexpr uint32_t kResident = kBlocksPerWarp == 1   ? 2048u
                                 : kBlocksPerWarp == 2 ? (kWithTfs ? 1024u : 1536u)
                                                       : (kWithTfs ? 512u : 768u);
  return kResident / kThreads > 0 ? kResident / kThreads : 1u;
}

// Batched: each warp decodes kBlocksPerWarp consecutive slots; all their metadata and payload loads
// are issued before the first block is decoded (memory-level parallelism).
template <uint32_t kThreads, uint32_t kBlocksPerWarp, bool kWithTfs>
__global__ void __launch_bounds__(kThreads, (MinCtasPerSm<kThreads, kBlocksPerWarp, kWithTfs>()))
    DecodeKernel(const DecodeParams p) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t first = (blockIdx.x * (kThreads / 32u) + (threadIdx.x >> 5)) * kBlocksPerWarp;
  Job job[kBlocksPerWarp];
#pragma unroll
  for (uint32_t k = 0; k < kBlocksPerWarp; ++k) job[k] = FetchJob(p, first + k, lane);
  LaneRows doc_rows[kBlocksPerWarp];
  LaneRows tf_rows[kWithTfs ? kBlocksPerWarp : 1];
#pragma unroll
  for (uint32_t k = 0; k < kBlocksPerWarp; ++k)
    FetchRows<kWithTfs>(p, job[k], lane, doc_rows[k], tf_rows[kWithTfs ? k : 0]);
#pragma unroll
  for (uint32_t k = 0; k < kBlocksPerWarp; ++k) {
    if (job[k].live) DecodeJob<kWithTfs>(p, job[k], lane, doc_rows[k], tf_rows[kWithTfs ? k : 0]);  // warp-uniform
  }
}

// Pipelined, grid-stride: warp w decodes slots w, w + W, w + 2W, ... (W = warps in the grid); while
// it decodes slot s the payload of the next slot and the metadata of the one after are in flight.
template <uint32_t kThreads, bool kWithTfs>
__global__ void __launch_bounds__(kThreads, 1024u / kThreads) DecodePipelinedKernel(const DecodeParams p) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t stride = gridDim.x * (kThreads / 32u);
  const uint32_t first = blockIdx.x * (kThreads / 32u) + (threadIdx.x >> 5);
  Job cur = FetchJob(p, first, lane);
  LaneRows cur_docs, cur_tfs;
  FetchRows<kWithTfs>(p, cur, lane, cur_docs, cur_tfs);
  Job next = FetchJob(p, first + stride, lane);
  while (cur.slot < p.num_slots) {  // warp-uniform
    LaneRows next_docs, next_tfs;
    FetchRows<kWithTfs>(p, next, lane, next_docs, next_tfs);
    const uint32_t after = next.slot + stride;
    const Job after_job = FetchJob(p, after < next.slot ? p.num_slots : after, lane);  // no wrap past 2^32
    if (cur.live) DecodeJob<kWithTfs>(p, cur, lane, cur_docs, cur_tfs);
    cur = next;
    cur_docs = next_docs;
    if constexpr (kWithTfs) cur_tfs = next_tfs;
    next = after_job;
  }
}

template <uint32_t kThreads, uint32_t kBlocksPerWarp>
Status Launch(const DecodeParams& p, cudaStream_t stream) {
  constexpr uint32_t kPerCta = kThreads / 32u * kBlocksPerWarp;
  const uint32_t grid = (p.num_slots + kPerCta - 1) / kPerCta;
  if (p.tfs != nullptr) {
    DecodeKernel<kThreads, kBlocksPerWarp, true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    DecodeKernel<kThreads, kBlocksPerWarp, false><<<grid, kThreads, 0, stream>>>(p);
  }
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

template <uint32_t kThreads>
Status LaunchPipelined(const DecodeParams& p, uint32_t blocks_per_warp, cudaStream_t stream) {
  const uint32_t per_cta = kThreads / 32u * blocks_per_warp;
  const uint32_t grid = (p.num_slots + per_cta - 1) / per_cta;
  if (p.tfs != nullptr) {
    DecodePipelinedKernel<kThreads, true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    DecodePipelinedKernel<kThreads, false><<<grid, kThreads, 0, stream>>>(p);
  }
  SEARCH_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

template <uint32_t kThreads>
Status DispatchBlocks(const DecodeParams& p, const DecodeTuning& t, cudaStream_t stream) {
  switch (t.blocks_per_warp) {
    case 1:
      return Launch<kThreads, 1>(p, stream);
    case 2:
      return Launch<kThreads, 2>(p, stream);
    case 4:
      return Launch<kThreads, 4>(p, stream);
    case 8:
    case 16:
      return LaunchPipelined<kThreads>(p, t.blocks_per_warp, stream);
    default:
      return Status::InvalidArgument("DecodeTuning: unsupported " + t.ToString());
  }
}

Status Dispatch(const DecodeParams& p, const DecodeTuning& t, cudaStream_t stream) {
  if (p.num_slots == 0) return Status::Ok();
  switch (t.threads_per_cta) {
    case 64:
      return DispatchBlocks<64>(p, t, stream);
    case 128:
      return DispatchBlocks<128>(p, t, stream);
    case 256:
      return DispatchBlocks<256>(p, t, stream);
    case 512:
      return DispatchBlocks<512>(p, t, stream);
    default:
      return Status::InvalidArgument("DecodeTuning: unsupported " + t.ToString());
  }
}

Status MakeParams(const uint8_t* d_blob, const ListView& view, uint32_t* d_docs, uint32_t* d_tfs, uint32_t* d_error,
                  DecodeParams& p) {
  if (d_blob == nullptr || d_docs == nullptr || d_error == nullptr) {
    return Status::InvalidArgument("DecodeGpu: null d_blob, d_docs or d_error");
  }
  if (view.count() == 0 || view.blocks() == nullptr) return Status::InvalidArgument("DecodeGpu: empty list view");
  if ((reinterpret_cast<uintptr_t>(d_blob) & 15u) != 0) {
    return Status::InvalidArgument("DecodeGpu: d_blob must be 16-byte aligned");
  }
  if ((reinterpret_cast<uintptr_t>(d_docs) & 3u) != 0 || (reinterpret_cast<uintptr_t>(d_tfs) & 3u) != 0) {
    return Status::InvalidArgument("DecodeGpu: d_docs / d_tfs must be 4-byte aligned");
  }
  p.meta = reinterpret_cast<const uint4*>(d_blob + sizeof(ListHeader));
  p.payload = d_blob + sizeof(ListHeader) + sizeof(BlockMeta) * static_cast<size_t>(view.num_blocks());
  p.block_ids = nullptr;
  p.num_blocks = view.num_blocks();
  p.num_slots = 0;
  p.base_doc = view.base_doc();
  p.vec_out = (reinterpret_cast<uintptr_t>(d_docs) & 15u) == 0 && (reinterpret_cast<uintptr_t>(d_tfs) & 15u) == 0;
  p.docs = d_docs;
  p.tfs = d_tfs;
  p.error = d_error;
  return Status::Ok();
}

}  // namespace

Status DecodeListGpu(const uint8_t* d_blob, const ListView& host_view, uint32_t* d_docs, uint32_t* d_tfs,
                     uint32_t* d_error, cudaStream_t stream, const DecodeTuning& tuning) {
  DecodeParams p{};
  SEARCH_RETURN_IF_ERROR(MakeParams(d_blob, host_view, d_docs, d_tfs, d_error, p));
  p.num_slots = host_view.num_blocks();
  return Dispatch(p, tuning, stream);
}

Status DecodeBlocksGpu(const uint8_t* d_blob, const ListView& host_view, const uint32_t* d_block_ids, uint32_t num_ids,
                       uint32_t* d_docs, uint32_t* d_tfs, uint32_t* d_error, cudaStream_t stream,
                       const DecodeTuning& tuning) {
  if (num_ids == 0) return Status::Ok();
  if (d_block_ids == nullptr) return Status::InvalidArgument("DecodeBlocksGpu: null d_block_ids");
  DecodeParams p{};
  SEARCH_RETURN_IF_ERROR(MakeParams(d_blob, host_view, d_docs, d_tfs, d_error, p));
  p.block_ids = d_block_ids;
  p.num_slots = num_ids;
  return Dispatch(p, tuning, stream);
}

Status CheckDecodeError(const uint32_t* d_error, cudaStream_t stream) {
  if (d_error == nullptr) return Status::InvalidArgument("CheckDecodeError: null d_error");
  uint32_t h_error = 0;
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&h_error, d_error, sizeof(h_error), cudaMemcpyDeviceToHost, stream));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if ((h_error & kDecodeErrorCorrupt) != 0) {
    return Status::Corruption("GPU decode: a block's docIDs disagree with its metadata (last_doc or overflow)");
  }
  if ((h_error & kDecodeErrorBadBlock) != 0) return Status::InvalidArgument("GPU decode: block index out of range");
  return Status::Ok();
}

}  // namespace search::gpu
