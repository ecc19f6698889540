// Bit packing: PackBlock against a bit-by-bit reading of the layout spec (codec/FORMAT.md), the
// scalar and AVX2 unpackers against each other at every width and odd sizes, the fused docID
// kernel against the 64-bit scalar rule, and CRC-32C against published vectors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "bitpack_internal.hpp"
#include "codec/block_codec.hpp"

namespace search {
namespace {

constexpr uint32_t kSentinel = 0xA5A5A5A5u;

uint32_t MaxValue(uint32_t bits) { return bits == 32 ? UINT32_MAX : (1u << bits) - 1; }

std::vector<uint32_t> RandomValues(std::mt19937& rng, uint32_t n, uint32_t bits) {
  std::vector<uint32_t> v(n);
  for (auto& x : v) x = rng() & MaxValue(bits);
  if (n > 0 && bits > 0) v[rng() % n] = MaxValue(bits);  // the width is used in full
  return v;
}

// Reads bit k (0-based, LSB-first) of value i straight from the spec's description of the layout.
uint32_t SpecBit(const uint8_t* bytes, uint32_t n, uint32_t bits, uint32_t i, uint32_t k) {
  if (n != kBlockSize) {
    const uint64_t p = static_cast<uint64_t>(i) * bits + k;
    return (bytes[p / 8] >> (p % 8)) & 1;
  }
  const uint32_t lane = i % 8, slot = i / 8;
  const uint32_t p = slot * bits + k;  // bit position in the lane's stream
  const uint32_t w = p / 32;
  if (bits % 2 == 1 && w == bits / 2) {  // final half-words: uint16 number `lane` of the last 16 bytes
    const uint32_t byte = 32 * w + 2 * lane + (p % 32) / 8;
    return (bytes[byte] >> (p % 8)) & 1;
  }
  const uint32_t byte = 4 * (8 * w + lane) + (p % 32) / 8;
  return (bytes[byte] >> (p % 8)) & 1;
}

TEST(PackedBytesTest, SizesFollowTheLayouts) {
  for (uint32_t b = 0; b <= 32; ++b) {
    EXPECT_EQ(PackedBytes(128, b), 16 * b);
    EXPECT_EQ(PackedBytes(128, b) % 16, 0u);
    EXPECT_EQ(PackedBytes(1, b), b == 0 ? 0u : 4u);
    EXPECT_EQ(PackedBytes(127, b), 4 * ((127 * b + 31) / 32));
  }
  EXPECT_EQ(BitWidth(0), 0u);
  EXPECT_EQ(BitWidth(1), 1u);
  EXPECT_EQ(BitWidth(255), 8u);
  EXPECT_EQ(BitWidth(256), 9u);
  EXPECT_EQ(BitWidth(UINT32_MAX), 32u);
}

TEST(BitpackTest, EveryWidthAndSizeRoundTripsAndMatchesTheSpec) {
  std::mt19937 rng(42);
  for (uint32_t n : {1u, 2u, 7u, 8u, 9u, 31u, 33u, 127u, 128u, 129u}) {
    for (uint32_t bits = 0; bits <= 32; ++bits) {
      SCOPED_TRACE("n=" + std::to_string(n) + " bits=" + std::to_string(bits));
      const auto values = RandomValues(rng, n, bits);
      const uint32_t words = PackedBytes(n, bits) / 4;
      std::vector<uint32_t> packed(words + 8, kSentinel);
      PackBlock(values.data(), n, bits, packed.data());
      for (uint32_t w = words; w < words + 8; ++w) ASSERT_EQ(packed[w], kSentinel) << "wrote past PackedBytes";

      const auto* bytes = reinterpret_cast<const uint8_t*>(packed.data());
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t v = 0;
        for (uint32_t k = 0; k < bits; ++k) v |= SpecBit(bytes, n, bits, i, k) << k;
        ASSERT_EQ(v, values[i]) << "value " << i << " is not where the spec puts it";
      }

      std::vector<uint32_t> scalar(n + 8, kSentinel), avx2(n + 8, kSentinel), best(n + 8, kSentinel);
      UnpackBlockScalar(packed.data(), n, bits, scalar.data());
      UnpackBlockAvx2(packed.data(), n, bits, avx2.data());
      UnpackBlock(packed.data(), n, bits, best.data());
      for (uint32_t i = 0; i < n; ++i) {
        ASSERT_EQ(scalar[i], values[i]) << i;
        ASSERT_EQ(avx2[i], values[i]) << i;
        ASSERT_EQ(best[i], values[i]) << i;
      }
      for (uint32_t i = n; i < n + 8; ++i) ASSERT_EQ(avx2[i], kSentinel) << "unpack wrote past n";
    }
  }
}

TEST(BitpackTest, UnusedBitsAreZeroSoBlocksAreCanonical) {
  std::mt19937 rng(7);
  for (uint32_t n : {5u, 128u}) {
    for (uint32_t bits = 1; bits <= 32; ++bits) {
      const auto values = RandomValues(rng, n, bits);
      std::vector<uint32_t> packed(PackedBytes(n, bits) / 4, kSentinel);
      PackBlock(values.data(), n, bits, packed.data());
      uint64_t ones = 0;
      for (uint32_t w : packed) ones += __builtin_popcount(w);
      uint64_t want = 0;
      for (uint32_t v : values) want += __builtin_popcount(v);
      EXPECT_EQ(ones, want) << "n=" << n << " bits=" << bits;
    }
  }
}

// The worked example of codec/FORMAT.md: 128 values v[i] = i % 8 at width 3 (an odd width).
TEST(BitpackTest, WorkedExampleFromFormatMd) {
  uint32_t values[128];
  for (uint32_t i = 0; i < 128; ++i) values[i] = i % 8;
  uint32_t packed[12];
  PackBlock(values, 128, 3, packed);
  // Lane l holds 16 copies of l at 3 bits: bits 0..31 of its stream are l repeated (10 full copies
  // plus the low 2 bits of the 11th); word 0 of lane l is packed[l].
  for (uint32_t l = 0; l < 8; ++l) {
    uint64_t stream = 0;
    for (uint32_t s = 0; s < 16; ++s) stream |= static_cast<uint64_t>(l) << (3 * s);
    EXPECT_EQ(packed[l], static_cast<uint32_t>(stream)) << l;
    const auto tail = static_cast<uint16_t>(stream >> 32);  // bits 32..47
    uint16_t got;
    std::memcpy(&got, reinterpret_cast<const uint8_t*>(packed) + 32 + 2 * l, 2);
    EXPECT_EQ(got, tail) << l;
  }
  EXPECT_EQ(packed[0], 0u);
  EXPECT_EQ(packed[1], 0x49249249u);
  EXPECT_EQ(packed[7], 0xFFFFFFFFu);
}

TEST(BitpackTest, Avx2ReadsUnalignedInput) {
  std::mt19937 rng(3);
  for (uint32_t bits = 0; bits <= 32; ++bits) {
    const auto values = RandomValues(rng, 128, bits);
    std::vector<uint32_t> buf(PackedBytes(128, bits) / 4 + 1);
    PackBlock(values.data(), 128, bits, buf.data() + 1);  // 4-byte aligned, not 32-byte aligned
    uint32_t out[128];
    UnpackBlockAvx2(buf.data() + 1, 128, bits, out);
    for (uint32_t i = 0; i < 128; ++i) ASSERT_EQ(out[i], values[i]) << bits;
  }
}

TEST(BitpackTest, FusedDocKernelsMatchScalarRule) {
  std::mt19937 rng(11);
  for (uint32_t bits = 0; bits <= 32; ++bits) {
    for (int trial = 0; trial < 20; ++trial) {
      // Gaps below 2^bits; base chosen so that no sum passes 2^32 (the wrap case is tested in
      // block_codec_test through ListView).
      std::vector<uint32_t> gaps(128);
      const uint64_t cap = bits >= 25 ? (UINT32_MAX - 200) / 128 : MaxValue(bits);
      for (auto& g : gaps) g = static_cast<uint32_t>(rng() % (cap + 1));
      uint64_t total = 127;
      for (auto g : gaps) total += g;
      const uint32_t base = static_cast<uint32_t>(rng() % (uint64_t{UINT32_MAX} - total + 1));
      const uint32_t width = std::max(bits, BitWidth(*std::max_element(gaps.begin(), gaps.end())));
      std::vector<uint32_t> packed(PackedBytes(128, width) / 4 + 1);
      PackBlock(gaps.data(), 128, width, packed.data());
      uint32_t fast[128], slow[128], plus_one[128];
      codec_internal::DecodeDocsFullAvx2(packed.data(), width, base, fast);
      ASSERT_TRUE(codec_internal::DecodeDocsScalar(packed.data(), 128, width, base, slow));
      uint64_t doc = base;
      for (uint32_t i = 0; i < 128; ++i) {
        ASSERT_EQ(slow[i], doc + gaps[i]) << i;
        doc += gaps[i] + 1;
        ASSERT_EQ(fast[i], slow[i]) << "width " << width << " value " << i;
      }
      codec_internal::UnpackFullPlusOneAvx2(packed.data(), width, plus_one);
      for (uint32_t i = 0; i < 128; ++i) ASSERT_EQ(plus_one[i], gaps[i] + 1);
    }
  }
}

TEST(BitpackTest, ScalarDocRuleReportsOverflow) {
  uint32_t gaps[3] = {5, UINT32_MAX - 10, 10};
  uint32_t packed[3], out[3];
  PackBlock(gaps, 3, 32, packed);
  EXPECT_FALSE(codec_internal::DecodeDocsScalar(packed, 3, 32, 0, out));
  gaps[2] = 3;  // 5 + 1 + (2^32 - 11) + 1 + 3 = 2^32 - 1: fits exactly
  PackBlock(gaps, 3, 32, packed);
  ASSERT_TRUE(codec_internal::DecodeDocsScalar(packed, 3, 32, 0, out));
  EXPECT_EQ(out[2], UINT32_MAX);
}

uint32_t Crc32cBitwise(const uint8_t* p, size_t n, uint32_t seed) {
  uint32_t crc = ~seed;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32cTest, PublishedVectors) {
  const char* digits = "123456789";
  EXPECT_EQ(Crc32c(digits, 9), 0xE3069283u);
  EXPECT_EQ(codec_internal::Crc32cSoftware(digits, 9, 0), 0xE3069283u);
  uint8_t buf[32];
  std::memset(buf, 0, sizeof(buf));  // RFC 3720 B.4
  EXPECT_EQ(Crc32c(buf, 32), 0x8A9136AAu);
  EXPECT_EQ(codec_internal::Crc32cSoftware(buf, 32, 0), 0x8A9136AAu);
  std::memset(buf, 0xff, sizeof(buf));
  EXPECT_EQ(Crc32c(buf, 32), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(buf, 32), 0x46DD794Eu);
  EXPECT_EQ(codec_internal::Crc32cSoftware(buf, 32, 0), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(buf, 0), 0u);
}

TEST(Crc32cTest, HardwareSoftwareAndBitwiseAgreeAndChain) {
  std::mt19937 rng(5);
  std::vector<uint8_t> data(3000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t n = 0; n < 300; ++n) {
    const size_t off = rng() % 8;  // any alignment
    const uint32_t seed = rng();
    const uint32_t want = Crc32cBitwise(data.data() + off, n, seed);
    ASSERT_EQ(codec_internal::Crc32cSoftware(data.data() + off, n, seed), want) << n;
    if (codec_internal::CpuHasSse42()) {
      ASSERT_EQ(codec_internal::Crc32cHardware(data.data() + off, n, seed), want) << n;
    }
    ASSERT_EQ(Crc32c(data.data() + off, n, seed), want) << n;
  }
  // Long inputs take the three-stream path (stripes of 1 KiB) with a combining step.
  std::vector<uint8_t> big(20000);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  for (size_t n : {3071, 3072, 3073, 3080, 6144, 9999, 19990}) {
    const size_t off = rng() % 8;
    const uint32_t seed = rng();
    const uint32_t want = Crc32cBitwise(big.data() + off, n, seed);
    ASSERT_EQ(codec_internal::Crc32cSoftware(big.data() + off, n, seed), want) << n;
    ASSERT_EQ(Crc32c(big.data() + off, n, seed), want) << n;
  }
  const uint32_t whole = Crc32c(data.data(), data.size());
  const uint32_t split = Crc32c(data.data() + 1234, data.size() - 1234, Crc32c(data.data(), 1234));
  EXPECT_EQ(whole, split);
  EXPECT_EQ(codec_internal::Crc32cSoftware(data.data(), data.size(), 0), whole);
}

}  // namespace
}  // namespace search
