// A fetch's source reads on a shard, one thread: ShardReader::GetSources of ten documents (a
// top-10), from decoded blocks already cached (the same ten again: a recurring hit list) and from
// random documents (mostly blocks read from RocksDB and decompressed).
// usage: SEARCH_BENCH_SHARD=DIR/shard-0 source_bench   (a shard of `searchctl index`, with sources)
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_shard.hpp"
#include "index_store/shard_store.hpp"

namespace search {
namespace {

using Fixture = BenchShard;

Fixture& Get() {
  static Fixture f = OpenBenchShard("index", /*need_sources=*/true);
  return f;
}

void BM_GetSources(benchmark::State& state) {
  Fixture& f = Get();
  if (!f.shard) return state.SkipWithError(f.error.c_str());
  const ShardMeta& m = f.shard->meta();
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> doc(m.doc_begin, m.doc_end - 1);
  std::vector<uint32_t> docs(10);
  for (uint32_t& d : docs) d = doc(rng);
  std::vector<std::string> sources;
  uint64_t bytes = 0;
  for (auto _ : state) {
    if (state.range(0) == 1)
      for (uint32_t& d : docs) d = doc(rng);
    if (!f.shard->GetSources(docs, &sources).ok()) return state.SkipWithError("GetSources failed");
    for (const auto& s : sources) bytes += s.size();
  }
  state.SetItemsProcessed(state.iterations() * 10);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
// Arg 0: the same ten documents every time (their blocks cached); 1: ten random documents.
BENCHMARK(BM_GetSources)->Arg(0)->Arg(1);

}  // namespace
}  // namespace search

BENCHMARK_MAIN();
