// Fuzz target: the positions decoder (codec/positions_codec.hpp, codec/FORMAT.md "Positions") on
// arbitrary bytes. The input's first two bytes give the list's count (1 + u16 % 1024), the rest is
// the blob. It is parsed twice: as is, and "repaired" (magic and CRC rewritten to agree with the
// count), so that mutations reach the block table and the blocks instead of dying on the CRC.
// When Parse accepts, every block is decoded (also given the list's tfs: the block's own, and
// those off by one); a block that decodes must keep FORMAT.md's promises
// (n + 1 offsets from 0 to the number of positions, every tf >= 1, each posting's positions
// strictly ascending), and a blob whose blocks all decode must re-encode (EncodePositions) to a
// blob that decodes to the same positions.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace search;  // NOLINT: a fuzz target over one API

// Decodes every block; returns true (and all tfs and positions) when every block decodes. Each
// block's DecodeBlockSums agrees: an error only where DecodeBlock's is, and sums that fit give
// DecodeBlock's offsets and, less each posting's SumsBase, its positions.
bool DecodeAll(const PositionsView& v, std::vector<uint32_t>* tfs, std::vector<uint32_t>* all) {
  std::vector<uint32_t> offsets, positions, sum_offsets, sums;
  bool ok = true;
  for (uint32_t j = 0; j < v.num_blocks(); ++j) {
    Status st = v.DecodeBlock(j, &offsets, &positions);
    bool fits = false;
    const Status sums_st = v.DecodeBlockSums(j, &sum_offsets, &sums, &fits);
    FUZZ_CHECK(sums_st.ok() || (sums_st.code() == StatusCode::kCorruption && !st.ok()));
    if (sums_st.ok() && fits) {
      FUZZ_CHECK(st.ok());
      FUZZ_CHECK(sum_offsets == offsets && sums.size() == positions.size());
      for (uint32_t i = 0; i + 1 < offsets.size(); ++i) {
        const uint32_t base = PositionsView::SumsBase(sum_offsets.data(), sums.data(), i);
        for (uint32_t k = offsets[i]; k < offsets[i + 1]; ++k) FUZZ_CHECK(sums[k] - base == positions[k]);
      }
    }
    if (!st.ok()) {
      FUZZ_CHECK(st.code() == StatusCode::kCorruption);
      ok = false;
      continue;
    }
    const uint32_t n = std::min(kBlockSize, v.count() - j * kBlockSize);
    FUZZ_CHECK(offsets.size() == n + 1);
    {  // given the block's own tfs, DecodeBlockSums agrees; given them off by one, Ok or Corruption
      std::vector<uint32_t> own(n), t_offsets, t_sums;
      for (uint32_t i = 0; i < n; ++i) own[i] = offsets[i + 1] - offsets[i];
      bool t_fits = false;
      const Status t_st = v.DecodeBlockSums(j, own, &t_offsets, &t_sums, &t_fits);
      FUZZ_CHECK(t_st.ok() == sums_st.ok());
      if (t_st.ok()) FUZZ_CHECK(t_offsets == offsets && t_fits == fits && (!fits || t_sums == sums));
      own[own.size() / 2] += 1;
      const Status off_st = v.DecodeBlockSums(j, own, &t_offsets, &t_sums, &t_fits);
      FUZZ_CHECK(off_st.ok() || off_st.code() == StatusCode::kCorruption);
    }
    FUZZ_CHECK(offsets[0] == 0);
    FUZZ_CHECK(offsets[n] == positions.size());
    for (uint32_t i = 0; i < n; ++i) {
      FUZZ_CHECK(offsets[i] < offsets[i + 1]);
      for (uint32_t k = offsets[i] + 1; k < offsets[i + 1]; ++k) FUZZ_CHECK(positions[k - 1] < positions[k]);
      tfs->push_back(offsets[i + 1] - offsets[i]);
    }
    all->insert(all->end(), positions.begin(), positions.end());
  }
  return ok;
}

void Check(std::string_view blob, uint32_t count) {
  auto view = PositionsView::Parse(blob, count);
  if (!view.ok()) {
    FUZZ_CHECK(view.status().code() == StatusCode::kCorruption);
    return;
  }
  FUZZ_CHECK(view->count() == count);
  std::vector<uint32_t> tfs, positions;
  if (!DecodeAll(*view, &tfs, &positions)) return;
  auto again = EncodePositions(tfs, positions);
  FUZZ_CHECK(again.ok());
  auto view2 = PositionsView::Parse(*again, count);
  FUZZ_CHECK(view2.ok());
  std::vector<uint32_t> tfs2, positions2;
  FUZZ_CHECK(DecodeAll(*view2, &tfs2, &positions2));
  FUZZ_CHECK(tfs2 == tfs && positions2 == positions);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t count = 1 + (static_cast<uint32_t>(data[0]) | static_cast<uint32_t>(data[1]) << 8) % 1024;
  std::string blob(reinterpret_cast<const char*>(data) + 2, size - 2);
  Check(blob, count);
  if (blob.size() >= 8) {
    const uint32_t magic = kPositionsMagic;
    std::memcpy(blob.data(), &magic, 4);
    const uint32_t crc = Crc32c(blob.data() + 8, blob.size() - 8, Crc32c(&count, sizeof(count)));
    std::memcpy(blob.data() + 4, &crc, 4);
    Check(blob, count);
  }
  return 0;
}
