// device_positions.hpp: a term's positions laid out for the GPU engine's phrase kernels.
#include "gpu_exec/device_positions.hpp"

#include <algorithm>
#include <limits>

namespace search::gpu {

namespace {
void CollectPhraseTokens(const QueryNode& node, std::vector<std::string>* out) {
  if (node.kind == QueryNode::Kind::kPhrase) out->insert(out->end(), node.tokens.begin(), node.tokens.end());
  for (const QueryNode::Clause& c : node.clauses) CollectPhraseTokens(c.node, out);
}
}  // namespace

std::vector<std::string> PhraseTokens(const QueryNode& tree) {
  std::vector<std::string> out;
  CollectPhraseTokens(tree, &out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<std::vector<uint32_t>> BuildDevicePositions(const ListView& list, const PositionsView& positions) {
  const uint32_t count = list.count();
  if (positions.count() != count || positions.num_blocks() != list.num_blocks())
    return Status::Corruption("positions of " + std::to_string(positions.count()) + " postings for a list of " +
                              std::to_string(count));
  std::vector<uint32_t> docs(count), offsets(size_t{count} + 1), pos;
  uint32_t block_docs[kBlockSize], block_tfs[kBlockSize];
  std::vector<uint32_t> off, vals;
  uint64_t at = 0, total = 0;
  for (uint32_t j = 0; j < list.num_blocks(); ++j) {
    const uint32_t n = list.block(j).count;
    if (n == 0 || n > kBlockSize || at + n > count) return Status::Corruption("list block " + std::to_string(j));
    SEARCH_RETURN_IF_ERROR(list.DecodeDocs(j, block_docs));
    list.DecodeFreqs(j, block_tfs);
    SEARCH_RETURN_IF_ERROR(positions.DecodeBlock(j, &off, &vals));
    if (off.size() != size_t{n} + 1 || off[n] > vals.size())
      return Status::Corruption("positions block " + std::to_string(j) + " holds " + std::to_string(off.size() - 1) +
                                " postings, the list's block " + std::to_string(n));
    for (uint32_t i = 0; i < n; ++i) {
      if (off[i] > off[i + 1] || off[i + 1] - off[i] != block_tfs[i])
        return Status::Corruption("positions of docID " + std::to_string(block_docs[i]) +
                                  " disagree with its term frequency");
      docs[at + i] = block_docs[i];
      offsets[at + i] = static_cast<uint32_t>(total);
      total += block_tfs[i];
    }
    if (total + 2 * uint64_t{count} + 1 > std::numeric_limits<uint32_t>::max())
      return Status::Corruption("positions past 2^32 values in one list");
    pos.insert(pos.end(), vals.begin(), vals.begin() + off[n]);
    at += n;
  }
  if (at != count) return Status::Corruption("list blocks hold " + std::to_string(at) + " of " + std::to_string(count));
  offsets[count] = static_cast<uint32_t>(total);
  std::vector<uint32_t> out;
  out.reserve(2 * size_t{count} + 1 + pos.size());
  out.insert(out.end(), docs.begin(), docs.end());
  out.insert(out.end(), offsets.begin(), offsets.end());
  out.insert(out.end(), pos.begin(), pos.end());
  return out;
}

}  // namespace search::gpu
