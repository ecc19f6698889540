// Sorted runs, the posting accumulator, the JSON-lines reader and the query-log generator of the
// index builder, against plain references.
#include "indexer/run_file.hpp"

#include <gtest/gtest.h>

#include <map>

#include "indexer/jsonl_reader.hpp"
#include "indexer/posting_accumulator.hpp"
#include "indexer/query_log.hpp"
#include "tools_fixture.hpp"

namespace search {
namespace {

using testing::TempDir;
using Postings = std::map<std::string, std::vector<std::pair<uint32_t, uint32_t>>>;

// prefix + n (appending avoids GCC 12's false -Wrestrict on "literal" + std::string&&).
std::string Name(const char* prefix, uint64_t n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

TEST(RunFile, AccumulatorsSpillAndMergeToTheReference) {
  TempDir tmp;
  std::mt19937_64 rng(3);
  Postings want;
  std::vector<PostingAccumulator> accs(3);
  std::vector<std::string> runs;
  for (uint32_t doc = 0; doc < 3000; ++doc) {
    std::map<std::string, uint32_t> tf;
    for (int i = 0, n = static_cast<int>(rng() % 20); i < n; ++i) ++tf[Name("t", rng() % 300)];
    std::vector<std::pair<std::string, uint32_t>> v(tf.begin(), tf.end());
    for (auto& [t, f] : v) want[t].emplace_back(doc, f);
    PostingAccumulator& acc = accs[(doc / 50) % 3];  // chunks of 50 docs round-robin, like the builder
    acc.AddDoc(doc, v);
    if (acc.memory_bytes() > 8000) {
      runs.push_back(tmp / Name("r", runs.size()));
      ASSERT_TRUE(acc.Spill(runs.back()).ok());
      EXPECT_TRUE(acc.empty());
    }
  }
  for (auto& acc : accs) {
    if (acc.empty()) continue;
    runs.push_back(tmp / Name("r", runs.size()));
    ASSERT_TRUE(acc.Spill(runs.back()).ok());
  }
  ASSERT_GT(runs.size(), 6u);
  std::vector<std::unique_ptr<RunReader>> readers;
  for (const auto& r : runs) readers.push_back(std::move(RunReader::Open(r)).value());
  auto merger = RunMerger::Create(std::move(readers));
  ASSERT_TRUE(merger.ok());
  Postings got;
  std::string term;
  std::vector<Posting> postings;
  std::vector<size_t> starts;
  for (;;) {
    auto more = (*merger)->Next(&term, &postings, &starts);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    ASSERT_TRUE(got.empty() || got.rbegin()->first < term);
    ASSERT_TRUE(MergeSegments(&postings, starts).ok());
    for (const auto& p : postings) got[term].emplace_back(p.doc, p.tf);
  }
  EXPECT_EQ(got, want);
}

// With positions: each posting's positions come back from spilled runs, an intermediate merge
// (RunWriter::AddPostings) and the final merge, in docID order after MergeSegments.
TEST(RunFile, PositionsSurviveSpillAndMerge) {
  TempDir tmp;
  std::mt19937_64 rng(5);
  std::map<std::string, std::map<uint32_t, std::vector<uint32_t>>> want;
  std::vector<PostingAccumulator> accs(2);
  std::vector<std::string> runs;
  for (uint32_t doc = 0; doc < 2000; ++doc) {
    PostingAccumulator& acc = accs[(doc / 30) % 2];
    std::map<uint32_t, std::vector<uint32_t>> by_id;  // term id -> positions
    const int n = static_cast<int>(rng() % 25);
    for (int i = 0; i < n; ++i) {
      const std::string t = Name("t", rng() % 200);
      by_id[acc.TermId(t)].push_back(static_cast<uint32_t>(i) * 1000u);  // wide gaps: multi-byte varints
      want[t][doc].push_back(static_cast<uint32_t>(i) * 1000u);
    }
    std::vector<std::pair<uint32_t, uint32_t>> id_tfs;
    std::vector<uint32_t> positions;
    for (const auto& [id, p] : by_id) {
      id_tfs.emplace_back(id, static_cast<uint32_t>(p.size()));
      positions.insert(positions.end(), p.begin(), p.end());
    }
    acc.AddDoc(doc, id_tfs, positions.data());
    if (acc.memory_bytes() > 6000) {
      runs.push_back(tmp / Name("r", runs.size()));
      ASSERT_TRUE(acc.Spill(runs.back()).ok());
    }
  }
  for (auto& acc : accs) {
    if (acc.empty()) continue;
    runs.push_back(tmp / Name("r", runs.size()));
    ASSERT_TRUE(acc.Spill(runs.back()).ok());
  }
  ASSERT_GT(runs.size(), 4u);
  auto open = [](const std::vector<std::string>& paths) {
    std::vector<std::unique_ptr<RunReader>> readers;
    for (const auto& r : paths) readers.push_back(std::move(RunReader::Open(r)).value());
    return std::move(RunMerger::Create(std::move(readers))).value();
  };
  std::string term;
  std::vector<Posting> postings;
  std::vector<size_t> starts;
  std::vector<uint32_t> positions;
  {  // merge the first half into one run, as the builder's intermediate passes do
    const std::vector<std::string> half(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(runs.size() / 2));
    auto merger = open(half);
    auto writer = RunWriter::Create(tmp / "merged");
    ASSERT_TRUE(writer.ok());
    for (;;) {
      auto more = merger->Next(&term, &postings, &starts, &positions);
      ASSERT_TRUE(more.ok());
      if (!*more) break;
      ASSERT_TRUE(MergeSegments(&postings, starts).ok());
      ASSERT_TRUE((*writer)->AddPostings(term, postings, &positions).ok());
    }
    ASSERT_TRUE((*writer)->Finish().ok());
    runs.erase(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(runs.size() / 2));
    runs.push_back(tmp / "merged");
  }
  auto merger = open(runs);
  size_t terms = 0;
  for (;;) {
    auto more = merger->Next(&term, &postings, &starts, &positions);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    ASSERT_TRUE(MergeSegments(&postings, starts).ok());
    const auto& w = want[term];
    ASSERT_EQ(postings.size(), w.size()) << term;
    auto it = w.begin();
    for (const Posting& p : postings) {
      ASSERT_EQ(p.doc, it->first);
      ASSERT_EQ(p.tf, it->second.size());
      const std::vector<uint32_t> got(positions.begin() + static_cast<std::ptrdiff_t>(p.pos),
                                      positions.begin() + static_cast<std::ptrdiff_t>(p.pos + p.tf));
      EXPECT_EQ(got, it->second) << term << " doc " << p.doc;
      ++it;
    }
    ++terms;
  }
  EXPECT_EQ(terms, want.size());
  // A payload cut inside a posting's positions is Corruption.
  std::string payload;
  const uint32_t pos[] = {3, 300, 70000};
  EncodePosting(&payload, 5, 3, pos);
  std::vector<Posting> out;
  std::vector<uint32_t> out_pos;
  ASSERT_TRUE(DecodePostings(payload, 1, &out, &out_pos).ok());
  EXPECT_EQ(out_pos, (std::vector<uint32_t>{3, 300, 70000}));
  for (size_t len = 0; len < payload.size(); ++len) {
    out.clear();
    out_pos.clear();
    EXPECT_EQ(DecodePostings(payload.substr(0, len), 1, &out, &out_pos).code(), StatusCode::kCorruption) << len;
  }
}

TEST(RunFile, TruncatedOrDuplicatedInputIsCorruption) {
  TempDir tmp;
  auto w = RunWriter::Create(tmp / "r");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->AddPostings("a", {{1, 2}, {5, 1}}).ok());
  ASSERT_TRUE((*w)->AddPostings("b", {{0, 1}}).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  const std::string bytes = testing::ReadText(tmp / "r");
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    testing::WriteText(tmp / "cut", bytes.substr(0, cut));
    auto r = RunReader::Open(tmp / "cut");
    ASSERT_TRUE(r.ok());
    Status last;
    for (;;) {
      auto more = (*r)->Next();
      if (!more.ok()) {
        last = more.status();
        break;
      }
      if (!*more) break;
      std::vector<Posting> p;
      if (Status s = DecodePostings((*r)->payload(), (*r)->count(), &p); !s.ok()) {
        last = s;
        break;
      }
    }
    EXPECT_EQ(last.code(), StatusCode::kCorruption) << "cut at " << cut;
  }
  std::vector<Posting> dup = {{1, 1}, {3, 1}, {3, 2}};
  EXPECT_FALSE(MergeSegments(&dup, {0, 2, 3}).ok());
}

TEST(JsonlReader, ChunksHoldWholeLinesWithTheirNumbers) {
  TempDir tmp;
  std::string text;
  std::vector<std::string> lines;
  std::mt19937_64 rng(9);
  for (int i = 0; i < 500; ++i) {
    lines.push_back(std::string(rng() % 300, 'a' + static_cast<char>(i % 26)));
    text += lines.back() + "\n";
  }
  text += "last-without-newline";
  lines.push_back("last-without-newline");
  testing::WriteText(tmp / "in.txt", text);
  auto reader = JsonlReader::Open(tmp / "in.txt");
  ASSERT_TRUE(reader.ok());
  LineChunk chunk;
  std::vector<std::string> got;
  uint64_t seq = 0;
  for (;;) {
    auto more = (*reader)->Next(1000, &chunk);
    ASSERT_TRUE(more.ok());
    if (!*more) break;
    EXPECT_EQ(chunk.seq, seq++);
    EXPECT_EQ(chunk.first_line, got.size() + 1);
    std::string_view rest(chunk.data);
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      got.emplace_back(rest.substr(0, nl));
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    }
  }
  EXPECT_EQ(got, lines);
  EXPECT_GT(seq, 10u);
  EXPECT_EQ((*reader)->consumed_bytes(), text.size());
  EXPECT_EQ(JsonlReader::Open(tmp / "missing").status().code(), StatusCode::kNotFound);
}

TEST(QueryLog, LengthWeightsParseAndDrawsFavourFrequentTerms) {
  EXPECT_TRUE(ParseLengthWeights("25,30,25,20").ok());
  EXPECT_TRUE(ParseLengthWeights("1,0,0,0").ok());
  for (const char* bad : {"", "1,2,3", "1,2,3,4,5", "a,1,1,1", "-1,1,1,1", "0,0,0,0", "1,,1,1", "inf,1,1,1"})
    EXPECT_FALSE(ParseLengthWeights(bad).ok()) << bad;
  std::vector<TermDf> terms = {{"rare", 2}, {"common", 10000}};
  QueryLogOptions o;
  o.count = 4000;
  o.length_weights = {1, 0, 0, 0};
  QueryLogStats st;
  auto log = GenerateQueryLog(terms, o, &st);
  ASSERT_TRUE(log.ok());
  const auto common = std::count(log->begin(), log->end(), "common");
  EXPECT_GT(common, 3900);  // weight 10000^0.8 vs 2^0.8
  EXPECT_EQ(st.by_length[1], 4000u);
  o.length_weights = {0, 0, 0, 1};  // 4..6 terms, capped at the 2 candidates
  log = GenerateQueryLog(terms, o, &st);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(st.by_length[2], 4000u);
  EXPECT_FALSE(GenerateQueryLog({}, o, nullptr).ok());
}

}  // namespace
}  // namespace search
