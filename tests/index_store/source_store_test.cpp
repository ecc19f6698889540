// Stored sources through ShardWriter -> ShardReader::GetSources against the plain reference (the
// sources given): byte-identical across block boundaries, shard ranges, the dictionary and the
// cache, from several threads; shards without sources; a damaged source block (Corruption, never
// other text); ready blocks given by the index builder; a version-2 shard (no source column family)
// still opens.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <thread>

#include "../random_json.hpp"
#include "index_store/shard_store.hpp"
#include "index_store/source_block.hpp"
#include "shard_fixture.hpp"

namespace search {
namespace {

using testing::Corpus;
using testing::MakeCorpus;
using testing::TempDir;

// A JSON object with escapes, \u sequences and UTF-8 of 1 to 4 bytes, about `size` bytes long.
std::string RandomSource(std::mt19937& rng, uint32_t doc, size_t size) {
  std::string s =
      "{\"id\": \"d" + std::to_string(doc) + "\", \"title\": \"\xE6\x97\xA5\xE6\x9C\xAC\", \"contents\": \"";
  testing::AppendRandomJsonText(rng, &s, size, 4);
  return s + "\", \"n\": [1, 2.5e3, null, true]}";
}

struct SourceCorpus {
  Corpus c;
  std::vector<std::string> sources;  // by doc - doc_begin
};

SourceCorpus MakeSourceCorpus(uint32_t seed, uint32_t doc_begin, uint32_t doc_end, uint32_t total, bool large) {
  SourceCorpus sc{MakeCorpus(seed, doc_begin, doc_end, total, 10), {}};
  sc.c.meta.sources = true;
  std::mt19937 rng(seed);
  for (uint32_t d = doc_begin; d < doc_end; ++d) {
    size_t size = 20 + rng() % 600;
    if (rng() % 50 == 0) size = 20000 + rng() % 40000;  // larger than a block's target alone
    if (large && d == doc_begin + (doc_end - doc_begin) / 2) size = 9 << 20;
    sc.sources.push_back(rng() % 40 == 0 ? std::string("{}") : RandomSource(rng, d, size));
  }
  return sc;
}

Status WriteSourceShard(const SourceCorpus& sc, const std::string& path) {
  const Corpus& c = sc.c;
  auto w = ShardWriter::Create(path, c.meta);
  if (!w.ok()) return w.status();
  for (const auto& td : c.terms) SEARCH_RETURN_IF_ERROR((*w)->AddTerm(td.term, td.info, td.blob, td.pos_blob));
  for (uint32_t d = c.meta.doc_begin; d < c.meta.doc_end; ++d) {
    const uint32_t i = d - c.meta.doc_begin;
    SEARCH_RETURN_IF_ERROR((*w)->AddDoc(d, c.ext_ids[i], c.lengths[i], sc.sources[i]));
  }
  return (*w)->Finish();
}

// Opens the shard's database read-write with plain RocksDB and runs fn(db, handles by name).
template <class Fn>
void WithRawDb(const std::string& path, Fn fn) {
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), path, cfs, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
  for (size_t i = 0; i < names.size(); ++i) by_name[names[i]] = handles[i];
  fn(db.get(), by_name);
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  ASSERT_TRUE(db->Close().ok());
}

void ExpectAllSources(const ShardReader& r, const SourceCorpus& sc, uint32_t seed) {
  const uint32_t b = sc.c.meta.doc_begin, e = sc.c.meta.doc_end;
  // Every document once, in order, in batches of 10 (a top-k's fetch).
  for (uint32_t d = b; d < e; d += 10) {
    std::vector<uint32_t> docs;
    for (uint32_t x = d; x < std::min(e, d + 10); ++x) docs.push_back(x);
    std::vector<std::string> got;
    Status st = r.GetSources(docs, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(got.size(), docs.size());
    for (size_t i = 0; i < docs.size(); ++i) ASSERT_EQ(got[i], sc.sources[docs[i] - b]) << "doc " << docs[i];
  }
  // Random batches: any order, repeats, blocks shared and not.
  std::mt19937 rng(seed);
  for (int round = 0; round < 200; ++round) {
    std::vector<uint32_t> docs(1 + rng() % 20);
    for (auto& x : docs) x = b + rng() % (e - b);
    if (docs.size() > 1) docs[1] = docs[0];
    std::vector<std::string> got;
    ASSERT_TRUE(r.GetSources(docs, &got).ok());
    ASSERT_EQ(got.size(), docs.size());
    for (size_t i = 0; i < docs.size(); ++i) ASSERT_EQ(got[i], sc.sources[docs[i] - b]) << "doc " << docs[i];
  }
}

TEST(SourceStoreTest, SourcesReadBackByteIdentical) {
  TempDir dir;
  // Shard ranges that start at 0 and elsewhere, one document, and one block exactly.
  for (auto [b, e] : {std::pair<uint32_t, uint32_t>{0, 1}, {0, 3000}, {777, 2000}, {5, 5 + kSourceBlockMaxDocs}}) {
    SCOPED_TRACE(std::to_string(b) + ".." + std::to_string(e));
    const SourceCorpus sc = MakeSourceCorpus(b + e, b, e, 4000, false);
    const std::string path = dir / ("s" + std::to_string(b) + "-" + std::to_string(e));
    ASSERT_TRUE(WriteSourceShard(sc, path).ok());
    auto r = ShardReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE((*r)->has_sources());
    EXPECT_TRUE((*r)->meta().sources);
    ExpectAllSources(**r, sc, 1);
    // Outside the shard: InvalidArgument, nothing returned.
    std::vector<std::string> got = {"stale"};
    const std::vector<uint32_t> outside = {b, e};
    EXPECT_EQ((*r)->GetSources(outside, &got).code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(got.empty());
    EXPECT_TRUE((*r)->GetSources({}, &got).ok());
    EXPECT_TRUE(got.empty());
  }
}

// A shard without documents (more shards than documents elsewhere) still has sources: none.
TEST(SourceStoreTest, EmptyShardWithSources) {
  TempDir dir;
  SourceCorpus sc{MakeCorpus(2, 10, 10, 20, 0), {}};
  sc.c.meta.sources = true;
  ASSERT_TRUE(WriteSourceShard(sc, dir / "s").ok());
  auto r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->has_sources());
  std::vector<std::string> got;
  EXPECT_TRUE((*r)->GetSources({}, &got).ok());
  const std::vector<uint32_t> docs = {10};
  EXPECT_EQ((*r)->GetSources(docs, &got).code(), StatusCode::kInvalidArgument);
}

// Past the dictionary's training sample (4 MiB), with a document of 9 MiB; read through a cache
// too small to hold every block, from several threads at once.
TEST(SourceStoreTest, LargeShardWithDictionaryFromManyThreads) {
  TempDir dir;
  const SourceCorpus sc = MakeSourceCorpus(9, 100, 20100, 30000, true);
  ASSERT_TRUE(WriteSourceShard(sc, dir / "s").ok());
  bool has_dict = false;
  WithRawDb(dir / "s", [&](rocksdb::DB* db, auto& cfs) {
    std::string v;
    has_dict = db->Get(rocksdb::ReadOptions(), cfs["default"], "meta/source_dict", &v).ok();
  });
  EXPECT_TRUE(has_dict);  // similar documents: the dictionary pays
  ShardReaderOptions options;
  options.source_cache_bytes = 256 << 10;
  auto r = ShardReader::Open(dir / "s", options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) threads.emplace_back([&, t] { ExpectAllSources(**r, sc, 10 + t); });
  for (auto& t : threads) t.join();
}

TEST(SourceStoreTest, ShardWithoutSources) {
  TempDir dir;
  Corpus c = MakeCorpus(3, 0, 500, 500, 10);
  ASSERT_FALSE(c.meta.sources);
  {
    auto w = ShardWriter::Create(dir / "s", c.meta);
    ASSERT_TRUE(w.ok());
    for (const auto& td : c.terms) ASSERT_TRUE((*w)->AddTerm(td.term, td.info, td.blob).ok());
    EXPECT_EQ((*w)->AddDoc(0, c.ext_ids[0], c.lengths[0], "{}").code(), StatusCode::kInvalidArgument);
    for (uint32_t d = 0; d < 500; ++d) ASSERT_TRUE((*w)->AddDoc(d, c.ext_ids[d], c.lengths[d]).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE((*r)->has_sources());
  std::vector<std::string> got;
  const std::vector<uint32_t> docs = {1, 2};
  const Status st = (*r)->GetSources(docs, &got);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("no-source"), std::string::npos) << st.message();

  // A shard with sources needs one for every document.
  c.meta.sources = true;
  auto w = ShardWriter::Create(dir / "t", c.meta);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->AddDoc(0, c.ext_ids[0], c.lengths[0]).code(), StatusCode::kInvalidArgument);
  const std::string huge(kMaxSourceBytes + 1, ' ');
  EXPECT_EQ((*w)->AddDoc(0, c.ext_ids[0], c.lengths[0], huge).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*w)->AddDoc(0, c.ext_ids[0], c.lengths[0], "{}").ok());
}

// Ready blocks (the index builder's way): blocks of any size encoded with a trained dictionary,
// given with it, read back byte for byte and the dictionary stored; what breaks the contract
// (a source given to AddDoc, a block out of order, outside the shard or damaged, a dictionary block
// without the dictionary, blocks missing at Finish) is InvalidArgument.
TEST(SourceStoreTest, ReadyBlocksWithAndWithoutTheDictionary) {
  TempDir dir;
  const SourceCorpus sc = MakeSourceCorpus(11, 300, 4300, 5000, false);
  const Corpus& c = sc.c;
  std::vector<std::string_view> views(sc.sources.begin(), sc.sources.end());
  auto dict = SourceDict::Make(SourceDict::Train(views, kSourceDictBytes), kSourceZstdLevel);
  ASSERT_TRUE(dict.ok()) << dict.status().ToString();
  for (const bool with_dict : {true, false}) {
    SCOPED_TRACE(with_dict);
    const SourceDict* d = with_dict ? dict->get() : nullptr;
    // Blocks of 1 to 40 documents.
    std::mt19937 rng(with_dict ? 1 : 2);
    std::vector<std::pair<uint32_t, std::string>> blocks;
    SourceBlockEncoder enc(kSourceZstdLevel);
    for (uint32_t i = 0; i < views.size();) {
      const uint32_t n = std::min<uint32_t>(1 + rng() % 40, static_cast<uint32_t>(views.size()) - i);
      std::string value;
      ASSERT_TRUE(enc.Encode(std::span(views).subspan(i, n), d, &value).ok());
      blocks.emplace_back(c.meta.doc_begin + i, std::move(value));
      i += n;
    }
    const std::string path = dir / (with_dict ? "with" : "without");
    auto w = ShardWriter::Create(path, c.meta);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->SetSourceDict(with_dict ? *dict : nullptr).ok());
    EXPECT_EQ((*w)->SetSourceDict(nullptr).code(), StatusCode::kInvalidArgument);  // twice
    for (const auto& td : c.terms) ASSERT_TRUE((*w)->AddTerm(td.term, td.info, td.blob, td.pos_blob).ok());
    EXPECT_EQ((*w)->AddDoc(300, c.ext_ids[0], c.lengths[0], sc.sources[0]).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ((*w)->AddSourceBlock(blocks[1].first, blocks[1].second).code(), StatusCode::kInvalidArgument);
    std::string damaged = blocks[0].second;
    damaged[damaged.size() / 2] ^= 0x10;
    EXPECT_EQ((*w)->AddSourceBlock(blocks[0].first, damaged).code(), StatusCode::kInvalidArgument);
    for (const auto& [first, value] : blocks) ASSERT_TRUE((*w)->AddSourceBlock(first, value).ok());
    EXPECT_EQ((*w)->AddSourceBlock(c.meta.doc_end, blocks[0].second).code(), StatusCode::kInvalidArgument);
    for (uint32_t doc = c.meta.doc_begin; doc < c.meta.doc_end; ++doc) {
      const uint32_t i = doc - c.meta.doc_begin;
      ASSERT_TRUE((*w)->AddDoc(doc, c.ext_ids[i], c.lengths[i]).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
    bool has_dict = false;
    WithRawDb(path, [&](rocksdb::DB* db, auto& cfs) {
      std::string v;
      has_dict = db->Get(rocksdb::ReadOptions(), cfs["default"], "meta/source_dict", &v).ok();
    });
    EXPECT_EQ(has_dict, with_dict);
    auto r = ShardReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectAllSources(**r, sc, 3);
  }

  // A dictionary block for a writer without the dictionary; blocks missing at Finish.
  std::string value;
  SourceBlockEncoder enc(kSourceZstdLevel);
  ASSERT_TRUE(enc.Encode(std::span(views).subspan(0, 10), dict->get(), &value).ok());
  ASSERT_EQ(static_cast<uint8_t>(value[5]), static_cast<uint8_t>(SourceCodec::kZstdDict));
  auto w = ShardWriter::Create(dir / "bad", c.meta);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->SetSourceDict(nullptr).ok());
  EXPECT_EQ((*w)->AddSourceBlock(c.meta.doc_begin, value).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(enc.Encode(std::span(views).subspan(0, 10), nullptr, &value).ok());
  ASSERT_TRUE((*w)->AddSourceBlock(c.meta.doc_begin, value).ok());
  for (const auto& td : c.terms) ASSERT_TRUE((*w)->AddTerm(td.term, td.info, td.blob, td.pos_blob).ok());
  for (uint32_t doc = c.meta.doc_begin; doc < c.meta.doc_end; ++doc) {
    const uint32_t i = doc - c.meta.doc_begin;
    ASSERT_TRUE((*w)->AddDoc(doc, c.ext_ids[i], c.lengths[i]).ok());
  }
  EXPECT_EQ((*w)->Finish().code(), StatusCode::kInvalidArgument);
  // SetSourceDict after a document, or for a shard without sources.
  auto late = ShardWriter::Create(dir / "late", c.meta);
  ASSERT_TRUE(late.ok());
  ASSERT_TRUE((*late)->AddDoc(300, c.ext_ids[0], c.lengths[0], sc.sources[0]).ok());
  EXPECT_EQ((*late)->SetSourceDict(nullptr).code(), StatusCode::kInvalidArgument);
  ShardMeta plain = c.meta;
  plain.sources = false;
  auto none = ShardWriter::Create(dir / "none", plain);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->SetSourceDict(nullptr).code(), StatusCode::kInvalidArgument);
}

// Damage one stored source block through RocksDB: its documents are Corruption (every time: an
// error is not cached), the other blocks still read back.
TEST(SourceStoreTest, CorruptSourceBlockIsCorruption) {
  TempDir dir;
  const SourceCorpus sc = MakeSourceCorpus(21, 0, 2000, 2000, false);
  for (int how = 0; how < 4; ++how) {
    SCOPED_TRACE(how);
    const std::string path = dir / ("s" + std::to_string(how));
    ASSERT_TRUE(WriteSourceShard(sc, path).ok());
    std::string key;
    uint32_t count = 0;
    WithRawDb(path, [&](rocksdb::DB* db, auto& cfs) {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cfs["source"]));
      it->SeekToFirst();
      for (int i = 0; i < 3 && it->Valid(); ++i) it->Next();  // the fourth block
      ASSERT_TRUE(it->Valid());
      key = it->key().ToString();
      std::string value = it->value().ToString();
      count = PeekSourceBlockCount(value);
      it.reset();
      if (how == 0) value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x20);  // payload
      if (how == 1) value[9] = static_cast<char>(value[9] ^ 0x01);                                // count
      if (how == 2) value.resize(value.size() - 7);                                               // truncated
      if (how == 3) {
        ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), cfs["source"], key).ok());  // missing
      } else {
        ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cfs["source"], key, value).ok());
      }
      ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), cfs["source"]).ok());
    });
    ASSERT_EQ(key.size(), 4u);
    const uint32_t first = static_cast<uint32_t>(static_cast<uint8_t>(key[0])) << 24 |
                           static_cast<uint32_t>(static_cast<uint8_t>(key[1])) << 16 |
                           static_cast<uint32_t>(static_cast<uint8_t>(key[2])) << 8 | static_cast<uint8_t>(key[3]);
    ASSERT_GT(count, 0u);
    auto r = ShardReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (uint32_t doc : {first, first + count - 1}) {
      for (int again = 0; again < 2; ++again) {
        std::vector<std::string> got;
        const std::vector<uint32_t> docs = {0, doc};
        const Status st = (*r)->GetSources(docs, &got);
        EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
        EXPECT_TRUE(got.empty());
        EXPECT_NE(st.message().find("source block"), std::string::npos) << st.message();
      }
    }
    std::vector<std::string> got;
    const std::vector<uint32_t> fine = {0, first + count, 1999};
    ASSERT_TRUE((*r)->GetSources(fine, &got).ok());
    for (size_t i = 0; i < fine.size(); ++i) EXPECT_EQ(got[i], sc.sources[fine[i]]);
  }
}

// A block index that disagrees with the blocks (a block start dropped: the block before claims the
// next block's documents too) is Corruption for those documents, never another document's text; a
// block index out of order fails the open.
TEST(SourceStoreTest, BlockIndexDisagreeingWithTheBlocksIsCorruption) {
  TempDir dir;
  const SourceCorpus sc = MakeSourceCorpus(23, 0, 2000, 2000, false);
  for (int how = 0; how < 2; ++how) {
    const std::string path = dir / ("s" + std::to_string(how));
    ASSERT_TRUE(WriteSourceShard(sc, path).ok());
    uint32_t second = 0, third = 0;
    WithRawDb(path, [&](rocksdb::DB* db, auto& cfs) {
      std::string starts;
      ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), cfs["default"], "meta/source_blocks", &starts).ok());
      ASSERT_GE(starts.size(), 12u);
      std::memcpy(&second, starts.data() + 4, 4);  // little-endian hosts, as the format
      std::memcpy(&third, starts.data() + 8, 4);
      if (how == 0) {
        starts.erase(4, 4);
      } else {
        std::swap_ranges(starts.begin() + 4, starts.begin() + 8, starts.begin() + 8);
      }
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cfs["default"], "meta/source_blocks", starts).ok());
      ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), cfs["default"]).ok());
    });
    auto r = ShardReader::Open(path);
    if (how == 1) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (uint32_t doc : {0u, second, third - 1}) {
      std::vector<std::string> got;
      const std::vector<uint32_t> docs = {doc};
      EXPECT_EQ((*r)->GetSources(docs, &got).code(), StatusCode::kCorruption) << doc;
    }
    std::vector<std::string> got;
    const std::vector<uint32_t> fine = {third, 1999};
    ASSERT_TRUE((*r)->GetSources(fine, &got).ok());
    EXPECT_EQ(got[0], sc.sources[third]);
  }
}

// A version-2 shard (before sources: no source column family, no `sources` field) opens as a
// shard without sources.
TEST(SourceStoreTest, VersionTwoShardOpensWithoutSources) {
  TempDir dir;
  const Corpus c = MakeCorpus(4, 0, 300, 300, 20);
  ASSERT_TRUE(testing::WriteShard(c, dir / "s").ok());
  WithRawDb(dir / "s", [&](rocksdb::DB* db, auto& cfs) {
    std::string meta;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), cfs["default"], "meta/shard", &meta).ok());
    const std::string from = "\"format_version\":3", to = "\"format_version\":2";
    ASSERT_NE(meta.find(from), std::string::npos) << meta;
    meta.replace(meta.find(from), from.size(), to);
    const std::string field = ",\"sources\":false";
    ASSERT_NE(meta.find(field), std::string::npos) << meta;
    meta.erase(meta.find(field), field.size());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cfs["default"], "meta/shard", meta).ok());
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions(), cfs["default"], "meta/format_version", std::string("\x02\0\0\0", 4)).ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), cfs["default"]).ok());
    ASSERT_TRUE(db->DropColumnFamily(cfs["source"]).ok());
  });
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir / "s", &names).ok());
  ASSERT_EQ(std::count(names.begin(), names.end(), "source"), 0);
  auto r = ShardReader::Open(dir / "s");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->meta().format_version, 2u);
  EXPECT_FALSE((*r)->has_sources());
  std::vector<std::string> got;
  const std::vector<uint32_t> docs = {0};
  EXPECT_EQ((*r)->GetSources(docs, &got).code(), StatusCode::kNotFound);
  // The rest of the shard reads as before.
  EXPECT_EQ(*(*r)->GetExternalId(7), c.ext_ids[7]);
  auto list = (*r)->GetList(c.terms[0].term);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)->view.count(), c.terms[0].docs.size());
  EXPECT_TRUE(ShardListCacheNeed(dir / "s").ok());

  // A version-3 shard without its source column family is damaged, not old.
  ASSERT_TRUE(testing::WriteShard(c, dir / "t").ok());
  WithRawDb(dir / "t", [&](rocksdb::DB* db, auto& cfs) { ASSERT_TRUE(db->DropColumnFamily(cfs["source"]).ok()); });
  auto bad = ShardReader::Open(dir / "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption) << bad.status().ToString();
}

}  // namespace
}  // namespace search
