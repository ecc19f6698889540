// BM25 with Lucene's idf, from global collection statistics (docs/SCORING.md).
// Every engine (CPU, GPU, any shard) computes a document's score with exactly these float
// operations, summing per-term contributions in the canonical term order (ascending term bytes,
// Analyzer::AnalyzeQuery), so that all engines agree to the last bit where they can:
//   idf(t)   = (float) ln(1 + (N - df + 0.5) / (df + 0.5))            computed in double
//   norm(d)  = (float) (k1 * (1 - b + b * dl / avgdl))                computed in double
//   c(t, d)  = idf * (tf * (k1 + 1)) / (tf + norm)                    computed in float
//   score(d) = sum over query terms in canonical order of c(t, d)     float adds
// The expression is written so that no compiler contracts it into an FMA on CPU or GPU.
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"

namespace search {

struct Bm25Params {
  float k1 = 0.9f;
  float b = 0.4f;
};

struct CollectionStats {
  uint64_t num_docs = 0;      // N: documents in the whole collection (all shards)
  uint64_t total_tokens = 0;  // sum of document lengths over the whole collection
  double avgdl() const { return num_docs == 0 ? 0.0 : static_cast<double>(total_tokens) / static_cast<double>(num_docs); }
};

// REQUIRES: df <= num_docs.
inline float Bm25Idf(uint64_t num_docs, uint64_t df) {
  const double n = static_cast<double>(num_docs), d = static_cast<double>(df);
  return static_cast<float>(std::log(1.0 + (n - d + 0.5) / (d + 0.5)));
}

// The per-document length normalisation, precomputed once per document (Heo 2020 §4.3).
// avgdl == 0 only when every document is empty; then no document has postings and norm is k1*(1-b).
inline float Bm25Norm(uint32_t doc_len, double avgdl, Bm25Params p = {}) {
  const double ratio = avgdl > 0.0 ? static_cast<double>(doc_len) / avgdl : 0.0;
  return static_cast<float>(static_cast<double>(p.k1) * (1.0 - p.b + p.b * ratio));
}

SEARCH_HD inline float Bm25TermScore(float idf, uint32_t tf, float norm, float k1 = 0.9f) {
  const float t = static_cast<float>(tf);
  const float num = t * (k1 + 1.0f);
  const float den = t + norm;
  return idf * num / den;
}

}  // namespace search
