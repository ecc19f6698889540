// Fuzz target: the posting-list decoder (codec/block_codec.hpp, codec/FORMAT.md) on arbitrary
// bytes. Each input is parsed twice:
//   1. as is (with and without the CRC), and
//   2. "repaired": magic, reserved, num_blocks, payload_bytes and the CRC rewritten to agree with
//      the input's count and size, so that mutations reach the block metadata and payloads instead
//      of dying on the header checks.
// When Parse accepts, every block is decoded; the result is checked against FORMAT.md's promises
// (docIDs strictly increasing, at least block_base, ending on last_doc; tf >= 1; nothing written
// past count) and against an independent scalar reference decoder: DecodeDocs succeeds exactly
// when the reference finds the block consistent, with the same values. The AVX2 and scalar
// unpackers must agree on every block, and a list that decodes entirely must re-encode
// (EncodeList) to a blob that decodes to the same postings.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "bitpack_internal.hpp"  // codec/src: the scalar/AVX2 kernels, to check one against the other
#include "codec/block_codec.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace search;  // NOLINT: a fuzz target over one API

constexpr uint32_t kSentinel = 0xdeadbeef;

// A 4-byte aligned copy of the bytes, as ListView requires (owned by a vector of words).
class AlignedBytes {
 public:
  AlignedBytes(const uint8_t* data, size_t size) : words_((size + 3) / 4 + 1), size_(size) {
    if (size > 0) std::memcpy(words_.data(), data, size);
  }
  std::string_view view() const { return {reinterpret_cast<const char*>(words_.data()), size_}; }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words_.data()); }
  size_t size() const { return size_; }

 private:
  std::vector<uint32_t> words_;
  size_t size_;
};

// FORMAT.md's docID rule, computed in 64 bits: false when a value passes 2^32 - 1 or the block
// does not end on last_doc.
bool ReferenceDocs(const ListView& v, uint32_t j, uint32_t* out) {
  const BlockMeta& m = v.block(j);
  const auto* in = reinterpret_cast<const uint32_t*>(v.payload() + m.offset);
  uint32_t gaps[kBlockSize];
  UnpackBlockScalar(in, m.count, m.doc_bits, gaps);
  uint64_t doc = v.block_base(j);
  for (uint32_t i = 0; i < m.count; ++i) {
    doc += gaps[i] + (i > 0 ? 1u : 0u);
    if (doc > UINT32_MAX) return false;
    out[i] = static_cast<uint32_t>(doc);
  }
  return out[m.count - 1] == m.last_doc;
}

void CheckUnpackersAgree(const uint32_t* in, uint32_t n, uint32_t bits) {
  uint32_t a[kBlockSize + 1], b[kBlockSize + 1];
  a[n] = b[n] = kSentinel;
  UnpackBlockScalar(in, n, bits, a);
  UnpackBlock(in, n, bits, b);
  FUZZ_CHECK(a[n] == kSentinel && b[n] == kSentinel);
  FUZZ_CHECK(std::memcmp(a, b, n * sizeof(uint32_t)) == 0);
  const uint32_t mask = bits >= 32 ? UINT32_MAX : (1u << bits) - 1;
  for (uint32_t i = 0; i < n; ++i) FUZZ_CHECK((a[i] & ~mask) == 0);
  if (n == kBlockSize && codec_internal::CpuHasAvx2()) {
    uint32_t c[kBlockSize + 1];
    c[n] = kSentinel;
    codec_internal::UnpackFullPlusOneAvx2(in, bits, c);
    FUZZ_CHECK(c[n] == kSentinel);
    for (uint32_t i = 0; i < n; ++i) FUZZ_CHECK(c[i] == a[i] + 1);
  }
}

// Decodes every block of a parsed view and checks it; returns true (with all postings) when
// every block decoded.
bool DecodeAll(const ListView& v, std::vector<uint32_t>* docs, std::vector<uint32_t>* tfs) {
  FUZZ_CHECK(v.count() >= 1 && v.num_blocks() == (v.count() + kBlockSize - 1) / kBlockSize);
  bool all_ok = true;
  uint64_t prev_last = 0;
  for (uint32_t j = 0; j < v.num_blocks(); ++j) {
    const BlockMeta& m = v.block(j);
    FUZZ_CHECK(m.count >= 1 && m.count <= kBlockSize);
    FUZZ_CHECK(j + 1 == v.num_blocks() || m.count == kBlockSize);
    FUZZ_CHECK(m.doc_bits <= 32 && m.freq_bits <= 31 && m.offset % 4 == 0);  // tf - 1 < 2^31
    const uint64_t end = uint64_t{m.offset} + PackedBytes(m.count, m.doc_bits) + PackedBytes(m.count, m.freq_bits);
    FUZZ_CHECK(v.payload() + end <= reinterpret_cast<const uint8_t*>(v.bytes().data()) + v.bytes().size());
    FUZZ_CHECK(j == 0 || m.last_doc > prev_last);
    prev_last = m.last_doc;

    const auto* doc_words = reinterpret_cast<const uint32_t*>(v.payload() + m.offset);
    const auto* freq_words = reinterpret_cast<const uint32_t*>(v.payload() + m.offset + PackedBytes(m.count, m.doc_bits));
    CheckUnpackersAgree(doc_words, m.count, m.doc_bits);
    CheckUnpackersAgree(freq_words, m.count, m.freq_bits);

    uint32_t got[kBlockSize + 1], ref[kBlockSize];
    got[m.count] = kSentinel;
    const Status st = v.DecodeDocs(j, got);
    FUZZ_CHECK(got[m.count] == kSentinel);
    const bool ref_ok = ReferenceDocs(v, j, ref);
    FUZZ_CHECK_MSG(st.ok() == ref_ok, "block " + std::to_string(j) + ": " + st.ToString());
    if (!st.ok()) {
      FUZZ_CHECK(st.code() == StatusCode::kCorruption);
      all_ok = false;
    } else {
      FUZZ_CHECK(std::memcmp(got, ref, m.count * sizeof(uint32_t)) == 0);
      FUZZ_CHECK(got[0] >= v.block_base(j));
      for (uint32_t i = 1; i < m.count; ++i) FUZZ_CHECK(got[i] > got[i - 1]);
      FUZZ_CHECK(got[m.count - 1] == m.last_doc);
    }

    uint32_t f[kBlockSize + 1], raw[kBlockSize];
    f[m.count] = kSentinel;
    v.DecodeFreqs(j, f);
    FUZZ_CHECK(f[m.count] == kSentinel);
    UnpackBlockScalar(freq_words, m.count, m.freq_bits, raw);
    for (uint32_t i = 0; i < m.count; ++i) {
      FUZZ_CHECK(f[i] == raw[i] + 1);  // modulo 2^32
      FUZZ_CHECK_MSG(f[i] >= 1, "block " + std::to_string(j) + " posting " + std::to_string(i) + ": tf 0");
    }
    if (st.ok()) {
      docs->insert(docs->end(), got, got + m.count);
      tfs->insert(tfs->end(), f, f + m.count);
    }
  }
  return all_ok;
}

void CheckReencode(const ListView& v, const std::vector<uint32_t>& docs, const std::vector<uint32_t>& tfs) {
  auto blob = EncodeList(docs, tfs, v.base_doc(), nullptr);
  FUZZ_CHECK_MSG(blob.ok(), blob.status().ToString());
  AlignedBytes copy(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
  auto w = ListView::Parse(copy.view(), /*verify_crc=*/true);
  FUZZ_CHECK_MSG(w.ok(), w.status().ToString());
  FUZZ_CHECK(w->count() == v.count() && w->base_doc() == v.base_doc());
  std::vector<uint32_t> docs2, tfs2;
  FUZZ_CHECK(DecodeAll(*w, &docs2, &tfs2));
  FUZZ_CHECK(docs2 == docs && tfs2 == tfs);
}

void ParseAndDecode(std::string_view bytes) {
  auto with_crc = ListView::Parse(bytes, /*verify_crc=*/true);
  auto v = ListView::Parse(bytes, /*verify_crc=*/false);
  if (!v.ok()) {
    FUZZ_CHECK(v.status().code() == StatusCode::kCorruption);
    FUZZ_CHECK(!with_crc.ok());
    return;
  }
  if (!with_crc.ok()) FUZZ_CHECK(with_crc.status().code() == StatusCode::kCorruption);
  std::vector<uint32_t> docs, tfs;
  if (DecodeAll(*v, &docs, &tfs)) {
    FUZZ_CHECK(docs.size() == v->count());
    for (size_t i = 1; i < docs.size(); ++i) FUZZ_CHECK(docs[i] > docs[i - 1]);
    FUZZ_CHECK(docs[0] >= v->base_doc());
    CheckReencode(*v, docs, tfs);
  }
}

// Rewrites the header fields that Parse checks against the size, so the rest is what varies.
void Repair(AlignedBytes* b) {
  if (b->size() < sizeof(ListHeader)) return;
  ListHeader h;
  std::memcpy(&h, b->bytes(), sizeof(h));
  h.magic = kListMagic;
  h.reserved = 0;
  if (h.count == 0) h.count = 1;
  h.num_blocks = static_cast<uint32_t>((uint64_t{h.count} + kBlockSize - 1) / kBlockSize);
  const uint64_t meta_end = sizeof(ListHeader) + uint64_t{sizeof(BlockMeta)} * h.num_blocks;
  if (meta_end > b->size()) {
    // Too few bytes for that many blocks: shrink count to the blocks that fit.
    const uint64_t blocks = (b->size() - sizeof(ListHeader)) / sizeof(BlockMeta);
    if (blocks == 0) return;
    h.count = static_cast<uint32_t>(std::min<uint64_t>(h.count, blocks * kBlockSize));
    h.num_blocks = static_cast<uint32_t>((uint64_t{h.count} + kBlockSize - 1) / kBlockSize);
  }
  h.payload_bytes =
      static_cast<uint32_t>(b->size() - sizeof(ListHeader) - uint64_t{sizeof(BlockMeta)} * h.num_blocks);
  h.crc32c = Crc32c(b->bytes() + sizeof(ListHeader), b->size() - sizeof(ListHeader));
  std::memcpy(b->bytes(), &h, sizeof(h));
  auto v = ListView::Parse(b->view(), /*verify_crc=*/true);
  if (!v.ok()) {
    FUZZ_CHECK(v.status().code() == StatusCode::kCorruption);
    // Only the per-block checks can refuse a repaired header.
    FUZZ_CHECK_MSG(v.status().message().rfind("ListView: block ", 0) == 0, v.status().message());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 20)) return 0;
  AlignedBytes raw(data, size);
  ParseAndDecode(raw.view());

  // Misaligned bytes are refused, never read.
  if (size > 0) {
    std::vector<uint32_t> words(size / 4 + 2);
    auto* p = reinterpret_cast<char*>(words.data()) + 1;
    std::memcpy(p, data, size);
    auto v = ListView::Parse(std::string_view(p, size));
    FUZZ_CHECK(!v.ok() && v.status().code() == StatusCode::kInvalidArgument);
  }

  AlignedBytes repaired(data, size);
  Repair(&repaired);
  ParseAndDecode(repaired.view());
  return 0;
}
