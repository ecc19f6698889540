// ExecuteBatchGpu / ExecuteQueryGpu against the CPU engine (cpu_exec ExecuteQuery) on the random
// corpora of tests/cpu_exec/exec_fixture.hpp: the same documents in the same order with the same
// float scores, in every mode, for k from 1 to kMaxK, in batches mixing modes, lengths and k;
// long lists (> 100K postings) for the sparse and dense and-paths; absent terms; per-query errors
// (a corrupted block, bad k, too many terms) while the rest of the batch succeeds. Every batch runs
// on four contexts: the default or-path choice; theta for every or-query of >= 2 lists (the
// pruned path wherever it applies); the same with a tiny candidate buffer and sample (overflows
// rerun dense; left out under racecheck); and the dense or forced.
// Skips when no CUDA device is present.
#include <cmath>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/score_slack.hpp"
#include "engine_device.cuh"
#include "engine_plan.hpp"
#include "exec_fixture.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/gpu_engine.hpp"

namespace search::testing {
namespace {

using gpu::GpuContext;
using gpu::GpuQueryInput;
using gpu::GpuShardView;
using gpu::GpuTermInput;

const QueryMode kModes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// A MemShard's lists and norms copied to the device with plain cudaMalloc/cudaMemcpy.
struct DeviceShard {
  std::vector<void*> blobs;  // by term id; nullptr where absent
  float* d_norms = nullptr;
  GpuShardView view;
  DeviceShard() = default;
  DeviceShard(const DeviceShard&) = delete;
  ~DeviceShard() {
    for (void* p : blobs)
      if (p != nullptr) (void)cudaFree(p);
    if (d_norms != nullptr) (void)cudaFree(d_norms);
  }
};

void Upload(const MemShard& s, const Bm25Params& p, DeviceShard* d) {
  d->blobs.assign(s.views.size(), nullptr);
  for (size_t t = 0; t < s.views.size(); ++t) {
    if (!s.views[t].has_value()) continue;
    const std::string_view bytes = s.views[t]->bytes();
    CUDA_OK(cudaMalloc(&d->blobs[t], bytes.size()));
    CUDA_OK(cudaMemcpy(d->blobs[t], bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  CUDA_OK(cudaMalloc(&d->d_norms, std::max<size_t>(s.norms.size(), 1) * sizeof(float)));
  CUDA_OK(cudaMemcpy(d->d_norms, s.norms.data(), s.norms.size() * sizeof(float), cudaMemcpyHostToDevice));
  d->view.d_norms = d->d_norms;
  d->view.doc_begin = s.doc_begin;
  d->view.num_docs = s.doc_end - s.doc_begin;
  d->view.params = p;
  d->view.norm_floor = s.norms.empty() ? 0.0f : *std::min_element(s.norms.begin(), s.norms.end());
}

std::vector<GpuTermInput> GpuInputs(const std::vector<TermInput>& in, const MemShard& s, const DeviceShard& d,
                                    const TestQuery& q) {
  std::vector<GpuTermInput> out;
  for (size_t i = 0; i < in.size(); ++i) {
    GpuTermInput g;
    g.list = in[i].list;
    g.idf = in[i].idf;
    const uint32_t t = q.terms[i];
    g.d_blob = in[i].list != nullptr ? static_cast<const uint8_t*>(d.blobs[t]) : nullptr;
    out.push_back(g);
  }
  return out;
}

std::unique_ptr<GpuContext> MakeContext(const gpu::GpuContextOptions& o) {
  auto c = GpuContext::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

GpuContext* Context() {
  static std::unique_ptr<GpuContext> ctx = MakeContext({});
  return ctx.get();
}

// Theta for every or-query of >= 2 lists: the pruned path wherever it applies; and-queries
// bounded by a sample whatever their lengths.
gpu::GpuContextOptions PrunedOptions() {
  gpu::GpuContextOptions o;
  o.scratch_bytes = size_t{64} << 20;
  o.or_theta_min_postings = 0;
  o.or_pruned_divisor = 1;
  o.and_bound_min_lead = 0;
  return o;
}

GpuContext* PrunedContext() {
  static std::unique_ptr<GpuContext> ctx = MakeContext(PrunedOptions());
  return ctx.get();
}

// The same with a tiny candidate buffer (most attempts overflow and rerun dense) and a theta
// sample of a few documents.
gpu::GpuContextOptions SmallPrunedOptions() {
  gpu::GpuContextOptions o = PrunedOptions();
  o.or_candidate_cap = 24;
  o.or_theta_sample = 3;
  return o;
}

GpuContext* SmallPrunedContext() {
  static std::unique_ptr<GpuContext> ctx = MakeContext(SmallPrunedOptions());
  return ctx.get();
}

// The small buffer with the gather bounding the other lists by their max_scores only (most
// pruned attempts bound them by their blocks: their essential lists outnumber the buffer, or they
// have two lists).
GpuContext* SmallUnboundedContext() {
  static std::unique_ptr<GpuContext> ctx = [] {
    gpu::GpuContextOptions o = SmallPrunedOptions();
    o.or_bounded_gather = false;
    return MakeContext(o);
  }();
  return ctx.get();
}

// The dense or-path always.
GpuContext* DenseContext() {
  static std::unique_ptr<GpuContext> ctx = [] {
    gpu::GpuContextOptions o;
    o.scratch_bytes = size_t{64} << 20;
    o.or_pruned_divisor = 0;
    return MakeContext(o);
  }();
  return ctx.get();
}

struct NamedContext {
  const char* name;
  GpuContext* ctx;
};
int QuickLevel();
std::vector<NamedContext> AllContexts() {
  std::vector<NamedContext> all = {{"default", Context()}, {"pruned-or", PrunedContext()}, {"dense-or", DenseContext()}};
  // racecheck (level 2) leaves it out for time: its kernels are the pruned context's.
  if (QuickLevel() < 2) {
    all.push_back({"pruned-or-small", SmallPrunedContext()});
    all.push_back({"pruned-or-small-unbounded", SmallUnboundedContext()});
  }
  return all;
}

// SEARCH_TEST_QUICK (scripts/device-check.sh sets it for the compute-sanitizer passes, which
// slow kernels 10-100x, racecheck most): every test still runs, over fewer random batches,
// queries and corpora: 1/4 of them at level 1 (memcheck), 1/16 at level 2 (racecheck).
int QuickLevel() {
  static const int level = [] {
    const char* v = std::getenv("SEARCH_TEST_QUICK");
    if (v == nullptr || v[0] == '\0' || v[0] == '0') return 0;
    return v[0] == '1' ? 1 : 2;
  }();
  return level;
}
bool Quick() { return QuickLevel() > 0; }
int Scaled(int n) { return QuickLevel() == 0 ? n : std::max(1, n / (QuickLevel() == 1 ? 4 : 16)); }

std::string Describe(const Corpus& c, const TestQuery& q, QueryMode mode, uint32_t k) {
  std::string s = std::string(QueryModeName(mode)) + " k=" + std::to_string(k) + " [";
  for (uint32_t t : q.terms) {
    s += ' ';
    s += QueryTermName(c, t);
    s += "(df ";
    s += t < c.postings.size() ? std::to_string(c.df(t)) : std::string("-");
    s += ')';
  }
  return s + " ]";
}

// Exact comparison with a readable first difference.
void ExpectSameHits(const std::vector<ScoredDoc>& gpu, const std::vector<ScoredDoc>& cpu, const std::string& what) {
  if (gpu == cpu) return;
  std::ostringstream os;
  os << what << ": gpu " << gpu.size() << " hits, cpu " << cpu.size();
  for (size_t i = 0; i < std::max(gpu.size(), cpu.size()); ++i) {
    const bool g = i < gpu.size(), c = i < cpu.size();
    if (g && c && gpu[i] == cpu[i]) continue;
    os << "; first difference at rank " << i << ": gpu ";
    if (g)
      os << "(" << gpu[i].doc << ", " << gpu[i].score << ")";
    else
      os << "-";
    os << " cpu ";
    if (c)
      os << "(" << cpu[i].doc << ", " << cpu[i].score << ")";
    else
      os << "-";
    if (g && c) os.precision(9), os << " rel " << (gpu[i].score - cpu[i].score) / std::max(1e-30f, cpu[i].score);
    break;
  }
  ADD_FAILURE() << os.str();
}

struct BatchItem {
  TestQuery q;
  QueryMode mode;
  uint32_t k;
};

// The items' CPU engine inputs and their GPU batch (which points into gpu_in).
struct BatchInputs {
  std::vector<std::vector<TermInput>> cpu_in;
  std::vector<std::vector<GpuTermInput>> gpu_in;
  std::vector<GpuQueryInput> batch;
  BatchInputs(const Corpus& c, const MemShard& s, const DeviceShard& d, const std::vector<BatchItem>& items) {
    for (const BatchItem& it : items) {
      cpu_in.push_back(Inputs(c, s, it.q));
      gpu_in.push_back(GpuInputs(cpu_in.back(), s, d, it.q));
    }
    for (size_t i = 0; i < items.size(); ++i) batch.push_back(GpuQueryInput{gpu_in[i], items[i].mode, items[i].k});
  }
  BatchInputs(const BatchInputs&) = delete;
  BatchInputs& operator=(const BatchInputs&) = delete;
};

// A zipf corpus (s = 1.0) as one shard, on the device.
struct ZipfShard {
  Corpus c;
  MemShard s;
  DeviceShard d;
  ZipfShard(uint32_t docs, uint32_t vocab, uint32_t max_len, uint64_t seed, int fixed_len = -1) {
    CorpusOptions o;
    o.num_docs = docs;
    o.vocab = vocab;
    o.max_len = max_len;
    o.fixed_len = fixed_len;
    o.zipf_s = 1.0;
    o.seed = seed;
    c = MakeCorpus(o);
    s = BuildShard(c, 0, c.num_docs);
    Upload(s, {}, &d);
  }
};

// Runs the items as one GPU batch on each context and compares each with the CPU engine.
void CheckBatch(const Corpus& c, const MemShard& s, const DeviceShard& d, const std::vector<BatchItem>& items,
                const Bm25Params& p, std::vector<SearchResult>* gpu_results = nullptr) {
  const BatchInputs in(c, s, d, items);
  const auto& cpu_in = in.cpu_in;
  const auto& batch = in.batch;
  std::vector<Result<SearchResult>> cpu_out;
  for (size_t i = 0; i < items.size(); ++i)
    cpu_out.push_back(
        ExecuteQuery(cpu_in[i], std::span<const float>(s.norms), s.doc_begin, items[i].mode, items[i].k, p));
  if (gpu_results != nullptr) gpu_results->clear();
  for (const NamedContext& nc : AllContexts()) {
    SCOPED_TRACE(nc.name);
    ASSERT_NE(nc.ctx, nullptr);
    std::vector<Result<SearchResult>> out;
    const Status st = gpu::ExecuteBatchGpu(*nc.ctx, d.view, batch, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(out.size(), items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string what = std::string(nc.name) + " " + Describe(c, items[i].q, items[i].mode, items[i].k);
      const Result<SearchResult>& cpu = cpu_out[i];
      ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status().ToString();
      ASSERT_TRUE(out[i].ok()) << what << ": " << out[i].status().ToString();
      if (gpu_results != nullptr && nc.ctx == PrunedContext()) gpu_results->push_back(*out[i]);
      ExpectSameHits(out[i]->hits, cpu->hits, what);
      EXPECT_EQ(out[i]->stats.lists, cpu->stats.lists) << what;
      if (!cpu->hits.empty()) {
        EXPECT_GT(out[i]->stats.blocks_decoded, 0u) << what;
      }
      EXPECT_LE(out[i]->stats.postings_decoded, out[i]->stats.blocks_decoded * kBlockSize) << what;
      if (::testing::Test::HasFailure()) return;
    }
  }
}

uint32_t RandomK(std::mt19937_64& rng) {
  static const uint32_t ks[] = {1, 2, 10, 100, 1000, kMaxK};
  return ks[rng() % (sizeof(ks) / sizeof(ks[0]))];
}

std::vector<BatchItem> RandomBatch(const Corpus& c, std::mt19937_64& rng, size_t n) {
  std::vector<BatchItem> items;
  for (size_t i = 0; i < n; ++i) items.push_back({RandomQuery(c, rng), kModes[rng() % 3], RandomK(rng)});
  return items;
}

#define SKIP_WITHOUT_GPU()                                           \
  do {                                                               \
    if (!gpu::GpuAvailable()) GTEST_SKIP() << gpu::GpuDescription(); \
    ASSERT_NE(Context(), nullptr);                                   \
    ASSERT_NE(PrunedContext(), nullptr);                             \
    ASSERT_NE(DenseContext(), nullptr);                              \
    ASSERT_NE(SmallPrunedContext(), nullptr);                        \
  } while (0)

TEST(GpuEngine, MatchesCpuOnRandomCorporaInBatches) {
  SKIP_WITHOUT_GPU();
  struct Case {
    const char* name;
    CorpusOptions o;
    int batches;
  };
  std::vector<Case> cases;
  CorpusOptions zipf;
  zipf.num_docs = 6000;
  zipf.vocab = 3000;
  zipf.seed = 11;
  cases.push_back({"zipf", zipf, 6});
  CorpusOptions tied;
  tied.num_docs = 3000;
  tied.vocab = 30;
  tied.zipf_s = 0.5;
  tied.fixed_len = 6;
  tied.seed = 22;
  cases.push_back({"tied", tied, 4});
  CorpusOptions tied_one;
  tied_one.num_docs = 2000;
  tied_one.vocab = 12;
  tied_one.fixed_len = 1;
  tied_one.seed = 23;
  cases.push_back({"tied_one", tied_one, 2});
  CorpusOptions sparse;
  sparse.num_docs = 4000;
  sparse.vocab = 800;
  sparse.empty_fraction = 0.3;
  sparse.heavy_fraction = 0.05;
  sparse.zipf_s = 1.3;
  sparse.seed = 33;
  cases.push_back({"sparse", sparse, 4});
  CorpusOptions small;
  small.num_docs = 150;
  small.vocab = 60;
  small.max_len = 20;
  small.seed = 44;
  cases.push_back({"small", small, 3});
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.name);
    const Corpus c = MakeCorpus(cs.o);
    const MemShard s = BuildShard(c, 0, c.num_docs);
    DeviceShard d;
    Upload(s, {}, &d);
    std::mt19937_64 rng(cs.o.seed * 7 + 1);
    for (int b = 0; b < Scaled(cs.batches); ++b) {
      CheckBatch(c, s, d, RandomBatch(c, rng, 64), {});
      if (HasFailure()) return;
    }
    // Every mode and k for the same queries, one query per call (racecheck, level 2: one k per
    // mode; the random batches above mix modes and k already).
    const std::vector<uint32_t> ks =
        QuickLevel() >= 2 ? std::vector<uint32_t>{kMaxK} : std::vector<uint32_t>{1u, 10u, 1000u, kMaxK};
    for (int qi = 0; qi < Scaled(20); ++qi) {
      const TestQuery q = RandomQuery(c, rng);
      for (QueryMode mode : kModes)
        for (uint32_t k : ks) CheckBatch(c, s, d, {{q, mode, k}}, {});
      if (HasFailure()) return;
    }
  }
}

// Odd sizes around block boundaries, a shard that does not start at 0, other BM25 parameters.
TEST(GpuEngine, MatchesCpuOnManySmallCorporaAndShards) {
  SKIP_WITHOUT_GPU();
  for (uint64_t seed = 100; seed < 100 + static_cast<uint64_t>(Scaled(60)); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    CorpusOptions o;
    o.seed = seed;
    o.num_docs = 100 + static_cast<uint32_t>(rng() % 1500);
    o.vocab = 10 + static_cast<uint32_t>(rng() % 150);
    o.zipf_s = 0.3 + (rng() % 12) / 10.0;
    o.max_len = 1 + static_cast<uint32_t>(rng() % 200);
    o.empty_fraction = (rng() % 4) / 10.0;
    o.heavy_fraction = (rng() % 3) / 20.0;
    if (rng() % 4 == 0) o.fixed_len = static_cast<int>(rng() % 10);
    Bm25Params p;
    if (seed % 3 == 0) p = Bm25Params{1.2f, 0.75f};
    const Corpus c = MakeCorpus(o);
    const uint32_t begin = seed % 2 == 0 ? 0 : static_cast<uint32_t>(rng() % (c.num_docs / 2));
    const uint32_t end = seed % 5 == 0 ? c.num_docs - static_cast<uint32_t>(rng() % (c.num_docs / 4)) : c.num_docs;
    const MemShard s = BuildShard(c, begin, end, p);
    DeviceShard d;
    Upload(s, p, &d);
    CheckBatch(c, s, d, RandomBatch(c, rng, 48), p);
    if (HasFailure()) return;
  }
}

// Lists of > 100K postings: the and-path's sparse (rare term first) and dense (comparable
// lengths) variants, large or-accumulators, k up to kMaxK over many ties.
TEST(GpuEngine, MatchesCpuOnLongLists) {
  SKIP_WITHOUT_GPU();
  const ZipfShard z(250000, 4000, 60, 77);
  const Corpus& c = z.c;
  const MemShard& s = z.s;
  const DeviceShard& d = z.d;
  ASSERT_GT(c.df(0), 100000u);
  std::vector<BatchItem> items;
  const uint32_t rare[] = {500, 1500, 3999};
  for (QueryMode mode : kModes)
    for (uint32_t k : {1u, 10u, 1000u, kMaxK}) {
      items.push_back({TestQuery{{0, 1}}, mode, k});                          // two long lists: dense
      items.push_back({TestQuery{{0, 1, 2, 3}}, mode, k});                    // four long lists
      for (uint32_t r : rare) items.push_back({TestQuery{{0, r}}, mode, k});  // sparse probes
      items.push_back({TestQuery{{1, 7, 60, 900}}, mode, k});
    }
  CheckBatch(c, s, d, items, {});
  std::mt19937_64 rng(5);
  for (int b = 0; b < (Quick() ? 1 : 3) && !HasFailure(); ++b) CheckBatch(c, s, d, RandomBatch(c, rng, 64), {});
}

// The pruned or-path on a mid-size shard: a frequent term with rare ones (the frequent list is
// non-essential: only probed at the rare terms' documents, so far fewer postings are decoded than
// it holds), several frequent terms (theta from a long list, maybe no pruning), rare lists with
// fewer than k postings (theta from another list, or 0), k = 1 .. kMaxK, ties (fixed lengths).
TEST(GpuEngine, PrunedOrMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (int fixed : {-1, 4}) {
    SCOPED_TRACE("fixed_len " + std::to_string(fixed));
    const ZipfShard z(60000, 5000, 50, 91 + static_cast<uint64_t>(fixed + 1), fixed);
    const Corpus& c = z.c;
    const MemShard& s = z.s;
    const DeviceShard& d = z.d;
    // Rare terms: df in [12, 60] (>= k = 10, < k = 100) and [1, 5] (< k for every k > 5).
    std::vector<uint32_t> rare, tiny;
    for (uint32_t t = 50; t < c.postings.size() && (rare.size() < 6 || tiny.size() < 3); ++t) {
      if (c.df(t) >= 12 && c.df(t) <= 60 && rare.size() < 6) rare.push_back(t);
      if (c.df(t) >= 1 && c.df(t) <= 5 && tiny.size() < 3) tiny.push_back(t);
    }
    ASSERT_GE(rare.size(), 3u);
    ASSERT_GT(c.df(0), 15000u);
    std::vector<BatchItem> items;
    std::vector<size_t> probe_only;  // items whose frequent list must be probed, not decoded whole
    std::vector<size_t> filtered;    // two frequent lists, k = 1: few documents may reach theta
    std::vector<size_t> single;      // the frequent list alone, k <= 10
    for (uint32_t k : {1u, 10u, 1000u, kMaxK}) {
      if (k == 1) filtered.push_back(items.size());
      items.push_back({TestQuery{{0, 1}}, QueryMode::kOr, k});
      for (uint32_t r : rare) {
        if (k == 10) probe_only.push_back(items.size());
        items.push_back({TestQuery{{0, r}}, QueryMode::kOr, k});
      }
      items.push_back({TestQuery{{0, 1, rare[0]}}, QueryMode::kOr, k});
      items.push_back({TestQuery{{0, 1, 2, 3, 4, 5}}, QueryMode::kOr, k});
      items.push_back({TestQuery{{rare[1], rare[2], 7}}, QueryMode::kOr, k});
      for (uint32_t t : tiny) {
        items.push_back({TestQuery{{0, t}}, QueryMode::kOr, k});
        items.push_back({TestQuery{{t, rare[0]}}, QueryMode::kOr, k});
      }
      items.push_back({TestQuery{{2, rare[0], rare[1]}}, QueryMode::kAndOr, k});
      items.push_back({TestQuery{{0, 3}}, QueryMode::kAndOr, k});
      // One term under every mode: its k best documents, by its block maxima.
      for (QueryMode mode : kModes) {
        if (k <= 10 && fixed < 0) single.push_back(items.size());  // (equal lengths: equal block maxima)
        items.push_back({TestQuery{{0}}, mode, k});
        items.push_back({TestQuery{{rare[0]}}, mode, k});
        for (uint32_t t : tiny) items.push_back({TestQuery{{t}}, mode, k});
      }
    }
    for (BatchItem& it : items)  // canonical order
      std::sort(it.q.terms.begin(), it.q.terms.end(),
                [&](uint32_t a, uint32_t b) { return QueryTermName(c, a) < QueryTermName(c, b); });
    std::vector<SearchResult> pruned;
    CheckBatch(c, s, d, items, {}, &pruned);
    if (HasFailure()) return;
    ASSERT_EQ(pruned.size(), items.size());
    // (the theta round's sample and the final round each decode only its blocks holding the rare
    // documents: less than the whole list between them)
    for (size_t i : probe_only) {
      EXPECT_LT(pruned[i].stats.postings_decoded, c.df(0))
          << Describe(c, items[i].q, items[i].mode, items[i].k) << ": the frequent list was not pruned";
    }
    // A list alone is read only in its blocks whose maxima reach theta (its k highest blocks give
    // theta): far less than the whole list.
    for (size_t i : single) {
      EXPECT_LT(pruned[i].stats.postings_decoded, c.df(0) / 2)
          << Describe(c, items[i].q, items[i].mode, items[i].k) << ": the list was decoded whole";
    }
    // The sampled theta and MaxScore's filter leave few of the union's documents scored.
    for (size_t i : filtered) {
      const uint64_t uni = uint64_t{c.df(items[i].q.terms[0])} + c.df(items[i].q.terms[1]);
      EXPECT_LT(pruned[i].stats.postings_scored, uni / 2)
          << Describe(c, items[i].q, items[i].mode, items[i].k) << ": the candidates were not filtered";
    }
    // With no norm floor (no tf-only bounds: every candidate's norm read) the same batch gives the
    // same hits.
    {
      const BatchInputs in(c, s, d, items);
      std::vector<Result<SearchResult>> out;
      GpuShardView no_floor = d.view;
      no_floor.norm_floor = 0.0f;
      const Status st = gpu::ExecuteBatchGpu(*PrunedContext(), no_floor, in.batch, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(out.size(), items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        ASSERT_TRUE(out[i].ok()) << out[i].status().ToString();
        ExpectSameHits(out[i]->hits, pruned[i].hits,
                       "no norm floor " + Describe(c, items[i].q, items[i].mode, items[i].k));
      }
    }
    // The same queries one at a time (batches of one).
    for (size_t i = 0; i < items.size() && !HasFailure(); i += Quick() ? 20 : 5) CheckBatch(c, s, d, {items[i]}, {});
  }
}

// Runs `items` as one batch on ctx and checks every answer against the CPU engine; adds the
// postings the GPU decoded to *decoded and, when given, the documents it scored to *scored.
void RunAgainstCpu(const ZipfShard& z, const BatchInputs& in, const std::vector<BatchItem>& items, GpuContext& ctx,
                   uint64_t* decoded, uint64_t* scored = nullptr) {
  std::vector<Result<SearchResult>> out;
  const Status st = gpu::ExecuteBatchGpu(ctx, z.d.view, in.batch, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(out.size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string what = Describe(z.c, items[i].q, items[i].mode, items[i].k);
    const Result<SearchResult> cpu =
        ExecuteQuery(in.cpu_in[i], std::span<const float>(z.s.norms), z.s.doc_begin, items[i].mode, items[i].k, {});
    ASSERT_TRUE(cpu.ok()) << what;
    ASSERT_TRUE(out[i].ok()) << what << ": " << out[i].status().ToString();
    ExpectSameHits(out[i]->hits, cpu->hits, what);
    *decoded += out[i]->stats.postings_decoded;
    if (scored != nullptr) *scored += out[i]->stats.postings_scored;
  }
}

// The or-queries of `terms` at k 1, 10 and 100 as one batch, on a pruned context with set(opt, true)
// and again with set(opt, false), each answer checked against the CPU engine: the postings the GPU
// decoded, {true, false}.
std::array<uint64_t, 2> OrDecodedOnAndOff(const ZipfShard& z, const std::vector<std::vector<uint32_t>>& terms,
                                          const std::function<void(gpu::GpuContextOptions&, bool)>& set) {
  std::vector<BatchItem> items;
  for (uint32_t k : {1u, 10u, 100u})
    for (const std::vector<uint32_t>& t : terms) items.push_back({TestQuery{t}, QueryMode::kOr, k});
  for (BatchItem& it : items)  // canonical order
    std::sort(it.q.terms.begin(), it.q.terms.end(),
              [&](uint32_t a, uint32_t b) { return QueryTermName(z.c, a) < QueryTermName(z.c, b); });
  const BatchInputs in(z.c, z.s, z.d, items);
  std::array<uint64_t, 2> decoded = {0, 0};
  for (bool on : {true, false}) {
    SCOPED_TRACE(on ? "on" : "off");
    gpu::GpuContextOptions opt = PrunedOptions();
    set(opt, on);
    const std::unique_ptr<GpuContext> ctx = MakeContext(opt);
    EXPECT_NE(ctx, nullptr);
    if (ctx == nullptr) break;
    RunAgainstCpu(z, in, items, *ctx, &decoded[on ? 0 : 1]);
  }
  return decoded;
}

// Frequent terms whose lists outnumber the candidate buffer: the gather bounds the other lists by
// their blocks (or_bounded_gather), and the answers stay exact while fewer postings are decoded
// than with their max_scores as the bound (blocks skipped, fewer candidates to probe for, fewer
// dense reruns of a buffer overflowed).
TEST(GpuEngine, BoundedGatherIsExactAndDecodesLess) {
  SKIP_WITHOUT_GPU();
  const ZipfShard z(60000, 5000, 50, 1234);
  ASSERT_GT(z.c.df(5), 4096u);
  const std::array<uint64_t, 2> decoded =
      OrDecodedOnAndOff(z, {{0, 1}, {0, 1, 2}, {1, 3, 5}, {0, 1, 2, 3, 4, 5}, {2, 4, 30}, {0, 40, 60}},
                        [](gpu::GpuContextOptions& o, bool on) {
                          o.or_candidate_cap = 4096;
                          o.or_bounded_gather = on;
                        });
  EXPECT_LT(decoded[0], decoded[1]) << "the block bounds pruned nothing more than the max_scores";
}

// Progressive probing bounds a candidate by the block max of the block it is located in (block-max
// MaxScore): candidates whose partial score plus that block's max plus the later lists' max_scores
// cannot reach theta are dropped before the block is decoded for them. The CPU engine's answers,
// every k, with fewer postings decoded than with the probe's own filter alone.
TEST(GpuEngine, ProbeBlockBoundIsExactAndDecodesLess) {
  SKIP_WITHOUT_GPU();
  const ZipfShard z(60000, 5000, 50, 77);
  ASSERT_GT(z.c.df(5), 4096u);
  const std::array<uint64_t, 2> decoded = OrDecodedOnAndOff(
      z, {{0, 1, 2}, {1, 3, 5}, {0, 1, 2, 3, 4, 5}, {2, 4, 30}, {0, 40, 60}, {10, 20, 30, 40}, {3, 7, 60, 90}},
      [](gpu::GpuContextOptions& o, bool on) { o.or_probe_block_bound = on; });
  std::printf("probe block bound: %llu decoded; list bound: %llu decoded\n",
              static_cast<unsigned long long>(decoded[0]), static_cast<unsigned long long>(decoded[1]));
  EXPECT_LT(decoded[0], decoded[1]) << "the block maxima dropped no candidate before its block was decoded";
}

// Bounded and-queries (theta from a sample of the lead's best contributions, then candidates
// dropped by their bounds before the longer lists are decoded): the CPU engine's answers, every k,
// on lists of comparable and of very different lengths, with fewer documents scored (the sample's
// included) than unbounded. Fewer postings decoded shows only where the lists are long against the
// sample's blocks (25.2M documents in BENCHMARKS.md); at this size the sample's blocks cost more.
TEST(GpuEngine, BoundedAndIsExactAndScoresFewer) {
  SKIP_WITHOUT_GPU();
  const ZipfShard z(250000, 4000, 60, 91);
  ASSERT_GT(z.c.df(1), 50000u);
  std::vector<BatchItem> items;
  for (uint32_t k : {1u, 10u, 100u, kMaxK})
    for (const std::vector<uint32_t>& t : std::vector<std::vector<uint32_t>>{
             {0, 1}, {0, 1, 2}, {1, 2, 3}, {0, 3}, {2, 9}, {0, 1, 2, 3, 4}})
      items.push_back({TestQuery{t}, QueryMode::kAnd, k});
  items.push_back({TestQuery{{0, 1}}, QueryMode::kAndOr, 10});
  for (BatchItem& it : items)  // canonical order
    std::sort(it.q.terms.begin(), it.q.terms.end(),
              [&](uint32_t a, uint32_t b) { return QueryTermName(z.c, a) < QueryTermName(z.c, b); });
  const BatchInputs in(z.c, z.s, z.d, items);
  uint64_t decoded[2] = {0, 0}, scored[2] = {0, 0}, bounded_queries = 0;
  for (bool bounded : {true, false}) {
    SCOPED_TRACE(bounded ? "bounded" : "unbounded");
    gpu::GpuContextOptions opt;
    opt.and_bound_min_lead = bounded ? 1024 : uint64_t{1} << 40;
    const std::unique_ptr<GpuContext> ctx = MakeContext(opt);
    ASSERT_NE(ctx, nullptr);
    const uint64_t before = gpu::EngineTimes().and_bounded;
    RunAgainstCpu(z, in, items, *ctx, &decoded[bounded ? 0 : 1], &scored[bounded ? 0 : 1]);
    if (bounded) bounded_queries = gpu::EngineTimes().and_bounded - before;
  }
  std::printf("bounded: %llu decoded, %llu scored; unbounded: %llu decoded, %llu scored\n",
              static_cast<unsigned long long>(decoded[0]), static_cast<unsigned long long>(scored[0]),
              static_cast<unsigned long long>(decoded[1]), static_cast<unsigned long long>(scored[1]));
  EXPECT_GE(bounded_queries, items.size() / 2) << "most of these queries should be bounded";
  EXPECT_LT(scored[0] * 2, scored[1]) << "the bounds dropped fewer than half of the documents scored";
}

// A query of one list takes the blocks of its k highest block maxima in one round (kTopBlocks):
// exact with no rerun where the maxima differ ("varied": lengths and tfs drawn), and rerun on the
// theta path where they tie ("tied": every posting has tf 1 in a document of length 6, so every
// posting reaches the floor and the buffer overflows); both equal the CPU engine, in every mode.
TEST(GpuEngine, OneListTopBlocksAreExactAndRerunOnTies) {
  SKIP_WITHOUT_GPU();
  Corpus c;
  c.num_docs = 40000;
  c.postings.resize(3);
  for (uint32_t t = 0; t < 3; ++t) c.names.push_back(TermName(t));
  std::mt19937_64 rng(77);
  for (uint32_t d = 0; d < c.num_docs; ++d) {
    const bool tied = d % 2 == 0;
    const uint32_t len = tied ? 6 : 10 + static_cast<uint32_t>(rng() % 190);
    c.doc_len.push_back(len);
    c.total_tokens += len;
    if (tied)
      c.postings[0].push_back({d, 1});
    else if (rng() % 2 == 0)
      c.postings[1].push_back({d, 1 + static_cast<uint32_t>(rng() % 20)});
    if (d % 7 == 0) c.postings[2].push_back({d, 1});
  }
  const MemShard s = BuildShard(c, 0, c.num_docs);
  DeviceShard d;
  Upload(s, {}, &d);
  ASSERT_GT(c.df(1), 8000u);
  std::vector<BatchItem> items;
  std::vector<size_t> varied_small_k;
  for (uint32_t k : {1u, 10u, 100u, 1000u})
    for (QueryMode mode : kModes)
      for (uint32_t t : {0u, 1u}) {
        if (t == 1 && k <= 10) varied_small_k.push_back(items.size());
        items.push_back({TestQuery{{t}}, mode, k});
      }
  items.push_back({TestQuery{{0, 2}}, QueryMode::kOr, 10});  // two lists: the theta round as before
  CheckBatch(c, s, d, items, {});
  if (HasFailure()) return;
  // On the pruned context (theta for any list of >= k postings) every one-list query is eligible.
  const BatchInputs in(c, s, d, items);
  const gpu::GpuEngineTimes t0 = gpu::EngineTimes();
  std::vector<Result<SearchResult>> out;
  const Status st = gpu::ExecuteBatchGpu(*PrunedContext(), d.view, in.batch, &out);
  const gpu::GpuEngineTimes t1 = gpu::EngineTimes();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(out.size(), items.size());
  EXPECT_EQ(t1.top_blocks - t0.top_blocks, items.size() - 1);
  // Every tied query reran (12); a varied one with k <= 10 did not, and read less than half its list
  // (24 of 79 blocks on an H200).
  EXPECT_GE(t1.top_blocks_rerun - t0.top_blocks_rerun, 12u);
  EXPECT_LT(t1.top_blocks_rerun - t0.top_blocks_rerun, items.size() - 1 - varied_small_k.size() + 1);
  for (size_t i : varied_small_k) {
    ASSERT_TRUE(out[i].ok()) << out[i].status().ToString();
    EXPECT_LT(out[i]->stats.postings_decoded, c.df(1) / 2) << Describe(c, items[i].q, items[i].mode, items[i].k);
  }
}

// The one-list top blocks' exactness rule and eligibility, on the host (no GPU needed).
TEST(GpuEnginePlan, TopBlocksAnswerIsExactOnlyWhenTheKthBestClearsTheFloorBySlack) {
  using gpu::engine_internal::QState;
  QState s;
  s.k = 3;
  s.present.resize(1);
  s.present[0].count = 100000;
  s.max_score = {4.0f};
  auto with = [&](float theta, std::vector<float> scores) {
    QState q = s;
    q.theta = theta;
    for (size_t i = 0; i < scores.size(); ++i) q.result.hits.push_back(ScoredDoc{static_cast<uint32_t>(i), scores[i]});
    return gpu::engine_internal::TopBlocksExact(q);
  };
  const float f = 2.0f, need = f * ScoreSlack(1);
  EXPECT_TRUE(with(0.0f, {}));                      // every posting was read
  EXPECT_TRUE(with(0.0f, {3.0f, 1.0f}));            // a list of fewer than k postings
  EXPECT_FALSE(with(f, {3.0f, 2.5f}));              // fewer than k reached the floor
  EXPECT_TRUE(with(f, {3.0f, 2.5f, need}));         // the k-th best clears F * slack
  EXPECT_FALSE(with(f, {3.0f, 2.5f, f}));           // at F itself a posting of a block not read may tie it
  EXPECT_FALSE(with(f, {3.0f, 2.5f, std::nextafter(need, 0.0f)}));
  EXPECT_TRUE(gpu::engine_internal::TopBlocksEligible(s));
  EXPECT_EQ(gpu::engine_internal::TopBlocksCap(s), 8u * 3 + 1024);
  QState two = s;
  two.present.resize(2);
  EXPECT_FALSE(gpu::engine_internal::TopBlocksEligible(two));  // two lists: the theta round
  QState excl = s;
  excl.excl_mask = 1;
  EXPECT_FALSE(gpu::engine_internal::TopBlocksEligible(excl));
  QState big = s;
  big.k = gpu::engine_internal::kTopBlocksMaxK + 1;
  EXPECT_FALSE(gpu::engine_internal::TopBlocksEligible(big));
  QState shortl = s;
  shortl.present[0].count = 10;
  EXPECT_EQ(gpu::engine_internal::TopBlocksCap(shortl), 10u);
}

// The searches of a skip array for each of docs: out[3i] LocateBlock's block, out[3i + 1]
// FirstBlockReaching's over the whole list, out[3i + 2] GallopFrom's from block 0.
__global__ void LocateAllKernel(gpu::engine_internal::DevList l, const uint32_t* docs, uint32_t n, uint32_t* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[3 * i] = gpu::engine_internal::LocateBlock(l, docs[i]);
  out[3 * i + 1] = gpu::engine_internal::FirstBlockReaching(l, 0, l.num_blocks, docs[i]);
  out[3 * i + 2] = gpu::engine_internal::GallopFrom(l, 0, docs[i]);
}

// LocateBlock (a guess from an even spread of the documents, then steps to a bracket) and GallopFrom
// find the block that binary search over the whole skip array finds, for every document: each block's last,
// its neighbours, below the list, past it and at random, on lists of 1 to 100,000 blocks spread
// evenly, crowded at the front or the back, and at random.
TEST(GpuEngine, LocateBlockFindsWhatBinarySearchFinds) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  for (uint32_t nb : {1u, 2u, 3u, 1000u, 100000u})
    for (int shape = 0; shape < 4; ++shape) {
      SCOPED_TRACE("blocks " + std::to_string(nb) + " shape " + std::to_string(shape));
      std::vector<BlockMeta> meta(nb);
      const uint32_t base = 1000;
      uint32_t doc = base;
      for (uint32_t b = 0; b < nb; ++b) {
        const uint32_t gap = shape == 0   ? 200u
                             : shape == 1 ? (b < nb / 10 ? 1u : 5000u)  // most documents in the last 90% of the range
                             : shape == 2 ? (b < nb * 9 / 10 ? 1u : 5000u)
                                          : 1u + static_cast<uint32_t>(rng() % 1000);
        doc += gap;
        meta[b] = BlockMeta{};
        meta[b].last_doc = doc;
        meta[b].count = 128;
      }
      std::vector<uint32_t> docs = {0, base - 1, base, base + 1, doc, doc + 1, 0xffffffffu};
      for (uint32_t b = 0; b < nb; ++b)
        for (uint32_t d : {meta[b].last_doc - 1, meta[b].last_doc, meta[b].last_doc + 1}) docs.push_back(d);
      for (int i = 0; i < 1000; ++i) docs.push_back(base + static_cast<uint32_t>(rng() % (doc - base + 2)));
      BlockMeta* d_meta = nullptr;
      uint32_t *d_docs = nullptr, *d_out = nullptr;
      CUDA_OK(cudaMalloc(&d_meta, nb * sizeof(BlockMeta)));
      CUDA_OK(cudaMalloc(&d_docs, docs.size() * sizeof(uint32_t)));
      CUDA_OK(cudaMalloc(&d_out, 3 * docs.size() * sizeof(uint32_t)));
      CUDA_OK(cudaMemcpy(d_meta, meta.data(), nb * sizeof(BlockMeta), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(d_docs, docs.data(), docs.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
      gpu::engine_internal::DevList l;
      l.meta = d_meta;
      l.num_blocks = nb;
      l.count = nb * 128;
      l.base_doc = base;
      const uint32_t n = static_cast<uint32_t>(docs.size());
      LocateAllKernel<<<(n + 255) / 256, 256>>>(l, d_docs, n, d_out);
      CUDA_OK(cudaGetLastError());
      std::vector<uint32_t> out(3 * docs.size());
      CUDA_OK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
      CUDA_OK(cudaFree(d_meta));
      CUDA_OK(cudaFree(d_docs));
      CUDA_OK(cudaFree(d_out));
      size_t wrong = 0;
      for (size_t i = 0; i < docs.size(); ++i) {
        // The host's answer too: the first block whose last document reaches doc.
        const size_t want = static_cast<size_t>(
            std::partition_point(meta.begin(), meta.end(), [&](const BlockMeta& m) { return m.last_doc < docs[i]; }) -
            meta.begin());
        EXPECT_EQ(out[3 * i + 1], want) << "doc " << docs[i];
        if ((out[3 * i] != want || out[3 * i + 2] != want) && ++wrong <= 5)
          ADD_FAILURE() << "doc " << docs[i] << ": located " << out[3 * i] << ", galloped " << out[3 * i + 2]
                        << ", not " << want;
      }
      EXPECT_EQ(wrong, 0u);
    }
}

// PlanOr's choice of the gather's bound for the other lists: their blocks (bounded) for any query
// with theta, however many lists; their max_scores for a query without theta (or with the option
// off).
TEST(GpuEnginePlan, OrGatherBoundsEveryQueryWithThetaByTheirBlocks) {
  using gpu::engine_internal::PhaseKind;
  using gpu::engine_internal::QState;
  gpu::GpuContextOptions o;
  o.or_candidate_cap = 1000;
  auto plan = [&](std::vector<uint32_t> counts, float theta, const gpu::GpuContextOptions& opt) {
    QState s;
    s.k = 10;
    s.n = static_cast<uint32_t>(counts.size());
    s.theta = theta;
    for (uint32_t c : counts) {
      gpu::engine_internal::DevList l;
      l.count = c;
      s.present.push_back(l);
      s.max_score.push_back(2.0f);  // each list alone is essential for theta <= 2
    }
    gpu::engine_internal::PlanOr(s, 1000000, opt);
    EXPECT_EQ(s.or_path, PhaseKind::kOrPruned);
    return s.bounded;
  };
  EXPECT_TRUE(plan({500, 400}, 1.0f, o));                 // two lists
  EXPECT_TRUE(plan({300, 300, 300}, 1.0f, o));            // three that fit the buffer
  EXPECT_TRUE(plan({400, 400, 400}, 1.0f, o));            // three past it (1,200 > 1,000)
  EXPECT_TRUE(plan({50, 60, 70, 80, 90, 100}, 1.0f, o));  // six
  EXPECT_FALSE(plan({500, 400}, 0.0f, o));                // no theta: max_scores
  EXPECT_FALSE(plan({300, 300, 300}, 0.0f, o));
  gpu::GpuContextOptions off = o;
  off.or_bounded_gather = false;
  EXPECT_FALSE(plan({500, 400}, 1.0f, off));
  EXPECT_FALSE(plan({400, 400, 400}, 1.0f, off));
}

// PlanOr's essential lists, fewest postings first: each bounds only the lists after it (and the
// non-essential ones), as a document an earlier one holds is gathered from that one.
TEST(GpuEnginePlan, EssentialListsBoundOnlyTheListsGatheredAfterThem) {
  using gpu::engine_internal::QState;
  gpu::GpuContextOptions o;
  QState s;
  s.k = 10;
  s.n = 4;
  s.theta = 2.0f;
  for (uint32_t c : {500u, 300u, 400u, 9000u}) {
    gpu::engine_internal::DevList l;
    l.count = c;
    s.present.push_back(l);
  }
  s.max_score = {2.0f, 2.0f, 3.0f, 0.25f};  // slot 3 alone stays below theta: non-essential
  gpu::engine_internal::PlanOr(s, 1000000, o);
  EXPECT_EQ(s.ess_mask, 0b0111u);
  EXPECT_EQ(s.cap, 1200u);
  // Slot 1 (300 postings) first: every other list; slot 2 (400) all but slot 1; slot 0 (500) only
  // the non-essential slot 3.
  EXPECT_EQ(s.omit[1], 0u);
  EXPECT_FLOAT_EQ(s.rest[1], 5.25f);
  EXPECT_EQ(s.omit[2], 0b0010u);
  EXPECT_FLOAT_EQ(s.rest[2], 2.25f);
  EXPECT_EQ(s.omit[0], 0b0110u);
  EXPECT_FLOAT_EQ(s.rest[0], 0.25f);
  EXPECT_TRUE(std::isinf(s.rest[3]));
}

// AndSampleWant: which and-queries are bounded, and how many lead postings their sample takes.
TEST(GpuEnginePlan, AndQueriesAreBoundedWhenTheirLeadIsLongAndMatchesAreExpected) {
  using gpu::engine_internal::AndSampleWant;
  using gpu::engine_internal::QState;
  auto query = [](std::vector<uint32_t> counts, uint32_t k) {
    QState s;
    s.k = k;
    s.n = static_cast<uint32_t>(counts.size());
    for (uint32_t c : counts) {
      gpu::engine_internal::DevList l;
      l.count = c;
      s.present.push_back(l);
      s.max_score.push_back(1.0f);
    }
    return s;
  };
  constexpr uint32_t kDocs = 1000000;
  // Lead 100K, the other list on half the documents: 50K matches expected; the sample expects 8k
  // matches from 160 postings, raised to 256.
  EXPECT_EQ(AndSampleWant(query({500000, 100000}, 10), kDocs, 16384), 256u);
  // Lead 20K, the other list on 4% of the documents: 800 matches expected, a sample of 2,000.
  EXPECT_EQ(AndSampleWant(query({40000, 20000}, 10), kDocs, 16384), 2000u);
  // Two lists on 3% each: 18 matches expected, fewer than 4k = 40 for k = 10; for k = 1 the
  // sample would need 8,889 postings: its cap, 8,192.
  EXPECT_EQ(AndSampleWant(query({20000, 30000, 30000}, 10), kDocs, 16384), 0u);
  EXPECT_EQ(AndSampleWant(query({20000, 30000, 30000}, 1), kDocs, 16384), 8192u);
  // A lead shorter than min_lead is not bounded; with min_lead 0 it is, and a sample never takes
  // more than the lead.
  EXPECT_EQ(AndSampleWant(query({500000, 10000}, 10), kDocs, 16384), 0u);
  EXPECT_EQ(AndSampleWant(query({500000, 10000}, 10), kDocs, 0), 256u);
  EXPECT_EQ(AndSampleWant(query({200, 1000000}, 10), kDocs, 0), 200u);
  // Nor are a count, k = 0 and a single list.
  QState counted = query({500000, 100000}, 10);
  counted.count = true;
  EXPECT_EQ(AndSampleWant(counted, kDocs, 16384), 0u);
  EXPECT_EQ(AndSampleWant(query({500000, 100000}, 0), kDocs, 16384), 0u);
  EXPECT_EQ(AndSampleWant(query({500000}, 10), kDocs, 0), 0u);
}

// PlanOr under RequiredOr (`+a b`, `+a -b`): every match is in the must list, so when it is
// essential it is the only source of candidates (the other lists are probed); when it is not (its
// max_score below theta), the should lists are the sources and the must list drops their
// documents it lacks; a must_not list is never a source.
TEST(GpuEnginePlan, RequiredOrGathersFromTheMustListWhenItIsEssential) {
  using gpu::engine_internal::PhaseKind;
  using gpu::engine_internal::QState;
  gpu::GpuContextOptions o;
  // counts and max_scores of the lists; slot 0 is the must list, excl the must_not lists' bits.
  auto plan = [&](std::vector<uint32_t> counts, std::vector<float> max_score, uint32_t excl) {
    QState s;
    s.k = 10;
    s.n = static_cast<uint32_t>(counts.size());
    s.theta = 1.0f;
    s.required_or = true;
    s.req_slot = 0;
    s.excl_mask = excl;
    for (uint32_t c : counts) {
      gpu::engine_internal::DevList l;
      l.count = c;
      s.present.push_back(l);
    }
    s.max_score = std::move(max_score);
    gpu::engine_internal::PlanOr(s, 1000000, o);
    EXPECT_EQ(s.or_path, PhaseKind::kOrPruned);
    return s;
  };
  QState s = plan({500, 400000}, {2.0f, 1.5f}, 0);  // both reach theta alone: the must list only
  EXPECT_EQ(s.ess_mask, 1u);
  EXPECT_EQ(s.cap, 500u);
  EXPECT_FLOAT_EQ(s.rest[0], 1.5f);
  s = plan({500, 400000, 300}, {2.0f, 1.5f, 3.0f}, 0);  // two should lists, the must list essential
  EXPECT_EQ(s.ess_mask, 1u);
  EXPECT_EQ(s.cap, 500u);
  EXPECT_FLOAT_EQ(s.rest[0], 4.5f);
  s = plan({400000, 500}, {0.5f, 2.0f}, 0);  // the must list alone cannot reach theta: the should list
  EXPECT_EQ(s.ess_mask, 2u);
  EXPECT_EQ(s.cap, 500u);
  s = plan({500, 400000, 300}, {2.0f, 1.5f, 0.0f}, 4u);  // `+a b -c`: c is never a source
  EXPECT_EQ(s.ess_mask, 1u);
  EXPECT_EQ(s.cap, 500u);
}

// NeedTheta under RequiredOr: theta from the must list (its postings are matches), and a second
// sample from the should list of the highest max_score when that is above the must list's (a rare
// should term whose best documents the must list holds scores far above the must list's own);
// never from a must_not list. A theta phase gives such a query two entries, kept together.
TEST(GpuEnginePlan, RequiredOrSamplesTheBestShouldListToo) {
  using gpu::engine_internal::kNone;
  using gpu::engine_internal::PhaseKind;
  using gpu::engine_internal::QState;
  auto state = [](std::vector<float> max_score, uint32_t excl) {
    QState s;
    s.k = 10;
    s.n = static_cast<uint32_t>(max_score.size());
    s.required_or = true;
    s.req_slot = 0;
    s.excl_mask = excl;
    for (size_t i = 0; i < max_score.size(); ++i) {
      gpu::engine_internal::DevList l;
      l.count = 1000;
      s.present.push_back(l);
    }
    s.max_score = std::move(max_score);
    return s;
  };
  QState s = state({1.0f, 3.0f, 2.0f}, 0);
  ASSERT_TRUE(gpu::engine_internal::NeedTheta(s, 1));
  EXPECT_EQ(s.theta_slot, 0u);
  EXPECT_EQ(s.alt_theta_slot, 1u);
  s = state({3.0f, 1.0f}, 0);  // the must list scores highest: its sample alone
  ASSERT_TRUE(gpu::engine_internal::NeedTheta(s, 1));
  EXPECT_EQ(s.alt_theta_slot, kNone);
  s = state({1.0f, 3.0f, 2.0f}, 2u);  // `+a -b c`: b is never sampled
  ASSERT_TRUE(gpu::engine_internal::NeedTheta(s, 1));
  EXPECT_EQ(s.alt_theta_slot, 2u);
  s = state({1.0f, 3.0f}, 0);
  s.present[0].count = 5;  // fewer matches than k: no theta
  EXPECT_FALSE(gpu::engine_internal::NeedTheta(s, 1));

  // A phase of theta entries: each query with a second sample has both, side by side, and no phase
  // holds more entries than the spread kernels serve.
  std::vector<QState> st;
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < gpu::engine_internal::kMaxSpreadQueries + 7; ++i) {
    st.push_back(state({1.0f, i % 3 == 0 ? 0.5f : 3.0f}, 0));
    ASSERT_TRUE(gpu::engine_internal::NeedTheta(st.back(), 1));
    ids.push_back(i);
  }
  std::vector<gpu::engine_internal::Phase> phases;
  gpu::engine_internal::AddPhases(PhaseKind::kTheta, ids, st, 1000000, gpu::GpuContextOptions{}, &phases);
  ASSERT_GE(phases.size(), 2u);
  std::vector<uint32_t> seen(ids.size(), 0);
  for (const auto& p : phases) {
    ASSERT_EQ(p.ids.size(), p.theta_slot.size());
    EXPECT_LE(p.ids.size(), gpu::engine_internal::kMaxSpreadQueries);
    for (size_t e = 0; e < p.ids.size(); ++e) {
      const QState& q = st[p.ids[e]];
      if (seen[p.ids[e]]++ == 0) {
        EXPECT_EQ(p.theta_slot[e], q.theta_slot);
      } else {
        EXPECT_EQ(p.theta_slot[e], q.alt_theta_slot);
        EXPECT_EQ(p.ids[e - 1], p.ids[e]);  // right after its first entry, in the same phase
      }
    }
  }
  for (uint32_t i = 0; i < ids.size(); ++i) EXPECT_EQ(seen[i], i % 3 == 0 ? 1u : 2u) << i;
}

TEST(GpuEngine, SameListTwiceAndAbsentTerms) {
  SKIP_WITHOUT_GPU();
  CorpusOptions o;
  o.num_docs = 2000;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  DeviceShard d;
  Upload(s, {}, &d);
  const uint32_t unknown = static_cast<uint32_t>(c.postings.size()) + 3;
  std::vector<BatchItem> items;
  for (QueryMode mode : kModes)
    for (uint32_t k : {1u, 20u, kMaxK}) {
      items.push_back({TestQuery{{3, 3, 4}}, mode, k});
      items.push_back({TestQuery{{0, 0}}, mode, k});
      items.push_back({TestQuery{{2, unknown}}, mode, k});
      items.push_back({TestQuery{{unknown}}, mode, k});
      items.push_back({TestQuery{}, mode, k});
    }
  CheckBatch(c, s, d, items, {});
}

// One query of the batch reads a corrupted block: it alone fails with Corruption; bad k is
// InvalidArgument, more than kGpuMaxTerms terms is GpuUnimplemented, lists outside the shard are
// Corruption; the other queries still match the CPU.
TEST(GpuEngine, PerQueryErrorsLeaveTheRestOfTheBatchIntact) {
  SKIP_WITHOUT_GPU();
  CorpusOptions o;
  o.num_docs = 5000;
  o.vocab = 300;
  o.seed = 9;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  DeviceShard d;
  Upload(s, {}, &d);
  const std::vector<float> idf = GlobalIdf(c);
  // A mid-frequency term whose first block has a non-empty docID payload; flip a bit of it.
  uint32_t victim = 0;
  for (uint32_t t = 5; t < c.postings.size(); ++t)
    if (s.view(t) != nullptr && s.view(t)->num_blocks() >= 2 && s.view(t)->block(0).doc_bits >= 3) {
      victim = t;
      break;
    }
  ASSERT_NE(victim, 0u);
  const ListView& good = *s.view(victim);
  std::vector<uint32_t> bad_host((good.bytes().size() + 3) / 4);
  std::memcpy(bad_host.data(), good.bytes().data(), good.bytes().size());
  const size_t payload_off = good.payload() - reinterpret_cast<const uint8_t*>(good.bytes().data());
  reinterpret_cast<uint8_t*>(bad_host.data())[payload_off + good.block(0).offset] ^= 0x4;  // lane 0's first gap
  auto bad_view = ListView::Parse(std::string_view(reinterpret_cast<const char*>(bad_host.data()), good.bytes().size()),
                                  /*verify_crc=*/false);
  ASSERT_TRUE(bad_view.ok()) << bad_view.status().ToString();
  void* d_bad = nullptr;
  CUDA_OK(cudaMalloc(&d_bad, good.bytes().size()));
  CUDA_OK(cudaMemcpy(d_bad, bad_host.data(), good.bytes().size(), cudaMemcpyHostToDevice));
  ASSERT_FALSE(bad_view->DecodeDocs(0, std::vector<uint32_t>(128).data()).ok());  // the CPU agrees it is corrupt

  const GpuTermInput corrupt{&*bad_view, static_cast<const uint8_t*>(d_bad), idf[victim]};
  const GpuTermInput common{s.view(0), static_cast<const uint8_t*>(d.blobs[0]), idf[0]};
  const GpuTermInput other{s.view(1), static_cast<const uint8_t*>(d.blobs[1]), idf[1]};
  std::vector<GpuTermInput> q_or = {corrupt, common};   // or decodes every block
  std::vector<GpuTermInput> q_and = {common, corrupt};  // the corrupt list is the shortest: decoded whole
  std::vector<GpuTermInput> q_good = {common, other};
  std::vector<GpuTermInput> q_long(gpu::kGpuMaxTerms + 1, common);
  std::vector<GpuQueryInput> batch = {
      {q_good, QueryMode::kOr, 10},         {q_or, QueryMode::kOr, 10},     {q_good, QueryMode::kAnd, 100},
      {q_and, QueryMode::kAnd, 10},         {q_and, QueryMode::kAndOr, 10}, {q_good, QueryMode::kOr, 0},
      {q_good, QueryMode::kAnd, kMaxK + 1}, {q_long, QueryMode::kOr, 10},   {q_good, QueryMode::kAndOr, 1000},
  };
  std::vector<Result<SearchResult>> out;
  const Status st = gpu::ExecuteBatchGpu(*Context(), d.view, batch, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(out.size(), batch.size());
  const StatusCode want[] = {StatusCode::kOk,
                             StatusCode::kCorruption,
                             StatusCode::kOk,
                             StatusCode::kCorruption,
                             StatusCode::kCorruption,
                             StatusCode::kInvalidArgument,
                             StatusCode::kInvalidArgument,
                             StatusCode::kInvalidArgument,
                             StatusCode::kOk};
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(out[i].status().code(), want[i]) << "query " << i << ": " << out[i].status().ToString();
  }
  EXPECT_TRUE(gpu::IsGpuUnimplemented(out[7].status())) << out[7].status().ToString();
  EXPECT_FALSE(gpu::IsGpuUnimplemented(out[5].status()));
  const std::vector<TermInput> cpu_good = {{s.view(0), idf[0]}, {s.view(1), idf[1]}};
  for (size_t i : {size_t{0}, size_t{2}, size_t{8}}) {
    if (!out[i].ok()) continue;
    auto cpu = ExecuteQuery(cpu_good, std::span<const float>(s.norms), 0, batch[i].mode, batch[i].k);
    ASSERT_TRUE(cpu.ok());
    ExpectSameHits(out[i]->hits, cpu->hits, "query " + std::to_string(i));
  }
  // A shard view narrower than the lists: Corruption, as the CPU's span overload reports.
  GpuShardView narrow = d.view;
  narrow.num_docs = 2500;
  auto r = gpu::ExecuteQueryGpu(*Context(), narrow, q_good, QueryMode::kOr, 10);
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  // And the context still works afterwards.
  auto again = gpu::ExecuteQueryGpu(*Context(), d.view, q_good, QueryMode::kAnd, 10);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto cpu = ExecuteQuery(cpu_good, std::span<const float>(s.norms), 0, QueryMode::kAnd, 10);
  ASSERT_TRUE(cpu.ok());
  ExpectSameHits(again->hits, cpu->hits, "after errors");
  (void)cudaFree(d_bad);
}

// Rough or-throughput of the default (pruned where it applies) and the dense path on a 1M-document
// shard, batches of 32 queries of 2-5 terms; prints ms per batch. Not an assertion: run with
// --gtest_also_run_disabled_tests --gtest_filter=*OrThroughput*.
TEST(GpuEngine, DISABLED_OrThroughput) {
  SKIP_WITHOUT_GPU();
  CorpusOptions o;
  o.num_docs = 1000000;
  o.vocab = 20000;
  o.max_len = 40;
  o.seed = 5;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  DeviceShard d;
  Upload(s, {}, &d);
  std::mt19937_64 rng(3);
  std::vector<TestQuery> qs;
  for (int i = 0; i < 32; ++i) {
    TestQuery q;
    const int n = 2 + static_cast<int>(rng() % 4);
    for (int j = 0; j < n; ++j) q.terms.push_back(static_cast<uint32_t>(j == 0 ? rng() % 50 : rng() % 3000));
    std::sort(q.terms.begin(), q.terms.end(),
              [&](uint32_t a, uint32_t b) { return QueryTermName(c, a) < QueryTermName(c, b); });
    q.terms.erase(std::unique(q.terms.begin(), q.terms.end()), q.terms.end());
    qs.push_back(q);
  }
  std::vector<std::vector<TermInput>> cpu_in;
  std::vector<std::vector<GpuTermInput>> gpu_in;
  uint64_t postings = 0;
  for (const TestQuery& q : qs) {
    cpu_in.push_back(Inputs(c, s, q));
    gpu_in.push_back(GpuInputs(cpu_in.back(), s, d, q));
    for (const TermInput& t : cpu_in.back()) postings += t.list != nullptr ? t.list->count() : 0;
  }
  for (QueryMode mode : {QueryMode::kOr, QueryMode::kAnd})
    for (uint32_t k : {10u, 1000u}) {
      std::vector<GpuQueryInput> batch;
      for (auto& g : gpu_in) batch.push_back(GpuQueryInput{g, mode, k});
      for (const NamedContext& nc : AllContexts()) {
        std::vector<Result<SearchResult>> out;
        for (int w = 0; w < 2; ++w) ASSERT_TRUE(gpu::ExecuteBatchGpu(*nc.ctx, d.view, batch, &out).ok());
        const int reps = 10;
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) ASSERT_TRUE(gpu::ExecuteBatchGpu(*nc.ctx, d.view, batch, &out).ok());
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
        uint64_t decoded = 0;
        for (auto& r : out) decoded += r.ok() ? r->stats.postings_decoded : 0;
        std::printf("%s k=%u %-9s: %.3f ms / batch of 32 (%.0f QPS one stream), postings %llu, decoded %llu\n",
                    std::string(QueryModeName(mode)).c_str(), k, nc.name, ms, 32e3 / ms, static_cast<unsigned long long>(postings),
                    static_cast<unsigned long long>(decoded));
      }
    }
}

TEST(GpuEngine, ContextCreationWithoutGpuIsUnavailable) {
  if (gpu::GpuAvailable()) GTEST_SKIP() << "a GPU is present";
  auto c = GpuContext::Create();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
}

// Out-of-range or-path options are refused before any GPU work (so this runs without a GPU too).
TEST(GpuEngine, BadOrOptionsAreRefused) {
  const auto refused = [](gpu::GpuContextOptions o) {
    auto c = GpuContext::Create(o);
    return !c.ok() && c.status().code() == StatusCode::kInvalidArgument;
  };
  gpu::GpuContextOptions o;
  o.or_candidate_cap = 0;
  EXPECT_TRUE(refused(o));
  o.or_candidate_cap = (uint32_t{1} << 30) + 1;
  EXPECT_TRUE(refused(o));
  o = {};
  o.or_theta_sample = (uint32_t{1} << 24) + 1;
  EXPECT_TRUE(refused(o));
  o = {};
  o.or_theta_sample = 0;
  EXPECT_TRUE(refused(o));
  o = {};
  o.or_theta_sample = 1;
  o.or_candidate_cap = 1;
  auto c = GpuContext::Create(o);
  EXPECT_TRUE(c.ok() || c.status().code() == StatusCode::kUnavailable) << c.status().ToString();
}

}  // namespace
}  // namespace search::testing
