// ShardWriter -> ShardReader round trips over random corpora, input validation, format versions
// and corrupted shards (which must yield Corruption, never a crash).
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "index_store/shard_store.hpp"
#include "shard_fixture.hpp"

namespace search {
namespace {

using testing::Corpus;
using testing::MakeCorpus;
using testing::TempDir;
using testing::WriteShard;

// Opens the shard read-write with plain RocksDB (the schema of index_store/FORMAT.md) and puts
// one value, simulating damage or a different build.
void PutRaw(const std::string& path, const std::string& cf, const std::string& key, const std::string& value) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* name : {"default", "terms", "lists", "docs", "positions", "source"})
    cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), path, cfs, &handles, &db).ok());
  size_t idx = 0;
  while (cfs[idx].name != cf) ++idx;
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[idx], key, value).ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), handles[idx]).ok());
  for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  ASSERT_TRUE(db->Close().ok());
  delete db;
}

// As PutRaw, deleting the key instead.
void DeleteRaw(const std::string& path, const std::string& cf, const std::string& key) {
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* name : {"default", "terms", "lists", "docs", "positions", "source"})
    cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), path, cfs, &handles, &db).ok());
  size_t idx = 0;
  while (cfs[idx].name != cf) ++idx;
  ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), handles[idx], key).ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), handles[idx]).ok());
  for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  ASSERT_TRUE(db->Close().ok());
  delete db;
}

void ExpectSameInfo(const TermInfo& a, const TermInfo& b, const std::string& term) {
  EXPECT_EQ(a.df, b.df) << term;
  EXPECT_EQ(a.count, b.count) << term;
  EXPECT_EQ(a.cf, b.cf) << term;
  EXPECT_EQ(a.max_score, b.max_score) << term;
  EXPECT_EQ(a.list_bytes, b.list_bytes) << term;
}

// Everything the reader serves must equal what was written.
void CheckShard(const Corpus& c, const ShardReader& r) {
  const ShardMeta& m = r.meta();
  EXPECT_EQ(m.format_version, kIndexFormatVersion);
  EXPECT_EQ(m.shard_id, c.meta.shard_id);
  EXPECT_EQ(m.num_shards, c.meta.num_shards);
  EXPECT_EQ(m.doc_begin, c.meta.doc_begin);
  EXPECT_EQ(m.doc_end, c.meta.doc_end);
  EXPECT_EQ(m.stats.num_docs, c.meta.stats.num_docs);
  EXPECT_EQ(m.stats.total_tokens, c.meta.stats.total_tokens);
  EXPECT_EQ(m.bm25.k1, c.meta.bm25.k1);
  EXPECT_EQ(m.bm25.b, c.meta.bm25.b);
  EXPECT_EQ(m.analyzer, c.meta.analyzer);
  EXPECT_EQ(m.num_terms, c.terms.size());
  uint64_t postings = 0;
  for (const auto& td : c.terms) postings += td.docs.size();
  EXPECT_EQ(m.num_postings, postings);

  for (const auto& td : c.terms) {
    auto info = r.GetTermInfo(td.term);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    ASSERT_TRUE(info->has_value()) << td.term;
    ExpectSameInfo(**info, td.info, td.term);
    auto list = r.GetList(td.term);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    EXPECT_EQ((*list)->bytes(), td.blob) << td.term;
    EXPECT_EQ((*list)->term, td.term);
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*list)->bytes().data()) % 64, 0u);
    EXPECT_EQ((*list)->view.count(), td.docs.size());
    // Positions: decoded block by block, they are the ones written; without positions, the
    // error that says so.
    EXPECT_EQ(r.has_positions(), c.meta.positions);
    auto pos = r.GetPositions(td.term);
    if (!c.meta.positions) {
      ASSERT_FALSE(pos.ok());
      EXPECT_EQ(pos.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(pos.status().message().find("built without positions"), std::string::npos);
      continue;
    }
    ASSERT_TRUE(pos.ok()) << pos.status().ToString();
    EXPECT_EQ((*pos)->bytes, td.pos_blob);
    EXPECT_EQ((*pos)->term, td.term);
    std::vector<uint32_t> offsets, got, all;
    for (uint32_t j = 0; j < (*pos)->view.num_blocks(); ++j) {
      ASSERT_TRUE((*pos)->view.DecodeBlock(j, &offsets, &got).ok());
      for (size_t i = 0; i + 1 < offsets.size(); ++i) EXPECT_EQ(offsets[i + 1] - offsets[i], td.tfs[128 * j + i]);
      all.insert(all.end(), got.begin(), got.end());
    }
    EXPECT_EQ(all, td.positions) << td.term;
    auto again = r.GetPositions(td.term);  // from the positions cache (when it has room): the same entry
    ASSERT_TRUE(again.ok());
    if (r.positions_cache().stats().capacity_bytes > (size_t{1} << 20)) {
      EXPECT_EQ(again->get(), pos->get());
    }
  }
  // Absent terms: neighbours and extensions of present ones.
  std::set<std::string> present;
  for (const auto& td : c.terms) present.insert(td.term);
  for (const auto& td : c.terms) {
    for (const std::string& probe : {td.term + std::string(1, '\0'), td.term + "~", std::string("~") + td.term}) {
      if (present.count(probe)) continue;
      auto info = r.GetTermInfo(probe);
      ASSERT_TRUE(info.ok());
      EXPECT_FALSE(info->has_value()) << probe;
      auto list = r.GetList(probe);
      ASSERT_FALSE(list.ok());
      EXPECT_EQ(list.status().code(), StatusCode::kNotFound);
      if (c.meta.positions) {
        EXPECT_EQ(r.GetPositions(probe).status().code(), StatusCode::kNotFound) << probe;
      }
    }
  }
  // ForEachTerm: ascending, complete, same infos.
  size_t i = 0;
  Status st = r.ForEachTerm([&](std::string_view term, const TermInfo& info) {
    EXPECT_LT(i, c.terms.size());
    if (i >= c.terms.size()) return false;
    EXPECT_EQ(term, c.terms[i].term);
    ExpectSameInfo(info, c.terms[i].info, c.terms[i].term);
    ++i;
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(i, c.terms.size());
  // Documents.
  const double avgdl = c.meta.stats.avgdl();
  for (uint32_t d = c.meta.doc_begin; d < c.meta.doc_end; ++d) {
    const uint32_t k = d - c.meta.doc_begin;
    auto id = r.GetExternalId(d);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_EQ(*id, c.ext_ids[k]);
    EXPECT_EQ(r.DocLength(d), c.lengths[k]);
    const float want = Bm25Norm(c.lengths[k], avgdl, c.meta.bm25);
    EXPECT_EQ(std::memcmp(&r.norms()[k], &want, sizeof(float)), 0) << d;
  }
  for (uint32_t outside : {c.meta.doc_end, c.meta.doc_end + 100u}) {
    auto id = r.GetExternalId(outside);
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kNotFound);
  }
  if (c.meta.doc_begin > 0) {
    EXPECT_EQ(r.GetExternalId(c.meta.doc_begin - 1).status().code(), StatusCode::kNotFound);
  }
  // GetExternalIds (one MultiGet): the same ids in the order asked, repeats and all; a doc outside
  // the shard fails the whole call as GetExternalId does.
  std::mt19937 rng(c.meta.doc_begin + 1);
  std::vector<std::string> ids;
  ASSERT_TRUE(r.GetExternalIds({}, &ids).ok());
  EXPECT_TRUE(ids.empty());
  if (c.meta.doc_end > c.meta.doc_begin) {
    std::uniform_int_distribution<uint32_t> pick(c.meta.doc_begin, c.meta.doc_end - 1);
    for (int round = 0; round < 50; ++round) {
      std::vector<uint32_t> docs(1 + round % 12);
      for (uint32_t& d : docs) d = pick(rng);
      Status st = r.GetExternalIds(docs, &ids);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(ids.size(), docs.size());
      for (size_t j = 0; j < docs.size(); ++j) EXPECT_EQ(ids[j], c.ext_ids[docs[j] - c.meta.doc_begin]);
    }
    const std::vector<uint32_t> bad = {c.meta.doc_begin, c.meta.doc_end};
    EXPECT_EQ(r.GetExternalIds(bad, &ids).code(), StatusCode::kNotFound);
  }
  // Term entries a second time (the reader's memo): the same answers, present and absent.
  for (const auto& td : c.terms) {
    auto info = r.GetTermInfo(td.term);
    ASSERT_TRUE(info.ok() && info->has_value()) << td.term;
    ExpectSameInfo(**info, td.info, td.term);
    auto absent = r.GetTermInfo(td.term + "~");
    ASSERT_TRUE(absent.ok());
    EXPECT_EQ(absent->has_value(), present.count(td.term + "~") > 0);
  }
}

TEST(ShardStoreTest, RoundTripAndReopen) {
  TempDir dir;
  // 9000 docs: three length chunks, the last one partial.
  const Corpus c = MakeCorpus(7, 5000, 14000, 20000, 400);
  Status st = WriteShard(c, dir / "shard-1");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir / "shard-1/ingest.tmp"));
  {
    auto r = ShardReader::Open(dir / "shard-1");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    CheckShard(c, **r);
    // Every list was loaded once; a second pass is served by the list cache.
    const auto before = (*r)->list_cache().stats();
    EXPECT_EQ(before.inserts, c.terms.size());
    for (const auto& td : c.terms) ASSERT_TRUE((*r)->GetList(td.term).ok());
    const auto after = (*r)->list_cache().stats();
    EXPECT_EQ(after.hits - before.hits, c.terms.size());
    EXPECT_EQ(after.misses, before.misses);
  }
  auto again = ShardReader::Open(dir / "shard-1");  // reopen after close
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  CheckShard(c, **again);
  // Two readers of one shard at once (read-only opens take no lock).
  auto second = ShardReader::Open(dir / "shard-1");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
}

TEST(ShardStoreTest, ReaderWritesNothingIntoTheShard) {
  TempDir dir;
  const Corpus c = MakeCorpus(3, 0, 500, 500, 50);
  ASSERT_TRUE(WriteShard(c, dir / "s").ok());
  auto listing = [&] {
    std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> files;
    for (const auto& e : std::filesystem::directory_iterator(dir / "s"))
      files[e.path().filename().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
    return files;
  };
  const auto before = listing();
  EXPECT_EQ(before.count("LOG"), 0u) << "the writer logs to stderr, not into the shard";
  {
    auto r = ShardReader::Open(dir / "s");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    CheckShard(c, **r);
  }
  EXPECT_EQ(listing(), before);
}

TEST(ShardStoreTest, EmptyShardsAndShardsWithoutTerms) {
  TempDir dir;
  ShardMeta m;
  m.shard_id = 2;
  m.num_shards = 3;
  m.doc_begin = m.doc_end = 2;  // 2 docs over 3 shards: shard 2 is empty
  m.stats = {2, 10};
  auto w = ShardWriter::Create(dir / "empty", m);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = ShardReader::Open(dir / "empty");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->meta().num_terms, 0u);
  int visited = 0;
  ASSERT_TRUE((*r)->ForEachTerm([&](std::string_view, const TermInfo&) { return ++visited, true; }).ok());
  EXPECT_EQ(visited, 0);
  EXPECT_EQ((*r)->GetExternalId(2).status().code(), StatusCode::kNotFound);

  m.shard_id = 0;
  m.doc_begin = 0;
  m.doc_end = 1;
  auto w2 = ShardWriter::Create(dir / "noterms", m);
  ASSERT_TRUE(w2.ok());
  ASSERT_TRUE((*w2)->AddDoc(0, "only", 0).ok());
  ASSERT_TRUE((*w2)->Finish().ok());
  auto r2 = ShardReader::Open(dir / "noterms");
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(*(*r2)->GetExternalId(0), "only");
  EXPECT_EQ((*r2)->DocLength(0), 0u);
}

TEST(ShardStoreTest, FormatVersionMismatchRejected) {
  TempDir dir;
  const Corpus c = MakeCorpus(5, 0, 300, 300, 20);
  ASSERT_TRUE(WriteShard(c, dir / "s").ok());
  std::string v4("\x04\x00\x00\x00", 4);
  PutRaw(dir / "s", "default", "meta/format_version", v4);
  auto r = ShardReader::Open(dir / "s");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("index format version 4, this build reads 2 to 3"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("newer version"), std::string::npos) << r.status().message();
}

// A shard of format version 1 (four column families, no positions) is an older index to
// rebuild, not a damaged one.
TEST(ShardStoreTest, VersionOneShardSaysRebuild) {
  TempDir dir;
  {
    rocksdb::DBOptions options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const char* name : {"default", "terms", "lists", "docs"}) cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir / "v1", cfs, &handles, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "meta/format_version", std::string("\x01\0\0\0", 4)).ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), handles[0]).ok());
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    ASSERT_TRUE(db->Close().ok());
    delete db;
  }
  auto r = ShardReader::Open(dir / "v1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("index format version 1, this build reads 2 to 3"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("rebuild"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("searchctl index"), std::string::npos) << r.status().message();
  // Sizing the list cache (search-node does it before opening) says the same.
  auto need = ShardListCacheNeed(dir / "v1");
  ASSERT_FALSE(need.ok());
  EXPECT_EQ(need.status().code(), StatusCode::kInvalidArgument) << need.status().ToString();
  EXPECT_NE(need.status().message().find("rebuild"), std::string::npos) << need.status().message();
}

TEST(ShardStoreTest, PositionsRoundTrip) {
  TempDir dir;
  const Corpus c = MakeCorpus(8, 100, 700, 1000, 150, /*positions=*/true);
  ASSERT_TRUE(WriteShard(c, dir / "s").ok());
  auto r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  CheckShard(c, **r);
  EXPECT_GT((*r)->positions_cache().stats().entries, 0u);
  // A cache too small for any entry: every call still answers.
  ShardReaderOptions tiny;
  tiny.list_cache_bytes = 1;
  auto r2 = ShardReader::Open(dir / "s", tiny);
  ASSERT_TRUE(r2.ok());
  CheckShard(c, **r2);
  EXPECT_EQ((*r2)->positions_cache().stats().entries, 0u);
}

TEST(ShardStoreTest, WriterChecksPositions) {
  TempDir dir;
  Corpus with = MakeCorpus(9, 0, 200, 200, 10, /*positions=*/true);
  auto w = ShardWriter::Create(dir / "p", with.meta);
  ASSERT_TRUE(w.ok());
  const auto& td = with.terms[0];
  // Missing, damaged, or for another count: InvalidArgument, and the writer stays usable.
  EXPECT_EQ((*w)->AddTerm(td.term, td.info, td.blob).code(), StatusCode::kInvalidArgument);
  std::string bad = td.pos_blob;
  bad.back() = static_cast<char>(bad.back() ^ 1);
  EXPECT_EQ((*w)->AddTerm(td.term, td.info, td.blob, bad).code(), StatusCode::kInvalidArgument);
  for (const auto& other : with.terms) {
    if (other.info.count != td.info.count) {
      EXPECT_EQ((*w)->AddTerm(td.term, td.info, td.blob, other.pos_blob).code(), StatusCode::kInvalidArgument);
      break;
    }
  }
  EXPECT_TRUE((*w)->AddTerm(td.term, td.info, td.blob, td.pos_blob).ok());
  // A shard without positions refuses them.
  Corpus without = MakeCorpus(9, 0, 200, 200, 10);
  auto w2 = ShardWriter::Create(dir / "n", without.meta);
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ((*w2)->AddTerm(td.term, td.info, td.blob, td.pos_blob).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*w2)->AddTerm(td.term, td.info, td.blob).ok());
}

TEST(ShardStoreTest, OpenRejectsWhatIsNotAShard) {
  TempDir dir;
  auto missing = ShardReader::Open(dir / "nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  std::filesystem::create_directory(dir / "plain");
  auto plain = ShardReader::Open(dir / "plain");
  EXPECT_FALSE(plain.ok());
  // A RocksDB database with the right column families but no metadata (an unfinished build).
  {
    auto w = ShardWriter::Create(dir / "unfinished", MakeCorpus(1, 0, 10, 10, 3).meta);
    ASSERT_TRUE(w.ok());
  }
  auto unfinished = ShardReader::Open(dir / "unfinished");
  ASSERT_FALSE(unfinished.ok());
  EXPECT_EQ(unfinished.status().code(), StatusCode::kCorruption) << unfinished.status().ToString();
}

TEST(ShardStoreTest, WriterValidatesInput) {
  TempDir dir;
  const Corpus c = MakeCorpus(11, 100, 400, 1000, 30);
  ASSERT_GE(c.terms.size(), 3u);
  auto w = ShardWriter::Create(dir / "s", c.meta);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(ShardWriter::Create(dir / "s", c.meta).status().code(), StatusCode::kAlreadyExists);
  ShardMeta bad = c.meta;
  bad.shard_id = 3;  // not below num_shards
  EXPECT_EQ(ShardWriter::Create(dir / "bad", bad).status().code(), StatusCode::kInvalidArgument);
  bad = c.meta;
  bad.doc_end = 1001;  // past N
  EXPECT_EQ(ShardWriter::Create(dir / "bad", bad).status().code(), StatusCode::kInvalidArgument);

  auto code = [](const Status& s) { return s.code(); };
  const auto& t0 = c.terms[0];
  const auto& t1 = c.terms[1];
  const auto& t2 = c.terms[2];
  // Garbage and damaged lists.
  EXPECT_EQ(code((*w)->AddTerm(t0.term, t0.info, "not a list")), StatusCode::kInvalidArgument);
  std::string flipped = t0.blob;
  flipped.back() ^= 0x01;  // payload byte: CRC mismatch
  EXPECT_EQ(code((*w)->AddTerm(t0.term, t0.info, flipped)), StatusCode::kInvalidArgument);
  // Count disagreeing with the list; df below count.
  TermInfo wrong = t0.info;
  wrong.count += 1;
  EXPECT_EQ(code((*w)->AddTerm(t0.term, wrong, t0.blob)), StatusCode::kInvalidArgument);
  wrong = t0.info;
  wrong.df = 0;
  EXPECT_EQ(code((*w)->AddTerm(t0.term, wrong, t0.blob)), StatusCode::kInvalidArgument);
  // DocIDs outside [doc_begin, doc_end): encoded with a lower base, or past the end.
  const PostingScorer one = [](uint32_t, uint32_t) { return 1.0f; };
  std::vector<uint32_t> low_docs = {50, 150}, tfs = {1, 1};
  auto low = EncodeList(low_docs, tfs, 0, one);
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(code((*w)->AddTerm(t0.term, TermInfo{2, 2, 2, 1.0f, 0}, *low)), StatusCode::kInvalidArgument);
  std::vector<uint32_t> high_docs = {150, 400};
  auto high = EncodeList(high_docs, tfs, 100, one);
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(code((*w)->AddTerm(t0.term, TermInfo{2, 2, 2, 1.0f, 0}, *high)), StatusCode::kInvalidArgument);
  // Valid input is still accepted after rejected calls; list bytes at an odd address too.
  std::string unaligned = " " + t0.blob;
  ASSERT_TRUE((*w)->AddTerm(t0.term, t0.info, std::string_view(unaligned).substr(1)).ok());
  // Order: equal and smaller terms are rejected.
  EXPECT_EQ(code((*w)->AddTerm(t0.term, t0.info, t0.blob)), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*w)->AddTerm(t2.term, t2.info, t2.blob).ok());
  EXPECT_EQ(code((*w)->AddTerm(t1.term, t1.info, t1.blob)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*w)->AddTerm("", t1.info, t1.blob)), StatusCode::kInvalidArgument);
  // Documents: range, order, duplicates, gaps, completeness.
  EXPECT_EQ(code((*w)->AddDoc(99, "x", 1)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*w)->AddDoc(400, "x", 1)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code((*w)->AddDoc(101, "x", 1)), StatusCode::kInvalidArgument);  // 100 missing
  ASSERT_TRUE((*w)->AddDoc(100, "a", 1).ok());
  EXPECT_EQ(code((*w)->AddDoc(100, "a", 1)), StatusCode::kInvalidArgument);  // twice
  ASSERT_TRUE((*w)->AddDoc(101, "b", 1).ok());
  Status fin = (*w)->Finish();
  EXPECT_EQ(fin.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fin.message().find("[102, 400)"), std::string::npos) << fin.message();
  for (uint32_t d = 102; d < 400; ++d) ASSERT_TRUE((*w)->AddDoc(d, "d", 1).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ(code((*w)->AddDoc(0, "late", 1)), StatusCode::kInvalidArgument);  // after Finish
  auto r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->meta().num_terms, 2u);
  EXPECT_EQ((*r)->meta().num_postings, t0.docs.size() + t2.docs.size());
}

// External ids are read from RocksDB once and then answered from the reader's memo (counted in
// external_id_stats); a corrupt docs entry is never remembered: it fails every time, and the
// other ids in the same call are not returned half-filled.
TEST(ShardStoreTest, ExternalIdsAreReadOnceThenRemembered) {
  TempDir dir;
  const Corpus c = MakeCorpus(17, 100, 1100, 2000, 40);
  ASSERT_TRUE(WriteShard(c, dir / "s").ok());
  const auto id_of = [&](uint32_t d) { return c.ext_ids[d - c.meta.doc_begin]; };
  {
    auto r = ShardReader::Open(dir / "s");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->external_id_stats().reads, 0u);
    const std::vector<uint32_t> docs = {105, 999, 105, 1099};
    std::vector<std::string> ids;
    ASSERT_TRUE((*r)->GetExternalIds(docs, &ids).ok());
    EXPECT_EQ(ids, (std::vector<std::string>{id_of(105), id_of(999), id_of(105), id_of(1099)}));
    ExternalIdStats st = (*r)->external_id_stats();
    EXPECT_EQ(st.reads, 4u);
    EXPECT_EQ(st.memo_hits, 0u);
    ASSERT_TRUE((*r)->GetExternalIds(docs, &ids).ok());
    EXPECT_EQ(ids, (std::vector<std::string>{id_of(105), id_of(999), id_of(105), id_of(1099)}));
    auto one = (*r)->GetExternalId(999);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(*one, id_of(999));
    st = (*r)->external_id_stats();
    EXPECT_EQ(st.reads, 4u);  // nothing read again
    EXPECT_EQ(st.memo_hits, 5u);
    // A mix: two remembered, one read.
    ASSERT_TRUE((*r)->GetExternalIds(std::vector<uint32_t>{105, 500, 999}, &ids).ok());
    EXPECT_EQ(ids, (std::vector<std::string>{id_of(105), id_of(500), id_of(999)}));
    st = (*r)->external_id_stats();
    EXPECT_EQ(st.reads, 5u);
    EXPECT_EQ(st.memo_hits, 7u);
  }
  // Doc 600's entry missing (a damaged table): Corruption, each time it is asked for.
  const std::string key = {'\0', '\0', static_cast<char>(600 >> 8), static_cast<char>(600 & 0xff)};
  DeleteRaw(dir / "s", "docs", key);
  auto r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ((*r)->GetExternalIds(std::vector<uint32_t>{105, 600}, &ids).code(), StatusCode::kCorruption);
    EXPECT_TRUE(ids.empty());
    EXPECT_EQ((*r)->GetExternalId(600).status().code(), StatusCode::kCorruption);
  }
  EXPECT_EQ((*r)->external_id_stats().reads, 5u);  // 105 once, then from the memo; 600 four times
  auto fine = (*r)->GetExternalId(105);
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(*fine, id_of(105));
}

TEST(ShardStoreTest, CorruptedListValueIsCorruptionNamingTheTerm) {
  TempDir dir;
  const Corpus c = MakeCorpus(13, 0, 2000, 2000, 40);
  ASSERT_TRUE(WriteShard(c, dir / "s").ok());
  // The longest list, one payload byte flipped: its structure still parses, its CRC fails.
  const auto& victim = *std::max_element(c.terms.begin(), c.terms.end(),
                                         [](const auto& a, const auto& b) { return a.blob.size() < b.blob.size(); });
  std::string bad = victim.blob;
  bad[bad.size() - 3] ^= 0x40;
  PutRaw(dir / "s", "lists", victim.term, bad);
  auto r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto list = (*r)->GetList(victim.term);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kCorruption);
  EXPECT_NE(list.status().message().find("'" + victim.term + "'"), std::string::npos) << list.status().message();
  EXPECT_EQ((*r)->list_cache().stats().entries, 0u);  // nothing bad is cached
  for (const auto& td : c.terms) {
    if (td.term != victim.term) {
      EXPECT_TRUE((*r)->GetList(td.term).ok()) << td.term;
    }
  }
  // Structurally broken values too: truncated, and a term info of the wrong size.
  PutRaw(dir / "s", "lists", victim.term, victim.blob.substr(0, 40));
  PutRaw(dir / "s", "terms", victim.term, "short");
  r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->GetList(victim.term).status().code(), StatusCode::kCorruption);
  EXPECT_EQ((*r)->GetTermInfo(victim.term).status().code(), StatusCode::kCorruption);
  EXPECT_EQ((*r)->ForEachTerm([](std::string_view, const TermInfo&) { return true; }).code(), StatusCode::kCorruption);
}

TEST(ShardStoreTest, FlippedSstByteIsCorruption) {
  TempDir dir;
  const Corpus c = MakeCorpus(17, 0, 3000, 3000, 60);
  ASSERT_TRUE(WriteShard(c, dir / "s").ok());
  // The lists column family's table (compressed, so the blob cannot be found verbatim): damage a
  // byte a third of the way in, inside its data blocks.
  std::string largest;
  {
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const char* name : {"default", "terms", "lists", "docs", "positions", "source"})
      cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir / "s", cfs, &handles, &db).ok());
    std::vector<rocksdb::LiveFileMetaData> files;
    db->GetLiveFilesMetaData(&files);
    for (const auto& f : files)
      if (f.column_family_name == "lists") largest = dir / "s" + f.name;
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
    delete db;
  }
  ASSERT_FALSE(largest.empty());
  std::string data = testing::ReadFile(largest);
  data[data.size() / 3] ^= 0x10;
  testing::WriteFile(largest, data);
  auto r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int corrupt = 0;
  for (const auto& td : c.terms) {
    auto list = (*r)->GetList(td.term);
    if (list.ok()) {
      EXPECT_EQ((*list)->bytes(), td.blob) << td.term;
    } else {
      EXPECT_EQ(list.status().code(), StatusCode::kCorruption) << list.status().ToString();
      ++corrupt;
    }
  }
  EXPECT_GT(corrupt, 0);
}

TEST(ShardStoreTest, ConcurrentGetListThroughASmallCache) {
  TempDir dir;
  const Corpus c = MakeCorpus(19, 0, 4000, 4000, 200);
  ASSERT_TRUE(WriteShard(c, dir / "s").ok());
  ShardReaderOptions opt;
  size_t total = 0;
  for (const auto& td : c.terms) total += td.blob.size();
  opt.list_cache_bytes = total / 4;  // forces evictions
  auto r = ShardReader::Open(dir / "s", opt);
  ASSERT_TRUE(r.ok());
  constexpr int kThreads = 4, kLookups = 2000;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kLookups; ++i) {
        const auto& td = c.terms[rng() % c.terms.size()];
        auto list = (*r)->GetList(td.term);
        if (!list.ok() || (*list)->bytes() != td.blob) bad.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  const auto s = (*r)->list_cache().stats();
  EXPECT_EQ(s.hits + s.misses, uint64_t{kThreads} * kLookups);
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_LE(s.bytes, opt.list_cache_bytes);
}

}  // namespace
}  // namespace search
