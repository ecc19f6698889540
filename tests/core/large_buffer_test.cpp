// LargeBuffer: 64-byte alignment either way; with SetHugePages(true) a buffer of 2 MiB or more is
// a 2 MiB-aligned mapping advised MADV_HUGEPAGE (its smaps VmFlags say "hg"), smaller ones and
// every one with it off are not; moves hand the memory over, and the whole buffer is usable.
#include "core/large_buffer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace search {
namespace {

// Restores the process-wide choice after each test.
class LargeBufferTest : public ::testing::Test {
 protected:
  void TearDown() override { SetHugePages(false); }
};

// The VmFlags of the /proc/self/smaps mapping that holds p; empty when none does.
std::string VmFlagsAt(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  const auto want = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    unsigned long start = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> start >> dash >> end && dash == '-') {
      in = start <= want && want < end;
      continue;
    }
    if (in && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool KernelHasThp() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  return f.good();
}

// Writes a pattern over the whole buffer and reads it back.
void ExpectUsable(const LargeBuffer& b) {
  uint8_t* p = b.get();
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < b.bytes(); ++i) p[i] = static_cast<uint8_t>(i * 31 + 7);
  size_t bad = 0;
  for (size_t i = 0; i < b.bytes(); ++i) bad += p[i] != static_cast<uint8_t>(i * 31 + 7);
  EXPECT_EQ(bad, 0u);
}

TEST_F(LargeBufferTest, OffByDefaultAndAlwaysAligned) {
  EXPECT_FALSE(HugePagesEnabled());
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, kHugePageBytes, 3 * kHugePageBytes + 5}) {
    LargeBuffer b = LargeBuffer::Allocate(bytes);
    ASSERT_NE(b.get(), nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % 64, 0u) << bytes;
    EXPECT_EQ(b.bytes(), bytes);
    EXPECT_FALSE(b.huge()) << bytes;
    ExpectUsable(b);
  }
  EXPECT_EQ(LargeBuffer::Allocate(0).get(), nullptr);
}

TEST_F(LargeBufferTest, OnlyBuffersOfAHugePageOrMoreAreMappedForHugePages) {
  SetHugePages(true);
  EXPECT_TRUE(HugePagesEnabled());
  LargeBuffer small = LargeBuffer::Allocate(kHugePageBytes - 64);
  ASSERT_NE(small.get(), nullptr);
  EXPECT_FALSE(small.huge());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.get()) % 64, 0u);
  for (size_t bytes : {kHugePageBytes, 2 * kHugePageBytes + 4097}) {
    LargeBuffer big = LargeBuffer::Allocate(bytes);
    ASSERT_NE(big.get(), nullptr) << bytes;
    EXPECT_TRUE(big.huge()) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big.get()) % kHugePageBytes, 0u) << bytes;
    EXPECT_EQ(big.bytes(), bytes);
    ExpectUsable(big);
    if (KernelHasThp()) {
      const std::string flags = VmFlagsAt(big.get());
      EXPECT_NE(flags.find(" hg"), std::string::npos) << "no MADV_HUGEPAGE on the mapping: " << flags;
    }
  }
  // A buffer keeps its kind after the switch turns off, and is freed as that kind.
  LargeBuffer kept = LargeBuffer::Allocate(kHugePageBytes);
  SetHugePages(false);
  EXPECT_TRUE(kept.huge());
  ExpectUsable(kept);
  EXPECT_FALSE(LargeBuffer::Allocate(kHugePageBytes).huge());
}

TEST_F(LargeBufferTest, MovesHandTheMemoryOver) {
  SetHugePages(true);
  LargeBuffer a = LargeBuffer::Allocate(kHugePageBytes);
  uint8_t* p = a.get();
  ASSERT_NE(p, nullptr);
  LargeBuffer b(std::move(a));
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(a.bytes(), 0u);     // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(a.huge());       // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.get(), p);
  EXPECT_TRUE(b.huge());
  LargeBuffer c = LargeBuffer::Allocate(100);
  c = std::move(b);  // c's own small buffer is freed
  EXPECT_EQ(c.get(), p);
  EXPECT_EQ(c.bytes(), kHugePageBytes);
  ExpectUsable(c);
  c = LargeBuffer();
  EXPECT_EQ(c.get(), nullptr);
}

}  // namespace
}  // namespace search
