// The query language and counts end to end with real processes on loopback: search-node processes
// (1 and 3 shards of one random corpus, indexed as `searchctl index` does) behind a
// search-integrator, asked over HTTP with the syntax (GET /search and /_search), the Elasticsearch
// DSL (POST /search and /_search), track_total_hits, and counts (GET /count, POST /_count). Every
// answer must equal LocalIndex's over the same index for the same parsed query: the same ids and
// docIDs in order, the same scores, the same exact totals; and the 1-shard and 3-shard indexes must
// agree with each other. A query the index cannot answer (a phrase without positions) must be the
// same refusal, as a 400; on an index built without positions every phrase is. Every process exits 0
// on SIGTERM.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cluster_expect.hpp"
#include "cluster_harness.hpp"
#include "core/query_parser.hpp"
#include "core/query_tree.hpp"
#include "cpu_exec/local_index.hpp"

namespace search::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kDocs = 2500;

struct Indexes {
  TempDir dir;
  Corpus corpus;
  std::string path[2];  // 1 shard, 3 shards
  std::unique_ptr<LocalIndex> local[2];
};
Indexes* g_indexes = nullptr;

// What LocalIndex answers for a parsed query: hits with ids, the total, or the refusal.
struct Expected {
  Status status;
  std::vector<ExternalHit> hits;
  uint64_t total = 0;
};

Expected Answer(const LocalIndex& index, const Result<QueryNode>& tree, QueryMode mode, uint32_t k, bool count) {
  Expected e;
  if (!tree.ok()) {
    e.status = tree.status();
    return e;
  }
  auto r = index.Search(MakeQuery(*tree, mode, k, count));
  if (!r.ok()) {
    e.status = r.status();
    return e;
  }
  auto hits = index.Resolve(r->hits);
  EXPECT_TRUE(hits.ok());
  if (hits.ok()) e.hits = *hits;
  EXPECT_EQ(r->has_total, count);
  e.total = r->total;
  return e;
}

// A random query in the syntax over the corpus' frequent words: signs, phrases (2-3 words, repeats
// possible), groups, mixed case and punctuation.
std::string RandomSyntax(const Corpus& c, std::mt19937& rng) {
  auto word = [&] {
    std::string w = c.vocab[rng() % (rng() % 4 == 0 ? 60 : 12)];
    if (rng() % 6 == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    return w;
  };
  auto clause = [&](int depth, auto&& self) -> std::string {
    const uint32_t sign = rng() % 6;
    std::string s = sign == 0 ? "-" : sign < 3 ? "+" : "";
    const uint32_t kind = rng() % 10;
    if (kind < 6 || depth == 0) return s + word();
    if (kind < 8) {
      std::string p = "\"" + word();
      for (uint32_t i = 1 + rng() % 2; i > 0; --i) p += " " + word();
      return s + p + "\"";
    }
    std::string g = "(";
    for (uint32_t i = 1 + rng() % 3; i > 0; --i) g += (g.size() > 1 ? " " : "") + self(depth - 1, self);
    return s + g + ")";
  };
  std::string q;
  for (uint32_t i = 1 + rng() % 4; i > 0; --i) q += (q.empty() ? "" : (rng() % 4 == 0 ? ", " : " ")) + clause(2, clause);
  return q;
}

// A random DSL query over the same words: bool of must/should/must_not/filter, match (or/and),
// match_phrase, term.
json RandomDsl(const Corpus& c, std::mt19937& rng, int depth) {
  auto word = [&] { return c.vocab[rng() % 12]; };
  const uint32_t kind = rng() % 10;
  if (kind < 3 || depth == 0) {
    if (rng() % 2 == 0) return json{{"match", {{"contents", word() + " " + word()}}}};
    return json{{"match", {{"contents", {{"query", word() + " " + word()}, {"operator", "and"}}}}}};
  }
  if (kind < 5) return json{{"match_phrase", {{"contents", word() + " " + word()}}}};
  if (kind < 6) return json{{"term", {{"contents", word()}}}};
  json b = json::object();
  const char* occurs[] = {"must", "should", "must_not", "filter"};
  for (uint32_t i = 1 + rng() % 3; i > 0; --i) {
    const char* o = occurs[rng() % 4];
    if (!b.contains(o)) b[o] = json::array();
    b[o].push_back(RandomDsl(c, rng, depth - 1));
  }
  if (!b.contains("must") && !b.contains("should") && !b.contains("filter")) b["should"] = {RandomDsl(c, rng, 0)};
  return json{{"bool", b}};
}

// Starts one search-node per shard of `index` and a search-integrator over them; *port: its HTTP
// port, once /health is green.
void StartCluster(const std::string& index, uint32_t shards, const TempDir& run,
                  std::vector<std::unique_ptr<Process>>* nodes, std::unique_ptr<Process>* integrator, int* port) {
  std::string endpoints;
  for (uint32_t s = 0; s < shards; ++s) {
    nodes->push_back(std::make_unique<Process>());
    ASSERT_TRUE(nodes->back()->Start({SEARCH_NODE_BIN, "--index", index + "/shard-" + std::to_string(s), "--listen",
                                      "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:0", "--threads", "2"},
                                     run.path() + "/node" + std::to_string(s)));
    auto ready = nodes->back()->WaitReady();
    ASSERT_TRUE(ready.has_value()) << nodes->back()->Logs();
    endpoints += (endpoints.empty() ? "" : ",") + ready->at("listen").get<std::string>();
  }
  *integrator = std::make_unique<Process>();
  ASSERT_TRUE((*integrator)->Start({SEARCH_INTEGRATOR_BIN, "--shards", endpoints, "--http", "127.0.0.1:0", "--metrics",
                                    "127.0.0.1:0", "--ping-ms", "200", "--cache-mb", "16", "--timeout-ms", "10000"},
                                   run.path() + "/integrator"));
  auto ready = (*integrator)->WaitReady();
  ASSERT_TRUE(ready.has_value()) << (*integrator)->Logs();
  const std::string http = ready->at("http").get<std::string>();
  *port = std::stoi(http.substr(http.rfind(':') + 1));
  const auto end = Clock::now() + 15s;
  while (Clock::now() < end) {
    auto h = Fetch(*port, "/health");
    if (h.status == 200 && h.body.is_object() && h.body["status"] == "green") return;
    std::this_thread::sleep_for(20ms);
  }
  FAIL() << "the cluster did not turn green: " << Fetch(*port, "/health").raw << (*integrator)->Logs();
}

class QueryLanguageTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    g_indexes = new Indexes;
    g_indexes->corpus = WriteCorpus(g_indexes->dir.path(), kDocs, 20261128);
    const uint32_t shards[2] = {1, 3};
    for (int i = 0; i < 2; ++i) {
      g_indexes->path[i] = g_indexes->dir.path() + "/index" + std::to_string(shards[i]);
      ASSERT_NO_FATAL_FAILURE(BuildAndOpen(g_indexes->corpus, g_indexes->path[i], shards[i], &g_indexes->local[i]));
    }
  }
  static void TearDownTestSuite() {
    delete g_indexes;
    g_indexes = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(g_indexes->local[1], nullptr);
    const int which = GetParam();
    run_ = std::make_unique<TempDir>();
    ASSERT_NO_FATAL_FAILURE(StartCluster(g_indexes->path[which], which == 0 ? 1 : 3, *run_, &nodes_, &integrator_, &port_));
  }
  void TearDown() override { StopGracefully(integrator_.get(), nodes_); }

  const LocalIndex& local() const { return *g_indexes->local[GetParam()]; }
  const LocalIndex& other() const { return *g_indexes->local[1 - GetParam()]; }

  // The HTTP answer against the expectation: hits and total, or the same refusal as a 400.
  static void ExpectAnswer(const HttpResult& got, const Expected& want, bool counted, const std::string& what) {
    if (!want.status.ok()) {
      EXPECT_EQ(got.status, 400) << what << ": " << got.raw;
      const std::string reason = got.body.is_object() ? got.body["error"].value("reason", "") : "";
      EXPECT_NE(reason.find(want.status.message()), std::string::npos)
          << what << ": " << got.raw << " vs " << want.status.ToString();
      return;
    }
    ASSERT_EQ(got.status, 200) << what << ": " << got.raw;
    ASSERT_NO_FATAL_FAILURE(ExpectSameHits(got.body["hits"]["hits"], want.hits, what));
    if (counted) {
      EXPECT_EQ(got.body["hits"]["total"]["value"], want.total) << what;
      EXPECT_EQ(got.body["hits"]["total"]["relation"], "eq") << what;
    } else {
      EXPECT_EQ(got.body["hits"]["total"], want.hits.size()) << what;
    }
  }

  // 1 and 3 shards give the same answer (ids, docIDs, scores to float rounding, totals).
  static void ExpectSameAcrossShardCounts(const Expected& a, const Expected& b, const std::string& what) {
    ASSERT_EQ(a.status.ok(), b.status.ok()) << what;
    if (!a.status.ok()) return;
    json hits = json::array();
    for (const auto& h : a.hits) hits.push_back({{"_id", h.id}, {"_doc", h.doc}, {"_score", h.score}});
    const std::string diff = HitsDiffer(hits, b.hits);
    if (!diff.empty()) {
      std::string dump;
      for (size_t i = 0; i < std::max(a.hits.size(), b.hits.size()); ++i) {
        dump += std::to_string(i) + ": ";
        if (i < a.hits.size()) dump += a.hits[i].id + " " + std::to_string(a.hits[i].doc) + " " + std::to_string(a.hits[i].score);
        dump += " | ";
        if (i < b.hits.size()) dump += b.hits[i].id + " " + std::to_string(b.hits[i].doc) + " " + std::to_string(b.hits[i].score);
        dump += "\n";
      }
      ADD_FAILURE() << what << " (1 vs 3 shards): " << diff << "\n" << dump;
    }
    EXPECT_EQ(a.total, b.total) << what;
  }

  std::unique_ptr<TempDir> run_;
  std::vector<std::unique_ptr<Process>> nodes_;
  std::unique_ptr<Process> integrator_;
  int port_ = 0;
};

TEST_P(QueryLanguageTest, SyntaxSearchesAndCountsEqualLocalIndex) {
  std::mt19937 rng(48 + GetParam());
  const Analyzer& an = local().analyzer();
  size_t trees = 0, matched = 0, refused = 0;
  for (int i = 0; i < 150; ++i) {
    const std::string q = RandomSyntax(g_indexes->corpus, rng);
    const QueryMode mode = static_cast<QueryMode>(rng() % 3);
    const uint32_t k = rng() % 5 == 0 ? 1 + rng() % 200 : 1 + rng() % 20;
    const bool counted = rng() % 2 == 0;
    const std::string what = "q=" + q + " mode=" + std::string(QueryModeName(mode)) + " k=" + std::to_string(k) +
                             (counted ? " track_total_hits" : "");
    const auto tree = ParseQuerySyntax(q, an);
    const Expected want = Answer(local(), tree, mode, k, counted);
    ExpectSameAcrossShardCounts(want, Answer(other(), tree, mode, k, counted), what);
    if (tree.ok() && !AsFlatQuery(*tree, mode, nullptr, nullptr)) ++trees;
    matched += want.total > 0 || !want.hits.empty();
    refused += !want.status.ok();
    httplib::Params p{{"q", q}, {"mode", std::string(QueryModeName(mode))}};
    p.emplace(i % 2 == 0 ? "k" : "size", std::to_string(k));
    if (counted) p.emplace("track_total_hits", "true");
    ASSERT_NO_FATAL_FAILURE(ExpectAnswer(Fetch(port_, i % 3 == 0 ? "/_search" : "/search", p), want, counted, what));
    // The count alone, through /count and /_count.
    const Expected count = Answer(local(), tree, mode, 0, true);
    const HttpResult c = Fetch(port_, i % 2 == 0 ? "/count" : "/_count", {{"q", q}, {"mode", std::string(QueryModeName(mode))}});
    if (count.status.ok()) {
      ASSERT_EQ(c.status, 200) << what << ": " << c.raw;
      EXPECT_EQ(c.body["count"], count.total) << what;
      EXPECT_EQ(c.body["_shards"]["failed"], 0) << what;
    } else {
      EXPECT_EQ(c.status, 400) << what << ": " << c.raw;
    }
  }
  EXPECT_GT(trees, 60u);
  EXPECT_GT(matched, 50u);
  // Bad syntax: a 400 that names the position, from the integrator alone.
  for (const char* bad : {"w1 \"w2 w3", "(w1 w2", "w1 ) w2", "+"}) {
    const HttpResult r = Fetch(port_, "/search", {{"q", bad}});
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.raw.find("position"), std::string::npos) << r.raw;
  }
  RecordProperty("refused", static_cast<int>(refused));  // phrases on an index without positions
}

TEST_P(QueryLanguageTest, DslSearchesAndCountsEqualLocalIndex) {
  std::mt19937 rng(4800 + GetParam());
  const Analyzer& an = local().analyzer();
  size_t matched = 0;
  for (int i = 0; i < 100; ++i) {
    json body = {{"query", RandomDsl(g_indexes->corpus, rng, 2)}};
    const uint32_t size = rng() % 6 == 0 ? 0 : 1 + rng() % 30;
    if (size != 10) body["size"] = size;
    const bool counted = size == 0 || rng() % 2 == 0;
    if (counted && size != 0) body["track_total_hits"] = true;
    const std::string text = body.dump();
    auto parsed = ParseSearchDsl(text, an);
    Result<QueryNode> tree = parsed.ok() ? Result<QueryNode>(parsed->tree) : Result<QueryNode>(parsed.status());
    const Expected want = Answer(local(), tree, QueryMode::kAnd, size, counted);
    ExpectSameAcrossShardCounts(want, Answer(other(), tree, QueryMode::kAnd, size, counted), text);
    matched += want.total > 0 || !want.hits.empty();
    ASSERT_NO_FATAL_FAILURE(ExpectAnswer(Fetch(port_, i % 2 == 0 ? "/search" : "/_search", {}, &text), want, counted, text));
    // The same query through /_count.
    const std::string count_body = json{{"query", body["query"]}}.dump();
    const Expected count = Answer(local(), tree, QueryMode::kAnd, 0, true);
    const HttpResult c = Fetch(port_, "/_count", {}, &count_body);
    if (count.status.ok()) {
      ASSERT_EQ(c.status, 200) << count_body << ": " << c.raw;
      EXPECT_EQ(c.body["count"], count.total) << count_body;
    } else {
      EXPECT_EQ(c.status, 400) << count_body << ": " << c.raw;
    }
  }
  EXPECT_GT(matched, 30u);
  // Unsupported DSL: a 400 naming the part.
  const std::string range = R"({"query": {"bool": {"must": [{"range": {"contents": {"gte": 3}}}]}}})";
  const HttpResult r = Fetch(port_, "/_search", {}, &range);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("range"), std::string::npos) << r.raw;
  EXPECT_NE(r.raw.find("must[0]"), std::string::npos) << r.raw;
}

// An index built without positions (searchctl index --no-positions): a phrase, by the syntax, the
// DSL or a count, is a 400 that says why (the node's refusal, asked of no other replica); everything
// else is answered as LocalIndex answers it.
TEST(QueryLanguageNoPositionsTest, PhrasesAre400AndTheRestIsAnswered) {
  TempDir dir;
  const Corpus corpus = WriteCorpus(dir.path(), 600, 7);
  IndexBuildOptions o;
  o.input = corpus.jsonl_path;
  o.output = dir.path() + "/index";
  o.shards = 2;
  o.threads = 2;
  o.memory_bytes = size_t{64} << 20;
  o.positions = false;
  auto built = BuildIndex(o);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto local = LocalIndex::Open(o.output);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  std::vector<std::unique_ptr<Process>> nodes;
  std::unique_ptr<Process> integrator;
  int port = 0;
  ASSERT_NO_FATAL_FAILURE(StartCluster(o.output, 2, dir, &nodes, &integrator, &port));
  const Analyzer& an = (*local)->analyzer();

  const std::string phrase = "+w1 \"w2 w3\"";
  const Expected refused = Answer(**local, ParseQuerySyntax(phrase, an), QueryMode::kAnd, 10, false);
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.message().find("positions"), std::string::npos) << refused.status.ToString();
  HttpResult r = Fetch(port, "/search", {{"q", phrase}});
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["reason"], refused.status.message()) << r.raw;
  r = Fetch(port, "/_count", {{"q", phrase}});
  EXPECT_EQ(r.status, 400) << r.raw;
  const std::string dsl = R"({"query": {"match_phrase": {"contents": "w2 w3"}}})";
  r = Fetch(port, "/_search", {}, &dsl);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("positions"), std::string::npos) << r.raw;

  for (const char* q : {"+w1 -w2", "w1 (w2 -w3)", "w4 w5"}) {
    const Expected want = Answer(**local, ParseQuerySyntax(q, an), QueryMode::kOr, 10, true);
    ASSERT_TRUE(want.status.ok()) << q << ": " << want.status.ToString();
    r = Fetch(port, "/search", {{"q", q}, {"mode", "or"}, {"track_total_hits", "true"}});
    ASSERT_EQ(r.status, 200) << q << ": " << r.raw;
    ASSERT_NO_FATAL_FAILURE(ExpectSameHits(r.body["hits"]["hits"], want.hits, q));
    EXPECT_EQ(r.body["hits"]["total"]["value"], want.total) << q;
  }
  StopGracefully(integrator.get(), nodes);
}

INSTANTIATE_TEST_SUITE_P(Shards, QueryLanguageTest, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& p) { return p.param == 0 ? "One" : "Three"; });

}  // namespace
}  // namespace search::testing
