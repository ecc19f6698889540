// The phrase producer's dispatch (kernel_phrase.cuh): for every phrase leaf of a tree phase's
// queries (QState::phrases), the compact ascending (docID, tf) pairs of the documents where the
// phrase occurs, on the device, and their number. A consumer reads Out(a, j) after Enqueue on the
// same stream (dispatch_tree.cu: a TreeLeaf per phrase slot).
// Thread-safety: one PhraseBatch is used by one thread, on one GpuContext.
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma once

#include <cstdint>
#include <vector>

#include "dispatch.cuh"
#include "phrase_plan.hpp"

namespace search::gpu::engine_internal {

// One leaf's answer on the device: docs[0 .. *d_len) ascending, tfs[i] > 0 its tf there, at most
// cap of them.
struct PhraseOut {
  const uint32_t* docs = nullptr;
  const uint32_t* tfs = nullptr;
  const uint32_t* d_len = nullptr;
  uint32_t cap = 0;
};

class PhraseBatch {
 public:
  PhraseBatch() = default;
  PhraseBatch(const PhraseBatch&) = delete;
  PhraseBatch& operator=(const PhraseBatch&) = delete;
  // Frees the scratch on the stream Enqueue used, after everything enqueued before.
  ~PhraseBatch();

  // Enqueues the producer for every phrase leaf of ph's queries on ctx's stream (nothing when
  // they have none). ResourceExhausted past 2^32 - 2 driver postings in one batch.
  Status Enqueue(GpuContext::Impl& ctx, const std::vector<QState>& st, const Phase& ph);
  // Query a of the phase (ph.ids[a]), its phrase leaf j. REQUIRES: Enqueue succeeded.
  PhraseOut Out(uint32_t a, uint32_t j) const;
  bool empty() const { return descs_.empty(); }

 private:
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  std::vector<PhraseDesc> descs_;
  std::vector<uint32_t> first_;  // per query of the phase: its first leaf in descs_
  std::vector<uint32_t> caps_;   // per leaf: its driver's postings
  uint32_t max_items_ = 0;
  PhraseDesc* d_descs_ = nullptr;
  uint32_t *d_docs_ = nullptr, *d_tfs_ = nullptr, *d_lens_ = nullptr;
};

}  // namespace search::gpu::engine_internal
