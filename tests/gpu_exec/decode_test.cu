// GPU list decoding (gpu_exec/decode.hpp) against the CPU decoder (ListView::DecodeDocs/DecodeFreqs):
// odd list sizes and partial last blocks, every gap width 0..32 and tf width 0..31, every supported tuning, the
// block-subset variant, and corruption (metadata and payload edits) reported as a Status.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/decode.hpp"

namespace search::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!GpuAvailable()) GTEST_SKIP() << "no GPU: " << GpuDescription()

// An encoded list in 4-byte aligned host memory plus its parsed view.
struct HostList {
  std::vector<uint32_t> docs, tfs;
  std::vector<uint32_t> words;  // the blob
  size_t bytes = 0;
  ListView view;
};

HostList Encode(std::vector<uint32_t> docs, std::vector<uint32_t> tfs, uint32_t base_doc) {
  HostList h;
  h.docs = std::move(docs);
  h.tfs = std::move(tfs);
  auto blob = EncodeList(h.docs, h.tfs, base_doc, nullptr);
  EXPECT_TRUE(blob.ok()) << blob.status().ToString();
  if (!blob.ok()) return h;
  h.bytes = blob->size();
  h.words.resize((h.bytes + 3) / 4);
  std::memcpy(h.words.data(), blob->data(), h.bytes);
  auto v = ListView::Parse(std::string_view(reinterpret_cast<const char*>(h.words.data()), h.bytes));
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  if (v.ok()) h.view = *v;
  return h;
}

// Gaps uniform in [0, 2 * avg_gap], tfs geometric-ish in 1.. .
HostList RandomList(uint32_t n, uint32_t avg_gap, uint32_t seed, uint32_t base_doc = 0) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> docs(n), tfs(n);
  uint64_t d = base_doc;
  for (uint32_t i = 0; i < n; ++i) {
    d += rng() % (2ull * avg_gap + 1);
    docs[i] = static_cast<uint32_t>(d++);
    uint32_t tf = 1;
    while (tf < 1000 && rng() % 3 == 0) ++tf;
    tfs[i] = tf;
  }
  return Encode(std::move(docs), std::move(tfs), base_doc);
}

// A list whose blocks use docID gap width up to `bits` and tf-1 width up to `freq_bits`: for
// bits <= 20 all gaps are uniform in [0, 2^bits); above that gaps are small except some of width
// exactly `bits`, as many as the 32-bit docID space allows.
HostList WidthList(uint32_t n, uint32_t bits, uint32_t freq_bits, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t mask = bits == 0 ? 0 : (bits == 32 ? 0xffffffffull : (1ull << bits) - 1);
  const uint64_t fmask = freq_bits == 0 ? 0 : (1ull << freq_bits) - 1;  // freq_bits <= 31
  std::vector<uint32_t> docs(n), tfs(n);
  uint64_t d = 0;  // next free docID
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t gap;
    if (bits <= 20) {
      gap = rng() & mask;
    } else {
      gap = rng() & 0xff;
      const uint64_t big = (rng() & (mask >> 1)) | (1ull << (bits - 1));  // width exactly `bits`
      const int64_t room_signed = int64_t{0xffffffff} - static_cast<int64_t>(d) - int64_t{n - 1 - i} * 257;
      const uint64_t room = room_signed > 0 ? static_cast<uint64_t>(room_signed) : 0;  // keep space for the rest
      if (i == 0) {
        gap = std::min(big, room);  // room >= 2^31 here, so the width stays `bits`
      } else if (rng() % 16 == 0 && big <= room) {
        gap = big;
      }
    }
    d += gap;
    docs[i] = static_cast<uint32_t>(d++);
    tfs[i] = static_cast<uint32_t>(std::min<uint64_t>((rng() & fmask) + 1, 0xffffffffull));
  }
  return Encode(std::move(docs), std::move(tfs), 0);
}

struct DeviceList {
  DeviceBuffer blob;
  DeviceBuffer docs, tfs, error;
};

Status Upload(const HostList& h, uint32_t out_entries, DeviceList& d) {
  SEARCH_ASSIGN_OR_RETURN(d.blob, DeviceBuffer::Allocate(h.bytes));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.blob.get(), h.words.data(), h.bytes, cudaMemcpyHostToDevice));
  SEARCH_ASSIGN_OR_RETURN(d.docs, DeviceBuffer::Allocate(4ull * std::max<uint32_t>(out_entries, 1)));
  SEARCH_ASSIGN_OR_RETURN(d.tfs, DeviceBuffer::Allocate(4ull * std::max<uint32_t>(out_entries, 1)));
  SEARCH_ASSIGN_OR_RETURN(d.error, DeviceBuffer::Allocate(4));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemset(d.docs.get(), 0xab, d.docs.size()));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemset(d.tfs.get(), 0xab, d.tfs.size()));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemset(d.error.get(), 0, 4));
  return Status::Ok();
}

std::vector<uint32_t> Download(const DeviceBuffer& b, size_t n) {
  std::vector<uint32_t> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), b.get(), 4 * n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// First mismatch between expected and got, with the block and its metadata.
std::string FirstMismatch(const HostList& h, const std::vector<uint32_t>& want, const std::vector<uint32_t>& got) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) {
      const uint32_t j = static_cast<uint32_t>(i / kBlockSize);
      const BlockMeta& m = h.view.block(j);
      std::ostringstream os;
      os << "index " << i << " (block " << j << " value " << i % kBlockSize << "): want " << want[i] << " got "
         << got[i] << "; block count=" << m.count << " doc_bits=" << int{m.doc_bits}
         << " freq_bits=" << int{m.freq_bits} << " offset=" << m.offset << " last_doc=" << m.last_doc
         << " base=" << h.view.block_base(j);
      return os.str();
    }
  }
  return "";
}

// Decodes the whole list on the GPU (docs + tfs, and docs alone) and compares with the CPU.
void CheckWholeList(const HostList& h, const DecodeTuning& tuning = {}) {
  ASSERT_GT(h.view.count(), 0u);
  DeviceList d;
  ASSERT_TRUE(Upload(h, h.view.count(), d).ok());
  const auto* d_blob = d.blob.as<const uint8_t>();
  ASSERT_TRUE(DecodeListGpu(d_blob, h.view, d.docs.as<uint32_t>(), d.tfs.as<uint32_t>(), d.error.as<uint32_t>(),
                            nullptr, tuning)
                  .ok());
  const Status st = CheckDecodeError(d.error.as<uint32_t>(), nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString() << " tuning " << tuning.ToString();
  const auto docs = Download(d.docs, h.view.count());
  const auto tfs = Download(d.tfs, h.view.count());
  // The CPU reference through ListView, block by block (also checks the encoder round trip).
  std::vector<uint32_t> want_docs(h.view.count()), want_tfs(h.view.count());
  for (uint32_t j = 0; j < h.view.num_blocks(); ++j) {
    ASSERT_TRUE(h.view.DecodeDocs(j, want_docs.data() + size_t{j} * kBlockSize).ok());
    h.view.DecodeFreqs(j, want_tfs.data() + size_t{j} * kBlockSize);
  }
  ASSERT_EQ(want_docs, h.docs);
  ASSERT_EQ(want_tfs, h.tfs);
  EXPECT_TRUE(docs == want_docs) << "docs, tuning " << tuning.ToString() << ": " << FirstMismatch(h, want_docs, docs);
  EXPECT_TRUE(tfs == want_tfs) << "tfs, tuning " << tuning.ToString() << ": " << FirstMismatch(h, want_tfs, tfs);

  // Docs only (d_tfs == nullptr) into a fresh buffer.
  ASSERT_EQ(cudaMemset(d.docs.get(), 0, d.docs.size()), cudaSuccess);
  ASSERT_TRUE(
      DecodeListGpu(d_blob, h.view, d.docs.as<uint32_t>(), nullptr, d.error.as<uint32_t>(), nullptr, tuning).ok());
  ASSERT_TRUE(CheckDecodeError(d.error.as<uint32_t>(), nullptr).ok());
  const auto docs2 = Download(d.docs, h.view.count());
  EXPECT_TRUE(docs2 == want_docs) << "docs only: " << FirstMismatch(h, want_docs, docs2);
}

TEST(DecodeGpuTest, OddSizes) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (uint32_t n : {1u, 2u, 31u, 127u, 128u, 129u, 255u, 256u, 257u, 1000u, 4095u, 100003u}) {
    for (uint32_t avg_gap : {0u, 1u, 7u, 100u, 5000u}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " avg_gap=" + std::to_string(avg_gap));
      ++seed;
      CheckWholeList(RandomList(n, avg_gap, seed, /*base_doc=*/seed % 3 == 0 ? 0 : 1000 + seed));
    }
  }
}

TEST(DecodeGpuTest, AllWidths) {
  SKIP_WITHOUT_GPU();
  for (uint32_t bits = 0; bits <= 32; ++bits) {
    for (uint32_t n : {5u * 128u + 37u, 3u * 128u, 77u}) {
      const uint32_t freq_bits = (bits * 7 + 3) % 32;  // tf - 1 widths 0..31 (kMaxTf)
      SCOPED_TRACE("bits=" + std::to_string(bits) + " freq_bits=" + std::to_string(freq_bits) +
                   " n=" + std::to_string(n));
      const HostList h = WidthList(n, bits, freq_bits, 100 + bits * 3 + n);
      uint32_t max_bits = 0, max_fbits = 0;
      for (uint32_t j = 0; j < h.view.num_blocks(); ++j) {
        max_bits = std::max<uint32_t>(max_bits, h.view.block(j).doc_bits);
        max_fbits = std::max<uint32_t>(max_fbits, h.view.block(j).freq_bits);
      }
      EXPECT_EQ(max_bits, bits);  // the list really exercises this width
      EXPECT_EQ(max_fbits, freq_bits);
      CheckWholeList(h);
    }
  }
}

TEST(DecodeGpuTest, MaxDocIdAndBaseDoc) {
  SKIP_WITHOUT_GPU();
  // Ends exactly at 2^32 - 1 (a 32-bit gap in the last full block), and a list starting at doc 0.
  std::vector<uint32_t> docs(128), tfs(128, 1);
  for (uint32_t i = 0; i < 127; ++i) docs[i] = i;
  docs[127] = 0xffffffffu;
  CheckWholeList(Encode(docs, tfs, 0));
  // The largest docID, and the largest tf the format takes (1..2^31).
  std::vector<uint32_t> one{0xffffffffu}, one_tf{0x80000000u};
  CheckWholeList(Encode(one, one_tf, 0));
  CheckWholeList(Encode(one, one_tf, 0xffffffffu));
}

TEST(DecodeGpuTest, EveryTuning) {
  SKIP_WITHOUT_GPU();
  const HostList h = RandomList(64 * 128 + 77, 20, 7);
  for (uint32_t threads : {64u, 128u, 256u, 512u}) {
    for (uint32_t bpw : {1u, 2u, 4u, 8u, 16u}) CheckWholeList(h, DecodeTuning{threads, bpw});
  }
  // Unsupported shapes are rejected before any launch.
  DeviceList d;
  ASSERT_TRUE(Upload(h, h.view.count(), d).ok());
  EXPECT_EQ(DecodeListGpu(d.blob.as<const uint8_t>(), h.view, d.docs.as<uint32_t>(), nullptr, d.error.as<uint32_t>(),
                          nullptr, DecodeTuning{96, 1})
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeListGpu(d.blob.as<const uint8_t>(), h.view, d.docs.as<uint32_t>(), nullptr, d.error.as<uint32_t>(),
                          nullptr, DecodeTuning{128, 3})
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeListGpu(nullptr, h.view, d.docs.as<uint32_t>(), nullptr, d.error.as<uint32_t>(), nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(DecodeGpuTest, MisalignedOutputUsesScalarStores) {
  SKIP_WITHOUT_GPU();
  const HostList h = RandomList(1000, 9, 11);
  DeviceList d;
  ASSERT_TRUE(Upload(h, h.view.count() + 1, d).ok());
  uint32_t* docs = d.docs.as<uint32_t>() + 1;  // 4-byte but not 16-byte aligned
  uint32_t* tfs = d.tfs.as<uint32_t>() + 1;
  ASSERT_TRUE(DecodeListGpu(d.blob.as<const uint8_t>(), h.view, docs, tfs, d.error.as<uint32_t>(), nullptr).ok());
  ASSERT_TRUE(CheckDecodeError(d.error.as<uint32_t>(), nullptr).ok());
  auto got = Download(d.docs, h.view.count() + 1);
  auto got_tfs = Download(d.tfs, h.view.count() + 1);
  EXPECT_EQ(std::vector<uint32_t>(got.begin() + 1, got.end()), h.docs);
  EXPECT_EQ(std::vector<uint32_t>(got_tfs.begin() + 1, got_tfs.end()), h.tfs);
}

TEST(DecodeGpuTest, BlockSubset) {
  SKIP_WITHOUT_GPU();
  const HostList h = RandomList(40 * 128 + 5, 30, 21, 77);
  const uint32_t nb = h.view.num_blocks();
  std::mt19937 rng(5);
  std::vector<uint32_t> ids;
  for (uint32_t j = nb; j-- > 0;) ids.push_back(j);        // every block, reversed
  for (int k = 0; k < 50; ++k) ids.push_back(rng() % nb);  // random, with repeats
  ids.push_back(nb - 1);                                   // the short last block again
  for (const DecodeTuning t : {DecodeTuning{}, DecodeTuning{64, 1}, DecodeTuning{512, 4}, DecodeTuning{128, 8}}) {
    SCOPED_TRACE(t.ToString());
    DeviceList d;
    ASSERT_TRUE(Upload(h, static_cast<uint32_t>(ids.size()) * kBlockSize, d).ok());
    auto d_ids = DeviceBuffer::Allocate(4 * ids.size());
    ASSERT_TRUE(d_ids.ok());
    ASSERT_EQ(cudaMemcpy(d_ids->get(), ids.data(), 4 * ids.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_TRUE(DecodeBlocksGpu(d.blob.as<const uint8_t>(), h.view, d_ids->as<const uint32_t>(),
                                static_cast<uint32_t>(ids.size()), d.docs.as<uint32_t>(), d.tfs.as<uint32_t>(),
                                d.error.as<uint32_t>(), nullptr, t)
                    .ok());
    ASSERT_TRUE(CheckDecodeError(d.error.as<uint32_t>(), nullptr).ok());
    const auto docs = Download(d.docs, ids.size() * kBlockSize);
    const auto tfs = Download(d.tfs, ids.size() * kBlockSize);
    for (size_t s = 0; s < ids.size(); ++s) {
      uint32_t want[kBlockSize], want_tf[kBlockSize];
      ASSERT_TRUE(h.view.DecodeDocs(ids[s], want).ok());
      h.view.DecodeFreqs(ids[s], want_tf);
      const uint32_t count = h.view.block(ids[s]).count;
      for (uint32_t i = 0; i < kBlockSize; ++i) {
        const size_t at = s * kBlockSize + i;
        if (i < count) {
          ASSERT_EQ(docs[at], want[i]) << "slot " << s << " block " << ids[s] << " value " << i;
          ASSERT_EQ(tfs[at], want_tf[i]) << "slot " << s << " block " << ids[s] << " value " << i;
        } else {
          ASSERT_EQ(docs[at], 0xabababab) << "slot " << s << " wrote past its count at " << i;
        }
      }
    }
  }
}

TEST(DecodeGpuTest, BadBlockIndex) {
  SKIP_WITHOUT_GPU();
  const HostList h = RandomList(300, 3, 8);
  DeviceList d;
  ASSERT_TRUE(Upload(h, 3 * kBlockSize, d).ok());
  const std::vector<uint32_t> ids{0, h.view.num_blocks(), 1};
  auto d_ids = DeviceBuffer::Allocate(4 * ids.size());
  ASSERT_TRUE(d_ids.ok());
  ASSERT_EQ(cudaMemcpy(d_ids->get(), ids.data(), 4 * ids.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(DecodeBlocksGpu(d.blob.as<const uint8_t>(), h.view, d_ids->as<const uint32_t>(), 3, d.docs.as<uint32_t>(),
                              nullptr, d.error.as<uint32_t>(), nullptr)
                  .ok());
  EXPECT_EQ(CheckDecodeError(d.error.as<uint32_t>(), nullptr).code(), StatusCode::kInvalidArgument);
}

// Uploads `words` (an edited copy of h's blob) and decodes it with h's (unedited) view; the
// structural view is unchanged by the edits, so the kernel stays in bounds.
StatusCode DecodeEdited(const HostList& h, const std::vector<uint32_t>& words) {
  DeviceList d;
  EXPECT_TRUE(Upload(h, h.view.count(), d).ok());
  EXPECT_EQ(cudaMemcpy(d.blob.get(), words.data(), h.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_TRUE(DecodeListGpu(d.blob.as<const uint8_t>(), h.view, d.docs.as<uint32_t>(), d.tfs.as<uint32_t>(),
                            d.error.as<uint32_t>(), nullptr)
                  .ok());
  return CheckDecodeError(d.error.as<uint32_t>(), nullptr).code();
}

constexpr size_t kMetaWord = sizeof(ListHeader) / 4;  // word index of meta[0].last_doc

TEST(DecodeGpuTest, CorruptLastDocIsReported) {
  SKIP_WITHOUT_GPU();
  const HostList h = RandomList(10 * 128 + 50, 10, 31);
  ASSERT_EQ(DecodeEdited(h, h.words), StatusCode::kOk);
  for (uint32_t j : {0u, 4u, h.view.num_blocks() - 1}) {
    for (int delta : {+1, -1}) {
      auto words = h.words;
      words[kMetaWord + 4 * j] += static_cast<uint32_t>(delta);
      EXPECT_EQ(DecodeEdited(h, words), StatusCode::kCorruption) << "block " << j << " delta " << delta;
    }
  }
}

TEST(DecodeGpuTest, CorruptPayloadIsReported) {
  SKIP_WITHOUT_GPU();
  // Flip a bit in a full block's gap payload: its docIDs no longer end on last_doc.
  const HostList h = RandomList(4 * 128, 50, 41);
  const size_t payload_word = kMetaWord + 4 * h.view.num_blocks();
  auto words = h.words;
  words[payload_word + h.view.block(2).offset / 4 + 3] ^= 1u << 2;
  EXPECT_EQ(DecodeEdited(h, words), StatusCode::kCorruption);
}

TEST(DecodeGpuTest, WrapAroundIsReported) {
  SKIP_WITHOUT_GPU();
  // Full block: docs 0..126 then 2^32 - 1, so g[127] = 2^32 - 128 at width 32 (vertical layout:
  // value 127 = lane 7, slot 15 -> word 8 * 15 + 7 = 127). Setting g[127] = 2^32 - 1 makes the true
  // doc 2^32 + 126, which wraps to 126; with last_doc also set to 126 only the wrap check catches it.
  std::vector<uint32_t> docs(128), tfs(128, 1);
  for (uint32_t i = 0; i < 127; ++i) docs[i] = i;
  docs[127] = 0xffffffffu;
  const HostList full = Encode(docs, tfs, 0);
  ASSERT_EQ(full.view.block(0).doc_bits, 32);
  const size_t payload_word = kMetaWord + 4;
  auto words = full.words;
  ASSERT_EQ(words[payload_word + 127], 0xffffffffu - 127u);
  words[payload_word + 127] = 0xffffffffu;
  words[kMetaWord] = 126;
  EXPECT_EQ(DecodeEdited(full, words), StatusCode::kCorruption);

  // Short block {5, 2^32 - 1}: g = {5, 2^32 - 7} horizontally; g[1] = 2^32 - 1 wraps to 5.
  const HostList shrt = Encode({5u, 0xffffffffu}, {1u, 1u}, 0);
  words = shrt.words;
  ASSERT_EQ(words[payload_word + 1], 0xffffffffu - 6u);
  words[payload_word + 1] = 0xffffffffu;
  words[kMetaWord] = 5;
  EXPECT_EQ(DecodeEdited(shrt, words), StatusCode::kCorruption);
}

TEST(DecodeGpuTest, LongList) {
  SKIP_WITHOUT_GPU();
  // 2^22 postings from a 2^26 universe (gaps ~ 4 bits), all tunings' default path.
  CheckWholeList(RandomList(1u << 22, 15, 99));
}

}  // namespace
}  // namespace search::gpu
