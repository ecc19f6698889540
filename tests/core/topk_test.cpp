#include "core/topk.hpp"

#include <gtest/gtest.h>

#include <random>

#include "core/bm25.hpp"
#include "core/query.hpp"

namespace search {
namespace {

std::vector<ScoredDoc> SortAllTruncate(std::vector<ScoredDoc> all, uint32_t k) {
  std::sort(all.begin(), all.end(), [](const ScoredDoc& a, const ScoredDoc& b) {
    return a.score != b.score ? a.score > b.score : a.doc < b.doc;
  });
  if (all.size() > k) all.resize(k);
  return all;
}

TEST(TopKTest, MatchesFullSortWithTiesBySmallerDoc) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const uint32_t k = 1 + rng() % 50;
    const int n = static_cast<int>(rng() % 300);
    std::vector<ScoredDoc> all;
    std::vector<uint32_t> docs(n);
    for (int i = 0; i < n; ++i) docs[i] = static_cast<uint32_t>(i);
    std::shuffle(docs.begin(), docs.end(), rng);  // arrival order is not docID order
    TopK top(k);
    for (uint32_t d : docs) {
      float s = static_cast<float>(rng() % 8);  // many ties
      all.push_back({d, s});
      top.Push(d, s);
    }
    EXPECT_EQ(top.TakeSorted(), SortAllTruncate(all, k));
  }
}

TEST(TopKTest, ThresholdIsMinusInfinityUntilFull) {
  TopK top(2);
  EXPECT_TRUE(std::isinf(top.Threshold()));
  top.Push(1, 3.0f);
  EXPECT_TRUE(std::isinf(top.Threshold()));
  top.Push(2, 5.0f);
  EXPECT_EQ(top.Threshold(), 3.0f);
  top.Push(3, 3.0f);  // tie with the held 3.0 at doc 1: the smaller docID stays
  auto out = top.TakeSorted();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].doc, 1u);
}

TEST(TopKTest, MergeEqualsGlobalSort) {
  std::mt19937 rng(11);
  std::vector<std::vector<ScoredDoc>> shards(4);
  std::vector<ScoredDoc> all;
  for (uint32_t d = 0; d < 400; ++d) {
    ScoredDoc sd{d, static_cast<float>(rng() % 20)};
    shards[d % 4].push_back(sd);
    all.push_back(sd);
  }
  for (auto& s : shards) s = SortAllTruncate(s, 10);
  EXPECT_EQ(MergeTopK(shards, 10), SortAllTruncate(all, 10));
}

TEST(Bm25Test, LuceneIdfAndTermScore) {
  // N = 10, df = 2: idf = ln(1 + 8.5 / 2.5)
  EXPECT_NEAR(Bm25Idf(10, 2), std::log(1.0 + 8.5 / 2.5), 1e-6);
  const double avgdl = 5.0;
  const float norm = Bm25Norm(10, avgdl);
  EXPECT_NEAR(norm, 0.9 * (1 - 0.4 + 0.4 * 10 / 5.0), 1e-6);
  const float s = Bm25TermScore(2.0f, 3, norm);
  EXPECT_NEAR(s, 2.0 * 3 * 1.9 / (3 + 0.9 * 1.4), 1e-5);
}

TEST(QueryTest, ModesAndK) {
  EXPECT_EQ(*ParseQueryMode("andor"), QueryMode::kAndOr);
  EXPECT_FALSE(ParseQueryMode("xor").ok());
  EXPECT_TRUE(ValidateK(1).ok());
  EXPECT_TRUE(ValidateK(10000).ok());
  EXPECT_FALSE(ValidateK(0).ok());
  EXPECT_FALSE(ValidateK(10001).ok());
}

}  // namespace
}  // namespace search
