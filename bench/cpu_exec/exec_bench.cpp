// exec_bench: one-thread queries/s of ExecuteQuery over an in-memory Zipf corpus (Google
// Benchmark). Reports QPS and, per query, blocks and postings decoded, to see what pruning saves.
//   exec_bench [--benchmark_filter=...]   corpus size via EXEC_BENCH_DOCS (default 1,000,000)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "core/bm25.hpp"
#include "cpu_exec/cpu_executor.hpp"

namespace search {
namespace {

struct BenchIndex {
  uint32_t num_docs = 0;
  std::vector<float> norms;
  std::vector<float> idf;
  std::vector<std::vector<uint32_t>> storage;
  std::vector<std::optional<ListView>> views;
  std::vector<std::vector<uint32_t>> queries_short, queries_long;  // term ids, ascending
};

std::unique_ptr<BenchIndex> Build() {
  const char* env = std::getenv("EXEC_BENCH_DOCS");
  const uint32_t n = env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : 1000000u;
  const uint32_t vocab = 200000;
  auto ix = std::make_unique<BenchIndex>();
  ix->num_docs = n;
  std::mt19937_64 rng(7);
  std::vector<double> cdf(vocab);
  double acc = 0;
  for (uint32_t i = 0; i < vocab; ++i) cdf[i] = acc += 1.0 / std::pow(i + 1.0, 1.0);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::vector<uint32_t>> docs(vocab), tfs(vocab);
  std::vector<uint32_t> lens(n), toks;
  uint64_t total = 0;
  for (uint32_t d = 0; d < n; ++d) {
    const uint32_t len = 5 + static_cast<uint32_t>(rng() % 100);
    toks.clear();
    for (uint32_t i = 0; i < len; ++i)
      toks.push_back(static_cast<uint32_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng) * acc) - cdf.begin()));
    std::sort(toks.begin(), toks.end());
    for (size_t i = 0; i < toks.size();) {
      size_t j = i;
      while (j < toks.size() && toks[j] == toks[i]) ++j;
      docs[toks[i]].push_back(d);
      tfs[toks[i]].push_back(static_cast<uint32_t>(j - i));
      i = j;
    }
    lens[d] = len;
    total += len;
  }
  const double avgdl = static_cast<double>(total) / n;
  for (uint32_t d = 0; d < n; ++d) ix->norms.push_back(Bm25Norm(lens[d], avgdl));
  ix->idf.resize(vocab);
  ix->storage.resize(vocab);
  ix->views.resize(vocab);
  for (uint32_t t = 0; t < vocab; ++t) {
    if (docs[t].empty()) continue;
    const float w = ix->idf[t] = Bm25Idf(n, docs[t].size());
    auto blob = EncodeList(docs[t], tfs[t], 0, [&](uint32_t doc, uint32_t f) {
      return Bm25TermScore(w, f, ix->norms[doc]);
    });
    if (!blob.ok()) std::abort();
    ix->storage[t].assign((blob->size() + 3) / 4, 0);
    std::memcpy(ix->storage[t].data(), blob->data(), blob->size());
    auto v = ListView::Parse(std::string_view(reinterpret_cast<const char*>(ix->storage[t].data()), blob->size()));
    if (!v.ok()) std::abort();
    ix->views[t] = *v;
  }
  // Queries: 2..5 terms drawn from the 20,000 most frequent terms (log-uniform rank), like a
  // dictionary of query words.
  auto make = [&](int lo, int hi, std::vector<std::vector<uint32_t>>* out) {
    for (int q = 0; q < 1000; ++q) {
      const int len = lo + static_cast<int>(rng() % (hi - lo + 1));
      std::vector<uint32_t> terms;
      for (int i = 0; i < len; ++i)
        terms.push_back(static_cast<uint32_t>(std::exp(u(rng) * std::log(20000.0))));
      std::sort(terms.begin(), terms.end());
      terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
      out->push_back(terms);
    }
  };
  make(2, 3, &ix->queries_short);
  make(4, 6, &ix->queries_long);
  return ix;
}

const BenchIndex& Index() {
  static std::unique_ptr<BenchIndex> ix = Build();
  return *ix;
}

void BM_Query(benchmark::State& state, QueryMode mode, bool long_queries) {
  const BenchIndex& ix = Index();
  const uint32_t k = static_cast<uint32_t>(state.range(0));
  const auto& qs = long_queries ? ix.queries_long : ix.queries_short;
  std::vector<TermInput> in;
  size_t qi = 0;
  QueryStats total;
  uint64_t queries = 0;
  for (auto _ : state) {
    const auto& q = qs[qi++ % qs.size()];
    in.clear();
    for (uint32_t t : q) in.push_back({ix.views[t] ? &*ix.views[t] : nullptr, ix.idf[t]});
    auto r = ExecuteQuery(in, std::span<const float>(ix.norms), 0, mode, k);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(r);
    total += r->stats;
    ++queries;
  }
  if (queries == 0) return;
  state.counters["QPS"] = benchmark::Counter(static_cast<double>(queries), benchmark::Counter::kIsRate);
  state.counters["blocks/q"] = static_cast<double>(total.blocks_decoded) / queries;
  state.counters["postings/q"] = static_cast<double>(total.postings_decoded) / queries;
  state.counters["scored/q"] = static_cast<double>(total.postings_scored) / queries;
}

// EXEC_BENCH_ITERS=n runs every benchmark exactly n queries (comparable work across builds).
void Register() {
  const char* iters = std::getenv("EXEC_BENCH_ITERS");
  struct Spec {
    const char* name;
    QueryMode mode;
    bool long_queries;
    std::vector<int64_t> ks;
  };
  const Spec specs[] = {{"or_short", QueryMode::kOr, false, {10, 1000}},
                        {"or_long", QueryMode::kOr, true, {10, 1000}},
                        {"and_short", QueryMode::kAnd, false, {10, 1000}},
                        {"and_long", QueryMode::kAnd, true, {10, 1000}},
                        {"andor_long", QueryMode::kAndOr, true, {10}}};
  for (const Spec& sp : specs) {
    for (int64_t k : sp.ks) {
      auto* b = benchmark::RegisterBenchmark((std::string("BM_Query/") + sp.name).c_str(), BM_Query, sp.mode,
                                            sp.long_queries);
      b->Arg(k)->Unit(benchmark::kMicrosecond);
      if (iters != nullptr) b->Iterations(std::strtoll(iters, nullptr, 10));
    }
  }
}

}  // namespace
}  // namespace search

int main(int argc, char** argv) {
  search::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
