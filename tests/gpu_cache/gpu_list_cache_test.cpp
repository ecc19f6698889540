// GpuListCache on a real device: device bytes equal the host list bytes (chunked and whole
// copies, zero padding), resident norms, LRU eviction under a small budget, pinned entries never
// evicted, ResourceExhausted for a list that cannot fit, hits on a copy still in flight from another
// stream, concurrent Acquire from many threads and streams, Clear, a handle outliving the cache,
// built blobs (AcquireBuilt), and the counters. Every GPU test skips without a GPU; Create must say Unavailable (not crash)
// when there is none.
#include "gpu_cache/gpu_list_cache.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../index_store/shard_fixture.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "index_store/shard_store.hpp"

namespace search::gpu {
namespace {

#define SKIP_WITHOUT_GPU()                                               \
  do {                                                                   \
    if (!GpuAvailable()) GTEST_SKIP() << "no GPU: " << GpuDescription(); \
  } while (0)

size_t Padded(size_t n) {
  return (n + 16 + 255) / 256 * 256;
}

// A shard [1000, 4000) of 10000 documents with short and long lists, opened for reading.
class GpuListCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!GpuAvailable()) GTEST_SKIP() << "no GPU: " << GpuDescription();
    corpus_ = testing::MakeCorpus(42, 1000, 4000, 10000, 300);
    ASSERT_TRUE(testing::WriteShard(corpus_, dir_ / "shard").ok());
    auto r = ShardReader::Open(dir_ / "shard");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    reader_ = std::move(r).value();
    auto s = Stream::Create();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    stream_ = std::move(s).value();
  }

  std::shared_ptr<const CachedList> List(const std::string& term) {
    auto l = reader_->GetList(term);
    EXPECT_TRUE(l.ok()) << term << ": " << l.status().ToString();
    return l.ok() ? *l : nullptr;
  }

  std::unique_ptr<GpuListCache> MakeCache(size_t capacity, size_t staging = size_t{1} << 20) {
    GpuCacheOptions o;
    o.capacity_bytes = capacity;
    o.staging_bytes = staging;
    auto c = GpuListCache::Create(reader_.get(), o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // The device allocation of `dl` (list plus padding) read back on `stream`, after a sync.
  static std::string ReadBack(const DeviceList& dl, cudaStream_t stream) {
    std::string out(Padded(dl.bytes), '\xAA');
    EXPECT_EQ(cudaMemcpyAsync(out.data(), dl.d_blob, out.size(), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return out;
  }

  // Checks the device copy byte for byte (and the zero padding); a diagnostic names the first
  // differing offset.
  static void ExpectSameBytes(const DeviceList& dl, const CachedList& host, cudaStream_t stream) {
    ASSERT_NE(dl.d_blob, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(dl.d_blob) % 16, 0u) << "d_blob " << static_cast<const void*>(dl.d_blob);
    ASSERT_EQ(dl.bytes, host.size);
    const std::string dev = ReadBack(dl, stream);
    const std::string_view want = host.bytes();
    size_t first_bad = std::string::npos;
    for (size_t i = 0; i < want.size(); ++i) {
      if (dev[i] != want[i]) {
        first_bad = i;
        break;
      }
    }
    EXPECT_EQ(first_bad, std::string::npos)
        << "term '" << host.term << "' (" << host.size << " bytes): device byte " << first_bad << " differs";
    for (size_t i = want.size(); i < dev.size(); ++i) {
      if (dev[i] != 0) {
        ADD_FAILURE() << "term '" << host.term << "': padding byte " << i << " is not zero";
        break;
      }
    }
  }

  // Terms whose padded size is exactly one 256-byte unit.
  std::vector<std::string> SmallTerms(size_t n) {
    std::vector<std::string> out;
    for (const auto& td : corpus_.terms) {
      if (Padded(td.blob.size()) == 256) out.push_back(td.term);
      if (out.size() == n) break;
    }
    EXPECT_EQ(out.size(), n) << "corpus has too few small lists";
    return out;
  }

  const testing::TermData& Largest() const {
    return *std::max_element(corpus_.terms.begin(), corpus_.terms.end(),
                             [](const auto& a, const auto& b) { return a.blob.size() < b.blob.size(); });
  }

  testing::TempDir dir_;
  testing::Corpus corpus_;
  std::unique_ptr<ShardReader> reader_;
  Stream stream_;
};

TEST(GpuListCacheNoGpuTest, CreateIsUnavailableWithoutAGpu) {
  if (GpuAvailable()) GTEST_SKIP() << "a GPU is present: " << GpuDescription();
  testing::TempDir dir;
  const testing::Corpus c = testing::MakeCorpus(1, 0, 100, 100, 10);
  ASSERT_TRUE(testing::WriteShard(c, dir / "shard").ok());
  auto reader = ShardReader::Open(dir / "shard");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto cache = GpuListCache::Create(reader->get());
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), StatusCode::kUnavailable) << cache.status().ToString();
  std::cerr << "Create without a GPU: " << cache.status().ToString() << "\n";
}

TEST_F(GpuListCacheTest, NormsAreResident) {
  auto cache = MakeCache(size_t{64} << 20);
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->doc_begin(), 1000u);
  ASSERT_EQ(cache->num_docs(), 3000u);
  std::vector<float> norms(cache->num_docs());
  ASSERT_EQ(cudaMemcpy(norms.data(), cache->d_norms(), norms.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(std::memcmp(norms.data(), reader_->norms(), norms.size() * sizeof(float)), 0);
  EXPECT_EQ(cache->stats().norm_bytes, 3000u * sizeof(float));
  EXPECT_EQ(cache->min_norm(), *std::min_element(norms.begin(), norms.end()));
  EXPECT_GT(cache->min_norm(), 0.0f);
}

// Every list, with tiny staging buffers (long lists in many chunks) and with large ones.
TEST_F(GpuListCacheTest, DeviceBytesEqualHostBytes) {
  for (size_t staging : {size_t{1024}, size_t{64} << 20}) {
    SCOPED_TRACE("staging bytes " + std::to_string(staging));
    auto cache = MakeCache(size_t{256} << 20, staging);
    ASSERT_NE(cache, nullptr);
    uint64_t bytes = 0, padded = 0;
    for (const auto& td : corpus_.terms) {
      auto list = List(td.term);
      ASSERT_NE(list, nullptr);
      auto dl = cache->Acquire(list, stream_.get());
      ASSERT_TRUE(dl.ok()) << td.term << ": " << dl.status().ToString();
      EXPECT_EQ((*dl)->host.get(), list.get());
      ExpectSameBytes(**dl, *list, stream_.get());
      bytes += list->size;
      padded += Padded(list->size);
    }
    GpuCacheStats s = cache->stats();
    EXPECT_EQ(s.misses, corpus_.terms.size());
    EXPECT_EQ(s.hits, 0u);
    EXPECT_EQ(s.evictions, 0u);
    EXPECT_EQ(s.bytes_copied, bytes);
    EXPECT_EQ(s.resident_lists, corpus_.terms.size());
    EXPECT_EQ(s.resident_bytes, padded);
    EXPECT_EQ(s.failed_allocations, 0u);
    // Second pass: all hits, nothing copied.
    for (const auto& td : corpus_.terms) {
      auto list = List(td.term);
      auto dl = cache->Acquire(list, stream_.get());
      ASSERT_TRUE(dl.ok()) << dl.status().ToString();
      ExpectSameBytes(**dl, *list, stream_.get());
      EXPECT_TRUE(cache->IsResident(td.term));
    }
    s = cache->stats();
    EXPECT_EQ(s.hits, corpus_.terms.size());
    EXPECT_EQ(s.bytes_copied, bytes);
    std::vector<std::string> terms = {corpus_.terms[0].term, corpus_.terms[1].term, "no-such-term"};
    EXPECT_EQ(cache->ResidentBytes(terms), corpus_.terms[0].blob.size() + corpus_.terms[1].blob.size());
    EXPECT_FALSE(cache->IsResident("no-such-term"));
  }
}

// A built blob (AcquireBuilt): built once on a miss and copied as built, a hit afterwards without
// building, evicted with the lists under one budget, a builder's error returned with nothing cached.
TEST_F(GpuListCacheTest, BuiltBlobsShareTheBudgetAndBuildOnMissesOnly) {
  const auto t = SmallTerms(2);
  ASSERT_EQ(t.size(), 2u);
  auto cache = MakeCache(3 * 256);
  ASSERT_NE(cache, nullptr);
  const std::string key = std::string("w") + '\0' + "pos";
  std::vector<uint32_t> words(40);
  for (uint32_t i = 0; i < words.size(); ++i) words[i] = i * 7 + 1;
  int builds = 0;
  auto build = [&]() -> Result<std::vector<uint32_t>> {
    ++builds;
    return words;
  };
  auto b = cache->AcquireBuilt(key, build, stream_.get());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(builds, 1);
  EXPECT_EQ((*b)->bytes, words.size() * 4);
  std::vector<uint32_t> back(words.size());
  ASSERT_EQ(cudaMemcpyAsync(back.data(), (*b)->d_blob, words.size() * 4, cudaMemcpyDeviceToHost, stream_.get()),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_.get()), cudaSuccess);
  EXPECT_EQ(back, words);
  b = cache->AcquireBuilt(key, build, stream_.get());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(builds, 1);  // a hit
  EXPECT_TRUE(cache->IsResident(key));
  b = Status::Internal("released");  // unpinned
  // Two lists fill the budget with it; a third evicts the least recently used: the blob.
  ASSERT_TRUE(cache->Acquire(List(t[0]), stream_.get()).ok());
  ASSERT_TRUE(cache->Acquire(List(t[1]), stream_.get()).ok());
  EXPECT_TRUE(cache->IsResident(key));
  auto other = cache->AcquireBuilt(std::string("x") + '\0' + "pos", build, stream_.get());
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FALSE(cache->IsResident(key));
  EXPECT_EQ(cache->stats().evictions, 1u);
  b = cache->AcquireBuilt(key, build, stream_.get());  // built again
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(builds, 3);
  // A builder's error: returned, nothing cached.
  auto bad = cache->AcquireBuilt(std::string("y") + '\0' + "pos",
                                 []() -> Result<std::vector<uint32_t>> { return Status::Corruption("bad"); },
                                 stream_.get());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(cache->IsResident(std::string("y") + '\0' + "pos"));
}

TEST_F(GpuListCacheTest, EvictsLeastRecentlyUsed) {
  const auto t = SmallTerms(4);
  ASSERT_EQ(t.size(), 4u);
  auto cache = MakeCache(3 * 256);
  ASSERT_NE(cache, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache->Acquire(List(t[i]), stream_.get()).ok());
  ASSERT_TRUE(cache->Acquire(List(t[0]), stream_.get()).ok());  // t0 newest; t1 is the LRU
  auto d = cache->Acquire(List(t[3]), stream_.get());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ExpectSameBytes(**d, *List(t[3]), stream_.get());
  EXPECT_TRUE(cache->IsResident(t[0]));
  EXPECT_FALSE(cache->IsResident(t[1]));
  EXPECT_TRUE(cache->IsResident(t[2]));
  EXPECT_TRUE(cache->IsResident(t[3]));
  GpuCacheStats s = cache->stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.resident_lists, 3u);
  EXPECT_EQ(s.resident_bytes, 3u * 256);
  // The evicted list comes back (a miss evicting t2, now the LRU).
  auto b = cache->Acquire(List(t[1]), stream_.get());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectSameBytes(**b, *List(t[1]), stream_.get());
  EXPECT_FALSE(cache->IsResident(t[2]));
  EXPECT_EQ(cache->stats().evictions, 2u);
}

TEST_F(GpuListCacheTest, PinnedEntriesAreNotEvicted) {
  const auto t = SmallTerms(3);
  ASSERT_EQ(t.size(), 3u);
  auto cache = MakeCache(2 * 256);
  ASSERT_NE(cache, nullptr);
  auto a = cache->Acquire(List(t[0]), stream_.get());
  auto b = cache->Acquire(List(t[1]), stream_.get());
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = cache->Acquire(List(t[2]), stream_.get());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted) << c.status().ToString();
  EXPECT_EQ(cache->stats().failed_allocations, 1u);
  EXPECT_EQ(cache->stats().evictions, 0u);
  EXPECT_TRUE(cache->IsResident(t[0]));
  EXPECT_TRUE(cache->IsResident(t[1]));
  EXPECT_FALSE(cache->IsResident(t[2]));
  ExpectSameBytes(**a, *List(t[0]), stream_.get());
  ExpectSameBytes(**b, *List(t[1]), stream_.get());
  // A second handle to the same entry keeps it pinned after the first is dropped.
  auto a2 = cache->Acquire(List(t[0]), stream_.get());
  ASSERT_TRUE(a2.ok());
  a->reset();
  EXPECT_FALSE(cache->Acquire(List(t[2]), stream_.get()).ok());
  // Unpin t0 entirely: now it is evicted for t2; t1 (pinned) stays.
  a2->reset();
  auto c2 = cache->Acquire(List(t[2]), stream_.get());
  ASSERT_TRUE(c2.ok()) << c2.status().ToString();
  ExpectSameBytes(**c2, *List(t[2]), stream_.get());
  EXPECT_FALSE(cache->IsResident(t[0]));
  EXPECT_TRUE(cache->IsResident(t[1]));
  ExpectSameBytes(**b, *List(t[1]), stream_.get());
}

TEST_F(GpuListCacheTest, ListLargerThanTheBudgetIsResourceExhausted) {
  const auto t = SmallTerms(1);
  const auto& big = Largest();
  ASSERT_GT(Padded(big.blob.size()), 2u * 256);
  auto cache = MakeCache(2 * 256);
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(cache->Acquire(List(t[0]), stream_.get()).ok());
  auto r = cache->Acquire(List(big.term), stream_.get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  std::cerr << r.status().ToString() << "\n";
  EXPECT_FALSE(cache->IsResident(big.term));
  EXPECT_TRUE(cache->IsResident(t[0]));  // nothing was evicted for a list that can never fit
  GpuCacheStats s = cache->stats();
  EXPECT_EQ(s.failed_allocations, 1u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.resident_lists, 1u);
}

// A long list copied in many small chunks on stream 1; stream 2 hits it while the copy may still
// be in flight, reads it back syncing only stream 2: it must wait for the copy (ready event).
TEST_F(GpuListCacheTest, HitWhileCopyInFlightWaitsOnTheCopy) {
  const auto& big = Largest();
  auto s2 = Stream::Create();
  ASSERT_TRUE(s2.ok());
  for (int round = 0; round < 20; ++round) {
    auto cache = MakeCache(size_t{64} << 20, 256);  // 256-byte staging buffers: many chunks
    ASSERT_NE(cache, nullptr);
    auto list = List(big.term);
    auto first = cache->Acquire(list, stream_.get());
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto second = cache->Acquire(list, s2->get());
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ((*first)->d_blob, (*second)->d_blob);
    ExpectSameBytes(**second, *list, s2->get());
    EXPECT_EQ(cache->stats().hits, 1u);
    ASSERT_EQ(stream_.Synchronize().ok(), true);
  }
}

TEST_F(GpuListCacheTest, ConcurrentAcquireFromManyThreadsAndStreams) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 300;
  size_t total = 0, largest = 0;
  for (const auto& td : corpus_.terms) {
    total += Padded(td.blob.size());
    largest = std::max(largest, Padded(td.blob.size()));
  }
  // Room for every thread's pinned list plus some: evictions happen, exhaustion cannot.
  const size_t capacity = std::max(total / 3, kThreads * largest + 4096);
  auto cache = MakeCache(capacity, 4096);
  ASSERT_NE(cache, nullptr);
  std::atomic<int> failures{0};
  std::atomic<uint64_t> acquires{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stream = Stream::Create();
      if (!stream.ok()) {
        ++failures;
        return;
      }
      std::mt19937 rng(100 + t);
      for (int i = 0; i < kIterations && failures.load() == 0; ++i) {
        // Skewed toward a few hot terms so threads collide on entries and in-flight copies.
        const size_t idx = rng() % 4 == 0 ? rng() % corpus_.terms.size() : rng() % 8;
        const std::string& term = corpus_.terms[idx].term;
        auto list = reader_->GetList(term);
        if (!list.ok()) {
          ++failures;
          continue;
        }
        auto dl = cache->Acquire(*list, stream->get());
        acquires.fetch_add(1);
        if (!dl.ok()) {
          ADD_FAILURE() << "thread " << t << " term " << term << ": " << dl.status().ToString();
          ++failures;
          continue;
        }
        const std::string dev = ReadBack(**dl, stream->get());
        if (std::memcmp(dev.data(), (*list)->storage.get(), (*list)->size) != 0) {
          ADD_FAILURE() << "thread " << t << " term " << term << ": device bytes differ";
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  const GpuCacheStats s = cache->stats();
  EXPECT_EQ(s.hits + s.misses, acquires.load());
  EXPECT_LE(s.resident_bytes, capacity);
  EXPECT_EQ(s.failed_allocations, 0u);
  EXPECT_GT(s.hits, 0u);
  std::cerr << "concurrent: hits " << s.hits << " misses " << s.misses << " evictions " << s.evictions << " copied "
            << s.bytes_copied << " resident " << s.resident_bytes << "/" << capacity << "\n";
}

TEST_F(GpuListCacheTest, ClearDropsUnpinnedEntriesOnly) {
  const auto t = SmallTerms(3);
  auto cache = MakeCache(size_t{1} << 20);
  ASSERT_NE(cache, nullptr);
  auto pinned = cache->Acquire(List(t[0]), stream_.get());
  ASSERT_TRUE(pinned.ok());
  ASSERT_TRUE(cache->Acquire(List(t[1]), stream_.get()).ok());
  ASSERT_TRUE(cache->Acquire(List(t[2]), stream_.get()).ok());
  cache->Clear();
  EXPECT_TRUE(cache->IsResident(t[0]));
  EXPECT_FALSE(cache->IsResident(t[1]));
  EXPECT_FALSE(cache->IsResident(t[2]));
  EXPECT_EQ(cache->stats().resident_lists, 1u);
  EXPECT_EQ(cache->stats().resident_bytes, 256u);
  ExpectSameBytes(**pinned, *List(t[0]), stream_.get());
  // And the cleared lists come back intact.
  auto again = cache->Acquire(List(t[1]), stream_.get());
  ASSERT_TRUE(again.ok());
  ExpectSameBytes(**again, *List(t[1]), stream_.get());
}

TEST_F(GpuListCacheTest, HandleOutlivesTheCache) {
  const auto& big = Largest();
  auto cache = MakeCache(size_t{1} << 20);
  ASSERT_NE(cache, nullptr);
  auto list = List(big.term);
  auto dl = cache->Acquire(list, stream_.get());
  ASSERT_TRUE(dl.ok());
  std::shared_ptr<const DeviceList> handle = *dl;
  cache.reset();
  ExpectSameBytes(*handle, *list, stream_.get());
  handle.reset();  // frees the memory and the pool
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace search::gpu
