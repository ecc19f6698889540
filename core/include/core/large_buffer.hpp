// LargeBuffer: owned memory for a large, long-lived array that is read at random (a shard's BM25
// norms, cached posting lists): 64-byte aligned (a cache line, the widest SIMD load), from
// aligned_alloc, its contents unspecified until written.
// Thread-safety: a LargeBuffer is a plain owned object; Allocate is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace search {

class LargeBuffer {
 public:
  LargeBuffer() = default;
  // `bytes` bytes, 64-byte aligned; empty (get() == nullptr) when the memory cannot be had or
  // bytes is 0.
  static LargeBuffer Allocate(size_t bytes);
  ~LargeBuffer() { Release(); }
  LargeBuffer(LargeBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  LargeBuffer& operator=(LargeBuffer&& o) noexcept {
    if (this != &o) {
      Release();
      p_ = o.p_;
      bytes_ = o.bytes_;
      o.p_ = nullptr;
    }
    return *this;
  }
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  uint8_t* get() const { return p_; }
  size_t bytes() const { return p_ ? bytes_ : 0; }

 private:
  void Release();
  uint8_t* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace search
