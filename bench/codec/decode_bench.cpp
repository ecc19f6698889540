// Codec decode speed, in integers per second on one core (items_per_second):
//   BM_DecodeDocs/<len>/<avg_gap>    ListView::DecodeDocs over a whole list (unpack + prefix sum)
//   BM_DecodeFreqs/<len>/<avg_gap>   ListView::DecodeFreqs over a whole list
//   BM_UnpackAvx2/<bits>, BM_UnpackScalar/<bits>, BM_DocsKernelAvx2/<bits>
//                                    raw full-block kernels over 256 blocks (128 KiB of output)
//   BM_Crc32c/<bytes>                CRC-32C (what ListView::Parse with verify_crc costs), bytes/s
// Lists have random gaps uniform in [0, 2 * avg_gap], tfs in 1..8.
// Example: decode_bench --benchmark_filter='DecodeDocs/4194304' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bitpack_internal.hpp"
#include "codec/block_codec.hpp"

namespace search {
namespace {

// An encoded list kept 4-byte aligned (ListView requires it).
struct EncodedList {
  std::vector<uint32_t> words;
  ListView view;
};

EncodedList MakeList(uint32_t len, uint32_t avg_gap) {
  std::mt19937 rng(len ^ (avg_gap * 2654435761u));
  std::vector<uint32_t> docs(len), tfs(len);
  uint64_t d = 0;
  for (uint32_t i = 0; i < len; ++i) {
    d += rng() % (2 * avg_gap + 1);
    docs[i] = static_cast<uint32_t>(d++);
    tfs[i] = 1 + rng() % 8;
  }
  auto blob = EncodeList(docs, tfs, 0, nullptr);
  EncodedList out;
  if (!blob.ok()) return out;
  out.words.resize((blob->size() + 3) / 4);
  std::memcpy(out.words.data(), blob->data(), blob->size());
  auto v = ListView::Parse(std::string_view(reinterpret_cast<const char*>(out.words.data()), blob->size()));
  if (v.ok()) out.view = *v;
  return out;
}

void BM_DecodeDocs(benchmark::State& state) {
  const auto list = MakeList(static_cast<uint32_t>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  if (list.view.count() == 0) return state.SkipWithError("encode failed");
  alignas(32) uint32_t out[kBlockSize];
  for (auto _ : state) {
    for (uint32_t j = 0; j < list.view.num_blocks(); ++j) {
      if (!list.view.DecodeDocs(j, out).ok()) return state.SkipWithError("decode failed");
      benchmark::DoNotOptimize(out);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * list.view.count());
  state.counters["bits_per_int"] = 8.0 * static_cast<double>(list.words.size() * 4) / list.view.count();
}

void BM_DecodeFreqs(benchmark::State& state) {
  const auto list = MakeList(static_cast<uint32_t>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  if (list.view.count() == 0) return state.SkipWithError("encode failed");
  alignas(32) uint32_t out[kBlockSize];
  for (auto _ : state) {
    for (uint32_t j = 0; j < list.view.num_blocks(); ++j) {
      list.view.DecodeFreqs(j, out);
      benchmark::DoNotOptimize(out);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * list.view.count());
}

constexpr uint32_t kRawBlocks = 256;

std::vector<uint32_t> PackedBlocks(uint32_t bits) {
  std::mt19937 rng(bits);
  const uint32_t words = PackedBytes(kBlockSize, bits) / 4;
  std::vector<uint32_t> packed(static_cast<size_t>(words) * kRawBlocks + 1);
  uint32_t values[kBlockSize];
  for (uint32_t b = 0; b < kRawBlocks; ++b) {
    for (auto& v : values) v = bits == 32 ? rng() : rng() & ((1u << bits) - 1);
    PackBlock(values, kBlockSize, bits, packed.data() + static_cast<size_t>(b) * words);
  }
  return packed;
}

template <void (*Unpack)(const uint32_t*, uint32_t, uint32_t, uint32_t*)>
void BM_Unpack(benchmark::State& state) {
  const auto bits = static_cast<uint32_t>(state.range(0));
  const auto packed = PackedBlocks(bits);
  const uint32_t words = PackedBytes(kBlockSize, bits) / 4;
  alignas(32) uint32_t out[kBlockSize];
  for (auto _ : state) {
    for (uint32_t b = 0; b < kRawBlocks; ++b) {
      Unpack(packed.data() + static_cast<size_t>(b) * words, kBlockSize, bits, out);
      benchmark::DoNotOptimize(out);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRawBlocks * kBlockSize);
}

void BM_DocsKernelAvx2(benchmark::State& state) {
  const auto bits = static_cast<uint32_t>(state.range(0));
  const auto packed = PackedBlocks(bits);
  const uint32_t words = PackedBytes(kBlockSize, bits) / 4;
  alignas(32) uint32_t out[kBlockSize];
  for (auto _ : state) {
    for (uint32_t b = 0; b < kRawBlocks; ++b) {
      codec_internal::DecodeDocsFullAvx2(packed.data() + static_cast<size_t>(b) * words, bits, b, out);
      benchmark::DoNotOptimize(out);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRawBlocks * kBlockSize);
}

void BM_Crc32c(benchmark::State& state) {
  std::vector<uint8_t> data(static_cast<size_t>(state.range(0)));
  std::mt19937 rng(1);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (auto _ : state) benchmark::DoNotOptimize(Crc32c(data.data(), data.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void ListArgs(benchmark::internal::Benchmark* b) {
  for (int64_t len = 1 << 10; len <= (1 << 22); len *= 4) {
    for (int64_t gap : {1, 16, 1000}) b->Args({len, gap});
  }
}

BENCHMARK(BM_DecodeDocs)->Apply(ListArgs);
BENCHMARK(BM_DecodeFreqs)->Apply(ListArgs);
BENCHMARK(BM_Unpack<UnpackBlockAvx2>)->Name("BM_UnpackAvx2")->DenseRange(1, 32);
BENCHMARK(BM_Unpack<UnpackBlockScalar>)->Name("BM_UnpackScalar")->DenseRange(1, 32);
BENCHMARK(BM_DocsKernelAvx2)->DenseRange(1, 32);
BENCHMARK(BM_Crc32c)->Arg(4096)->Arg(1 << 20);

}  // namespace
}  // namespace search

BENCHMARK_MAIN();
