// ParallelFor: runs fn(i) for every i in [0, n) on up to `threads` threads (the caller's
// included), handing out indexes dynamically. Returns when all calls have returned.
// Thread-safety: fn must be safe to call concurrently for different i.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace search {

template <class Fn>
void ParallelFor(size_t n, uint32_t threads, Fn&& fn) {
  const size_t t = std::min<size_t>(std::max<uint32_t>(threads, 1), n);
  if (t <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto body = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (size_t k = 1; k < t; ++k) pool.emplace_back(body);
  body();
  for (auto& th : pool) th.join();
}

}  // namespace search
