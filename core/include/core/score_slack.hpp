// The pruning slack that keeps every engine's top-k exact (docs/SCORING.md, "BM25"): the one
// definition used by the CPU engine (cpu_exec) and the GPU engine (gpu_exec), on the host and in
// CUDA device code.
//
// Contract. Pruning compares an upper bound with a threshold: a block, a list or a document is
// skipped only when `bound * ScoreSlack(n) <= threshold` (the CPU's top-k threshold) or
// `bound * ScoreSlack(n) < theta` (the GPU's lower bound on the k-th best score), where `bound` is
// a float sum of per-term upper bounds (block or list maxima) and the score it bounds is a float
// sum, in canonical term order, of at most n non-negative contributions. The two sums round
// differently; ScoreSlack(n) exceeds their relative difference (about 2n ulps of 2^-24 each, plus
// the product's own rounding), so a document whose exact float score could enter the top k is
// never skipped. It is kScoreSlack (1 + 1e-5) up to 18 terms and 1 + 8 (n + 2) 2^-24 rounded up
// to the next float above that. A larger slack only prunes less; answers stay the same.
// Thread-safety: constants and pure functions.
#pragma once

#include <cmath>
#include <cstddef>

#include "core/host_device.hpp"

namespace search {

// The least slack, for queries of up to 18 terms.
inline constexpr float kScoreSlack = 1.0f + 1e-5f;

// The pruning slack of an n-term query (see the contract above). Always > 1.
SEARCH_HD inline float ScoreSlack(size_t n) {
  const double need = 1.0 + 8.0 * static_cast<double>(n + 2) * 0x1p-24;
#if defined(__CUDA_ARCH__)
  const float widened = nextafterf(static_cast<float>(need), 2.0f);
#else
  const float widened = std::nextafter(static_cast<float>(need), 2.0f);
#endif
  return widened > kScoreSlack ? widened : kScoreSlack;
}

}  // namespace search
