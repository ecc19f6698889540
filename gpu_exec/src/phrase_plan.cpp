// phrase_plan.hpp: a query's phrase leaves, planned on the host.
#include "phrase_plan.hpp"

#include <algorithm>

#include "gpu_exec/device_positions.hpp"

namespace search::gpu::engine_internal {

Result<uint32_t> PhraseCollector::Slot(const std::vector<std::string>& tokens) {
  if (tokens.size() < 2 || tokens.size() > kMaxPhraseTokens)
    return Status::InvalidArgument("a phrase of " + std::to_string(tokens.size()) + " tokens");
  for (const PhraseLeaf& l : *leaves_)
    if (l.tokens == tokens) return l.slot;
  PhraseLeaf leaf;
  leaf.tokens = tokens;
  std::vector<size_t> distinct;  // term indexes
  bool absent = false;
  for (const std::string& t : tokens) {
    const auto it = std::lower_bound(terms_.begin(), terms_.end(), t);
    if (it == terms_.end() || *it != t)
      return Status::InvalidArgument("query token '" + t + "' is not among the query's terms");
    const size_t i = static_cast<size_t>(it - terms_.begin());
    const GpuTermInput& in = inputs_[i];
    leaf.idf += in.idf;  // text order, repeats counted (the CPU engine's sum)
    if (in.list == nullptr) absent = true;
    const auto d = std::find(distinct.begin(), distinct.end(), i);
    leaf.tok_of.push_back(static_cast<uint8_t>(d - distinct.begin()));
    if (d == distinct.end()) distinct.push_back(i);
  }
  if (absent) return kTreeAbsent;
  for (size_t i : distinct) {
    const GpuTermInput& in = inputs_[i];
    if (in.d_positions == nullptr)
      return Status::InvalidArgument("a phrase needs positions, which this shard lacks");
    const DevicePositionsParts p = SplitDevicePositions(in.d_positions, in.list->count());
    leaf.toks.push_back(PhraseTok{p.docs, p.offsets, p.positions, in.list->count()});
  }
  // The driver first: the token of fewest postings (the first such in text order).
  size_t driver = 0;
  for (size_t u = 1; u < leaf.toks.size(); ++u)
    if (leaf.toks[u].count < leaf.toks[driver].count) driver = u;
  if (driver != 0) {
    std::swap(leaf.toks[0], leaf.toks[driver]);
    for (uint8_t& u : leaf.tok_of) u = u == 0 ? static_cast<uint8_t>(driver) : u == driver ? 0 : u;
  }
  const uint32_t slot = first_slot_ + static_cast<uint32_t>(leaves_->size());
  if (slot >= kMaxSteps)
    return GpuUnimplemented("a query of more than " + std::to_string(kMaxSteps) + " present terms and phrases");
  leaf.slot = slot;
  leaves_->push_back(std::move(leaf));
  return slot;
}

}  // namespace search::gpu::engine_internal
