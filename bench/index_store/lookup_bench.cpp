// The point reads a shard node makes per query, one thread: a term's dictionary entry (after the
// first read, from the reader's memo) and a top-10's external ids (ten reads vs one MultiGet).
// usage: SEARCH_BENCH_SHARD=DIR/shard-0 lookup_bench   (a shard from `searchctl generate`)
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_shard.hpp"
#include "index_store/shard_store.hpp"

namespace search {
namespace {

struct Fixture : BenchShard {
  std::vector<std::string> terms;  // a sample of the shard's terms
};

Fixture& Get() {
  static Fixture f = [] {
    Fixture x{OpenBenchShard("generate", /*need_sources=*/false), {}};
    if (!x.shard) return x;
    size_t i = 0;
    (void)x.shard->ForEachTerm([&](std::string_view t, const TermInfo&) {
      if (i++ % 7 == 0) x.terms.emplace_back(t);
      return x.terms.size() < 20000;
    });
    return x;
  }();
  return f;
}

void BM_TermInfo(benchmark::State& state) {
  Fixture& f = Get();
  if (!f.shard) return state.SkipWithError(f.error.c_str());
  size_t i = 0;
  // The first pass over the sample reads RocksDB; the rest are answered by the reader's memo.
  for (auto _ : state) {
    auto info = f.shard->GetTermInfo(f.terms[i++ % f.terms.size()]);
    benchmark::DoNotOptimize(info);
  }
}
BENCHMARK(BM_TermInfo);

void BM_ExternalIds(benchmark::State& state) {
  Fixture& f = Get();
  if (!f.shard) return state.SkipWithError(f.error.c_str());
  const ShardMeta& m = f.shard->meta();
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> doc(m.doc_begin, m.doc_end - 1);
  std::vector<uint32_t> docs(10);
  std::vector<std::string> ids;
  for (auto _ : state) {
    for (uint32_t& d : docs) d = doc(rng);
    if (state.range(0) == 0) {
      for (uint32_t d : docs) benchmark::DoNotOptimize(f.shard->GetExternalId(d));
    } else {
      benchmark::DoNotOptimize(f.shard->GetExternalIds(docs, &ids));
    }
  }
  state.SetItemsProcessed(state.iterations() * 10);
}
// Arg 0: ten GetExternalId; 1: one GetExternalIds (MultiGet).
BENCHMARK(BM_ExternalIds)->Arg(0)->Arg(1);

}  // namespace
}  // namespace search

BENCHMARK_MAIN();
