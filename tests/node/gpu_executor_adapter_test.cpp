// GpuExecutorAdapter on a real device: the same hits as CpuExecutorAdapter (docs, order, scores to
// the bit, external ids) over random queries, from several threads; with a list cache too small
// for the lists every query still comes back right through the CPU fallback, counted in
// search_gpu_fallbacks_total{reason="out_of_memory"}; too many terms fall back as "unsupported";
// query trees, phrases (positions in the GPU list cache) and counts on the GPU;
// kFlagForceCpu / kFlagForceGpu; ShardHealth.gpu through a NodeServer; the GPU cache metrics.
// Skips without a GPU, except the check that Create then says Unavailable.
#include "node/gpu_executor_adapter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "gpu_exec/cuda_util.hpp"
#include "metrics/metrics.hpp"
#include "../prometheus_text.hpp"
#include "node/node_server.hpp"
#include "node/scheduled_executor.hpp"
#include "node_fixture.hpp"

namespace search {
namespace {

constexpr uint32_t kDocs = 4000;
constexpr uint32_t kVocab = 500;

Query RandomQuery(std::mt19937_64& rng) { return testing::RandomQuery(rng, kVocab); }

// SEARCH_TEST_QUICK (scripts/device-check.sh's compute-sanitizer passes): fewer random queries,
// 1/4 at level 1 (memcheck), 1/16 at level 2 (racecheck).
int Scaled(int n) {
  static const int div = [] {
    const char* v = std::getenv("SEARCH_TEST_QUICK");
    if (v == nullptr || v[0] == '\0' || v[0] == '0') return 1;
    return v[0] == '1' ? 4 : 16;
  }();
  return std::max(1, n / div);
}
using testing::Describe;
using testing::SameHits;

class GpuExecutorAdapterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!gpu::GpuAvailable()) return;
    dir_ = new testing::TempDir();
    path_ = dir_->path() + "/shard-0";
    Status st = testing::WriteRandomShard(path_, kDocs, kVocab, 7);
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto reader = ShardReader::Open(path_);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    reader_ = std::move(reader).value().release();
    // The same documents with positions (phrases run on the GPU there).
    st = testing::WriteRandomShard(dir_->path() + "/shard-pos", kDocs, kVocab, 7, /*positions=*/true);
    ASSERT_TRUE(st.ok()) << st.ToString();
    reader = ShardReader::Open(dir_->path() + "/shard-pos");
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    pos_reader_ = std::move(reader).value().release();
  }
  static void TearDownTestSuite() {
    delete reader_;
    reader_ = nullptr;
    delete pos_reader_;
    pos_reader_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!gpu::GpuAvailable()) GTEST_SKIP() << "no GPU: " << gpu::GpuDescription();
    ASSERT_NE(reader_, nullptr);
  }

  std::unique_ptr<GpuExecutorAdapter> MakeAdapter(size_t cache_bytes, Metrics* metrics = nullptr,
                                                  const ShardReader* shard = nullptr) {
    GpuExecutorOptions o;
    o.cache_bytes = cache_bytes;
    o.staging_bytes = size_t{1} << 20;
    o.context.scratch_bytes = size_t{32} << 20;
    auto a = GpuExecutorAdapter::Create(shard != nullptr ? shard : reader_, metrics, o);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? std::move(a).value() : nullptr;
  }

  static testing::TempDir* dir_;
  static std::string path_;
  static ShardReader* reader_;
  static ShardReader* pos_reader_;  // the same shard with positions
};
testing::TempDir* GpuExecutorAdapterTest::dir_ = nullptr;
std::string GpuExecutorAdapterTest::path_;
ShardReader* GpuExecutorAdapterTest::reader_ = nullptr;
ShardReader* GpuExecutorAdapterTest::pos_reader_ = nullptr;

TEST(GpuExecutorAdapterNoGpuTest, CreateIsUnavailableWithoutAGpu) {
  if (gpu::GpuAvailable()) GTEST_SKIP() << "a GPU is present: " << gpu::GpuDescription();
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteRandomShard(dir.path() + "/s", 100, 20, 1).ok());
  auto reader = ShardReader::Open(dir.path() + "/s");
  ASSERT_TRUE(reader.ok());
  auto a = GpuExecutorAdapter::Create(reader->get(), nullptr);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kUnavailable) << a.status().ToString();
}

TEST_F(GpuExecutorAdapterTest, SameHitsAsTheCpuAdapter) {
  Metrics metrics("node");
  auto gpu = MakeAdapter(size_t{256} << 20, &metrics);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->name(), "gpu");
  EXPECT_TRUE(gpu->has_gpu());
  CpuExecutorAdapter cpu(reader_);
  std::mt19937_64 rng(2024);
  int mismatches = 0;
  for (int i = 0; i < Scaled(600) && mismatches < 5; ++i) {
    const Query q = RandomQuery(rng);
    auto want = cpu.Execute(q, kNoDeadline, 0);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = gpu->Execute(q, kNoDeadline, 0);
    ASSERT_TRUE(got.ok()) << Describe(q) << ": " << got.status().ToString();
    EXPECT_EQ(got->processor, Processor::kGpu) << Describe(q);
    auto same = SameHits(got->hits, want->hits);
    if (!same) ++mismatches;
    EXPECT_TRUE(same) << "query " << i << " " << Describe(q);
  }
  EXPECT_EQ(gpu->fallbacks_total(), 0u);
  const gpu::GpuCacheStats s = gpu->cache().stats();
  EXPECT_GT(s.misses, 0u);
  EXPECT_GT(s.hits, 0u);
  EXPECT_EQ(s.failed_allocations, 0u);
  const std::string text = metrics.SerializeText();
  EXPECT_NE(text.find("search_gpu_cache_hits_total " + std::to_string(s.hits)), std::string::npos) << text;
  EXPECT_NE(text.find("search_gpu_cache_misses_total "), std::string::npos);
  EXPECT_NE(text.find("search_gpu_fallbacks_total{reason=\"out_of_memory\"} 0"), std::string::npos);
  // The batches' CPU and wall time by part: every query was prepared, had its lists acquired and ran.
  for (const char* family : {"search_gpu_batch_cpu_seconds_total", "search_gpu_batch_seconds_total"}) {
    for (const char* part : {"prepare", "acquire", "engine", "finish"}) {
      const std::string series = std::string(family) + "{part=\"" + part + "\"} ";
      const size_t at = text.find(series);
      ASSERT_NE(at, std::string::npos) << series << "\n" << text;
      EXPECT_GT(std::stod(text.substr(at + series.size())), 0.0) << series;
    }
  }
}

TEST_F(GpuExecutorAdapterTest, ConcurrentQueriesFromManyThreads) {
  auto gpu = MakeAdapter(size_t{64} << 20);
  ASSERT_NE(gpu, nullptr);
  CpuExecutorAdapter cpu(reader_);
  std::mt19937_64 rng(99);
  std::vector<Query> queries;
  std::vector<std::vector<HitMsg>> want;
  for (int i = 0; i < Scaled(400); ++i) {
    queries.push_back(RandomQuery(rng));
    auto w = cpu.Execute(queries.back(), kNoDeadline, 0);
    ASSERT_TRUE(w.ok());
    want.push_back(std::move(w->hits));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < queries.size(); i += 3) {  // every query by two threads
        auto got = gpu->Execute(queries[i], kNoDeadline, 0);
        if (!got.ok()) {
          ADD_FAILURE() << Describe(queries[i]) << ": " << got.status().ToString();
          ++bad;
          continue;
        }
        auto same = SameHits(got->hits, want[i]);
        if (!same) {
          ADD_FAILURE() << "thread " << t << " query " << i << " " << Describe(queries[i]) << ": " << same.message();
          ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(gpu->fallbacks_total(), 0u);
}

// A list cache of 2 KiB: the long lists cannot be cached, those queries rerun on the CPU.
TEST_F(GpuExecutorAdapterTest, OutOfCacheMemoryFallsBackToTheCpu) {
  Metrics metrics("node");
  auto gpu = MakeAdapter(2048, &metrics);
  ASSERT_NE(gpu, nullptr);
  CpuExecutorAdapter cpu(reader_);
  std::mt19937_64 rng(5);
  int on_cpu = 0, on_gpu = 0;
  for (int i = 0; i < Scaled(200); ++i) {
    const Query q = RandomQuery(rng);
    auto want = cpu.Execute(q, kNoDeadline, 0);
    ASSERT_TRUE(want.ok());
    auto got = gpu->Execute(q, kNoDeadline, 0);
    ASSERT_TRUE(got.ok()) << Describe(q) << ": " << got.status().ToString();
    EXPECT_TRUE(SameHits(got->hits, want->hits)) << Describe(q);
    (got->processor == Processor::kCpu ? on_cpu : on_gpu)++;
  }
  std::cerr << "tiny cache: " << on_gpu << " queries on the GPU, " << on_cpu << " fell back\n";
  EXPECT_GT(on_cpu, 0);
  EXPECT_GT(gpu->fallbacks(GpuFallbackReason::kOutOfMemory), 0u);
  const std::string scrape = metrics.SerializeText();
  EXPECT_EQ(testing::SeriesValue(scrape, R"(search_gpu_fallbacks_total{reason="out_of_memory"})"),
            static_cast<double>(gpu->fallbacks(GpuFallbackReason::kOutOfMemory)));
  EXPECT_EQ(testing::SeriesValue(scrape, "search_fallback_cpu_total"), static_cast<double>(gpu->fallbacks_total()));
  EXPECT_GT(gpu->cache().stats().failed_allocations, 0u);
  EXPECT_NE(metrics.SerializeText().find("search_gpu_cache_failed_allocations_total"), std::string::npos);

  // Forced onto the GPU, a query over the longest list (too long for the cache) is the cache's
  // error, not a CPU answer.
  std::string longest;
  uint32_t longest_bytes = 0;
  ASSERT_TRUE(reader_
                  ->ForEachTerm([&](std::string_view term, const TermInfo& info) {
                    if (info.list_bytes > longest_bytes) {
                      longest_bytes = info.list_bytes;
                      longest = std::string(term);
                    }
                    return true;
                  })
                  .ok());
  ASSERT_GT(longest_bytes, 2048u) << "the shard has no list longer than the cache";
  Query hot;
  hot.terms = {longest};
  hot.mode = QueryMode::kOr;
  hot.k = 10;
  auto forced = gpu->Execute(hot, kNoDeadline, kFlagForceGpu);
  ASSERT_FALSE(forced.ok()) << longest << " (" << longest_bytes << " bytes) ran on the GPU";
  EXPECT_EQ(forced.status().code(), StatusCode::kResourceExhausted) << forced.status().ToString();
}

TEST_F(GpuExecutorAdapterTest, TooManyTermsFallBackAsUnsupported) {
  auto gpu = MakeAdapter(size_t{64} << 20);
  ASSERT_NE(gpu, nullptr);
  CpuExecutorAdapter cpu(reader_);
  Query q;
  for (uint32_t i = 0; i < gpu::kGpuMaxTerms + 8; ++i) q.terms.push_back(testing::Word(i));
  std::sort(q.terms.begin(), q.terms.end());
  q.mode = QueryMode::kOr;
  q.k = 100;
  auto got = gpu->Execute(q, kNoDeadline, 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto want = cpu.Execute(q, kNoDeadline, 0);
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(SameHits(got->hits, want->hits));
  EXPECT_EQ(got->processor, Processor::kCpu);
  EXPECT_EQ(gpu->fallbacks(GpuFallbackReason::kUnsupported), 1u);
  EXPECT_FALSE(gpu->Execute(q, kNoDeadline, kFlagForceGpu).ok());
}

// A random query tree to depth 3 over the shard's words (hot ones often) and words absent from it:
// 1..4 clauses a boolean, every occurrence (+, -, filter, should, bare).
QueryNode RandomTermTree(std::mt19937_64& rng, int depth) {
  QueryNode n;
  if (depth == 0 || rng() % 10 < 6) {
    n.kind = QueryNode::Kind::kTerm;
    const uint64_t r = rng() % 20;
    n.tokens = {r == 0 ? std::string("absent") : r == 1 ? std::string("absent2")
                       : testing::Word(static_cast<uint32_t>(rng() % (r < 8 ? kVocab : 40)))};
    return n;
  }
  for (uint64_t i = 1 + rng() % 4; i > 0; --i)
    n.clauses.push_back({static_cast<Occur>(rng() % 5), RandomTermTree(rng, depth - 1)});
  return n;
}

// k as RandomQuery draws it (1..1000, small ones often); 0 for a quarter of the counts.
uint32_t RandomK(std::mt19937_64& rng, bool count) {
  if (count && rng() % 4 == 0) return 0;
  const uint32_t r = static_cast<uint32_t>(rng() % 10);
  return r == 0 ? 1 : r < 7 ? 1 + static_cast<uint32_t>(rng() % 50) : 1 + static_cast<uint32_t>(rng() % 1000);
}

// Trees of terms (+, -, filter, groups, absent terms) and counts (on, off, the count alone) run on
// the GPU engine, alone (Execute) and in batches, with the CPU adapter's hits (bit for bit, ids)
// and exact totals; only trees of more than kGpuMaxTerms terms fall back (unsupported). Shapes
// whose absent term would empty a flat and-query still match as trees.
TEST_F(GpuExecutorAdapterTest, TreesAndCountsRunOnTheGpu) {
  Metrics metrics("node");
  auto gpu = MakeAdapter(size_t{64} << 20, &metrics);
  ASSERT_NE(gpu, nullptr);
  CpuExecutorAdapter cpu(reader_);
  std::mt19937_64 rng(77);
  std::vector<Query> qs;
  for (int i = 0; i < Scaled(400); ++i) {
    Query q;
    q.count = rng() % 2 == 0;
    q.mode = static_cast<QueryMode>(rng() % 3);
    q.k = RandomK(rng, q.count);
    if (i % 5 == 4) {  // a bag of words with a count, flat (tree null)
      q.terms = RandomQuery(rng).terms;
      q.count = true;
    } else {
      QueryNode root;
      for (uint64_t c = 1 + rng() % 4; c > 0; --c)
        root.clauses.push_back({static_cast<Occur>(rng() % 5), RandomTermTree(rng, 2)});
      q.tree = std::make_shared<const QueryNode>(Canonicalize(std::move(root)));
      q.terms = TreeTerms(*q.tree);
    }
    qs.push_back(std::move(q));
  }
  // Hand shapes: an absent must_not, an absent should under or, an absent term under and (flat and
  // as a tree), each with a count and alone.
  auto tree_of = [](std::vector<QueryNode::Clause> clauses) {
    QueryNode root;
    root.clauses = std::move(clauses);
    return std::make_shared<const QueryNode>(Canonicalize(std::move(root)));
  };
  auto term = [](std::string t) {
    QueryNode n;
    n.kind = QueryNode::Kind::kTerm;
    n.tokens = {std::move(t)};
    return n;
  };
  const std::string hot = testing::Word(1);
  for (bool count : {false, true}) {
    for (uint32_t k : {0u, 10u}) {
      if (k == 0 && !count) continue;
      Query q;
      q.count = count;
      q.k = k;
      q.mode = QueryMode::kAnd;
      q.tree = tree_of({{Occur::kMust, term(hot)}, {Occur::kMustNot, term("absent")}});
      q.terms = TreeTerms(*q.tree);
      qs.push_back(q);
      q.mode = QueryMode::kOr;
      q.tree = tree_of({{Occur::kDefault, term(hot)}, {Occur::kDefault, term("absent")}});
      q.terms = TreeTerms(*q.tree);
      qs.push_back(q);
      q.mode = QueryMode::kAnd;
      qs.push_back(q);  // the same tree under and: matches nothing
      q.tree = nullptr;  // and flat
      qs.push_back(q);
    }
  }
  uint64_t too_many = 0, trees = 0, counts = 0, count_only = 0, matched_total = 0;
  auto what = [](const Query& q) {
    return (q.tree ? CanonicalKey(*q.tree) + " " + std::string(QueryModeName(q.mode)) + " k=" + std::to_string(q.k)
                   : Describe(q)) +
           (q.count ? " count" : "");
  };
  // Execute, one at a time.
  for (const Query& q : qs) {
    auto want = cpu.Execute(q, kNoDeadline, 0);
    auto got = gpu->Execute(q, kNoDeadline, 0);
    if (!want.ok()) {
      EXPECT_EQ(got.status().code(), want.status().code()) << what(q) << ": " << want.status().ToString();
      continue;
    }
    ASSERT_TRUE(got.ok()) << what(q) << ": " << got.status().ToString();
    EXPECT_TRUE(SameHits(got->hits, want->hits)) << what(q);
    EXPECT_EQ(got->has_total, q.count) << what(q);
    EXPECT_EQ(got->has_total, want->has_total) << what(q);
    EXPECT_EQ(got->total, want->total) << what(q);
    const bool fits = q.terms.size() <= gpu::kGpuMaxTerms;
    too_many += !fits;
    EXPECT_EQ(got->processor, fits ? Processor::kGpu : Processor::kCpu) << what(q);
    trees += fits && q.tree != nullptr;
    counts += fits && q.count;
    count_only += fits && q.count && q.k == 0;
    matched_total += want->total;
  }
  EXPECT_GT(trees, static_cast<uint64_t>(Scaled(400)) / 2);
  EXPECT_GT(counts, 0u);
  EXPECT_GT(count_only, 0u);
  EXPECT_GT(matched_total, 0u);
  EXPECT_EQ(gpu->fallbacks_total(), too_many);
  // The same queries in batches of up to 16.
  for (size_t b = 0; b < qs.size(); b += 16) {
    const size_t n = std::min<size_t>(16, qs.size() - b);
    std::vector<BatchItem> items(n);
    for (size_t i = 0; i < n; ++i) items[i].query = &qs[b + i];
    gpu->ExecuteBatch(items);
    for (size_t i = 0; i < n; ++i) {
      const Query& q = qs[b + i];
      auto want = cpu.Execute(q, kNoDeadline, 0);
      if (!want.ok()) continue;
      if (q.terms.size() > gpu::kGpuMaxTerms) {
        EXPECT_TRUE(items[i].retry_on_cpu) << what(q);
        continue;
      }
      ASSERT_TRUE(items[i].result.ok()) << what(q) << ": " << items[i].result.status().ToString();
      EXPECT_EQ(items[i].result->processor, Processor::kGpu);
      EXPECT_TRUE(SameHits(items[i].result->hits, want->hits)) << what(q);
      EXPECT_EQ(items[i].result->has_total, want->has_total) << what(q);
      EXPECT_EQ(items[i].result->total, want->total) << what(q);
    }
  }
  EXPECT_EQ(gpu->fallbacks_total(), 2 * too_many);
  EXPECT_EQ(gpu->fallbacks(GpuFallbackReason::kUnsupported), 2 * too_many);
  // Nothing here is a phrase: no query was kept off the GPU for its shape.
  EXPECT_EQ(testing::SeriesValue(metrics.SerializeText(), R"(search_node_gpu_unsupported_total{reason="phrase"})"), 0);
}

// Phrase trees (random terms, 2-token phrases, groups, every occurrence, counts, modes) on the
// shard with positions run on the GPU, alone, forced and in batches, with the CPU adapter's hits
// (bit for bit) and totals; a cache too small for their positions falls back (out_of_memory)
// with the same answers. On the shard without positions a phrase is the CPU's error, returned as
// it is (no fallback). A phrase tree past the GPU program's slots runs on the CPU, counted under
// search_node_gpu_unsupported_total{reason="phrase"}, and kFlagForceGpu refuses it.
TEST_F(GpuExecutorAdapterTest, PhrasesRunOnTheGpu) {
  Metrics metrics("node");
  auto gpu = MakeAdapter(size_t{64} << 20, &metrics, pos_reader_);
  ASSERT_NE(gpu, nullptr);
  auto plain = MakeAdapter(size_t{64} << 20, nullptr, reader_);
  ASSERT_NE(plain, nullptr);
  auto tiny = MakeAdapter(4096, nullptr, pos_reader_);
  ASSERT_NE(tiny, nullptr);
  CpuExecutorAdapter cpu(pos_reader_), cpu_plain(reader_);
  std::mt19937_64 rng(78);
  uint64_t phrases = 0, matched = 0;
  std::vector<Query> qs;
  for (uint64_t i = 0; i < static_cast<uint64_t>(Scaled(160)); ++i) {
    const Query q = ToQuery(testing::RandomTreeRequest(rng, i, true));
    if (!TreeHasPhrase(*q.tree)) continue;
    ++phrases;
    qs.push_back(q);
    const std::string what = CanonicalKey(*q.tree) + " " + std::string(QueryModeName(q.mode)) +
                             " k=" + std::to_string(q.k) + (q.count ? " count" : "");
    auto want = cpu.Execute(q, kNoDeadline, 0);
    ASSERT_TRUE(want.ok()) << what << ": " << want.status().ToString();
    for (uint32_t flags : {0u, kFlagForceGpu}) {
      auto got = gpu->Execute(q, kNoDeadline, flags);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
      EXPECT_TRUE(SameHits(got->hits, want->hits)) << what;
      EXPECT_EQ(got->has_total, want->has_total) << what;
      EXPECT_EQ(got->total, want->total) << what;
      EXPECT_EQ(got->processor, Processor::kGpu) << what;
    }
    matched += want->total + want->hits.size();
    auto small = tiny->Execute(q, kNoDeadline, 0);  // positions do not fit: the CPU's answer
    ASSERT_TRUE(small.ok()) << what << ": " << small.status().ToString();
    EXPECT_TRUE(SameHits(small->hits, want->hits)) << what;
    EXPECT_EQ(small->total, want->total) << what;
    // Without positions: the CPU's error, from the GPU adapter too.
    auto none = cpu_plain.Execute(q, kNoDeadline, 0);
    auto got_none = plain->Execute(q, kNoDeadline, 0);
    ASSERT_FALSE(none.ok()) << what;
    ASSERT_FALSE(got_none.ok()) << what;
    EXPECT_EQ(got_none.status().code(), none.status().code()) << what;
    EXPECT_EQ(got_none.status().message(), none.status().message()) << what;
  }
  EXPECT_GT(phrases, static_cast<uint64_t>(Scaled(160)) / 16);  // > 10 at full size; > 0 under QUICK=2
  EXPECT_GT(matched, 0u);
  EXPECT_EQ(gpu->fallbacks_total(), 0u);
  EXPECT_EQ(plain->fallbacks_total(), 0u);
  EXPECT_GT(tiny->fallbacks(GpuFallbackReason::kOutOfMemory), 0u);
  // In batches of up to 16.
  for (size_t b = 0; b < qs.size(); b += 16) {
    const size_t n = std::min<size_t>(16, qs.size() - b);
    std::vector<BatchItem> items(n);
    for (size_t i = 0; i < n; ++i) items[i].query = &qs[b + i];
    gpu->ExecuteBatch(items);
    for (size_t i = 0; i < n; ++i) {
      auto want = cpu.Execute(qs[b + i], kNoDeadline, 0);
      ASSERT_TRUE(items[i].result.ok()) << items[i].result.status().ToString();
      EXPECT_FALSE(items[i].retry_on_cpu);
      EXPECT_TRUE(SameHits(items[i].result->hits, want->hits)) << CanonicalKey(*qs[b + i].tree);
      EXPECT_EQ(items[i].result->total, want->total);
    }
  }
  EXPECT_EQ(gpu->fallbacks_total(), 0u);
  // A phrase tree of 33 slots (distinct phrases as should clauses): the CPU engine's.
  const Query q = testing::WidePhraseQuery(33);
  ASSERT_TRUE(GpuUnsupported(q).has_value());
  auto want = cpu.Execute(q, kNoDeadline, 0);
  auto got = gpu->Execute(q, kNoDeadline, 0);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_TRUE(SameHits(got->hits, want->hits));
  EXPECT_EQ(got->processor, Processor::kCpu);
  EXPECT_EQ(gpu->Execute(q, kNoDeadline, kFlagForceGpu).status().code(), StatusCode::kUnavailable);
  const std::string text = metrics.SerializeText();
  EXPECT_EQ(testing::SeriesValue(text, R"(search_node_gpu_unsupported_total{reason="phrase"})"), 1);
}

TEST_F(GpuExecutorAdapterTest, FlagsAndArguments) {
  auto gpu = MakeAdapter(size_t{64} << 20);
  ASSERT_NE(gpu, nullptr);
  Query q;
  q.terms = {testing::Word(1), testing::Word(3)};
  q.mode = QueryMode::kOr;
  q.k = 10;
  auto c = gpu->Execute(q, kNoDeadline, kFlagForceCpu);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->processor, Processor::kCpu);
  auto g = gpu->Execute(q, kNoDeadline, kFlagForceGpu);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->processor, Processor::kGpu);
  EXPECT_TRUE(SameHits(g->hits, c->hits));
  EXPECT_EQ(gpu->Execute(q, kNoDeadline, kFlagForceCpu | kFlagForceGpu).status().code(), StatusCode::kInvalidArgument);
  q.k = 0;
  EXPECT_EQ(gpu->Execute(q, kNoDeadline, 0).status().code(), StatusCode::kInvalidArgument);
  q.k = 10;
  EXPECT_EQ(gpu->Execute(q, std::chrono::steady_clock::now() - std::chrono::seconds(1), 0).status().code(),
            StatusCode::kDeadlineExceeded);
  // An and-query with a term absent from the shard: no hits, not an error.
  Query absent;
  absent.terms = {"absent", testing::Word(1)};
  absent.mode = QueryMode::kAnd;
  absent.k = 10;
  auto a = gpu->Execute(absent, kNoDeadline, 0);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->hits.empty());
  EXPECT_EQ(gpu->fallbacks_total(), 0u);
}

TEST_F(GpuExecutorAdapterTest, NodeServerReportsTheGpuInHealth) {
  auto gpu = MakeAdapter(size_t{64} << 20);
  ASSERT_NE(gpu, nullptr);
  NodeServerOptions o;
  o.threads = 2;
  NodeServer server(reader_, gpu.get(), nullptr, o);
  ASSERT_TRUE(server.Start().ok());
  zmq::context_t ctx(1);
  testing::Client client(ctx, server.endpoint());
  client.Send(EncodePing(PingMsg{3}));
  auto pong = client.Recv();
  ASSERT_TRUE(pong.has_value());
  EXPECT_TRUE(std::get<PongMsg>(pong->body).health.gpu);
  std::mt19937_64 rng(3);
  for (uint64_t id = 1; id <= 20; ++id) {
    SearchRequestMsg r = testing::RandomRequest(rng, kVocab, id);
    client.Send(EncodeSearchRequest(r));
    SearchResponseMsg resp = client.RecvResponse();
    ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
    EXPECT_EQ(resp.stats.processor, Processor::kGpu);
    EXPECT_EQ(resp.hits, testing::Reference(*reader_, r));
  }
  server.Stop();
}

// The batch path: one ExecuteBatch over many queries answers each as the CPU does.
TEST_F(GpuExecutorAdapterTest, BatchesAnswerAsTheCpu) {
  auto gpu = MakeAdapter(size_t{64} << 20);
  ASSERT_NE(gpu, nullptr);
  CpuExecutorAdapter cpu(reader_);
  std::mt19937_64 rng(41);
  for (int round = 0; round < Scaled(4); ++round) {
    std::vector<Query> qs;
    for (int i = 0; i < Scaled(96); ++i) qs.push_back(RandomQuery(rng));
    std::vector<BatchItem> items(qs.size());
    for (size_t i = 0; i < qs.size(); ++i) items[i].query = &qs[i];
    gpu->ExecuteBatch(items);
    for (size_t i = 0; i < qs.size(); ++i) {
      auto want = cpu.Execute(qs[i], kNoDeadline, 0);
      ASSERT_TRUE(want.ok());
      ASSERT_TRUE(items[i].result.ok()) << Describe(qs[i]) << ": " << items[i].result.status().ToString();
      EXPECT_FALSE(items[i].retry_on_cpu);
      EXPECT_EQ(items[i].result->processor, Processor::kGpu);
      EXPECT_TRUE(SameHits(items[i].result->hits, want->hits)) << Describe(qs[i]);
    }
  }
  // A bad k is the query's own error, not a GPU failure.
  Query bad;
  bad.terms = {testing::Word(1)};
  bad.k = 0;
  std::vector<BatchItem> one(1);
  one[0].query = &bad;
  gpu->ExecuteBatch(one);
  EXPECT_EQ(one[0].result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(one[0].retry_on_cpu);
}

// Griffin's GPU step: the intersection of the shortest lists equals the host's, and the CPU
// finishing from it gives the full answer.
TEST_F(GpuExecutorAdapterTest, IntersectPrefixThenCpuGivesTheFullAnswer) {
  auto gpu = MakeAdapter(size_t{64} << 20);
  ASSERT_NE(gpu, nullptr);
  CpuExecutorAdapter cpu(reader_);
  std::mt19937_64 rng(43);
  int checked = 0;
  for (int i = 0; i < Scaled(200); ++i) {
    Query q = RandomQuery(rng);
    if (q.mode == QueryMode::kOr) q.mode = QueryMode::kAnd;
    for (double crossover : {2.0, 128.0}) {
      auto prefix = gpu->IntersectPrefix(q, crossover);
      if (!prefix.ok()) {
        EXPECT_EQ(prefix.status().code(), StatusCode::kInvalidArgument) << prefix.status().ToString();
        continue;  // fewer than two lists
      }
      EXPECT_TRUE(std::is_sorted(prefix->candidates.begin(), prefix->candidates.end()));
      auto want = cpu.Execute(q, kNoDeadline, 0);
      ASSERT_TRUE(want.ok());
      auto got = cpu.ExecuteFromCandidates(q, prefix->candidates, kNoDeadline);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_TRUE(SameHits(got->hits, want->hits)) << Describe(q) << " crossover " << crossover;
      ++checked;
    }
  }
  EXPECT_GT(checked, Scaled(200) / 4);  // most random queries have two lists or more
  EXPECT_EQ(gpu->fallbacks_total(), 0u);
}

// The node's scheduler over the real GPU executor: exact answers in every mode from many threads.
TEST_F(GpuExecutorAdapterTest, SchedulerModesOverTheGpuAreExact) {
  auto gpu = MakeAdapter(size_t{64} << 20);
  ASSERT_NE(gpu, nullptr);
  CpuExecutorAdapter cpu(reader_);
  std::mt19937_64 rng(47);
  std::vector<Query> qs;
  std::vector<std::vector<HitMsg>> want;
  for (int i = 0; i < Scaled(300); ++i) {
    qs.push_back(RandomQuery(rng));
    auto w = cpu.Execute(qs.back(), kNoDeadline, 0);
    ASSERT_TRUE(w.ok());
    want.push_back(w->hits);
  }
  // The last run: hybrid with cheap jobs (gpu_alone_us -1: measured at calibration), which
  // on this small index are nearly all of them, and exploration.
  struct Run {
    SchedMode mode;
    double gpu_alone_us;
  };
  for (const Run& run : {Run{SchedMode::kCpu, 0}, Run{SchedMode::kGpu, 0}, Run{SchedMode::kHybrid, 0},
                         Run{SchedMode::kGriffin, 0}, Run{SchedMode::kHybrid, -1}}) {
    const SchedMode mode = run.mode;
    SCOPED_TRACE(std::string(SchedModeName(mode)) + (run.gpu_alone_us != 0 ? " with cheap jobs" : ""));
    ScheduledExecutorOptions o;
    o.sched.policy.mode = mode;
    o.sched.policy.gpu_alone_us = run.gpu_alone_us;
    o.sched.cpu_workers = 4;
    o.sched.gpu_dispatchers = 3;  // batches on three streams at once
    o.crossover = 8;
    o.calibration_queries = 24;
    auto e = ScheduledExecutor::Create(reader_, gpu.get(), nullptr, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 12; ++t)
      threads.emplace_back([&] {
        for (size_t i = next.fetch_add(1); i < qs.size(); i = next.fetch_add(1)) {
          auto got = (*e)->Execute(qs[i], kNoDeadline, 0);
          if (!got.ok()) {
            ADD_FAILURE() << Describe(qs[i]) << ": " << got.status().ToString();
            continue;
          }
          auto same = SameHits(got->hits, want[i]);
          if (!same) ADD_FAILURE() << Describe(qs[i]) << ": " << same.message();
        }
      });
    for (auto& t : threads) t.join();
    const SchedStatsSnapshot st = (*e)->scheduler().stats();
    EXPECT_EQ(st.jobs[0] + st.jobs[1], qs.size());
    if (mode == SchedMode::kGpu) {
      EXPECT_GT(st.gpu_batches, 0u);
    }
    if (run.gpu_alone_us != 0) {
      // Calibration has a time budget: under a sanitizer (Scaled(16) < 16) the GPU is 10-100x
      // slower and the measurement may not finish, leaving no cheap bound; exactness still holds.
      if (Scaled(16) == 16) {
        EXPECT_GT((*e)->scheduler().options().policy.gpu_alone_us, 0.0);
        EXPECT_GT(st.cheap, 0u);
      }
    } else {
      EXPECT_EQ(st.cheap, 0u);
    }
  }
}

// Preload: the longest lists (by bytes, within the budget) become resident, longest first, and
// queries over them then copy nothing; answers stay exact.
TEST_F(GpuExecutorAdapterTest, PreloadMakesTheLongestListsResident) {
  auto gpu = MakeAdapter(size_t{64} << 20);
  ASSERT_NE(gpu, nullptr);
  // Every term's list bytes, longest first.
  std::vector<std::pair<uint32_t, std::string>> lists;
  ASSERT_TRUE(reader_
                  ->ForEachTerm([&](std::string_view term, const TermInfo& info) {
                    lists.emplace_back(info.list_bytes, std::string(term));
                    return true;
                  })
                  .ok());
  ASSERT_GT(lists.size(), 10u);
  std::sort(lists.begin(), lists.end(), std::greater<>());
  // Nothing under a zero budget or above every list's length.
  auto none = gpu->Preload(0, 1);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->lists, 0u);
  auto too_long = gpu->Preload(uint64_t{1} << 30, kDocs + 1);
  ASSERT_TRUE(too_long.ok());
  EXPECT_EQ(too_long->lists, 0u);
  EXPECT_EQ(gpu->cache().stats().resident_lists, 0u);
  // A budget of exactly the n longest lists' bytes (n >= 5, past any tie) takes those n.
  size_t n = 5;
  while (n < lists.size() && lists[n - 1].first == lists[n].first) ++n;
  uint64_t budget = 0;
  for (size_t i = 0; i < n; ++i) budget += lists[i].first;
  auto top = gpu->Preload(budget, 1);
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->lists, n);
  EXPECT_EQ(top->bytes, budget);
  EXPECT_FALSE(top->cache_full);
  EXPECT_EQ(gpu->cache().stats().resident_lists, n);
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(gpu->cache().IsResident(lists[i].second)) << lists[i].second;
  Query q;
  q.terms = {lists[0].second, lists[1].second};
  q.mode = QueryMode::kAnd;
  q.k = 10;
  EXPECT_EQ(gpu->NonResidentBytes(q), 0u);
  // Resident, not resident (the next longest list), absent, and a repeat: the lists not resident
  // count their bytes once a mention.
  ASSERT_LT(n, lists.size());
  Query mixed = q;
  mixed.terms = {lists[0].second, lists[n].second, "zz-absent-term", lists[n].second};
  EXPECT_EQ(gpu->NonResidentBytes(mixed), uint64_t{2} * lists[n].first);
  // Everything: every list fits the 64 MiB cache's 90%; queries then hit the cache only.
  auto all = gpu->Preload(uint64_t{1} << 30, 1);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(gpu->cache().stats().resident_lists, lists.size());
  const uint64_t misses = gpu->cache().stats().misses;
  CpuExecutorAdapter cpu(reader_);
  std::mt19937_64 rng(77);
  for (int i = 0; i < Scaled(100); ++i) {
    const Query r = RandomQuery(rng);
    auto want = cpu.Execute(r, kNoDeadline, 0);
    auto got = gpu->Execute(r, kNoDeadline, 0);
    ASSERT_TRUE(want.ok() && got.ok()) << Describe(r);
    EXPECT_TRUE(SameHits(got->hits, want->hits)) << Describe(r);
  }
  EXPECT_EQ(gpu->cache().stats().misses, misses);
}

}  // namespace
}  // namespace search
