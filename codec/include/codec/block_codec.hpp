// The posting-list byte format (codec/FORMAT.md is the spec) and its CPU encoder/decoders.
//
// A list is one contiguous, self-describing blob:
//   ListHeader (32 bytes) | BlockMeta[num_blocks] (16 bytes each) | payload
// Postings are cut into blocks of kBlockSize = 128 (the last may be shorter). Each block stores
// docID gaps bitpacked at the block's width and, separately, (tf - 1) bitpacked at its own width,
// so frequencies are read only for documents that survive. Full blocks use the 8-lane vertical
// layout (value i in lane i % 8, slot i / 8; a lane's slots packed LSB-first into 32-bit words;
// lane l's word w at word index 8 * w + l): an AVX2 decoder reads one 256-bit word per step and a
// GPU warp's threads read adjacent 32-bit words, coalesced (Mallia 2019 §3.1, SIMD-BP128).
// Odd width b: a lane holds 16 * b bits = (b - 1) / 2 words plus 16 bits; those final 16-bit
// halves are packed as 8 little-endian uint16 in the block's last 16 bytes (lane l's at byte
// 32 * (b / 2) + 2 * l), so a full block is exactly 16 * b bytes (codec/FORMAT.md).
// The short last block (n < 128 values) is packed horizontally (value i at bit offset i * width).
//
// DocIDs: block j's values decode as doc[i] = block_base(j) + i + prefix_sum_inclusive(gap)[i],
// where block_base(0) = ListHeader::base_doc and block_base(j) = meta[j-1].last_doc + 1.
//
// Thread-safety: ListView is an immutable view; concurrent decodes of one view are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search {

inline constexpr uint32_t kBlockSize = 128;
// Term frequencies are 1 .. kMaxTf, so tf - 1 fits 31 bits (freq_bits <= 31).
inline constexpr uint32_t kMaxTf = uint32_t{1} << 31;
inline constexpr uint32_t kListMagic = 0x31424c50;  // "PLB1" little-endian
inline constexpr uint32_t kCodecVersion = 1;

struct ListHeader {
  uint32_t magic;       // kListMagic
  uint32_t count;       // postings in the list, >= 1
  uint32_t num_blocks;  // ceil(count / 128)
  uint32_t base_doc;    // lower bound of the first docID (the shard's first docID)
  float max_score;      // max BM25 contribution of any posting (max of block max_score)
  uint32_t crc32c;      // CRC-32C (Castagnoli) of every byte after the header
  uint32_t payload_bytes;
  uint32_t reserved;    // 0
};
static_assert(sizeof(ListHeader) == 32);

struct BlockMeta {
  uint32_t last_doc;   // the block's last (largest) docID: the skip entry
  uint32_t offset;     // byte offset of the block's docID payload from the start of the payload
  uint8_t doc_bits;    // 0..32: width of the docID gaps
  uint8_t freq_bits;   // 0..32: width of (tf - 1)
  uint16_t count;      // values in the block: 128, or 1..128 for the last block
  float max_score;     // max BM25 contribution in the block (block-max)
};
static_assert(sizeof(BlockMeta) == 16);

// Bytes taken by `n` values of `bits` width: 16 * bits for a full block (vertical layout),
// 4 * ceil(n * bits / 32) for a short one (horizontal). The freq payload follows the docID
// payload: freq offset = offset + PackedBytes(count, doc_bits).
constexpr uint32_t PackedBytes(uint32_t n, uint32_t bits) {
  return n == kBlockSize ? 16u * bits : 4u * static_cast<uint32_t>((static_cast<uint64_t>(n) * bits + 31) / 32);
}

// Smallest width holding v (0 for v == 0).
constexpr uint32_t BitWidth(uint32_t v) { return v == 0 ? 0 : 32u - static_cast<uint32_t>(__builtin_clz(v)); }

// Scores one posting for the block-max / list-max fields: (docID, tf) -> BM25 contribution.
using PostingScorer = std::function<float(uint32_t doc, uint32_t tf)>;

// Encodes a posting list. REQUIRES: docs strictly increasing, docs[0] >= base_doc, tfs[i] >= 1,
// docs.size() == tfs.size() >= 1. Returns InvalidArgument when these do not hold.
Result<std::string> EncodeList(std::span<const uint32_t> docs, std::span<const uint32_t> tfs,
                               uint32_t base_doc, const PostingScorer& scorer);

// Low-level packers (exposed for tests and the GPU encoder's twin). `out` must hold
// PackedBytes(n, bits) / 4 words. Values must fit in `bits`.
void PackBlock(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out);
// Unpack n values; scalar reference and AVX2 versions must agree bit for bit.
void UnpackBlockScalar(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out);
void UnpackBlockAvx2(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out);
// The fastest available on this CPU (AVX2 where present).
void UnpackBlock(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out);

// A validated, read-only view over an encoded list. Parse checks the header, the metadata (widths
// <= 32, offsets and sizes inside the blob, last_doc strictly increasing, counts summing to
// `count`) and optionally the CRC, so that decoding a block afterwards cannot read out of bounds.
// REQUIRES: bytes.data() is 4-byte aligned (InvalidArgument otherwise); the bytes outlive the view.
class ListView {
 public:
  ListView() = default;
  static Result<ListView> Parse(std::string_view bytes, bool verify_crc = true);

  uint32_t count() const { return header_.count; }
  uint32_t num_blocks() const { return header_.num_blocks; }
  uint32_t base_doc() const { return header_.base_doc; }
  float max_score() const { return header_.max_score; }
  const BlockMeta& block(uint32_t j) const { return meta_[j]; }
  const BlockMeta* blocks() const { return meta_; }
  uint32_t block_base(uint32_t j) const { return j == 0 ? header_.base_doc : meta_[j - 1].last_doc + 1; }
  std::string_view bytes() const { return bytes_; }
  const uint8_t* payload() const { return payload_; }

  // Decodes block j's docIDs (absolute) into out[0 .. block(j).count). `out` has room for 128.
  // Corruption when the decoded values disagree with the metadata (last value != last_doc or an
  // overflow past it). REQUIRES: j < num_blocks().
  Status DecodeDocs(uint32_t j, uint32_t* out) const;
  // Decodes block j's term frequencies (tf >= 1) into out[0 .. block(j).count).
  void DecodeFreqs(uint32_t j, uint32_t* out) const;

  // The last docID of the list. REQUIRES: a parsed view.
  uint32_t last_doc() const { return meta_[header_.num_blocks - 1].last_doc; }

  // Block maxima by group: group g holds blocks [g * kBlocksPerGroup, (g + 1) * kBlocksPerGroup),
  // and its value is the largest of their max_score, or +inf when one of them is not a number >= 0
  // (a bound that never prunes). A cursor skips a whole group at once when even its maximum cannot
  // count. The view does not own them: whoever keeps the list keeps them (CachedList), and a view
  // without them (nullptr) is scanned block by block.
  static constexpr uint32_t kBlocksPerGroup = 64;
  std::vector<float> ComputeGroupMaxima() const;
  void set_group_maxima(const float* g) { group_maxima_ = g; }
  const float* group_maxima() const { return group_maxima_; }

 private:
  std::string_view bytes_;
  ListHeader header_{};
  const BlockMeta* meta_ = nullptr;
  const uint8_t* payload_ = nullptr;
  const float* group_maxima_ = nullptr;  // num_blocks / kBlocksPerGroup rounded up, or nullptr
};

// CRC-32C (Castagnoli), hardware-accelerated where SSE4.2 is present.
uint32_t Crc32c(const void* data, size_t n, uint32_t seed = 0);

}  // namespace search
