// EncodePositions and PositionsView: the positions blob described in codec/FORMAT.md "Positions".
#include "codec/positions_codec.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bitpack_internal.hpp"
#include "codec/block_codec.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace search {
namespace {

constexpr uint32_t kHeaderBytes = 8;  // magic, crc32c

// Bytes a run of n values at width `bits` takes in the blob: a full run (n == 128) is the vertical
// layout's 16 * bits bytes; a short run is the horizontal layout cut to whole bytes
// (PackedBytes rounds up to words; the bytes past ceil(n * bits / 8) are always zero).
uint32_t StoredBytes(uint32_t n, uint32_t bits) {
  return n == kBlockSize ? 16u * bits : static_cast<uint32_t>((static_cast<uint64_t>(n) * bits + 7) / 8);
}

#if defined(__AVX2__)
// Inclusive sums of the eight 32-bit lanes of x (lane i: x[0] + ... + x[i]): a prefix within each
// 128-bit half by two byte shifts, then the lower half's total added to the upper half.
inline __m256i InclusiveSum8(__m256i x) {
  const __m256i lane3 = _mm256_setr_epi32(0, 0, 0, 0, 3, 3, 3, 3);
  const __m256i high_half = _mm256_setr_epi32(0, 0, 0, 0, -1, -1, -1, -1);
  x = _mm256_add_epi32(x, _mm256_slli_si256(x, 4));
  x = _mm256_add_epi32(x, _mm256_slli_si256(x, 8));
  return _mm256_add_epi32(x, _mm256_and_si256(_mm256_permutevar8x32_epi32(x, lane3), high_half));
}
#endif

uint32_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void Store32(char* p, uint32_t v) { std::memcpy(p, &v, sizeof(v)); }

// CRC-32C of the count (4 bytes, little-endian) followed by everything after the header: a blob
// read with another list's count fails the check like a corrupted one.
uint32_t BlobCrc(std::string_view bytes, uint32_t count) {
  const uint32_t seed = Crc32c(&count, sizeof(count));
  return Crc32c(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes, seed);
}

// Appends n values packed at `bits` (StoredBytes of them).
void AppendPacked(const uint32_t* values, uint32_t n, uint32_t bits, std::string* out) {
  uint32_t words[kBlockSize];  // a run holds at most 128 values of <= 32 bits: 128 words
  PackBlock(values, n, bits, words);
  out->append(reinterpret_cast<const char*>(words), StoredBytes(n, bits));
}

// Reads n values packed at `bits` from p (StoredBytes(n, bits) readable bytes, any alignment).
// A short run (the horizontal layout: value i at bit i * bits of the little-endian stream) is read
// branch-free, each value from the eight bytes at its first byte, the copy zero-padded past its end.
void UnpackStored(const char* p, uint32_t n, uint32_t bits, uint32_t* out) {
  if (n < kBlockSize && bits <= 32) {
    char buf[kBlockSize * 4 + 32];
    const uint32_t bytes = StoredBytes(n, bits);
    uint32_t i = 0;
    for (; i + 32 <= bytes; i += 32) std::memcpy(buf + i, p + i, 32);
    std::memcpy(buf + i, p + i, bytes - i);
    std::memset(buf + bytes, 0, 32);
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    uint32_t k = 0;
#if defined(__AVX2__)
    // Eight values a step, each from the four bytes at its first byte (bits <= 25: a value and
    // its bit offset within that byte fit in 32 bits); every such read lies inside buf.
    if (bits <= 25) {
      const __m256i step = _mm256_set1_epi32(static_cast<int>(8 * bits));
      const __m256i vmask = _mm256_set1_epi32(static_cast<int>(mask));
      const __m256i seven = _mm256_set1_epi32(7);
      __m256i bit = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                       _mm256_set1_epi32(static_cast<int>(bits)));
      for (; k + 8 <= n; k += 8) {
        const __m256i word = _mm256_i32gather_epi32(reinterpret_cast<const int*>(buf), _mm256_srli_epi32(bit, 3), 1);
        const __m256i v = _mm256_and_si256(_mm256_srlv_epi32(word, _mm256_and_si256(bit, seven)), vmask);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), v);
        bit = _mm256_add_epi32(bit, step);
      }
    }
#endif
    for (; k < n; ++k) {
      const uint64_t bit = uint64_t{k} * bits;
      uint64_t v;
      std::memcpy(&v, buf + bit / 8, sizeof(v));
      out[k] = static_cast<uint32_t>((v >> (bit % 8)) & mask);
    }
    return;
  }
#if defined(__AVX2__)
  // A full run read in place: the AVX2 unpack makes only unaligned vector loads.
  if (n == kBlockSize && bits <= 32 && codec_internal::CpuHasAvx2()) {
    codec_internal::UnpackFullAvx2(reinterpret_cast<const uint32_t*>(p), bits, out);
    return;
  }
#endif
  uint32_t words[kBlockSize];
  const uint32_t bytes = StoredBytes(n, bits);  // a full run: 16 * bits, whole 16-byte rows
  // 32 bytes a copy (vector moves; a variable-length memcpy of a few hundred bytes is a call).
  char* dst = reinterpret_cast<char*>(words);
  uint32_t i = 0;
  for (; i + 32 <= bytes; i += 32) std::memcpy(dst + i, p + i, 32);
  if (i < bytes) std::memcpy(dst + i, p + i, 16);
  UnpackBlock(words, n, bits, out);
}

uint32_t WidthOf(const uint32_t* v, uint32_t n) {
  uint32_t acc = 0;
  for (uint32_t i = 0; i < n; ++i) acc |= v[i];
  return BitWidth(acc);
}

Status BlockCorruption(uint32_t j, const std::string& what) {
  return Status::Corruption("PositionsView: block " + std::to_string(j) + ": " + what);
}

}  // namespace

Result<std::string> EncodePositions(std::span<const uint32_t> tfs, std::span<const uint32_t> positions) {
  if (tfs.empty()) return Status::InvalidArgument("EncodePositions: no postings");
  if (tfs.size() > UINT32_MAX) return Status::InvalidArgument("EncodePositions: more than 2^32-1 postings");
  uint64_t total = 0;
  for (size_t i = 0; i < tfs.size(); ++i) {
    if (tfs[i] == 0) return Status::InvalidArgument("EncodePositions: tf 0 at posting " + std::to_string(i));
    if (tfs[i] > kMaxTf) return Status::InvalidArgument("EncodePositions: tf above 2^31 at posting " + std::to_string(i));
    total += tfs[i];
  }
  if (total != positions.size()) {
    return Status::InvalidArgument("EncodePositions: " + std::to_string(positions.size()) +
                                   " positions but the tfs sum to " + std::to_string(total));
  }
  const auto count = static_cast<uint32_t>(tfs.size());
  const uint32_t num_blocks = (count + kBlockSize - 1) / kBlockSize;

  std::string out(kHeaderBytes + 4 * static_cast<size_t>(num_blocks - 1), '\0');
  std::vector<uint32_t> deltas;
  uint32_t vals[kBlockSize];
  size_t pos = 0;  // index into positions of the current posting's first position
  for (uint32_t j = 0; j < num_blocks; ++j) {
    if (j > 0) {
      if (out.size() > UINT32_MAX) return Status::InvalidArgument("EncodePositions: blob exceeds 4 GiB");
      Store32(out.data() + kHeaderBytes + 4 * (j - 1), static_cast<uint32_t>(out.size()));
    }
    const uint32_t begin = j * kBlockSize;
    const uint32_t n = std::min(kBlockSize, count - begin);
    // Per-posting deltas: the first position as is, then gap - 1 (positions ascend strictly).
    deltas.clear();
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t tf = tfs[begin + i];
      vals[i] = tf - 1;
      for (uint32_t k = 0; k < tf; ++k) {
        const uint32_t p = positions[pos + k];
        if (k == 0) {
          deltas.push_back(p);
        } else {
          const uint32_t prev = positions[pos + k - 1];
          if (p <= prev) {
            return Status::InvalidArgument("EncodePositions: positions of posting " + std::to_string(begin + i) +
                                           " do not ascend strictly");
          }
          deltas.push_back(p - prev - 1);
        }
      }
      pos += tf;
    }
    const uint32_t freq_bits = WidthOf(vals, n);
    out.push_back(static_cast<char>(freq_bits));
    AppendPacked(vals, n, freq_bits, &out);
    const size_t runs = (deltas.size() + kBlockSize - 1) / kBlockSize;
    const size_t widths_at = out.size();
    out.append(runs, '\0');
    for (size_t r = 0; r < runs; ++r) {
      const auto m = static_cast<uint32_t>(std::min<size_t>(kBlockSize, deltas.size() - r * kBlockSize));
      const uint32_t* run = deltas.data() + r * kBlockSize;
      const uint32_t bits = WidthOf(run, m);
      out[widths_at + r] = static_cast<char>(bits);
      AppendPacked(run, m, bits, &out);
    }
  }
  if (out.size() > UINT32_MAX) return Status::InvalidArgument("EncodePositions: blob exceeds 4 GiB");
  Store32(out.data(), kPositionsMagic);
  Store32(out.data() + 4, BlobCrc(out, count));
  return out;
}

Result<PositionsView> PositionsView::Parse(std::string_view bytes, uint32_t count) {
  if (count == 0) return Status::InvalidArgument("PositionsView: count 0 (a list has at least one posting)");
  const uint32_t num_blocks = (count + kBlockSize - 1) / kBlockSize;
  const uint64_t table_end = kHeaderBytes + 4 * static_cast<uint64_t>(num_blocks - 1);
  // Every block holds at least its freq width byte and one run width byte.
  if (bytes.size() < table_end + 2 * static_cast<uint64_t>(num_blocks)) {
    return Status::Corruption("PositionsView: " + std::to_string(bytes.size()) + " bytes, too short for " +
                              std::to_string(count) + " postings");
  }
  if (bytes.size() > UINT32_MAX) return Status::Corruption("PositionsView: blob larger than 4 GiB");
  if (Load32(bytes.data()) != kPositionsMagic) return Status::Corruption("PositionsView: bad magic");
  if (Load32(bytes.data() + 4) != BlobCrc(bytes, count)) {
    return Status::Corruption("PositionsView: CRC-32C mismatch (damaged, or not the positions of a " +
                              std::to_string(count) + "-posting list)");
  }
  uint64_t prev = table_end;
  for (uint32_t j = 1; j < num_blocks; ++j) {
    const uint32_t start = Load32(bytes.data() + kHeaderBytes + 4 * (j - 1));
    if (start < prev + 2 || start > bytes.size() - 2) {
      return Status::Corruption("PositionsView: block " + std::to_string(j) + " offset out of order or range");
    }
    prev = start;
  }
  PositionsView v;
  v.bytes_ = bytes;
  v.count_ = count;
  v.num_blocks_ = num_blocks;
  return v;
}

void PositionsView::PrefetchBlock(uint32_t j) const {
  const uint64_t start = BlockStart(j);
  const uint64_t end = std::min<uint64_t>(j + 1 < num_blocks_ ? BlockStart(j + 1) : bytes_.size(), start + 512);
  for (uint64_t q = start; q < end; q += 64) __builtin_prefetch(bytes_.data() + q);
}

uint32_t PositionsView::BlockStart(uint32_t j) const {
  return j == 0 ? kHeaderBytes + 4 * (num_blocks_ - 1) : Load32(bytes_.data() + kHeaderBytes + 4 * (j - 1));
}

uint32_t PositionsView::BlockPostings(uint32_t j) const { return std::min(kBlockSize, count_ - j * kBlockSize); }

Status PositionsView::ReadBlockLayout(uint32_t j, const uint32_t* list_tfs, std::vector<uint32_t>* offsets,
                                      BlockLayout* out) const {
  const uint64_t start = BlockStart(j);
  const uint64_t end = j + 1 < num_blocks_ ? BlockStart(j + 1) : bytes_.size();
  const uint32_t n = BlockPostings(j);
  const char* p = bytes_.data();
  // Parse guarantees end - start >= 2 for every block.
  uint64_t at = start;
  const auto freq_bits = static_cast<uint8_t>(p[at++]);
  if (freq_bits > 31) return BlockCorruption(j, "tf width above 31");
  if (at + StoredBytes(n, freq_bits) > end) return BlockCorruption(j, "tfs past the block's end");
#if defined(__AVX2__)
  if (list_tfs != nullptr && freq_bits <= 24) {
    // The list's tfs in one pass: their width (checked below) and their running sums as offsets.
    // Sums of 128 values below 2^24 + 1 fit in 32 bits; with another width the block is corrupt.
    offsets->resize(n + 1);
    uint32_t* off = offsets->data();
    off[0] = 0;
    const __m256i one = _mm256_set1_epi32(1), lane7 = _mm256_set1_epi32(7);
    __m256i carry = _mm256_setzero_si256(), width = _mm256_setzero_si256();
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(list_tfs + i));
      width = _mm256_or_si256(width, _mm256_sub_epi32(x, one));
      x = InclusiveSum8(x);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(off + i + 1), _mm256_add_epi32(x, carry));
      carry = _mm256_add_epi32(carry, _mm256_permutevar8x32_epi32(x, lane7));
    }
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), width);
    uint32_t acc = lanes[0] | lanes[1] | lanes[2] | lanes[3] | lanes[4] | lanes[5] | lanes[6] | lanes[7];
    uint64_t total = static_cast<uint32_t>(_mm256_cvtsi256_si32(carry));
    for (; i < n; ++i) {
      acc |= list_tfs[i] - 1;
      total += list_tfs[i];
      off[i + 1] = static_cast<uint32_t>(total);
    }
    if (BitWidth(acc) != freq_bits) return BlockCorruption(j, "the list's tfs are not the block's (width)");
    at += StoredBytes(n, freq_bits);
    const uint64_t runs = (total + kBlockSize - 1) / kBlockSize;
    if (at + runs > end) return BlockCorruption(j, "run widths past the block's end");
    *out = BlockLayout{end, total, runs, at, at + runs};
    return Status::Ok();
  }
#endif
  uint32_t tfs[kBlockSize];  // tf - 1 each
  if (list_tfs == nullptr) {
    UnpackStored(p + at, n, freq_bits, tfs);
  } else {  // the list's tfs for the stored ones (not read), which they must match in width
    uint32_t acc = 0;
    for (uint32_t i = 0; i < n; ++i) {
      tfs[i] = list_tfs[i] - 1;
      acc |= tfs[i];
    }
    if (BitWidth(acc) != freq_bits) return BlockCorruption(j, "the list's tfs are not the block's (width)");
  }
  at += StoredBytes(n, freq_bits);
  offsets->resize(n + 1);
  uint64_t total = 0;
  uint32_t i = 0;
  uint32_t* off = offsets->data();
#if defined(__AVX2__)
  if (freq_bits <= 24) {  // 128 values of tf - 1 < 2^24, plus one each: the sums fit in 32 bits
    const __m256i one = _mm256_set1_epi32(1), lane7 = _mm256_set1_epi32(7);
    __m256i carry = _mm256_setzero_si256();
    for (; i + 8 <= n; i += 8) {  // off[i + 1 ..] = inclusive sums of tf
      __m256i x = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tfs + i)), one);
      x = InclusiveSum8(x);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(off + i + 1), _mm256_add_epi32(x, carry));
      carry = _mm256_add_epi32(carry, _mm256_permutevar8x32_epi32(x, lane7));
    }
    off[0] = 0;
    total = static_cast<uint32_t>(_mm256_cvtsi256_si32(carry));
  }
#endif
  for (; i < n; ++i) {
    off[i] = static_cast<uint32_t>(total);
    total += uint64_t{tfs[i]} + 1;
  }
  const uint64_t runs = (total + kBlockSize - 1) / kBlockSize;
  // Each run has a width byte inside the block, which bounds `total` by 128 * the block's size.
  if (at + runs > end) return BlockCorruption(j, "run widths past the block's end");
  if (total > UINT32_MAX) return BlockCorruption(j, "more than 2^32-1 positions");
  (*offsets)[n] = static_cast<uint32_t>(total);
  *out = BlockLayout{end, total, runs, at, at + runs};
  return Status::Ok();
}

Status PositionsView::UnpackDeltas(uint32_t j, const uint32_t* list_tfs, std::vector<uint32_t>* offsets,
                                   std::vector<uint32_t>* positions, uint64_t* bound_out) const {
  BlockLayout layout;
  SEARCH_RETURN_IF_ERROR(ReadBlockLayout(j, list_tfs, offsets, &layout));
  const char* p = bytes_.data();
  const uint64_t end = layout.end, total = layout.total, runs = layout.runs, widths_at = layout.widths_at;
  uint64_t at = layout.runs_at;
  const auto corrupt = [j](const std::string& what) { return BlockCorruption(j, what); };
  positions->resize(total);
  uint32_t* out = positions->data();
  uint64_t bound = total;  // >= total + the sum of the deltas: each run's m values below 2^bits
  for (uint64_t r = 0; r < runs; ++r) {
    const auto m = static_cast<uint32_t>(std::min<uint64_t>(kBlockSize, total - r * kBlockSize));
    const auto bits = static_cast<uint8_t>(p[widths_at + r]);
    if (bits > 32) return corrupt("run width above 32");
    if (at + StoredBytes(m, bits) > end) return corrupt("positions past the block's end");
    UnpackStored(p + at, m, bits, out + r * kBlockSize);
    at += StoredBytes(m, bits);
    bound += uint64_t{m} * ((uint64_t{1} << bits) - 1);
  }
  if (at != end) return corrupt("bytes left over after the positions");
  *bound_out = bound;
  return Status::Ok();
}

Status PositionsView::DecodeBlockSums(uint32_t j, std::vector<uint32_t>* offsets, std::vector<uint32_t>* sums,
                                      bool* fits) const {
  if (j >= num_blocks_) return Status::InvalidArgument("PositionsView::DecodeBlockSums: block out of range");
  return DecodeSums(j, nullptr, offsets, sums, fits);
}

Status PositionsView::DecodeBlockSums(uint32_t j, std::span<const uint32_t> tfs, std::vector<uint32_t>* offsets,
                                      std::vector<uint32_t>* sums, bool* fits) const {
  if (j >= num_blocks_) return Status::InvalidArgument("PositionsView::DecodeBlockSums: block out of range");
  if (tfs.size() != BlockPostings(j))
    return Status::InvalidArgument("PositionsView::DecodeBlockSums: tfs not the block's posting count");
  return DecodeSums(j, tfs.data(), offsets, sums, fits);
}

Status PositionsView::DecodeSums(uint32_t j, const uint32_t* list_tfs, std::vector<uint32_t>* offsets,
                                 std::vector<uint32_t>* sums, bool* fits) const {
  uint64_t bound = 0;
  SEARCH_RETURN_IF_ERROR(UnpackDeltas(j, list_tfs, offsets, sums, &bound));
  const uint64_t total = sums->size();
  uint32_t* out = sums->data();
  if (bound >= kSumsLimit) {  // the exact last sum decides
    bound = total;
    for (uint64_t k = 0; k < total; ++k) bound += out[k];
  }
  *fits = bound < kSumsLimit;
  if (!*fits) return Status::Ok();
  uint64_t k = 0;
  uint32_t s_run = 0;
#if defined(__AVX2__)
  const __m256i one = _mm256_set1_epi32(1), lane7 = _mm256_set1_epi32(7);
  __m256i carry = _mm256_setzero_si256();  // every lane the sum so far
  for (; k + 8 <= total; k += 8) {
    __m256i x = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(out + k)), one);
    x = InclusiveSum8(x);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_add_epi32(x, carry));
    carry = _mm256_add_epi32(carry, _mm256_permutevar8x32_epi32(x, lane7));  // one add on the chain
  }
  s_run = static_cast<uint32_t>(_mm256_cvtsi256_si32(carry));
#endif
  for (; k < total; ++k) {
    s_run += out[k] + 1;
    out[k] = s_run;
  }
  return Status::Ok();
}

Status PositionsView::DecodeBlock(uint32_t j, std::vector<uint32_t>* offsets, std::vector<uint32_t>* positions) const {
  if (j >= num_blocks_) return Status::InvalidArgument("PositionsView::DecodeBlock: block out of range");
  const uint32_t n = BlockPostings(j);
  uint64_t bound = 0;
  SEARCH_RETURN_IF_ERROR(UnpackDeltas(j, nullptr, offsets, positions, &bound));
  const uint64_t total = positions->size();
  uint32_t* out = positions->data();
  const auto corrupt = [j](const std::string& what) { return BlockCorruption(j, what); };
  // Deltas to positions; a position past 2^32-1 is corruption. A posting's first delta is its
  // first position, each next one the gap - 1. S[k] = the sum of (delta + 1) through k; a
  // posting starting at b holds positions S[k] - base, base = S[b] - delta[b]. When the block's S
  // fits in 32 bits (no position can then pass 2^32-1), eight lanes at a time: S by a prefix sum,
  // base by a prefix maximum (bases grow with b); otherwise one branch-free pass in 64 bits.
  thread_local std::vector<uint8_t> first;
  first.assign(total, 0);
  const uint32_t* off = offsets->data();
  uint8_t* const first_at = first.data();  // hoisted: a store through first[] would reload it
  for (uint32_t i = 0; i < n; ++i) first_at[off[i]] = 1;  // tf >= 1: every offset below total
  uint64_t sum = bound;  // the exact sum only when the widths' bound does not settle the test
  if (bound > UINT32_MAX) {
    sum = total;
    for (uint64_t k = 0; k < total; ++k) sum += out[k];
  }
  if (sum <= UINT32_MAX) {
    uint64_t k = 0;
    uint32_t s_run = 0, base_run = 0;
#if defined(__AVX2__)
    const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
    const __m256i high_half = _mm256_setr_epi32(0, 0, 0, 0, -1, -1, -1, -1);
    const __m256i lane3 = _mm256_setr_epi32(0, 0, 0, 0, 3, 3, 3, 3), lane7 = _mm256_set1_epi32(7);
    __m256i carry_s = zero, carry_b = zero;
    for (; k + 8 <= total; k += 8) {
      const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out + k));
      __m256i x = _mm256_add_epi32(d, one);
      x = InclusiveSum8(x);
      const __m256i sv = _mm256_add_epi32(x, carry_s);
      uint64_t f8;
      std::memcpy(&f8, first.data() + k, 8);
      const __m256i starts =
          _mm256_cmpgt_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(f8))), zero);
      __m256i m = _mm256_and_si256(starts, _mm256_sub_epi32(sv, d));
      m = _mm256_max_epu32(m, _mm256_slli_si256(m, 4));
      m = _mm256_max_epu32(m, _mm256_slli_si256(m, 8));
      m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_permutevar8x32_epi32(m, lane3), high_half));
      const __m256i bv = _mm256_max_epu32(m, carry_b);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_sub_epi32(sv, bv));
      carry_s = _mm256_permutevar8x32_epi32(sv, lane7);
      carry_b = _mm256_permutevar8x32_epi32(bv, lane7);
    }
    s_run = static_cast<uint32_t>(_mm256_cvtsi256_si32(carry_s));
    base_run = static_cast<uint32_t>(_mm256_cvtsi256_si32(carry_b));
#endif
    for (; k < total; ++k) {
      const uint32_t d = out[k];
      s_run += d + 1;
      if (first[k] != 0) base_run = s_run - d;
      out[k] = s_run - base_run;
    }
    return Status::Ok();
  }
  uint64_t w = 0, high = 0;  // w: the last position + 1 (two dependent operations an element)
  for (uint64_t k = 0; k < total; ++k) {
    const uint64_t keep = uint64_t{first[k]} - 1;  // 0 at a posting's first position, else all ones
    w = (w & keep) + uint64_t{out[k]} + 1;
    const uint64_t v = w - 1;  // off the dependency chain
    high |= v;
    out[k] = static_cast<uint32_t>(v);
  }
  if (high > UINT32_MAX) return corrupt("position above 2^32-1");
  return Status::Ok();
}

Status PositionsView::DecodePostings(uint32_t j, std::span<const uint32_t> postings, std::vector<uint32_t>* offsets,
                                     std::vector<uint32_t>* positions) const {
  if (j >= num_blocks_) return Status::InvalidArgument("PositionsView::DecodePostings: block out of range");
  return DecodeSome(j, nullptr, postings, offsets, positions);
}

Status PositionsView::DecodePostings(uint32_t j, std::span<const uint32_t> tfs, std::span<const uint32_t> postings,
                                     std::vector<uint32_t>* offsets, std::vector<uint32_t>* positions) const {
  if (j >= num_blocks_) return Status::InvalidArgument("PositionsView::DecodePostings: block out of range");
  if (tfs.size() != BlockPostings(j))
    return Status::InvalidArgument("PositionsView::DecodePostings: tfs not the block's posting count");
  return DecodeSome(j, tfs.data(), postings, offsets, positions);
}

Status PositionsView::DecodeSome(uint32_t j, const uint32_t* list_tfs, std::span<const uint32_t> postings,
                                 std::vector<uint32_t>* offsets, std::vector<uint32_t>* positions) const {
  const uint32_t n = BlockPostings(j);
  for (size_t q = 0; q < postings.size(); ++q) {
    if (postings[q] >= n || (q > 0 && postings[q] <= postings[q - 1]))
      return Status::InvalidArgument("PositionsView::DecodePostings: postings not strictly ascending below " +
                                     std::to_string(n));
  }
  // The same checks, in the same order, as DecodeBlock's, the runs walked without unpacking.
  BlockLayout layout;
  SEARCH_RETURN_IF_ERROR(ReadBlockLayout(j, list_tfs, offsets, &layout));
  const char* p = bytes_.data();
  const uint64_t end = layout.end, total = layout.total, runs = layout.runs, widths_at = layout.widths_at;
  uint64_t at = layout.runs_at;
  const auto corrupt = [j](const std::string& what) { return BlockCorruption(j, what); };
  thread_local std::vector<uint64_t> run_at;
  run_at.resize(runs);
  uint32_t widest = 0;  // the widest run's width: bounds every delta
  for (uint64_t r = 0; r < runs; ++r) {
    const auto m = static_cast<uint32_t>(std::min<uint64_t>(kBlockSize, total - r * kBlockSize));
    const auto bits = static_cast<uint8_t>(p[widths_at + r]);
    if (bits > 32) return corrupt("run width above 32");
    if (at + StoredBytes(m, bits) > end) return corrupt("positions past the block's end");
    run_at[r] = at;
    at += StoredBytes(m, bits);
    widest = std::max<uint32_t>(widest, bits);
  }
  if (at != end) return corrupt("bytes left over after the positions");
  positions->resize(total);
  uint32_t* out = positions->data();
  const uint32_t* off = offsets->data();
  uint64_t unpacked = 0;  // runs [0, unpacked) are done or not needed (the postings ascend)
  for (const uint32_t i : postings) {
    const uint32_t from = off[i], to = off[i + 1];  // tf >= 1: from < to
    for (uint64_t r = std::max<uint64_t>(unpacked, from / kBlockSize); r <= (to - 1) / kBlockSize; ++r) {
      const auto m = static_cast<uint32_t>(std::min<uint64_t>(kBlockSize, total - r * kBlockSize));
      UnpackStored(p + run_at[r], m, static_cast<uint8_t>(p[widths_at + r]), out + r * kBlockSize);
      unpacked = r + 1;
    }
    // The posting's first delta is its first position, each next one the gap - 1.
#if defined(__AVX2__)
    // Its positions below 2^32 whatever the deltas (tf values each at most 2^widest, less one):
    // running sums of delta + 1 in 32 bits, eight a step, the last step's lanes past `to` neither
    // read nor written (they may be the next listed posting's deltas).
    if (widest < 32 && (uint64_t{to - from} << widest) <= (uint64_t{1} << 32)) {
      const __m256i one = _mm256_set1_epi32(1), lane7 = _mm256_set1_epi32(7);
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      __m256i last = _mm256_set1_epi32(-1);  // every lane the previous position (-1 before the first)
      for (uint32_t k = from; k < to; k += 8) {
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min(8u, to - k))), lane);
        __m256i x = _mm256_add_epi32(_mm256_maskload_epi32(reinterpret_cast<const int*>(out + k), live), one);
        x = InclusiveSum8(x);
        x = _mm256_add_epi32(x, last);
        _mm256_maskstore_epi32(reinterpret_cast<int*>(out + k), live, x);
        last = _mm256_permutevar8x32_epi32(x, lane7);
      }
      continue;
    }
#endif
    uint64_t w = 0, high = 0;
    for (uint32_t k = from; k < to; ++k) {
      w = (k == from ? 0 : w) + uint64_t{out[k]} + 1;
      high |= w - 1;
      out[k] = static_cast<uint32_t>(w - 1);
    }
    if (high > UINT32_MAX) return corrupt("position above 2^32-1");
  }
  return Status::Ok();
}

}  // namespace search
