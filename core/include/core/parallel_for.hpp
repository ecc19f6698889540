// ParallelFor: runs fn(i) for every i in [0, n) on up to `threads` threads (the caller's
// included), handing out indexes dynamically through one atomic counter. Returns when all calls
// have returned. threads 0 counts as 1; never more threads than n.
// Exceptions: the first exception thrown by fn (on any thread) is rethrown to the caller after
// every thread has been joined; indexes not yet handed out by then are skipped. A thread that
// cannot be started (std::system_error) is not an error: the threads already running, the
// caller's included, do its share.
// Thread-safety: fn must be safe to call concurrently for different i.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
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
  std::mutex error_mu;
  std::exception_ptr error;
  auto body = [&]() noexcept {
    try {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
    } catch (...) {
      next.store(n, std::memory_order_relaxed);  // the other threads take no new index
      std::lock_guard lock(error_mu);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (size_t k = 1; k < t; ++k) {
    try {
      pool.emplace_back(body);
    } catch (const std::system_error&) {
      break;  // no more threads: the ones running share the work
    }
  }
  body();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace search
