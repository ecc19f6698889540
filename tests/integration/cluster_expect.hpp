// Exact expectations for multi-process tests: the answer of LocalIndex (the single-process twin
// of a cluster) and an HTTP answer's hits compared with it (ids, docIDs, scores to float rounding).
// Thread-safety: LocalIndex searches are thread-safe; the comparisons are pure.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cluster_harness.hpp"
#include "cpu_exec/local_index.hpp"

namespace search::testing {

// The exact hits of a LocalIndex, as (external id, docID, score).
inline std::vector<ExternalHit> ExpectedHits(const LocalIndex& index, const std::string& q, QueryMode mode,
                                             uint32_t k) {
  auto r = index.Search(q, mode, k);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  auto hits = index.Resolve(r->hits);
  EXPECT_TRUE(hits.ok());
  return hits.ok() ? *hits : std::vector<ExternalHit>{};
}

// Empty when `got` (an answer's hits.hits array) equals `want`; else the first difference.
inline std::string HitsDiffer(const json& got, const std::vector<ExternalHit>& want) {
  if (!got.is_array()) return "hits is not an array";
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " hits, want " + std::to_string(want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i]["_id"] != want[i].id || got[i]["_doc"] != want[i].doc)
      return "rank " + std::to_string(i) + ": got " + got[i].dump() + ", want " + want[i].id;
    const double s = got[i]["_score"].get<double>(), w = want[i].score;
    if (std::abs(s - w) > 1e-6 * std::max(1.0, std::abs(w)))
      return "rank " + std::to_string(i) + ": score " + std::to_string(s) + ", want " + std::to_string(w);
  }
  return "";
}

inline void ExpectSameHits(const json& got, const std::vector<ExternalHit>& want, const std::string& what) {
  const std::string diff = HitsDiffer(got, want);
  ASSERT_TRUE(diff.empty()) << what << ": " << diff;
}

}  // namespace search::testing
