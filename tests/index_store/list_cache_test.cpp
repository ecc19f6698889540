// ListCache: LRU order, the byte budget, counters, replacement and concurrent use; CachedList:
// aligned copies and Corruption on damaged bytes.
#include "index_store/list_cache.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

namespace search {
namespace {

// A valid list of `n` postings (so its size grows with n).
std::string Blob(uint32_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> docs, tfs;
  uint32_t d = 0;
  for (uint32_t i = 0; i < n; ++i) {
    d += 1 + rng() % 50;
    docs.push_back(d);
    tfs.push_back(1 + rng() % 4);
  }
  auto blob = EncodeList(docs, tfs, 0, [](uint32_t, uint32_t tf) { return static_cast<float>(tf); });
  EXPECT_TRUE(blob.ok());
  return *blob;
}

std::shared_ptr<const CachedList> Make(const std::string& term, const std::string& blob) {
  auto list = CachedList::Make(term, blob);
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  return *list;
}

size_t Charge(const CachedList& l) {
  return sizeof(CachedList) + l.size;
}

TEST(CachedListTest, AlignedCopyAndParsedView) {
  const std::string blob = Blob(300);
  std::string shifted = "xyz";  // source at an odd address
  shifted += blob;
  auto list = CachedList::Make("term", std::string_view(shifted).substr(3));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)->term, "term");
  EXPECT_EQ((*list)->bytes(), blob);
  EXPECT_NE((*list)->bytes().data(), shifted.data() + 3);  // a copy
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*list)->storage.get()) % 64, 0u);
  EXPECT_EQ((*list)->view.count(), 300u);
  EXPECT_EQ((*list)->view.bytes().data(), (*list)->bytes().data());
  std::vector<uint32_t> docs(kBlockSize);
  EXPECT_TRUE((*list)->view.DecodeDocs(0, docs.data()).ok());
}

TEST(CachedListTest, DamagedBytesAreCorruptionNamingTheTerm) {
  const std::string blob = Blob(200);
  for (size_t pos : {size_t{40}, blob.size() / 2, blob.size() - 1}) {
    std::string bad = blob;
    bad[pos] ^= 0x08;
    auto list = CachedList::Make("zebra", bad);
    ASSERT_FALSE(list.ok()) << pos;
    EXPECT_EQ(list.status().code(), StatusCode::kCorruption);
    EXPECT_NE(list.status().message().find("'zebra'"), std::string::npos) << list.status().message();
  }
  for (size_t len : {size_t{0}, size_t{7}, size_t{32}, blob.size() - 4}) {
    auto list = CachedList::Make("t", blob.substr(0, len));
    ASSERT_FALSE(list.ok()) << len;
    EXPECT_EQ(list.status().code(), StatusCode::kCorruption);
  }
}

TEST(ListCacheTest, EvictsLeastRecentlyUsedFirst) {
  auto a = Make("a", Blob(100, 1)), b = Make("b", Blob(100, 2)), c = Make("c", Blob(100, 3)),
       d = Make("d", Blob(100, 4));
  // Room for three of them, not four.
  ListCache cache(Charge(*a) + Charge(*b) + Charge(*c) + Charge(*d) - 1);
  cache.Insert(a);
  cache.Insert(b);
  cache.Insert(c);
  EXPECT_EQ(cache.Lookup("a"), a);  // a is now the newest: b is the oldest
  cache.Insert(d);
  EXPECT_EQ(cache.Lookup("b"), nullptr);
  EXPECT_EQ(cache.Lookup("a"), a);
  EXPECT_EQ(cache.Lookup("c"), c);
  EXPECT_EQ(cache.Lookup("d"), d);
  // By recency a is now the oldest (then c, then d): inserting b evicts a.
  cache.Insert(b);
  EXPECT_EQ(cache.Lookup("a"), nullptr);
  EXPECT_NE(cache.Lookup("c"), nullptr);
  const auto s = cache.stats();
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.inserts, 5u);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.bytes, Charge(*b) + Charge(*c) + Charge(*d));
}

TEST(ListCacheTest, ByteBudgetAndCounters) {
  std::vector<std::shared_ptr<const CachedList>> lists;
  size_t sum = 0;
  for (uint32_t i = 0; i < 50; ++i) {
    std::string name = "t";
    name += std::to_string(i);
    lists.push_back(Make(name, Blob(1 + i * 37, i)));
    sum += Charge(*lists.back());
  }
  const size_t capacity = sum / 3;
  // One exact LRU, and the budget split over 8 shards by term hash: either way the budget holds.
  for (size_t shards : {size_t{1}, size_t{8}}) {
    SCOPED_TRACE(shards);
    ListCache cache(capacity, shards);
    EXPECT_EQ(cache.shards(), shards);
    EXPECT_EQ(cache.stats().capacity_bytes, capacity);
    uint64_t lookups = 0, hits = 0;
    std::mt19937 rng(5);
    for (int round = 0; round < 2000; ++round) {
      const auto& l = lists[rng() % lists.size()];
      auto got = cache.Lookup(l->term);
      ++lookups;
      if (got) {
        ++hits;
        EXPECT_EQ(got, l);
      } else {
        cache.Insert(l);
      }
      const auto s = cache.stats();
      ASSERT_LE(s.bytes, capacity);
    }
    const auto s = cache.stats();
    EXPECT_EQ(s.hits, hits);
    EXPECT_EQ(s.misses, lookups - hits);
    EXPECT_EQ(s.inserts, lookups - hits);
    EXPECT_EQ(s.inserts - s.evictions, s.entries);
    size_t held = 0;
    for (const auto& l : lists) {
      if (cache.Lookup(l->term)) held += Charge(*l);
    }
    EXPECT_EQ(held, cache.stats().bytes);
    cache.Clear();
    EXPECT_EQ(cache.stats().entries, 0u);
    EXPECT_EQ(cache.stats().bytes, 0u);
    EXPECT_EQ(cache.Lookup("t0"), nullptr);
  }
}

// The shard count follows the budget (one per kMinShardBytes, a power of two, up to kMaxShards),
// so small caches stay one exact LRU; no memory is reserved up front.
TEST(ListCacheTest, ShardsFollowTheBudget) {
  EXPECT_EQ(ListCache(0).shards(), 1u);
  EXPECT_EQ(ListCache(ListCache::kMinShardBytes).shards(), 1u);
  EXPECT_EQ(ListCache(2 * ListCache::kMinShardBytes - 1).shards(), 1u);
  EXPECT_EQ(ListCache(2 * ListCache::kMinShardBytes).shards(), 2u);
  EXPECT_EQ(ListCache(7 * ListCache::kMinShardBytes).shards(), 4u);
  EXPECT_EQ(ListCache(size_t{1} << 40).shards(), ListCache::kMaxShards);
  EXPECT_EQ(ListCache(100, 3).shards(), 3u);
  // Each shard's part of the budget: a list larger than it is not kept, one under it is.
  auto a = Make("a", Blob(300, 1));
  ListCache split(Charge(*a) * 4 - 4, 4);  // every shard's part just under a's charge
  split.Insert(a);
  EXPECT_EQ(split.Lookup("a"), nullptr);
  ListCache roomy(Charge(*a) * 4, 4);
  roomy.Insert(a);
  EXPECT_EQ(roomy.Lookup("a"), a);
  EXPECT_EQ(roomy.stats().bytes, Charge(*a));
}

TEST(ListCacheTest, OversizedListsAreNotKeptAndReplacementUpdatesBytes) {
  auto small = Make("x", Blob(10)), big = Make("x", Blob(2000));
  ListCache cache(Charge(*small) + 100);
  cache.Insert(small);
  EXPECT_EQ(cache.stats().bytes, Charge(*small));
  cache.Insert(big);  // larger than the budget: replaces nothing kept, the old entry is gone
  EXPECT_EQ(cache.Lookup("x"), nullptr);
  EXPECT_EQ(cache.stats().bytes, 0u);
  EXPECT_EQ(big->view.count(), 2000u);  // still usable by its holder
  auto small2 = Make("x", Blob(12));
  cache.Insert(small);
  cache.Insert(small2);  // same term: replaced, not duplicated
  EXPECT_EQ(cache.Lookup("x"), small2);
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().bytes, Charge(*small2));
}

TEST(ListCacheTest, EvictedListsStayValidForHolders) {
  auto a = Make("a", Blob(500, 1));
  const std::string copy(a->bytes());
  ListCache cache(Charge(*a));
  cache.Insert(a);
  auto held = cache.Lookup("a");
  a.reset();
  cache.Insert(Make("b", Blob(500, 2)));  // evicts a
  EXPECT_EQ(cache.Lookup("a"), nullptr);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->bytes(), copy);
}

TEST(ListCacheTest, ConcurrentLookupsAndInserts) {
  std::vector<std::shared_ptr<const CachedList>> lists;
  size_t sum = 0;
  for (uint32_t i = 0; i < 64; ++i) {
    std::string name = "term";
    name += std::to_string(i);
    lists.push_back(Make(name, Blob(1 + (i * 13) % 400, i)));
    sum += Charge(*lists.back());
  }
  for (size_t shards : {size_t{1}, size_t{8}}) {
    SCOPED_TRACE(shards);
    ListCache cache(sum / 2, shards);
    constexpr int kThreads = 4, kOps = 20000;
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(100 + t);
        for (int i = 0; i < kOps; ++i) {
          const auto& l = lists[rng() % lists.size()];
          auto got = cache.Lookup(l->term);
          if (got && got != l) wrong.fetch_add(1);
          if (!got) cache.Insert(l);
          if (i % 1000 == 0) (void)cache.stats();
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
    const auto s = cache.stats();
    EXPECT_EQ(s.hits + s.misses, uint64_t{kThreads} * kOps);
    EXPECT_LE(s.bytes, sum / 2);
    // Two threads missing one term both insert it; the second replaces the first uncounted.
    EXPECT_GE(s.inserts - s.evictions, s.entries);
    EXPECT_GT(s.hits, 0u);
  }
}

}  // namespace
}  // namespace search
