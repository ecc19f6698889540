// A term's positions in the GPU engine's device layout: what a phrase needs of a token, decoded
// once on the host (when the positions go to the device) so that the phrase kernels read plain
// arrays. One uint32 array per term of one shard:
//   [0, count)                      docs: the list's docIDs, absolute, strictly ascending;
//   [count, 2 * count + 1)          offsets: posting i's positions are positions[offsets[i] .. offsets[i+1]);
//   [2 * count + 1, + offsets[count]) positions: per posting strictly ascending.
// Built from the list (ListView: docIDs and tfs) and its positions (PositionsView's decode API,
// whatever its byte format), checked against each other: every posting's positions count is its tf.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "core/query_tree.hpp"
#include "core/status.hpp"

namespace search::gpu {

// The layout above for `list` and its `positions`. Corruption when a block fails to decode, when
// the two disagree (counts, blocks, a posting's positions count against its tf), or when the
// layout would pass 2^32 - 1 values.
Result<std::vector<uint32_t>> BuildDevicePositions(const ListView& list, const PositionsView& positions);

// Where a layout's pieces start, given its base pointer and the list's count.
struct DevicePositionsParts {
  const uint32_t* docs = nullptr;
  const uint32_t* offsets = nullptr;
  const uint32_t* positions = nullptr;
};
inline DevicePositionsParts SplitDevicePositions(const uint32_t* base, uint32_t count) {
  return {base, base + count, base + 2 * size_t{count} + 1};
}

// Every token some phrase of `tree` holds, sorted and distinct: the terms whose positions a query
// needs on the device (GpuTermInput::d_positions).
std::vector<std::string> PhraseTokens(const QueryNode& tree);

// The GpuListCache key of a term's positions layout: never a term (the analyzer never emits '\0').
inline std::string PositionsKey(std::string_view term) {
  std::string key(term);
  key.push_back('\0');
  key.append("pos");
  return key;
}

}  // namespace search::gpu
