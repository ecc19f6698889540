// LocalIndex end to end: text documents analyzed, written with ShardWriter into a 1-shard and a
// 3-shard index directory (manifest.json via Manifest::Write), opened with LocalIndex::Open and
// searched with text queries: both answer exactly the same (documents, order, bit-identical
// scores), equal to a plain float reference, and Resolve gives back the external ids.
#include "cpu_exec/local_index.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codec/block_codec.hpp"
#include "core/bm25.hpp"
#include "index_store/manifest.hpp"
#include "index_store/shard_store.hpp"
#include "../temp_dir.hpp"

namespace search {
namespace {

using ::search::testing::TempDir;

Query BagOfWords(std::vector<std::string> terms, QueryMode mode, uint32_t k) {
  Query q;
  q.terms = std::move(terms);
  q.mode = mode;
  q.k = k;
  return q;
}

struct TextCorpus {
  std::vector<std::string> texts;
  std::vector<std::string> ids;
  std::vector<uint32_t> lengths;
  std::map<std::string, std::vector<std::pair<uint32_t, uint32_t>>> postings;  // term -> (doc, tf)
  uint64_t total_tokens = 0;
};

std::string Word(uint32_t r) { return "w" + std::to_string(r); }

TextCorpus MakeTextCorpus(uint32_t num_docs, uint32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> cdf(vocab);
  double acc = 0;
  for (uint32_t i = 0; i < vocab; ++i) cdf[i] = acc += 1.0 / (i + 1.0);
  std::uniform_real_distribution<double> u(0, 1);
  const char* seps[] = {" ", ", ", "; ", "\n", " -- "};
  TextCorpus c;
  Analyzer analyzer;
  for (uint32_t d = 0; d < num_docs; ++d) {
    const uint32_t len = d % 97 == 0 ? 0 : static_cast<uint32_t>(rng() % 60);
    std::string text;
    for (uint32_t i = 0; i < len; ++i) {
      std::string w = Word(static_cast<uint32_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng) * acc) - cdf.begin()));
      if (rng() % 7 == 0) w[0] = 'W';  // case folds away
      text += w;
      text += seps[rng() % 5];
    }
    c.texts.push_back(text);
    c.ids.push_back("ext-" + std::to_string(d * 7 + 3));
    std::map<std::string, uint32_t> tf;
    const std::vector<std::string> terms = analyzer.Analyze(text);
    for (const std::string& t : terms) ++tf[t];
    for (const auto& [t, f] : tf) c.postings[t].push_back({d, f});
    c.lengths.push_back(static_cast<uint32_t>(terms.size()));
    c.total_tokens += terms.size();
  }
  return c;
}

// Writes `c` as an index of `num_shards` shards at `dir`.
void WriteIndex(const TextCorpus& c, uint32_t num_shards, const std::string& dir) {
  const auto n = static_cast<uint32_t>(c.texts.size());
  Manifest m;
  m.format_version = kIndexFormatVersion;
  m.stats.num_docs = n;
  m.stats.total_tokens = c.total_tokens;
  m.created_by = "local_index_test";
  const double avgdl = m.stats.avgdl();
  for (uint32_t s = 0; s < num_shards; ++s) {
    ShardEntry e;
    e.id = s;
    e.path = "shard-" + std::to_string(s);
    ShardRange(n, num_shards, s, &e.doc_begin, &e.doc_end);
    ShardMeta meta;
    meta.shard_id = s;
    meta.num_shards = num_shards;
    meta.doc_begin = e.doc_begin;
    meta.doc_end = e.doc_end;
    meta.stats = m.stats;
    auto w = ShardWriter::Create(dir + "/" + e.path, meta);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (const auto& [term, plist] : c.postings) {  // std::map: ascending bytewise
      std::vector<uint32_t> docs, tfs;
      for (const auto& [d, f] : plist)
        if (d >= e.doc_begin && d < e.doc_end) {
          docs.push_back(d);
          tfs.push_back(f);
        }
      if (docs.empty()) continue;
      const float idf = Bm25Idf(n, plist.size());
      auto blob = EncodeList(docs, tfs, e.doc_begin, [&](uint32_t d, uint32_t f) {
        return Bm25TermScore(idf, f, Bm25Norm(c.lengths[d], avgdl, meta.bm25), meta.bm25.k1);
      });
      ASSERT_TRUE(blob.ok());
      TermInfo info;
      info.df = static_cast<uint32_t>(plist.size());
      info.count = static_cast<uint32_t>(docs.size());
      for (uint32_t f : tfs) info.cf += f;
      info.max_score = reinterpret_cast<const ListHeader*>(blob->data())->max_score;
      info.list_bytes = static_cast<uint32_t>(blob->size());
      ASSERT_TRUE((*w)->AddTerm(term, info, *blob).ok());
    }
    for (uint32_t d = e.doc_begin; d < e.doc_end; ++d) ASSERT_TRUE((*w)->AddDoc(d, c.ids[d], c.lengths[d]).ok());
    ASSERT_TRUE((*w)->Finish().ok());
    auto sum = ComputeShardChecksum(dir + "/" + e.path);
    ASSERT_TRUE(sum.ok());
    e.checksum = *sum;
    m.shards.push_back(e);
  }
  ASSERT_TRUE(m.Write(dir).ok());
}

// The float twin over the raw corpus: canonical terms, contributions summed in that order.
std::vector<ScoredDoc> Reference(const TextCorpus& c, const std::vector<std::string>& terms, QueryMode mode,
                                 uint32_t k) {
  const auto n = static_cast<uint32_t>(c.texts.size());
  const double avgdl = static_cast<double>(c.total_tokens) / n;
  auto run = [&](bool conjunctive) {
    std::vector<float> score(n, 0.0f);
    std::vector<uint32_t> matched(n, 0);
    for (const std::string& t : terms) {
      auto it = c.postings.find(t);
      if (it == c.postings.end()) continue;
      const float idf = Bm25Idf(n, it->second.size());
      for (const auto& [d, f] : it->second) {
        score[d] += Bm25TermScore(idf, f, Bm25Norm(c.lengths[d], avgdl));
        ++matched[d];
      }
    }
    std::vector<ScoredDoc> all;
    for (uint32_t d = 0; d < n; ++d)
      if (matched[d] > 0 && (!conjunctive || matched[d] == terms.size())) all.push_back({d, score[d]});
    std::sort(all.begin(), all.end(), RanksBefore);
    if (all.size() > k) all.resize(k);
    return all;
  };
  if (mode == QueryMode::kOr) return run(false);
  std::vector<ScoredDoc> hits = run(true);
  if (mode == QueryMode::kAndOr && hits.size() < k) return run(false);
  return hits;
}

class LocalIndexTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    corpus_ = new TextCorpus(MakeTextCorpus(4000, 600, 17));
    dir1_ = new TempDir();
    dir3_ = new TempDir();
    WriteIndex(*corpus_, 1, dir1_->path());
    WriteIndex(*corpus_, 3, dir3_->path());
  }
  static void TearDownTestSuite() {
    delete dir1_;
    delete dir3_;
    delete corpus_;
  }
  static TextCorpus* corpus_;
  static TempDir* dir1_;
  static TempDir* dir3_;
};
TextCorpus* LocalIndexTest::corpus_ = nullptr;
TempDir* LocalIndexTest::dir1_ = nullptr;
TempDir* LocalIndexTest::dir3_ = nullptr;

TEST_F(LocalIndexTest, ThreeShardsAnswerExactlyWhatOneShardAnswers) {
  ASSERT_FALSE(HasFatalFailure());
  auto one = LocalIndex::Open(dir1_->path());
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto three = LocalIndex::Open(dir3_->path());
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ((*one)->num_shards(), 1u);
  EXPECT_EQ((*three)->num_shards(), 3u);
  std::mt19937_64 rng(5);
  for (int qi = 0; qi < 60; ++qi) {
    // Text queries: popular and rare words, an unknown word, repeats, case and punctuation.
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < len; ++i) {
      const uint32_t r = static_cast<uint32_t>(rng() % 10);
      std::string w = r == 0 ? "zzunknown" : Word(r < 5 ? static_cast<uint32_t>(rng() % 20) : static_cast<uint32_t>(rng() % 600));
      if (rng() % 3 == 0) w[0] = 'W';
      text += w + (rng() % 2 ? " " : "!? ");
      if (rng() % 6 == 0) text += w + " ";
    }
    const std::vector<std::string> terms = (*one)->analyzer().AnalyzeQuery(text);
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
      for (uint32_t k : {1u, 10u, 100u, 1000u}) {
        auto a = (*one)->Search(text, mode, k);
        auto b = (*three)->Search(text, mode, k);
        ASSERT_TRUE(a.ok()) << a.status().ToString();
        ASSERT_TRUE(b.ok()) << b.status().ToString();
        const std::string what = "'" + text + "' " + std::string(QueryModeName(mode)) + " k=" + std::to_string(k);
        EXPECT_EQ(a->hits, b->hits) << what;
        EXPECT_EQ(a->hits, Reference(*corpus_, terms, mode, k)) << what;
        if (HasFailure()) return;
      }
    }
    auto hits = (*three)->Search(text, QueryMode::kOr, 20);
    ASSERT_TRUE(hits.ok());
    auto resolved = (*three)->Resolve(hits->hits);
    ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
    ASSERT_EQ(resolved->size(), hits->hits.size());
    for (size_t i = 0; i < resolved->size(); ++i) {
      EXPECT_EQ((*resolved)[i].doc, hits->hits[i].doc);
      EXPECT_EQ((*resolved)[i].score, hits->hits[i].score);
      EXPECT_EQ((*resolved)[i].id, corpus_->ids[hits->hits[i].doc]);
    }
  }
}

TEST_F(LocalIndexTest, SearchStatsAndErrors) {
  ASSERT_FALSE(HasFatalFailure());
  auto three = LocalIndex::Open(dir3_->path());
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  auto r = (*three)->Search("w1 w2", QueryMode::kOr, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.lists, 6u);  // two terms in each of three shards
  EXPECT_GT(r->stats.blocks_decoded, 0u);
  EXPECT_GT(r->stats.bytes_touched, 0u);
  for (uint32_t bad : {0u, kMaxK + 1}) {
    auto e = (*three)->Search("w1", QueryMode::kOr, bad);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    CpuExecutor exec(&(*three)->shard(0));
    auto e2 = exec.Search(BagOfWords({"w1"}, QueryMode::kOr, bad));
    ASSERT_FALSE(e2.ok());
    EXPECT_EQ(e2.status().code(), StatusCode::kInvalidArgument);
  }
  auto empty = (*three)->Search(" ,;; ", QueryMode::kAnd, 10);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->hits.empty());
  auto unknown_and = (*three)->Search("w1 zzunknown", QueryMode::kAnd, 10);
  ASSERT_TRUE(unknown_and.ok());
  EXPECT_TRUE(unknown_and->hits.empty());
  auto bad_doc = (*three)->Resolve({ScoredDoc{static_cast<uint32_t>(corpus_->texts.size()), 1.0f}});
  EXPECT_FALSE(bad_doc.ok());
}

// Terms a caller looked up already (the node's scheduler does, for its cost model) give the same
// answer as the executor's own lookups; a wrong count or an impossible df is an error, not a guess.
TEST_F(LocalIndexTest, CpuExecutorTakesPreparedTerms) {
  ASSERT_FALSE(HasFatalFailure());
  auto three = LocalIndex::Open(dir3_->path());
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  const ShardReader& shard = (*three)->shard(1);
  CpuExecutor exec(&shard);
  std::mt19937_64 rng(21);
  const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
  int with_absent = 0, compared = 0;
  for (int i = 0; i < 300; ++i) {
    std::vector<std::string> terms;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int t = 0; t < n; ++t) terms.push_back(Word(static_cast<uint32_t>(rng() % (t == 0 ? 20 : 700))));
    if (i % 5 == 0) terms.push_back("zzunknown");
    std::sort(terms.begin(), terms.end());
    terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
    const Query q = BagOfWords(terms, modes[i % 3], 1 + static_cast<uint32_t>(rng() % 40));
    std::vector<PreparedTerm> prepared(terms.size());
    for (size_t t = 0; t < terms.size(); ++t) {
      auto info = shard.GetTermInfo(terms[t]);
      ASSERT_TRUE(info.ok());
      if (!info->has_value()) {
        ++with_absent;
        continue;
      }
      prepared[t].present = true;
      prepared[t].df = (*info)->df;
      auto list = shard.GetList(terms[t]);
      if (list.ok()) prepared[t].list = std::move(list).value();
      else ASSERT_EQ(list.status().code(), StatusCode::kNotFound);
    }
    auto own = exec.Search(q);
    auto given = exec.Search(q, &prepared);
    ASSERT_TRUE(own.ok() && given.ok()) << i;
    EXPECT_EQ(given->hits, own->hits) << "query " << i;
    EXPECT_EQ(given->stats.lists, own->stats.lists) << "query " << i;
    EXPECT_EQ(given->stats.blocks_decoded, own->stats.blocks_decoded) << "query " << i;
    ++compared;
  }
  EXPECT_EQ(compared, 300);
  EXPECT_GT(with_absent, 0);

  const Query q = BagOfWords({Word(1), Word(2)}, QueryMode::kOr, 10);
  std::vector<PreparedTerm> one(1);
  auto short_list = exec.Search(q, &one);
  ASSERT_FALSE(short_list.ok());
  EXPECT_EQ(short_list.status().code(), StatusCode::kInvalidArgument);
  std::vector<PreparedTerm> bad(2);
  for (size_t t = 0; t < 2; ++t) {
    auto info = shard.GetTermInfo(q.terms[t]);
    ASSERT_TRUE(info.ok() && info->has_value());
    bad[t].present = true;
    bad[t].df = (*info)->df;
    bad[t].list = shard.GetList(q.terms[t]).value();
  }
  bad[1].df = static_cast<uint32_t>(shard.meta().stats.num_docs) + 1;
  auto corrupt = exec.Search(q, &bad);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().code(), StatusCode::kCorruption);
}

TEST_F(LocalIndexTest, ConcurrentSearchesAgreeWithSequentialOnes) {
  ASSERT_FALSE(HasFatalFailure());
  auto index = LocalIndex::Open(dir3_->path());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  std::vector<std::string> texts;
  std::mt19937_64 rng(9);
  for (int i = 0; i < 200; ++i)
    texts.push_back(Word(static_cast<uint32_t>(rng() % 30)) + " " + Word(static_cast<uint32_t>(rng() % 600)) +
                    (i % 3 == 0 ? " zzunknown" : ""));
  const QueryMode modes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};
  std::vector<std::vector<ScoredDoc>> want;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto r = (*index)->Search(texts[i], modes[i % 3], 1 + static_cast<uint32_t>(i % 50));
    ASSERT_TRUE(r.ok());
    want.push_back(r->hits);
  }
  auto fresh = LocalIndex::Open(dir3_->path());  // cold term memory, filled concurrently
  ASSERT_TRUE(fresh.ok());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (size_t j = 0; j < texts.size(); ++j) {
          const size_t i = (j * 7 + static_cast<size_t>(t) * 13) % texts.size();
          auto r = (*fresh)->Search(texts[i], modes[i % 3], 1 + static_cast<uint32_t>(i % 50));
          if (!r.ok() || r->hits != want[i]) ++mismatches;
        }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(LocalIndexTest, OpenRejectsAManifestThatDisagreesWithItsShards) {
  ASSERT_FALSE(HasFatalFailure());
  auto m = Manifest::Read(dir3_->path());
  ASSERT_TRUE(m.ok());
  TempDir other;
  for (const ShardEntry& e : m->shards)
    std::filesystem::copy(dir3_->path() + "/" + e.path, other.path() + "/" + e.path,
                          std::filesystem::copy_options::recursive);
  Manifest bad = *m;
  bad.stats.total_tokens += 1;
  ASSERT_TRUE(bad.Write(other.path()).ok());
  auto r = LocalIndex::Open(other.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  auto missing = LocalIndex::Open(other.path() + "/nope");
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace search
