// ShardListCacheNeed (what the list cache is charged for every list of a shard, read from table
// properties) and PlanListCache (that need sized against a made-up MemAvailable, shared out by
// shard) over shards written with ShardWriter.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "index_store/shard_store.hpp"
#include "shard_fixture.hpp"

namespace search {
namespace {

using testing::Corpus;
using testing::MakeCorpus;
using testing::TempDir;
using testing::WriteShard;

uint64_t ExpectedNeed(const Corpus& c) {
  uint64_t need = 0;
  for (const auto& td : c.terms) need += td.blob.size() + sizeof(CachedList);
  return need;
}

TEST(ListCachePlanTest, TheNeedIsWhatTheCacheIsChargedForEveryList) {
  TempDir dir;
  const Corpus c = MakeCorpus(7, 0, 3000, 9000, 300);
  ASSERT_TRUE(WriteShard(c, dir / "shard").ok());
  auto need = ShardListCacheNeed(dir / "shard");
  ASSERT_TRUE(need.ok()) << need.status().ToString();
  EXPECT_EQ(*need, ExpectedNeed(c));

  // Every list through a reader whose cache is sized by the plan: all of them stay.
  auto plan = PlanListCache({dir / "shard"}, uint64_t{64} << 30);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_GE(plan->per_shard.at(0), *need);
  ShardReaderOptions options;
  options.list_cache_bytes = plan->per_shard.at(0);
  auto reader = ShardReader::Open(dir / "shard", options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  for (const auto& td : c.terms) ASSERT_TRUE((*reader)->GetList(td.term).ok()) << td.term;
  const ListCacheStats stats = (*reader)->list_cache().stats();
  EXPECT_EQ(stats.bytes, *need);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.entries, c.terms.size());
}

TEST(ListCachePlanTest, SharesTheBudgetByNeed) {
  TempDir dir;
  const Corpus small = MakeCorpus(1, 0, 1000, 4000, 50);
  const Corpus large = MakeCorpus(2, 1000, 4000, 4000, 400);
  ASSERT_TRUE(WriteShard(small, dir / "shard-0").ok());
  ASSERT_TRUE(WriteShard(large, dir / "shard-1").ok());
  const std::vector<std::string> shards = {dir / "shard-0", dir / "shard-1"};
  const uint64_t need0 = ExpectedNeed(small), need1 = ExpectedNeed(large);

  auto roomy = PlanListCache(shards, uint64_t{64} << 30);
  ASSERT_TRUE(roomy.ok()) << roomy.status().ToString();
  EXPECT_EQ(roomy->total.needed, need0 + need1);
  EXPECT_EQ(roomy->total.bytes, need0 + need1 + (need0 + need1) / kListCacheHeadroomDivisor);
  ASSERT_EQ(roomy->per_shard.size(), 2u);
  EXPECT_GE(roomy->per_shard[0], need0);
  EXPECT_GE(roomy->per_shard[1], need1);
  EXPECT_LE(roomy->per_shard[0] + roomy->per_shard[1], roomy->total.bytes);

  // MemAvailable of the needs: half of it, shared in proportion.
  auto tight = PlanListCache(shards, need0 + need1);
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->total.bytes, (need0 + need1) / 2);
  EXPECT_LE(tight->per_shard[0] + tight->per_shard[1], tight->total.bytes);
  EXPECT_NEAR(static_cast<double>(tight->per_shard[0]), need0 / 2.0, 2.0);
  EXPECT_NEAR(static_cast<double>(tight->per_shard[1]), need1 / 2.0, 2.0);
  EXPECT_NE(tight->total.Describe("list cache").find("of 2 shards"), std::string::npos);
}

TEST(ListCachePlanTest, AnEmptyShardNeedsNothingAndANonShardIsAnError) {
  TempDir dir;
  const Corpus empty = MakeCorpus(3, 0, 0, 10, 0);
  ASSERT_TRUE(WriteShard(empty, dir / "empty").ok());
  auto need = ShardListCacheNeed(dir / "empty");
  ASSERT_TRUE(need.ok()) << need.status().ToString();
  EXPECT_EQ(*need, 0u);
  EXPECT_FALSE(ShardListCacheNeed(dir / "missing").ok());
  EXPECT_FALSE(PlanListCache({dir / "empty", dir / "missing"}, uint64_t{1} << 30).ok());
}

}  // namespace
}  // namespace search
