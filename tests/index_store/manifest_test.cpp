// Manifest JSON round trips, clear rejection of bad manifests, shard checksums and VerifyIndex.
#include "index_store/manifest.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shard_fixture.hpp"

namespace search {
namespace {

using nlohmann::json;
using testing::TempDir;

Manifest SampleManifest(uint32_t num_shards = 3, uint64_t num_docs = 1000) {
  Manifest m;
  m.format_version = kIndexFormatVersion;
  m.positions = true;
  m.stats = {num_docs, num_docs * 37 + 5};
  m.bm25 = {1.2f, 0.75f};
  m.analyzer.stem_language = "english";
  m.analyzer.stopwords = {"a", "of", "the"};
  m.created_by = "searchctl 0.1.0";
  for (uint32_t i = 0; i < num_shards; ++i) {
    ShardEntry e;
    e.id = i;
    e.path = "shard-" + std::to_string(i);
    ShardRange(num_docs, num_shards, i, &e.doc_begin, &e.doc_end);
    e.num_terms = 100 + i;
    e.num_postings = 5000 + i;
    char sum[16];
    std::snprintf(sum, sizeof(sum), "%08x", 0xdeadbe00u + i);
    e.checksum = std::string("crc32c:") + sum;
    m.shards.push_back(e);
  }
  return m;
}

void ExpectEqual(const Manifest& a, const Manifest& b) {
  EXPECT_EQ(a.format_version, b.format_version);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.stats.num_docs, b.stats.num_docs);
  EXPECT_EQ(a.stats.total_tokens, b.stats.total_tokens);
  EXPECT_EQ(a.bm25.k1, b.bm25.k1);
  EXPECT_EQ(a.bm25.b, b.bm25.b);
  EXPECT_EQ(a.analyzer, b.analyzer);
  EXPECT_EQ(a.created_by, b.created_by);
  ASSERT_EQ(a.shards.size(), b.shards.size());
  for (size_t i = 0; i < a.shards.size(); ++i) {
    EXPECT_EQ(a.shards[i].id, b.shards[i].id);
    EXPECT_EQ(a.shards[i].path, b.shards[i].path);
    EXPECT_EQ(a.shards[i].doc_begin, b.shards[i].doc_begin);
    EXPECT_EQ(a.shards[i].doc_end, b.shards[i].doc_end);
    EXPECT_EQ(a.shards[i].num_terms, b.shards[i].num_terms);
    EXPECT_EQ(a.shards[i].num_postings, b.shards[i].num_postings);
    EXPECT_EQ(a.shards[i].checksum, b.shards[i].checksum);
  }
}

TEST(ManifestTest, JsonRoundTrip) {
  const Manifest m = SampleManifest();
  const std::string text = m.ToJson();
  auto back = Manifest::FromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectEqual(m, *back);
  // Readable numbers, analyzer embedded as an object, avgdl present.
  const json j = json::parse(text);
  EXPECT_EQ(j["bm25"]["k1"].dump(), "1.2");
  EXPECT_EQ(j["bm25"]["b"].dump(), "0.75");
  EXPECT_TRUE(j["analyzer"].is_object());
  EXPECT_EQ(j["analyzer"]["stem"], "english");
  EXPECT_DOUBLE_EQ(j["stats"]["avgdl"].get<double>(), m.stats.avgdl());
  // Odd float parameters survive exactly too.
  Manifest odd = m;
  odd.bm25 = {0.123456789f, 1.0f / 3.0f};
  auto odd_back = Manifest::FromJson(odd.ToJson());
  ASSERT_TRUE(odd_back.ok());
  EXPECT_EQ(odd_back->bm25.k1, odd.bm25.k1);
  EXPECT_EQ(odd_back->bm25.b, odd.bm25.b);
}

TEST(ManifestTest, WriteAndReadBack) {
  TempDir dir;
  auto missing = Manifest::Read(dir.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  const Manifest m = SampleManifest(4, 10);
  ASSERT_TRUE(m.Write(dir.path()).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "manifest.json.tmp"));
  auto back = Manifest::Read(dir.path());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectEqual(m, *back);
  // Overwrite in place.
  Manifest m2 = SampleManifest(2, 10);
  ASSERT_TRUE(m2.Write(dir.path()).ok());
  EXPECT_EQ(Manifest::Read(dir.path())->shards.size(), 2u);
  // A manifest Read would reject is never written.
  Manifest bad = m2;
  bad.shards[1].path = "../elsewhere";
  EXPECT_EQ(bad.Write(dir.path()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Manifest::Read(dir.path())->shards[1].path, "shard-1");
}

// FromJson of `j` fails with `code`, and the message mentions `needle`.
void ExpectRejected(const json& j, StatusCode code, const std::string& needle) {
  auto r = Manifest::FromJson(j.dump());
  ASSERT_FALSE(r.ok()) << j.dump();
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(ManifestTest, BadManifestsAreRejectedClearly) {
  const std::string good = SampleManifest().ToJson();
  const json base = json::parse(good);
  // Not JSON, or JSON of the wrong shape.
  EXPECT_EQ(Manifest::FromJson("{nope").status().code(), StatusCode::kCorruption);
  EXPECT_NE(Manifest::FromJson("{nope").status().message().find("not valid JSON"), std::string::npos);
  EXPECT_EQ(Manifest::FromJson("[1, 2]").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(Manifest::FromJson("").status().code(), StatusCode::kCorruption);
  // Every truncation fails (the last byte is a newline, so stop before the closing brace).
  const size_t close = good.rfind('}');
  for (size_t len = 0; len < close; len += 7) {
    auto r = Manifest::FromJson(good.substr(0, len));
    ASSERT_FALSE(r.ok()) << len;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  }
  // Each missing field is named.
  for (const auto& [key, unused] : base.items()) {
    json j = base;
    j.erase(key);
    ExpectRejected(j, StatusCode::kCorruption, "'" + key + "'");
  }
  for (const char* key : {"id", "path", "doc_begin", "doc_end", "num_terms", "num_postings", "checksum"}) {
    json j = base;
    j["shards"][1].erase(key);
    ExpectRejected(j, StatusCode::kCorruption, std::string("shards[1]: field '") + key + "'");
  }
  for (const char* key : {"num_docs", "total_tokens", "avgdl"}) {
    json j = base;
    j["stats"].erase(key);
    ExpectRejected(j, StatusCode::kCorruption, std::string("'") + key + "'");
  }
  // Wrong types and ranges.
  auto with = [&](const json::json_pointer& ptr, const json& v) {
    json j = base;
    j[ptr] = v;
    return j;
  };
  ExpectRejected(with("/format_version"_json_pointer, "1"), StatusCode::kCorruption, "'format_version'");
  ExpectRejected(with("/format_version"_json_pointer, 4), StatusCode::kInvalidArgument,
                 "index format version 4, this build reads 2 to 3");
  // A version-1 index (before positions) is to be rebuilt, and the error says how.
  ExpectRejected(with("/format_version"_json_pointer, 1), StatusCode::kInvalidArgument,
                 "index format version 1, this build reads 2 to 3: the index was built by an older version of "
                 "searchctl; rebuild it (run `searchctl index` again");
  ExpectRejected(with("/positions"_json_pointer, 1), StatusCode::kCorruption, "'positions'");
  ExpectRejected(with("/stats/num_docs"_json_pointer, -5), StatusCode::kCorruption, "'num_docs'");
  ExpectRejected(with("/stats/avgdl"_json_pointer, 1.5), StatusCode::kCorruption, "avgdl");
  ExpectRejected(with("/bm25/b"_json_pointer, 2.0), StatusCode::kCorruption, "'b'");
  ExpectRejected(with("/bm25/k1"_json_pointer, "0.9"), StatusCode::kCorruption, "'k1'");
  ExpectRejected(with("/analyzer/stem"_json_pointer, 7), StatusCode::kCorruption, "analyzer");
  ExpectRejected(with("/shards"_json_pointer, json::array()), StatusCode::kCorruption, "'shards'");
  ExpectRejected(with("/shards"_json_pointer, "shard-0"), StatusCode::kCorruption, "'shards'");
  ExpectRejected(with("/shards/0/path"_json_pointer, "../../etc"), StatusCode::kCorruption, "path");
  ExpectRejected(with("/shards/0/path"_json_pointer, "a/b"), StatusCode::kCorruption, "path");
  ExpectRejected(with("/shards/2/checksum"_json_pointer, "crc32c:1234"), StatusCode::kCorruption, "checksum");
  ExpectRejected(with("/shards/2/checksum"_json_pointer, "md5:12345678"), StatusCode::kCorruption, "checksum");
  ExpectRejected(with("/shards/1/id"_json_pointer, 2), StatusCode::kCorruption, "id 2, expected 1");
  ExpectRejected(with("/shards/1/doc_end"_json_pointer, 700), StatusCode::kCorruption, "doc range");
  ExpectRejected(with("/shards/0/doc_begin"_json_pointer, 1ull << 40), StatusCode::kCorruption, "'doc_begin'");
}

TEST(ManifestTest, ChecksumsAndVerifyIndex) {
  TempDir dir;
  constexpr uint32_t kShards = 2, kDocs = 600;
  Manifest m;
  m.format_version = kIndexFormatVersion;
  m.created_by = "manifest_test";
  for (uint32_t i = 0; i < kShards; ++i) {
    uint32_t begin, end;
    ShardRange(kDocs, kShards, i, &begin, &end);
    testing::Corpus c = testing::MakeCorpus(40 + i, begin, end, kDocs, 30);
    c.meta.shard_id = i;
    c.meta.num_shards = kShards;
    const std::string path = "shard-" + std::to_string(i);
    ASSERT_TRUE(testing::WriteShard(c, dir / path).ok());
    m.stats = c.meta.stats;
    m.bm25 = c.meta.bm25;
    m.analyzer = c.meta.analyzer;
    auto sum = ComputeShardChecksum(dir / path);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    // Reference: CRC-32C of the SST files concatenated in name order, in one call.
    std::string all;
    for (const auto& f : testing::SstFiles(dir / path)) all += testing::ReadFile(f);
    char want[32];
    std::snprintf(want, sizeof(want), "crc32c:%08x", Crc32c(all.data(), all.size()));
    EXPECT_EQ(*sum, want);
    m.shards.push_back(ShardEntry{i, path, begin, end, c.terms.size(), 0, *sum});
  }
  ASSERT_TRUE(m.Write(dir.path()).ok());
  Status ok = VerifyIndex(dir.path());
  ASSERT_TRUE(ok.ok()) << ok.ToString();

  // One flipped byte in shard 1: its checksum changes and VerifyIndex names the shard.
  const std::string victim = testing::SstFiles(dir / "shard-1").front();
  const std::string original = testing::ReadFile(victim);
  std::string damaged = original;
  damaged[damaged.size() / 2] ^= 0x01;
  testing::WriteFile(victim, damaged);
  EXPECT_NE(*ComputeShardChecksum(dir / "shard-1"), m.shards[1].checksum);
  Status bad = VerifyIndex(dir.path());
  EXPECT_EQ(bad.code(), StatusCode::kCorruption);
  EXPECT_NE(bad.message().find("shard 1"), std::string::npos) << bad.message();
  testing::WriteFile(victim, original);
  EXPECT_TRUE(VerifyIndex(dir.path()).ok());

  // A missing shard directory is Corruption naming it; a missing directory alone is NotFound.
  std::filesystem::remove_all(dir / "shard-0");
  EXPECT_EQ(ComputeShardChecksum(dir / "shard-0").status().code(), StatusCode::kNotFound);
  bad = VerifyIndex(dir.path());
  EXPECT_EQ(bad.code(), StatusCode::kCorruption);
  EXPECT_NE(bad.message().find("shard 0"), std::string::npos) << bad.message();
  std::filesystem::remove(dir / "manifest.json");
  EXPECT_EQ(VerifyIndex(dir.path()).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace search
