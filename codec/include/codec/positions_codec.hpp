// The positions format (codec/FORMAT.md "Positions"): for one term in one shard, the positions of
// the term in each document of its posting list, laid out in the same blocks of 128 postings as the
// list, so that a cursor standing on posting i of block j finds that posting's positions by
// decoding block j's positions only. A position is the 0-based index of the token in the document's
// analyzed token stream (after stopword removal), so consecutive tokens have consecutive positions.
//
// Thread-safety: PositionsView is an immutable view; concurrent decodes are safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search {

inline constexpr uint32_t kPositionsMagic = 0x31534f50;  // "POS1" little-endian

// Encodes the positions of a list's postings. `tfs[i]` is posting i's term frequency, and
// `positions` holds posting 0's tfs[0] positions (strictly ascending), then posting 1's, and so on.
// InvalidArgument unless positions.size() == sum(tfs) and each posting's positions ascend strictly.
Result<std::string> EncodePositions(std::span<const uint32_t> tfs, std::span<const uint32_t> positions);

// A validated view over an encoded positions blob. Parse checks the header and the block table so
// that decoding a block cannot read out of bounds; `count` must equal the posting list's count
// (the CRC covers it: another count is Corruption). Any alignment. REQUIRES: the bytes outlive
// the view.
class PositionsView {
 public:
  PositionsView() = default;
  static Result<PositionsView> Parse(std::string_view bytes, uint32_t count);

  uint32_t count() const { return count_; }
  uint32_t num_blocks() const { return num_blocks_; }

  // Decodes block j (postings 128*j ..): offsets gets n + 1 entries (n postings in the block) and
  // posting i's positions are positions[offsets[i] .. offsets[i+1]), ascending. Corruption when the
  // block's bytes disagree with its table entry. REQUIRES: j < num_blocks().
  Status DecodeBlock(uint32_t j, std::vector<uint32_t>* offsets, std::vector<uint32_t>* positions) const;

  // Decodes only the positions of the postings `postings` (block indexes, strictly ascending, each
  // below the block's n) of block j: offsets as DecodeBlock, and for each listed posting i,
  // positions[offsets[i] .. offsets[i+1]) equal to DecodeBlock's; the other entries of positions
  // are unspecified (positions.size() is offsets[n]). Only the runs holding the listed postings'
  // positions are unpacked. Corruption whenever the block's layout is (every DecodeBlock check
  // but the positions' values) or a listed posting's position passes 2^32-1: Ok here and
  // Corruption from DecodeBlock only for a position past 2^32-1 of a posting not listed.
  // InvalidArgument for j >= num_blocks() or postings not strictly ascending below n.
  Status DecodePostings(uint32_t j, std::span<const uint32_t> postings, std::vector<uint32_t>* offsets,
                        std::vector<uint32_t>* positions) const;

  // Block j as running sums, for a caller that compares positions up to a per-posting shift:
  // sums[k] = the sum of (delta + 1) over the block's stored deltas 0..k (FORMAT.md "Positions"),
  // so posting i's positions are sums[k] - SumsBase(offsets, sums, i) for k in [offsets[i],
  // offsets[i+1]), offsets as DecodeBlock's. Only when every sum is below kSumsLimit (*fits; then
  // every position is too); otherwise *fits = false, sums unspecified, and DecodeBlock gives the
  // positions. Corruption as DecodeBlock for the block's layout. REQUIRES: j < num_blocks().
  static constexpr uint32_t kSumsLimit = uint32_t{1} << 30;
  Status DecodeBlockSums(uint32_t j, std::vector<uint32_t>* offsets, std::vector<uint32_t>* sums, bool* fits) const;

  // DecodeBlockSums and DecodePostings given block j's term frequencies `tfs` (the posting list's,
  // one a posting of the block, each >= 1) for the block's stored ones, which are then not
  // unpacked: offsets are tfs' running sums. The stored tfs are checked only through what the
  // decode reads: Corruption as the calls without tfs for the block's layout, and when the width
  // of tfs' tf - 1 is not the block's stored tf width or the runs that tfs' sum implies do not end
  // at the block's end; tfs that pass these checks yet differ from the stored ones partition the
  // block's positions by tfs. Every byte read lies inside the block, whatever tfs hold.
  // InvalidArgument when tfs.size() is not the block's posting count (or as the calls without).
  Status DecodeBlockSums(uint32_t j, std::span<const uint32_t> tfs, std::vector<uint32_t>* offsets,
                         std::vector<uint32_t>* sums, bool* fits) const;
  Status DecodePostings(uint32_t j, std::span<const uint32_t> tfs, std::span<const uint32_t> postings,
                        std::vector<uint32_t>* offsets, std::vector<uint32_t>* positions) const;
  static uint32_t SumsBase(const uint32_t* offsets, const uint32_t* sums, uint32_t i) {
    return (offsets[i] == 0 ? 0 : sums[offsets[i] - 1]) + 1;
  }

  // Asks the CPU to start loading block j's first bytes (up to 512), for a caller that will
  // decode it soon: a hint, no effect on results. REQUIRES: j < num_blocks().
  void PrefetchBlock(uint32_t j) const;

  std::string_view bytes() const { return bytes_; }

 private:
  uint32_t BlockStart(uint32_t j) const;  // byte offset of block j in the blob
  uint32_t BlockPostings(uint32_t j) const;  // block j's posting count, n_j
  // Block j's layout after its tfs and run widths are checked (DecodeBlock's and DecodePostings's
  // shared first steps): offsets gets the postings' position offsets, as DecodeBlock documents.
  struct BlockLayout {
    uint64_t end = 0;        // one past the block's last byte
    uint64_t total = 0;      // positions in the block
    uint64_t runs = 0;       // runs of up to 128 packed positions
    uint64_t widths_at = 0;  // byte offset of the runs' width bytes
    uint64_t runs_at = 0;    // byte offset of the first run
  };
  // list_tfs: the block's tfs from the caller (DecodeBlockSums with tfs), or null: the stored ones.
  Status ReadBlockLayout(uint32_t j, const uint32_t* list_tfs, std::vector<uint32_t>* offsets, BlockLayout* out) const;
  // Block j's layout read (ReadBlockLayout) and its stored deltas unpacked into positions (one a
  // position); *bound >= the block's last running sum (the deltas' count plus their sum).
  Status UnpackDeltas(uint32_t j, const uint32_t* list_tfs, std::vector<uint32_t>* offsets,
                      std::vector<uint32_t>* positions, uint64_t* bound) const;
  // DecodeBlockSums' and DecodePostings' work after their argument checks.
  Status DecodeSums(uint32_t j, const uint32_t* list_tfs, std::vector<uint32_t>* offsets, std::vector<uint32_t>* sums,
                    bool* fits) const;
  Status DecodeSome(uint32_t j, const uint32_t* list_tfs, std::span<const uint32_t> postings,
                    std::vector<uint32_t>* offsets, std::vector<uint32_t>* positions) const;

  std::string_view bytes_;
  uint32_t count_ = 0;
  uint32_t num_blocks_ = 0;
};

}  // namespace search
