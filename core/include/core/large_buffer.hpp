// LargeBuffer: memory for a large, long-lived array that is read at random (a shard's BM25 norms,
// the longest cached posting lists), optionally on transparent huge pages. With 4 KiB pages every
// scored document's norm and every skipped-to block of a long list is a TLB miss of its own; one
// 2 MiB page covers 512 of them. SetHugePages(true) (search-node and searchctl bench
// `--huge-pages`) puts buffers of at least kHugePageBytes in an anonymous mapping aligned to 2 MiB
// and advised MADV_HUGEPAGE before it is touched, which a kernel in THP's "madvise" mode (the
// common default) backs with huge pages; smaller buffers, and all of them when it is off (the
// default), come from aligned_alloc. Either way the memory is 64-byte aligned and its contents
// are unspecified until written.
// Thread-safety: SetHugePages is meant for start-up, before buffers are allocated (a buffer keeps
// the kind it was allocated with); a LargeBuffer is a plain owned object.
#pragma once

#include <cstddef>
#include <cstdint>

namespace search {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// The process-wide choice for buffers allocated from now on (default: off).
void SetHugePages(bool on);
bool HugePagesEnabled();

class LargeBuffer {
 public:
  LargeBuffer() = default;
  // `bytes` bytes, 64-byte aligned; empty (get() == nullptr) when the memory cannot be had or
  // bytes is 0.
  static LargeBuffer Allocate(size_t bytes);
  ~LargeBuffer() { Release(); }
  LargeBuffer(LargeBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_), mapped_(o.mapped_) { o.p_ = nullptr; }
  LargeBuffer& operator=(LargeBuffer&& o) noexcept {
    if (this != &o) {
      Release();
      p_ = o.p_;
      bytes_ = o.bytes_;
      mapped_ = o.mapped_;
      o.p_ = nullptr;
    }
    return *this;
  }
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  uint8_t* get() const { return p_; }
  size_t bytes() const { return p_ ? bytes_ : 0; }
  // True when the buffer is a mapping advised for huge pages (whether the kernel backs it with
  // them is its own choice: /proc/self/smaps AnonHugePages).
  bool huge() const { return p_ != nullptr && mapped_ > 0; }

 private:
  void Release();
  uint8_t* p_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_ = 0;  // the mapping's length when mmap'd, else 0
};

}  // namespace search
