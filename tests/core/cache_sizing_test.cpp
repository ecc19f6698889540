// SizeListCache on made-up machines (all the lists where they fit in the share of MemAvailable,
// else the share; the old fixed size without MemAvailable) and ParseMemAvailable on meminfo texts.
#include "core/cache_sizing.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace search {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(SizeListCache, HoldsEveryListWhenTheyFitInTheShare) {
  const CacheSizing s = SizeListCache(12 * kGiB, "lists column family", 100 * kGiB);
  EXPECT_EQ(s.bytes, 12 * kGiB + 12 * kGiB / kListCacheHeadroomDivisor);
  EXPECT_EQ(s.needed, 12 * kGiB);
  EXPECT_NE(s.reason.find("every list"), std::string::npos) << s.reason;
  // Exactly at the share still fits, without the headroom that the share has no room for.
  EXPECT_EQ(SizeListCache(50 * kGiB, "x", 100 * kGiB).bytes, 50 * kGiB);
  EXPECT_EQ(SizeListCache(48 * kGiB, "x", 100 * kGiB).bytes, 50 * kGiB);
}

TEST(SizeListCache, TakesTheShareWhenTheListsDoNotFit) {
  const CacheSizing s = SizeListCache(12 * kGiB, "lists column family", 16 * kGiB);
  EXPECT_EQ(s.bytes, 8 * kGiB);
  EXPECT_NE(s.reason.find("more than 50% of MemAvailable 16384 MiB: capped"), std::string::npos) << s.reason;
  EXPECT_EQ(SizeListCache(12 * kGiB, "x", 16 * kGiB, 0.25).bytes, 4 * kGiB);
  EXPECT_EQ(SizeListCache(12 * kGiB, "x", 16 * kGiB, 1.0).bytes, 13 * kGiB + kGiB / 2);
}

TEST(SizeListCache, WithoutMemAvailableKeepsTheFallbackAtMost) {
  EXPECT_EQ(SizeListCache(12 * kGiB, "x", std::nullopt).bytes, kListCacheFallbackBytes);
  EXPECT_EQ(SizeListCache(3 * kMiB, "x", std::nullopt).bytes, 3 * kMiB);
  EXPECT_NE(SizeListCache(12 * kGiB, "x", std::nullopt).reason.find("unreadable"), std::string::npos);
}

TEST(SizeListCache, AnEmptyShardNeedsNothing) {
  EXPECT_EQ(SizeListCache(0, "x", 16 * kGiB).bytes, 0u);
  EXPECT_EQ(SizeListCache(0, "x", 0).bytes, 0u);
}

TEST(SizeListCache, DescribeIsOneLineWithSizeSourceAndReason) {
  const std::string line = SizeListCache(12 * kGiB, "lists column family", 16 * kGiB).Describe("list cache");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("list cache 8192 MiB: the lists need 12288 MiB, more than 50%", 0), 0u) << line;
  EXPECT_NE(line.find("(from lists column family)"), std::string::npos) << line;
}

TEST(SizeGpuListCache, HalfOfTheFreeMemorySharedByShards) {
  EXPECT_EQ(SizeGpuListCache(140 * kGiB, 1).bytes, 70 * kGiB);
  EXPECT_EQ(SizeGpuListCache(140 * kGiB, 4).bytes, 70 * kGiB / 4);
  EXPECT_EQ(SizeGpuListCache(140 * kGiB, 0).bytes, 70 * kGiB);  // no shard counts as one
  EXPECT_NE(SizeGpuListCache(140 * kGiB, 4).Describe("GPU list cache").find("shared by 4 shards"), std::string::npos);
}

TEST(ParseMemAvailable, ReadsTheKibLine) {
  const std::string meminfo =
      "MemTotal:       131891540 kB\n"
      "MemFree:         1203400 kB\n"
      "MemAvailable:   98765432 kB\n"
      "Buffers:          123456 kB\n";
  ASSERT_TRUE(ParseMemAvailable(meminfo).has_value());
  EXPECT_EQ(*ParseMemAvailable(meminfo), uint64_t{98765432} * 1024);
  EXPECT_EQ(*ParseMemAvailable("MemAvailable: 1 kB"), 1024u);
}

TEST(ParseMemAvailable, RejectsWhatItCannotRead) {
  EXPECT_FALSE(ParseMemAvailable("").has_value());
  EXPECT_FALSE(ParseMemAvailable("MemTotal: 100 kB\nMemFree: 50 kB\n").has_value());
  EXPECT_FALSE(ParseMemAvailable("MemAvailable: lots kB\n").has_value());
  EXPECT_FALSE(ParseMemAvailable("MemAvailable: 100 MB\n").has_value());
  EXPECT_FALSE(ParseMemAvailable("MemAvailable: 99999999999999999999 kB\n").has_value());
}

TEST(CgroupMemoryRoom, TheLimitLessWhatIsUsed) {
  EXPECT_EQ(CgroupMemoryRoom("8589934592\n", "1073741824\n"), uint64_t{7} << 30);
  EXPECT_EQ(CgroupMemoryRoom("100", "150"), 0u);  // over its limit (reclaim pending): no room
  EXPECT_FALSE(CgroupMemoryRoom("max\n", "1073741824\n").has_value());  // no limit
  EXPECT_FALSE(CgroupMemoryRoom("", "").has_value());                    // no such files
  EXPECT_FALSE(CgroupMemoryRoom("12abc", "1").has_value());
}

TEST(MemAvailableBytes, ReadsThisMachine) {
  const auto m = MemAvailableBytes();
  ASSERT_TRUE(m.has_value()) << "/proc/meminfo has no MemAvailable";
  EXPECT_GT(*m, 0u);
}

}  // namespace
}  // namespace search
