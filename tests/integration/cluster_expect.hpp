// Exact expectations for multi-process tests: the answer of LocalIndex (the single-process twin
// of a cluster) and an HTTP answer's hits compared with it (ids, docIDs, scores to float rounding).
// Thread-safety: LocalIndex searches are thread-safe; the comparisons are pure.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cluster_harness.hpp"
#include "cpu_exec/local_index.hpp"

namespace search::testing {

// A random corpus indexed once into `replicas` byte-identical directories (replica r of shard s
// opens dirs[r] + "/shard-s") and the single-process index that answers for the whole cluster.
struct ReplicatedIndex {
  TempDir dir;
  Corpus corpus;
  std::vector<std::string> dirs;
  std::unique_ptr<LocalIndex> local;

  // Fatal gtest failures on error (call from SetUpTestSuite and check local != nullptr in SetUp).
  void Build(size_t docs, uint32_t seed, uint32_t shards, uint32_t replicas) {
    corpus = WriteCorpus(dir.path(), docs, seed);
    for (uint32_t r = 0; r < replicas; ++r) dirs.push_back(dir.path() + "/index-" + std::string(1, char('a' + r)));
    const Status st = BuildTestIndex(corpus, dirs[0], shards);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (uint32_t r = 1; r < replicas; ++r) fs::copy(dirs[0], dirs[r], fs::copy_options::recursive);
    auto l = LocalIndex::Open(dirs[0]);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    local = std::move(*l);
  }
};

// Indexes `corpus` as `shards` shards at `path` and opens that as *local. Fatal gtest failures on
// error (call under ASSERT_NO_FATAL_FAILURE, or check *local afterwards).
inline void BuildAndOpen(const Corpus& corpus, const std::string& path, uint32_t shards,
                         std::unique_ptr<LocalIndex>* local) {
  const Status st = BuildTestIndex(corpus, path, shards);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto l = LocalIndex::Open(path);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  *local = std::move(*l);
}

// A random corpus indexed as `shards` shards (index3) and as one (index1), each opened as the
// LocalIndex that answers for it.
struct SharedIndex {
  TempDir dir;
  Corpus corpus;
  std::string index3, index1;
  std::unique_ptr<LocalIndex> local3, local1;

  // Fatal gtest failures on error (call from SetUpTestSuite and check local3 != nullptr in SetUp).
  void Build(size_t docs, uint32_t seed, uint32_t shards) {
    corpus = WriteCorpus(dir.path(), docs, seed);
    index3 = dir.path() + "/index3";
    index1 = dir.path() + "/index1";
    ASSERT_NO_FATAL_FAILURE(BuildAndOpen(corpus, index3, shards, &local3));
    ASSERT_NO_FATAL_FAILURE(BuildAndOpen(corpus, index1, 1, &local1));
  }
};

// Stops a cluster as an operator would: SIGTERM to the integrator, then to every live node (after
// SIGCONT, in case a test left it stopped); each must drain and exit 0 within 15 s.
template <class Nodes>
void StopGracefully(Process* integrator, Nodes& nodes) {
  if (integrator != nullptr && integrator->running()) {
    integrator->Signal(SIGTERM);
    auto st = integrator->Wait(std::chrono::seconds(15));
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "integrator: " << DescribeExit(st) << "\n"
                                                               << integrator->Logs();
  }
  for (auto& n : nodes) {
    if (!n || !n->running()) continue;
    n->Signal(SIGCONT);
    n->Signal(SIGTERM);
    auto st = n->Wait(std::chrono::seconds(15));
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "node: " << DescribeExit(st) << "\n" << n->Logs();
  }
}

// Polls /health (through `health`, a callable returning HttpResult) until every shard reports
// `replicas` replicas up; false after `limit`.
template <class Health>
bool WaitReplicasUp(Health health, uint32_t replicas, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    const HttpResult h = health();
    bool all = h.status == 200 && h.body.is_object() && h.body["shards"].is_array();
    if (all)
      for (const auto& s : h.body["shards"]) all = all && s["replicas_up"] == replicas;
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

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
