// Internal entry points of the codec (not a public contract): the per-width AVX2 kernels for full
// 128-value blocks, the horizontal/vertical scalar twins, and both CRC-32C implementations.
// Tests include this header to check each path against the others.
// Thread-safety: pure functions over caller-owned buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace search::codec_internal {

// Full block (128 values, vertical layout) kernels. `in` holds PackedBytes(128, bits) bytes and
// need only be 4-byte aligned; `out` has room for 128 values. REQUIRES: bits <= 32.
void UnpackFullAvx2(const uint32_t* in, uint32_t bits, uint32_t* out);
// out[i] = unpacked[i] + 1 (term frequencies are stored as tf - 1).
void UnpackFullPlusOneAvx2(const uint32_t* in, uint32_t bits, uint32_t* out);
// out[i] = base + i + inclusive_prefix_sum(gap)[i], computed modulo 2^32 (callers check wrap).
void DecodeDocsFullAvx2(const uint32_t* in, uint32_t bits, uint32_t base, uint32_t* out);

// Scalar reference for the same docID rule on any block size and layout; 64-bit arithmetic.
// Returns false when a value would exceed UINT32_MAX.
bool DecodeDocsScalar(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t base, uint32_t* out);

bool CpuHasAvx2();
bool CpuHasSse42();

uint32_t Crc32cSoftware(const void* data, size_t n, uint32_t seed);
uint32_t Crc32cHardware(const void* data, size_t n, uint32_t seed);  // REQUIRES: CpuHasSse42()

}  // namespace search::codec_internal
