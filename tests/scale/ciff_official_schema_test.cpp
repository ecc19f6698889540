// CIFF against the official schema: files written with the protoc-generated classes of the
// official CIFF schema (ciff/CommonIndexFileFormat.proto, from github.com/osirrc/ciff) and the
// protobuf library's own delimited framing (SerializeDelimitedToZeroCopyStream, the C++ twin of
// the Java exporter's writeDelimitedTo), imported by ImportCiff (what `searchctl import-ciff`
// runs) and compared with the index BuildIndex (`searchctl index`) makes from the same text as
// JSON lines: every term's postings (docIDs, tfs), df and cf, every document's length and external
// id, the collection statistics, and the answers (ids and scores) of random queries. This checks
// the hand-written reader (tools/searchctl/scale/ciff_format.hpp) against bytes it did not write.
//
// Conventions, and what differs by design:
// - DocIDs. The JSON-lines builder numbers documents by line (line d is docID d). The importer
//   takes the CIFF docids as the index's docIDs (shards are docID ranges) and collection_docid as
//   the external id. With CIFF docid = line number the two indexes are identical byte for byte;
//   with any other numbering (an exporter's internal order) they hold the same documents under
//   other docIDs: same postings and lengths per external id, same scores, and only the order
//   among equal scores (docID ascending, docs/SCORING.md) may differ.
// - Document lengths and BM25's avgdl. The JSON-lines builder counts the analyzer's terms; the
//   importer takes DocRecord.doclength as it is, and computes avgdl and the total from the
//   doclengths. The header's total_terms_in_collection and average_doclength are not used (a
//   disagreement is reported as a note). The exporter here writes the analyzer's exact counts, so
//   the scores are equal. Anserini's exporter writes Lucene's norms decoded (SmallFloat, exact only
//   for short documents), so an import of a real Anserini export scores long documents with
//   approximate lengths: that is the export's content, not the reader's choice.
// - Terms. CIFF terms are analyzed already and taken as they are; this test computes the postings
//   with the project's default analyzer (lowercase ASCII, bytes >= 0x80 kept, no stemming, no
//   stopwords), the analyzer the imported index records for queries.
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "CommonIndexFileFormat.pb.h"
#include "index_store/manifest.hpp"
#include "index_store/shard_store.hpp"
#include "indexer/index_builder.hpp"
#include "scale/import_ciff.hpp"
#include "scale/index_stats.hpp"
#include "scale_fixture.hpp"

namespace search {
namespace {

namespace pb = io::osirrc::ciff;
using scaletest::TempDir;
using scaletest::TextDoc;

// Words of the corpus: ASCII words, and UTF-8 words (their bytes >= 0x80 are token bytes, kept
// as they are). The text writes some with an upper-case first letter and between punctuation:
// the analyzer lowercases them, and the reference postings come from the analyzer itself.
std::vector<std::string> Vocabulary(size_t ascii_words) {
  std::vector<std::string> v;
  for (size_t i = 0; i < ascii_words; ++i) v.push_back(std::string("w").append(std::to_string(i)));
  for (const char* w : {"stra\u00dfe", "caf\u00e9", "\u65e5\u672c", "\u03b67", "na\u00efve", "x9"}) v.push_back(w);
  return v;
}

std::vector<TextDoc> Corpus(const std::vector<std::string>& vocab, size_t n, size_t max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) weights[i] = 1.0 / static_cast<double>(i % 50 + 1);
  std::discrete_distribution<size_t> word(weights.begin(), weights.end());
  std::vector<TextDoc> docs;
  for (size_t d = 0; d < n; ++d) {
    std::string text;
    const size_t len = d % 97 == 5 ? 0 : 1 + rng() % max_len;  // a few empty documents
    for (size_t i = 0; i < len; ++i) {
      if (!text.empty()) text += (rng() % 6 == 0) ? "; " : " ";
      std::string w = vocab[word(rng)];
      if (rng() % 4 == 0 && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
      text += w;
    }
    docs.push_back(
        {std::string("doc-").append(std::to_string(d)).append("-").append(std::to_string(rng() % 1000)), text});
  }
  return docs;
}

std::vector<std::string> Queries(const std::vector<std::string>& vocab, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string q;
    const size_t len = 1 + rng() % 4;
    for (size_t j = 0; j < len; ++j) {
      const size_t r = rng() % (vocab.size() + 3);
      q.append(r < vocab.size() ? vocab[r] : std::string("absent").append(std::to_string(r))).append(" ");
    }
    out.push_back(q);
  }
  return out;
}

// The messages of a CIFF file, built as the official exporter (Anserini's
// ExportAnseriniLuceneIndex) builds them: a Header with the counts and totals, a PostingsList per
// term in term byte order (Lucene's term dictionary order) with df, cf and d-gapped docids, then a
// DocRecord per document. `ciff_docid[d]` is the CIFF docid of corpus document d.
struct CiffMessages {
  pb::Header header;
  std::vector<pb::PostingsList> lists;
  std::vector<pb::DocRecord> records;
};

CiffMessages Export(const std::vector<TextDoc>& docs, const scaletest::Inverted& inv,
                    const std::vector<uint32_t>& ciff_docid) {
  CiffMessages m;
  int64_t total = 0;
  for (uint32_t len : inv.lengths) total += len;
  m.header.set_version(1);
  m.header.set_num_postings_lists(static_cast<int32_t>(inv.postings.size()));
  m.header.set_num_docs(static_cast<int32_t>(docs.size()));
  m.header.set_total_postings_lists(static_cast<int32_t>(inv.postings.size()));
  m.header.set_total_docs(static_cast<int32_t>(docs.size()));
  m.header.set_total_terms_in_collection(total);
  m.header.set_average_doclength(static_cast<double>(total) / static_cast<double>(docs.size()));
  m.header.set_description("written by protoc-generated code from the official CIFF schema");
  for (const auto& [term, by_doc] : inv.postings) {
    std::vector<std::pair<uint32_t, uint32_t>> postings;  // (CIFF docid, tf), ascending
    for (const auto& [d, tf] : by_doc) postings.emplace_back(ciff_docid[d], tf);
    std::sort(postings.begin(), postings.end());
    pb::PostingsList& list = m.lists.emplace_back();
    list.set_term(term);
    list.set_df(static_cast<int64_t>(postings.size()));
    int64_t cf = 0;
    int64_t prev = -1;
    for (const auto& [doc, tf] : postings) {
      pb::Posting* p = list.add_postings();
      p->set_docid(static_cast<int32_t>(prev < 0 ? doc : doc - prev));  // the first absolute, then gaps
      p->set_tf(static_cast<int32_t>(tf));
      cf += tf;
      prev = doc;
    }
    list.set_cf(cf);
  }
  for (uint32_t d = 0; d < docs.size(); ++d) {
    pb::DocRecord& r = m.records.emplace_back();
    r.set_docid(static_cast<int32_t>(ciff_docid[d]));
    r.set_collection_docid(docs[d].id);
    r.set_doclength(static_cast<int32_t>(inv.lengths[d]));
  }
  // The exporter writes the records in docid order.
  std::sort(m.records.begin(), m.records.end(),
            [](const pb::DocRecord& a, const pb::DocRecord& b) { return a.docid() < b.docid(); });
  return m;
}

std::vector<uint32_t> Identity(size_t n) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// The file's bytes, framed by the protobuf library (varint size, then the message).
std::string Serialize(const CiffMessages& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  EXPECT_TRUE(google::protobuf::util::SerializeDelimitedToZeroCopyStream(m.header, &stream));
  for (const auto& l : m.lists) EXPECT_TRUE(google::protobuf::util::SerializeDelimitedToZeroCopyStream(l, &stream));
  for (const auto& r : m.records) EXPECT_TRUE(google::protobuf::util::SerializeDelimitedToZeroCopyStream(r, &stream));
  return out;
}

// The protobuf library reads the file back message by message, as the official ReadCIFF does:
// the bytes are well-formed CIFF by the official definition, whatever this project's reader says.
void ExpectOfficialParserReads(const std::string& bytes, const CiffMessages& m) {
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  pb::Header h;
  ASSERT_TRUE(google::protobuf::util::ParseDelimitedFromZeroCopyStream(&h, &stream, nullptr));
  EXPECT_EQ(h.num_postings_lists(), static_cast<int32_t>(m.lists.size()));
  EXPECT_EQ(h.num_docs(), static_cast<int32_t>(m.records.size()));
  for (int32_t i = 0; i < h.num_postings_lists(); ++i) {
    pb::PostingsList l;
    ASSERT_TRUE(google::protobuf::util::ParseDelimitedFromZeroCopyStream(&l, &stream, nullptr));
    EXPECT_EQ(l.term(), m.lists[i].term());
    EXPECT_EQ(l.postings_size(), m.lists[i].postings_size());
  }
  for (int32_t i = 0; i < h.num_docs(); ++i) {
    pb::DocRecord r;
    ASSERT_TRUE(google::protobuf::util::ParseDelimitedFromZeroCopyStream(&r, &stream, nullptr));
    EXPECT_EQ(r.collection_docid(), m.records[i].collection_docid());
  }
  pb::DocRecord extra;
  bool clean_eof = false;
  EXPECT_FALSE(google::protobuf::util::ParseDelimitedFromZeroCopyStream(&extra, &stream, &clean_eof));
  EXPECT_TRUE(clean_eof);
}

using scaletest::ImportCiffFile;

// Everything an index holds, read back through the shard readers: term -> [(docID, tf)] over all
// shards, each term's global df and summed cf, each document's length and external id.
struct IndexDump {
  std::map<std::string, std::vector<std::pair<uint32_t, uint32_t>>> postings;
  std::map<std::string, std::pair<uint32_t, uint64_t>> df_cf;
  std::vector<uint32_t> lengths;
  std::vector<std::string> ids;
  CollectionStats stats;
};

IndexDump Dump(const std::string& dir) {
  IndexDump out;
  auto m = Manifest::Read(dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return out;
  out.stats = m->stats;
  for (const auto& entry : m->shards) {
    auto reader = ShardReader::Open(dir + "/" + entry.path);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return out;
    std::vector<std::pair<std::string, TermInfo>> terms;
    EXPECT_TRUE((*reader)
                    ->ForEachTerm([&](std::string_view t, const TermInfo& i) {
                      terms.emplace_back(t, i);
                      return true;
                    })
                    .ok());
    for (const auto& [term, info] : terms) {
      auto list = (*reader)->GetList(term);
      EXPECT_TRUE(list.ok()) << term;
      if (!list.ok()) continue;
      const ListView& view = (*list)->view;
      EXPECT_EQ(view.count(), info.count) << term;
      auto& postings = out.postings[term];
      uint32_t docs[128], tfs[128];
      for (uint32_t j = 0; j < view.num_blocks(); ++j) {
        EXPECT_TRUE(view.DecodeDocs(j, docs).ok()) << term;
        view.DecodeFreqs(j, tfs);
        for (uint32_t i = 0; i < view.block(j).count; ++i) postings.emplace_back(docs[i], tfs[i]);
      }
      auto& [df, cf] = out.df_cf[term];
      df = info.df;  // global: the same in every shard
      cf += info.cf;
    }
    for (uint32_t d = entry.doc_begin; d < entry.doc_end; ++d) {
      out.lengths.push_back((*reader)->DocLength(d));
      auto id = (*reader)->GetExternalId(d);
      EXPECT_TRUE(id.ok());
      out.ids.push_back(id.ok() ? *id : std::string());
    }
  }
  for (auto& [term, postings] : out.postings) std::sort(postings.begin(), postings.end());
  return out;
}

// What the index must hold when corpus document d has docID docid_of[d]: computed from the
// analyzer's postings, independently of every index builder.
IndexDump Expected(const std::vector<TextDoc>& docs, const scaletest::Inverted& inv,
                   const std::vector<uint32_t>& docid_of) {
  IndexDump out;
  out.lengths.resize(docs.size());
  out.ids.resize(docs.size());
  for (uint32_t d = 0; d < docs.size(); ++d) {
    out.lengths[docid_of[d]] = inv.lengths[d];
    out.ids[docid_of[d]] = docs[d].id;
    out.stats.total_tokens += inv.lengths[d];
  }
  out.stats.num_docs = docs.size();
  for (const auto& [term, by_doc] : inv.postings) {
    auto& postings = out.postings[term];
    uint64_t cf = 0;
    for (const auto& [d, tf] : by_doc) {
      postings.emplace_back(docid_of[d], tf);
      cf += tf;
    }
    std::sort(postings.begin(), postings.end());
    out.df_cf[term] = {static_cast<uint32_t>(by_doc.size()), cf};
  }
  return out;
}

void ExpectDumpsEqual(const IndexDump& got, const IndexDump& want, const std::string& what) {
  EXPECT_EQ(got.stats.num_docs, want.stats.num_docs) << what;
  EXPECT_EQ(got.stats.total_tokens, want.stats.total_tokens) << what;  // so avgdl is equal too
  EXPECT_EQ(got.lengths, want.lengths) << what;
  EXPECT_EQ(got.ids, want.ids) << what;
  ASSERT_EQ(got.postings.size(), want.postings.size()) << what;
  for (auto g = got.postings.begin(), w = want.postings.begin(); g != got.postings.end(); ++g, ++w) {
    ASSERT_EQ(g->first, w->first) << what;
    EXPECT_EQ(g->second, w->second) << what << ": the postings of " << g->first;
  }
  EXPECT_EQ(got.df_cf, want.df_cf) << what;
}

class CiffOfficialSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vocab_ = Vocabulary(220);
    docs_ = Corpus(vocab_, 500, 30, 2026);
    inv_ = scaletest::Invert(docs_);
    scaletest::WriteJsonl(tmp_ / "c.jsonl", docs_);
    ASSERT_TRUE(BuildIndex(scaletest::PlainJsonlOptions(tmp_ / "c.jsonl", tmp_ / "jsonl", 3)).ok());
  }

  TempDir tmp_;
  std::vector<std::string> vocab_;
  std::vector<TextDoc> docs_;
  scaletest::Inverted inv_;
};

TEST_F(CiffOfficialSchemaTest, ImportsLikeTheJsonlIndexOfTheSameText) {
  // The UTF-8 words are in the corpus, so the comparison covers multi-byte terms.
  ASSERT_EQ(inv_.postings.count("stra\u00dfe"), 1u);
  const CiffMessages m = Export(docs_, inv_, Identity(docs_.size()));
  const std::string bytes = Serialize(m);
  ExpectOfficialParserReads(bytes, m);
  scaletest::WriteBytes(tmp_ / "c.ciff", bytes);

  auto s3 = ImportCiffFile(tmp_ / "c.ciff", tmp_ / "ciff3", 3);
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ(s3->docs, docs_.size());
  EXPECT_EQ(s3->terms, inv_.postings.size());
  EXPECT_EQ(s3->total_tokens, static_cast<uint64_t>(m.header.total_terms_in_collection()));
  EXPECT_EQ(s3->description, m.header.description());
  EXPECT_EQ(s3->empty_lists, 0u);
  EXPECT_TRUE(s3->notes.empty()) << s3->notes.front();
  auto s1 = ImportCiffFile(tmp_ / "c.ciff", tmp_ / "ciff1", 1);
  ASSERT_TRUE(s1.ok()) << s1.status().ToString();

  // Every term's postings, df and cf, every length and id: the JSON-lines index, the imports at
  // 3 and 1 shards, and the analyzer's own inverted index agree.
  const IndexDump want = Expected(docs_, inv_, Identity(docs_.size()));
  ExpectDumpsEqual(Dump(tmp_ / "jsonl"), want, "jsonl index");
  ExpectDumpsEqual(Dump(tmp_ / "ciff3"), want, "CIFF import, 3 shards");
  ExpectDumpsEqual(Dump(tmp_ / "ciff1"), want, "CIFF import, 1 shard");
  // Same shards and docIDs: the same content, byte for byte (BM25 block maxima included).
  auto cj = ComputeIndexStats(tmp_ / "jsonl", true);
  auto c3 = ComputeIndexStats(tmp_ / "ciff3", true);
  ASSERT_TRUE(cj.ok() && c3.ok());
  EXPECT_EQ(cj->content_crc32c, c3->content_crc32c);
  // Same answers: documents, order, external ids and scores, in and / or / andor.
  const auto queries = Queries(vocab_, 80, 7);
  scaletest::ExpectSameAnswers(tmp_ / "jsonl", tmp_ / "ciff3", queries);
  scaletest::ExpectSameAnswers(tmp_ / "jsonl", tmp_ / "ciff1", queries);
}

// An exporter's docids need not follow the collection's order (Lucene numbers documents by
// segment), and the format promises no order of the DocRecords: corpus document d gets CIFF docid
// perm[d], and the records come shuffled. The import holds the same postings, lengths and ids
// under the CIFF docids, and every query gives every document the same score; top-k lists differ
// only in the order of equal scores (docID ascending breaks ties).
TEST_F(CiffOfficialSchemaTest, OtherDocidOrderGivesTheSameDocumentsAndScores) {
  std::vector<uint32_t> perm = Identity(docs_.size());
  std::mt19937_64 rng(31);
  std::shuffle(perm.begin(), perm.end(), rng);
  CiffMessages m = Export(docs_, inv_, perm);
  std::shuffle(m.records.begin(), m.records.end(), rng);
  const std::string bytes = Serialize(m);
  ExpectOfficialParserReads(bytes, m);
  scaletest::WriteBytes(tmp_ / "p.ciff", bytes);
  auto s = ImportCiffFile(tmp_ / "p.ciff", tmp_ / "perm", 2);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->notes.empty());
  ExpectDumpsEqual(Dump(tmp_ / "perm"), Expected(docs_, inv_, perm), "CIFF import, permuted docids");

  auto a = LocalIndex::Open(tmp_ / "jsonl");
  auto b = LocalIndex::Open(tmp_ / "perm");
  ASSERT_TRUE(a.ok() && b.ok());
  size_t compared = 0;
  for (const auto& q : Queries(vocab_, 60, 11)) {
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr}) {
      // Every matching document (k = all): external id -> score.
      auto ra = (*a)->Search(q, mode, static_cast<uint32_t>(docs_.size()));
      auto rb = (*b)->Search(q, mode, static_cast<uint32_t>(docs_.size()));
      ASSERT_TRUE(ra.ok() && rb.ok());
      auto ia = (*a)->Resolve(ra->hits);
      auto ib = (*b)->Resolve(rb->hits);
      ASSERT_TRUE(ia.ok() && ib.ok());
      std::map<std::string, float> sa, sb;
      for (const auto& h : *ia) sa[h.id] = h.score;
      for (const auto& h : *ib) sb[h.id] = h.score;
      EXPECT_EQ(sa, sb) << q;
      compared += sa.size();
      // Top 10: the same scores rank by rank; the same document wherever the score is not tied.
      auto ta = (*a)->Search(q, mode, 10);
      auto tb = (*b)->Search(q, mode, 10);
      ASSERT_TRUE(ta.ok() && tb.ok());
      ASSERT_EQ(ta->hits.size(), tb->hits.size()) << q;
      auto ida = (*a)->Resolve(ta->hits);
      auto idb = (*b)->Resolve(tb->hits);
      ASSERT_TRUE(ida.ok() && idb.ok());
      for (size_t i = 0; i < ta->hits.size(); ++i) {
        EXPECT_EQ(ta->hits[i].score, tb->hits[i].score) << q << " rank " << i;
        const bool tied = sa.size() > 1 && std::count_if(sa.begin(), sa.end(), [&](const auto& e) {
                                             return e.second == ta->hits[i].score;
                                           }) > 1;
        if (!tied) {
          EXPECT_EQ((*ida)[i].id, (*idb)[i].id) << q << " rank " << i;
        }
      }
    }
  }
  EXPECT_GT(compared, 1000u);  // not vacuous
}

// A small file from the official writer. Bad ones are refused with an error that says what and
// where, never Internal, nothing left at the output. Header totals (total_*, average_doclength)
// may differ from the contents by the format's own definition (an export of some lists only):
// accepted with a note, the contents win.
class CiffOfficialSmallFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    docs_ = {{"a", "red fish blue fish"}, {"b", "one fish"}, {"c", ""},         {"d", "blue whale red"},
             {"e", "two fish Blue blue"}, {"f", "whale"},    {"g", "red, red"}, {"h", "one two"}};
    inv_ = scaletest::Invert(docs_);
    good_ = Export(docs_, inv_, Identity(docs_.size()));
  }

  // Imports the bytes; returns the error (or Ok) after checking the no-leftover contract.
  Status ImportBytes(const std::string& bytes) {
    TempDir tmp;
    scaletest::WriteBytes(tmp / "x.ciff", bytes);
    auto r = ImportCiffFile(tmp / "x.ciff", tmp / "out", 2);
    if (r.ok()) {
      notes_ = r->notes;
      EXPECT_TRUE(LocalIndex::Open(tmp / "out").ok());
      return Status::Ok();
    }
    EXPECT_NE(r.status().code(), StatusCode::kInternal) << r.status().ToString();
    EXPECT_TRUE(scaletest::NothingNamed(tmp.path(), "out")) << r.status().ToString();
    return r.status();
  }

  void ExpectRefused(const CiffMessages& m, const std::string& what, const std::string& needle) {
    const Status s = ImportBytes(Serialize(m));
    ASSERT_FALSE(s.ok()) << what;
    EXPECT_NE(s.message().find(needle), std::string::npos) << what << ": " << s.ToString();
  }

  std::vector<TextDoc> docs_;
  scaletest::Inverted inv_;
  CiffMessages good_;
  std::vector<std::string> notes_;
};

TEST_F(CiffOfficialSmallFileTest, EveryTruncationIsRefused) {
  const std::string full = Serialize(good_);
  ASSERT_TRUE(ImportBytes(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(ImportBytes(full.substr(0, n)).ok()) << "truncated to " << n << " of " << full.size() << " bytes";
  }
}

// The project's own writer (ciff_format.hpp, which ciff_import_test and the fuzz seeds use) and
// the protobuf library write the same content as the same bytes (both canonical proto3: fields in
// number order, zeros omitted), so what those tests read is official CIFF too.
TEST_F(CiffOfficialSmallFileTest, TheProjectsWriterWritesTheOfficialBytes) {
  CiffMessages m = good_;
  m.header.set_description("scale test corpus");  // scaletest::MakeCiff's
  EXPECT_EQ(Serialize(m), scaletest::MakeCiff(docs_, inv_, /*shuffle_seed=*/0));
}

TEST_F(CiffOfficialSmallFileTest, HeaderCountsThatDisagreeWithTheContentAreRefused) {
  CiffMessages m = good_;
  m.header.set_num_postings_lists(good_.header.num_postings_lists() + 1);  // a DocRecord read as a list
  ExpectRefused(m, "one list more than present", "PostingsList");
  m = good_;
  m.header.set_num_postings_lists(good_.header.num_postings_lists() - 1);  // a list read as a DocRecord
  ExpectRefused(m, "one list fewer than present", "DocRecord");
  m = good_;
  m.header.set_num_docs(good_.header.num_docs() + 1);
  ExpectRefused(m, "one document more than present", "DocRecord");
  m = good_;
  m.header.set_num_docs(good_.header.num_docs() - 1);  // the last document's postings are out of range
  ExpectRefused(m, "one document fewer than present", "num_docs");
  m = good_;
  m.header.clear_num_docs();
  ExpectRefused(m, "no documents", "no documents");
  m = good_;
  m.header.set_version(2);
  ExpectRefused(m, "version 2", "version 2");
  // A list's df and cf are counts of its content too.
  m = good_;
  m.lists[1].set_df(m.lists[1].df() + 1);
  ExpectRefused(m, "df one more than the postings", "df");
  m = good_;
  m.lists[2].set_cf(m.lists[2].cf() - 1);
  ExpectRefused(m, "cf one less than the tfs", "cf");
  // Docids: a gap past num_docs, a zero gap, a record's docid twice or out of range.
  m = good_;
  m.lists[0].mutable_postings(0)->set_docid(static_cast<int32_t>(docs_.size()));
  ExpectRefused(m, "a docid past num_docs", "num_docs");
  m = good_;
  ASSERT_GE(m.lists[0].postings_size(), 2);
  m.lists[0].mutable_postings(1)->set_docid(0);
  ExpectRefused(m, "a gap of 0", "gap 0");
  m = good_;
  m.records[3].set_docid(2);
  ExpectRefused(m, "a docid twice", "appears twice");
  m = good_;
  m.records[3].set_docid(static_cast<int32_t>(docs_.size()));
  ExpectRefused(m, "a record's docid past num_docs", "docid");
  // Trailing messages after the declared records.
  const std::string extra = Serialize(good_) + Serialize(CiffMessages{good_.header, {}, {good_.records[0]}});
  EXPECT_FALSE(ImportBytes(extra).ok());
}

TEST_F(CiffOfficialSmallFileTest, HeaderTotalsThatDisagreeAreNotesAndTheContentsWin) {
  ASSERT_TRUE(ImportBytes(Serialize(good_)).ok());
  EXPECT_TRUE(notes_.empty());
  CiffMessages m = good_;
  m.header.set_total_docs(1000);
  m.header.set_total_postings_lists(5000);
  m.header.set_total_terms_in_collection(99999);
  m.header.set_average_doclength(99.9);
  ASSERT_TRUE(ImportBytes(Serialize(m)).ok());
  const std::string all = [&] {
    std::string s;
    for (const auto& n : notes_) s += n + "\n";
    return s;
  }();
  EXPECT_NE(all.find("total_docs 1000"), std::string::npos) << all;
  EXPECT_NE(all.find("total_postings_lists 5000"), std::string::npos) << all;
  EXPECT_NE(all.find("total_terms_in_collection 99999"), std::string::npos) << all;
  EXPECT_NE(all.find("average_doclength 99.9"), std::string::npos) << all;
  // The contents win: the index equals the one of the truthful file.
  TempDir tmp;
  scaletest::WriteBytes(tmp / "good.ciff", Serialize(good_));
  scaletest::WriteBytes(tmp / "odd.ciff", Serialize(m));
  ASSERT_TRUE(ImportCiffFile(tmp / "good.ciff", tmp / "good", 2).ok());
  ASSERT_TRUE(ImportCiffFile(tmp / "odd.ciff", tmp / "odd", 2).ok());
  auto a = ComputeIndexStats(tmp / "good", true);
  auto b = ComputeIndexStats(tmp / "odd", true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->content_crc32c, b->content_crc32c);
}

}  // namespace
}  // namespace search
