// The synthetic GOV2-like model: exact uniform subsets, the df law and its calibration, the
// models' lists, and `generate` end to end: deterministic per seed whatever the thread count, and
// the index decodes to exactly what the model produced (docIDs, tfs, lengths, ids).
#include "scale/synthetic_corpus.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "index_store/shard_store.hpp"
#include "scale/generate_index.hpp"
#include "scale/index_stats.hpp"
#include "scale_fixture.hpp"

namespace search {
namespace {

using scaletest::TempDir;

TEST(SampleSortedSubsetTest, ExactCountSortedDistinctInRange) {
  SplitMixRng rng(42);
  const std::vector<std::pair<uint32_t, uint32_t>> cases = {
      {0, 10}, {1, 1}, {5, 5}, {3, 1000}, {32, 33}, {33, 1000}, {100, 1000}, {250, 1000}, {499, 1000},
      {500, 1000}, {501, 1000}, {999, 1000}, {1000, 1000}, {40, 1000000}, {5000, 1000000}, {300000, 1000000},
      {700000, 1000000}, {123457, 123459}};
  for (const auto& [k, n] : cases) {
    for (int rep = 0; rep < 5; ++rep) {
      std::vector<uint32_t> out{7};  // appends after what is there
      SampleSortedSubset(rng, k, n, &out);
      ASSERT_EQ(out.size(), k + 1u) << k << " of " << n;
      EXPECT_EQ(out[0], 7u);
      std::vector<uint32_t> s(out.begin() + 1, out.end());
      EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
      EXPECT_EQ(std::adjacent_find(s.begin(), s.end()), s.end()) << "duplicate in " << k << " of " << n;
      if (!s.empty()) {
        EXPECT_LT(s.back(), n);
      }
    }
  }
}

TEST(SampleSortedSubsetTest, LooksUniform) {
  // Every value of [0, 64) is picked with probability k/n: counts over many draws stay within
  // 5 standard deviations of the mean, for a dense, a sparse and a complemented rate.
  for (uint32_t k : {8u, 20u, 40u, 60u}) {
    SplitMixRng rng(k);
    const uint32_t n = 64, reps = 20000;
    std::vector<uint32_t> hits(n, 0), out;
    for (uint32_t r = 0; r < reps; ++r) {
      out.clear();
      SampleSortedSubset(rng, k, n, &out);
      for (uint32_t v : out) ++hits[v];
    }
    const double p = static_cast<double>(k) / n, mean = reps * p, sd = std::sqrt(reps * p * (1 - p));
    for (uint32_t v = 0; v < n; ++v) EXPECT_NEAR(hits[v], mean, 5 * sd) << "value " << v << " k " << k;
  }
  // Gaps of a sparse sample are geometric: mean gap n/k.
  SplitMixRng rng(9);
  std::vector<uint32_t> out;
  SampleSortedSubset(rng, 10000, 10000000, &out);
  const double mean_gap = static_cast<double>(out.back() - out.front()) / (out.size() - 1);
  EXPECT_NEAR(mean_gap, 1000.0, 40.0);
}

TEST(SyntheticCorpusTest, DfLawAndGov2Calibration) {
  auto c = SyntheticCorpus::Create({.docs = 100000});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->PlannedDf(1), 50000u);  // the longest list: N/2
  for (uint32_t r = 1; r < c->num_terms(); ++r) ASSERT_GE(c->PlannedDf(r), c->PlannedDf(r + 1));
  EXPECT_GE(c->PlannedDf(c->num_terms()), 1u);
  const uint64_t total = c->PlannedPostings();
  EXPECT_GT(total, 200u * 100000);  // ~ 218 N, less the truncated tail
  EXPECT_LT(total, 220u * 100000);
  // At GOV2's size: 5.5e9 postings over ~18.7M terms, the longest list N/2.
  auto gov2 = SyntheticCorpus::Create({.docs = 25205179});
  ASSERT_TRUE(gov2.ok());
  EXPECT_EQ(gov2->PlannedDf(1), 12602590u);
  EXPECT_NEAR(static_cast<double>(gov2->PlannedPostings()), 5.48e9, 0.05e9);
  EXPECT_NEAR(static_cast<double>(gov2->num_terms()), 18.7e6, 0.1e6);
  EXPECT_FALSE(SyntheticCorpus::Create({.docs = 0}).ok());
}

TEST(SyntheticCorpusTest, RankOrderIsByteOrderOfTheNames) {
  auto c = SyntheticCorpus::Create({.docs = 20000});
  ASSERT_TRUE(c.ok());
  std::vector<bool> seen(c->num_terms() + 1, false);
  std::string prev;
  for (uint32_t i = 0; i < c->num_terms(); ++i) {
    const uint32_t r = c->RankAt(i);
    ASSERT_GE(r, 1u);
    ASSERT_LE(r, c->num_terms());
    ASSERT_FALSE(seen[r]);
    seen[r] = true;
    const std::string name = SyntheticCorpus::TermName(r);
    ASSERT_LT(prev, name);
    prev = name;
  }
}

TEST(SyntheticCorpusTest, EveryModelMakesValidDeterministicLists) {
  for (auto model : {SyntheticModel::kZipf, SyntheticModel::kUniform, SyntheticModel::kClustered}) {
    auto c = SyntheticCorpus::Create({.docs = 30001, .model = model, .seed = 5});
    auto other = SyntheticCorpus::Create({.docs = 30001, .model = model, .seed = 6});
    ASSERT_TRUE(c.ok() && other.ok());
    SyntheticScratch scratch;
    std::vector<uint32_t> docs, tfs, docs2, tfs2;
    size_t differs = 0;
    for (uint32_t r : {1u, 2u, 10u, 100u, 1000u, 5000u, c->num_terms() / 2, c->num_terms()}) {
      c->Generate(r, &docs, &tfs, &scratch);
      ASSERT_EQ(docs.size(), c->PlannedDf(r)) << SyntheticModelName(model) << " rank " << r;
      ASSERT_EQ(tfs.size(), docs.size());
      EXPECT_TRUE(std::adjacent_find(docs.begin(), docs.end(), std::greater_equal<>()) == docs.end());
      EXPECT_LT(docs.back(), 30001u);
      for (uint32_t tf : tfs) ASSERT_TRUE(tf >= 1 && tf <= SyntheticCorpus::kMaxTf);
      c->Generate(r, &docs2, &tfs2, &scratch);
      EXPECT_EQ(docs, docs2);
      EXPECT_EQ(tfs, tfs2);
      other->Generate(r, &docs2, &tfs2, &scratch);
      differs += docs != docs2 || tfs != tfs2;
    }
    EXPECT_GE(differs, 6u);
  }
}

TEST(SyntheticCorpusTest, ZipfModelSpreadsDocumentSizesAndTfsHaveATail) {
  auto c = SyntheticCorpus::Create({.docs = 20000, .model = SyntheticModel::kZipf});
  ASSERT_TRUE(c.ok());
  std::vector<uint64_t> len(20000, 0);
  uint64_t tf1 = 0, tf_big = 0, total = 0;
  SyntheticScratch scratch;
  std::vector<uint32_t> docs, tfs;
  for (uint32_t r = 1; r <= c->num_terms(); ++r) {
    c->Generate(r, &docs, &tfs, &scratch);
    for (size_t i = 0; i < docs.size(); ++i) {
      len[docs[i]] += tfs[i];
      tf1 += tfs[i] == 1;
      tf_big += tfs[i] >= 20;
      ++total;
    }
  }
  double by_class[SyntheticCorpus::kClasses] = {};
  for (uint32_t d = 0; d < len.size(); ++d) by_class[d % SyntheticCorpus::kClasses] += len[d];
  EXPECT_GT(by_class[7], 10 * by_class[0]);  // the heaviest class holds far longer documents
  EXPECT_GT(tf1, total / 3);                 // mostly small tfs...
  EXPECT_GT(tf_big, total / 2000);           // ...with a heavy tail
}

// Reads every list of the index back and compares it with the model's, per shard.
void ExpectIndexIsTheModel(const std::string& dir, const SyntheticCorpus& c, uint32_t shards) {
  auto m = Manifest::Read(dir);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->shards.size(), shards);
  EXPECT_FALSE(m->positions);  // synthetic postings have no text, so no positions
  std::vector<uint64_t> lengths(c.num_docs(), 0);
  std::vector<bool> seen(c.num_terms() + 1, false);
  SyntheticScratch scratch;
  std::vector<uint32_t> want_docs, want_tfs, got(kBlockSize), got_tf(kBlockSize);
  for (const auto& e : m->shards) {
    auto shard = ShardReader::Open(dir + "/" + e.path);
    ASSERT_TRUE(shard.ok());
    Status s = (*shard)->ForEachTerm([&](std::string_view term, const TermInfo& info) {
      const uint32_t rank = static_cast<uint32_t>(std::stoul(std::string(term.substr(1))));
      EXPECT_EQ(SyntheticCorpus::TermName(rank), term);
      EXPECT_EQ(info.df, c.PlannedDf(rank)) << term;
      c.Generate(rank, &want_docs, &want_tfs, &scratch);
      auto list = (*shard)->GetList(term);
      EXPECT_TRUE(list.ok());
      if (!list.ok()) return false;
      const ListView& v = (*list)->view;
      size_t at = std::lower_bound(want_docs.begin(), want_docs.end(), e.doc_begin) - want_docs.begin();
      const size_t end = std::lower_bound(want_docs.begin(), want_docs.end(), e.doc_end) - want_docs.begin();
      EXPECT_EQ(v.count(), end - at) << term;
      for (uint32_t b = 0; b < v.num_blocks(); ++b) {
        EXPECT_TRUE(v.DecodeDocs(b, got.data()).ok());
        v.DecodeFreqs(b, got_tf.data());
        for (uint32_t i = 0; i < v.block(b).count; ++i, ++at) {
          if (at >= end || got[i] != want_docs[at] || got_tf[i] != want_tfs[at]) {
            ADD_FAILURE() << term << " posting " << at << " differs";
            return false;
          }
          lengths[got[i]] += got_tf[i];
        }
      }
      seen[rank] = true;
      return true;
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (uint32_t d = e.doc_begin; d < e.doc_end; ++d) {
      ASSERT_EQ((*shard)->DocLength(d), lengths[d]) << "doc " << d;
      auto id = (*shard)->GetExternalId(d);
      ASSERT_TRUE(id.ok());
      EXPECT_EQ(*id, std::string("doc").append(std::to_string(d)));
    }
  }
  EXPECT_EQ(std::count(seen.begin() + 1, seen.end(), true), c.num_terms());  // every term, in some shard
  const uint64_t total = std::accumulate(lengths.begin(), lengths.end(), uint64_t{0});
  EXPECT_EQ(m->stats.total_tokens, total);
}

TEST(GenerateIndexTest, DeterministicWhateverTheThreadsAndEqualToTheModel) {
  TempDir tmp;
  GenerateOptions o;
  o.corpus = {.docs = 6000, .model = SyntheticModel::kZipf, .seed = 11};
  o.shards = 3;
  o.output = tmp / "a";
  o.threads = 1;
  auto a = GenerateIndex(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  o.output = tmp / "b";
  o.threads = 4;
  auto b = GenerateIndex(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  o.output = tmp / "c";
  o.corpus.seed = 12;
  auto c = GenerateIndex(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(a->postings, b->postings);
  EXPECT_EQ(a->total_tokens, b->total_tokens);
  auto sa = ComputeIndexStats(tmp / "a", true);
  auto sb = ComputeIndexStats(tmp / "b", true);
  auto sc = ComputeIndexStats(tmp / "c", true);
  ASSERT_TRUE(sa.ok() && sb.ok() && sc.ok());
  EXPECT_EQ(sa->content_crc32c, sb->content_crc32c);
  EXPECT_NE(sa->content_crc32c, sc->content_crc32c);
  EXPECT_EQ(sa->postings, a->postings);
  EXPECT_GT(sa->BitsPerDocId(), 1.0);
  EXPECT_GT(sa->BitsPerFreq(), 0.5);
  EXPECT_TRUE(VerifyIndex(tmp / "a").ok());
  auto corpus = SyntheticCorpus::Create({.docs = 6000, .model = SyntheticModel::kZipf, .seed = 11});
  ASSERT_TRUE(corpus.ok());
  EXPECT_EQ(a->postings, corpus->PlannedPostings());
  ExpectIndexIsTheModel(tmp / "a", *corpus, 3);
  // The terms answer queries: t1 is in half of the documents.
  auto index = LocalIndex::Open(tmp / "a");
  ASSERT_TRUE(index.ok());
  auto r = (*index)->Search("t1 t2", QueryMode::kAnd, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->hits.size(), 10u);
}

TEST(GenerateIndexTest, OtherModelsAndRefusals) {
  TempDir tmp;
  for (auto model : {SyntheticModel::kUniform, SyntheticModel::kClustered}) {
    GenerateOptions o;
    o.corpus = {.docs = 3000, .model = model, .seed = 3};
    o.output = tmp / std::string(SyntheticModelName(model));
    o.shards = 2;
    o.threads = 2;
    auto s = GenerateIndex(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto corpus = SyntheticCorpus::Create(o.corpus);
    ASSERT_TRUE(corpus.ok());
    ExpectIndexIsTheModel(o.output, *corpus, 2);
  }
  GenerateOptions o;
  o.corpus = {.docs = 3000};
  o.output = tmp / "uniform";  // exists
  EXPECT_EQ(GenerateIndex(o).status().code(), StatusCode::kAlreadyExists);
  o.output = tmp / "x";
  o.shards = 4000;
  EXPECT_FALSE(GenerateIndex(o).ok());
  EXPECT_TRUE(scaletest::NothingNamed(tmp.path(), "x"));
}

}  // namespace
}  // namespace search
