#include "core/large_buffer.hpp"

#include <cstdlib>

namespace search {
namespace {

constexpr size_t kAlign = 64;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

LargeBuffer LargeBuffer::Allocate(size_t bytes) {
  LargeBuffer b;
  if (bytes == 0) return b;
  b.p_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, RoundUp(bytes, kAlign)));
  b.bytes_ = bytes;
  return b;
}

void LargeBuffer::Release() {
  if (p_ == nullptr) return;
  std::free(p_);
  p_ = nullptr;
}

}  // namespace search
