// LargeBuffer: 64-byte aligned at every size, the whole buffer usable, empty for 0 bytes; moves
// hand the memory over.
#include "core/large_buffer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace search {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Writes a pattern over the whole buffer and reads it back.
void ExpectUsable(const LargeBuffer& b) {
  uint8_t* p = b.get();
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < b.bytes(); ++i) p[i] = static_cast<uint8_t>(i * 31 + 7);
  size_t bad = 0;
  for (size_t i = 0; i < b.bytes(); ++i) bad += p[i] != static_cast<uint8_t>(i * 31 + 7);
  EXPECT_EQ(bad, 0u);
}

TEST(LargeBufferTest, AlwaysAligned) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, 2 * kMiB, 6 * kMiB + 5}) {
    LargeBuffer b = LargeBuffer::Allocate(bytes);
    ASSERT_NE(b.get(), nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % 64, 0u) << bytes;
    EXPECT_EQ(b.bytes(), bytes);
    ExpectUsable(b);
  }
  EXPECT_EQ(LargeBuffer::Allocate(0).get(), nullptr);
  EXPECT_EQ(LargeBuffer::Allocate(0).bytes(), 0u);
}

TEST(LargeBufferTest, MovesHandTheMemoryOver) {
  LargeBuffer a = LargeBuffer::Allocate(2 * kMiB);
  uint8_t* p = a.get();
  ASSERT_NE(p, nullptr);
  LargeBuffer b(std::move(a));
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(a.bytes(), 0u);     // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.get(), p);
  LargeBuffer c = LargeBuffer::Allocate(100);
  c = std::move(b);  // c's own small buffer is freed
  EXPECT_EQ(c.get(), p);
  EXPECT_EQ(c.bytes(), 2 * kMiB);
  ExpectUsable(c);
  c = LargeBuffer();
  EXPECT_EQ(c.get(), nullptr);
}

}  // namespace
}  // namespace search
