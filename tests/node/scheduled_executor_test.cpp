// ScheduledExecutor over a real shard with a fake GPU (a BatchExecutor that answers with the CPU
// engine and reports Processor::kGpu, and can fail chosen queries as a GPU would): every
// scheduler mode returns the CPU engine's exact answers for random queries from many threads;
// GPU failures in the middle of a batch rerun on the CPU with none lost or wrong; calibration
// fits both processors; flags and bad input. (The real GPU executor runs the same suite in
// gpu_executor_adapter_test on a GPU machine.)
#include "node/scheduled_executor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <future>
#include <thread>
#include <tuple>

#include "../prometheus_text.hpp"
#include "metrics/metrics.hpp"
#include "node_fixture.hpp"

namespace search {
namespace {

constexpr uint32_t kDocs = 3000;
constexpr uint32_t kVocab = 400;

class FakeGpu final : public BatchExecutor {
 public:
  explicit FakeGpu(const ShardReader* shard) : shard_(shard), cpu_(shard) {}
  std::string_view batch_name() const override { return "fake-gpu"; }
  void ExecuteBatch(std::span<BatchItem> items) override {
    batches.fetch_add(1);
    size_t prev = max_batch.load();
    while (items.size() > prev && !max_batch.compare_exchange_weak(prev, items.size())) {
    }
    for (size_t i = 0; i < items.size(); ++i) {
      BatchItem& it = items[i];
      runs.fetch_add(1);
      if (GpuUnsupported(*it.query).has_value()) unsupported.fetch_add(1);  // the scheduler keeps them off
      if (it.query->tree != nullptr) trees.fetch_add(1);
      if (it.query->count) counts.fetch_add(1);
      if (it.prepared != nullptr) {  // the caller's lookups must be the shard's own
        prepared.fetch_add(1);
        if (!SameAsShard(*it.query, *it.prepared)) prepared_wrong.fetch_add(1);
      }
      // Fails every query with an odd number of terms in a batch position >= 1: a GPU failure
      // in the middle of a batch.
      if (fail_odd && it.query->terms.size() % 2 == 1 && (i >= 1 || items.size() == 1)) {
        it.result = Status::Unavailable("injected CUDA error");
        it.retry_on_cpu = true;
        failed.fetch_add(1);
        continue;
      }
      it.retry_on_cpu = false;
      it.result = cpu_.Execute(*it.query, kNoDeadline, 0);
      if (it.result.ok()) it.result->processor = Processor::kGpu;
      // As GpuExecutorAdapter: asked not to, it leaves the ids to the caller.
      if (it.result.ok() && !it.resolve_ids) {
        unresolved.fetch_add(1);
        for (HitMsg& h : it.result->hits) h.external_id.clear();
      }
    }
  }
  uint64_t NonResidentBytes(const Query& q) override { return q.terms.size() * 100; }

  // Whether `prepared` holds, per term, what the shard's own lookups give.
  bool SameAsShard(const Query& q, const std::vector<PreparedTerm>& prepared) const {
    if (prepared.size() != q.terms.size()) return false;
    for (size_t i = 0; i < q.terms.size(); ++i) {
      auto info = shard_->GetTermInfo(q.terms[i]);
      if (!info.ok() || info->has_value() != prepared[i].present) return false;
      if (!info->has_value()) continue;
      auto list = shard_->GetList(q.terms[i]);
      if ((*info)->df != prepared[i].df || !list.ok() || prepared[i].list == nullptr ||
          (*list)->term != prepared[i].list->term || (*list)->bytes() != prepared[i].list->bytes())
        return false;
    }
    return true;
  }

  // The GPU's step, done on the host: the shortest lists' docIDs intersected while the next list
  // is under crossover times the running intersection.
  Result<Prefix> IntersectPrefix(const Query& q, double crossover) override {
    steps.fetch_add(1);
    if (q.tree != nullptr || q.count) shaped_steps.fetch_add(1);  // the scheduler steps flat queries only
    if (fail_steps) return Status::Unavailable("injected CUDA error in a step");
    std::vector<std::vector<uint32_t>> lists;
    for (const std::string& t : q.terms) {
      auto l = shard_->GetList(t);
      if (!l.ok()) {
        if (q.mode == QueryMode::kAnd) return Prefix{};
        continue;
      }
      std::vector<uint32_t> docs;
      uint32_t buf[128];
      for (uint32_t b = 0; b < (*l)->view.num_blocks(); ++b) {
        SEARCH_RETURN_IF_ERROR((*l)->view.DecodeDocs(b, buf));
        docs.insert(docs.end(), buf, buf + (*l)->view.block(b).count);
      }
      lists.push_back(std::move(docs));
    }
    if (lists.size() < 2) return Status::InvalidArgument("fewer than two lists");
    std::sort(lists.begin(), lists.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
    Prefix p;
    p.candidates = lists[0];
    p.lists_done = 1;
    for (size_t j = 1; j < lists.size(); ++j) {
      if (j >= 2 && lists[j].size() >= crossover * p.candidates.size()) break;
      std::vector<uint32_t> both;
      std::set_intersection(p.candidates.begin(), p.candidates.end(), lists[j].begin(), lists[j].end(),
                            std::back_inserter(both));
      p.candidates = std::move(both);
      ++p.lists_done;
    }
    max_lists_done = std::max<size_t>(max_lists_done.load(), p.lists_done);
    return p;
  }

  bool fail_odd = false, fail_steps = false;
  std::atomic<int> steps{0};
  std::atomic<size_t> max_lists_done{0};
  std::atomic<int> batches{0}, runs{0}, failed{0};
  std::atomic<int> unresolved{0};  // answers handed back without external ids
  std::atomic<int> unsupported{0};  // items the GPU engine does not run (phrases): must stay 0
  std::atomic<int> trees{0}, counts{0};  // items with a query tree; with a count
  std::atomic<int> shaped_steps{0};      // IntersectPrefix calls for a tree or a count: must stay 0
  std::atomic<int> prepared{0}, prepared_wrong{0};  // items with the caller's lookups; those unlike the shard's
  std::atomic<size_t> max_batch{0};

 private:
  const ShardReader* shard_;
  CpuExecutorAdapter cpu_;
};

class ScheduledExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const std::string path = dir_->path() + "/shard-0";
    ASSERT_TRUE(testing::WriteRandomShard(path, kDocs, kVocab, 11, /*positions=*/true).ok());
    auto r = ShardReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    reader_ = std::move(r).value().release();
  }
  static void TearDownTestSuite() {
    delete reader_;
    delete dir_;
  }
  static ScheduledExecutorOptions Options(SchedMode mode) {
    ScheduledExecutorOptions o;
    o.sched.policy.mode = mode;
    o.sched.policy.batch_wait = std::chrono::microseconds(300);
    o.sched.cpu_workers = 3;
    o.sched.gpu_dispatchers = 1;
    o.calibration_queries = 24;
    return o;
  }
  // Runs `n` random queries from `threads` threads; each answer must equal the CPU adapter's.
  // async: through ExecuteAsync (the client thread waits on each answer's future).
  static void CheckAnswers(ScheduledExecutor& e, int n, int threads, uint64_t seed, int* on_cpu, int* on_gpu,
                           bool async = false) {
    std::mt19937_64 rng(seed);
    std::vector<Query> qs;
    for (int i = 0; i < n; ++i) qs.push_back(testing::RandomQuery(rng, kVocab));
    CpuExecutorAdapter ref(reader_);
    std::vector<std::vector<HitMsg>> want;
    for (const Query& q : qs) {
      auto w = ref.Execute(q, kNoDeadline, 0);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      want.push_back(w->hits);
    }
    std::atomic<int> next{0}, cpu{0}, gpu{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          Result<ExecOutput> got = Status::Internal("not answered");
          if (async) {
            auto answer = std::make_shared<std::promise<Result<ExecOutput>>>();
            auto future = answer->get_future();
            e.ExecuteAsync(qs[i], deadline, 0, [answer](Result<ExecOutput> out) { answer->set_value(std::move(out)); });
            got = future.get();
          } else {
            got = e.Execute(qs[i], deadline, 0);
          }
          if (!got.ok()) {
            ADD_FAILURE() << testing::Describe(qs[i]) << ": " << got.status().ToString();
            continue;
          }
          (got->processor == Processor::kGpu ? gpu : cpu).fetch_add(1);
          auto same = testing::SameHits(got->hits, want[i]);
          if (!same) ADD_FAILURE() << testing::Describe(qs[i]) << ": " << same.message();
        }
      });
    for (auto& t : ts) t.join();
    *on_cpu = cpu.load();
    *on_gpu = gpu.load();
  }

  static testing::TempDir* dir_;
  static ShardReader* reader_;
};
testing::TempDir* ScheduledExecutorTest::dir_ = nullptr;
ShardReader* ScheduledExecutorTest::reader_ = nullptr;

// Execute and ExecuteAsync (the node's way: answered on the finishing thread) alike.
TEST_F(ScheduledExecutorTest, EveryModeReturnsTheCpuEnginesAnswers) {
  for (bool async : {false, true})
  for (SchedMode mode : {SchedMode::kCpu, SchedMode::kGpu, SchedMode::kHybrid, SchedMode::kGriffin}) {
    SCOPED_TRACE(std::string(SchedModeName(mode)) + (async ? " async" : ""));
    FakeGpu gpu(reader_);
    auto e = ScheduledExecutor::Create(reader_, &gpu, nullptr, Options(mode));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    int cpu = 0, on_gpu = 0;
    CheckAnswers(**e, 300, 8, 5, &cpu, &on_gpu, async);
    EXPECT_EQ(cpu + on_gpu, 300);
    if (mode == SchedMode::kCpu) {
      EXPECT_EQ(on_gpu, 0);
    }
    if (mode == SchedMode::kGpu) {
      EXPECT_EQ(cpu, 0);
    }
    // GPU answers leave the batch without ids; the scheduler's caller resolves them (CheckAnswers
    // compared them with the CPU adapter's, ids included).
    if (mode != SchedMode::kCpu) {
      EXPECT_GT(gpu.unresolved.load(), 0);
    }
    // Batches come with the terms as the request's thread looked them up, and they are right.
    if (mode == SchedMode::kGpu) {
      EXPECT_EQ(gpu.prepared.load(), 300);  // calibration's batches come without
    }
    EXPECT_EQ(gpu.prepared_wrong.load(), 0);
    const SchedStatsSnapshot st = (*e)->scheduler().stats();
    EXPECT_EQ(st.jobs[0] + st.jobs[1], 300u);
  }
}

// With a GPU, a query's lists are fetched into the list cache on the caller's thread (Features),
// so a GPU dispatcher never reads RocksDB for them, and the lookups are kept for the GPU batch (one
// entry per term, an absent term included); without one, Features reads no list and keeps nothing.
TEST_F(ScheduledExecutorTest, FeaturesBringTheListsIntoTheCacheWithAGpu) {
  std::mt19937_64 rng(11);
  for (bool with_gpu : {false, true}) {
    SCOPED_TRACE(with_gpu ? "gpu" : "cpu only");
    FakeGpu gpu(reader_);
    auto e = ScheduledExecutor::Create(reader_, with_gpu ? &gpu : nullptr, nullptr,
                                       Options(with_gpu ? SchedMode::kHybrid : SchedMode::kCpu));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    int absent = 0;
    for (int i = 0; i < 40; ++i) {
      Query q = testing::RandomQuery(rng, kVocab);
      if (i % 4 == 0) {  // a term this shard does not have
        q.terms.push_back("zzzz-not-a-term");
        std::sort(q.terms.begin(), q.terms.end());  // canonical
        ++absent;
      }
      reader_->list_cache().Clear();
      std::vector<PreparedTerm> prepared(3);  // replaced
      ASSERT_TRUE((*e)->Features(q, &prepared).ok());
      for (const std::string& t : q.terms) {
        auto info = reader_->GetTermInfo(t);
        ASSERT_TRUE(info.ok());
        if (!info->has_value()) continue;
        EXPECT_EQ(reader_->list_cache().Lookup(t) != nullptr, with_gpu) << t;
      }
      if (!with_gpu) {
        EXPECT_TRUE(prepared.empty());
        continue;
      }
      ASSERT_EQ(prepared.size(), q.terms.size());
      EXPECT_TRUE(gpu.SameAsShard(q, prepared)) << testing::Describe(q);
    }
    EXPECT_GT(absent, 0);
  }
}

TEST_F(ScheduledExecutorTest, GpuFailuresMidBatchRerunOnTheCpu) {
  for (SchedMode mode : {SchedMode::kGpu, SchedMode::kHybrid}) {
    SCOPED_TRACE(SchedModeName(mode));
    FakeGpu gpu(reader_);
    auto e = ScheduledExecutor::Create(reader_, &gpu, nullptr, Options(mode));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    gpu.fail_odd = true;
    const int failed_before = gpu.failed.load();
    int cpu = 0, on_gpu = 0;
    CheckAnswers(**e, 300, 16, 9, &cpu, &on_gpu);
    EXPECT_EQ(cpu + on_gpu, 300);
    const int failed = gpu.failed.load() - failed_before;
    EXPECT_EQ((*e)->scheduler().stats().gpu_retries, static_cast<uint64_t>(failed));
    if (mode == SchedMode::kGpu) {
      EXPECT_GT(failed, 0);
      EXPECT_EQ(cpu, failed);  // exactly the failed ones ran on the CPU
    }
  }
}

// Griffin: and/andor queries of three or more lists whose longest list passes the crossover start
// on the GPU (the step), move to the CPU with the candidates and finish there with exact answers
// (Processor::kHybrid); a failing step reruns the whole query on the CPU.
TEST_F(ScheduledExecutorTest, GriffinMigratesMidQueryWithExactAnswers) {
  for (bool fail : {false, true}) {
    SCOPED_TRACE(fail ? "failing steps" : "steps");
    FakeGpu gpu(reader_);
    ScheduledExecutorOptions o = Options(SchedMode::kGriffin);
    o.crossover = 4;  // small lists here: a low crossover makes hand-offs common
    auto e = ScheduledExecutor::Create(reader_, &gpu, nullptr, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    gpu.fail_steps = fail;
    CpuExecutorAdapter ref(reader_);
    std::mt19937_64 rng(31);
    int hybrid = 0;
    for (int i = 0; i < 300; ++i) {
      Query q;
      // A rare term and frequent ones: second/shortest under 4 often, longest/shortest above it.
      q.terms = {testing::Word(static_cast<uint32_t>(rng() % 8)), testing::Word(static_cast<uint32_t>(8 + rng() % 30)),
                 testing::Word(static_cast<uint32_t>(8 + rng() % 30)), testing::Word(static_cast<uint32_t>(40 + rng() % 300))};
      std::sort(q.terms.begin(), q.terms.end());
      q.terms.erase(std::unique(q.terms.begin(), q.terms.end()), q.terms.end());
      q.mode = i % 2 == 0 ? QueryMode::kAnd : QueryMode::kAndOr;
      q.k = 1 + static_cast<uint32_t>(rng() % 50);
      auto want = ref.Execute(q, kNoDeadline, 0);
      ASSERT_TRUE(want.ok());
      auto got = (*e)->Execute(q, kNoDeadline, 0);
      ASSERT_TRUE(got.ok()) << testing::Describe(q) << ": " << got.status().ToString();
      EXPECT_TRUE(testing::SameHits(got->hits, want->hits)) << testing::Describe(q);
      hybrid += got->processor == Processor::kHybrid;
    }
    const SchedStatsSnapshot st = (*e)->scheduler().stats();
    if (!fail) {
      EXPECT_GT(hybrid, 0);
      EXPECT_EQ(st.migrations, static_cast<uint64_t>(hybrid));
      EXPECT_GE(gpu.max_lists_done.load(), 2u);
    } else {
      EXPECT_EQ(hybrid, 0);
      EXPECT_GT(gpu.steps.load(), 0);
      EXPECT_EQ(st.gpu_retries, static_cast<uint64_t>(gpu.steps.load()));
    }
  }
}

TEST_F(ScheduledExecutorTest, CalibrationFitsBothProcessors) {
  FakeGpu gpu(reader_);
  auto e = ScheduledExecutor::Create(reader_, &gpu, nullptr, Options(SchedMode::kHybrid));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_GT((*e)->calibration_samples(Unit::kCpu), 8u);
  EXPECT_GT((*e)->calibration_samples(Unit::kGpu), 8u);
  // The resident GPU samples come from batches, as the scheduler runs the GPU.
  EXPECT_GT(gpu.max_batch.load(), 1u);
  Query q;
  q.terms = {testing::Word(1), testing::Word(2)};
  auto f = (*e)->Features(q);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->terms, 2u);
  EXPECT_GE(f->second, f->shortest);
  EXPECT_EQ(f->nonresident_bytes, 200u);
  // The crossover comes from the fitted model: a power of two in [2, 4096].
  const double x = (*e)->crossover();
  EXPECT_GE(x, 2.0);
  EXPECT_LE(x, 4096.0);
  EXPECT_EQ(x, std::exp2(std::round(std::log2(x))));
  double us = 0;
  EXPECT_TRUE((*e)->model().Predict(Unit::kCpu, *f, &us));
  EXPECT_GT(us, 0.0);
  EXPECT_TRUE((*e)->model().Predict(Unit::kGpu, *f, &us));
}

// A phrase is priced by its tokens' postings (QueryFeatures::phrase_work: the rarest token's
// postings times the phrase's tokens, each distinct phrase once, none for a phrase with an absent
// token), and GpuShapedUs adds that work on top of the tree path's floor, linearly, whatever the
// model predicted.
TEST_F(ScheduledExecutorTest, PhrasesArePricedByTheirTokensPostings) {
  auto e = ScheduledExecutor::Create(reader_, nullptr, nullptr, Options(SchedMode::kCpu));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto count = [&](const std::string& t) -> uint64_t {
    auto info = reader_->GetTermInfo(t);
    EXPECT_TRUE(info.ok() && info->has_value()) << t;
    return info.ok() && info->has_value() ? (*info)->count : 0;
  };
  auto term = [](const std::string& t) { return QueryNode{QueryNode::Kind::kTerm, {t}, {}}; };
  auto phrase = [](std::vector<std::string> t) { return QueryNode{QueryNode::Kind::kPhrase, std::move(t), {}}; };
  auto work = [&](std::vector<QueryNode::Clause> clauses) -> uint64_t {
    QueryNode root{QueryNode::Kind::kBool, {}, std::move(clauses)};
    auto f = (*e)->Features(MakeQuery(std::move(root), QueryMode::kOr, 10, false));
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? f->phrase_work : 0;
  };
  const std::string w0 = testing::Word(0), w1 = testing::Word(1), w7 = testing::Word(7), w20 = testing::Word(20);
  ASSERT_GT(count(w0), count(w20));  // Zipf: w0 is the most frequent word
  EXPECT_EQ(work({{Occur::kShould, term(w0)}, {Occur::kMust, term(w1)}}), 0u);
  EXPECT_EQ(work({{Occur::kShould, phrase({w0, w20})}}), 2 * std::min(count(w0), count(w20)));
  EXPECT_EQ(work({{Occur::kShould, phrase({w0, w7, w0})}}), 3 * std::min(count(w0), count(w7)));  // repeats count
  EXPECT_EQ(work({{Occur::kShould, phrase({w0, w1})}, {Occur::kMustNot, phrase({w7, w20})}}),
            2 * std::min(count(w0), count(w1)) + 2 * std::min(count(w7), count(w20)));  // - phrases too
  // The same phrase in two groups: produced once.
  QueryNode g1{QueryNode::Kind::kBool, {}, {{Occur::kMust, phrase({w0, w1})}, {Occur::kMust, term(w7)}}};
  QueryNode g2{QueryNode::Kind::kBool, {}, {{Occur::kMust, phrase({w0, w1})}, {Occur::kMust, term(w20)}}};
  EXPECT_EQ(work({{Occur::kShould, g1}, {Occur::kShould, g2}}), 2 * std::min(count(w0), count(w1)));
  EXPECT_EQ(work({{Occur::kShould, phrase({w0, "zzzz-absent"})}, {Occur::kShould, term(w1)}}), 0u);
  // GpuShapedUs: the tree floor without phrases, the phrase work added linearly on top.
  const uint64_t docs = 1000000;
  EXPECT_EQ(GpuShapedUs(5000.0, docs, 2, 0), 5000.0);                   // the model above the floor
  EXPECT_GT(GpuShapedUs(0.0, 10 * docs, 2, 0), GpuShapedUs(0.0, docs, 2, 0));  // the floor grows with docs
  const double one = GpuShapedUs(1.0, docs, 2, 100000) - GpuShapedUs(1.0, docs, 2, 0);
  EXPECT_GT(one, 0.0);
  EXPECT_DOUBLE_EQ(GpuShapedUs(1.0, docs, 2, 200000) - GpuShapedUs(1.0, docs, 2, 0), 2 * one);
  EXPECT_DOUBLE_EQ(GpuShapedUs(5000.0, docs, 2, 100000) - GpuShapedUs(5000.0, docs, 2, 0), one);
}

// ExecTiming (the slow-query log's fields): the phases fit, without overlap, inside the call; a GPU
// answer names its batch, a CPU answer none, and a GPU failure rerun on the CPU says so.
TEST_F(ScheduledExecutorTest, TimingTellsWhereAQuerysTimeWent) {
  for (SchedMode mode : {SchedMode::kCpu, SchedMode::kGpu}) {
    SCOPED_TRACE(SchedModeName(mode));
    FakeGpu gpu(reader_);
    auto e = ScheduledExecutor::Create(reader_, &gpu, nullptr, Options(mode));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    gpu.fail_odd = mode == SchedMode::kGpu;
    std::mt19937_64 rng(21);
    int retried = 0, on_gpu = 0;
    for (int i = 0; i < 60; ++i) {
      Query q = testing::RandomQuery(rng, kVocab);
      q.mode = QueryMode::kAnd;
      const auto t0 = std::chrono::steady_clock::now();
      auto got = (*e)->Execute(q, t0 + std::chrono::seconds(30), 0);
      const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const ExecTiming& t = got->timing;
      for (double v : {t.features_us, t.submit_us, t.wait_us, t.run_us, t.return_us, t.resolve_us}) EXPECT_GE(v, 0);
      EXPECT_GT(t.run_us, 0) << testing::Describe(q);
      EXPECT_LE(t.features_us + t.submit_us + t.wait_us + t.run_us + t.return_us + t.resolve_us, wall_us + 5)
          << testing::Describe(q);
      EXPECT_FALSE(t.migrated);
      if (got->processor == Processor::kGpu) {
        ++on_gpu;
        EXPECT_GE(t.gpu_batch, 1u);
        EXPECT_FALSE(t.retried);
      } else if (mode == SchedMode::kCpu) {
        EXPECT_EQ(t.gpu_batch, 0u);
        EXPECT_FALSE(t.retried);
      } else {
        // The gpu scheduler answers on the CPU only a GPU failure's rerun (odd term counts).
        EXPECT_TRUE(t.retried) << testing::Describe(q);
        EXPECT_GE(t.gpu_batch, 1u);
        EXPECT_EQ(q.terms.size() % 2, 1u);
        ++retried;
      }
    }
    if (mode == SchedMode::kGpu) {
      EXPECT_GT(on_gpu, 0);
      EXPECT_GT(retried, 0);
    } else {
      EXPECT_EQ(on_gpu, 0);
    }
  }
}

// Hybrid with the adaptive cheap bound: exact answers, and the bound exported as a gauge.
TEST_F(ScheduledExecutorTest, AdaptiveCheapBoundIsExactAndExported) {
  Metrics metrics("node");
  FakeGpu gpu(reader_);
  ScheduledExecutorOptions o = Options(SchedMode::kHybrid);
  o.sched.policy.gpu_alone_us = -1;  // measured at calibration
  o.sched.policy.cheap_step = 0.05;
  auto e = ScheduledExecutor::Create(reader_, &gpu, &metrics, o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  int cpu = 0, on_gpu = 0;
  CheckAnswers(**e, 200, 8, 23, &cpu, &on_gpu);
  EXPECT_EQ(cpu + on_gpu, 200);
  const double bound_us = (*e)->scheduler().stats().cheap_threshold_us;
  EXPECT_GT(bound_us, 0.0);
  const std::string text = metrics.SerializeText();
  const std::string series = "\nsearch_sched_cheap_threshold_seconds ";
  const size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::strtod(text.c_str() + at + series.size(), nullptr), bound_us * 1e-6, 1e-9);
}

TEST_F(ScheduledExecutorTest, ExportsSchedulerMetrics) {
  Metrics metrics("node");
  FakeGpu gpu(reader_);
  gpu.fail_odd = true;
  auto e = ScheduledExecutor::Create(reader_, &gpu, &metrics, Options(SchedMode::kGpu));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  int cpu = 0, on_gpu = 0;
  CheckAnswers(**e, 60, 4, 21, &cpu, &on_gpu);
  const std::string text = metrics.SerializeText();
  auto value = [&](const std::string& series) {
    const size_t at = text.find("\n" + series + " ");
    if (at == std::string::npos) return -1.0;
    return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
  };
  EXPECT_EQ(value("search_sched_jobs_total{processor=\"gpu\"}"), on_gpu) << text;
  EXPECT_EQ(value("search_sched_jobs_total{processor=\"cpu\"}"), cpu);
  EXPECT_EQ(value("search_sched_gpu_retries_total"), cpu);
  EXPECT_GE(value("search_sched_gpu_batches_total"), 1.0);
  EXPECT_GE(value("search_sched_queue_length{queue=\"gpu\"}"), 0.0);
  EXPECT_GE(value("search_sched_prediction_error_ratio{processor=\"gpu\"}"), 0.0);
  EXPECT_NE(text.find("search_sched_wait_seconds_bucket{processor=\"gpu\""), std::string::npos);
  EXPECT_NE(text.find("search_sched_run_seconds_count{processor=\"cpu\"}"), std::string::npos);
  // Every query's host phases around the scheduler, the external ids included: the answers of
  // both processors come without them and Finalize resolves them (the CPU's here: GPU retries).
  ASSERT_GT(cpu, 0);
  for (const char* phase : {"features", "submit", "return", "resolve"})
    EXPECT_EQ(value(std::string("search_sched_host_seconds_count{phase=\"") + phase + "\"}"), cpu + on_gpu) << phase;
}

// Trees (+, -, filter, groups, phrases) and counts run on the GPU like bags of words: in gpu mode
// every one reaches the fake GPU's batches, and with kFlagForceGpu in every mode; never a Griffin
// step. A phrase tree past the GPU program's slots (GpuUnsupported) stays on the CPU engine in
// every mode (pinned there, never in a GPU batch), is counted by a GPU node (reason "phrase", once
// per query) and refused with kFlagForceGpu. Answers and totals are the CPU engine's.
TEST_F(ScheduledExecutorTest, TreesPhrasesAndCountsReachTheGpu) {
  std::mt19937_64 rng(31);
  std::vector<Query> qs;
  for (uint64_t i = 0; i < 120; ++i) qs.push_back(ToQuery(testing::RandomTreeRequest(rng, i, i % 4 == 0)));
  qs.push_back(testing::WidePhraseQuery(33));  // 33 distinct phrases: past the GPU program's slots
  for (int i = 0; i < 40; ++i) {  // bags of words, half of them with a count (some the count alone)
    Query q = testing::RandomQuery(rng, kVocab);
    q.count = i % 2 == 0;
    if (i % 8 == 0) q.k = 0;
    qs.push_back(std::move(q));
  }
  CpuExecutorAdapter ref(reader_);
  int phrases = 0, unsupported = 0, trees = 0, counts = 0;
  for (const Query& q : qs) {
    if (GpuUnsupported(q)) {
      ++unsupported;
      continue;
    }
    phrases += q.tree != nullptr && TreeHasPhrase(*q.tree);
    trees += q.tree != nullptr;
    counts += q.count;
  }
  ASSERT_EQ(unsupported, 1);
  ASSERT_GT(phrases, 0);
  ASSERT_GT(trees, 0);
  ASSERT_GT(counts, 0);
  for (SchedMode mode : {SchedMode::kGpu, SchedMode::kHybrid, SchedMode::kGriffin}) {
    SCOPED_TRACE(SchedModeName(mode));
    Metrics metrics("node");
    FakeGpu gpu(reader_);
    auto e = ScheduledExecutor::Create(reader_, &gpu, &metrics, Options(mode));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const int trees_before = gpu.trees.load(), counts_before = gpu.counts.load();
    int forced_trees = 0, forced_counts = 0;
    for (const Query& q : qs) {
      const std::string what = (q.tree ? CanonicalKey(*q.tree) : testing::Describe(q)) + (q.count ? " count" : "") +
                               " k " + std::to_string(q.k);
      auto want = ref.Execute(q, kNoDeadline, 0);
      auto got = (*e)->Execute(q, kNoDeadline, 0);
      if (!want.ok()) {
        EXPECT_EQ(got.status().code(), want.status().code()) << what;
        continue;
      }
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
      EXPECT_TRUE(testing::SameHits(got->hits, want->hits)) << what;
      EXPECT_EQ(got->has_total, want->has_total) << what;
      EXPECT_EQ(got->total, want->total) << what;
      auto forced = (*e)->Execute(q, kNoDeadline, kFlagForceGpu);
      if (GpuUnsupported(q)) {
        EXPECT_EQ(got->processor, Processor::kCpu) << what;
        EXPECT_EQ(forced.status().code(), StatusCode::kUnavailable) << what;
        continue;
      }
      if (mode == SchedMode::kGpu) {
        EXPECT_EQ(got->processor, Processor::kGpu) << what;
      }
      ASSERT_TRUE(forced.ok()) << what << ": " << forced.status().ToString();
      EXPECT_EQ(forced->processor, Processor::kGpu) << what;
      EXPECT_TRUE(testing::SameHits(forced->hits, want->hits)) << what;
      EXPECT_EQ(forced->total, want->total) << what;
      forced_trees += q.tree != nullptr;
      forced_counts += q.count;
    }
    EXPECT_EQ(gpu.unsupported.load(), 0);
    EXPECT_EQ(gpu.shaped_steps.load(), 0);
    EXPECT_EQ(gpu.prepared_wrong.load(), 0);
    EXPECT_EQ(forced_trees, trees);
    EXPECT_EQ(forced_counts, counts);
    // The forced runs at least; in gpu mode the unforced ones too.
    const int factor = mode == SchedMode::kGpu ? 2 : 1;
    EXPECT_GE(gpu.trees.load() - trees_before, factor * trees);
    EXPECT_GE(gpu.counts.load() - counts_before, factor * counts);
    const std::string text = metrics.SerializeText();
    // The unsupported query counted once by Execute (the forced run is refused before it counts);
    // no other reason exists.
    EXPECT_EQ(testing::SeriesValue(text, R"(search_node_gpu_unsupported_total{reason="phrase"})"), unsupported);
    EXPECT_EQ(testing::Count(text, "search_node_gpu_unsupported_total{reason="), 1u);
  }
  // A node without a GPU has nothing to count; its answers are the same.
  Metrics metrics("node");
  auto cpu_only = ScheduledExecutor::Create(reader_, nullptr, &metrics, Options(SchedMode::kCpu));
  ASSERT_TRUE(cpu_only.ok());
  for (const Query& q : qs) {
    auto want = ref.Execute(q, kNoDeadline, 0);
    auto got = (*cpu_only)->Execute(q, kNoDeadline, 0);
    ASSERT_EQ(got.ok(), want.ok());
    if (got.ok()) {
      EXPECT_TRUE(testing::SameHits(got->hits, want->hits));
      EXPECT_EQ(got->total, want->total);
    }
  }
  EXPECT_LE(testing::SeriesValue(metrics.SerializeText(), R"(search_node_gpu_unsupported_total{reason="phrase"})"), 0);
}

TEST_F(ScheduledExecutorTest, FlagsAndBadInput) {
  auto cpu_only = ScheduledExecutor::Create(reader_, nullptr, nullptr, Options(SchedMode::kCpu));
  ASSERT_TRUE(cpu_only.ok()) << cpu_only.status().ToString();
  EXPECT_FALSE((*cpu_only)->has_gpu());
  Query q;
  q.terms = {testing::Word(3)};
  EXPECT_EQ((*cpu_only)->Execute(q, kNoDeadline, kFlagForceGpu).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ((*cpu_only)->Execute(q, kNoDeadline, kFlagForceGpu | kFlagForceCpu).status().code(),
            StatusCode::kInvalidArgument);
  Query bad = q;
  bad.k = 0;
  EXPECT_EQ((*cpu_only)->Execute(bad, kNoDeadline, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*cpu_only)->Execute(q, std::chrono::steady_clock::now() - std::chrono::seconds(1), 0).status().code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_TRUE((*cpu_only)->Execute(q, kNoDeadline, kFlagForceCpu).ok());
  // ExecuteAsync answers bad input at once, on the calling thread, exactly once.
  for (auto [query, flags, deadline, want] :
       {std::tuple{q, kFlagForceGpu | kFlagForceCpu, kNoDeadline, StatusCode::kInvalidArgument},
        std::tuple{bad, 0u, kNoDeadline, StatusCode::kInvalidArgument},
        std::tuple{q, 0u, Deadline(std::chrono::steady_clock::now() - std::chrono::seconds(1)),
                   StatusCode::kDeadlineExceeded},
        std::tuple{q, kFlagForceCpu, kNoDeadline, StatusCode::kOk}}) {
    std::atomic<int> calls{0};  // the OK case may be answered on a CPU worker's thread
    std::atomic<StatusCode> got{StatusCode::kInternal};
    (*cpu_only)->ExecuteAsync(query, deadline, flags, [&](Result<ExecOutput> out) {
      got = out.ok() ? StatusCode::kOk : out.status().code();
      calls.fetch_add(1);
    });
    if (want != StatusCode::kOk) {
      EXPECT_EQ(calls.load(), 1);  // a refusal never reaches the scheduler
    }
    for (int i = 0; i < 2000 && calls == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(got.load(), want);
  }
  // GPU modes need a GPU executor.
  EXPECT_EQ(ScheduledExecutor::Create(reader_, nullptr, nullptr, Options(SchedMode::kHybrid)).status().code(),
            StatusCode::kUnavailable);
  // Forced processors in hybrid mode.
  FakeGpu gpu(reader_);
  auto h = ScheduledExecutor::Create(reader_, &gpu, nullptr, Options(SchedMode::kHybrid));
  ASSERT_TRUE(h.ok());
  auto g = (*h)->Execute(q, kNoDeadline, kFlagForceGpu);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->processor, Processor::kGpu);
  auto c = (*h)->Execute(q, kNoDeadline, kFlagForceCpu);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->processor, Processor::kCpu);
  // A forced GPU run that fails returns the GPU's error (no fallback).
  gpu.fail_odd = true;
  auto f = (*h)->Execute(q, kNoDeadline, kFlagForceGpu);
  EXPECT_EQ(f.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(ParseSchedMode("fast").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseSchedMode("griffin"), SchedMode::kGriffin);
}

}  // namespace
}  // namespace search
