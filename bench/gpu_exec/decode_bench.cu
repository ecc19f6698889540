// GPU posting-list decode throughput, Mallia et al. 2019 Table 3 layout: billions of integers per
// second for docIDs (unpack + per-block prefix sum) and for docIDs + frequencies, lists of 2^16 ..
// 2^25 postings, every DecodeTuning swept, plus a baseline (warp_decode.cuh's WarpDecodeDocs, one
// codec block per 32-thread CTA: the plain port).
// Data: synthetic lists encoded with the codec's EncodeList: docIDs uniformly random with average
// gap --avg-gap (geometric gaps), tfs geometric (P(tf = k) = 0.6 * 0.4^(k-1)). The blob and the
// outputs are resident on the device; the time is kernel time only (CUDA events around --reps
// back-to-back launches, after a warm-up), no transfers. Each list's output is checked once
// against the CPU decode.
// Usage: gpu_decode_bench [--quick] [--min-log 16] [--max-log 25] [--avg-gap 16] [--reps N]
//                         [--all-tunings | --default-only]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "bench_check.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/decode.hpp"
#include "warp_decode.cuh"

namespace search::gpu {
namespace {

struct Options {
  int min_log = 16;
  int max_log = 25;
  double avg_gap = 16;
  int reps = 0;  // 0: chosen per length
  bool quick = false;
  bool all_tunings = true;
};

// Baseline: one warp = one CTA = one codec block, through WarpDecodeDocs / WarpDecodeFreqs.
__global__ void __launch_bounds__(32) BaselineKernel(const uint4* meta, const uint8_t* payload, uint32_t base_doc,
                                                     uint32_t* docs, uint32_t* tfs, uint32_t* error) {
  const uint32_t j = blockIdx.x;
  const uint4 m4 = __ldg(meta + j);
  BlockMeta m;
  static_assert(sizeof(m) == sizeof(m4));
  memcpy(&m, &m4, sizeof(m));
  const uint32_t base = j == 0 ? base_doc : __ldg(&meta[j - 1].x) + 1u;
  uint32_t v[kWarpValues];
  if (!WarpDecodeDocs(payload, m, base, v) && threadIdx.x == 0) atomicOr(error, 1u);
  const uint32_t lane = threadIdx.x;
  uint32_t* out = docs + size_t{j} * kBlockSize;
  for (uint32_t r = 0; r < kWarpValues; ++r) {
    if (lane * kWarpValues + r < m.count) out[lane * kWarpValues + r] = v[r];
  }
  if (tfs != nullptr) {
    WarpDecodeFreqs(payload, m, v);
    out = tfs + size_t{j} * kBlockSize;
    for (uint32_t r = 0; r < kWarpValues; ++r) {
      if (lane * kWarpValues + r < m.count) out[lane * kWarpValues + r] = v[r];
    }
  }
}

struct HostList {
  std::vector<uint32_t> docs, tfs, words;
  size_t bytes = 0;
  ListView view;
};

HostList MakeList(uint32_t n, double avg_gap, uint32_t seed) {
  HostList h;
  std::mt19937_64 rng(seed);
  std::geometric_distribution<uint32_t> gap(1.0 / avg_gap);  // mean (1 - p) / p ~ avg_gap - 1
  std::geometric_distribution<uint32_t> tf(0.6);
  h.docs.resize(n);
  h.tfs.resize(n);
  uint64_t d = 0;
  for (uint32_t i = 0; i < n; ++i) {
    d += gap(rng);
    if (d > 0xffffffffull) d = 0xffffffffull;  // not reached for sane --avg-gap
    h.docs[i] = static_cast<uint32_t>(d++);
    h.tfs[i] = 1 + std::min<uint32_t>(tf(rng), 1000);
  }
  auto blob = EncodeList(h.docs, h.tfs, 0, nullptr);
  BENCH_CHECK_OK(blob.status());
  h.bytes = blob->size();
  h.words.resize((h.bytes + 3) / 4);
  std::memcpy(h.words.data(), blob->data(), h.bytes);
  auto v = ListView::Parse(std::string_view(reinterpret_cast<const char*>(h.words.data()), h.bytes), false);
  BENCH_CHECK_OK(v.status());
  h.view = *v;
  return h;
}

struct Measurement {
  double ms_per_call = 0;
};

template <class Launch>
double TimeMs(Launch&& launch, int reps, cudaStream_t stream) {
  cudaEvent_t start, stop;
  BENCH_CHECK_CUDA(cudaEventCreate(&start));
  BENCH_CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) launch();  // warm-up
  BENCH_CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < reps; ++i) launch();
  BENCH_CHECK_CUDA(cudaEventRecord(stop, stream));
  BENCH_CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  BENCH_CHECK_CUDA(cudaEventDestroy(start));
  BENCH_CHECK_CUDA(cudaEventDestroy(stop));
  return ms / reps;
}

void CheckOutput(const HostList& h, const uint32_t* d_docs, const uint32_t* d_tfs, const char* what) {
  std::vector<uint32_t> docs(h.docs.size()), tfs(h.tfs.size());
  BENCH_CHECK_CUDA(cudaMemcpy(docs.data(), d_docs, 4 * docs.size(), cudaMemcpyDeviceToHost));
  BENCH_CHECK_CUDA(cudaMemcpy(tfs.data(), d_tfs, 4 * tfs.size(), cudaMemcpyDeviceToHost));
  if (docs != h.docs || tfs != h.tfs) {
    std::fprintf(stderr, "MISMATCH: %s output differs from the CPU decode (n=%zu)\n", what, h.docs.size());
    std::exit(2);
  }
}

int Run(const Options& opt) {
  if (!GpuAvailable()) {
    std::printf("no GPU: %s\n", GpuDescription().c_str());
    return 0;
  }
  std::printf("device: %s\n", GpuDescription().c_str());
  std::printf(
      "lists: uniform random docIDs, avg gap %.1f (geometric), tfs geometric p=0.6; data resident on the "
      "device, kernel time only (CUDA events), G = 1e9\n",
      opt.avg_gap);
  std::vector<DecodeTuning> tunings;
  if (opt.all_tunings) {
    for (uint32_t t : {64u, 128u, 256u, 512u}) {
      for (uint32_t b : {1u, 2u, 4u, 8u, 16u}) tunings.push_back({t, b});
    }
  } else {
    tunings.push_back({});
  }
  cudaStream_t stream;
  BENCH_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("\n%-5s %-28s %8s %10s %12s %12s %10s\n", "log2n", "kernel", "bits/int", "docs G/s", "docs+tf Gp/s",
              "docs+tf Gi/s", "GB/s(d+t)");
  struct Best {
    int log;
    std::string name_docs, name_both;
    double docs, both;
  };
  std::vector<Best> best;
  for (int lg = opt.min_log; lg <= opt.max_log; ++lg) {
    const uint32_t n = 1u << lg;
    const HostList h = MakeList(n, opt.avg_gap, 1000 + lg);
    const int reps =
        opt.reps > 0 ? opt.reps : std::max(opt.quick ? 10 : 20, static_cast<int>((opt.quick ? 1 : 4) * (1u << 26) / n));
    auto d_blob = DeviceBuffer::Allocate(h.bytes);
    auto d_docs = DeviceBuffer::Allocate(4ull * n);
    auto d_tfs = DeviceBuffer::Allocate(4ull * n);
    auto d_err = DeviceBuffer::Allocate(4);
    BENCH_CHECK_OK(d_blob.status());
    BENCH_CHECK_OK(d_docs.status());
    BENCH_CHECK_OK(d_tfs.status());
    BENCH_CHECK_OK(d_err.status());
    BENCH_CHECK_CUDA(cudaMemcpy(d_blob->get(), h.words.data(), h.bytes, cudaMemcpyHostToDevice));
    BENCH_CHECK_CUDA(cudaMemset(d_err->get(), 0, 4));
    const auto* blob = d_blob->as<const uint8_t>();
    auto* docs = d_docs->as<uint32_t>();
    auto* tfs = d_tfs->as<uint32_t>();
    auto* err = d_err->as<uint32_t>();
    const double bits_per_int = 8.0 * h.bytes / n;
    auto report = [&](const std::string& name, double ms_docs, double ms_both) {
      const double g_docs = n / (ms_docs * 1e-3) / 1e9, g_both = n / (ms_both * 1e-3) / 1e9;
      const double gbs = (h.bytes + 8.0 * n) / (ms_both * 1e-3) / 1e9;
      std::printf("%-5d %-28s %8.2f %10.1f %12.1f %12.1f %10.0f\n", lg, name.c_str(), bits_per_int, g_docs, g_both,
                  2 * g_both, gbs);
      if (best.empty() || best.back().log != lg) best.push_back({lg, name, name, g_docs, g_both});
      Best& b = best.back();
      if (g_docs > b.docs) b.docs = g_docs, b.name_docs = name;
      if (g_both > b.both) b.both = g_both, b.name_both = name;
    };

    // Baseline: one block per 32-thread CTA (WarpDecodeDocs).
    {
      const auto* meta = reinterpret_cast<const uint4*>(blob + sizeof(ListHeader));
      const uint8_t* payload = blob + sizeof(ListHeader) + sizeof(BlockMeta) * size_t{h.view.num_blocks()};
      const uint32_t nb = h.view.num_blocks();
      auto launch_docs = [&] {
        BaselineKernel<<<nb, 32, 0, stream>>>(meta, payload, h.view.base_doc(), docs, nullptr, err);
      };
      auto launch_both = [&] {
        BaselineKernel<<<nb, 32, 0, stream>>>(meta, payload, h.view.base_doc(), docs, tfs, err);
      };
      const double ms_docs = TimeMs(launch_docs, reps, stream);
      const double ms_both = TimeMs(launch_both, reps, stream);
      BENCH_CHECK_CUDA(cudaGetLastError());
      BENCH_CHECK_CUDA(cudaStreamSynchronize(stream));
      CheckOutput(h, docs, tfs, "baseline");
      report("baseline warp/CTA", ms_docs, ms_both);
    }
    for (const DecodeTuning& t : tunings) {
      BENCH_CHECK_CUDA(cudaMemsetAsync(docs, 0, 4ull * n, stream));
      auto launch_docs = [&] { BENCH_CHECK_OK(DecodeListGpu(blob, h.view, docs, nullptr, err, stream, t)); };
      auto launch_both = [&] { BENCH_CHECK_OK(DecodeListGpu(blob, h.view, docs, tfs, err, stream, t)); };
      const double ms_docs = TimeMs(launch_docs, reps, stream);
      const double ms_both = TimeMs(launch_both, reps, stream);
      BENCH_CHECK_OK(CheckDecodeError(err, stream));
      CheckOutput(h, docs, tfs, t.ToString().c_str());
      report("warp/block " + t.ToString(), ms_docs, ms_both);
    }
  }
  std::printf("\nbest per length (docs G ints/s with prefix sum; docs+tfs G postings/s):\n");
  for (const Best& b : best) {
    std::printf("  2^%-3d docs %7.1f G ints/s [%s]   docs+tfs %7.1f G postings/s = %7.1f G ints/s [%s]\n", b.log,
                b.docs, b.name_docs.c_str(), b.both, 2 * b.both, b.name_both.c_str());
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
      opt.min_log = 16;
      opt.max_log = 22;
    } else if (a == "--min-log") {
      opt.min_log = std::atoi(next());
    } else if (a == "--max-log") {
      opt.max_log = std::atoi(next());
    } else if (a == "--avg-gap") {
      opt.avg_gap = std::atof(next());
    } else if (a == "--reps") {
      opt.reps = std::atoi(next());
    } else if (a == "--default-only") {
      opt.all_tunings = false;
    } else if (a == "--all-tunings") {
      opt.all_tunings = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--min-log 16] [--max-log 25] [--avg-gap 16] [--reps N] "
                   "[--all-tunings|--default-only]\n",
                   argv[0]);
      return 1;
    }
  }
  if (opt.min_log < 7 || opt.max_log > 28 || opt.min_log > opt.max_log || opt.avg_gap < 1) {
    std::fprintf(stderr, "bad options\n");
    return 1;
  }
  return search::gpu::Run(opt);
}
