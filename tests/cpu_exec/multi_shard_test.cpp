// A document-partitioned index (contiguous docID ranges, lists split per shard, idf from the global
// df, norms per shard) merged with MergeTopK answers exactly what one shard answers: same
// documents, same order, bit-identical scores.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "exec_fixture.hpp"

namespace search::testing {
namespace {

// What a cluster does for one query: every shard runs the mode, the top-k lists are merged, and
// andor falls back to or when the collection's and-query (the shards' hits summed) has < k hits.
std::vector<ScoredDoc> ClusterSearch(const Corpus& c, const std::vector<MemShard>& shards, const TestQuery& q,
                                     QueryMode mode, uint32_t k) {
  auto run = [&](QueryMode m) {
    std::vector<std::vector<ScoredDoc>> per;
    for (const MemShard& s : shards) {
      const std::vector<TermInput> in = Inputs(c, s, q);
      auto r = ExecuteQuery(in, std::span<const float>(s.norms), s.doc_begin, m, k);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      per.push_back(r.ok() ? r->hits : std::vector<ScoredDoc>{});
    }
    return MergeTopK(per, k);
  };
  if (mode != QueryMode::kAndOr) return run(mode);
  std::vector<ScoredDoc> hits = run(QueryMode::kAnd);
  return hits.size() >= k ? hits : run(QueryMode::kOr);
}

TEST(MultiShard, MergedShardsEqualOneShardExactly) {
  CorpusOptions o;
  o.num_docs = 5000;
  o.vocab = 2000;
  o.seed = 77;
  const Corpus c = MakeCorpus(o);
  const MemShard whole = BuildShard(c, 0, c.num_docs);
  std::mt19937_64 rng(1234);
  std::vector<TestQuery> queries;
  for (int i = 0; i < 100; ++i) queries.push_back(RandomQuery(c, rng));
  for (uint32_t num_shards : {2u, 3u, 7u}) {
    std::vector<MemShard> shards;
    for (uint32_t i = 0; i < num_shards; ++i) {
      const uint32_t begin = static_cast<uint32_t>(uint64_t{c.num_docs} * i / num_shards);
      const uint32_t end = static_cast<uint32_t>(uint64_t{c.num_docs} * (i + 1) / num_shards);
      shards.push_back(BuildShard(c, begin, end));
    }
    for (const TestQuery& q : queries) {
      for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
        for (uint32_t k : {1u, 10u, 100u, 1000u}) {
          const std::vector<TermInput> in = Inputs(c, whole, q);
          auto one = ExecuteQuery(in, std::span<const float>(whole.norms), 0, mode, k);
          ASSERT_TRUE(one.ok());
          EXPECT_EQ(ClusterSearch(c, shards, q, mode, k), one->hits)
              << num_shards << " shards, " << QueryModeName(mode) << " k=" << k;
          if (HasFailure()) return;
        }
      }
    }
  }
}

}  // namespace
}  // namespace search::testing
