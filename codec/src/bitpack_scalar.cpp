// Scalar bit packing: the reference twin of the AVX2 decoder (codec/FORMAT.md, "Block payloads").
// Full blocks (n == 128) use the 8-lane vertical layout; any other n the horizontal one.
// For an odd width, a full block's last 16 bytes hold each lane's final 16 bits as 8 little-endian
// uint16 (lane l's at byte 32 * (bits / 2) + 2 * l), so a block is exactly 16 * bits bytes.
#include <cstring>

#include "bitpack_internal.hpp"
#include "codec/block_codec.hpp"

namespace search {
namespace {

constexpr uint32_t kLanes = 8;
constexpr uint32_t kSlots = kBlockSize / kLanes;  // 16 values per lane

inline uint64_t Mask(uint32_t bits) { return bits >= 32 ? 0xffffffffull : ((1ull << bits) - 1); }

// Lane l's 32-bit word w of a vertical block of width `bits`.
inline uint32_t VerticalWord(const uint32_t* in, uint32_t bits, uint32_t l, uint32_t w) {
  if ((bits & 1) && w == bits / 2) {
    uint16_t half;
    std::memcpy(&half, reinterpret_cast<const uint8_t*>(in) + 32 * w + 2 * l, sizeof(half));
    return half;
  }
  return in[kLanes * w + l];
}

void PackVertical(const uint32_t* in, uint32_t bits, uint32_t* out) {
  const uint32_t lane_words = (bits + 1) / 2;  // 16 * bits bits per lane, rounded up to words
  uint32_t lanes[kLanes][kSlots + 1] = {};
  const uint64_t mask = Mask(bits);
  for (uint32_t s = 0; s < kSlots; ++s) {
    for (uint32_t l = 0; l < kLanes; ++l) {
      const uint64_t v = in[kLanes * s + l] & mask;
      const uint32_t bit = s * bits, w = bit / 32, sh = bit % 32;
      lanes[l][w] |= static_cast<uint32_t>(v << sh);
      if (sh + bits > 32) lanes[l][w + 1] |= static_cast<uint32_t>(v >> (32 - sh));
    }
  }
  const uint32_t full_words = bits / 2;
  for (uint32_t w = 0; w < full_words; ++w) {
    for (uint32_t l = 0; l < kLanes; ++l) out[kLanes * w + l] = lanes[l][w];
  }
  if (full_words < lane_words) {  // odd width: 8 half-words, lane l's in uint16 slot l
    for (uint32_t k = 0; k < kLanes / 2; ++k) {
      out[kLanes * full_words + k] = (lanes[2 * k][full_words] & 0xffffu) | (lanes[2 * k + 1][full_words] << 16);
    }
  }
}

void PackHorizontal(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out) {
  const uint64_t mask = Mask(bits);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t v = in[i] & mask;
    const uint64_t bit = static_cast<uint64_t>(i) * bits;
    const uint64_t w = bit / 32;
    const uint32_t sh = bit % 32;
    out[w] |= static_cast<uint32_t>(v << sh);
    if (sh + bits > 32) out[w + 1] |= static_cast<uint32_t>(v >> (32 - sh));
  }
}

void UnpackVertical(const uint32_t* in, uint32_t bits, uint32_t* out) {
  const uint64_t mask = Mask(bits);
  for (uint32_t s = 0; s < kSlots; ++s) {
    const uint32_t bit = s * bits, w = bit / 32, sh = bit % 32;
    for (uint32_t l = 0; l < kLanes; ++l) {
      uint64_t v = VerticalWord(in, bits, l, w) >> sh;
      if (sh + bits > 32) v |= static_cast<uint64_t>(VerticalWord(in, bits, l, w + 1)) << (32 - sh);
      out[kLanes * s + l] = static_cast<uint32_t>(v & mask);
    }
  }
}

void UnpackHorizontal(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out) {
  const uint64_t mask = Mask(bits);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t bit = static_cast<uint64_t>(i) * bits;
    const uint64_t w = bit / 32;
    const uint32_t sh = bit % 32;
    uint64_t v = in[w] >> sh;
    if (sh + bits > 32) v |= static_cast<uint64_t>(in[w + 1]) << (32 - sh);
    out[i] = static_cast<uint32_t>(v & mask);
  }
}

}  // namespace

void PackBlock(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out) {
  if (bits == 0 || n == 0) return;
  if (bits > 32) bits = 32;
  std::memset(out, 0, PackedBytes(n, bits));
  if (n == kBlockSize) {
    PackVertical(in, bits, out);
  } else {
    PackHorizontal(in, n, bits, out);
  }
}

void UnpackBlockScalar(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out) {
  if (bits > 32) bits = 32;
  if (bits == 0) {
    std::memset(out, 0, static_cast<size_t>(n) * sizeof(uint32_t));
    return;
  }
  if (n == kBlockSize) {
    UnpackVertical(in, bits, out);
  } else {
    UnpackHorizontal(in, n, bits, out);
  }
}

namespace codec_internal {

bool DecodeDocsScalar(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t base, uint32_t* out) {
  UnpackBlockScalar(in, n, bits, out);
  uint64_t doc = static_cast<uint64_t>(base) - 1;  // may be -1 as a 64-bit value: wraps back below
  for (uint32_t i = 0; i < n; ++i) {
    doc += static_cast<uint64_t>(out[i]) + 1;
    if (doc > UINT32_MAX) return false;
    out[i] = static_cast<uint32_t>(doc);
  }
  return true;
}

}  // namespace codec_internal
}  // namespace search
