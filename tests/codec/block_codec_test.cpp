// EncodeList and ListView: round trips against the input, the metadata and block-max contract,
// EncodeList's argument checks, and Parse/DecodeDocs rejecting each kind of malformed blob.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "codec/block_codec.hpp"

namespace search {
namespace {

struct Postings {
  std::vector<uint32_t> docs, tfs;
};

// `n` docs above `base` with random gaps averaging `avg_gap`; tfs in 1..max_tf.
Postings RandomPostings(std::mt19937& rng, uint32_t n, uint32_t base, uint32_t avg_gap, uint32_t max_tf) {
  Postings p;
  uint64_t d = base;
  for (uint32_t i = 0; i < n; ++i) {
    d += avg_gap == 0 ? 0 : rng() % (2 * avg_gap + 1);
    p.docs.push_back(static_cast<uint32_t>(d));
    p.tfs.push_back(1 + rng() % max_tf);
    ++d;
  }
  return p;
}

float TestScore(uint32_t doc, uint32_t tf) { return static_cast<float>(tf) + static_cast<float>(doc % 97) / 128.0f; }

// Decodes every block and checks docs, tfs and each block's metadata against the input.
void ExpectRoundTrip(const Postings& p, uint32_t base) {
  auto blob = EncodeList(p.docs, p.tfs, base, TestScore);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  auto view = ListView::Parse(*blob);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  const auto n = static_cast<uint32_t>(p.docs.size());
  ASSERT_EQ(view->count(), n);
  ASSERT_EQ(view->num_blocks(), (n + 127) / 128);
  ASSERT_EQ(view->base_doc(), base);
  uint32_t docs[128], tfs[128];
  float list_max = 0;
  size_t k = 0;
  for (uint32_t j = 0; j < view->num_blocks(); ++j) {
    const BlockMeta& m = view->block(j);
    ASSERT_EQ(m.count, std::min<uint32_t>(128, n - j * 128));
    ASSERT_EQ(view->block_base(j), j == 0 ? base : p.docs[j * 128 - 1] + 1);
    ASSERT_TRUE(view->DecodeDocs(j, docs).ok());
    view->DecodeFreqs(j, tfs);
    float block_max = 0;
    for (uint32_t i = 0; i < m.count; ++i, ++k) {
      ASSERT_EQ(docs[i], p.docs[k]) << "block " << j << " value " << i;
      ASSERT_EQ(tfs[i], p.tfs[k]) << "block " << j << " value " << i;
      block_max = std::max(block_max, TestScore(p.docs[k], p.tfs[k]));
    }
    ASSERT_EQ(m.last_doc, p.docs[k - 1]);
    ASSERT_EQ(m.max_score, block_max);
    ASSERT_EQ(m.offset % (m.count == 128 ? 16 : 4), 0u);
    list_max = std::max(list_max, block_max);
  }
  ASSERT_EQ(k, p.docs.size());
  ASSERT_EQ(view->max_score(), list_max);
}

TEST(BlockCodecTest, RoundTripsAtBlockBoundaries) {
  std::mt19937 rng(1);
  for (uint32_t n : {1u, 2u, 127u, 128u, 129u, 255u, 256u, 257u, 1000u}) {
    for (uint32_t avg_gap : {0u, 1u, 13u, 1000u, 1u << 20}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " gap=" + std::to_string(avg_gap));
      ExpectRoundTrip(RandomPostings(rng, n, 0, avg_gap, 3), 0);
      ExpectRoundTrip(RandomPostings(rng, n, 12345, avg_gap, 200), 12345);  // base_doc > 0
      ExpectRoundTrip(RandomPostings(rng, n, 12345, avg_gap, 1), 12000);     // docs[0] > base_doc
    }
  }
}

TEST(BlockCodecTest, RoundTripsAMillionPostings) {
  std::mt19937 rng(2);
  ExpectRoundTrip(RandomPostings(rng, 1000000, 77, 3, 30), 77);
}

TEST(BlockCodecTest, TfOneMeansWidthZeroAndDenseMeansDocWidthZero) {
  std::vector<uint32_t> docs(300), tfs(300, 1);
  for (uint32_t i = 0; i < 300; ++i) docs[i] = 500 + i;
  auto blob = EncodeList(docs, tfs, 500, nullptr);
  ASSERT_TRUE(blob.ok());
  auto view = ListView::Parse(*blob);
  ASSERT_TRUE(view.ok());
  // Consecutive docs from base_doc: every gap is 0, so both widths are 0 and the payload is empty.
  EXPECT_EQ(blob->size(), sizeof(ListHeader) + 3 * sizeof(BlockMeta));
  uint32_t out[128];
  for (uint32_t j = 0; j < 3; ++j) {
    EXPECT_EQ(view->block(j).doc_bits, 0);
    EXPECT_EQ(view->block(j).freq_bits, 0);
    EXPECT_EQ(view->block(j).max_score, 0.0f);  // no scorer given
    ASSERT_TRUE(view->DecodeDocs(j, out).ok());
    for (uint32_t i = 0; i < view->block(j).count; ++i) ASSERT_EQ(out[i], 500 + 128 * j + i);
    view->DecodeFreqs(j, out);
    for (uint32_t i = 0; i < view->block(j).count; ++i) ASSERT_EQ(out[i], 1u);
  }
}

TEST(BlockCodecTest, DocIdsNearTheTopOfTheRange) {
  // Huge gaps (2^32 - 2 and friends) and lists that end exactly at UINT32_MAX.
  ExpectRoundTrip({{0, UINT32_MAX}, {1, kMaxTf}}, 0);
  ExpectRoundTrip({{UINT32_MAX}, {7}}, 0);
  ExpectRoundTrip({{UINT32_MAX}, {7}}, UINT32_MAX);
  for (uint32_t n : {1u, 127u, 128u, 129u, 300u}) {
    Postings p;
    for (uint32_t i = 0; i < n; ++i) p.docs.push_back(UINT32_MAX - (n - 1 - i));
    p.tfs.assign(n, kMaxTf);      // tf - 1 at width 31, the widest
    ExpectRoundTrip(p, 0);         // the first gap is ~2^32: width 32
    ExpectRoundTrip(p, p.docs[0]);
  }
  Postings p;  // one giant gap inside a full block, the rest tiny
  for (uint32_t i = 0; i < 256; ++i) p.docs.push_back(i < 100 ? i : UINT32_MAX - (255 - i));
  p.tfs.assign(256, 2);
  ExpectRoundTrip(p, 0);
}

TEST(BlockCodecTest, EncodeListRejectsBadInput) {
  const std::vector<uint32_t> empty;
  std::vector<uint32_t> docs = {3, 5, 9}, tfs = {1, 1, 1};
  EXPECT_EQ(EncodeList(empty, empty, 0, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeList(docs, std::span(tfs).first(2), 0, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeList(docs, tfs, 4, nullptr).status().code(), StatusCode::kInvalidArgument);  // doc < base
  EXPECT_TRUE(EncodeList(docs, tfs, 3, nullptr).ok());
  auto bad = docs;
  bad[2] = 5;  // repeated
  EXPECT_EQ(EncodeList(bad, tfs, 0, nullptr).status().code(), StatusCode::kInvalidArgument);
  bad[2] = 4;  // decreasing
  EXPECT_EQ(EncodeList(bad, tfs, 0, nullptr).status().code(), StatusCode::kInvalidArgument);
  auto bad_tfs = tfs;
  bad_tfs[1] = 0;
  EXPECT_EQ(EncodeList(docs, bad_tfs, 0, nullptr).status().code(), StatusCode::kInvalidArgument);
}

// Blob helpers: the bytes live in a uint32_t vector so they are 4-byte aligned.
struct Blob {
  std::vector<uint32_t> words;
  size_t size = 0;
  explicit Blob(const std::string& s) : words((s.size() + 3) / 4), size(s.size()) { std::memcpy(words.data(), s.data(), s.size()); }
  char* data() { return reinterpret_cast<char*>(words.data()); }
  std::string_view view(size_t n) const { return {reinterpret_cast<const char*>(words.data()), n}; }
  std::string_view view() const { return view(size); }
  ListHeader& header() { return *reinterpret_cast<ListHeader*>(data()); }
  BlockMeta& meta(uint32_t j) { return reinterpret_cast<BlockMeta*>(data() + sizeof(ListHeader))[j]; }
  void FixCrc() { header().crc32c = Crc32c(data() + sizeof(ListHeader), size - sizeof(ListHeader)); }
  StatusCode ParseCode(bool verify_crc = true) const { return ListView::Parse(view(), verify_crc).status().code(); }
};

Blob ThreeBlockBlob() {
  std::mt19937 rng(9);
  auto p = RandomPostings(rng, 300, 10, 50, 9);
  auto s = EncodeList(p.docs, p.tfs, 10, TestScore);
  EXPECT_TRUE(s.ok());
  return Blob(*s);
}

TEST(ListViewTest, RejectsEveryTruncation) {
  Blob b = ThreeBlockBlob();
  ASSERT_EQ(b.ParseCode(), StatusCode::kOk);
  for (size_t n = 0; n < b.size; ++n) {
    for (bool crc : {true, false}) {
      auto v = ListView::Parse(b.view(n), crc);
      ASSERT_FALSE(v.ok()) << "truncated to " << n;
      ASSERT_EQ(v.status().code(), StatusCode::kCorruption) << n;
    }
  }
}

TEST(ListViewTest, RejectsMisalignedInput) {
  Blob b = ThreeBlockBlob();
  for (size_t shift : {1, 2, 3}) {
    std::vector<uint32_t> storage(b.words.size() + 1);
    char* p = reinterpret_cast<char*>(storage.data()) + shift;
    std::memcpy(p, b.data(), b.size);
    auto v = ListView::Parse(std::string_view(p, b.size));
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument) << shift;
  }
}

TEST(ListViewTest, RejectsBadHeaderFields) {
  {
    Blob b = ThreeBlockBlob();
    b.header().magic ^= 1;
    b.FixCrc();
    EXPECT_EQ(b.ParseCode(), StatusCode::kCorruption);
  }
  {
    Blob b = ThreeBlockBlob();
    b.header().reserved = 1;
    EXPECT_EQ(b.ParseCode(false), StatusCode::kCorruption);
  }
  for (uint32_t count : {0u, 1u, 256u, 257u, 385u, UINT32_MAX}) {
    Blob b = ThreeBlockBlob();
    b.header().count = count;  // 300 -> 3 blocks; 257 keeps 3 blocks but a wrong last count
    EXPECT_EQ(b.ParseCode(false), StatusCode::kCorruption) << count;
  }
  for (uint32_t nb : {0u, 2u, 4u, UINT32_MAX}) {
    Blob b = ThreeBlockBlob();
    b.header().num_blocks = nb;
    EXPECT_EQ(b.ParseCode(false), StatusCode::kCorruption) << nb;
  }
  for (int delta : {-4, 4, 1 << 30}) {
    Blob b = ThreeBlockBlob();
    b.header().payload_bytes += delta;
    EXPECT_EQ(b.ParseCode(false), StatusCode::kCorruption) << delta;
  }
}

TEST(ListViewTest, CrcCoversMetadataAndPayload) {
  Blob b = ThreeBlockBlob();
  for (size_t pos = sizeof(ListHeader); pos < b.size; pos += 7) {
    Blob c = b;
    c.data()[pos] ^= 0x10;
    EXPECT_EQ(c.ParseCode(true), StatusCode::kCorruption) << pos;
  }
  Blob c = b;
  c.header().crc32c ^= 1;
  EXPECT_EQ(c.ParseCode(true), StatusCode::kCorruption);
  EXPECT_EQ(c.ParseCode(false), StatusCode::kOk);
}

TEST(ListViewTest, RejectsBadBlockMetadata) {
  auto expect_bad = [](const char* what, auto mutate) {
    Blob b = ThreeBlockBlob();
    mutate(b);
    b.FixCrc();
    EXPECT_EQ(b.ParseCode(), StatusCode::kCorruption) << what;
  };
  expect_bad("doc width 33", [](Blob& b) { b.meta(1).doc_bits = 33; });
  expect_bad("freq width 255", [](Blob& b) { b.meta(2).freq_bits = 255; });
  // tf - 1 at width 32 could hold 2^32 - 1, which decodes to tf 0 (found by fuzz/block_codec).
  expect_bad("freq width 32", [](Blob& b) { b.meta(2).freq_bits = 32; });
  expect_bad("offset past payload", [](Blob& b) { b.meta(2).offset = b.header().payload_bytes; });
  expect_bad("offset huge", [](Blob& b) { b.meta(0).offset = UINT32_MAX - 3; });
  expect_bad("offset unaligned", [](Blob& b) { b.meta(1).offset += 2; });
  expect_bad("width pushes block past payload", [](Blob& b) { b.meta(2).doc_bits = 32; });
  expect_bad("last_doc equal", [](Blob& b) { b.meta(1).last_doc = b.meta(0).last_doc; });
  expect_bad("last_doc decreasing", [](Blob& b) { b.meta(2).last_doc = b.meta(1).last_doc - 1; });
  expect_bad("last_doc too small for count", [](Blob& b) { b.meta(1).last_doc = b.meta(0).last_doc + 100; });
  expect_bad("first last_doc below base", [](Blob& b) { b.meta(0).last_doc = 5; });
  expect_bad("full block count", [](Blob& b) { b.meta(0).count = 127; });
  expect_bad("last block count", [](Blob& b) { b.meta(2).count = 45; });
}

TEST(ListViewTest, DecodeDocsChecksLastDoc) {
  Blob b = ThreeBlockBlob();
  b.meta(1).last_doc += 1;  // still monotonic and plausible; the payload disagrees
  b.FixCrc();
  auto v = ListView::Parse(b.view());
  ASSERT_TRUE(v.ok());
  uint32_t out[128];
  EXPECT_TRUE(v->DecodeDocs(0, out).ok());
  EXPECT_EQ(v->DecodeDocs(1, out).code(), StatusCode::kCorruption);  // full block, AVX2 path
  // Block 2's base moved up by one with block 1's last_doc, so its decode ends one past its own.
  EXPECT_EQ(v->DecodeDocs(2, out).code(), StatusCode::kCorruption);  // short block, scalar path
  EXPECT_EQ(v->DecodeDocs(3, out).code(), StatusCode::kInvalidArgument);
}

// A block whose 32-bit gaps wrap past 2^32 yet land exactly on last_doc must be rejected.
TEST(ListViewTest, DecodeDocsDetectsWrapAround) {
  for (uint32_t n : {128u, 5u}) {
    std::vector<uint32_t> docs(n), tfs(n, 1);
    docs[0] = 0x80000000u;  // first gap 2^31: width 32
    for (uint32_t i = 1; i < n; ++i) docs[i] = docs[i - 1] + 1000;
    auto s = EncodeList(docs, tfs, 0, nullptr);
    ASSERT_TRUE(s.ok());
    Blob b(*s);
    ASSERT_EQ(b.meta(0).doc_bits, 32);
    // Rewrite the gaps: [2^32 - 1, 0, ...]: doc[0] = 2^32 - 1, doc[1] wraps to 0, ... and the last
    // value is adjusted so that the 32-bit sum equals last_doc.
    std::vector<uint32_t> gaps(n, 0);
    gaps[0] = UINT32_MAX;
    const uint32_t last = b.meta(0).last_doc;
    // 32-bit: last = (2^32 - 1) + (n - 1) + g  (mod 2^32)  =>  g = last - n + 2
    gaps[n - 1] = last - n + 2;
    auto* payload = reinterpret_cast<uint32_t*>(b.data() + sizeof(ListHeader) + sizeof(BlockMeta));
    PackBlock(gaps.data(), n, 32, payload);
    b.FixCrc();
    auto v = ListView::Parse(b.view());
    ASSERT_TRUE(v.ok());
    uint32_t out[128];
    EXPECT_EQ(v->DecodeDocs(0, out).code(), StatusCode::kCorruption) << n;
  }
}

}  // namespace
TEST(BlockCodecTest, TfAboveTheMaximumIsRefused) {
  const std::vector<uint32_t> docs = {1, 2}, bad = {1, kMaxTf + 1}, good = {1, kMaxTf};
  EXPECT_EQ(EncodeList(docs, bad, 0, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(EncodeList(docs, good, 0, nullptr).ok());
}

}  // namespace search
