// ResultCache: LRU order, byte budget, replacement, key normalization and concurrent use.
#include "integrator/result_cache.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include "core/analyzer.hpp"
#include "core/query_parser.hpp"

namespace search {
namespace {

std::vector<MergedHit> Hits(size_t n, uint32_t seed, size_t id_len = 8) {
  std::vector<MergedHit> h;
  for (size_t i = 0; i < n; ++i)
    h.push_back(MergedHit{static_cast<uint32_t>(seed * 1000 + i), 10.0f - static_cast<float>(i), seed % 3,
                          std::string(id_len, static_cast<char>('a' + (seed + i) % 26))});
  return h;
}

TEST(ResultCacheKey, NormalizedByTheAnalyzer) {
  Analyzer an;
  const auto a = ResultCacheKey(an.AnalyzeQuery("Brown fox, the FOX!"), QueryMode::kAnd, 10);
  const auto b = ResultCacheKey(an.AnalyzeQuery("fox brown the"), QueryMode::kAnd, 10);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, ResultCacheKey(an.AnalyzeQuery("fox brown the"), QueryMode::kOr, 10));
  EXPECT_NE(a, ResultCacheKey(an.AnalyzeQuery("fox brown the"), QueryMode::kAndOr, 10));
  EXPECT_NE(a, ResultCacheKey(an.AnalyzeQuery("fox brown the"), QueryMode::kAnd, 11));
  EXPECT_NE(a, ResultCacheKey(an.AnalyzeQuery("fox brown"), QueryMode::kAnd, 10));
  // Term boundaries are part of the key: "ab c" and "a bc" differ.
  EXPECT_NE(ResultCacheKey({"ab", "c"}, QueryMode::kOr, 5), ResultCacheKey({"a", "bc"}, QueryMode::kOr, 5));
  // k cannot bleed into the terms: terms {"x"} with k=15 vs terms {"x", "1"} ... with k=5 differ.
  EXPECT_NE(ResultCacheKey({"1", "x"}, QueryMode::kOr, 5), ResultCacheKey({"x"}, QueryMode::kOr, 15));
}

// Query keys: trees by their canonical form, the count apart, never equal to a bag of words'.
TEST(ResultCacheKey, TreesAndCountsAreKeyedApart) {
  Analyzer an;
  auto query = [&](const char* text, QueryMode mode, uint32_t k, bool count) {
    auto tree = ParseQuerySyntax(text, an);
    EXPECT_TRUE(tree.ok()) << text;
    return MakeQuery(std::move(tree).value(), mode, k, count);
  };
  const std::string flat = ResultCacheKey(query("b a", QueryMode::kAnd, 10, false));
  EXPECT_EQ(flat, ResultCacheKey(an.AnalyzeQuery("a b"), QueryMode::kAnd, 10));  // as before
  EXPECT_EQ(flat, ResultCacheKey(query("+a +b", QueryMode::kOr, 10, false)));    // the same flat query
  EXPECT_NE(flat, ResultCacheKey(query("a b", QueryMode::kAnd, 10, true)));      // counted
  const std::string tree = ResultCacheKey(query("+a -b \"c d\"", QueryMode::kAnd, 10, false));
  EXPECT_EQ(tree, ResultCacheKey(query("\"c d\" -b +a +a", QueryMode::kAnd, 10, false)));  // canonical
  EXPECT_NE(tree, ResultCacheKey(query("+a -b \"c d\"", QueryMode::kOr, 10, false)));
  EXPECT_NE(tree, ResultCacheKey(query("+a -b \"c d\"", QueryMode::kAnd, 9, false)));
  EXPECT_NE(tree, ResultCacheKey(query("+a -b \"c d\"", QueryMode::kAnd, 10, true)));
  EXPECT_NE(tree, ResultCacheKey(query("+a -b \"d c\"", QueryMode::kAnd, 10, false)));
  EXPECT_NE(tree, ResultCacheKey(query("+a +b \"c d\"", QueryMode::kAnd, 10, false)));
}

TEST(ResultCache, KeepsTheTotalWithTheHits) {
  ResultCache c(1 << 20);
  ASSERT_TRUE(c.Insert("counted", Hits(3, 1), 12345));
  ASSERT_TRUE(c.Insert("plain", Hits(3, 1)));
  std::optional<uint64_t> total;
  ASSERT_TRUE(c.Lookup("counted", &total).has_value());
  EXPECT_EQ(total, 12345u);
  ASSERT_TRUE(c.Lookup("plain", &total).has_value());
  EXPECT_FALSE(total.has_value());
}

// Answers with documents: their own keys, and their sources and fragments charged to the budget.
TEST(ResultCache, SourcesAndHighlightsAreKeyedApartAndCharged) {
  Query q;
  q.terms = {"a"};
  q.k = 10;
  EXPECT_EQ(ResultCacheKey(q), ResultCacheKey(q, false, false));
  EXPECT_NE(ResultCacheKey(q, true, false), ResultCacheKey(q));
  EXPECT_NE(ResultCacheKey(q, true, false), ResultCacheKey(q, false, true));
  EXPECT_NE(ResultCacheKey(q, true, true), ResultCacheKey(q, true, false));
  auto plain = Hits(5, 1);
  auto docs = plain;
  for (auto& h : docs) {
    h.has_source = true;
    h.source = std::string(1000, 's');
    h.highlights = {std::string(200, 'f'), std::string(100, 'g')};
  }
  const size_t extra = ResultCache::EntryBytes("k", docs) - ResultCache::EntryBytes("k", plain);
  EXPECT_GE(extra, 5u * (1000 + 200 + 100));
  ResultCache c(ResultCache::EntryBytes("k", docs) + 100);
  ASSERT_TRUE(c.Insert("k", docs));
  EXPECT_EQ(c.Lookup("k"), docs);
  EXPECT_EQ(c.stats().bytes, ResultCache::EntryBytes("k", docs));
  ResultCache small(ResultCache::EntryBytes("k", docs) - 1);
  EXPECT_FALSE(small.Insert("k", docs));  // larger than the whole budget: not kept
}

TEST(ResultCache, HitReturnsWhatWasInserted) {
  ResultCache c(1 << 20);
  EXPECT_FALSE(c.Lookup("k1").has_value());
  auto h = Hits(5, 1);
  ASSERT_TRUE(c.Insert("k1", h));
  auto got = c.Lookup("k1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, h);
  auto s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, ResultCache::EntryBytes("k1", h));
}

TEST(ResultCache, EvictsLeastRecentlyUsedUnderTheBudget) {
  const auto h = Hits(10, 7);
  const size_t one = ResultCache::EntryBytes("key-0", h);
  ResultCache c(one * 3 + one / 2);  // room for three entries
  ASSERT_TRUE(c.Insert("key-0", h));
  ASSERT_TRUE(c.Insert("key-1", h));
  ASSERT_TRUE(c.Insert("key-2", h));
  ASSERT_TRUE(c.Lookup("key-0").has_value());  // key-0 becomes most recent; key-1 is now LRU
  ASSERT_TRUE(c.Insert("key-3", h));
  EXPECT_FALSE(c.Lookup("key-1").has_value());
  EXPECT_TRUE(c.Lookup("key-0").has_value());
  EXPECT_TRUE(c.Lookup("key-2").has_value());
  EXPECT_TRUE(c.Lookup("key-3").has_value());
  auto s = c.stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_LE(s.bytes, c.capacity_bytes());
}

TEST(ResultCache, ByteBudgetHoldsForRandomWorkloads) {
  std::mt19937 rng(42);
  ResultCache c(20000);
  std::map<std::string, std::vector<MergedHit>> last;  // the latest value per key
  for (int i = 0; i < 3000; ++i) {
    const std::string key = std::string("q").append(std::to_string(rng() % 200));
    if (rng() % 2) {
      auto h = Hits(rng() % 40, static_cast<uint32_t>(rng() % 1000), rng() % 40);
      const bool kept = c.Insert(key, h);
      EXPECT_EQ(kept, ResultCache::EntryBytes(key, h) <= c.capacity_bytes());
      if (kept) last[key] = h;
    } else if (auto got = c.Lookup(key)) {
      EXPECT_EQ(*got, last[key]) << key;  // never a stale or foreign value
    }
    ASSERT_LE(c.stats().bytes, c.capacity_bytes());
  }
  auto s = c.stats();
  EXPECT_GT(s.evictions, 0u);
  EXPECT_GT(s.hits, 0u);
}

TEST(ResultCache, ReplacingAnEntryKeepsTheAccountingExact) {
  ResultCache c(1 << 20);
  ASSERT_TRUE(c.Insert("a", Hits(50, 1, 40)));
  ASSERT_TRUE(c.Insert("a", Hits(2, 2)));
  auto s = c.stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, ResultCache::EntryBytes("a", Hits(2, 2)));
  EXPECT_EQ(*c.Lookup("a"), Hits(2, 2));
}

TEST(ResultCache, OversizedEntryAndZeroBudgetAreNotKept) {
  ResultCache small(100);
  EXPECT_FALSE(small.Insert("big", Hits(100, 3)));
  EXPECT_FALSE(small.Lookup("big").has_value());
  EXPECT_EQ(small.stats().rejected, 1u);
  ResultCache off(0);
  EXPECT_FALSE(off.Insert("x", {}));
  EXPECT_EQ(off.stats().entries, 0u);
}

TEST(ResultCache, ConcurrentUseKeepsInvariants) {
  ResultCache c(50000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 5000; ++i) {
        const uint32_t q = rng() % 100;
        const std::string key = std::string("k").append(std::to_string(q));
        if (rng() % 3 == 0) {
          (void)c.Insert(key, Hits(q % 20, q));  // the value is a function of the key
        } else if (auto got = c.Lookup(key)) {
          ASSERT_EQ(*got, Hits(q % 20, q));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  auto s = c.stats();
  EXPECT_LE(s.bytes, c.capacity_bytes());
  EXPECT_EQ(s.hits + s.misses, 4u * 5000 - s.inserts);
}

}  // namespace
}  // namespace search
