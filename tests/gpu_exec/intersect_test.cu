// GPU intersection (gpu_exec/intersect.hpp), both methods and every supported tuning, against
// std::set_intersection: empty inputs, single elements, no overlap, full overlap, subsets, the
// extreme values 0 and 2^32 - 1, length ratios 1 .. 1024 and sizes crossing many tiles.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/intersect.hpp"

namespace search::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!GpuAvailable()) GTEST_SKIP() << "no GPU: " << GpuDescription()

constexpr IntersectMethod kMethods[] = {IntersectMethod::kBinarySearch, IntersectMethod::kMergePath};

// n distinct sorted values drawn from [lo, lo + universe).
std::vector<uint32_t> RandomSet(uint32_t n, uint64_t universe, uint32_t seed, uint64_t lo = 0) {
  std::mt19937_64 rng(seed);
  std::set<uint32_t> s;
  n = static_cast<uint32_t>(std::min<uint64_t>(n, universe));
  if (n > universe / 4) {  // dense: a random subset of the whole universe
    std::vector<uint32_t> all;
    for (uint64_t v = 0; v < universe; ++v) all.push_back(static_cast<uint32_t>(lo + v));
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(n);
    std::sort(all.begin(), all.end());
    return all;
  }
  while (s.size() < n) s.insert(static_cast<uint32_t>(lo + rng() % universe));
  return {s.begin(), s.end()};
}

std::string Describe(IntersectMethod m, const IntersectTuning& t, size_t na, size_t nb) {
  return std::string(IntersectMethodName(m)) + " " + t.ToString() + " na=" + std::to_string(na) +
         " nb=" + std::to_string(nb);
}

// Runs one intersection on the GPU and compares values, b-indices and count with the CPU.
void Check(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, IntersectMethod method,
           const IntersectTuning& tuning = {}) {
  SCOPED_TRACE(Describe(method, tuning, a.size(), b.size()));
  std::vector<uint32_t> want;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(want));
  const auto na = static_cast<uint32_t>(a.size()), nb = static_cast<uint32_t>(b.size());
  const size_t out_cap = std::max<size_t>(std::min(na, nb), 1);
  auto d_a = DeviceBuffer::Allocate(4 * std::max<size_t>(na, 1));
  auto d_b = DeviceBuffer::Allocate(4 * std::max<size_t>(nb, 1));
  auto d_out = DeviceBuffer::Allocate(4 * out_cap);
  auto d_idx = DeviceBuffer::Allocate(4 * out_cap);
  auto d_count = DeviceBuffer::Allocate(4);
  ASSERT_TRUE(d_a.ok() && d_b.ok() && d_out.ok() && d_idx.ok() && d_count.ok());
  if (na > 0) ASSERT_EQ(cudaMemcpy(d_a->get(), a.data(), 4 * na, cudaMemcpyHostToDevice), cudaSuccess);
  if (nb > 0) ASSERT_EQ(cudaMemcpy(d_b->get(), b.data(), 4 * nb, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_count->get(), 0xff, 4), cudaSuccess);
  size_t temp_bytes = 0;
  ASSERT_TRUE(IntersectGpu(method, d_a->as<uint32_t>(), na, d_b->as<uint32_t>(), nb, d_out->as<uint32_t>(),
                           d_idx->as<uint32_t>(), d_count->as<uint32_t>(), nullptr, temp_bytes, nullptr, tuning)
                  .ok());
  auto d_temp = DeviceBuffer::Allocate(temp_bytes);
  ASSERT_TRUE(d_temp.ok());
  const Status st =
      IntersectGpu(method, d_a->as<uint32_t>(), na, d_b->as<uint32_t>(), nb, d_out->as<uint32_t>(),
                   d_idx->as<uint32_t>(), d_count->as<uint32_t>(), d_temp->get(), temp_bytes, nullptr, tuning);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  uint32_t count = 0;
  ASSERT_EQ(cudaMemcpy(&count, d_count->get(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(count, want.size());
  std::vector<uint32_t> got(count), idx(count);
  if (count > 0) {
    ASSERT_EQ(cudaMemcpy(got.data(), d_out->get(), 4 * count, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(idx.data(), d_idx->get(), 4 * count, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  for (uint32_t k = 0; k < count; ++k) {
    ASSERT_EQ(got[k], want[k]) << "at " << k;
    ASSERT_LT(idx[k], nb) << "at " << k;
    ASSERT_EQ(b[idx[k]], want[k]) << "b index at " << k;
  }
}

void CheckAll(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  for (IntersectMethod m : kMethods) {
    Check(a, b, m);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(IntersectGpuTest, EmptyAndSingle) {
  SKIP_WITHOUT_GPU();
  const std::vector<uint32_t> none, one{42}, other{43}, many = RandomSet(1000, 5000, 1);
  CheckAll(none, none);
  CheckAll(none, many);
  CheckAll(many, none);
  CheckAll(one, one);
  CheckAll(one, other);
  CheckAll(one, many);
  CheckAll(many, one);
  CheckAll({many[0]}, many);
  CheckAll({many.back()}, many);
  CheckAll({many[500]}, many);
}

TEST(IntersectGpuTest, NoAndFullOverlap) {
  SKIP_WITHOUT_GPU();
  std::vector<uint32_t> even, odd;
  for (uint32_t v = 0; v < 20000; ++v) (v % 2 == 0 ? even : odd).push_back(v);
  CheckAll(even, odd);
  CheckAll(odd, even);
  CheckAll(even, even);  // full overlap, equal lists
  const auto b = RandomSet(50000, 1 << 20, 2);
  std::vector<uint32_t> sub;
  for (size_t i = 0; i < b.size(); i += 7) sub.push_back(b[i]);
  CheckAll(sub, b);  // a subset of b
  CheckAll(b, sub);
  // Disjoint ranges: all of a before all of b, and after.
  const auto lo = RandomSet(3000, 100000, 3), hi = RandomSet(9000, 100000, 4, 200000);
  CheckAll(lo, hi);
  CheckAll(hi, lo);
}

TEST(IntersectGpuTest, ExtremeValues) {
  SKIP_WITHOUT_GPU();
  CheckAll({0u, 0xffffffffu}, {0u, 1u, 0xfffffffeu, 0xffffffffu});
  CheckAll({0xffffffffu}, {0xfffffffeu});
  CheckAll({0xffffffffu}, {0xffffffffu});
  CheckAll({0xfffffffeu, 0xffffffffu}, {0u, 0xffffffffu});
  auto top = RandomSet(5000, 20000, 5, 0xffffffffull - 19999);
  top.back() = 0xffffffffu;
  std::sort(top.begin(), top.end());
  top.erase(std::unique(top.begin(), top.end()), top.end());
  CheckAll(RandomSet(700, 20000, 6, 0xffffffffull - 19999), top);
}

TEST(IntersectGpuTest, Ratios) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 10;
  for (uint32_t na : {1u, 7u, 100u, 1000u, 4097u}) {
    for (uint32_t ratio = 1; ratio <= 1024; ratio *= 2) {
      const uint64_t nb = uint64_t{na} * ratio;
      if (nb > (1u << 22)) continue;
      // Universe 4 * nb: about a quarter of a's elements are in b.
      const auto b = RandomSet(static_cast<uint32_t>(nb), 4 * nb, ++seed);
      auto a = RandomSet(na, 4 * nb, ++seed);
      // Plant some guaranteed matches.
      std::mt19937 rng(seed);
      for (uint32_t k = 0; k < na / 3; ++k) a[rng() % na] = b[rng() % b.size()];
      std::sort(a.begin(), a.end());
      a.erase(std::unique(a.begin(), a.end()), a.end());
      CheckAll(a, b);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(IntersectGpuTest, EveryTuning) {
  SKIP_WITHOUT_GPU();
  const auto b = RandomSet(300000, 1 << 21, 20);
  const auto a = RandomSet(40000, 1 << 21, 21);
  const auto dense_a = RandomSet(200000, 1 << 19, 22);
  for (IntersectMethod m : kMethods) {
    for (uint32_t threads : {128u, 256u}) {
      for (uint32_t items : {4u, 8u, 16u}) {
        Check(a, b, m, IntersectTuning{threads, items});
        Check(dense_a, b, m, IntersectTuning{threads, items});
        Check(b, a, m, IntersectTuning{threads, items});
        if (HasFatalFailure()) return;
      }
    }
  }
  size_t temp_bytes = 0;
  EXPECT_EQ(IntersectGpu(IntersectMethod::kMergePath, nullptr, 0, nullptr, 0, nullptr, nullptr, nullptr, nullptr,
                         temp_bytes, nullptr, IntersectTuning{64, 8})
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(IntersectGpuTest, LargeRandom) {
  SKIP_WITHOUT_GPU();
  const auto b = RandomSet(1u << 22, 1ull << 26, 30);
  const auto a = RandomSet(1u << 18, 1ull << 26, 31);
  CheckAll(a, b);
  const auto c = RandomSet(1u << 22, 1ull << 23, 32);  // half of b's range, dense
  CheckAll(b, c);
}

}  // namespace
}  // namespace search::gpu
