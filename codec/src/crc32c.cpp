// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): SSE4.2 crc32 instructions when present,
// a slicing-by-8 table otherwise. Both give Crc32c("123456789") == 0xE3069283, and chaining holds:
// Crc32c(ab) == Crc32c(b, n_b, Crc32c(a, n_a)).
#include <nmmintrin.h>

#include <array>
#include <cstring>

#include "bitpack_internal.hpp"
#include "codec/block_codec.hpp"

namespace search {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

constexpr std::array<std::array<uint32_t, 256>, 8> MakeTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
}

constexpr auto kTables = MakeTables();

}  // namespace

namespace codec_internal {

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
bool CpuHasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}

uint32_t Crc32cSoftware(const void* data, size_t n, uint32_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t crc = ~seed;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
          kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

namespace {

// The crc32 instruction has a 3-cycle latency and 1-cycle throughput, so long inputs run as three
// independent streams over consecutive kStripe-byte stripes. The register update is linear over
// GF(2): crc(r, A B C) = Z(Z(crc(r, A)) ^ crc(0, B)) ^ crc(0, C), where Z maps a register to its
// value after kStripe zero bytes; Z is applied with four 256-entry tables.
constexpr size_t kStripe = 1024;

__attribute__((target("sse4.2"))) uint64_t Crc32cU64Run(uint64_t crc, const uint8_t* p, size_t words) {
  for (size_t i = 0; i < words; ++i) {
    uint64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    crc = _mm_crc32_u64(crc, v);
  }
  return crc;
}

struct ZeroShift {
  uint32_t t[4][256];
  __attribute__((target("sse4.2"))) ZeroShift() {
    uint32_t basis[32];
    for (int bit = 0; bit < 32; ++bit) {
      uint64_t c = uint64_t{1} << bit;
      for (size_t i = 0; i < kStripe / 8; ++i) c = _mm_crc32_u64(c, 0);
      basis[bit] = static_cast<uint32_t>(c);
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t z = 0;
        for (int bit = 0; bit < 8; ++bit) {
          if (b & (1u << bit)) z ^= basis[8 * k + bit];
        }
        t[k][b] = z;
      }
    }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

}  // namespace

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const void* data, size_t n, uint32_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t crc = ~seed;
  if (n >= 3 * kStripe) {
    static const ZeroShift shift;
    while (n >= 3 * kStripe) {
      uint64_t c0 = crc, c1 = 0, c2 = 0;
      for (size_t i = 0; i < kStripe; i += 8) {
        uint64_t v0, v1, v2;
        std::memcpy(&v0, p + i, 8);
        std::memcpy(&v1, p + kStripe + i, 8);
        std::memcpy(&v2, p + 2 * kStripe + i, 8);
        c0 = _mm_crc32_u64(c0, v0);
        c1 = _mm_crc32_u64(c1, v1);
        c2 = _mm_crc32_u64(c2, v2);
      }
      crc = shift(shift(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1)) ^ static_cast<uint32_t>(c2);
      p += 3 * kStripe;
      n -= 3 * kStripe;
    }
  }
  crc = Crc32cU64Run(crc, p, n / 8);
  p += n / 8 * 8;
  n %= 8;
  uint32_t c = static_cast<uint32_t>(crc);
  while (n--) c = _mm_crc32_u8(c, *p++);
  return ~c;
}

}  // namespace codec_internal

uint32_t Crc32c(const void* data, size_t n, uint32_t seed) {
  return codec_internal::CpuHasSse42() ? codec_internal::Crc32cHardware(data, n, seed)
                                       : codec_internal::Crc32cSoftware(data, n, seed);
}

}  // namespace search
