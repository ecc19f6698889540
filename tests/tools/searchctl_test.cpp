// The real searchctl binary, run as a subprocess: its JSON answers equal LocalIndex's, argument
// errors exit non-zero with a message, a build killed at any point leaves nothing loadable at
// DIR (and an old index intact), verify catches a flipped byte, gen-queries and bench work.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/cpu_home.hpp"
#include "core/cpus.hpp"
#include "core/query_parser.hpp"
#include "core/query_tree.hpp"
#include "cpu_exec/local_index.hpp"
#include "index_store/manifest.hpp"
#include "tools_fixture.hpp"

namespace search {
namespace {

using testing::RunCommand;
using testing::TempDir;
using Json = nlohmann::json;

const std::string kSearchctl = SEARCHCTL_PATH;

testing::CommandResult Ctl(std::vector<std::string> args, const std::string& env = "") {
  args.insert(args.begin(), kSearchctl);
  return RunCommand(args, env);
}

class SearchctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    docs_ = testing::RandomCorpus(2000, 500, 40, 21);
    testing::WriteJsonl(tmp_ / "in.jsonl", docs_);
  }
  testing::CommandResult Index(const std::string& out, std::vector<std::string> extra = {},
                               const std::string& env = "") {
    std::vector<std::string> args = {"index", "--input", tmp_ / "in.jsonl", "--out", out, "--threads", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Ctl(args, env);
  }
  TempDir tmp_;
  std::vector<testing::Doc> docs_;
};

TEST_F(SearchctlTest, QueryPrintsLocalIndexAnswersAsJsonLines) {
  auto built = Index(tmp_ / "idx", {"--shards", "3"});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_NE(built.err.find("docs=2000"), std::string::npos) << built.err;
  EXPECT_NE(built.err.find("skipped=0"), std::string::npos);
  const std::vector<std::string> queries = {"w1 w2", "w0", "w3 w17 w250", "zzz w1", "W5, w9"};
  std::string file;
  for (const auto& q : queries) file += q + "\n\n";
  testing::WriteText(tmp_ / "q.txt", file);

  auto index = LocalIndex::Open(tmp_ / "idx");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  for (const char* mode : {"and", "or", "andor"}) {
    auto r = Ctl(
        {"query", "--index", tmp_ / "idx", "--mode", mode, "--k", "15", "--queries", tmp_ / "q.txt", "--threads", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = testing::Lines(r.out);
    ASSERT_EQ(lines.size(), queries.size());
    for (size_t i = 0; i < queries.size(); ++i) {
      const Json j = Json::parse(lines[i]);
      EXPECT_EQ(j.at("query"), queries[i]);
      EXPECT_TRUE(j.at("took_us").is_number_unsigned());
      auto want = (*index)->Search(queries[i], *ParseQueryMode(mode), 15);
      ASSERT_TRUE(want.ok());
      auto ids = (*index)->Resolve(want->hits);
      ASSERT_TRUE(ids.ok());
      ASSERT_EQ(j.at("hits").size(), ids->size()) << lines[i];
      for (size_t h = 0; h < ids->size(); ++h) {
        EXPECT_EQ(j["hits"][h].at("id"), (*ids)[h].id);
        EXPECT_EQ(static_cast<float>(j["hits"][h].at("score").get<double>()), (*ids)[h].score);  // bit-exact
      }
    }
  }
  // A single --query, and reopening the index in a new process gives the same answer.
  auto one = Ctl({"query", "--index", tmp_ / "idx", "--mode", "or", "--k", "5", "--query", "w1 w2"});
  auto two = Ctl({"query", "--index", tmp_ / "idx", "--mode", "or", "--k", "5", "--query", "w1 w2"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(Json::parse(one.out)["hits"], Json::parse(two.out)["hits"]);
  EXPECT_EQ(Json::parse(one.out)["hits"].size(), 5u);
}

// The query language and --count: each line equals LocalIndex's answer to the parsed query
// (ParseQuerySyntax + MakeQuery), with "total" its exact count; --count --k 0 counts only; a
// syntax error names its position and exits 1.
TEST_F(SearchctlTest, QuerySyntaxAndCount) {
  ASSERT_EQ(Index(tmp_ / "idx", {"--shards", "2"}).exit_code, 0);
  auto index = LocalIndex::Open(tmp_ / "idx");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  const std::vector<std::string> queries = {"+w1 -w2", "w1 w2 -w0", "(w1 +w3) -(w0 w2)", "+w4 w5 w6", "-w1",
                                            "w7 zzz",  "W5, w9",    "\"w0 w1\" w2",       "+\"w1 w0\" -w3 w0-w2"};
  std::string file;
  for (const auto& q : queries) file += q + "\n";
  testing::WriteText(tmp_ / "q.txt", file);
  for (const char* mode : {"and", "or", "andor"}) {
    for (const char* k : {"0", "7", "1000"}) {
      std::vector<std::string> args = {"query", "--index", tmp_ / "idx", "--mode", mode, "--k", k,
                                       "--queries", tmp_ / "q.txt", "--count"};
      auto r = Ctl(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const auto lines = testing::Lines(r.out);
      ASSERT_EQ(lines.size(), queries.size());
      for (size_t i = 0; i < queries.size(); ++i) {
        const Json j = Json::parse(lines[i]);
        auto tree = ParseQuerySyntax(queries[i], (*index)->analyzer());
        ASSERT_TRUE(tree.ok()) << tree.status().ToString();
        const Query q = MakeQuery(*tree, *ParseQueryMode(mode), static_cast<uint32_t>(std::stoul(k)), true);
        auto want = (*index)->Search(q);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        ASSERT_TRUE(want->has_total);
        EXPECT_EQ(j.at("total").get<uint64_t>(), want->total) << lines[i];
        auto ids = (*index)->Resolve(want->hits);
        ASSERT_TRUE(ids.ok());
        ASSERT_EQ(j.at("hits").size(), ids->size()) << lines[i];
        for (size_t h = 0; h < ids->size(); ++h) {
          EXPECT_EQ(j["hits"][h].at("id"), (*ids)[h].id);
          EXPECT_EQ(static_cast<float>(j["hits"][h].at("score").get<double>()), (*ids)[h].score);
        }
        if (std::string(k) == "0") {
          EXPECT_TRUE(j.at("hits").empty());
        }
      }
    }
  }
  // "-w1" matches nothing; "+w1 -w2" counts the documents with w1 and without w2 (by hand).
  auto neg = Ctl({"query", "--index", tmp_ / "idx", "--count", "--k", "0", "--query", "-w1"});
  ASSERT_EQ(neg.exit_code, 0) << neg.err;
  EXPECT_EQ(Json::parse(neg.out).at("total"), 0);
  uint64_t by_hand = 0;
  for (const auto& d : docs_) {
    const auto toks = Analyzer().Analyze(d.contents);
    const bool w1 = std::find(toks.begin(), toks.end(), "w1") != toks.end();
    const bool w2 = std::find(toks.begin(), toks.end(), "w2") != toks.end();
    by_hand += w1 && !w2 ? 1 : 0;
  }
  auto c = Ctl({"query", "--index", tmp_ / "idx", "--count", "--k", "0", "--query", "+w1 -w2"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_GT(by_hand, 0u);
  EXPECT_EQ(Json::parse(c.out).at("total").get<uint64_t>(), by_hand);
  // Without --count there is no "total".
  auto plain = Ctl({"query", "--index", tmp_ / "idx", "--query", "+w1 -w2"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(Json::parse(plain.out).contains("total"));
  // Syntax errors: a message naming the position, exit code 1, no crash.
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"w1 \"w2 w3", "unclosed quote at position 3"},
           {"(w1 w2", "unclosed parenthesis at position 0"},
           {"w1 )", "unmatched ')' at position 3"},
           {"w1 +", "position 3"}}) {
    auto r = Ctl({"query", "--index", tmp_ / "idx", "--query", text});
    EXPECT_EQ(r.exit_code, 1) << text;
    EXPECT_NE(r.err.find(message), std::string::npos) << text << ": " << r.err;
  }
  // k 0 only with --count.
  auto k0 = Ctl({"query", "--index", tmp_ / "idx", "--k", "0", "--query", "w1"});
  EXPECT_EQ(k0.exit_code, 2);
  EXPECT_NE(k0.err.find("k must be between"), std::string::npos) << k0.err;
  // An index without positions answers terms and refuses phrases, saying why.
  ASSERT_EQ(Index(tmp_ / "nopos", {"--no-positions"}).exit_code, 0);
  auto terms = Ctl({"query", "--index", tmp_ / "nopos", "--count", "--k", "0", "--query", "+w1 -w2"});
  ASSERT_EQ(terms.exit_code, 0) << terms.err;
  EXPECT_EQ(Json::parse(terms.out).at("total").get<uint64_t>(), by_hand);
  auto phrase = Ctl({"query", "--index", tmp_ / "nopos", "--query", "w1 \"w2 w3\""});
  EXPECT_EQ(phrase.exit_code, 1);
  EXPECT_NE(phrase.err.find("positions"), std::string::npos) << phrase.err;
}

TEST_F(SearchctlTest, BadArgumentsAreRejected) {
  ASSERT_EQ(Index(tmp_ / "idx").exit_code, 0);
  const std::string idx = tmp_ / "idx";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"query", "--index", idx, "--mode", "xor", "--query", "a"}, "mode must be one of"},
      {{"query", "--index", idx, "--k", "0", "--query", "a"}, "k must be between"},
      {{"query", "--index", idx, "--k", "-3", "--query", "a"}, "k must be between"},
      {{"query", "--index", idx, "--k", "10001", "--query", "a"}, "k must be between"},
      {{"query", "--index", idx, "--k", "ten", "--query", "a"}, "--k"},
      {{"query", "--index", idx}, "exactly one of"},
      {{"query", "--index", tmp_ / "none", "--query", "a"}, "does not exist"},
      {{"query", "--index", idx, "--queries", tmp_ / "none.txt"}, "none.txt"},
      {{"bench", "--index", idx, "--queries", tmp_ / "none.txt", "--mode", "nope"}, "mode must be one of"},
      {{"bench", "--index", idx, "--queries", tmp_ / "none.txt", "--tuning", "gpu-or-pruned-divisor=99999999999"},
       "--tuning gpu-or-pruned-divisor must be an integer in [0, 2147483648]"},
      {{"bench", "--index", idx, "--queries", tmp_ / "none.txt", "--tuning", "gpu-or-theta-min-postings=-1"},
       "--tuning gpu-or-theta-min-postings must be an integer"},
      {{"bench", "--index", idx, "--queries", tmp_ / "none.txt", "--tuning", "gpu-or-candidate-cap=4"},
       "unknown --tuning key 'gpu-or-candidate-cap'"},
      {{"bench", "--index", idx, "--queries", tmp_ / "none.txt", "--tuning", "gpu-or-pruned-divisor"},
       "--tuning takes KEY=VALUE"},
      {{"bench", "--index", idx, "--queries", tmp_ / "none.txt", "--gpu-or-theta-sample", "1024"},
       "--gpu-or-theta-sample"},
      {{"index", "--input", tmp_ / "none.jsonl", "--out", tmp_ / "x"}, "does not exist"},
      {{"index", "--input", tmp_ / "in.jsonl", "--out", tmp_ / "x", "--stem", "klingon"}, "klingon"},
      {{"index", "--input", tmp_ / "in.jsonl", "--out", tmp_ / "x", "--shards", "0"}, "--shards"},
      {{"index", "--input", tmp_ / "in.jsonl", "--out", idx}, "already exists"},
      {{"gen-queries", "--index", idx, "--out", tmp_ / "g.txt", "--lengths", "1,2,3"}, "4 numbers"},
      {{"frobnicate"}, ""},
      {{}, ""},
  };
  for (const auto& c : cases) {
    auto r = Ctl(c.args);
    EXPECT_NE(r.exit_code, 0) << testing::Lines(r.err).size() << " for " << (c.args.empty() ? "" : c.args[0]);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_FALSE(testing::fs::exists(tmp_ / "x"));
  EXPECT_EQ(Ctl({"--help"}).exit_code, 0);
  EXPECT_NE(Ctl({"index", "--help"}).out.find("--skip-bad"), std::string::npos);
}

TEST_F(SearchctlTest, BadLineFailsWithItsNumberOrIsSkippedAndCounted) {
  std::string text = testing::ReadText(tmp_ / "in.jsonl");
  const size_t second_nl = text.find('\n', text.find('\n') + 1);
  text.insert(second_nl + 1, "{\"id\": \"broken\", \"contents\": \"unterminated}\n");
  testing::WriteText(tmp_ / "bad.jsonl", text);
  auto r = Ctl({"index", "--input", tmp_ / "bad.jsonl", "--out", tmp_ / "idx"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("line 3:"), std::string::npos) << r.err;
  EXPECT_FALSE(testing::fs::exists(tmp_ / "idx"));
  auto s = Ctl({"index", "--input", tmp_ / "bad.jsonl", "--out", tmp_ / "idx", "--skip-bad"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.err.find("docs=2000 skipped=1"), std::string::npos) << s.err;
}

TEST_F(SearchctlTest, KilledBuildLeavesNothingLoadableAndTheOldIndexIntact) {
  // A bigger input so the kill lands mid-build (after the first 1000 committed documents).
  testing::WriteJsonl(tmp_ / "big.jsonl", testing::RandomCorpus(20000, 2000, 30, 5));
  for (const std::string env : {"SEARCHCTL_FAIL_AFTER_DOCS=1000", "SEARCHCTL_FAIL_BEFORE_PUBLISH=1"}) {
    SCOPED_TRACE(env);
    const std::string dir = tmp_ / "fresh";
    auto r = Ctl({"index", "--input", tmp_ / "big.jsonl", "--out", dir, "--threads", "2"}, env);
    EXPECT_EQ(r.exit_code, 128 + 9) << r.err;  // SIGKILL
    EXPECT_FALSE(testing::fs::exists(dir));
    auto open = LocalIndex::Open(dir);
    ASSERT_FALSE(open.ok());
    EXPECT_EQ(Manifest::Read(dir).status().code(), StatusCode::kNotFound);
    // The killed build's temp dir is all that remains; the next build removes it.
    size_t leftovers = 0;
    for (const auto& e : testing::fs::directory_iterator(tmp_.path()))
      leftovers += e.path().filename().string().rfind("fresh.tmp-", 0) == 0;
    EXPECT_EQ(leftovers, 1u);
  }

  ASSERT_EQ(Index(tmp_ / "old").exit_code, 0);
  const std::string before = testing::ReadText(tmp_ / "old/manifest.json");
  auto killed = Ctl({"index", "--input", tmp_ / "big.jsonl", "--out", tmp_ / "old", "--force"},
                    "SEARCHCTL_FAIL_BEFORE_PUBLISH=1");
  EXPECT_EQ(killed.exit_code, 128 + 9);
  EXPECT_EQ(testing::ReadText(tmp_ / "old/manifest.json"), before);
  EXPECT_TRUE(VerifyIndex(tmp_ / "old").ok());
  auto old = LocalIndex::Open(tmp_ / "old");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ((*old)->manifest().stats.num_docs, docs_.size());

  auto redo = Ctl({"index", "--input", tmp_ / "in.jsonl", "--out", tmp_ / "fresh"});
  ASSERT_EQ(redo.exit_code, 0) << redo.err;
  EXPECT_NE(redo.err.find("removed leftover"), std::string::npos) << redo.err;
  for (const auto& e : testing::fs::directory_iterator(tmp_.path()))
    EXPECT_NE(e.path().filename().string().rfind("fresh.tmp-", 0), 0u) << e.path();
}

TEST_F(SearchctlTest, VerifyDetectsAFlippedSstByte) {
  ASSERT_EQ(Index(tmp_ / "idx", {"--shards", "2"}).exit_code, 0);
  auto ok = Ctl({"verify", "--index", tmp_ / "idx"});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.out, "OK\n");
  std::string sst;
  for (const auto& e : testing::fs::directory_iterator(tmp_ / "idx/shard-1"))
    if (e.path().extension() == ".sst") sst = e.path().string();
  ASSERT_FALSE(sst.empty());
  std::string bytes = testing::ReadText(sst);
  bytes[bytes.size() / 2] ^= 0x01;
  testing::WriteText(sst, bytes);
  auto bad = Ctl({"verify", "--index", tmp_ / "idx"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("Corruption"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("shard 1"), std::string::npos) << bad.out;
  EXPECT_NE(Ctl({"verify", "--index", tmp_ / "none"}).exit_code, 0);
}

TEST_F(SearchctlTest, GenQueriesIsDeterministicAndFollowsTheLengths) {
  ASSERT_EQ(Index(tmp_ / "idx", {"--shards", "2"}).exit_code, 0);
  auto gen = [&](const std::string& out, const std::string& seed, const std::string& lengths) {
    return Ctl({"gen-queries", "--index", tmp_ / "idx", "--count", "2000", "--out", out, "--seed", seed, "--lengths",
                lengths});
  };
  auto a = gen(tmp_ / "a.txt", "7", "25,30,25,20");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.err.find("mean df"), std::string::npos);
  ASSERT_EQ(gen(tmp_ / "b.txt", "7", "25,30,25,20").exit_code, 0);
  ASSERT_EQ(gen(tmp_ / "c.txt", "8", "25,30,25,20").exit_code, 0);
  const std::string qa = testing::ReadText(tmp_ / "a.txt");
  EXPECT_EQ(qa, testing::ReadText(tmp_ / "b.txt"));
  EXPECT_NE(qa, testing::ReadText(tmp_ / "c.txt"));

  const testing::Reference ref(docs_, Analyzer());
  const auto lines = testing::Lines(qa);
  ASSERT_EQ(lines.size(), 2000u);
  std::array<double, 7> by_len{};
  for (const auto& line : lines) {
    const auto terms = Analyzer().Analyze(line);
    const std::set<std::string> unique(terms.begin(), terms.end());
    EXPECT_EQ(unique.size(), terms.size()) << "repeated term in '" << line << "'";
    ASSERT_GE(terms.size(), 1u);
    ASSERT_LE(terms.size(), 6u);
    for (const auto& t : terms) EXPECT_GE(ref.df(t), 2u) << t;
    ++by_len[terms.size()];
  }
  // Binomial standard deviation at n = 2000 is ~1%: allow 4%.
  EXPECT_NEAR(by_len[1] / 2000, 0.25, 0.04);
  EXPECT_NEAR(by_len[2] / 2000, 0.30, 0.04);
  EXPECT_NEAR(by_len[3] / 2000, 0.25, 0.04);
  EXPECT_NEAR((by_len[4] + by_len[5] + by_len[6]) / 2000, 0.20, 0.04);
  EXPECT_GT(by_len[6], 0);

  ASSERT_EQ(gen(tmp_ / "d.txt", "7", "0,100,0,0").exit_code, 0);
  for (const auto& line : testing::Lines(testing::ReadText(tmp_ / "d.txt")))
    EXPECT_EQ(Analyzer().Analyze(line).size(), 2u) << line;
}

TEST_F(SearchctlTest, BenchPrintsOneJsonLine) {
  ASSERT_EQ(Index(tmp_ / "idx").exit_code, 0);
  testing::WriteText(tmp_ / "q.txt", "w1 w2\nw0\nw3 w4 w5\n");
  // --tuning repeats; the CPU engine accepts the GPU keys and ignores them.
  auto r = Ctl({"bench", "--index", tmp_ / "idx", "--queries", tmp_ / "q.txt", "--mode", "or", "--k", "10", "--threads",
                "2", "--seconds", "0.3", "--warmup", "0.1", "--tuning", "gpu-or-pruned-divisor=2", "--tuning",
                "gpu-or-theta-min-postings=0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = testing::Lines(r.out);
  ASSERT_EQ(lines.size(), 1u);
  const Json j = Json::parse(lines[0]);
  for (const char* key :
       {"mode", "k", "threads", "queries", "qps", "mean_us", "p50_us", "p95_us", "p99_us", "p999_us",
        "postings_decoded_per_query", "blocks_decoded_per_query", "bytes_touched_per_query", "hits_per_query"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["mode"], "or");
  EXPECT_EQ(j["threads"], 2);
  EXPECT_GT(j["queries"].get<uint64_t>(), 0u);
  EXPECT_GT(j["qps"].get<double>(), 0);
  EXPECT_LE(j["p50_us"].get<double>(), j["p95_us"].get<double>());
  EXPECT_LE(j["p95_us"].get<double>(), j["p99_us"].get<double>());
  EXPECT_LE(j["p99_us"].get<double>(), j["p999_us"].get<double>());
  EXPECT_GT(j["postings_decoded_per_query"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["hits_per_query"].get<double>(), 10.0);  // every query has >= 10 hits in or mode
}

// By default the CPU engine answers every query once before the timed run and says how long that
// took; --cold skips that pass. Without --threads every CPU it may use runs a client thread.
TEST_F(SearchctlTest, BenchWarmsTheCpuEngineUnlessCold) {
  ASSERT_EQ(Index(tmp_ / "idx").exit_code, 0);
  testing::WriteText(tmp_ / "q.txt", "w1 w2\nw0\nw3 w4 w5\n");
  auto r = Ctl({"bench", "--index", tmp_ / "idx", "--queries", tmp_ / "q.txt", "--mode", "and", "--seconds", "0.2",
                "--warmup", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(testing::Lines(r.out).at(0));
  ASSERT_TRUE(j.contains("cpu_prewarm_s"));
  EXPECT_GT(j["cpu_prewarm_s"].get<double>(), 0);
  EXPECT_GT(j["queries"].get<uint64_t>(), 0u);
  EXPECT_TRUE(j.contains("scored_per_query"));
  EXPECT_EQ(j["threads"].get<unsigned>(), AvailableCores());
  auto cold = Ctl({"bench", "--index", tmp_ / "idx", "--queries", tmp_ / "q.txt", "--mode", "and", "--threads", "1",
                   "--seconds", "0.2", "--warmup", "0", "--cold"});
  ASSERT_EQ(cold.exit_code, 0) << cold.err;
  const Json jc = Json::parse(testing::Lines(cold.out).at(0));
  EXPECT_FALSE(jc.contains("cpu_prewarm_s"));
  EXPECT_EQ(jc["threads"], 1);
}

// Without --list-cache-mib the list cache holds every list of the index (a small index on any
// machine: they fit in half of MemAvailable), one stderr line says so, and the warm pass leaves
// every list the queries touch cached within that budget; --list-cache-mib N sets N MiB a shard.
TEST_F(SearchctlTest, BenchSizesTheListCacheFromTheIndex) {
  ASSERT_EQ(Index(tmp_ / "idx", {"--shards", "2"}).exit_code, 0);
  testing::WriteText(tmp_ / "q.txt", "w1 w2\nw0\nw3 w4 w5\n");
  auto r = Ctl({"bench", "--index", tmp_ / "idx", "--queries", tmp_ / "q.txt", "--mode", "or", "--threads", "1",
                "--seconds", "0.1", "--warmup", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("searchctl bench: list cache "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("every list"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of 2 shards"), std::string::npos) << r.err;
  EXPECT_EQ(testing::Lines(r.err).size(), 1u) << r.err;
  const Json j = Json::parse(testing::Lines(r.out).at(0));
  const uint64_t capacity = j["list_cache_capacity_bytes"].get<uint64_t>();
  EXPECT_GT(j["list_cache_bytes"].get<uint64_t>(), 0u);
  EXPECT_LE(j["list_cache_bytes"].get<uint64_t>(), capacity);
  EXPECT_LT(capacity, uint64_t{64} << 20);  // sized by the index, not a fixed default

  auto fixed = Ctl({"bench", "--index", tmp_ / "idx", "--queries", tmp_ / "q.txt", "--mode", "or", "--threads", "1",
                    "--seconds", "0.1", "--warmup", "0", "--list-cache-mib", "3"});
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_EQ(fixed.err.find("list cache"), std::string::npos) << fixed.err;
  EXPECT_EQ(Json::parse(testing::Lines(fixed.out).at(0))["list_cache_capacity_bytes"].get<uint64_t>(),
            uint64_t{2 * 3} << 20);
}

// --per-query: after the run, one CSV row per query of the file, timed alone: its number, terms,
// its lists' lengths in order (from the reference corpus's document frequencies), a positive time
// (the faster of two runs, at most the first run's time in the last column) and the hits the engine returns (a term the
// index lacks: no lists, no hits in and mode). A path that cannot be opened fails before the run.
TEST_F(SearchctlTest, BenchPerQueryTimesEveryQueryAlone) {
  ASSERT_EQ(Index(tmp_ / "idx", {"--shards", "2"}).exit_code, 0);
  const std::vector<std::string> queries = {"w1 w2", "w0", "w3 w17 w250", "zzz w1"};
  std::string file;
  for (const auto& q : queries) file += q + "\n";
  testing::WriteText(tmp_ / "q.txt", file);
  auto r = Ctl({"bench", "--index", tmp_ / "idx", "--queries", tmp_ / "q.txt", "--mode", "and", "--seconds", "0.1",
                "--warmup", "0", "--per-query", tmp_ / "pq.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json::parse(testing::Lines(r.out).at(0)).at("per_query_file"), std::string(tmp_ / "pq.csv"));
  const auto lines = testing::Lines(testing::ReadText(tmp_ / "pq.csv"));
  ASSERT_EQ(lines.size(), queries.size() + 1);
  EXPECT_EQ(lines[0], "query,terms,shortest,second,total,us,postings_decoded,hits,us_first");
  const testing::Reference ref(docs_, Analyzer());
  auto index = LocalIndex::Open(tmp_ / "idx");
  ASSERT_TRUE(index.ok());
  for (size_t i = 0; i < queries.size(); ++i) {
    SCOPED_TRACE(queries[i]);
    std::vector<std::string> f;
    std::stringstream ss(lines[i + 1]);
    for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
    ASSERT_EQ(f.size(), 9u);
    EXPECT_EQ(f[0], std::to_string(i + 1));
    const auto terms = Analyzer().AnalyzeQuery(queries[i]);
    EXPECT_EQ(f[1], std::to_string(terms.size()));
    std::vector<uint64_t> df;
    for (const auto& t : terms) df.push_back(ref.df(t));
    std::sort(df.begin(), df.end());
    uint64_t total = 0;
    for (uint64_t d : df) total += d;
    EXPECT_EQ(std::stoull(f[2]), df.at(0));
    EXPECT_EQ(std::stoull(f[3]), df.size() < 2 ? 0 : df[1]);
    EXPECT_EQ(std::stoull(f[4]), total);
    EXPECT_GT(std::stod(f[5]), 0.0);
    EXPECT_GE(std::stod(f[8]), std::stod(f[5]));  // the first run is one of the two
    auto want = (*index)->Search(queries[i], QueryMode::kAnd, 10);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(std::stoull(f[7]), want->hits.size());
  }
  auto bad = Ctl({"bench", "--index", tmp_ / "idx", "--queries", tmp_ / "q.txt", "--seconds", "0.1", "--per-query",
                  tmp_ / "no/such/dir.csv"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("cannot open the --per-query file"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty()) << bad.out;  // no run
}

// An in-process HTTP server standing in for the integrator in the loadgen tests: routes go on
// `http` before Start(); with `threads` > 0 a pool of that many (a thread per kept-alive
// connection; with fewer, connections beyond the pool wait for a thread until another
// connection's keep-alive ends, whatever the client). Stopped when it goes out of scope, an early
// ASSERT's return included.
class StandIn {
 public:
  explicit StandIn(size_t threads = 0) {
    if (threads > 0) http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  }
  ~StandIn() {
    if (serve_.joinable()) {
      http.stop();
      serve_.join();
    }
  }
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;
  // Binds a free port and serves there; the --url to give loadgen, or "" when nothing could bind.
  std::string Start() {
    const int port = http.bind_to_any_port("127.0.0.1");
    if (port <= 0) return "";
    serve_ = std::thread([this] { http.listen_after_bind(); });
    return "http://127.0.0.1:" + std::to_string(port);
  }
  httplib::Server http;

 private:
  std::thread serve_;
};

// A whole, empty answer of one shard.
constexpr const char* kEmptyAnswer =
    R"({"timed_out":false,"_shards":{"total":1,"successful":1,"failed":0},"hits":{"hits":[]}})";

// A stand-in that answers every search at once with no hits, started, and a two-query file.
struct EmptyAnswers {
  explicit EmptyAnswers(size_t threads) : server(threads) {
    server.http.Get("/search", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(kEmptyAnswer, "application/json");
    });
    url = server.Start();
    testing::WriteText(tmp / "q.txt", "one\ntwo\n");
  }
  StandIn server;
  TempDir tmp;
  std::string url;  // "" when nothing could bind
};

// loadgen against a stand-in integrator (an in-process HTTP server) that answers by query: 200,
// 200 after 250 ms, a partial 200, 429 and 503. The counts by status, the partial and error
// counts, the deadline misses and the separate latencies of answers and of shed load follow.
TEST(SearchctlLoadgenTest, CountsAnswersByStatusAndSeparatesShedLoad) {
  StandIn server(32);  // a thread per kept-alive connection
  server.http.Get("/search", [](const httplib::Request& req, httplib::Response& res) {
    const std::string q = req.get_param_value("q");
    if (q.rfind("shed", 0) == 0) {
      res.status = 429;
      res.set_content(R"({"error":"too many"})", "application/json");
      return;
    }
    if (q.rfind("down", 0) == 0) {
      res.status = 503;
      res.set_content(R"({"error":"no shard"})", "application/json");
      return;
    }
    if (q.rfind("slow", 0) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const int failed = q.rfind("part", 0) == 0 ? 1 : 0;
    res.set_content(R"({"timed_out":false,"_shards":{"total":2,"successful":)" + std::to_string(2 - failed) +
                        R"(,"failed":)" + std::to_string(failed) + R"(},"hits":{"hits":[]}})",
                    "application/json");
  });
  const std::string url = server.Start();
  ASSERT_FALSE(url.empty());
  TempDir tmp;
  testing::WriteText(tmp / "q.txt", "fast one\nshed two\ndown three\npart four\nslow five\n");
  auto r = Ctl({"loadgen", "--url", url, "--queries", tmp / "q.txt", "--rate", "100", "--seconds", "1", "--warmup", "0",
                "--connections", "32", "--deadline-ms", "150", "--trace", tmp / "trace.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = testing::Lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const Json j = Json::parse(lines[0]);
  const uint64_t n = j["queries"];
  ASSERT_GT(n, 20u);
  // Queries are sent in file order, so each kind is a fifth of the arrivals, to within one.
  const Json& http = j["http"];
  const uint64_t c429 = http.value("429", uint64_t{0}), c503 = http.value("503", uint64_t{0});
  const uint64_t c200 = http.value("200", uint64_t{0});
  EXPECT_EQ(c200 + c429 + c503, n) << lines[0];
  EXPECT_FALSE(http.contains("none")) << lines[0];
  for (uint64_t c : {c429, c503}) {
    EXPECT_GE(c * 5 + 5, n) << lines[0];
    EXPECT_LE(c * 5, n + 5) << lines[0];
  }
  EXPECT_EQ(j["errors"].get<uint64_t>(), c429 + c503);
  EXPECT_EQ(j["rejected"].get<uint64_t>(), c429 + c503);
  const uint64_t partial = j["partial"];
  EXPECT_GE(partial * 5 + 5, n) << lines[0];
  EXPECT_LE(partial * 5, n + 5) << lines[0];
  // Misses: shed, down, partial and the 250 ms answers past the 150 ms deadline, at least.
  EXPECT_GE(j["deadline_misses"].get<uint64_t>() * 5 + 20, 4 * n) << lines[0];
  EXPECT_EQ(j["ok"].get<uint64_t>() + j["deadline_misses"].get<uint64_t>(), n);
  // The 200s include the slow fifth; the shed load is answered at once. Both latencies count the
  // load generator's own wait for a free connection (on a busy 2-core CI machine, once 455 ms at
  // p99), so the server's part of a shed answer is checked in the trace below, without it.
  EXPECT_GE(j["answered_p99_us"].get<double>(), 250000.0) << lines[0];
  EXPECT_LT(j["rejected_p50_us"].get<double>(), j["answered_p99_us"].get<double>()) << lines[0];

  // --trace: one row per query, in arrival order, agreeing with the summary and with the server.
  const auto trace = testing::Lines(testing::ReadText(tmp / "trace.csv"));
  ASSERT_EQ(trace.size(), n + 1);  // every arrival measured (--warmup 0), plus the header
  EXPECT_EQ(trace[0], "arrival_s,latency_ms,http,ok,measured,query,send_wait_ms,release_lag_ms");
  uint64_t ok = 0, slow = 0;
  double last_arrival = -1, send_wait_sum = 0;
  std::vector<double> shed_served, slow_served;  // an answer's latency less its wait for a connection
  for (size_t i = 1; i < trace.size(); ++i) {
    double arrival = 0, latency = 0, send_wait = -1, release_lag = -1;
    int http_status = 0, row_ok = 0, measured = 0, query = 0;
    ASSERT_EQ(std::sscanf(trace[i].c_str(), "%lf,%lf,%d,%d,%d,%d,%lf,%lf", &arrival, &latency, &http_status, &row_ok,
                          &measured, &query, &send_wait, &release_lag),
              8)
        << trace[i];
    EXPECT_GE(release_lag, 0.0) << trace[i];
    EXPECT_LE(release_lag, send_wait) << trace[i];  // a part of the wait
    EXPECT_GE(arrival, last_arrival) << trace[i];
    last_arrival = arrival;
    EXPECT_EQ(measured, 1);
    ASSERT_GE(query, 1);
    ASSERT_LE(query, 5);
    EXPECT_GE(send_wait, 0.0) << trace[i];
    EXPECT_LE(send_wait, latency) << trace[i];
    send_wait_sum += send_wait;
    const int want = query == 2 ? 429 : query == 3 ? 503 : 200;
    EXPECT_EQ(http_status, want) << trace[i];
    if (query == 2 || query == 3) shed_served.push_back(latency - send_wait);
    if (query == 5) {
      EXPECT_GE(latency - send_wait, 250.0) << trace[i];  // the server's own 250 ms
      EXPECT_EQ(row_ok, 0) << trace[i];                   // past the 150 ms deadline
      slow_served.push_back(latency - send_wait);
      ++slow;
    }
    ok += row_ok;
  }
  EXPECT_EQ(ok, j["ok"].get<uint64_t>());
  EXPECT_GT(slow, 0u);
  // The trace's waits are the summary's.
  EXPECT_NEAR(send_wait_sum / static_cast<double>(n), j["send_wait_mean_us"].get<double>() / 1e3, 0.01) << lines[0];
  // Shed at once: faster than the slow fifth, measured the same way (not against a fixed time, which
  // a loaded machine's scheduling could exceed).
  ASSERT_FALSE(shed_served.empty());
  std::sort(shed_served.begin(), shed_served.end());
  std::sort(slow_served.begin(), slow_served.end());
  EXPECT_LT(shed_served[shed_served.size() / 2], slow_served[slow_served.size() / 2]) << lines[0];
}

// send_wait: with one connection and answers that take 100 ms, arrivals every 10 ms on average
// queue in the load generator for a free connection (about 4.5 s by the end of half a second),
// and that wait is part of their latency; with 32 connections the wait is a small fraction of it.
// Either way the load generator keeps to its schedule: the wait is for a connection, not its loop
// releasing arrivals late (release_lag).
TEST(SearchctlLoadgenTest, SendWaitIsTheLoadGeneratorsOwnQueue) {
  StandIn server(32);  // a thread per kept-alive connection
  server.http.Get("/search", [](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    res.set_content(kEmptyAnswer, "application/json");
  });
  const std::string url = server.Start();
  ASSERT_FALSE(url.empty());
  TempDir tmp;
  testing::WriteText(tmp / "q.txt", "one\ntwo\n");
  auto run = [&](const char* connections) {
    auto r = Ctl({"loadgen", "--url", url, "--queries", tmp / "q.txt", "--rate", "100", "--seconds", "0.5", "--warmup",
                  "0", "--connections", connections, "--deadline-ms", "5000"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Json::parse(testing::Lines(r.out).at(0));
  };
  const Json one = run("1"), many = run("32");
  for (const Json* j : {&one, &many}) {
    ASSERT_TRUE(j->contains("send_wait_p99_us")) << j->dump();
    EXPECT_GE((*j)["send_wait_mean_us"].get<double>(), 0.0);
    EXPECT_LE((*j)["send_wait_p99_us"].get<double>(), (*j)["p99_us"].get<double>()) << j->dump();
    ASSERT_TRUE(j->contains("release_lag_p99_us")) << j->dump();
    EXPECT_LE((*j)["release_lag_p99_us"].get<double>(), (*j)["send_wait_p99_us"].get<double>()) << j->dump();
    EXPECT_LE((*j)["release_lag_p99_us"].get<double>(), (*j)["release_lag_max_us"].get<double>()) << j->dump();
  }
  EXPECT_GT(one["send_wait_p99_us"].get<double>(), 1e6) << one.dump();  // ~4.5 s of queue by the end
  // The loop itself released the queued arrivals on time, and 32 connections hardly wait: both
  // well under the seconds of queue (generous: a busy 2-core CI machine may hold a loop off its CPU
  // for a while).
  EXPECT_LT(one["release_lag_p99_us"].get<double>() * 4, one["send_wait_p99_us"].get<double>()) << one.dump();
  EXPECT_LT(many["send_wait_p99_us"].get<double>() * 4, one["send_wait_p99_us"].get<double>()) << many.dump();
}

// The descriptor table is grown for every connection before the loops start (a growth once they run
// would stall them for an RCU grace period), though at this rate a few connections are ever open.
TEST(SearchctlLoadgenTest, DescriptorTableIsGrownForEveryConnectionUpFront) {
  EmptyAnswers stand_in(4);
  ASSERT_FALSE(stand_in.url.empty());
  auto r = Ctl({"loadgen", "--url", stand_in.url, "--queries", stand_in.tmp / "q.txt", "--rate", "50", "--seconds",
                "0.2", "--warmup", "0", "--connections", "600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(testing::Lines(r.out).at(0));
  ASSERT_TRUE(j.contains("fd_slots")) << j.dump();
  EXPECT_GE(j["fd_slots"].get<int>(), 600 + 64) << j.dump();
  EXPECT_EQ(j["errors"].get<int>(), 0) << j.dump();
}

// --pin-loops: each loop pins itself to one CPU of the process's mask and the summary counts them;
// off by default. Without it the loops share the host's CPU home at low load: at 200 q/s they move
// there (the node's and the integrator's home: PickHome of the same CPUs). Either way every answer
// is counted as before.
TEST(SearchctlLoadgenTest, PinLoopsPinsEveryLoopAndElseTheyGoHome) {
  EmptyAnswers stand_in(4);
  ASSERT_FALSE(stand_in.url.empty());
  const std::vector<int> cpus = AllowedCpus();
  for (const bool pin : {false, true}) {
    SCOPED_TRACE(pin);
    std::vector<std::string> args = {"loadgen", "--url", stand_in.url, "--queries", stand_in.tmp / "q.txt", "--rate",
                                     "200", "--seconds", "0.5", "--warmup", "0", "--connections", "4", "--threads", "3"};
    if (pin) args.insert(args.end(), {"--pin-loops", "true"});
    auto r = Ctl(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Json j = Json::parse(testing::Lines(r.out).at(0));
    EXPECT_EQ(j["pinned_loops"].get<int>(), pin ? 3 : 0) << j.dump();
    EXPECT_EQ(j["errors"].get<int>(), 0) << j.dump();
    EXPECT_GT(j["ok"].get<int>(), 0) << j.dump();
    ASSERT_TRUE(j.contains("cpu_home")) << j.dump();
    if (pin || cpus.size() < 2) {
      EXPECT_TRUE(j["cpu_home"].is_null()) << j.dump();
    } else {
      ASSERT_TRUE(j["cpu_home"].is_object()) << j.dump();
      EXPECT_EQ(j["cpu_home"]["cpu"].get<int>(), CpuHome::PickHome(cpus)) << j.dump();
      EXPECT_GE(j["cpu_home"]["moves_home"].get<int>(), 1) << j.dump();
    }
  }
}

// --ramp-up: the warm-up's arrivals come at a rate rising linearly from 0 (a quarter of them in its
// first half, three quarters in its second), and the measured ones at the full rate.
TEST(SearchctlLoadgenTest, RampUpRaisesTheWarmupRateLinearly) {
  EmptyAnswers stand_in(16);
  ASSERT_FALSE(stand_in.url.empty());
  const std::string& url = stand_in.url;
  const TempDir& tmp = stand_in.tmp;
  auto run = [&](bool ramp) {
    std::vector<std::string> args = {
        "loadgen", "--url",         url,         "--queries", tmp / "q.txt",
        "--rate",  "800",           "--seconds", "0.5",       "--warmup",
        "1",       "--connections", "16",        "--trace",   tmp / (ramp ? "ramp.csv" : "flat.csv")};
    if (ramp) args.push_back("--ramp-up");
    auto r = Ctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // Arrivals in the warm-up's halves and in the measured part.
    std::array<int, 3> n{};
    const auto trace = testing::Lines(testing::ReadText(tmp / (ramp ? "ramp.csv" : "flat.csv")));
    for (size_t i = 1; i < trace.size(); ++i) {
      double arrival = 0;
      int measured = 0;
      EXPECT_EQ(std::sscanf(trace[i].c_str(), "%lf,%*f,%*d,%*d,%d", &arrival, &measured), 2) << trace[i];
      EXPECT_EQ(measured == 1, arrival >= 1.0) << trace[i];
      ++n[measured == 1 ? 2 : arrival < 0.5 ? 0 : 1];
    }
    const Json j = Json::parse(testing::Lines(r.out).at(0));
    EXPECT_EQ(j["ramp_up"].get<bool>(), ramp);
    EXPECT_EQ(j["queries"].get<int>(), n[2]);
    return n;
  };
  const auto ramp = run(true), flat = run(false);
  // Expected: ramped 100 and 300 in the halves, flat 400 and 400; measured 400 either way (Poisson,
  // so a standard deviation of 10-20).
  EXPECT_GT(ramp[0], 50);
  EXPECT_LT(ramp[0], 160);
  EXPECT_GT(ramp[1], 220);
  EXPECT_LT(ramp[1], 380);
  EXPECT_LT(ramp[0] * 2, ramp[1]);
  EXPECT_GT(flat[0], 320);
  EXPECT_GT(flat[1], 320);
  for (const auto* n : {&ramp, &flat}) {
    EXPECT_GT((*n)[2], 320);
    EXPECT_LT((*n)[2], 480);
  }
}

// loadgen against a server that breaks HTTP: by query, a garbage answer, a response cut off by
// the connection's end, a chunked 200 that is fine, and a Content-Length answer split over two
// writes. Every query is accounted for (the broken ones as errors with no HTTP status), none
// hangs, and the well-formed answers count as ok.
TEST(SearchctlLoadgenTest, BrokenResponsesAreErrorsAndLoseNoQuery) {
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(lfd, 64), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  std::atomic<bool> stop{false};
  std::vector<std::thread> conns;
  std::thread acceptor([&] {
    while (!stop) {
      const int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      conns.emplace_back([fd] {
        const std::string ok_body = R"({"timed_out":false,"_shards":{"total":1,"successful":1,"failed":0}})";
        std::string in;
        char buf[4096];
        for (;;) {
          const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
          if (r <= 0) break;
          in.append(buf, static_cast<size_t>(r));
          const size_t end = in.find("\r\n\r\n");
          if (end == std::string::npos) continue;
          const std::string request = in.substr(0, end);
          in.erase(0, end + 4);
          auto say = [fd](const std::string& bytes) { (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); };
          if (request.find("q=garbage") != std::string::npos) {
            say("this is not HTTP at all\r\n\r\n");
            break;
          }
          if (request.find("q=cut") != std::string::npos) {
            say("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"timed_out\"");
            break;
          }
          if (request.find("q=chunked") != std::string::npos) {
            char size[16];
            std::snprintf(size, sizeof size, "%zx", ok_body.size());
            say("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(size) + "\r\n" + ok_body +
                "\r\n0\r\n\r\n");
            continue;
          }
          const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(ok_body.size()) + "\r\n\r\n";
          say(head + ok_body.substr(0, 10));
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          say(ok_body.substr(10));
        }
        ::close(fd);
      });
    }
  });
  TempDir tmp;
  testing::WriteText(tmp / "q.txt", "garbage\ncut\nchunked\nsplit\n");
  auto r = Ctl({"loadgen", "--url", "http://127.0.0.1:" + std::to_string(port), "--queries", tmp / "q.txt", "--rate",
                "200", "--seconds", "1", "--warmup", "0", "--connections", "8", "--deadline-ms", "1000", "--trace",
                tmp / "trace.csv"});
  stop = true;
  ::shutdown(lfd, SHUT_RDWR);
  ::close(lfd);
  acceptor.join();
  for (auto& t : conns) t.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(testing::Lines(r.out).at(0));
  const uint64_t n = j["queries"];
  ASSERT_GT(n, 100u) << r.out;
  const uint64_t none = j["http"].value("none", uint64_t{0}), c200 = j["http"].value("200", uint64_t{0});
  EXPECT_EQ(none + c200, n) << r.out;
  EXPECT_EQ(j["errors"].get<uint64_t>(), none) << r.out;
  EXPECT_EQ(j["ok"].get<uint64_t>(), c200) << r.out;  // every well-formed answer was fine and in time
  const auto trace = testing::Lines(testing::ReadText(tmp / "trace.csv"));
  ASSERT_EQ(trace.size(), n + 1);
  for (size_t i = 1; i < trace.size(); ++i) {
    double arrival = 0, latency = 0;
    int http_status = 0, row_ok = 0, measured = 0, query = 0;
    ASSERT_EQ(std::sscanf(trace[i].c_str(), "%lf,%lf,%d,%d,%d,%d", &arrival, &latency, &http_status, &row_ok, &measured,
                          &query),
              6);
    EXPECT_EQ(http_status, query <= 2 ? 0 : 200) << trace[i];  // queries 1, 2: garbage and cut
    EXPECT_EQ(row_ok, query <= 2 ? 0 : 1) << trace[i];
  }
}

TEST(SearchctlLoadgenTest, AnUnwritableTraceFailsAndLosesNoRun) {
  std::atomic<int> served{0};
  StandIn server;
  server.http.Get("/search", [&](const httplib::Request&, httplib::Response& res) {
    ++served;
    res.set_content(R"({"timed_out":false,"_shards":{"total":1,"successful":1,"failed":0}})", "application/json");
  });
  const std::string url = server.Start();
  ASSERT_FALSE(url.empty());
  TempDir tmp;
  testing::WriteText(tmp / "q.txt", "one\n");
  auto r = Ctl({"loadgen", "--url", url, "--queries", tmp / "q.txt", "--rate", "100", "--seconds", "0.3", "--warmup",
                "0", "--trace", tmp / "no-such-dir/trace.csv"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot open the trace file"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(served.load(), 0);  // no query was sent

  // A trace that opens but cannot be written (a full disk: /dev/full) fails the command after
  // the run, with the summary still printed.
  const int served_before = served.load();
  if (std::filesystem::exists("/dev/full")) {
    auto full = Ctl({"loadgen", "--url", url, "--queries", tmp / "q.txt", "--rate", "100", "--seconds", "0.3",
                     "--warmup", "0", "--trace", "/dev/full"});
    EXPECT_NE(full.exit_code, 0);
    EXPECT_NE(full.err.find("cannot write the trace"), std::string::npos) << full.err;
    const auto lines = testing::Lines(full.out);
    EXPECT_EQ(lines.size(), 1u) << full.out;
    if (lines.size() == 1) {
      EXPECT_GT(Json::parse(lines[0])["queries"].get<uint64_t>(), 0u);
    }
    EXPECT_GT(served.load(), served_before);
  }
}

TEST_F(SearchctlTest, GzipInputAndAnalyzerOptionsThroughTheCli) {
  testing::WriteJsonlGz(tmp_ / "s.jsonl.gz", {{"r1", "He runs fast"}, {"r2", "the slow one"}, {"r3", "nothing"}});
  testing::WriteText(tmp_ / "stop.txt", "# stopwords\nthe\nOne\n");
  auto r = Ctl({"index", "--input", tmp_ / "s.jsonl.gz", "--out", tmp_ / "idx", "--stem", "english", "--stopwords",
                tmp_ / "stop.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto m = Manifest::Read(tmp_ / "idx");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->analyzer.stem_language, "english");
  EXPECT_EQ(std::set<std::string>(m->analyzer.stopwords.begin(), m->analyzer.stopwords.end()),
            (std::set<std::string>{"the", "one"}));
  auto q = Ctl({"query", "--index", tmp_ / "idx", "--mode", "or", "--query", "running"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const Json j = Json::parse(q.out);
  ASSERT_EQ(j["hits"].size(), 1u);
  EXPECT_EQ(j["hits"][0]["id"], "r1");
  auto stop = Ctl({"query", "--index", tmp_ / "idx", "--mode", "or", "--query", "the ONE"});
  ASSERT_EQ(stop.exit_code, 0);
  EXPECT_TRUE(Json::parse(stop.out)["hits"].empty());
  // Phrases are analyzed like documents: stems match, and a stopword leaves no gap on either side
  // ("runs the fast" is the phrase "run fast", at positions 1-2 of r1's "he run fast race").
  testing::WriteText(tmp_ / "p.jsonl", "{\"id\": \"r1\", \"contents\": \"He runs the fast race\"}\n"
                                       "{\"id\": \"r2\", \"contents\": \"fast runs\"}\n");
  ASSERT_EQ(Ctl({"index", "--input", tmp_ / "p.jsonl", "--out", tmp_ / "pidx", "--stem", "english", "--stopwords",
                 tmp_ / "stop.txt"})
                .exit_code,
            0);
  auto phrase = Ctl({"query", "--index", tmp_ / "pidx", "--count", "--query", "\"Running the FAST\""});
  ASSERT_EQ(phrase.exit_code, 0) << phrase.err;
  const Json p = Json::parse(phrase.out);
  EXPECT_EQ(p.at("total"), 1);
  ASSERT_EQ(p["hits"].size(), 1u);
  EXPECT_EQ(p["hits"][0]["id"], "r1");
}

}  // namespace
}  // namespace search
