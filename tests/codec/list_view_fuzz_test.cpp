// Robustness: random byte flips and field rewrites in encoded lists, parsed without the CRC, must
// give an error or a decode that keeps ListView's promises, never a crash or an out-of-bounds read
// (run this under -fsanitize=address,undefined to check the latter).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "codec/block_codec.hpp"

namespace search {
namespace {

std::string RandomList(std::mt19937& rng, uint32_t n, uint32_t base) {
  std::vector<uint32_t> docs(n), tfs(n);
  uint64_t d = base;
  const uint32_t avg = 1u << (rng() % 20);
  for (uint32_t i = 0; i < n; ++i) {
    d += rng() % avg;
    if (d > UINT32_MAX - (n - i)) d = UINT32_MAX - (n - i);
    docs[i] = static_cast<uint32_t>(d++);
    tfs[i] = 1 + (rng() % 4 == 0 ? rng() % kMaxTf : rng() % 8);  // 1 .. kMaxTf
  }
  auto s = EncodeList(docs, tfs, base, [](uint32_t, uint32_t tf) { return static_cast<float>(tf); });
  EXPECT_TRUE(s.ok());
  return *s;
}

// Decodes every block of a parsed list; checks the contract for blocks that decode OK.
void DecodeAll(const ListView& v) {
  uint32_t docs[128 + 8], tfs[128 + 8];
  for (uint32_t j = 0; j < v.num_blocks(); ++j) {
    const BlockMeta& m = v.block(j);
    ASSERT_GE(m.count, 1);
    ASSERT_LE(m.count, 128);
    docs[m.count] = tfs[m.count] = 0xdeadbeef;
    v.DecodeFreqs(j, tfs);
    ASSERT_EQ(tfs[m.count], 0xdeadbeef) << "DecodeFreqs wrote past count";
    Status st = v.DecodeDocs(j, docs);
    ASSERT_EQ(docs[m.count], 0xdeadbeef) << "DecodeDocs wrote past count";
    if (!st.ok()) {
      ASSERT_EQ(st.code(), StatusCode::kCorruption);
      continue;
    }
    ASSERT_GE(docs[0], v.block_base(j));
    for (uint32_t i = 1; i < m.count; ++i) ASSERT_LT(docs[i - 1], docs[i]) << "block " << j;
    ASSERT_EQ(docs[m.count - 1], m.last_doc);
  }
}

TEST(ListViewFuzzTest, ByteFlipsNeverCrash) {
  std::mt19937 rng(2024);
  int parsed = 0, rejected = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const uint32_t n = 1 + rng() % (rng() % 2 ? 140 : 700);
    const uint32_t base = rng() % 2 ? 0 : rng();
    const std::string blob = RandomList(rng, n, base);
    std::vector<uint32_t> words((blob.size() + 3) / 4);
    auto* bytes = reinterpret_cast<uint8_t*>(words.data());
    std::memcpy(bytes, blob.data(), blob.size());
    const int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; ++f) {
      // Bias towards the header and metadata, where a flip changes the structure.
      const size_t limit = rng() % 2 ? std::min<size_t>(blob.size(), 32 + 16 * 6) : blob.size();
      bytes[rng() % limit] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    auto v = ListView::Parse(std::string_view(reinterpret_cast<char*>(bytes), blob.size()), false);
    if (!v.ok()) {
      ASSERT_EQ(v.status().code(), StatusCode::kCorruption) << v.status().ToString();
      ++rejected;
      continue;
    }
    ++parsed;
    DecodeAll(*v);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
  RecordProperty("parsed", parsed);
  RecordProperty("rejected", rejected);
}

TEST(ListViewFuzzTest, RandomFieldValuesNeverCrash) {
  std::mt19937 rng(77);
  int parsed = 0;
  const uint32_t interesting[] = {0, 1, 2, 31, 32, 33, 127, 128, 129, 255, 0x7fffffff, 0x80000000u, UINT32_MAX};
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string blob = RandomList(rng, 1 + rng() % 400, rng() % 3 == 0 ? rng() % 1000 : 0);
    std::vector<uint32_t> words((blob.size() + 3) / 4);
    std::memcpy(words.data(), blob.data(), blob.size());
    // Overwrite one 32-bit word of the header or metadata with an interesting or random value.
    const size_t meta_words = std::min<size_t>(words.size(), 8 + 4 * 4);
    const size_t w = rng() % meta_words;
    words[w] = rng() % 2 ? interesting[rng() % std::size(interesting)] : rng();
    auto v = ListView::Parse(std::string_view(reinterpret_cast<char*>(words.data()), blob.size()), false);
    if (v.ok()) {
      ++parsed;
      DecodeAll(*v);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(parsed, 0);
}

// Well-formed structure (so Parse passes) over random payload bytes, widths and last_docs: the
// decoders run on garbage, including blocks whose 32-bit sums wrap around.
TEST(ListViewFuzzTest, RandomPayloadsNeverCrash) {
  std::mt19937 rng(5);
  int parsed = 0, decoded_ok = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    const uint32_t count = 1 + rng() % 400;
    const uint32_t num_blocks = (count + 127) / 128;
    std::vector<BlockMeta> meta(num_blocks);
    uint64_t payload = 0;
    uint64_t base = rng() % 2 ? 0 : rng() % 0xF0000000u;
    for (uint32_t j = 0; j < num_blocks; ++j) {
      BlockMeta& m = meta[j];
      m.count = static_cast<uint16_t>(j + 1 < num_blocks ? 128 : count - 128 * j);
      m.doc_bits = static_cast<uint8_t>(rng() % 4 == 0 ? 32 : rng() % 33);
      m.freq_bits = static_cast<uint8_t>(rng() % 33);
      m.offset = static_cast<uint32_t>(payload);
      payload += PackedBytes(m.count, m.doc_bits) + PackedBytes(m.count, m.freq_bits);
      const uint64_t lo = base + m.count - 1;
      uint64_t last = lo + (rng() % 3 == 0 ? 0 : rng() % (uint64_t{1} << (rng() % 33)));
      if (last > UINT32_MAX - 128 * (num_blocks - j)) last = std::max(lo, uint64_t{UINT32_MAX} - 128 * (num_blocks - j));
      if (last > UINT32_MAX) last = UINT32_MAX;
      m.last_doc = static_cast<uint32_t>(last);
      m.max_score = 1.0f;
      base = last + 1;
    }
    std::vector<uint32_t> words((32 + 16 * num_blocks + payload) / 4);
    for (size_t w = (32 + 16 * num_blocks) / 4; w < words.size(); ++w) {
      words[w] = rng() % 2 ? rng() : rng() % 4;  // often small gaps, so some blocks decode OK
    }
    ListHeader h{kListMagic, count, num_blocks, meta[0].last_doc >= 200 && rng() % 2 ? meta[0].last_doc - 200 : 0,
                 1.0f,       0,     static_cast<uint32_t>(payload), 0};
    if (h.base_doc + meta[0].count - 1 > meta[0].last_doc) h.base_doc = 0;
    std::memcpy(words.data(), &h, sizeof(h));
    std::memcpy(words.data() + 8, meta.data(), 16 * num_blocks);
    auto v = ListView::Parse(std::string_view(reinterpret_cast<char*>(words.data()), 4 * words.size()), false);
    if (!v.ok()) continue;
    ++parsed;
    DecodeAll(*v);
    if (HasFatalFailure()) return;
    uint32_t out[128];
    for (uint32_t j = 0; j < v->num_blocks(); ++j) decoded_ok += v->DecodeDocs(j, out).ok();
  }
  EXPECT_GT(parsed, 1000);
  RecordProperty("parsed", parsed);
  RecordProperty("decoded_ok", decoded_ok);
}

}  // namespace
}  // namespace search
