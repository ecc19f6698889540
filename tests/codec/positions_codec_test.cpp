// The positions format (codec/FORMAT.md "Positions"): round trips of random postings against the
// input (tfs from 1 to thousands, 1-posting lists, block and run boundaries), the encoder's
// argument checks, and corruption: every truncated prefix, every single-bit flip and a wrong count
// give an error, never a crash; DecodeBlock on structurally damaged blobs (CRC repaired) gives
// Corruption or positions that keep the contract.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"

namespace search {
namespace {

struct Postings {
  std::vector<uint32_t> tfs;
  std::vector<uint32_t> positions;  // posting 0's, then posting 1's, ...
};

// `n` postings; tfs drawn up to max_tf; each posting's positions start below `start` (below
// 2^32 - tf * 1000 when start is 0, to reach 32-bit widths) and ascend by steps of 1..4 or 1..1000.
Postings Random(std::mt19937& rng, uint32_t n, uint32_t max_tf, uint64_t start) {
  Postings p;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t tf = rng() % 3 == 0 ? 1 + rng() % max_tf : 1 + rng() % 3;
    p.tfs.push_back(tf);
    const uint64_t first_limit = start == 0 ? (uint64_t{1} << 32) - uint64_t{tf} * 1000 : start;
    uint64_t v = (uint64_t{rng()} << 32 | rng()) % first_limit;
    const uint32_t max_step = rng() % 2 ? 4 : 1000;
    for (uint32_t k = 0; k < tf; ++k) {
      p.positions.push_back(static_cast<uint32_t>(v));
      v += 1 + rng() % max_step;
    }
  }
  return p;
}

// Decodes every block and compares with the input.
void ExpectRoundTrip(const Postings& p, const std::string& blob) {
  const auto count = static_cast<uint32_t>(p.tfs.size());
  auto view = PositionsView::Parse(blob, count);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_EQ(view->count(), count);
  ASSERT_EQ(view->num_blocks(), (count + 127) / 128);
  std::vector<uint32_t> offsets, positions;
  size_t at = 0;
  for (uint32_t j = 0; j < view->num_blocks(); ++j) {
    ASSERT_TRUE(view->DecodeBlock(j, &offsets, &positions).ok());
    const uint32_t n = std::min(128u, count - 128 * j);
    ASSERT_EQ(offsets.size(), n + 1);
    ASSERT_EQ(offsets[0], 0u);
    ASSERT_EQ(offsets[n], positions.size());
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t tf = p.tfs[128 * j + i];
      ASSERT_EQ(offsets[i + 1] - offsets[i], tf) << "block " << j << " posting " << i;
      for (uint32_t k = 0; k < tf; ++k) ASSERT_EQ(positions[offsets[i] + k], p.positions[at + k]);
      at += tf;
    }
  }
  EXPECT_EQ(at, p.positions.size());
}

TEST(PositionsCodecTest, RoundTripsRandomLists) {
  std::mt19937 rng(7);
  const uint32_t sizes[] = {1, 2, 127, 128, 129, 255, 256, 257, 1000};
  for (uint32_t n : sizes) {
    for (uint32_t max_tf : {1u, 5u, 200u, 3000u}) {
      for (uint64_t span : {uint64_t{50}, uint64_t{100000}, uint64_t{0}}) {
        const Postings p = Random(rng, n, max_tf, span);
        auto blob = EncodePositions(p.tfs, p.positions);
        ASSERT_TRUE(blob.ok()) << blob.status().ToString();
        ExpectRoundTrip(p, *blob);
      }
    }
  }
}

TEST(PositionsCodecTest, RunBoundariesInsideABlock) {
  // Total positions per block at 127, 128, 129 and 256 (run boundaries), one posting holding many.
  for (uint32_t tf : {127u, 128u, 129u, 256u, 5000u}) {
    Postings p;
    p.tfs = {tf, 1};
    for (uint32_t k = 0; k < tf; ++k) p.positions.push_back(3 * k + 1);
    p.positions.push_back(UINT32_MAX);
    auto blob = EncodePositions(p.tfs, p.positions);
    ASSERT_TRUE(blob.ok());
    ExpectRoundTrip(p, *blob);
  }
}

// Every run width 0..32 in short runs (horizontal: 1..127 values, the eight-lane gather up to
// width 25 and the scalar rest) and full ones: one-position postings whose positions have exactly
// that width, decoded by DecodeBlock, DecodePostings (all postings) and, where they fit,
// DecodeBlockSums, each equal to the input.
TEST(PositionsCodecTest, EveryRunWidthDecodesExactly) {
  std::mt19937 rng(11);
  std::vector<uint32_t> offsets, positions, sums, all;
  for (uint32_t width = 0; width <= 32; ++width) {
    for (uint32_t n : {1u, 7u, 8u, 9u, 17u, 100u, 127u, 128u, 200u}) {
      Postings p;
      for (uint32_t i = 0; i < n; ++i) {
        p.tfs.push_back(1);
        const uint64_t low = width == 0 ? 0 : uint64_t{1} << (width - 1);
        p.positions.push_back(static_cast<uint32_t>(low + (width == 0 ? 0 : rng() % low)));
      }
      auto blob = EncodePositions(p.tfs, p.positions);
      ASSERT_TRUE(blob.ok());
      ExpectRoundTrip(p, *blob);
      auto view = PositionsView::Parse(*blob, n);
      ASSERT_TRUE(view.ok());
      for (uint32_t j = 0; j < view->num_blocks(); ++j) {
        const uint32_t bn = std::min(128u, n - 128 * j);
        all.resize(bn);
        for (uint32_t i = 0; i < bn; ++i) all[i] = i;
        ASSERT_TRUE(view->DecodePostings(j, all, &offsets, &positions).ok());
        for (uint32_t i = 0; i < bn; ++i)
          ASSERT_EQ(positions[offsets[i]], p.positions[128 * j + i]) << "width " << width << " n " << n;
        bool fits = false;
        ASSERT_TRUE(view->DecodeBlockSums(j, &offsets, &sums, &fits).ok());
        if (!fits) continue;
        for (uint32_t i = 0; i < bn; ++i)
          ASSERT_EQ(sums[offsets[i]] - PositionsView::SumsBase(offsets.data(), sums.data(), i), p.positions[128 * j + i])
              << "width " << width << " n " << n;
      }
    }
  }
}

TEST(PositionsCodecTest, SinglePostingIsSmall) {
  // One posting at position 5: header 8 + tf width byte + run width byte + 1 byte of 3 bits.
  Postings p{{1}, {5}};
  auto blob = EncodePositions(p.tfs, p.positions);
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(blob->size(), 11u);
  ExpectRoundTrip(p, *blob);
  // Position 0 takes no payload at all.
  auto zero = EncodePositions(std::vector<uint32_t>{1}, std::vector<uint32_t>{0});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->size(), 10u);
}

TEST(PositionsCodecTest, ParsesAtAnyAlignment) {
  std::mt19937 rng(3);
  const Postings p = Random(rng, 300, 50, 10000);
  auto blob = EncodePositions(p.tfs, p.positions);
  ASSERT_TRUE(blob.ok());
  std::string shifted = "x" + *blob;
  auto view = PositionsView::Parse(std::string_view(shifted).substr(1), 300);
  ASSERT_TRUE(view.ok());
  std::vector<uint32_t> offsets, positions;
  for (uint32_t j = 0; j < view->num_blocks(); ++j) EXPECT_TRUE(view->DecodeBlock(j, &offsets, &positions).ok());
}

TEST(PositionsCodecTest, EncoderRejectsBadInput) {
  const std::vector<uint32_t> none;
  EXPECT_EQ(EncodePositions(none, none).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePositions(std::vector<uint32_t>{0}, none).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePositions(std::vector<uint32_t>{2}, std::vector<uint32_t>{1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePositions(std::vector<uint32_t>{2}, std::vector<uint32_t>{4, 4}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePositions(std::vector<uint32_t>{2}, std::vector<uint32_t>{5, 4}).status().code(),
            StatusCode::kInvalidArgument);
  // Across postings positions may go down.
  EXPECT_TRUE(EncodePositions(std::vector<uint32_t>{1, 1}, std::vector<uint32_t>{9, 2}).ok());
}

TEST(PositionsCodecTest, ParseRejectsWrongCountAndZero) {
  auto blob = EncodePositions(std::vector<uint32_t>{1, 2}, std::vector<uint32_t>{4, 1, 7});
  ASSERT_TRUE(blob.ok());
  EXPECT_TRUE(PositionsView::Parse(*blob, 2).ok());
  EXPECT_EQ(PositionsView::Parse(*blob, 1).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(PositionsView::Parse(*blob, 3).status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(PositionsView::Parse(*blob, 0).ok());
  EXPECT_EQ(PositionsView::Parse(*blob, 2).value().DecodeBlock(1, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(PositionsCodecTest, EveryTruncationAndBitFlipIsAnError) {
  std::mt19937 rng(11);
  for (uint32_t n : {1u, 3u, 130u}) {
    const Postings p = Random(rng, n, 40, 5000);
    auto blob = EncodePositions(p.tfs, p.positions);
    ASSERT_TRUE(blob.ok());
    for (size_t len = 0; len < blob->size(); ++len) {
      EXPECT_FALSE(PositionsView::Parse(std::string_view(*blob).substr(0, len), n).ok()) << "prefix " << len;
    }
    for (size_t bit = 0; bit < 8 * blob->size(); ++bit) {
      std::string bad = *blob;
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
      EXPECT_EQ(PositionsView::Parse(bad, n).status().code(), StatusCode::kCorruption) << "bit " << bit;
    }
  }
}

// Recomputes the CRC after damage so that Parse's structural checks and DecodeBlock's own checks
// are what stands between the bytes and the decoder.
void RepairCrc(std::string* blob, uint32_t count) {
  if (blob->size() < 8) return;
  const uint32_t seed = Crc32c(&count, sizeof(count));
  const uint32_t crc = Crc32c(blob->data() + 8, blob->size() - 8, seed);
  std::memcpy(blob->data() + 4, &crc, 4);
}

// The positions blob of n random postings (long lists every 5th iteration, positions from 0 every
// 7th), with one to three bytes past the header damaged (the CRC repaired) on odd iterations.
void RandomBlob(std::mt19937& rng, int iter, uint32_t n, std::string* bytes) {
  const Postings p = Random(rng, n, 1 + rng() % (iter % 5 == 0 ? 500 : 20), iter % 7 == 0 ? 0 : 1 + rng() % 100000);
  auto blob = EncodePositions(p.tfs, p.positions);
  ASSERT_TRUE(blob.ok());
  *bytes = *blob;
  if (iter % 2 == 1) {
    for (int e = 1 + static_cast<int>(rng() % 3); e > 0; --e)
      if (bytes->size() > 8) (*bytes)[8 + rng() % (bytes->size() - 8)] = static_cast<char>(rng());
    RepairCrc(bytes, n);
  }
}

TEST(PositionsCodecTest, DamagedStructureNeverDecodesOutOfContract) {
  std::mt19937 rng(5);
  std::vector<uint32_t> offsets, positions;
  int decoded = 0, refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const uint32_t n = 1 + rng() % 300;
    const Postings p = Random(rng, n, 1 + rng() % 50, 1 + rng() % 100000);
    auto blob = EncodePositions(p.tfs, p.positions);
    ASSERT_TRUE(blob.ok());
    std::string bad = *blob;
    const int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 3) {
        case 0:
          if (bad.size() > 8) bad[8 + rng() % (bad.size() - 8)] = static_cast<char>(rng());
          break;
        case 1: bad.resize(8 + rng() % (bad.size() - 7)); break;
        default: bad.insert(8 + rng() % (bad.size() - 7), 1, static_cast<char>(rng())); break;
      }
    }
    RepairCrc(&bad, n);
    auto view = PositionsView::Parse(bad, n);
    if (!view.ok()) {
      ++refused;
      continue;
    }
    for (uint32_t j = 0; j < view->num_blocks(); ++j) {
      Status st = view->DecodeBlock(j, &offsets, &positions);
      if (!st.ok()) {
        EXPECT_EQ(st.code(), StatusCode::kCorruption);
        ++refused;
        continue;
      }
      ++decoded;
      const uint32_t bn = std::min(128u, n - 128 * j);
      ASSERT_EQ(offsets.size(), bn + 1);
      ASSERT_EQ(offsets[bn], positions.size());
      for (uint32_t i = 0; i < bn; ++i) {
        ASSERT_LT(offsets[i], offsets[i + 1]);  // tf >= 1
        for (uint32_t k = offsets[i] + 1; k < offsets[i + 1]; ++k) ASSERT_LT(positions[k - 1], positions[k]);
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(decoded, 0);
}

// DecodePostings against DecodeBlock's slice, on intact and on damaged (CRC repaired) blobs: for
// every posting alone, all postings, and random ascending subsets, offsets and the listed
// postings' positions equal DecodeBlock's when it succeeds; a Corruption from DecodePostings is
// one from DecodeBlock too, and with every posting listed the two agree on the status.
TEST(PositionsCodecTest, DecodePostingsEqualsDecodeBlockSlices) {
  std::mt19937 rng(11);
  std::vector<uint32_t> offsets, positions, sub_offsets, sub_positions, which;
  int compared = 0, corrupt = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const uint32_t n = 1 + rng() % 400;
    std::string bytes;
    ASSERT_NO_FATAL_FAILURE(RandomBlob(rng, iter, n, &bytes));
    auto view = PositionsView::Parse(bytes, n);
    if (!view.ok()) continue;
    for (uint32_t j = 0; j < view->num_blocks(); ++j) {
      const Status full = view->DecodeBlock(j, &offsets, &positions);
      const uint32_t bn = std::min(128u, n - 128 * j);
      std::vector<std::vector<uint32_t>> subsets;
      for (uint32_t i = 0; i < bn; ++i) subsets.push_back({i});
      subsets.emplace_back();
      for (uint32_t i = 0; i < bn; ++i) subsets.back().push_back(i);
      for (int r = 0; r < 4; ++r) {
        subsets.emplace_back();
        const uint32_t keep = 1 + rng() % 4;
        for (uint32_t i = 0; i < bn; ++i)
          if (rng() % keep == 0) subsets.back().push_back(i);
      }
      for (const auto& sub : subsets) {
        const Status st = view->DecodePostings(j, sub, &sub_offsets, &sub_positions);
        if (full.ok()) {
          ASSERT_TRUE(st.ok()) << st.ToString();
          ASSERT_EQ(sub_offsets, offsets);
          ASSERT_EQ(sub_positions.size(), positions.size());
          for (const uint32_t i : sub)
            for (uint32_t k = offsets[i]; k < offsets[i + 1]; ++k)
              ASSERT_EQ(sub_positions[k], positions[k]) << "block " << j << " posting " << i;
          ++compared;
        } else {
          ASSERT_EQ(full.code(), StatusCode::kCorruption);
          if (!st.ok()) {
            EXPECT_EQ(st.code(), StatusCode::kCorruption);
            ++corrupt;
          }
          if (sub.size() == bn) {
            EXPECT_FALSE(st.ok()) << "every posting listed, DecodeBlock: " << full.ToString();
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_GT(corrupt, 0);
  // Arguments: the block, and postings strictly ascending below the block's count.
  auto blob = EncodePositions(std::vector<uint32_t>{1, 2}, std::vector<uint32_t>{5, 1, 3});
  ASSERT_TRUE(blob.ok());
  auto view = PositionsView::Parse(*blob, 2);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->DecodePostings(1, {}, &offsets, &positions).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(view->DecodePostings(0, std::vector<uint32_t>{1, 0}, &offsets, &positions).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(view->DecodePostings(0, std::vector<uint32_t>{2}, &offsets, &positions).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(view->DecodePostings(0, std::vector<uint32_t>{1}, &offsets, &positions).ok());
  EXPECT_EQ(positions[1], 1u);
  EXPECT_EQ(positions[2], 3u);
}

// DecodeBlockSums: where the sums fit, each posting's sums minus its SumsBase are DecodeBlock's
// positions; a layout error is DecodeBlock's too; blocks of positions near 2^32 do not fit.
TEST(PositionsCodecTest, DecodeBlockSumsEqualsDecodeBlock) {
  std::mt19937 rng(13);
  std::vector<uint32_t> offsets, positions, sum_offsets, sums;
  int compared = 0, too_big = 0, corrupt = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const uint32_t n = 1 + rng() % 400;
    std::string bytes;
    ASSERT_NO_FATAL_FAILURE(RandomBlob(rng, iter, n, &bytes));
    auto view = PositionsView::Parse(bytes, n);
    if (!view.ok()) continue;
    for (uint32_t j = 0; j < view->num_blocks(); ++j) {
      const Status full = view->DecodeBlock(j, &offsets, &positions);
      bool fits = true;
      const Status st = view->DecodeBlockSums(j, &sum_offsets, &sums, &fits);
      if (!st.ok()) {
        EXPECT_EQ(st.code(), StatusCode::kCorruption);
        EXPECT_FALSE(full.ok());
        ++corrupt;
        continue;
      }
      if (!fits) {
        ++too_big;
        continue;
      }
      ASSERT_TRUE(full.ok()) << full.ToString();
      ASSERT_EQ(sum_offsets, offsets);
      ASSERT_EQ(sums.size(), positions.size());
      for (uint32_t i = 0; i + 1 < offsets.size(); ++i) {
        const uint32_t base = PositionsView::SumsBase(sum_offsets.data(), sums.data(), i);
        for (uint32_t k = offsets[i]; k < offsets[i + 1]; ++k) {
          ASSERT_LT(sums[k], PositionsView::kSumsLimit);
          ASSERT_EQ(sums[k] - base, positions[k]) << "block " << j << " posting " << i;
        }
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 500);
  EXPECT_GT(too_big, 0);
  EXPECT_GT(corrupt, 0);
}

// The calls given the list's tfs (DecodeBlockSums and DecodePostings with tfs) agree with the calls
// without on valid blobs; tfs of another width, or whose sum asks for another number of runs, are
// Corruption; tfs of another length InvalidArgument; on damaged blobs any tfs give Ok or
// Corruption (the decode reads only inside the block: ASan and the fuzz target watch that).
TEST(PositionsCodecTest, DecodeWithListTfsEqualsWithout) {
  std::mt19937 rng(29);
  std::vector<uint32_t> offsets, sums, t_offsets, t_sums, positions, t_positions;
  int compared = 0, width = 0, runs = 0, damaged = 0;
  for (int iter = 0; iter < 1200; ++iter) {
    const uint32_t n = 1 + rng() % 400;
    const Postings p = Random(rng, n, 1 + rng() % (iter % 5 == 0 ? 500 : 20), iter % 7 == 0 ? 0 : 1 + rng() % 100000);
    auto blob = EncodePositions(p.tfs, p.positions);
    ASSERT_TRUE(blob.ok());
    std::string bytes = *blob;
    const bool damage = iter % 3 == 2;
    if (damage) {
      for (int e = 1 + static_cast<int>(rng() % 3); e > 0; --e) bytes[8 + rng() % (bytes.size() - 8)] = static_cast<char>(rng());
      RepairCrc(&bytes, n);
    }
    auto view = PositionsView::Parse(bytes, n);
    if (!view.ok()) continue;
    for (uint32_t j = 0; j < view->num_blocks(); ++j) {
      const uint32_t bn = std::min(128u, n - 128 * j);
      std::vector<uint32_t> tfs(p.tfs.begin() + 128 * j, p.tfs.begin() + 128 * j + bn);
      std::vector<uint32_t> postings;
      for (uint32_t i = 0; i < bn; ++i)
        if (rng() % 4 == 0) postings.push_back(i);
      bool fits = false, t_fits = false;
      const Status st = view->DecodeBlockSums(j, &offsets, &sums, &fits);
      const Status t_st = view->DecodeBlockSums(j, tfs, &t_offsets, &t_sums, &t_fits);
      const Status some = view->DecodePostings(j, postings, &offsets, &positions);
      const Status t_some = view->DecodePostings(j, tfs, postings, &t_offsets, &t_positions);
      if (damage) {
        for (const Status* s : {&t_st, &t_some}) EXPECT_TRUE(s->ok() || s->code() == StatusCode::kCorruption);
        std::vector<uint32_t> junk(bn);  // any tfs, even 0: never out of contract
        for (uint32_t& t : junk) t = rng() % 4 == 0 ? rng() : rng() % 5;
        const Status j_st = view->DecodeBlockSums(j, junk, &t_offsets, &t_sums, &t_fits);
        EXPECT_TRUE(j_st.ok() || j_st.code() == StatusCode::kCorruption);
        ++damaged;
        continue;
      }
      ASSERT_TRUE(st.ok() && t_st.ok() && some.ok() && t_some.ok());
      // Again: the DecodePostings calls above reused the buffers.
      ASSERT_TRUE(view->DecodeBlockSums(j, &offsets, &sums, &fits).ok());
      ASSERT_TRUE(view->DecodeBlockSums(j, tfs, &t_offsets, &t_sums, &t_fits).ok());
      ASSERT_EQ(t_fits, fits);
      ASSERT_EQ(t_offsets, offsets);
      if (fits) {
        ASSERT_EQ(t_sums, sums);
      }
      ASSERT_TRUE(view->DecodePostings(j, postings, &offsets, &positions).ok());
      ASSERT_TRUE(view->DecodePostings(j, tfs, postings, &t_offsets, &t_positions).ok());
      ASSERT_EQ(t_offsets, offsets);
      for (const uint32_t i : postings)
        for (uint32_t k = offsets[i]; k < offsets[i + 1]; ++k) ASSERT_EQ(t_positions[k], positions[k]);
      ++compared;
      // Another width: a tf of 2^w + 1 where the block's widest tf - 1 is below 2^w.
      uint32_t acc = 0;
      for (const uint32_t t : tfs) acc |= t - 1;
      std::vector<uint32_t> wide = tfs;
      wide[rng() % bn] = (acc == 0 ? 1u : 2u << (31 - __builtin_clz(acc))) + 1;
      EXPECT_EQ(view->DecodeBlockSums(j, wide, &t_offsets, &t_sums, &t_fits).code(), StatusCode::kCorruption);
      ++width;
      // The same width, 128 positions more (one run more or less): the runs do not end at the block's end.
      std::vector<uint32_t> more = tfs;
      uint32_t moved = 0;
      for (uint32_t& t : more) {
        const uint32_t room = acc - (t - 1);  // raising t - 1 up to acc keeps the width
        const uint32_t add = std::min(room, 128 - moved);
        t += add;
        moved += add;
      }
      if (moved == 128) {
        EXPECT_EQ(view->DecodeBlockSums(j, more, &t_offsets, &t_sums, &t_fits).code(), StatusCode::kCorruption);
        EXPECT_EQ(view->DecodePostings(j, more, postings, &t_offsets, &t_positions).code(), StatusCode::kCorruption);
        ++runs;
      }
      std::vector<uint32_t> short_tfs(tfs.begin(), tfs.end() - 1);
      EXPECT_EQ(view->DecodeBlockSums(j, short_tfs, &t_offsets, &t_sums, &t_fits).code(), StatusCode::kInvalidArgument);
    }
  }
  EXPECT_GT(compared, 500);
  EXPECT_GT(width, 500);
  EXPECT_GT(runs, 50);
  EXPECT_GT(damaged, 100);
}

}  // namespace
}  // namespace search
