// Warp-level decoding of one codec block (codec/FORMAT.md) on the GPU: 32 lanes decode the up to
// 128 values of a block, lane l owning values 4l .. 4l+3, the docID gaps turned into absolute
// docIDs by a warp prefix sum that restarts at every block (Ding 2009 §6.1, Mallia 2019 §3.1).
// Device code only; include from .cu files. Every function is called by all 32 lanes of a warp
// with the same block arguments (they use full-warp shuffles).
// Thread-safety: device functions over the calling warp's registers and read-only payload bytes.
#pragma once

#include <cstdint>

#include "codec/block_codec.hpp"

namespace search::gpu {

inline constexpr uint32_t kWarpValues = 4;  // values per lane: 32 * 4 = kBlockSize

// Value i (0 <= i < count) of a packed payload of `count` values at width `bits`, starting at
// `words` (4-byte aligned): vertical 8-lane layout when count == 128, horizontal otherwise.
// Reads only words inside the payload (PackedBytes(count, bits)).
__device__ __forceinline__ uint32_t UnpackValue(const uint32_t* __restrict__ words, uint32_t count, uint32_t bits,
                                                uint32_t i) {
  if (bits == 0) return 0;
  const uint32_t mask = bits == 32 ? 0xffffffffu : ((1u << bits) - 1u);
  if (count == kBlockSize) {
    const uint32_t lane = i & 7u, p = (i >> 3) * bits, w = p >> 5, sh = p & 31u;
    const uint32_t half = bits >> 1;  // index of the 16-bit tail row when bits is odd
    const bool odd = (bits & 1u) != 0;
    auto word = [&](uint32_t ww) -> uint32_t {
      if (odd && ww == half) return reinterpret_cast<const uint16_t*>(words + 8u * ww)[lane];
      return words[8u * ww + lane];
    };
    uint32_t v = word(w) >> sh;
    if (sh + bits > 32u) v |= word(w + 1) << (32u - sh);
    return v & mask;
  }
  const uint64_t p = static_cast<uint64_t>(i) * bits;
  const uint32_t w = static_cast<uint32_t>(p >> 5), sh = static_cast<uint32_t>(p & 31u);
  uint32_t v = words[w] >> sh;
  if (sh + bits > 32u) v |= words[w + 1] << (32u - sh);
  return v & mask;
}

// The warp decodes block `meta` of a list whose payload section starts at `payload` (4-byte
// aligned) and whose block starts at docID `block_base` (header.base_doc for block 0, the previous
// block's last_doc + 1 otherwise). Lane l gets docs[0..3] = docIDs of values 4l .. 4l+3 (entries
// at or past meta.count are unspecified). Returns false on every lane when the block is corrupt
// (the sum overflows 32 bits or does not end on meta.last_doc).
__device__ __forceinline__ bool WarpDecodeDocs(const uint8_t* __restrict__ payload, const BlockMeta& meta,
                                               uint32_t block_base, uint32_t (&docs)[kWarpValues]) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t count = meta.count, bits = meta.doc_bits;
  const auto* words = reinterpret_cast<const uint32_t*>(payload + meta.offset);
  uint64_t local[kWarpValues];
  uint64_t sum = 0;
#pragma unroll
  for (uint32_t r = 0; r < kWarpValues; ++r) {
    const uint32_t i = lane * kWarpValues + r;
    // gap + 1 per value: doc[i] = block_base - 1 + sum_{j <= i} (g[j] + 1)
    const uint64_t g = i < count ? uint64_t{UnpackValue(words, count, bits, i)} + 1u : 0u;
    sum += g;
    local[r] = sum;
  }
  // Inclusive warp scan of the lanes' sums, then exclusive offset for this lane.
  uint64_t incl = sum;
#pragma unroll
  for (uint32_t d = 1; d < 32; d <<= 1) {
    const uint64_t up = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += up;
  }
  const uint64_t before = incl - sum;
  const uint64_t base = uint64_t{block_base} - 1u;  // block_base >= 1 unless block 0 starts at 0
  uint64_t last = 0;
#pragma unroll
  for (uint32_t r = 0; r < kWarpValues; ++r) {
    const uint64_t d = base + before + local[r];
    docs[r] = static_cast<uint32_t>(d);
    if (lane * kWarpValues + r == count - 1) last = d;
  }
  // The lane holding value count-1 checks the end; the verdict is broadcast.
  const uint32_t owner = (count - 1) / kWarpValues;
  const uint64_t end = __shfl_sync(0xffffffffu, last, owner);
  return end == uint64_t{meta.last_doc} && end <= 0xffffffffull && count >= 1 && count <= kBlockSize;
}

// The warp decodes the block's term frequencies: lane l gets tfs of values 4l .. 4l+3 (tf >= 1).
__device__ __forceinline__ void WarpDecodeFreqs(const uint8_t* __restrict__ payload, const BlockMeta& meta,
                                                uint32_t (&tfs)[kWarpValues]) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t count = meta.count;
  const auto* words = reinterpret_cast<const uint32_t*>(payload + meta.offset + PackedBytes(count, meta.doc_bits));
#pragma unroll
  for (uint32_t r = 0; r < kWarpValues; ++r) {
    const uint32_t i = lane * kWarpValues + r;
    tfs[r] = i < count ? UnpackValue(words, count, meta.freq_bits, i) + 1u : 0u;
  }
}

// One value's tf without decoding the rest of the block (a survivor's frequency, Ding §8).
__device__ __forceinline__ uint32_t FreqAt(const uint8_t* __restrict__ payload, const BlockMeta& meta, uint32_t i) {
  const auto* words = reinterpret_cast<const uint32_t*>(payload + meta.offset + PackedBytes(meta.count, meta.doc_bits));
  return UnpackValue(words, meta.count, meta.freq_bits, i) + 1u;
}

}  // namespace search::gpu
