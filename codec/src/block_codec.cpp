// EncodeList and ListView: the posting-list blob described in codec/FORMAT.md.
#include "codec/block_codec.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bitpack_internal.hpp"

namespace search {

void UnpackBlock(const uint32_t* in, uint32_t n, uint32_t bits, uint32_t* out) {
  if (codec_internal::CpuHasAvx2()) {
    UnpackBlockAvx2(in, n, bits, out);
  } else {
    UnpackBlockScalar(in, n, bits, out);
  }
}

Result<std::string> EncodeList(std::span<const uint32_t> docs, std::span<const uint32_t> tfs, uint32_t base_doc,
                               const PostingScorer& scorer) {
  if (docs.empty()) return Status::InvalidArgument("EncodeList: empty posting list");
  if (docs.size() != tfs.size()) {
    return Status::InvalidArgument("EncodeList: " + std::to_string(docs.size()) + " docs but " +
                                   std::to_string(tfs.size()) + " tfs");
  }
  if (docs.size() > UINT32_MAX) return Status::InvalidArgument("EncodeList: more than 2^32-1 postings");
  if (docs[0] < base_doc) {
    return Status::InvalidArgument("EncodeList: first doc " + std::to_string(docs[0]) + " < base_doc " +
                                   std::to_string(base_doc));
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i > 0 && docs[i] <= docs[i - 1]) {
      return Status::InvalidArgument("EncodeList: docs not strictly increasing at index " + std::to_string(i));
    }
    if (tfs[i] == 0) return Status::InvalidArgument("EncodeList: tf 0 at index " + std::to_string(i));
    if (tfs[i] > kMaxTf) {
      return Status::InvalidArgument("EncodeList: tf " + std::to_string(tfs[i]) + " above 2^31 at index " +
                                     std::to_string(i));
    }
  }

  const auto count = static_cast<uint32_t>(docs.size());
  const uint32_t num_blocks = (count + kBlockSize - 1) / kBlockSize;
  std::vector<BlockMeta> meta(num_blocks);
  uint64_t payload_bytes = 0;
  float list_max = 0.0f;
  uint32_t gaps[kBlockSize];
  uint32_t freqs[kBlockSize];
  // Pass 1: widths, sizes, scores.
  for (uint32_t j = 0; j < num_blocks; ++j) {
    const uint32_t begin = j * kBlockSize;
    const uint32_t n = std::min(kBlockSize, count - begin);
    uint32_t base = j == 0 ? base_doc : docs[begin - 1] + 1;
    uint32_t gap_or = 0, freq_or = 0;
    float block_max = 0.0f;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t d = docs[begin + i];
      gap_or |= d - base;  // gap = d - (previous doc + 1)
      base = d + 1;
      freq_or |= tfs[begin + i] - 1;
      if (scorer) block_max = std::max(block_max, scorer(d, tfs[begin + i]));
    }
    BlockMeta& m = meta[j];
    m.last_doc = docs[begin + n - 1];
    m.offset = static_cast<uint32_t>(payload_bytes);
    m.doc_bits = static_cast<uint8_t>(BitWidth(gap_or));
    m.freq_bits = static_cast<uint8_t>(BitWidth(freq_or));
    m.count = static_cast<uint16_t>(n);
    m.max_score = block_max;
    list_max = std::max(list_max, block_max);
    payload_bytes += PackedBytes(n, m.doc_bits) + PackedBytes(n, m.freq_bits);
    if (payload_bytes > UINT32_MAX) return Status::InvalidArgument("EncodeList: payload exceeds 4 GiB");
  }

  const size_t meta_bytes = sizeof(BlockMeta) * static_cast<size_t>(num_blocks);
  std::string out(sizeof(ListHeader) + meta_bytes + payload_bytes, '\0');
  char* payload = out.data() + sizeof(ListHeader) + meta_bytes;
  // Pass 2: pack. Words are assembled in an aligned scratch buffer, then copied.
  uint32_t words[kBlockSize];
  for (uint32_t j = 0; j < num_blocks; ++j) {
    const BlockMeta& m = meta[j];
    const uint32_t begin = j * kBlockSize;
    uint32_t base = j == 0 ? base_doc : docs[begin - 1] + 1;
    for (uint32_t i = 0; i < m.count; ++i) {
      gaps[i] = docs[begin + i] - base;
      base = docs[begin + i] + 1;
      freqs[i] = tfs[begin + i] - 1;
    }
    const uint32_t doc_bytes = PackedBytes(m.count, m.doc_bits);
    PackBlock(gaps, m.count, m.doc_bits, words);
    std::memcpy(payload + m.offset, words, doc_bytes);
    PackBlock(freqs, m.count, m.freq_bits, words);
    std::memcpy(payload + m.offset + doc_bytes, words, PackedBytes(m.count, m.freq_bits));
  }
  std::memcpy(out.data() + sizeof(ListHeader), meta.data(), meta_bytes);

  ListHeader h{};
  h.magic = kListMagic;
  h.count = count;
  h.num_blocks = num_blocks;
  h.base_doc = base_doc;
  h.max_score = list_max;
  h.payload_bytes = static_cast<uint32_t>(payload_bytes);
  h.reserved = 0;
  h.crc32c = Crc32c(out.data() + sizeof(ListHeader), out.size() - sizeof(ListHeader));
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}

std::vector<float> ListView::ComputeGroupMaxima() const {
  std::vector<float> g((num_blocks() + kBlocksPerGroup - 1) / kBlocksPerGroup, 0.0f);
  for (uint32_t j = 0; j < num_blocks(); ++j) {
    const float m = meta_[j].max_score;
    float& v = g[j / kBlocksPerGroup];
    v = m >= 0.0f ? std::max(v, m) : std::numeric_limits<float>::infinity();
  }
  return g;
}

Result<ListView> ListView::Parse(std::string_view bytes, bool verify_crc) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint32_t) != 0) {
    return Status::InvalidArgument("ListView: list bytes are not 4-byte aligned");
  }
  if (bytes.size() < sizeof(ListHeader)) {
    return Status::Corruption("ListView: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  }
  ListView v;
  std::memcpy(&v.header_, bytes.data(), sizeof(ListHeader));
  const ListHeader& h = v.header_;
  if (h.magic != kListMagic) return Status::Corruption("ListView: bad magic");
  if (h.reserved != 0) return Status::Corruption("ListView: reserved header field is not 0");
  if (h.count == 0) return Status::Corruption("ListView: empty list");
  const uint64_t want_blocks = (static_cast<uint64_t>(h.count) + kBlockSize - 1) / kBlockSize;
  if (h.num_blocks != want_blocks) {
    return Status::Corruption("ListView: num_blocks " + std::to_string(h.num_blocks) + " does not match count " +
                              std::to_string(h.count));
  }
  const uint64_t want_size =
      sizeof(ListHeader) + sizeof(BlockMeta) * static_cast<uint64_t>(h.num_blocks) + h.payload_bytes;
  if (want_size != bytes.size()) {
    return Status::Corruption("ListView: size " + std::to_string(bytes.size()) + " but header implies " +
                              std::to_string(want_size));
  }
  if (verify_crc) {
    const uint32_t crc = Crc32c(bytes.data() + sizeof(ListHeader), bytes.size() - sizeof(ListHeader));
    if (crc != h.crc32c) return Status::Corruption("ListView: CRC-32C mismatch");
  }
  v.bytes_ = bytes;
  v.meta_ = reinterpret_cast<const BlockMeta*>(bytes.data() + sizeof(ListHeader));
  v.payload_ = reinterpret_cast<const uint8_t*>(bytes.data()) + sizeof(ListHeader) +
               sizeof(BlockMeta) * static_cast<size_t>(h.num_blocks);
  uint64_t prev_last = 0;
  for (uint32_t j = 0; j < h.num_blocks; ++j) {
    const BlockMeta& m = v.meta_[j];
    const uint32_t want_count = j + 1 < h.num_blocks ? kBlockSize : h.count - (h.num_blocks - 1) * kBlockSize;
    if (m.count != want_count) return Status::Corruption("ListView: block " + std::to_string(j) + " count is wrong");
    if (m.doc_bits > 32 || m.freq_bits > 31) {  // tf - 1 < 2^31: a 32-bit tf - 1 would decode to tf 0
      return Status::Corruption("ListView: block " + std::to_string(j) + " has a width above 32 (31 for tfs)");
    }
    if (m.offset % 4 != 0) return Status::Corruption("ListView: block " + std::to_string(j) + " offset unaligned");
    const uint64_t end =
        static_cast<uint64_t>(m.offset) + PackedBytes(m.count, m.doc_bits) + PackedBytes(m.count, m.freq_bits);
    if (end > h.payload_bytes) {
      return Status::Corruption("ListView: block " + std::to_string(j) + " payload out of range");
    }
    const uint64_t base = j == 0 ? h.base_doc : prev_last + 1;
    // Every value is >= base + position, so the last is at least base + count - 1.
    if (m.last_doc < base + m.count - 1) {
      return Status::Corruption("ListView: block " + std::to_string(j) + " last_doc not increasing");
    }
    prev_last = m.last_doc;
  }
  return v;
}

Status ListView::DecodeDocs(uint32_t j, uint32_t* out) const {
  if (j >= header_.num_blocks) return Status::InvalidArgument("ListView::DecodeDocs: block out of range");
  const BlockMeta& m = meta_[j];
  const auto* in = reinterpret_cast<const uint32_t*>(payload_ + m.offset);
  const uint32_t base = block_base(j);
  if (m.count == kBlockSize && codec_internal::CpuHasAvx2()) {
    codec_internal::DecodeDocsFullAvx2(in, m.doc_bits, base, out);
    // No partial sum can pass 2^32 when base + 128 * 2^bits <= 2^32; otherwise a wrap shows as a
    // value not above its predecessor (each step adds gap + 1 <= 2^32).
    if (static_cast<uint64_t>(base) + (uint64_t{kBlockSize} << m.doc_bits) > (uint64_t{1} << 32)) {
      if (out[0] < base) return Status::Corruption("ListView: docID overflow in block " + std::to_string(j));
      for (uint32_t i = 1; i < kBlockSize; ++i) {
        if (out[i] <= out[i - 1]) return Status::Corruption("ListView: docID overflow in block " + std::to_string(j));
      }
    }
  } else if (!codec_internal::DecodeDocsScalar(in, m.count, m.doc_bits, base, out)) {
    return Status::Corruption("ListView: docID overflow in block " + std::to_string(j));
  }
  if (out[m.count - 1] != m.last_doc) {
    return Status::Corruption("ListView: block " + std::to_string(j) + " decodes to last doc " +
                              std::to_string(out[m.count - 1]) + ", metadata says " + std::to_string(m.last_doc));
  }
  return Status::Ok();
}

void ListView::DecodeFreqs(uint32_t j, uint32_t* out) const {
  if (j >= header_.num_blocks) return;
  const BlockMeta& m = meta_[j];
  const auto* in = reinterpret_cast<const uint32_t*>(payload_ + m.offset + PackedBytes(m.count, m.doc_bits));
  if (m.count == kBlockSize && codec_internal::CpuHasAvx2()) {
    codec_internal::UnpackFullPlusOneAvx2(in, m.freq_bits, out);
  } else {
    UnpackBlockScalar(in, m.count, m.freq_bits, out);
    for (uint32_t i = 0; i < m.count; ++i) out[i] += 1;
  }
}

}  // namespace search
