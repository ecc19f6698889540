// PostingsIngest: an index built from posting lists equals the one the JSON-lines builder makes
// from the same text (same lists byte for byte, same documents, same answers), serially and in
// parallel; bad input is refused with the ingest left usable (serial) or stopped (parallel).
#include "index_store/postings_ingest.hpp"

#include <gtest/gtest.h>

#include <atomic>

#include "index_store/shard_store.hpp"
#include "indexer/build_dir.hpp"
#include "indexer/index_builder.hpp"
#include "scale/index_stats.hpp"
#include "scale_fixture.hpp"

namespace search {
namespace {

using scaletest::TempDir;

// Builds DIR from `inv` through PostingsIngest (serially or with AddListsParallel), published
// with BuildDir like the tools do.
Status IngestInverted(const scaletest::Inverted& inv, const std::vector<scaletest::TextDoc>& docs,
                      const std::string& out, uint32_t shards, bool parallel, size_t window = 0) {
  std::vector<std::string> notes;
  SEARCH_ASSIGN_OR_RETURN(auto dir, BuildDir::Create(out, false, &notes));
  IngestOptions o;
  o.shards = shards;
  o.threads = 3;
  o.window = window;
  SEARCH_ASSIGN_OR_RETURN(auto ingest, PostingsIngest::Create(dir->path(), inv.lengths, o));
  std::vector<const std::pair<const std::string, std::map<uint32_t, uint32_t>>*> lists;
  for (const auto& e : inv.postings) lists.push_back(&e);
  auto fill = [&](size_t i, TermPostings* tp) {
    tp->term = lists[i]->first;
    for (const auto& [d, tf] : lists[i]->second) {
      tp->docs.push_back(d);
      tp->tfs.push_back(tf);
    }
  };
  if (parallel) {
    SEARCH_RETURN_IF_ERROR(ingest->AddListsParallel(lists.size(), [&](uint64_t i, TermPostings* tp) {
      fill(i, tp);
      return Status::Ok();
    }));
  } else {
    TermPostings tp;
    for (size_t i = 0; i < lists.size(); ++i) {
      tp = TermPostings();
      fill(i, &tp);
      SEARCH_RETURN_IF_ERROR(ingest->AddList(tp.term, tp.docs, tp.tfs));
    }
  }
  SEARCH_ASSIGN_OR_RETURN(auto summary, ingest->Finish([&](uint32_t d, std::string* id) {
    *id = docs[d].id;
    return Status::Ok();
  }));
  EXPECT_EQ(summary.terms, inv.postings.size());
  return dir->Publish();
}

// Every shard holds the same terms, TermInfos, list bytes, documents and lengths.
void ExpectSameShards(const std::string& a_dir, const std::string& b_dir) {
  auto ma = Manifest::Read(a_dir);
  auto mb = Manifest::Read(b_dir);
  ASSERT_TRUE(ma.ok() && mb.ok());
  EXPECT_EQ(ma->stats.num_docs, mb->stats.num_docs);
  EXPECT_EQ(ma->stats.total_tokens, mb->stats.total_tokens);
  EXPECT_FALSE(mb->positions);
  ASSERT_EQ(ma->shards.size(), mb->shards.size());
  for (size_t s = 0; s < ma->shards.size(); ++s) {
    EXPECT_EQ(ma->shards[s].num_terms, mb->shards[s].num_terms);
    EXPECT_EQ(ma->shards[s].num_postings, mb->shards[s].num_postings);
    auto ra = ShardReader::Open(a_dir + "/" + ma->shards[s].path);
    auto rb = ShardReader::Open(b_dir + "/" + mb->shards[s].path);
    ASSERT_TRUE(ra.ok() && rb.ok());
    std::vector<std::pair<std::string, TermInfo>> ta, tb;
    ASSERT_TRUE((*ra)->ForEachTerm([&](std::string_view t, const TermInfo& i) { ta.emplace_back(t, i); return true; }).ok());
    ASSERT_TRUE((*rb)->ForEachTerm([&](std::string_view t, const TermInfo& i) { tb.emplace_back(t, i); return true; }).ok());
    ASSERT_EQ(ta.size(), tb.size());
    for (size_t i = 0; i < ta.size(); ++i) {
      ASSERT_EQ(ta[i].first, tb[i].first);
      EXPECT_EQ(ta[i].second.df, tb[i].second.df);
      EXPECT_EQ(ta[i].second.count, tb[i].second.count);
      EXPECT_EQ(ta[i].second.cf, tb[i].second.cf);
      EXPECT_EQ(ta[i].second.max_score, tb[i].second.max_score);
      auto la = (*ra)->GetList(ta[i].first);
      auto lb = (*rb)->GetList(tb[i].first);
      ASSERT_TRUE(la.ok() && lb.ok());
      EXPECT_EQ((*la)->bytes(), (*lb)->bytes()) << ta[i].first;
    }
    for (uint32_t d = ma->shards[s].doc_begin; d < ma->shards[s].doc_end; ++d) {
      EXPECT_EQ((*ra)->DocLength(d), (*rb)->DocLength(d));
      auto ia = (*ra)->GetExternalId(d);
      auto ib = (*rb)->GetExternalId(d);
      ASSERT_TRUE(ia.ok() && ib.ok());
      EXPECT_EQ(*ia, *ib);
    }
  }
}

TEST(PostingsIngestTest, EqualsTheJsonlBuilder) {
  TempDir tmp;
  const auto docs = scaletest::RandomTexts(700, 300, 40, 7);
  const auto inv = scaletest::Invert(docs);
  scaletest::WriteJsonl(tmp / "c.jsonl", docs);
  ASSERT_TRUE(BuildIndex(scaletest::PlainJsonlOptions(tmp / "c.jsonl", tmp / "jsonl", 3)).ok());
  ASSERT_TRUE(IngestInverted(inv, docs, tmp / "serial", 3, false).ok());
  ASSERT_TRUE(IngestInverted(inv, docs, tmp / "parallel", 3, true, /*window=*/3).ok());
  ExpectSameShards(tmp / "jsonl", tmp / "serial");
  ExpectSameShards(tmp / "jsonl", tmp / "parallel");
  auto sj = ComputeIndexStats(tmp / "jsonl", true);
  auto sp = ComputeIndexStats(tmp / "parallel", true);
  ASSERT_TRUE(sj.ok() && sp.ok());
  EXPECT_EQ(sj->content_crc32c, sp->content_crc32c);
  EXPECT_EQ(sj->postings, sp->postings);
  EXPECT_TRUE(VerifyIndex(tmp / "parallel").ok());
  scaletest::ExpectSameAnswers(tmp / "jsonl", tmp / "parallel", scaletest::RandomQueries(60, 300, 3));
}

class IngestErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    IngestOptions o;
    o.shards = 2;
    auto ingest = PostingsIngest::Create(tmp_ / "idx", {3, 4, 5, 6, 0}, o);
    ASSERT_TRUE(ingest.ok()) << ingest.status().ToString();
    ingest_ = std::move(ingest).value();
  }
  TempDir tmp_;
  std::unique_ptr<PostingsIngest> ingest_;
};

TEST_F(IngestErrors, RefusesBadListsAndStaysUsable) {
  const std::vector<uint32_t> d01{0, 1}, one{1}, d10{1, 0}, d15{1, 5}, t11{1, 1}, t10{1, 0}, d22{2, 2};
  EXPECT_EQ(ingest_->AddList("", d01, t11).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ingest_->AddList("a", {}, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ingest_->AddList("a", d01, one).code(), StatusCode::kInvalidArgument);  // sizes differ
  EXPECT_EQ(ingest_->AddList("a", d10, t11).code(), StatusCode::kInvalidArgument);  // not ascending
  EXPECT_EQ(ingest_->AddList("a", d22, t11).code(), StatusCode::kInvalidArgument);  // repeated doc
  EXPECT_EQ(ingest_->AddList("a", d15, t11).code(), StatusCode::kInvalidArgument);  // doc 5 >= N
  EXPECT_EQ(ingest_->AddList("a", d01, t10).code(), StatusCode::kInvalidArgument);  // tf 0
  ASSERT_TRUE(ingest_->AddList("b", d01, t11).ok());
  EXPECT_EQ(ingest_->AddList("a", d01, t11).code(), StatusCode::kInvalidArgument);  // before "b"
  EXPECT_EQ(ingest_->AddList("b", d01, t11).code(), StatusCode::kInvalidArgument);  // twice
  ASSERT_TRUE(ingest_->AddList("c", std::vector<uint32_t>{4}, one).ok());
  auto summary = ingest_->Finish([](uint32_t d, std::string* id) {
    *id = std::string("x").append(std::to_string(d));
    return Status::Ok();
  });
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->terms, 2u);
  EXPECT_EQ(summary->postings, 3u);
  auto index = LocalIndex::Open(tmp_ / "idx");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  auto r = (*index)->Search("b c", QueryMode::kOr, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->hits.size(), 3u);
  EXPECT_EQ(ingest_->AddList("d", d01, t11).code(), StatusCode::kInvalidArgument);  // finished
}

TEST_F(IngestErrors, ParallelStopsAtTheFirstError) {
  std::atomic<uint64_t> calls{0};
  const Status s = ingest_->AddListsParallel(1000, [&](uint64_t i, TermPostings* tp) {
    ++calls;
    if (i == 500) return Status::Corruption("producer failed");
    char name[16];
    std::snprintf(name, sizeof(name), "t%05llu", static_cast<unsigned long long>(i));
    tp->term = name;
    tp->docs = {static_cast<uint32_t>(i % 5)};
    tp->tfs = {1};
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("producer failed"), std::string::npos);
  EXPECT_FALSE(ingest_->Finish([](uint32_t, std::string*) { return Status::Ok(); }).ok());
}

TEST_F(IngestErrors, ParallelRefusesTermsOutOfOrderAndHonoursSkip) {
  const Status s = ingest_->AddListsParallel(50, [](uint64_t i, TermPostings* tp) {
    tp->term = i == 30 ? std::string("a") : std::string("t").append(std::to_string(100 + i));
    tp->skip = i % 7 == 0;
    tp->docs = {1, 3};
    tp->tfs = {2, 1};
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ascending"), std::string::npos) << s.ToString();
}

TEST(PostingsIngestTest, ParallelSkipsAndKeepsOrderWithATinyWindow) {
  TempDir tmp;
  IngestOptions o;
  o.shards = 3;
  o.threads = 4;
  o.window = 1;
  std::vector<uint32_t> lengths(100, 10);
  auto ingest = PostingsIngest::Create(tmp / "idx", lengths, o);
  ASSERT_TRUE(ingest.ok());
  ASSERT_TRUE((*ingest)->AddListsParallel(2000, [](uint64_t i, TermPostings* tp) {
    char name[16];
    std::snprintf(name, sizeof(name), "t%05llu", static_cast<unsigned long long>(i));
    tp->term = name;
    tp->skip = i % 3 == 0;
    for (uint32_t d = static_cast<uint32_t>(i % 7); d < 100; d += 1 + static_cast<uint32_t>(i % 11)) {
      tp->docs.push_back(d);
      tp->tfs.push_back(1 + d % 3);
    }
    return Status::Ok();
  }).ok());
  auto summary = (*ingest)->Finish([](uint32_t d, std::string* id) {
    *id = std::to_string(d);
    return Status::Ok();
  });
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->terms, 2000u - 667u);
  auto shard = ShardReader::Open(tmp / "idx/shard-1");
  ASSERT_TRUE(shard.ok());
  auto info = (*shard)->GetTermInfo("t00004");  // docs 4, 9, 14, ...: 20 in all
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->df, 20u);
  auto skipped = (*shard)->GetTermInfo("t00003");
  ASSERT_TRUE(skipped.ok());
  EXPECT_FALSE(skipped->has_value());
}

TEST(PostingsIngestTest, CreateChecksItsArguments) {
  TempDir tmp;
  IngestOptions o;
  EXPECT_FALSE(PostingsIngest::Create(tmp / "a", {}, o).ok());
  o.shards = 4;
  EXPECT_FALSE(PostingsIngest::Create(tmp / "b", {1, 2, 3}, o).ok());
  o.shards = 1;
  o.bm25.b = 2;
  EXPECT_FALSE(PostingsIngest::Create(tmp / "c", {1, 2, 3}, o).ok());
  o.bm25.b = 0.4f;
  scaletest::WriteBytes(tmp / "file", "x");
  EXPECT_FALSE(PostingsIngest::Create(tmp / "file", {1}, o).ok());
  std::filesystem::create_directories(tmp / "full/x");
  EXPECT_FALSE(PostingsIngest::Create(tmp / "full", {1}, o).ok());
}

}  // namespace
}  // namespace search
