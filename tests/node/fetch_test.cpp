// The node's fetch phase: FetchDocs against the sources a shard was written with (any order,
// repeats, source off, highlights through the index's analyzer, a doc outside the shard, a shard
// without sources), and a NodeServer answering FetchRequests over the wire: the metrics count them,
// a corrupt source block is answered Corruption (no text) and turns the node's health degraded
// while searches go on.
#include "node/fetch.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "../prometheus_text.hpp"
#include "metrics/metrics.hpp"
#include "node/executor.hpp"
#include "node/node_server.hpp"
#include "node_fixture.hpp"

namespace search {
namespace {

using testing::CorruptSources;
using testing::TempDir;

// The source written for doc d: its words in "contents", an escape and an extra field.
std::string SourceOf(uint32_t d, const std::string& text) {
  return "{\"id\":\"ext-" + std::to_string(d) + "\", \"contents\":\"" + text + "\",\"x\":\"\\u00e9\"}";
}

// A shard of `n` docs over the words w0..w9 (with sources when `sources`: SourceOf, or source_of's
// when given); texts[d]: doc d's text.
Status WriteShard(const std::string& path, uint32_t n, bool sources, std::vector<std::string>* texts,
                  const std::function<std::string(uint32_t)>& source_of = nullptr) {
  std::mt19937 rng(7);
  std::map<std::string, std::vector<std::pair<uint32_t, uint32_t>>> postings;
  std::vector<uint32_t> lengths(n);
  uint64_t total = 0;
  texts->assign(n, "");
  for (uint32_t d = 0; d < n; ++d) {
    std::map<std::string, uint32_t> tf;
    const uint32_t len = 3 + rng() % 20;
    for (uint32_t i = 0; i < len; ++i) {
      const std::string w = testing::Word(rng() % 10);
      ++tf[w];
      (*texts)[d] += (i ? " " : "") + (i % 5 == 0 ? "W" + w.substr(1) : w);
    }
    for (const auto& [t, f] : tf) postings[t].push_back({d, f});
    lengths[d] = len;
    total += len;
  }
  ShardMeta meta;
  meta.doc_end = n;
  meta.stats.num_docs = n;
  meta.stats.total_tokens = total;
  meta.sources = sources;
  auto writer = ShardWriter::Create(path, meta);
  if (!writer.ok()) return writer.status();
  for (const auto& [term, list] : postings) {
    std::vector<uint32_t> docs, tfs;
    for (const auto& [d, f] : list) {
      docs.push_back(d);
      tfs.push_back(f);
    }
    auto blob = EncodeList(docs, tfs, 0, [](uint32_t, uint32_t) { return 1.0f; });
    if (!blob.ok()) return blob.status();
    auto view = ListView::Parse(*blob);
    if (!view.ok()) return view.status();
    TermInfo info;
    info.df = info.count = static_cast<uint32_t>(docs.size());
    info.cf = docs.size();
    info.max_score = view->max_score();
    info.list_bytes = static_cast<uint32_t>(blob->size());
    SEARCH_RETURN_IF_ERROR((*writer)->AddTerm(term, info, *blob));
  }
  for (uint32_t d = 0; d < n; ++d) {
    const std::string src = source_of ? source_of(d) : SourceOf(d, (*texts)[d]);
    SEARCH_RETURN_IF_ERROR((*writer)->AddDoc(d, "ext-" + std::to_string(d), lengths[d],
                                             sources ? std::optional<std::string_view>(src) : std::nullopt));
  }
  return (*writer)->Finish();
}

TEST(FetchDocs, SourcesAsWrittenAndHighlightsThroughTheAnalyzer) {
  TempDir dir;
  std::vector<std::string> texts;
  ASSERT_TRUE(WriteShard(dir.path() + "/s", 300, true, &texts).ok());
  auto reader = ShardReader::Open(dir.path() + "/s");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const Analyzer analyzer;
  FetchRequestMsg req;
  req.docs = {299, 0, 17, 17, 150};
  req.source = true;
  auto got = FetchDocs(**reader, analyzer, req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), req.docs.size());
  for (size_t i = 0; i < req.docs.size(); ++i) {
    const FetchedDocMsg& d = (*got)[i];
    EXPECT_EQ(d.doc, req.docs[i]);
    EXPECT_TRUE(d.has_source);
    EXPECT_EQ(d.source, SourceOf(d.doc, texts[d.doc]));
    EXPECT_TRUE(d.highlights.empty());
  }
  // Highlight alone: no source bytes, fragments marking w3 (also where the text says W3).
  req.source = false;
  req.highlight = true;
  req.highlight_terms = {"w3"};
  got = FetchDocs(**reader, analyzer, req);
  ASSERT_TRUE(got.ok());
  for (const FetchedDocMsg& d : *got) {
    EXPECT_TRUE(d.has_source);
    EXPECT_TRUE(d.source.empty());
    const bool has_w3 = (" " + texts[d.doc] + " ").find(" w3 ") != std::string::npos ||
                        (" " + texts[d.doc] + " ").find(" W3 ") != std::string::npos;
    EXPECT_EQ(!d.highlights.empty(), has_w3) << texts[d.doc];
    for (const auto& f : d.highlights)
      EXPECT_TRUE(f.find("<em>w3</em>") != std::string::npos || f.find("<em>W3</em>") != std::string::npos) << f;
  }
  req.docs = {300};
  EXPECT_EQ(FetchDocs(**reader, analyzer, req).status().code(), StatusCode::kInvalidArgument);
}

TEST(FetchDocs, AShardWithoutSourcesAnswersNotStored) {
  TempDir dir;
  std::vector<std::string> texts;
  ASSERT_TRUE(WriteShard(dir.path() + "/s", 50, false, &texts).ok());
  auto reader = ShardReader::Open(dir.path() + "/s");
  ASSERT_TRUE(reader.ok());
  FetchRequestMsg req;
  req.docs = {3, 4};
  req.source = req.highlight = true;
  req.highlight_terms = {"w1"};
  auto got = FetchDocs(**reader, Analyzer(), req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  for (const auto& d : *got) {
    EXPECT_FALSE(d.has_source);
    EXPECT_TRUE(d.source.empty());
    EXPECT_TRUE(d.highlights.empty());
  }
}

// Highlights come from the top-level "contents" string only: not a nested one, not a number, not
// from a source that is not an object.
TEST(FetchDocs, HighlightsComeFromTheTopLevelContentsString) {
  TempDir dir;
  std::vector<std::string> texts;
  const std::vector<std::string> sources = {
      R"({"a":{"contents":"w1 nested"},"contents":"w2 w1 top"})",
      R"({"contents":5,"b":"w1"})",
      R"({"x":[{"contents":"w1"}],"y":"w1"})",
      R"({"n":{"m":[1,{"contents":"w1 deep"}]},"t":[true,null,1.5],"contents":"last w1"})",
      R"({"contents":{"w1":"w1"}})",
      R"({"contents":"w3 \u00e9 w1 \"q\""})",
      R"(["contents","w1"])",
  };
  ASSERT_TRUE(WriteShard(dir.path() + "/s", static_cast<uint32_t>(sources.size()), true, &texts, [&](uint32_t d) {
                return sources[d];
              }).ok());
  auto reader = ShardReader::Open(dir.path() + "/s");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  FetchRequestMsg req;
  req.docs = {0, 1, 2, 3, 4, 5, 6};
  req.highlight = true;
  req.highlight_terms = {"w1"};
  auto got = FetchDocs(**reader, Analyzer(), req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].highlights, std::vector<std::string>{"w2 <em>w1</em> top"});
  EXPECT_TRUE((*got)[1].highlights.empty());
  EXPECT_TRUE((*got)[2].highlights.empty());
  EXPECT_EQ((*got)[3].highlights, std::vector<std::string>{"last <em>w1</em>"});
  EXPECT_TRUE((*got)[4].highlights.empty());
  ASSERT_EQ((*got)[5].highlights.size(), 1u);  // the string's escapes decoded
  EXPECT_EQ((*got)[5].highlights[0], "w3 \xc3\xa9 <em>w1</em> &quot;q&quot;");
  EXPECT_TRUE((*got)[6].highlights.empty());  // not an object
}

// Sources past one answer's budget: documents are kept in request order while they fit, the rest
// marked omitted (the answer always fits a frame); a document asked for alone still comes whole.
TEST(FetchDocs, AnAnswerStaysWithinItsBudget) {
  TempDir dir;
  std::vector<std::string> texts;
  const size_t big = kFetchAnswerBudget / 3 + 1;  // two fit, a third does not
  auto source_of = [big](uint32_t d) {
    return "{\"id\":\"" + std::to_string(d) + "\",\"contents\":\"" + std::string(d < 3 ? big : 10, 'a' + d) + "\"}";
  };
  ASSERT_TRUE(WriteShard(dir.path() + "/s", 4, true, &texts, source_of).ok());
  auto reader = ShardReader::Open(dir.path() + "/s");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  FetchRequestMsg req;
  req.docs = {2, 0, 1, 3};
  req.source = true;
  auto got = FetchDocs(**reader, Analyzer(), req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 4u);
  EXPECT_EQ((*got)[0].source, source_of(2));
  EXPECT_EQ((*got)[1].source, source_of(0));
  EXPECT_TRUE((*got)[2].omitted);
  EXPECT_TRUE((*got)[2].source.empty());
  EXPECT_TRUE((*got)[2].has_source);
  EXPECT_FALSE((*got)[3].omitted);  // a small one after it still fits
  EXPECT_EQ((*got)[3].source, source_of(3));
  FetchResponseMsg resp;
  resp.docs = *got;
  EXPECT_LE(EncodeFetchResponse(resp).size(), kMaxFrameBytes);
  req.docs = {1};
  got = FetchDocs(**reader, Analyzer(), req);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE((*got)[0].omitted);
  EXPECT_EQ((*got)[0].source, source_of(1));
}

TEST(NodeFetch, FetchesOverTheWireAreCountedAndCorruptSourcesDegradeTheHealth) {
  TempDir dir;
  std::vector<std::string> texts;
  const std::string path = dir.path() + "/s";
  ASSERT_TRUE(WriteShard(path, 200, true, &texts).ok());
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      ASSERT_TRUE(CorruptSources(path).ok());
    }
    auto reader = ShardReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    CpuExecutorAdapter cpu(reader->get());
    Metrics metrics("node");
    NodeServerOptions o;
    o.threads = 2;
    NodeServer server(reader->get(), &cpu, &metrics, o);
    ASSERT_TRUE(server.Start().ok());
    zmq::context_t ctx(1);
    testing::Client client(ctx, server.endpoint());
    FetchRequestMsg req;
    req.request_id = 41;
    req.docs = {5, 199};
    req.source = true;
    client.Send(EncodeFetchRequest(req));
    auto env = client.Recv();
    ASSERT_TRUE(env.has_value());
    ASSERT_EQ(env->kind(), MessageKind::kFetchResponse);
    const auto& resp = std::get<FetchResponseMsg>(env->body);
    EXPECT_EQ(resp.request_id, 41u);
    client.Send(EncodePing(PingMsg{2}));
    auto pong = client.Recv();
    ASSERT_TRUE(pong.has_value());
    const std::string state = std::get<PongMsg>(pong->body).health.state;
    const std::string text = metrics.SerializeText();
    if (round == 0) {
      ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
      ASSERT_EQ(resp.docs.size(), 2u);
      EXPECT_EQ(resp.docs[0].source, SourceOf(5, texts[5]));
      EXPECT_EQ(resp.docs[1].source, SourceOf(199, texts[199]));
      EXPECT_EQ(state, "serving");
      EXPECT_EQ(testing::SeriesValue(text, R"(search_node_fetches_total{status="ok"})"), 1);
      EXPECT_EQ(testing::SeriesValue(text, "search_node_fetched_docs_total"), 2);
      // An expired deadline: answered DeadlineExceeded, not run.
      req.request_id = 42;
      req.deadline_unix_micros = 1;
      client.Send(EncodeFetchRequest(req));
      env = client.Recv();
      ASSERT_TRUE(env.has_value());
      ASSERT_EQ(env->kind(), MessageKind::kFetchResponse);
      EXPECT_EQ(std::get<FetchResponseMsg>(env->body).status.code(), StatusCode::kDeadlineExceeded);
    } else {
      EXPECT_EQ(resp.status.code(), StatusCode::kCorruption) << resp.status.ToString();
      EXPECT_TRUE(resp.docs.empty());
      EXPECT_EQ(state.rfind("degraded: 1 request(s) hit corrupt data", 0), 0u) << state;
      EXPECT_EQ(testing::SeriesValue(text, R"(search_node_fetches_total{status="error"})"), 1);
      // Searches go on.
      SearchRequestMsg s;
      s.request_id = 3;
      s.terms = {"w1"};
      s.k = 5;
      client.Send(EncodeSearchRequest(s));
      EXPECT_TRUE(client.RecvResponse().status.ok());
    }
    server.Stop();
  }
}

}  // namespace
}  // namespace search
