// A node's fetch phase for one top-10, one thread: FetchDocs (sources through GetSources, and with
// highlight the source parsed and its "contents" highlighted) plus EncodeFetchResponse, what a
// worker does for one FetchRequest. The same ten documents every time (their source blocks cached:
// a recurring hit list), ten random ones (mostly blocks read and decompressed), and the same ten
// with highlighting of two frequent words.
// usage: SEARCH_BENCH_SHARD=DIR/shard-0 fetch_bench   (a shard of `searchctl index`, with sources)
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_shard.hpp"
#include "core/analyzer.hpp"
#include "index_store/shard_store.hpp"
#include "node/fetch.hpp"
#include "proto/wire.hpp"

namespace search {
namespace {

struct Fixture : BenchShard {
  Analyzer analyzer;
};

Fixture& Get() {
  static Fixture f = [] {
    Fixture x{OpenBenchShard("index", /*need_sources=*/true), {}};
    if (!x.shard) return x;
    auto a = Analyzer::Create(x.shard->meta().analyzer);
    if (!a.ok()) {
      x.error = a.status().ToString();
      x.shard.reset();
      return x;
    }
    x.analyzer = std::move(a).value();
    return x;
  }();
  return f;
}

// Arg 0: the same ten documents, sources; 1: ten random documents, sources; 2: the same ten,
// sources and highlights of "the" and "of" (words most documents hold).
void BM_Fetch(benchmark::State& state) {
  Fixture& f = Get();
  if (!f.shard) return state.SkipWithError(f.error.c_str());
  const ShardMeta& m = f.shard->meta();
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> doc(m.doc_begin, m.doc_end - 1);
  FetchRequestMsg req;
  req.docs.resize(10);
  for (uint32_t& d : req.docs) d = doc(rng);
  req.source = true;
  if (state.range(0) == 2) {
    req.highlight = true;
    req.highlight_terms = {"of", "the"};
  }
  uint64_t bytes = 0;
  for (auto _ : state) {
    if (state.range(0) == 1)
      for (uint32_t& d : req.docs) d = doc(rng);
    auto docs = FetchDocs(*f.shard, f.analyzer, req);
    if (!docs.ok()) return state.SkipWithError(docs.status().ToString().c_str());
    FetchResponseMsg resp;
    resp.docs = std::move(docs).value();
    bytes += EncodeFetchResponse(resp).size();
  }
  state.SetItemsProcessed(state.iterations() * 10);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Fetch)->Arg(0)->Arg(1)->Arg(2);

}  // namespace
}  // namespace search

BENCHMARK_MAIN();
