// CIFF import: a CIFF written from a text corpus imports into an index that answers exactly like
// the index the JSON-lines builder makes from the same text; malformed files (every truncation,
// bad varints, wrong wire types, wrong counts, bad docIDs) are refused with an error naming the
// byte offset and leave nothing behind; unknown fields of every wire type are skipped.
#include "scale/import_ciff.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "indexer/index_builder.hpp"
#include "scale/ciff_format.hpp"
#include "scale/index_stats.hpp"
#include "scale_fixture.hpp"

namespace search {
namespace {

using scaletest::TempDir;

Result<CiffImportSummary> Import(const std::string& file, const std::string& out, uint32_t shards = 1) {
  return scaletest::ImportCiffFile(file, out, shards);
}

TEST(CiffImportTest, AnswersLikeTheJsonlIndexOfTheSameText) {
  TempDir tmp;
  const auto docs = scaletest::RandomTexts(600, 250, 35, 21);
  const auto inv = scaletest::Invert(docs);
  scaletest::WriteJsonl(tmp / "c.jsonl", docs);
  ASSERT_TRUE(BuildIndex(scaletest::PlainJsonlOptions(tmp / "c.jsonl", tmp / "jsonl", 3)).ok());
  // Lists and doc records shuffled: the importer sorts the terms and places the records.
  scaletest::WriteBytes(tmp / "c.ciff", scaletest::MakeCiff(docs, inv, /*shuffle_seed=*/99));
  auto s3 = Import(tmp / "c.ciff", tmp / "ciff3", 3);
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ(s3->docs, docs.size());
  EXPECT_EQ(s3->terms, inv.postings.size());
  EXPECT_EQ(s3->description, "scale test corpus");
  EXPECT_TRUE(s3->notes.empty());
  auto s2 = Import(tmp / "c.ciff", tmp / "ciff2", 2);
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  // Same shards: the same content, byte for byte.
  auto cj = ComputeIndexStats(tmp / "jsonl", true);
  auto c3 = ComputeIndexStats(tmp / "ciff3", true);
  ASSERT_TRUE(cj.ok() && c3.ok());
  EXPECT_EQ(cj->content_crc32c, c3->content_crc32c);
  EXPECT_EQ(c3->positions_bytes, 0u);
  auto m3 = Manifest::Read(tmp / "ciff3");
  ASSERT_TRUE(m3.ok());
  EXPECT_FALSE(m3->positions);
  // Other shards: the same answers.
  const auto queries = scaletest::RandomQueries(80, 250, 5);
  scaletest::ExpectSameAnswers(tmp / "jsonl", tmp / "ciff3", queries);
  scaletest::ExpectSameAnswers(tmp / "jsonl", tmp / "ciff2", queries);
}

// A small valid CIFF: 5 documents, a few terms.
std::string SmallCiff() {
  const std::vector<scaletest::TextDoc> docs = {
      {"a", "red fish blue fish"}, {"b", "one fish"}, {"c", ""}, {"d", "blue whale red"}, {"e", "two fish blue blue"}};
  return scaletest::MakeCiff(docs, scaletest::Invert(docs), 3);
}

void ExpectRefused(const std::string& bytes, const std::string& what, const std::string& needle = "") {
  TempDir tmp;
  scaletest::WriteBytes(tmp / "x.ciff", bytes);
  auto r = Import(tmp / "x.ciff", tmp / "out");
  ASSERT_FALSE(r.ok()) << what;
  EXPECT_NE(r.status().code(), StatusCode::kInternal) << what;
  if (!needle.empty()) {
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << what << ": " << r.status().ToString();
  }
  EXPECT_TRUE(scaletest::NothingNamed(tmp.path(), "out")) << what;
}

TEST(CiffImportTest, EveryTruncationIsRefused) {
  const std::string full = SmallCiff();
  {
    TempDir tmp;
    scaletest::WriteBytes(tmp / "ok.ciff", full);
    ASSERT_TRUE(Import(tmp / "ok.ciff", tmp / "ok").ok());
  }
  for (size_t n = 0; n < full.size(); ++n) ExpectRefused(full.substr(0, n), std::string("truncated to ") + std::to_string(n));
  ExpectRefused(full + std::string(1, '\0'), "a trailing byte", "after the last DocRecord");
}

// Hand-made messages.
std::string Delimited(const std::string& m) {
  std::string out;
  AppendVarint(&out, m.size());
  return out + m;
}
std::string Header(int64_t lists, int64_t docs) {
  CiffHeader h;
  h.num_postings_lists = h.total_postings_lists = lists;
  h.num_docs = h.total_docs = docs;
  std::string out;
  AppendCiffHeader(&out, h);
  return out;
}
std::string Docs(uint32_t n) {
  std::string out;
  for (uint32_t d = 0; d < n; ++d) AppendCiffDocRecord(&out, d, std::string("id") + std::to_string(d), 3);
  return out;
}
std::string List(std::string_view term, std::vector<uint32_t> docs, std::vector<uint32_t> tfs, int64_t df = -1,
                 int64_t cf = -1) {
  std::string out;
  AppendCiffPostingsList(&out, term, docs, tfs, df, cf);
  return out;
}

TEST(CiffImportTest, MalformedMessagesAreRefusedWithOffsets) {
  const std::string ok = Header(1, 3) + List("x", {0, 2}, {1, 1}) + Docs(3);
  {
    TempDir tmp;
    scaletest::WriteBytes(tmp / "ok.ciff", ok);
    ASSERT_TRUE(Import(tmp / "ok.ciff", tmp / "out").ok());
  }
  ExpectRefused(std::string(11, '\xff') + ok, "an 11-byte varint", "varint");
  ExpectRefused(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02") + ok, "a varint past 64 bits", "varint");
  ExpectRefused("\x05\x08\x01", "a header length past the end", "runs past the end");
  ExpectRefused(Delimited("\x0a\x01x") + List("x", {0}, {1}) + Docs(1), "version as a string", "wire type");
  ExpectRefused(Delimited("\x08\x01\x10\x01\x18\x01\x0f") + List("x", {0}, {1}) + Docs(1), "wire type 7", "wire type");
  ExpectRefused(Delimited(std::string("\x08\x01\x10\x01\x18\x01\x00\x01", 8)) + List("x", {0}, {1}) + Docs(1),
                "field number 0",
                "field number");
  ExpectRefused(Header(1, 3) + List("x", {0, 2}, {1, 1}, 3) + Docs(3), "df disagrees", "df 3");
  ExpectRefused(Header(1, 3) + List("x", {0, 2}, {1, 1}, 2, 5) + Docs(3), "cf disagrees", "cf 5");
  ExpectRefused(Header(1, 3) + List("x", {0, 3}, {1, 1}) + Docs(3), "docID past num_docs", "not below num_docs");
  // A header claiming more documents than the file can hold is refused before anything is sized
  // by it (was a 24 GiB allocation; fuzz/corpus/ciff has the 9-byte file).
  ExpectRefused(Header(0, 2147483647), "num_docs past the file", "bytes of DocRecords follow");
  ExpectRefused(Header(1, 3) + List("x", {0, 2}, {1, 0}) + Docs(3), "tf 0", "tf 0");
  ExpectRefused(Header(1, 3) + List("", {0}, {1}) + Docs(3), "an empty term", "empty term");
  ExpectRefused(Header(2, 3) + List("x", {0}, {1}) + List("x", {1}, {1}) + Docs(3), "a term twice", "two PostingsLists");
  ExpectRefused(Header(2, 3) + List("x", {0}, {1}) + Docs(3), "fewer lists than declared");
  ExpectRefused(Header(1, 4) + List("x", {0}, {1}) + Docs(3), "fewer docs than declared", "DocRecord");
  ExpectRefused(Header(1, 0) + List("x", {0}, {1}), "no documents", "no documents");
  std::string dup_doc;
  AppendCiffDocRecord(&dup_doc, 1, "a", 1);
  AppendCiffDocRecord(&dup_doc, 1, "b", 1);
  AppendCiffDocRecord(&dup_doc, 0, "c", 1);
  ExpectRefused(Header(1, 3) + List("x", {0}, {1}) + dup_doc, "a docid twice", "appears twice");
  std::string bad_doc;
  AppendCiffDocRecord(&bad_doc, 7, "a", 1);
  ExpectRefused(Header(0, 1) + bad_doc, "a docid past num_docs", "docid 7");
  // A posting with a repeated docID (gap 0), and with a negative gap (10-byte varint).
  std::string rep = "\x0a\x01x\x10\x02\x18\x02";
  rep += "\x22\x02\x10\x01";  // docid 0 (absent), tf 1
  rep += "\x22\x02\x10\x01";  // gap 0 again
  ExpectRefused(Header(1, 3) + Delimited(rep) + Docs(3), "a gap of 0", "gap 0");
  std::string neg = "\x0a\x01x\x10\x01\x18\x01\x22\x0d\x08";
  neg += std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10);
  neg += "\x10\x01";
  ExpectRefused(Header(1, 3) + Delimited(neg) + Docs(3), "a negative gap", "negative");
  std::string big = "\x0a\x01x\x10\x01\x18\x01\x22\x08\x08\xff\xff\xff\xff\x0f\x10\x01";  // docid 2^32 - 1
  ExpectRefused(Header(1, 3) + Delimited(big) + Docs(3), "an int32 out of range", "int32");
  ExpectRefused(std::string("\x1f\x8b\x08\x00", 4) + ok, "gzip", "gzip");
  std::string v2;
  CiffHeader h2;
  h2.version = 2;
  h2.num_docs = 1;
  AppendCiffHeader(&v2, h2);
  ExpectRefused(v2 + Docs(1), "version 2", "version 2");
  // An unclosed group and an unmatched end-group inside a DocRecord.
  ExpectRefused(Header(0, 1) + Delimited(std::string("\x08\x00\x2b\x08\x01", 5)), "an unclosed group", "group");
  ExpectRefused(Header(0, 1) + Delimited(std::string("\x2c", 1)), "an unmatched end-group", "end-group");
}

TEST(CiffImportTest, UnknownFieldsOfEveryWireTypeAreSkipped) {
  TempDir tmp;
  // Each message gets extra fields 9..13: varint, fixed64, bytes, a group with nested fields, fixed32.
  const std::string extra = std::string("\x48\x96\x01", 3) + "\x51" + std::string(8, '\x07') + "\x5a\x03" + "abc" +
                            "\x63\x08\x05\x12\x01z\x64" + "\x6d" + std::string(4, '\x09');
  std::string header_body;
  {
    std::string h = Header(1, 2);
    header_body = h.substr(1);  // one-byte length prefix
  }
  std::string list_body = List("fish", {0, 1}, {2, 1}).substr(1);
  std::string out = Delimited(header_body + extra) + Delimited(extra + list_body);
  // Doc records with extras.
  std::string d0 = Docs(1).substr(1), d1;
  AppendCiffDocRecord(&d1, 1, "id1", 3);
  d1 = d1.substr(1);
  out += Delimited(d0 + extra) + Delimited(extra + d1);
  scaletest::WriteBytes(tmp / "x.ciff", out);
  auto r = Import(tmp / "x.ciff", tmp / "out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->postings, 2u);
  auto index = LocalIndex::Open(tmp / "out");
  ASSERT_TRUE(index.ok());
  auto hits = (*index)->Search("fish", QueryMode::kOr, 10);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->hits.size(), 2u);
  auto ids = (*index)->Resolve(hits->hits);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[0].id, "id0");  // tf 2 ranks first
  EXPECT_EQ((*ids)[1].id, "id1");
}

TEST(CiffImportTest, RandomByteFlipsNeverCrash) {
  const std::string full = SmallCiff();
  std::mt19937_64 rng(17);
  size_t refused = 0;
  for (int i = 0; i < 150; ++i) {
    std::string bytes = full;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    TempDir tmp;
    scaletest::WriteBytes(tmp / "x.ciff", bytes);
    auto r = Import(tmp / "x.ciff", tmp / "out");
    if (r.ok()) {
      EXPECT_TRUE(LocalIndex::Open(tmp / "out").ok());  // accepted: then it is a valid index
    } else {
      ++refused;
      EXPECT_TRUE(scaletest::NothingNamed(tmp.path(), "out"));
    }
  }
  EXPECT_GT(refused, 75u);
}

}  // namespace
}  // namespace search
