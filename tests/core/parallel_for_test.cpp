#include "core/parallel_for.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace search {
namespace {

// Every index in [0, n) is run exactly once, for thread counts below, at and above n.
TEST(ParallelForTest, RunsEveryIndexOnce) {
  for (size_t n : {1u, 2u, 7u, 1000u}) {
    for (uint32_t threads : {0u, 1u, 2u, 4u, 16u}) {
      std::vector<std::atomic<int>> calls(n);
      ParallelFor(n, threads, [&](size_t i) { calls[i].fetch_add(1, std::memory_order_relaxed); });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(calls[i].load(), 1) << "n " << n << " threads " << threads << " i " << i;
    }
  }
}

// More threads than indexes: no more than n threads run, and each index still runs once.
TEST(ParallelForTest, MoreThreadsThanIndexes) {
  constexpr size_t kN = 3;
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::vector<std::atomic<int>> calls(kN);
  ParallelFor(kN, 64, [&](size_t i) {
    calls[i].fetch_add(1);
    std::lock_guard lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  for (size_t i = 0; i < kN; ++i) EXPECT_EQ(calls[i].load(), 1);
  EXPECT_LE(ids.size(), kN);
}

TEST(ParallelForTest, ZeroIndexesCallsNothing) {
  std::atomic<int> calls{0};
  ParallelFor(0, 8, [&](size_t) { calls.fetch_add(1); });
  ParallelFor(0, 0, [&](size_t) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 0);
}

// The caller's thread is one of the workers: with one thread everything runs on it.
TEST(ParallelForTest, OneThreadRunsOnTheCaller) {
  const auto caller = std::this_thread::get_id();
  bool elsewhere = false;
  ParallelFor(10, 1, [&](size_t) { elsewhere |= std::this_thread::get_id() != caller; });
  EXPECT_FALSE(elsewhere);
}

// An exception thrown by fn on any thread reaches the caller (after every thread has joined);
// indexes not yet handed out are skipped, none runs twice.
TEST(ParallelForTest, PropagatesTheFirstException) {
  for (uint32_t threads : {1u, 2u, 4u}) {
    constexpr size_t kN = 1000;
    std::vector<std::atomic<int>> calls(kN);
    EXPECT_THROW(ParallelFor(kN, threads,
                             [&](size_t i) {
                               calls[i].fetch_add(1);
                               if (i == 5) throw std::runtime_error("index 5");
                               // The others take a while: all of them would take >= 250 ms.
                               if (threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                             }),
                 std::runtime_error)
        << "threads " << threads;
    EXPECT_EQ(calls[5].load(), 1);
    size_t ran = 0;
    for (auto& c : calls) {
      ASSERT_LE(c.load(), 1);
      ran += static_cast<size_t>(c.load());
    }
    if (threads == 1) {
      EXPECT_EQ(ran, 6u);
    } else {
      EXPECT_LT(ran, kN) << "threads " << threads << ": the hand-out should stop after the exception";
    }
  }
}

// Every thread throwing: one exception, with one of the thrown messages, and the process lives.
TEST(ParallelForTest, ExceptionsOnEveryThreadGiveOne) {
  try {
    ParallelFor(64, 8, [](size_t i) { throw std::out_of_range("index " + std::to_string(i)); });
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_EQ(std::string(e.what()).rfind("index ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace search
