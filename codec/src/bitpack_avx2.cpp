// AVX2 decoders for full 128-value blocks in the 8-lane vertical layout (codec/FORMAT.md).
// One kernel per bit width, fully unrolled by templates: slot s (values 8s .. 8s+7) of a width-B
// block lives at lane bit offset s * B, i.e. in 256-bit word (s * B) / 32 shifted right by
// (s * B) % 32, plus the next word's low bits when the value straddles. All shifts and masks are
// compile-time constants. The docID kernel fuses an in-register 8-wide prefix sum with a carry.
// Short blocks (horizontal layout) use the scalar decoder.
#include <immintrin.h>

#include <array>
#include <utility>

#include "bitpack_internal.hpp"
#include "codec/block_codec.hpp"

namespace search {
namespace {

#define SEARCH_AVX2_INLINE __attribute__((always_inline, target("avx2"))) inline

// 256-bit word w of a width-B block. For odd B the last "word" is 16 bytes of 8 uint16 halves.
template <uint32_t B, uint32_t W>
SEARCH_AVX2_INLINE __m256i LoadWord(const uint32_t* in) {
  if constexpr (B % 2 == 1 && W == B / 2) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 8 * W)));
  } else {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 8 * W));
  }
}

// Values 8S .. 8S+7 of a width-B block, in lane order.
template <uint32_t B, uint32_t S>
SEARCH_AVX2_INLINE __m256i Slot(const uint32_t* in) {
  if constexpr (B == 0) {
    return _mm256_setzero_si256();
  } else if constexpr (B == 32) {
    return LoadWord<B, S>(in);
  } else {
    constexpr uint32_t kBit = S * B, kW = kBit / 32, kSh = kBit % 32;
    __m256i v = LoadWord<B, kW>(in);
    if constexpr (kSh != 0) v = _mm256_srli_epi32(v, kSh);
    if constexpr (kSh + B > 32) v = _mm256_or_si256(v, _mm256_slli_epi32(LoadWord<B, kW + 1>(in), 32 - kSh));
    if constexpr (kSh + B != 32) v = _mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>((1u << B) - 1)));
    return v;
  }
}

template <class F, uint32_t... S>
SEARCH_AVX2_INLINE void ForEachSlot(F&& f, std::integer_sequence<uint32_t, S...>) {
  (f.template operator()<S>(), ...);
}

template <uint32_t B>
__attribute__((target("avx2"))) void UnpackFull(const uint32_t* in, uint32_t* out) {
  ForEachSlot(
      [&]<uint32_t S>() { _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * S), Slot<B, S>(in)); },
      std::make_integer_sequence<uint32_t, 16>{});
}

template <uint32_t B>
__attribute__((target("avx2"))) void UnpackFullPlusOne(const uint32_t* in, uint32_t* out) {
  const __m256i one = _mm256_set1_epi32(1);
  ForEachSlot(
      [&]<uint32_t S>() {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * S), _mm256_add_epi32(Slot<B, S>(in), one));
      },
      std::make_integer_sequence<uint32_t, 16>{});
}

// doc[i] = base + i + inclusive_prefix_sum(gap)[i] = (base - 1) + inclusive_prefix_sum(gap + 1)[i].
// Per slot: x = gap + 1; prefix within each 128-bit half (2 byte shifts); h = each half's total
// broadcast in that half; sw = h with halves swapped; the upper half adds the lower half's total
// (blend of sw) and the carry advances by the slot total (h + sw, in every lane). The carry chain
// is one add per slot; the shuffles are off it.
template <uint32_t B>
__attribute__((target("avx2"))) void DocsFull(const uint32_t* in, uint32_t base, uint32_t* out) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i zero = _mm256_setzero_si256();
  __m256i carry = _mm256_set1_epi32(static_cast<int>(base - 1));
  ForEachSlot(
      [&]<uint32_t S>() {
        __m256i x = _mm256_add_epi32(Slot<B, S>(in), one);
        x = _mm256_add_epi32(x, _mm256_slli_si256(x, 4));
        x = _mm256_add_epi32(x, _mm256_slli_si256(x, 8));
        const __m256i h = _mm256_shuffle_epi32(x, 0xff);
        const __m256i sw = _mm256_permute2x128_si256(h, h, 0x01);
        x = _mm256_add_epi32(x, _mm256_blend_epi32(zero, sw, 0xf0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * S), _mm256_add_epi32(x, carry));
        carry = _mm256_add_epi32(carry, _mm256_add_epi32(h, sw));
      },
      std::make_integer_sequence<uint32_t, 16>{});
}

using UnpackFn = void (*)(const uint32_t*, uint32_t*);
using DocsFn = void (*)(const uint32_t*, uint32_t, uint32_t*);

template <uint32_t... B>
constexpr std::array<UnpackFn, 33> MakeUnpackTable(std::integer_sequence<uint32_t, B...>) {
  return {&UnpackFull<B>...};
}
template <uint32_t... B>
constexpr std::array<UnpackFn, 33> MakePlusOneTable(std::integer_sequence<uint32_t, B...>) {
  return {&UnpackFullPlusOne<B>...};
}
template <uint32_t... B>
constexpr std::array<DocsFn, 33> MakeDocsTable(std::integer_sequence<uint32_t, B...>) {
  return {&DocsFull<B>...};
}

constexpr auto kUnpack = MakeUnpackTable(std::make_integer_sequence<uint32_t, 33>{});
constexpr auto kPlusOne = MakePlusOneTable(std::make_integer_sequence<uint32_t, 33>{});
constexpr auto kDocs = MakeDocsTable(std::make_integer_sequence<uint32_t, 33>{});

}  // namespace

namespace codec_internal {

void UnpackFullAvx2(const uint32_t* in, uint32_t bits, uint32_t* out) { kUnpack[bits > 32 ? 32 : bits](in, out); }
void UnpackFullPlusOneAvx2(const uint32_t* in, uint32_t bits, uint32_t* out) {
  kPlusOne[bits > 32 ? 32 : bits](in, out);
}
void DecodeDocsFullAvx2(const uint32_t* in, uint32_t bits, uint32_t base, uint32_t* out) {
  kDocs[bits > 32 ? 32 : bits](in, base, out);
}

}  // namespace codec_internal

void UnpackBlockAvx2(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out) {
  if (n == kBlockSize) {
    codec_internal::UnpackFullAvx2(in, bits, out);
  } else {
    UnpackBlockScalar(in, n, bits, out);
  }
}

}  // namespace search
