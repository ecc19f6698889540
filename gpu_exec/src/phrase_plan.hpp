// The GPU engine's phrases, host side: a query's phrase leaves as the tree compiler meets them
// (PhraseCollector), and the descriptors the phrase kernels (kernel_phrase.cuh) read.
// A phrase leaf becomes one slot of the tree program (engine_desc.hpp's kTreeTerm op), after the
// present terms' slots: QState::present gets a DevList for it with no blocks (the list scatter
// skips it), count = the rarest token's postings (a bound on its matches) and idf = the phrase's
// idf (docs/SCORING.md: the float sum of its tokens' idfs in text order, repeats counted). The
// phrase producer (dispatch_phrase.cu) computes its (docID, tf) pairs on the device from the
// tokens' positions in device_positions.hpp's layout.
// Thread-safety: plain data and functions over the caller's state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "engine_desc.hpp"
#include "gpu_exec/gpu_engine.hpp"

namespace search::gpu::engine_internal {

inline constexpr uint32_t kMaxPhraseTokens = 64;  // core's limit on a phrase's tokens

// One distinct token of a phrase on the device (device_positions.hpp's layout, split).
struct PhraseTok {
  const uint32_t* docs = nullptr;
  const uint32_t* offsets = nullptr;
  const uint32_t* pos = nullptr;
  uint32_t count = 0;
};

// One phrase leaf of a query, planned: toks[0] is the driver (fewest postings), whose postings
// are the candidates; token i of the phrase (text order) is toks[tok_of[i]].
struct PhraseLeaf {
  std::vector<std::string> tokens;  // text order (the leaf's identity: identical phrases share a slot)
  std::vector<PhraseTok> toks;
  std::vector<uint8_t> tok_of;
  float idf = 0.0f;
  uint32_t slot = 0;  // its slot in the query's program
};

// One phrase leaf of a batch, as the kernels read it. Items are the driver's postings: item i of
// the leaf is batch item item_begin + i (i < toks[tok_off].count).
struct PhraseDesc {
  uint32_t n = 0;         // tokens
  uint32_t distinct = 0;  // distinct tokens, at toks[tok_off ..]
  uint32_t tok_off = 0;
  uint32_t item_begin = 0;
  uint32_t query = 0;  // the query's index in its phase (its TreeDesc)
  uint32_t slot = 0;   // its slot in that query's program
  uint8_t tok_of[kMaxPhraseTokens] = {};
};

// Collects one query's phrase leaves while CompileTree emits its program. `inputs` are the query's
// term inputs, inputs[i] that of terms[i] (sorted); first_slot the first slot after the terms'.
class PhraseCollector {
 public:
  PhraseCollector(std::span<const GpuTermInput> inputs, std::span<const std::string> terms, uint32_t first_slot,
                  std::vector<PhraseLeaf>* leaves)
      : inputs_(inputs), terms_(terms), first_slot_(first_slot), leaves_(leaves) {}
  // The program slot of the phrase `tokens` (text order): kTreeAbsent when one of its tokens has
  // no postings here (it matches nothing); the same slot for an identical phrase. InvalidArgument
  // for a token not among the terms, fewer than two or more than kMaxPhraseTokens tokens, or a
  // present token without positions (d_positions); GpuUnimplemented past kMaxSteps slots.
  Result<uint32_t> Slot(const std::vector<std::string>& tokens);

 private:
  std::span<const GpuTermInput> inputs_;
  std::span<const std::string> terms_;
  uint32_t first_slot_;
  std::vector<PhraseLeaf>* leaves_;
};

}  // namespace search::gpu::engine_internal
