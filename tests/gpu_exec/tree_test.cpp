// The GPU engine's tree path (ExecuteBatchGpu with GpuQueryInput::tree / ::count) against the CPU
// engine's tree evaluator (cpu_exec/src/tree_query.hpp, ExecuteTree, andor decided as CpuExecutor
// decides it per shard) and, over the whole collection, the brute-force evaluator
// (tests/cpu_exec/tree_reference.hpp): random term trees up to depth 3 with must, should,
// must_not and filter clauses and absent terms, flat queries with counts, every mode, counts on and
// off, count only, k from 1 to 1000, in batches mixing all of them, on a shard of a few thousand
// documents with a small vocabulary and on a shard that starts past docID 0, and on shards of
// 150,000 documents (many bitmap chunks, against the CPU engine only). Equality is exact:
// the same documents, order, float bits and totals; the same with phrases of 2-5 tokens with
// repeats among the leaves (positions in device_positions.hpp's layout). Also the refusals (a
// phrase without positions, too many slots, mismatched terms, k) and hand shapes (must_not only,
// filter only: score 0 in docID order).
// Skips when no CUDA device is present.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "core/bm25.hpp"
#include "core/query_tree.hpp"
#include "core/topk.hpp"
#include "gpu_exec/cuda_util.hpp"
#include "gpu_exec/device_positions.hpp"
#include "gpu_exec/gpu_engine.hpp"
#include "tree_query.hpp"
#include "tree_reference.hpp"

namespace search::testing {
namespace {

using cpu_internal::ExecuteTree;
using cpu_internal::TreeTermInput;
using gpu::GpuContext;
using gpu::GpuQueryInput;
using gpu::GpuTermInput;

// SEARCH_TEST_QUICK (scripts/device-check.sh sets it under compute-sanitizer): fewer batches.
int Scaled(int n) {
  const char* v = std::getenv("SEARCH_TEST_QUICK");
  if (v == nullptr || v[0] == '\0' || v[0] == '0') return n;
  return std::max(1, n / (v[0] == '1' ? 4 : 16));
}

struct Docs {
  std::vector<std::vector<std::string>> tokens;
  uint64_t total = 0;
  std::map<std::string, uint32_t> df;
};

// Zipf-distributed words w0..w<vocab-1>; every 97th document is long (tf in the hundreds).
Docs MakeDocs(uint32_t n, uint32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights(vocab);
  for (uint32_t i = 0; i < vocab; ++i) weights[i] = 1.0 / (i + 1.0);
  std::discrete_distribution<uint32_t> word(weights.begin(), weights.end());
  Docs d;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t len = i % 97 == 0 ? 700 : static_cast<uint32_t>(rng() % 20);
    std::vector<std::string> t;
    for (uint32_t j = 0; j < len; ++j) t.push_back(Word(word(rng)));
    d.tokens.push_back(std::move(t));
  }
  for (const auto& t : d.tokens) {
    d.total += t.size();
    std::map<std::string, uint32_t> seen;
    for (const std::string& w : t) ++seen[w];
    for (const auto& [w, f] : seen) ++d.df[w];
  }
  return d;
}

// One shard [begin, end) of the documents: its lists on the host and the device, its norms.
struct DevShard {
  uint32_t begin = 0, end = 0;
  std::vector<float> norms;
  std::map<std::string, size_t> index;
  std::vector<std::vector<uint32_t>> words;  // each list's bytes, 4-byte aligned
  std::vector<ListView> lists;
  std::vector<void*> d_blobs;
  std::vector<std::string> pos_blobs;  // each list's positions (codec/positions_codec.hpp)
  std::vector<PositionsView> positions;
  std::vector<void*> d_positions;  // device_positions.hpp's layout
  float* d_norms = nullptr;
  gpu::GpuShardView view;
  DevShard() = default;
  DevShard(const DevShard&) = delete;
  ~DevShard() {
    for (void* p : d_blobs) (void)cudaFree(p);
    for (void* p : d_positions) (void)cudaFree(p);
    if (d_norms != nullptr) (void)cudaFree(d_norms);
  }
};

void BuildShard(const Docs& docs, uint32_t begin, uint32_t end, DevShard* s) {
  s->begin = begin;
  s->end = end;
  CollectionStats stats;
  stats.num_docs = docs.tokens.size();
  stats.total_tokens = docs.total;
  for (uint32_t d = begin; d < end; ++d)
    s->norms.push_back(Bm25Norm(static_cast<uint32_t>(docs.tokens[d].size()), stats.avgdl()));
  std::map<std::string, std::vector<std::pair<uint32_t, uint32_t>>> post;  // term -> (doc, tf)
  std::map<std::string, std::vector<uint32_t>> pos;                       // term -> its positions, posting by posting
  for (uint32_t d = begin; d < end; ++d) {
    std::map<std::string, std::vector<uint32_t>> here;
    for (uint32_t p = 0; p < docs.tokens[d].size(); ++p) here[docs.tokens[d][p]].push_back(p);
    for (const auto& [w, ps] : here) {
      post[w].push_back({d, static_cast<uint32_t>(ps.size())});
      pos[w].insert(pos[w].end(), ps.begin(), ps.end());
    }
  }
  s->words.reserve(post.size());
  s->pos_blobs.reserve(post.size());
  for (const auto& [w, pl] : post) {
    std::vector<uint32_t> ds, tfs;
    for (const auto& [d, f] : pl) {
      ds.push_back(d);
      tfs.push_back(f);
    }
    auto blob = EncodePositions(tfs, pos[w]);
    ASSERT_TRUE(blob.ok()) << blob.status().ToString();
    s->pos_blobs.push_back(std::move(*blob));
    const float idf = Bm25Idf(stats.num_docs, docs.df.at(w));
    auto list =
        EncodeList(ds, tfs, begin, [&](uint32_t d, uint32_t f) { return Bm25TermScore(idf, f, s->norms[d - begin]); });
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    std::vector<uint32_t> aligned((list->size() + 3) / 4, 0u);
    std::memcpy(aligned.data(), list->data(), list->size());
    s->words.push_back(std::move(aligned));
    auto lv = ListView::Parse(std::string_view(reinterpret_cast<const char*>(s->words.back().data()), list->size()));
    ASSERT_TRUE(lv.ok()) << lv.status().ToString();
    auto pv = PositionsView::Parse(s->pos_blobs.back(), lv->count());
    ASSERT_TRUE(pv.ok()) << pv.status().ToString();
    s->positions.push_back(*pv);
    auto layout = gpu::BuildDevicePositions(*lv, *pv);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    void* d_pos = nullptr;
    ASSERT_EQ(cudaMalloc(&d_pos, std::max<size_t>(layout->size(), 1) * 4), cudaSuccess);
    s->d_positions.push_back(d_pos);
    ASSERT_EQ(cudaMemcpy(d_pos, layout->data(), layout->size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    s->index[w] = s->lists.size();
    s->lists.push_back(*lv);
    void* d_blob = nullptr;
    ASSERT_EQ(cudaMalloc(&d_blob, list->size()), cudaSuccess);
    s->d_blobs.push_back(d_blob);
    ASSERT_EQ(cudaMemcpy(d_blob, list->data(), list->size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&s->d_norms), std::max<size_t>(s->norms.size(), 1) * sizeof(float)),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(s->d_norms, s->norms.data(), s->norms.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  s->view.d_norms = s->d_norms;
  s->view.doc_begin = begin;
  s->view.num_docs = end - begin;
}

// The inputs of a query's terms in shard s, for both engines (global idf; absent: no list).
struct Inputs {
  std::vector<TreeTermInput> cpu;
  std::vector<GpuTermInput> gpu;
};
Inputs InputsFor(const DevShard& s, const Docs& docs, const std::vector<std::string>& terms) {
  Inputs in;
  in.cpu.resize(terms.size());
  in.gpu.resize(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    auto df = docs.df.find(terms[i]);
    const float idf = Bm25Idf(docs.tokens.size(), df == docs.df.end() ? 0 : df->second);
    in.cpu[i].idf = in.gpu[i].idf = idf;
    auto it = s.index.find(terms[i]);
    if (it == s.index.end()) continue;
    in.cpu[i].list = in.gpu[i].list = &s.lists[it->second];
    in.gpu[i].d_blob = static_cast<const uint8_t*>(s.d_blobs[it->second]);
    in.cpu[i].positions = &s.positions[it->second];
    in.gpu[i].d_positions = static_cast<const uint32_t*>(s.d_positions[it->second]);
  }
  return in;
}

// The CPU engine's answer on one shard, as CpuExecutor::RunTree gives it: the tree (or the flat
// query's) resolution, andor's or-resolution when the and-resolution has fewer than k hits.
Result<SearchResult> CpuAnswer(const DevShard& s, const Query& q, const Inputs& in) {
  auto run = [&](QueryMode m) {
    const QueryNode tree = q.tree != nullptr ? ResolveMode(*q.tree, m) : cpu_internal::FlatTree(q.terms, m);
    return ExecuteTree(tree, q.terms, in.cpu, s.norms, s.begin, q.k, q.count);
  };
  if (q.mode != QueryMode::kAndOr) return run(q.mode);
  auto a = run(QueryMode::kAnd);
  if (!a.ok() || a->hits.size() >= q.k) return a;
  return run(QueryMode::kOr);
}

std::unique_ptr<GpuContext> MakeContext() {
  auto c = GpuContext::Create();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

std::string Describe(const Query& q) {
  std::ostringstream os;
  os << (q.tree ? CanonicalKey(*q.tree) : std::string("flat")) << " [";
  for (const std::string& t : q.terms) os << ' ' << t;
  os << " ] " << QueryModeName(q.mode) << " k=" << q.k << (q.count ? " count" : "");
  return os.str();
}

#define SKIP_WITHOUT_GPU() \
  if (!gpu::GpuAvailable()) GTEST_SKIP() << gpu::GpuDescription()

constexpr uint32_t kDocs = 3000, kVocab = 10;

// What a run of random batches covered.
struct Coverage {
  uint64_t queries = 0, trees = 0, counted = 0, count_only = 0, totals = 0, hits = 0;
  uint64_t phrase_hits = 0;  // hits of queries with a phrase
  uint64_t from_lengths = 0;  // counts alone that AnswerFromLengths answered
};

// Random batches of up to 48 queries of every kind, each batch answered by one ExecuteBatchGpu
// per shard and compared with the CPU engine on that shard, and on `whole` (the whole
// collection) with the brute force when ref is given.
void CheckRandomBatches(GpuContext& ctx, const Docs& docs, const TreeReference* ref, const DevShard* whole,
                        const std::vector<const DevShard*>& shards, uint32_t vocab, bool phrases, uint64_t seed,
                        int batches, Coverage* cov) {
  std::mt19937_64 rng(seed);
  RandomTreeGen gen{rng, vocab, phrases};
  const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
  const uint32_t ks[] = {1, 2, 3, 10, 100, 1000};
  for (int b = 0; b < batches; ++b) {
    std::vector<Query> batch;
    const size_t n = 1 + rng() % 48;
    while (batch.size() < n) {
      const QueryMode mode = modes[rng() % 3];
      // Each batch's first query counts alone, so that few batches (SEARCH_TEST_QUICK) cover it too.
      const bool first = batch.empty();
      const bool count = rng() % 3 != 0 || first;
      uint32_t k = count && (rng() % 5 == 0 || first) ? 0 : ks[rng() % 6];
      if (k > 0 && rng() % 4 == 0) k = 1 + static_cast<uint32_t>(rng() % 1000);
      QueryNode tree;
      if (rng() % 6 == 0) {  // a bag of words: MakeQuery's flat query (with a count, the tree path)
        tree.kind = QueryNode::Kind::kBool;
        for (size_t i = 0, m = 1 + rng() % 4; i < m; ++i) {
          QueryNode::Clause c;
          c.node.kind = QueryNode::Kind::kTerm;
          c.node.tokens = {gen.Token()};
          tree.clauses.push_back(std::move(c));
        }
      } else {
        tree = gen.Bool(0);
      }
      tree = Canonicalize(std::move(tree));
      if (!ValidateTree(tree).ok()) continue;  // e.g. a group of must_not clauses only left empty
      Query q = MakeQuery(std::move(tree), mode, k, count);
      if (q.terms.size() > gpu::kGpuMaxTerms) continue;
      batch.push_back(std::move(q));
    }
    {  // and one term's count alone, which list lengths answer: few batches cover that path too
      QueryNode tree;
      tree.kind = QueryNode::Kind::kBool;
      QueryNode::Clause c;
      c.node.kind = QueryNode::Kind::kTerm;
      c.node.tokens = {gen.Token()};
      tree.clauses.push_back(std::move(c));
      batch.push_back(MakeQuery(Canonicalize(std::move(tree)), QueryMode::kAnd, 0, true));
    }
    for (const DevShard* s : shards) {
      std::vector<Inputs> inputs;
      std::vector<GpuQueryInput> in;
      for (const Query& q : batch) inputs.push_back(InputsFor(*s, docs, q.terms));
      for (size_t i = 0; i < batch.size(); ++i)
        in.push_back(GpuQueryInput{inputs[i].gpu, batch[i].mode, batch[i].k, batch[i].tree.get(), batch[i].count});
      std::vector<Result<SearchResult>> got;
      ASSERT_TRUE(gpu::ExecuteBatchGpu(ctx, s->view, in, &got).ok());
      ASSERT_EQ(got.size(), batch.size());
      for (size_t i = 0; i < batch.size(); ++i) {
        const Query& q = batch[i];
        const std::string what = Describe(q) + " on [" + std::to_string(s->begin) + ", " + std::to_string(s->end) + ")";
        ASSERT_TRUE(got[i].ok()) << what << ": " << got[i].status().ToString();
        ASSERT_EQ(got[i]->has_total, q.count) << what;
        if (s == whole && ref != nullptr) {  // the whole collection: the brute force first
          const TreeAnswer bf = ref->Search(q);
          ASSERT_EQ(got[i]->hits, bf.hits) << what << " (brute force)";
          if (q.count) {
            ASSERT_EQ(got[i]->total, bf.total) << what << " (brute force)";
          }
        }
        const Result<SearchResult> want = CpuAnswer(*s, q, inputs[i]);
        ASSERT_TRUE(want.ok()) << what << ": " << want.status().ToString();
        ASSERT_EQ(got[i]->hits, want->hits) << what << " (CPU engine)";
        ASSERT_EQ(got[i]->total, want->total) << what << " (CPU engine)";
        // A count alone that list lengths answer: the same answer from the host views, no blob.
        std::vector<GpuTermInput> host = inputs[i].gpu;
        for (GpuTermInput& t : host) t = GpuTermInput{t.list, nullptr, t.idf, nullptr};
        if (auto h = gpu::AnswerFromLengths(s->view, GpuQueryInput{host, q.mode, q.k, q.tree.get(), q.count})) {
          ASSERT_TRUE(q.count && q.k == 0) << what;
          ASSERT_TRUE(h->ok()) << what << ": " << h->status().ToString();
          ASSERT_EQ((*h)->total, got[i]->total) << what << " (from lengths)";
          ASSERT_TRUE((*h)->has_total && (*h)->hits.empty()) << what;
          ++cov->from_lengths;
        }
        ++cov->queries;
        cov->trees += q.tree != nullptr;
        cov->counted += q.count;
        cov->count_only += q.count && q.k == 0;
        cov->totals += got[i]->total;
        cov->hits += got[i]->hits.size();
        if (q.tree != nullptr && TreeHasPhrase(*q.tree)) cov->phrase_hits += got[i]->hits.size();
      }
    }
  }
}

void ExpectCovered(const Coverage& c) {  // the random queries covered what they are meant to
  EXPECT_GT(c.trees, c.queries / 2);
  EXPECT_GT(c.counted, c.queries / 3);
  EXPECT_GT(c.count_only, 0u);
  EXPECT_GT(c.totals, 0u);
  EXPECT_GT(c.hits, 0u);
}

TEST(GpuTree, RandomTreesAndCountsEqualTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  auto ctx = MakeContext();
  ASSERT_NE(ctx, nullptr);
  const Docs docs = MakeDocs(kDocs, kVocab, 7);
  const TreeReference ref(docs.tokens);
  DevShard whole, tail;
  BuildShard(docs, 0, kDocs, &whole);
  BuildShard(docs, kDocs / 3, kDocs, &tail);
  Coverage cov;
  CheckRandomBatches(*ctx, docs, &ref, &whole, {&whole, &tail}, kVocab, false, 11, Scaled(40), &cov);
  if (HasFatalFailure()) return;
  ExpectCovered(cov);
  EXPECT_GT(cov.from_lengths, 0u);
}

// The same with phrases of 2-5 tokens with repeats among the leaves (positions on the device in
// device_positions.hpp's layout).
TEST(GpuTree, RandomTreesWithPhrasesEqualTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  auto ctx = MakeContext();
  ASSERT_NE(ctx, nullptr);
  const Docs docs = MakeDocs(kDocs, kVocab, 7);
  const TreeReference ref(docs.tokens);
  DevShard whole, tail;
  BuildShard(docs, 0, kDocs, &whole);
  BuildShard(docs, kDocs / 3, kDocs, &tail);
  Coverage cov;
  CheckRandomBatches(*ctx, docs, &ref, &whole, {&whole, &tail}, kVocab, true, 17, Scaled(40), &cov);
  if (HasFatalFailure()) return;
  ExpectCovered(cov);
  EXPECT_GT(cov.phrase_hits, 0u);
}

// Shards of many bitmap chunks (kThreads words of 32 documents each): matches ranked across chunks,
// grids that stride, a shard that starts and ends off a word boundary; the CPU engine is the
// reference (the brute force is too slow here).
TEST(GpuTree, RandomTreesOnShardsOfManyChunks) {
  SKIP_WITHOUT_GPU();
  auto ctx = MakeContext();
  ASSERT_NE(ctx, nullptr);
  constexpr uint32_t kMany = 150001, kVocab2 = 24;
  const Docs docs = MakeDocs(kMany, kVocab2, 5);
  DevShard whole, tail;
  BuildShard(docs, 0, kMany, &whole);
  BuildShard(docs, 20011, kMany - 7, &tail);
  Coverage cov;
  CheckRandomBatches(*ctx, docs, nullptr, &whole, {&whole, &tail}, kVocab2, false, 13, Scaled(12), &cov);
  if (HasFatalFailure()) return;
  ExpectCovered(cov);
  // Phrases there too: leaves of many candidates, compacted across many CTAs.
  Coverage pcov;
  CheckRandomBatches(*ctx, docs, nullptr, &whole, {&whole, &tail}, kVocab2, true, 19, Scaled(8), &pcov);
  if (HasFatalFailure()) return;
  EXPECT_GT(pcov.phrase_hits, 0u);
}

// One required term with should and must_not terms (`+a b`, `+a -b`, `+a b -c`, absent terms
// among them) and a top k take the pruned or-path (engine_plan.hpp RequiredOr: candidates that
// the must list lacks or a must_not list holds are dropped), and the tree path where that path
// cannot run: with theta (the must list's, or with must_not terms the sample's), without it,
// overflowing the candidate buffer, and with the pruned path off; each equal to the CPU engine
// and the brute force, counts included.
TEST(GpuTree, RequiredAndShouldTermsTakeThePrunedOrPath) {
  SKIP_WITHOUT_GPU();
  const Docs docs = MakeDocs(kDocs, kVocab, 7);
  const TreeReference ref(docs.tokens);
  DevShard whole, tail;
  BuildShard(docs, 0, kDocs, &whole);
  BuildShard(docs, kDocs / 3, kDocs, &tail);
  struct Config {
    const char* name;
    gpu::GpuContextOptions o;
  };
  std::vector<Config> configs(4);
  configs[0].name = "default";
  configs[1].name = "theta";
  configs[1].o.or_theta_min_postings = 1;
  configs[2].name = "overflow";
  configs[2].o.or_theta_min_postings = 1;
  configs[2].o.or_candidate_cap = 1;
  configs[3].name = "no pruned path";
  configs[3].o.or_pruned_divisor = 0;
  const uint32_t ks[] = {1, 2, 3, 10, 100, 1000};
  for (const Config& cfg : configs) {
    auto c = GpuContext::Create(cfg.o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::mt19937_64 rng(23);
    RandomTreeGen gen{rng, kVocab, false};
    const gpu::GpuEngineTimes t0 = gpu::EngineTimes();
    for (int b = 0; b < Scaled(12); ++b) {
      std::vector<Query> batch;
      while (batch.size() < 24) {
        QueryNode tree;
        tree.kind = QueryNode::Kind::kBool;
        for (size_t i = 0, m = 2 + rng() % 3; i < m; ++i) {
          QueryNode::Clause cl;
          cl.occur = i == 0 ? Occur::kMust : rng() % 3 == 0 ? Occur::kMustNot : Occur::kShould;
          cl.node.kind = QueryNode::Kind::kTerm;
          cl.node.tokens = {gen.Token()};
          tree.clauses.push_back(std::move(cl));
        }
        tree = Canonicalize(std::move(tree));
        if (!ValidateTree(tree).ok()) continue;
        const uint32_t k = ks[rng() % 6];
        batch.push_back(MakeQuery(std::move(tree), rng() % 2 ? QueryMode::kOr : QueryMode::kAnd, k, rng() % 2 == 0));
      }
      for (const DevShard* sh : {&whole, &tail}) {
        std::vector<Inputs> inputs;
        std::vector<GpuQueryInput> in;
        for (const Query& q : batch) inputs.push_back(InputsFor(*sh, docs, q.terms));
        for (size_t i = 0; i < batch.size(); ++i)
          in.push_back(GpuQueryInput{inputs[i].gpu, batch[i].mode, batch[i].k, batch[i].tree.get(), batch[i].count});
        std::vector<Result<SearchResult>> got;
        ASSERT_TRUE(gpu::ExecuteBatchGpu(**c, sh->view, in, &got).ok());
        for (size_t i = 0; i < batch.size(); ++i) {
          const Query& q = batch[i];
          const std::string what = std::string(cfg.name) + ": " + Describe(q);
          ASSERT_TRUE(got[i].ok()) << what << ": " << got[i].status().ToString();
          if (sh == &whole) {
            const TreeAnswer bf = ref.Search(q);
            ASSERT_EQ(got[i]->hits, bf.hits) << what << " (brute force)";
            if (q.count) {
              ASSERT_EQ(got[i]->total, bf.total) << what << " (brute force)";
            }
          }
          const Result<SearchResult> want = CpuAnswer(*sh, q, inputs[i]);
          ASSERT_TRUE(want.ok()) << what;
          ASSERT_EQ(got[i]->hits, want->hits) << what << " (CPU engine)";
          ASSERT_EQ(got[i]->total, want->total) << what << " (CPU engine)";
        }
      }
    }
    const gpu::GpuEngineTimes t1 = gpu::EngineTimes();  // each path ran where it is meant to
    if (cfg.o.or_theta_min_postings == 1) {
      EXPECT_GT(t1.or_theta, t0.or_theta) << cfg.name;
      EXPECT_GT(t1.or_pruned, t0.or_pruned) << cfg.name;
    }
    if (cfg.o.or_candidate_cap == 1) {
      EXPECT_GT(t1.or_overflow, t0.or_overflow) << cfg.name;  // reran as trees
    }
    if (cfg.o.or_pruned_divisor == 0) {
      EXPECT_GT(t1.tree, t0.tree) << cfg.name;
    }
  }
}

// Runs one query alone on the whole shard.
Result<SearchResult> RunOne(GpuContext& ctx, const DevShard& s, const Docs& docs, const Query& q,
                            const std::vector<std::string>* terms = nullptr) {
  const Inputs in = InputsFor(s, docs, terms != nullptr ? *terms : q.terms);
  std::vector<GpuQueryInput> batch{GpuQueryInput{in.gpu, q.mode, q.k, q.tree.get(), q.count}};
  std::vector<Result<SearchResult>> out;
  SEARCH_RETURN_IF_ERROR(gpu::ExecuteBatchGpu(ctx, s.view, batch, &out));
  return std::move(out[0]);
}

Query TreeQuery(const char* shape, QueryMode mode, uint32_t k, bool count) {
  // shape: clauses "<occ><word>" separated by spaces; occ one of + ~ - # (must should must_not filter).
  QueryNode root;
  root.kind = QueryNode::Kind::kBool;
  std::istringstream is(shape);
  for (std::string c; is >> c;) {
    QueryNode::Clause cl;
    cl.occur = c[0] == '+'   ? Occur::kMust
               : c[0] == '~' ? Occur::kShould
               : c[0] == '-' ? Occur::kMustNot
                             : Occur::kFilter;
    cl.node.kind = QueryNode::Kind::kTerm;
    cl.node.tokens = {c.substr(1)};
    root.clauses.push_back(std::move(cl));
  }
  Query q;
  q.tree = std::make_shared<const QueryNode>(Canonicalize(std::move(root)));
  q.terms = TreeTerms(*q.tree);
  q.mode = mode;
  q.k = k;
  q.count = count;
  return q;
}

// The host side of the positions layout (no GPU needed): docIDs, offsets and positions as the
// list and its positions blob hold them; a blob that disagrees with the list is Corruption.
TEST(GpuTree, DevicePositionsLayout) {
  const std::vector<uint32_t> docs = {3, 7, 200, 201, 999}, tfs = {1, 3, 2, 1, 4};
  const std::vector<uint32_t> pos = {5, 0, 2, 9, 1, 4, 0, 3, 4, 8, 100};
  auto list = EncodeList(docs, tfs, 0, [](uint32_t, uint32_t f) { return static_cast<float>(f); });
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  auto lv = ListView::Parse(*list);
  ASSERT_TRUE(lv.ok()) << lv.status().ToString();
  auto blob = EncodePositions(tfs, pos);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  auto pv = PositionsView::Parse(*blob, lv->count());
  ASSERT_TRUE(pv.ok()) << pv.status().ToString();
  auto layout = gpu::BuildDevicePositions(*lv, *pv);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  std::vector<uint32_t> want = docs;
  for (uint32_t o : {0u, 1u, 4u, 6u, 7u, 11u}) want.push_back(o);
  want.insert(want.end(), pos.begin(), pos.end());
  EXPECT_EQ(*layout, want);
  const gpu::DevicePositionsParts parts = gpu::SplitDevicePositions(layout->data(), lv->count());
  EXPECT_EQ(parts.offsets[0], 0u);
  EXPECT_EQ(parts.positions[parts.offsets[4]], 3u);
  // Positions of other tfs than the list's: Corruption.
  auto other = EncodePositions(std::vector<uint32_t>{1, 3, 2, 2, 3}, pos);
  ASSERT_TRUE(other.ok());
  auto opv = PositionsView::Parse(*other, lv->count());
  ASSERT_TRUE(opv.ok());
  EXPECT_EQ(gpu::BuildDevicePositions(*lv, *opv).status().code(), StatusCode::kCorruption);
  // The phrase tokens of a tree, sorted and distinct.
  QueryNode root;
  root.kind = QueryNode::Kind::kBool;
  QueryNode::Clause c;
  c.node.kind = QueryNode::Kind::kPhrase;
  c.node.tokens = {"b", "a", "b"};
  root.clauses.push_back(c);
  c.node.kind = QueryNode::Kind::kTerm;
  c.node.tokens = {"z"};
  root.clauses.push_back(c);
  EXPECT_EQ(gpu::PhraseTokens(root), (std::vector<std::string>{"a", "b"}));
}

TEST(GpuTree, HandShapes) {
  SKIP_WITHOUT_GPU();
  auto ctx = MakeContext();
  ASSERT_NE(ctx, nullptr);
  const Docs docs = MakeDocs(kDocs, kVocab, 7);
  DevShard s;
  BuildShard(docs, 0, kDocs, &s);
  // must_not clauses alone match nothing.
  auto r = RunOne(*ctx, s, docs, TreeQuery("-w0 -w1", QueryMode::kOr, 10, true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->hits.empty());
  EXPECT_TRUE(r->has_total);
  EXPECT_EQ(r->total, 0u);
  // filter alone: every document of w3 with score 0, in docID order; the count is its df.
  r = RunOne(*ctx, s, docs, TreeQuery("#w3", QueryMode::kAnd, 1000, true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->total, docs.df.at("w3"));
  ASSERT_EQ(r->hits.size(), std::min<size_t>(1000, docs.df.at("w3")));
  for (size_t i = 0; i < r->hits.size(); ++i) {
    EXPECT_EQ(r->hits[i].score, 0.0f);
    if (i > 0) {
      EXPECT_LT(r->hits[i - 1].doc, r->hits[i].doc);
    }
  }
  // +w0 -w1: the count by hand.
  uint64_t want = 0;
  for (const auto& t : docs.tokens) {
    bool w0 = false, w1 = false;
    for (const std::string& w : t) w0 = w0 || w == "w0", w1 = w1 || w == "w1";
    want += w0 && !w1;
  }
  r = RunOne(*ctx, s, docs, TreeQuery("+w0 -w1", QueryMode::kAnd, 0, true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->hits.empty());
  EXPECT_EQ(r->total, want);
  EXPECT_GT(want, 0u);
  // Only absent terms: no match, a total of 0.
  r = RunOne(*ctx, s, docs, TreeQuery("+nosuch0 ~nosuch1", QueryMode::kAndOr, 5, true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->hits.empty());
  EXPECT_TRUE(r->has_total);
  EXPECT_EQ(r->total, 0u);
  // A flat query with a count: the tree path, equal to the flat path's hits.
  Query flat;
  flat.terms = {"w0", "w2"};
  flat.mode = QueryMode::kOr;
  flat.k = 50;
  auto top = RunOne(*ctx, s, docs, flat);
  flat.count = true;
  r = RunOne(*ctx, s, docs, flat);
  ASSERT_TRUE(top.ok() && r.ok());
  EXPECT_EQ(r->hits, top->hits);
  uint64_t both = 0;
  for (const auto& t : docs.tokens) {
    bool a = false, b = false;
    for (const std::string& w : t) a = a || w == "w0", b = b || w == "w2";
    both += a && b;
  }
  EXPECT_EQ(r->total, docs.df.at("w0") + docs.df.at("w2") - both);
  // Counts that list lengths answer (one required term, should clauses aside; one should term).
  r = RunOne(*ctx, s, docs, TreeQuery("+w1 ~w2 ~w5", QueryMode::kAnd, 0, true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->total, docs.df.at("w1"));
  r = RunOne(*ctx, s, docs, TreeQuery("~w4 -nosuch0", QueryMode::kOr, 0, true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->total, docs.df.at("w4"));
  r = RunOne(*ctx, s, docs, TreeQuery("+w1 #nosuch0", QueryMode::kAnd, 0, true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->total, 0u);
}

TEST(GpuTree, RefusesWhatItDoesNotRun) {
  SKIP_WITHOUT_GPU();
  auto ctx = MakeContext();
  ASSERT_NE(ctx, nullptr);
  const Docs docs = MakeDocs(500, kVocab, 3);
  DevShard s;
  BuildShard(docs, 0, 500, &s);
  // A phrase whose tokens come without positions: InvalidArgument, as on the CPU engine.
  QueryNode root;
  root.kind = QueryNode::Kind::kBool;
  QueryNode::Clause c;
  c.occur = Occur::kMust;
  c.node.kind = QueryNode::Kind::kPhrase;
  c.node.tokens = {"w0", "w1"};
  root.clauses.push_back(c);
  Query q;
  q.tree = std::make_shared<const QueryNode>(root);
  q.terms = TreeTerms(root);
  q.mode = QueryMode::kAnd;
  q.k = 10;
  {
    Inputs in = InputsFor(s, docs, q.terms);
    in.gpu[1].d_positions = nullptr;
    std::vector<GpuQueryInput> one{GpuQueryInput{in.gpu, q.mode, q.k, q.tree.get(), q.count}};
    std::vector<Result<SearchResult>> out;
    ASSERT_TRUE(gpu::ExecuteBatchGpu(*ctx, s.view, one, &out).ok());
    ASSERT_FALSE(out[0].ok());
    EXPECT_EQ(out[0].status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(gpu::IsGpuUnimplemented(out[0].status())) << out[0].status().ToString();
  }
  // With positions it runs; more present terms and phrases than the program's slots:
  // GpuUnimplemented (the caller runs it on the CPU).
  auto r = RunOne(*ctx, s, docs, q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  QueryNode wide;
  wide.kind = QueryNode::Kind::kBool;
  for (uint32_t a = 0; a < kVocab && wide.clauses.size() <= 32; ++a)  // 33 phrases, no term leaf
    for (uint32_t b = 0; b < kVocab && wide.clauses.size() <= 32; ++b) {
      if (a == b) continue;
      c.occur = Occur::kShould;
      c.node.tokens = {Word(a), Word(b)};
      wide.clauses.push_back(c);
    }
  Query wq;
  wq.tree = std::make_shared<const QueryNode>(Canonicalize(std::move(wide)));
  wq.terms = TreeTerms(*wq.tree);
  wq.mode = QueryMode::kOr;
  wq.k = 10;
  r = RunOne(*ctx, s, docs, wq);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(gpu::IsGpuUnimplemented(r.status())) << r.status().ToString();
  // Term inputs that are not the tree's terms.
  q = TreeQuery("+w0 ~w1", QueryMode::kAnd, 10, true);
  const std::vector<std::string> fewer = {"w0"};
  r = RunOne(*ctx, s, docs, q, &fewer);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(gpu::IsGpuUnimplemented(r.status()));
  // k 0 needs a count; k past kMaxK is refused.
  q = TreeQuery("+w0", QueryMode::kAnd, 0, false);
  r = RunOne(*ctx, s, docs, q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  q = TreeQuery("+w0", QueryMode::kAnd, kMaxK + 1, true);
  r = RunOne(*ctx, s, docs, q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace search::testing
