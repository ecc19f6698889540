#include "core/large_buffer.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace search {
namespace {

std::atomic<bool> g_huge{false};

constexpr size_t kAlign = 64;
constexpr size_t kPage = 4096;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// An anonymous mapping of `len` bytes (a multiple of kPage) starting on a 2 MiB boundary: a span
// one huge page longer is mapped and its head and tail beyond the aligned range are given back.
void* MapAligned(size_t len) {
  const size_t span = len + kHugePageBytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto a = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(a, kHugePageBytes);
  if (aligned > a) (void)::munmap(raw, aligned - a);
  const uintptr_t end = a + span, used_end = aligned + len;
  if (end > used_end) (void)::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

void SetHugePages(bool on) { g_huge.store(on, std::memory_order_relaxed); }
bool HugePagesEnabled() { return g_huge.load(std::memory_order_relaxed); }

LargeBuffer LargeBuffer::Allocate(size_t bytes) {
  LargeBuffer b;
  if (bytes == 0) return b;
  if (HugePagesEnabled() && bytes >= kHugePageBytes) {
    const size_t len = RoundUp(bytes, kPage);
    if (void* p = MapAligned(len)) {
      // Before the first touch, so the faults take huge pages. A kernel without THP refuses the
      // advice (EINVAL): the mapping still works on small pages.
      (void)::madvise(p, len, MADV_HUGEPAGE);
      b.p_ = static_cast<uint8_t*>(p);
      b.bytes_ = bytes;
      b.mapped_ = len;
      return b;
    }
  }
  b.p_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, RoundUp(bytes, kAlign)));
  b.bytes_ = bytes;
  return b;
}

void LargeBuffer::Release() {
  if (p_ == nullptr) return;
  if (mapped_ > 0) {
    (void)::munmap(p_, mapped_);
  } else {
    std::free(p_);
  }
  p_ = nullptr;
  mapped_ = 0;
}

}  // namespace search
