// GPU intersection of a short and a long sorted list (Liu et al. 2018 Fig. 8): nanoseconds per
// element of the shorter list for length ratios 1, 2, 4, .., 1024, binary search vs merge path,
// each at its best IntersectTuning (all supported ones swept), and the crossover ratio.
// Data: b = nb distinct uniform random docIDs from a universe of 4 * nb; a = na docIDs, half
// drawn from b and half uniform from the same universe (so about 5/8 of a matches). Arrays are
// resident on the device; time is the whole IntersectGpu call (partition/search kernel, CUB scan,
// copy) measured with CUDA events over --reps back-to-back calls, temp memory preallocated.
// Each configuration's output is checked once against std::set_intersection.
// Usage: gpu_intersect_bench [--quick] [--na-log 18] [--max-ratio 1024] [--reps N] [--default-only]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/intersect.hpp"

namespace search::gpu {
namespace {

struct Options {
  int na_log = 18;
  uint32_t max_ratio = 1024;
  int reps = 0;
  bool quick = false;
  bool all_tunings = true;
};

// n distinct sorted values, uniform in [0, universe): geometric gaps of mean universe / n.
std::vector<uint32_t> RandomSorted(uint64_t n, uint64_t universe, std::mt19937_64& rng) {
  std::vector<uint32_t> v(n);
  const double p = std::min(1.0, static_cast<double>(n) / static_cast<double>(universe));
  std::geometric_distribution<uint32_t> gap(p);
  uint64_t d = 0;
  for (uint64_t i = 0; i < n; ++i) {
    d += gap(rng);
    if (d > 0xffffffffull) d = 0xffffffffull;
    v[i] = static_cast<uint32_t>(d);
    if (d < 0xffffffffull) ++d;
  }
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

int Run(const Options& opt) {
  if (!GpuAvailable()) {
    std::printf("no GPU: %s\n", GpuDescription().c_str());
    return 0;
  }
  std::printf("device: %s\n", GpuDescription().c_str());
  const uint32_t na_target = 1u << opt.na_log;
  std::printf(
      "a: %u elements (short), b: ratio * |a| (long), universe 4|b|; data resident on the device; time of "
      "the whole IntersectGpu call (kernels + CUB scan), CUDA events; ns per element of a\n",
      na_target);
  std::vector<IntersectTuning> tunings;
  if (opt.all_tunings) {
    for (uint32_t t : {128u, 256u}) {
      for (uint32_t k : {4u, 8u, 16u}) tunings.push_back({t, k});
    }
  } else {
    tunings.push_back({});
  }
  cudaStream_t stream;
  BENCH_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("\n%6s %10s %10s %9s %-20s %9s %-20s %s\n", "ratio", "|a|", "|b|", "bs ns/a", "bs tuning", "mp ns/a",
              "mp tuning", "faster");
  std::vector<uint32_t> ratios;
  std::vector<bool> bs_won;
  std::mt19937_64 rng(12345);
  for (uint32_t ratio = 1; ratio <= opt.max_ratio; ratio *= 2) {
    const uint64_t nb_target = uint64_t{na_target} * ratio;
    const auto b = RandomSorted(nb_target, 4 * nb_target, rng);
    std::vector<uint32_t> a = RandomSorted(na_target / 2, 4 * nb_target, rng);
    for (uint32_t k = 0; k < na_target / 2; ++k) a.push_back(b[rng() % b.size()]);
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    std::vector<uint32_t> want;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(want));
    const auto na = static_cast<uint32_t>(a.size()), nb = static_cast<uint32_t>(b.size());

    auto d_a = DeviceBuffer::Allocate(4ull * na);
    auto d_b = DeviceBuffer::Allocate(4ull * nb);
    auto d_out = DeviceBuffer::Allocate(4ull * na);
    auto d_idx = DeviceBuffer::Allocate(4ull * na);
    auto d_count = DeviceBuffer::Allocate(4);
    BENCH_CHECK_OK(d_a.status());
    BENCH_CHECK_OK(d_b.status());
    BENCH_CHECK_OK(d_out.status());
    BENCH_CHECK_OK(d_idx.status());
    BENCH_CHECK_OK(d_count.status());
    BENCH_CHECK_CUDA(cudaMemcpy(d_a->get(), a.data(), 4ull * na, cudaMemcpyHostToDevice));
    BENCH_CHECK_CUDA(cudaMemcpy(d_b->get(), b.data(), 4ull * nb, cudaMemcpyHostToDevice));
    // Temp memory: the largest any method/tuning needs.
    size_t temp_bytes = 0;
    for (IntersectMethod m : {IntersectMethod::kBinarySearch, IntersectMethod::kMergePath}) {
      for (const IntersectTuning& t : tunings) {
        size_t bytes = 0;
        BENCH_CHECK_OK(IntersectGpu(m, d_a->as<uint32_t>(), na, d_b->as<uint32_t>(), nb, d_out->as<uint32_t>(),
                                    d_idx->as<uint32_t>(), d_count->as<uint32_t>(), nullptr, bytes, stream, t));
        temp_bytes = std::max(temp_bytes, bytes);
      }
    }
    auto d_temp = DeviceBuffer::Allocate(temp_bytes);
    BENCH_CHECK_OK(d_temp.status());

    double best_ns[2] = {1e30, 1e30};
    IntersectTuning best_t[2];
    const int reps = opt.reps > 0 ? opt.reps : (opt.quick ? 5 : std::max(5, static_cast<int>(64 / ratio)));
    for (int mi = 0; mi < 2; ++mi) {
      const IntersectMethod m = mi == 0 ? IntersectMethod::kBinarySearch : IntersectMethod::kMergePath;
      for (const IntersectTuning& t : tunings) {
        auto call = [&] {
          size_t bytes = temp_bytes;
          BENCH_CHECK_OK(IntersectGpu(m, d_a->as<uint32_t>(), na, d_b->as<uint32_t>(), nb, d_out->as<uint32_t>(),
                                      d_idx->as<uint32_t>(), d_count->as<uint32_t>(), d_temp->get(), bytes, stream, t));
        };
        call();  // warm-up, and the correctness check
        uint32_t count = 0;
        BENCH_CHECK_CUDA(cudaMemcpyAsync(&count, d_count->get(), 4, cudaMemcpyDeviceToHost, stream));
        BENCH_CHECK_CUDA(cudaStreamSynchronize(stream));
        std::vector<uint32_t> got(count), idx(count);
        if (count > 0) {
          BENCH_CHECK_CUDA(cudaMemcpy(got.data(), d_out->get(), 4ull * count, cudaMemcpyDeviceToHost));
          BENCH_CHECK_CUDA(cudaMemcpy(idx.data(), d_idx->get(), 4ull * count, cudaMemcpyDeviceToHost));
        }
        bool ok = got == want;
        for (uint32_t k = 0; ok && k < count; ++k) ok = idx[k] < nb && b[idx[k]] == got[k];
        if (!ok) {
          std::fprintf(stderr, "MISMATCH: %s %s ratio %u: count %u want %zu\n", IntersectMethodName(m),
                       t.ToString().c_str(), ratio, count, want.size());
          return 2;
        }
        cudaEvent_t start, stop;
        BENCH_CHECK_CUDA(cudaEventCreate(&start));
        BENCH_CHECK_CUDA(cudaEventCreate(&stop));
        BENCH_CHECK_CUDA(cudaEventRecord(start, stream));
        for (int r = 0; r < reps; ++r) call();
        BENCH_CHECK_CUDA(cudaEventRecord(stop, stream));
        BENCH_CHECK_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        BENCH_CHECK_CUDA(cudaEventDestroy(start));
        BENCH_CHECK_CUDA(cudaEventDestroy(stop));
        const double ns = ms * 1e6 / reps / na;
        if (ns < best_ns[mi]) {
          best_ns[mi] = ns;
          best_t[mi] = t;
        }
      }
    }
    const bool bs_wins = best_ns[0] < best_ns[1];
    ratios.push_back(ratio);
    bs_won.push_back(bs_wins);
    std::printf("%6u %10u %10u %9.3f %-20s %9.3f %-20s %s\n", ratio, na, nb, best_ns[0], best_t[0].ToString().c_str(),
                best_ns[1], best_t[1].ToString().c_str(), bs_wins ? "binary_search" : "merge_path");
  }
  // Crossover: the smallest ratio from which binary search wins at every larger ratio measured.
  size_t from = ratios.size();
  while (from > 0 && bs_won[from - 1]) --from;
  std::string mp_list;
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (!bs_won[i]) mp_list += " " + std::to_string(ratios[i]);
  }
  std::printf("\nmerge path faster at ratios:%s\n", mp_list.empty() ? " none" : mp_list.c_str());
  if (from == ratios.size()) {
    std::printf("crossover: none (merge path faster at the largest ratio measured)\n");
  } else {
    std::printf("crossover: binary search faster at every ratio >= %u\n", ratios[from]);
  }
  BENCH_CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace search::gpu

int main(int argc, char** argv) {
  search::gpu::Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      opt.quick = true;
      opt.na_log = 16;
      opt.max_ratio = 256;
    } else if (a == "--na-log") {
      opt.na_log = std::atoi(next());
    } else if (a == "--max-ratio") {
      opt.max_ratio = static_cast<uint32_t>(std::atoi(next()));
    } else if (a == "--reps") {
      opt.reps = std::atoi(next());
    } else if (a == "--default-only") {
      opt.all_tunings = false;
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--na-log 18] [--max-ratio 1024] [--reps N] [--default-only]\n",
                   argv[0]);
      return 1;
    }
  }
  if (opt.na_log < 1 || opt.na_log > 24 || opt.max_ratio < 1 ||
      (uint64_t{1} << opt.na_log) * opt.max_ratio > (uint64_t{1} << 29)) {
    std::fprintf(stderr, "bad options (|a| * max ratio must be <= 2^29)\n");
    return 1;
  }
  return search::gpu::Run(opt);
}
