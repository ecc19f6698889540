// Stored sources through the index builder and `searchctl index`: every document's source is its
// input line with the surrounding ASCII whitespace trimmed, byte for byte (raw UTF-8, escapes and
// \u sequences untouched, extra fields and their order kept, large documents), whatever the shard
// count, chunking and skipped lines; --no-source indexes have none.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <random>

#include "../random_json.hpp"
#include "cpu_exec/local_index.hpp"
#include "index_store/manifest.hpp"
#include "indexer/index_builder.hpp"
#include "tools_fixture.hpp"

namespace search {
namespace {

using testing::TempDir;

// A line's JSON object in many spellings, with `pad` as leading and trailing whitespace.
std::string RandomLine(std::mt19937& rng, size_t i, size_t size) {
  std::string contents;
  testing::AppendRandomJsonText(rng, &contents, size, 3);
  const std::string id = "\"id\" : \"doc\\u002d" + std::to_string(i) + "\"";
  const std::string body = "\"contents\":\"" + contents + "\"";
  const std::string extra = "\"meta\": {\"n\": [1, -2.5e+3, null, true], \"t\": \"\xE6\x97\xA5\"}";
  switch (rng() % 3) {
    case 0:
      return "{" + id + ", " + body + "}";
    case 1:
      return "{ " + body + " ,\t" + extra + ", " + id + " }";
    default:
      return "{" + extra + "," + id + "," + body + ",\"contents2\":\"x\"}";
  }
}

struct Input {
  std::string text;                  // the file
  std::vector<std::string> sources;  // by docID: the trimmed lines of the good documents
};

Input MakeInput(uint32_t seed, size_t n, bool with_bad_lines) {
  std::mt19937 rng(seed);
  Input in;
  static const char* const kPads[] = {"", " ", "\t", " \t ", "  ", "\t\t"};
  for (size_t i = 0; i < n; ++i) {
    size_t size = rng() % 700;
    if (i == n / 2) size = 3 << 20;  // one large document
    const std::string line = RandomLine(rng, i, size);
    const std::string lead = kPads[rng() % 6], trail = kPads[rng() % 6];
    in.text += lead + line + trail + (rng() % 5 == 0 ? "\r\n" : "\n");
    in.sources.push_back(line);
    if (rng() % 97 == 0) in.text += "  \t\n";                                  // blank lines are no documents
    if (with_bad_lines && rng() % 101 == 0) in.text += "{\"id\": \"bad\"}\n";  // no contents: skipped
  }
  return in;
}

void ExpectSources(const std::string& dir, const std::vector<std::string>& sources) {
  auto idx = LocalIndex::Open(dir);
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  size_t seen = 0;
  for (size_t s = 0; s < (*idx)->num_shards(); ++s) {
    const ShardReader& r = (*idx)->shard(s);
    ASSERT_TRUE(r.has_sources());
    std::vector<uint32_t> docs;
    for (uint32_t d = r.meta().doc_begin; d < r.meta().doc_end; ++d) docs.push_back(d);
    std::vector<std::string> got;
    const Status st = r.GetSources(docs, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(got.size(), docs.size());
    for (size_t i = 0; i < docs.size(); ++i) ASSERT_EQ(got[i], sources[docs[i]]) << "doc " << docs[i];
    seen += docs.size();
  }
  EXPECT_EQ(seen, sources.size());
}

TEST(IndexSources, SourcesAreTheTrimmedLinesByteForByte) {
  TempDir tmp;
  const Input in = MakeInput(7, 3000, /*with_bad_lines=*/true);
  testing::WriteText(tmp / "in.jsonl", in.text);
  for (uint32_t shards : {1u, 3u, 7u}) {
    SCOPED_TRACE(shards);
    IndexBuildOptions o;
    o.input = tmp / "in.jsonl";
    o.output = tmp / ("idx" + std::to_string(shards));
    o.shards = shards;
    o.threads = 2;
    o.skip_bad = true;
    o.chunk_bytes = 64 << 10;  // many chunks, committed out of parse order
    auto summary = BuildIndex(o);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ(summary->docs, in.sources.size());
    auto manifest = Manifest::Read(o.output);
    ASSERT_TRUE(manifest.ok());
    EXPECT_TRUE(manifest->sources);
    EXPECT_EQ(manifest->format_version, kIndexFormatVersion);
    ExpectSources(o.output, in.sources);
  }
}

// Whether the shard at `path` stores a source dictionary (meta/source_dict).
bool HasSourceDict(const std::string& path) {
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok()) return false;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path, cfs, &handles, &raw).ok()) return false;
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string v;
  const bool found = db->Get(rocksdb::ReadOptions(), handles[0], "meta/source_dict", &v).ok();
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  return found;
}

// The dictionary is trained once, on the input's first 1 MiB of sources, while the parser threads
// already encode: here it saves about 12 bytes a document, so the shards of 1 and 2 keep it and
// those of 5 (3,200 documents) do not. Blocks made before it was ready, blocks cut at chunk ends,
// blocks crossing a shard boundary and blocks encoded again without it all read back byte for byte.
TEST(IndexSources, DictionarySharedByTheShards) {
  TempDir tmp;
  Input in;
  std::mt19937 rng(21);
  for (size_t i = 0; i < 16000; ++i) {
    std::string line = RandomLine(rng, i, 200 + rng() % 400);
    in.text += line + "\n";
    in.sources.push_back(std::move(line));
  }
  testing::WriteText(tmp / "in.jsonl", in.text);
  for (uint32_t shards : {1u, 2u, 5u}) {
    SCOPED_TRACE(shards);
    IndexBuildOptions o;
    o.input = tmp / "in.jsonl";
    o.output = tmp / ("idx" + std::to_string(shards));
    o.shards = shards;
    o.threads = 3;
    o.chunk_bytes = 48 << 10;
    ASSERT_TRUE(BuildIndex(o).ok());
    ExpectSources(o.output, in.sources);
    auto run = testing::RunCommand({SEARCHCTL_PATH, "stats", "--index", o.output});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    size_t raw = 0;
    for (const std::string& source : in.sources) raw += source.size();
    const auto stats = nlohmann::json::parse(run.out);
    EXPECT_LT(stats["source_bytes"].get<uint64_t>(), raw) << run.out;
    for (uint32_t s = 0; s < shards; ++s)
      EXPECT_EQ(HasSourceDict(o.output + "/shard-" + std::to_string(s)), shards < 5) << s;
  }
}

TEST(IndexSources, NoSourceIndexHasNone) {
  TempDir tmp;
  const Input in = MakeInput(8, 500, false);
  testing::WriteText(tmp / "in.jsonl", in.text);
  IndexBuildOptions o;
  o.input = tmp / "in.jsonl";
  o.output = tmp / "idx";
  o.shards = 2;
  o.threads = 2;
  o.sources = false;
  ASSERT_TRUE(BuildIndex(o).ok());
  auto manifest = Manifest::Read(o.output);
  ASSERT_TRUE(manifest.ok());
  EXPECT_FALSE(manifest->sources);
  auto idx = LocalIndex::Open(o.output);
  ASSERT_TRUE(idx.ok());
  for (size_t s = 0; s < (*idx)->num_shards(); ++s) {
    const ShardReader& r = (*idx)->shard(s);
    EXPECT_FALSE(r.has_sources());
    std::vector<std::string> got;
    const std::vector<uint32_t> docs = {r.meta().doc_begin};
    EXPECT_EQ(r.GetSources(docs, &got).code(), StatusCode::kNotFound);
    EXPECT_EQ(*r.GetExternalId(r.meta().doc_begin), "doc-" + std::to_string(r.meta().doc_begin));
  }
}

// The command line: `searchctl index` stores sources by default, --no-source skips them;
// `searchctl query --source` prints them.
TEST(IndexSources, SearchctlIndexFlag) {
  TempDir tmp;
  const Input in = MakeInput(9, 300, false);
  testing::WriteText(tmp / "in.jsonl", in.text);
  auto run =
      testing::RunCommand({SEARCHCTL_PATH, "index", "--input", tmp / "in.jsonl", "--out", tmp / "a", "--shards", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ExpectSources(tmp / "a", in.sources);
  run = testing::RunCommand(
      {SEARCHCTL_PATH, "index", "--input", tmp / "in.jsonl", "--out", tmp / "b", "--shards", "2", "--no-source"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto manifest = Manifest::Read(tmp / "b");
  ASSERT_TRUE(manifest.ok());
  EXPECT_FALSE(manifest->sources);

  // searchctl query --source splices each hit's source into its answer line, byte for byte.
  run =
      testing::RunCommand({SEARCHCTL_PATH, "query", "--index", tmp / "a", "--k", "5", "--source", "--query", "heart"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto answer = nlohmann::json::parse(run.out);
  ASSERT_EQ(answer["hits"].size(), 5u) << run.out;
  for (const auto& hit : answer["hits"]) {
    const std::string id = hit["id"];
    ASSERT_EQ(id.rfind("doc-", 0), 0u) << id;
    const std::string& source = in.sources[std::stoul(id.substr(4))];
    EXPECT_NE(run.out.find("\"_source\": " + source), std::string::npos) << id;
    EXPECT_EQ(hit["_source"], nlohmann::json::parse(source)) << id;
  }
  run = testing::RunCommand({SEARCHCTL_PATH, "query", "--index", tmp / "b", "--source", "--query", "heart"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("stores no sources"), std::string::npos) << run.err;

  // searchctl stats counts the stored sources: blocks in each shard and bytes below the raw text
  // (the documents compress), none for the --no-source index.
  size_t raw = 0;
  for (const std::string& source : in.sources) raw += source.size();
  run = testing::RunCommand({SEARCHCTL_PATH, "stats", "--index", tmp / "a"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto with = nlohmann::json::parse(run.out);
  EXPECT_GE(with["source_blocks"].get<uint64_t>(), 2u) << run.out;
  EXPECT_GT(with["source_bytes"].get<uint64_t>(), 0u) << run.out;
  EXPECT_LT(with["source_bytes"].get<uint64_t>(), raw) << run.out;
  run = testing::RunCommand({SEARCHCTL_PATH, "stats", "--index", tmp / "b"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto without = nlohmann::json::parse(run.out);
  EXPECT_EQ(without["source_blocks"], 0u) << run.out;
  EXPECT_EQ(without["source_bytes"], 0u) << run.out;
}

}  // namespace
}  // namespace search
