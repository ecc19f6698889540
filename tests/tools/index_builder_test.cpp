// The index builder (tools/searchctl/indexer) called directly: answers equal a brute-force BM25
// reference, sharding and spilling change nothing, analyzer options are recorded and applied,
// bad input is reported by line and leaves nothing behind, and publication is atomic.
#include "indexer/index_builder.hpp"

#include <gtest/gtest.h>

#include "cpu_exec/local_index.hpp"
#include "index_store/manifest.hpp"
#include "tools_fixture.hpp"

namespace search {
namespace {

using testing::Doc;
using testing::TempDir;

constexpr QueryMode kModes[] = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};

IndexBuildOptions Options(const std::string& in, const std::string& out, uint32_t shards = 1) {
  IndexBuildOptions o;
  o.input = in;
  o.output = out;
  o.shards = shards;
  o.threads = 2;
  return o;
}

std::vector<std::string> SomeQueries(const std::vector<Doc>& docs, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> out = {"w0", "w1 w2", "W3 w0 w5", "w1 nosuchterm", "", "w0 w0 w1"};
  while (out.size() < count) {
    const Doc& d = docs[rng() % docs.size()];
    auto words = Analyzer().Analyze(d.contents);
    if (words.empty()) continue;
    std::string q;
    const size_t n = 1 + rng() % 4;
    for (size_t i = 0; i < n; ++i) q += words[rng() % words.size()] + " ";
    out.push_back(q);
  }
  return out;
}

// Every list, term info, document id and length of the two indexes must be equal.
void ExpectSameContent(const std::string& a_dir, const std::string& b_dir) {
  auto a = LocalIndex::Open(a_dir);
  auto b = LocalIndex::Open(b_dir);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ((*a)->num_shards(), (*b)->num_shards());
  for (size_t s = 0; s < (*a)->num_shards(); ++s) {
    const ShardReader& ra = (*a)->shard(s);
    const ShardReader& rb = (*b)->shard(s);
    std::vector<std::pair<std::string, TermInfo>> ta, tb;
    ASSERT_TRUE(ra.ForEachTerm([&](std::string_view t, const TermInfo& i) {
                    ta.emplace_back(t, i);
                    return true;
                  }).ok());
    ASSERT_TRUE(rb.ForEachTerm([&](std::string_view t, const TermInfo& i) {
                    tb.emplace_back(t, i);
                    return true;
                  }).ok());
    ASSERT_EQ(ta.size(), tb.size());
    for (size_t i = 0; i < ta.size(); ++i) {
      ASSERT_EQ(ta[i].first, tb[i].first);
      EXPECT_EQ(ta[i].second.df, tb[i].second.df);
      EXPECT_EQ(ta[i].second.count, tb[i].second.count);
      EXPECT_EQ(ta[i].second.cf, tb[i].second.cf);
      EXPECT_EQ(ta[i].second.max_score, tb[i].second.max_score);
      auto la = ra.GetList(ta[i].first);
      auto lb = rb.GetList(tb[i].first);
      ASSERT_TRUE(la.ok() && lb.ok());
      ASSERT_EQ((*la)->bytes(), (*lb)->bytes()) << "list of " << ta[i].first;
      if (ra.has_positions() && rb.has_positions()) {
        auto pa = ra.GetPositions(ta[i].first);
        auto pb = rb.GetPositions(tb[i].first);
        ASSERT_TRUE(pa.ok() && pb.ok());
        ASSERT_EQ((*pa)->bytes, (*pb)->bytes) << "positions of " << ta[i].first;
      }
    }
    for (uint32_t d = ra.meta().doc_begin; d < ra.meta().doc_end; ++d) {
      EXPECT_EQ(ra.DocLength(d), rb.DocLength(d));
      EXPECT_EQ(*ra.GetExternalId(d), *rb.GetExternalId(d));
    }
  }
}

TEST(IndexBuilder, AnswersEqualBruteForceReferenceInEveryMode) {
  TempDir tmp;
  const auto docs = testing::RandomCorpus(1500, 400, 40, 7);
  testing::WriteJsonl(tmp / "in.jsonl", docs);
  auto summary = BuildIndex(Options(tmp / "in.jsonl", tmp / "idx", 2));
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->docs, docs.size());
  EXPECT_EQ(summary->skipped, 0u);
  EXPECT_GT(summary->bytes, 0u);

  const testing::Reference ref(docs, Analyzer());
  auto index = LocalIndex::Open(tmp / "idx");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ((*index)->manifest().stats.num_docs, docs.size());
  // Document table: external ids and lengths in input order.
  for (uint32_t d = 0; d < docs.size(); d += 97) {
    const ShardReader& shard = (*index)->shard(d < (*index)->shard(0).meta().doc_end ? 0 : 1);
    EXPECT_EQ(*shard.GetExternalId(d), docs[d].id);
    EXPECT_EQ(shard.DocLength(d), ref.length(d));
  }
  for (const auto& q : SomeQueries(docs, 40, 3)) {
    for (QueryMode mode : kModes) {
      for (uint32_t k : {1u, 10u, 200u}) {
        auto got = (*index)->Search(q, mode, k);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const auto want = ref.Search(q, mode, k);
        ASSERT_EQ(got->hits.size(), want.size()) << "'" << q << "' " << QueryModeName(mode) << " k=" << k;
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_EQ(got->hits[i].doc, want[i].doc) << "'" << q << "' rank " << i;
          EXPECT_EQ(got->hits[i].score, want[i].score) << "'" << q << "' rank " << i;
        }
      }
    }
  }
}

TEST(IndexBuilder, ShardedAndSpilledBuildsAnswerLikeOneShard) {
  TempDir tmp;
  const auto docs = testing::RandomCorpus(3000, 2000, 60, 11);
  testing::WriteJsonl(tmp / "in.jsonl", docs);
  ASSERT_TRUE(BuildIndex(Options(tmp / "in.jsonl", tmp / "one", 1)).ok());
  ASSERT_TRUE(BuildIndex(Options(tmp / "in.jsonl", tmp / "three", 3)).ok());
  auto spill = Options(tmp / "in.jsonl", tmp / "spill", 3);
  spill.memory_bytes = 64 << 10;
  spill.chunk_bytes = 16 << 10;
  spill.max_merge_fan_in = 3;  // forces intermediate merge passes
  auto spilled = BuildIndex(spill);
  ASSERT_TRUE(spilled.ok()) << spilled.status().ToString();
  EXPECT_GT(spilled->runs, 4u);
  EXPECT_GT(spilled->merge_passes, 0u);
  auto nospill = Options(tmp / "in.jsonl", tmp / "nospill", 3);
  nospill.threads = 1;
  auto single = BuildIndex(nospill);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->runs, 1u);
  EXPECT_EQ(spilled->terms, single->terms);
  EXPECT_EQ(spilled->postings, single->postings);
  ExpectSameContent(tmp / "spill", tmp / "nospill");
  ExpectSameContent(tmp / "three", tmp / "nospill");

  auto one = LocalIndex::Open(tmp / "one");
  auto three = LocalIndex::Open(tmp / "three");
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ((*three)->num_shards(), 3u);
  for (const auto& q : SomeQueries(docs, 30, 5)) {
    for (QueryMode mode : kModes) {
      auto a = (*one)->Search(q, mode, 20);
      auto b = (*three)->Search(q, mode, 20);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->hits, b->hits) << "'" << q << "' " << QueryModeName(mode);
    }
  }
}

// Every term's positions, per shard and posting, equal the brute-force ones: the indexes of the
// term in Analyzer::Analyze's output for the document (after stopwords and stemming). Built with
// 3 shards and spilled runs merged in several passes, so positions travel through run files.
TEST(IndexBuilder, PositionsEqualBruteForceTokenization) {
  TempDir tmp;
  auto docs = testing::RandomCorpus(1500, 300, 80, 21);
  docs.push_back({"english", "The running dogs ran; the dog runs and a cat sat on the mat with dogs"});
  docs.push_back({"repeats", "w1 w1 w1 w2 w1 the w1"});
  testing::WriteJsonl(tmp / "in.jsonl", docs);
  auto o = Options(tmp / "in.jsonl", tmp / "idx", 3);
  o.analyzer.stem_language = "english";
  o.analyzer.stopwords = {"the", "a", "on"};
  o.memory_bytes = 64 << 10;
  o.chunk_bytes = 16 << 10;
  o.max_merge_fan_in = 3;
  auto built = BuildIndex(o);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_GT(built->merge_passes, 0u);
  auto manifest = Manifest::Read(tmp / "idx");
  ASSERT_TRUE(manifest.ok());
  EXPECT_TRUE(manifest->positions);

  // Brute force: term -> docID -> positions.
  auto analyzer = Analyzer::Create(o.analyzer);
  ASSERT_TRUE(analyzer.ok());
  std::map<std::string, std::map<uint32_t, std::vector<uint32_t>>> want;
  for (uint32_t d = 0; d < docs.size(); ++d) {
    const auto tokens = analyzer->Analyze(docs[d].contents);
    for (uint32_t i = 0; i < tokens.size(); ++i) want[tokens[i]][d].push_back(i);
  }
  auto idx = LocalIndex::Open(tmp / "idx");
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  size_t terms_seen = 0;
  for (size_t s = 0; s < (*idx)->num_shards(); ++s) {
    const ShardReader& r = (*idx)->shard(s);
    ASSERT_TRUE(r.has_positions());
    std::vector<std::pair<std::string, TermInfo>> terms;
    ASSERT_TRUE(r.ForEachTerm([&](std::string_view t, const TermInfo& i) {
                    terms.emplace_back(t, i);
                    return true;
                  }).ok());
    for (const auto& [term, info] : terms) {
      auto list = r.GetList(term);
      auto pos = r.GetPositions(term);
      ASSERT_TRUE(list.ok() && pos.ok()) << term;
      const ListView& lv = (*list)->view;
      std::vector<uint32_t> offsets, positions;
      uint32_t block_docs[kBlockSize];
      for (uint32_t j = 0; j < lv.num_blocks(); ++j) {
        ASSERT_TRUE(lv.DecodeDocs(j, block_docs).ok());
        ASSERT_TRUE((*pos)->view.DecodeBlock(j, &offsets, &positions).ok()) << term;
        ASSERT_EQ(offsets.size(), lv.block(j).count + 1u);
        for (uint32_t i = 0; i < lv.block(j).count; ++i) {
          const std::vector<uint32_t> got(positions.begin() + offsets[i], positions.begin() + offsets[i + 1]);
          EXPECT_EQ(got, want[term][block_docs[i]]) << term << " in doc " << block_docs[i];
        }
      }
      ++terms_seen;
    }
  }
  size_t want_terms = 0;  // (term, shard) pairs
  for (const auto& [term, by_doc] : want) {
    std::set<uint32_t> shards;
    for (const auto& entry : by_doc) {
      uint32_t s = 0, begin = 0, end = 0;
      for (ShardRange(docs.size(), 3, s, &begin, &end); entry.first >= end;) ShardRange(docs.size(), 3, ++s, &begin, &end);
      shards.insert(s);
    }
    want_terms += shards.size();
  }
  EXPECT_EQ(terms_seen, want_terms);
  // The stopwords take no positions: "running dogs ran the dog" are 0, 1, 2, -, 3.
  EXPECT_EQ(want["dog"][static_cast<uint32_t>(docs.size() - 2)], (std::vector<uint32_t>{1, 3, 10}));
}

// --no-positions: the same lists, no positions, and the reader says why a phrase cannot run.
TEST(IndexBuilder, NoPositionsBuildsTheSameListsWithoutPositions) {
  TempDir tmp;
  const auto docs = testing::RandomCorpus(800, 200, 40, 23);
  testing::WriteJsonl(tmp / "in.jsonl", docs);
  ASSERT_TRUE(BuildIndex(Options(tmp / "in.jsonl", tmp / "with", 2)).ok());
  auto o = Options(tmp / "in.jsonl", tmp / "without", 2);
  o.positions = false;
  ASSERT_TRUE(BuildIndex(o).ok());
  ExpectSameContent(tmp / "with", tmp / "without");
  auto manifest = Manifest::Read(tmp / "without");
  ASSERT_TRUE(manifest.ok());
  EXPECT_FALSE(manifest->positions);
  auto idx = LocalIndex::Open(tmp / "without");
  ASSERT_TRUE(idx.ok());
  for (size_t s = 0; s < (*idx)->num_shards(); ++s) {
    const ShardReader& r = (*idx)->shard(s);
    EXPECT_FALSE(r.has_positions());
    EXPECT_FALSE(r.meta().positions);
    auto pos = r.GetPositions("w0");
    ASSERT_FALSE(pos.ok());
    EXPECT_EQ(pos.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(pos.status().message().find("rebuild the index with positions"), std::string::npos);
  }
}

TEST(IndexBuilder, GzipInputGivesTheSameIndex) {
  TempDir tmp;
  const auto docs = testing::RandomCorpus(800, 300, 30, 13);
  testing::WriteJsonl(tmp / "in.jsonl", docs);
  testing::WriteJsonlGz(tmp / "in.jsonl.gz", docs);
  ASSERT_TRUE(BuildIndex(Options(tmp / "in.jsonl", tmp / "plain", 2)).ok());
  auto gz = BuildIndex(Options(tmp / "in.jsonl.gz", tmp / "gz", 2));
  ASSERT_TRUE(gz.ok()) << gz.status().ToString();
  EXPECT_EQ(gz->docs, docs.size());
  ExpectSameContent(tmp / "plain", tmp / "gz");
}

TEST(IndexBuilder, TruncatedGzipIsAnError) {
  TempDir tmp;
  testing::WriteJsonlGz(tmp / "in.jsonl.gz", testing::RandomCorpus(2000, 300, 30, 17));
  std::string bytes = testing::ReadText(tmp / "in.jsonl.gz");
  testing::WriteText(tmp / "cut.jsonl.gz", bytes.substr(0, bytes.size() / 2));
  auto r = BuildIndex(Options(tmp / "cut.jsonl.gz", tmp / "idx"));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(testing::fs::exists(tmp / "idx"));
}

TEST(IndexBuilder, StemmingAndStopwordsAreRecordedAndApplied) {
  TempDir tmp;
  std::vector<Doc> docs = {
      {"a", "She runs every morning"}, {"b", "The cat sat"}, {"c", "running water, the end"}, {"d", "nothing here"}};
  testing::WriteJsonl(tmp / "in.jsonl", docs);
  auto o = Options(tmp / "in.jsonl", tmp / "idx");
  o.analyzer.stem_language = "english";
  o.analyzer.stopwords = {"the", "every"};
  ASSERT_TRUE(BuildIndex(o).ok());
  auto m = Manifest::Read(tmp / "idx");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->analyzer, o.analyzer);
  auto index = LocalIndex::Open(tmp / "idx");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ((*index)->shard(0).meta().analyzer, o.analyzer);
  auto run = (*index)->Search("running", QueryMode::kOr, 10);
  ASSERT_TRUE(run.ok());
  std::set<uint32_t> found;
  for (const auto& h : run->hits) found.insert(h.doc);
  EXPECT_EQ(found, (std::set<uint32_t>{0, 2}));  // "runs" and "running" both stem to "run"
  auto stop = (*index)->Search("the", QueryMode::kOr, 10);
  ASSERT_TRUE(stop.ok());
  EXPECT_TRUE(stop->hits.empty());
  // Stopwords are not counted in document length: doc b is "cat sat".
  EXPECT_EQ((*index)->shard(0).DocLength(1), 2u);
}

TEST(IndexBuilder, BadLineNamesItsLineAndLeavesNothing) {
  TempDir tmp;
  const std::string good1 = R"({"id": "a", "contents": "x y"})";
  const std::string good2 = R"({"id": "b", "contents": "y z"})";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"id": "c", "contents": )", "invalid JSON"},
      {R"(["id", "contents"])", "not a JSON object"},
      {R"({"contents": "q"})", "missing field 'id'"},
      {R"({"id": 7, "contents": "q"})", "field 'id' is not a string"},
      {R"({"id": "c", "contents": null})", "field 'contents' is not a string"},
  };
  for (const auto& [line, reason] : bad) {
    testing::WriteText(tmp / "in.jsonl", good1 + "\n" + good2 + "\n" + line + "\n" + good1 + "\n");
    auto r = BuildIndex(Options(tmp / "in.jsonl", tmp / "idx"));
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("line 3: " + reason), std::string::npos) << r.status().message();
    EXPECT_FALSE(testing::fs::exists(tmp / "idx"));
    for (const auto& e : testing::fs::directory_iterator(tmp.path()))
      EXPECT_EQ(e.path().filename().string().find("idx.tmp-"), std::string::npos) << "temp dir left behind";

    auto skip = Options(tmp / "in.jsonl", tmp / "idx");
    skip.skip_bad = true;
    auto s = BuildIndex(skip);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->docs, 3u);
    EXPECT_EQ(s->skipped, 1u);
    auto index = LocalIndex::Open(tmp / "idx");
    ASSERT_TRUE(index.ok());
    EXPECT_EQ(*(*index)->shard(0).GetExternalId(2), "a");  // the skipped line got no docID
    testing::fs::remove_all(tmp / "idx");
  }
}

TEST(IndexBuilder, ErrorsForMissingInputEmptyInputAndTooManyShards) {
  TempDir tmp;
  auto missing = BuildIndex(Options(tmp / "nope.jsonl", tmp / "idx"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.jsonl"), std::string::npos);
  testing::WriteText(tmp / "empty.jsonl", "\n  \n");
  auto empty = BuildIndex(Options(tmp / "empty.jsonl", tmp / "idx"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no documents"), std::string::npos);
  testing::WriteText(tmp / "two.jsonl", "{\"id\":\"a\",\"contents\":\"x\"}\n{\"id\":\"b\",\"contents\":\"y\"}");
  auto shards = BuildIndex(Options(tmp / "two.jsonl", tmp / "idx", 3));
  ASSERT_FALSE(shards.ok());
  EXPECT_FALSE(testing::fs::exists(tmp / "idx"));
  auto ok = BuildIndex(Options(tmp / "two.jsonl", tmp / "idx", 2));  // last line without '\n'
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->docs, 2u);
}

TEST(IndexBuilder, EmptyContentsIsADocumentOfLengthZero) {
  TempDir tmp;
  testing::WriteText(tmp / "in.jsonl",
                     "{\"id\":\"e\",\"contents\":\"\"}\r\n\n{\"id\":\"f\",\"contents\":\"a b a\"}\n"
                     "{\"id\":\"g\",\"contents\":\"!!! ...\"}\n");
  auto r = BuildIndex(Options(tmp / "in.jsonl", tmp / "idx"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->docs, 3u);
  EXPECT_EQ(r->blank_lines, 1u);
  auto index = LocalIndex::Open(tmp / "idx");
  ASSERT_TRUE(index.ok());
  const ShardReader& s = (*index)->shard(0);
  EXPECT_EQ(s.DocLength(0), 0u);
  EXPECT_EQ(s.DocLength(1), 3u);
  EXPECT_EQ(s.DocLength(2), 0u);
  EXPECT_EQ(*s.GetExternalId(0), "e");
  EXPECT_EQ((*index)->manifest().stats.total_tokens, 3u);
  auto hits = (*index)->Search("a", QueryMode::kOr, 5);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->hits.size(), 1u);
  EXPECT_EQ(hits->hits[0].doc, 1u);
}

TEST(IndexBuilder, ExistingOutputNeedsForceAndOnlyReplacesAnIndex) {
  TempDir tmp;
  const auto a = testing::RandomCorpus(50, 20, 10, 1);
  const auto b = testing::RandomCorpus(70, 20, 10, 2);
  testing::WriteJsonl(tmp / "a.jsonl", a);
  testing::WriteJsonl(tmp / "b.jsonl", b);
  ASSERT_TRUE(BuildIndex(Options(tmp / "a.jsonl", tmp / "idx/")).ok());  // trailing slash
  auto again = BuildIndex(Options(tmp / "b.jsonl", tmp / "idx"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Manifest::Read(tmp / "idx")->stats.num_docs, a.size());  // untouched

  auto force = Options(tmp / "b.jsonl", tmp / "idx");
  force.force = true;
  ASSERT_TRUE(BuildIndex(force).ok());
  EXPECT_EQ(Manifest::Read(tmp / "idx")->stats.num_docs, b.size());
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : testing::fs::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 3u);  // a.jsonl, b.jsonl, idx: the old index is gone, no leftovers

  testing::fs::create_directory(tmp / "data");
  testing::WriteText(tmp / "data/keep.txt", "precious");
  auto data = Options(tmp / "a.jsonl", tmp / "data");
  data.force = true;
  ASSERT_FALSE(BuildIndex(data).ok());
  EXPECT_EQ(testing::ReadText(tmp / "data/keep.txt"), "precious");

  auto no_parent = Options(tmp / "a.jsonl", tmp / "no/such/dir");
  ASSERT_FALSE(BuildIndex(no_parent).ok());
}

TEST(IndexBuilder, RemovesLeftoversOfDeadBuilds) {
  TempDir tmp;
  testing::WriteJsonl(tmp / "a.jsonl", testing::RandomCorpus(30, 20, 10, 1));
  // pid 4194304 + 7 is above Linux's PID_MAX_LIMIT: no such process can exist.
  testing::fs::create_directory(tmp / "idx.tmp-4194311");
  testing::WriteText(tmp / "idx.tmp-4194311/junk", "x");
  auto r = BuildIndex(Options(tmp / "a.jsonl", tmp / "idx"));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(testing::fs::exists(tmp / "idx.tmp-4194311"));
  EXPECT_FALSE(r->notes.empty());
}

}  // namespace
}  // namespace search
