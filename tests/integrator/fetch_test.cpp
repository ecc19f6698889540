// The integrator's fetch phase (query-then-fetch) against fake nodes: only the shards owning the
// final hits are asked, for exactly those docs, with what to highlight; sources are spliced into
// the answer byte for byte; _source=false and counts do not fetch; a shard that fails or stays
// silent at fetch leaves its hits "fetch failed" and a _shards.failures entry, in a 200 that is not
// cached; a shard without sources says "not stored"; the asynchronous path answers the same.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "fake_node.hpp"
#include "integrator_fixture.hpp"
#include "integrator/integrator.hpp"

namespace search {
namespace {

using nlohmann::json;
using testing::AnswerWith;
using testing::FakeNode;
using testing::Options;
using testing::Params;
using testing::WaitReady;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A source per doc: unicode, escapes, numbers as written, extra fields.
std::string SourceOf(uint32_t doc) {
  return "{\"id\":\"d" + std::to_string(doc) +
         "\", \"contents\":\"caf\xc3\xa9 \\u00e9 \\\"quoted\\\" apple\",\"n\":1.50e1,\"tags\":[ \"x\" ]}";
}

// Answers every fetch with SourceOf each doc and one fragment naming the highlight terms.
FakeNode::FetchHandler Sources() {
  return [](const FetchRequestMsg& f) -> std::optional<FetchResponseMsg> {
    FetchResponseMsg r;
    for (uint32_t d : f.docs) {
      FetchedDocMsg o{d, true, f.source ? SourceOf(d) : "", {}};
      if (f.highlight)
        for (const auto& t : f.highlight_terms) o.highlights.push_back("<em>" + t + "</em> in " + std::to_string(d));
      r.docs.push_back(std::move(o));
    }
    return r;
  };
}

const json& HitWithDoc(const json& answer, uint32_t doc) {
  for (const auto& h : answer["hits"]["hits"])
    if (h["_doc"] == doc) return h;
  static const json kNone;
  ADD_FAILURE() << "no hit with doc " << doc << " in " << answer.dump();
  return kNone;
}

TEST(Fetch, OnlyTheOwnersOfTheFinalHitsAreAskedAndSourcesAreSplicedByteForByte) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}, {1, 1.0f, "a1"}}), 3);
  FakeNode b(1, AnswerWith(1, {{700, 2.5f, "b700"}}), 3);
  FakeNode c(2, AnswerWith(2, {{900, 0.5f, "c900"}}), 3);
  for (FakeNode* n : {&a, &b, &c}) n->set_fetch_handler(Sources());
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint(), c.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_TRUE(WaitReady(**in));
  const HttpReply r = (*in)->Search(Params("apple pie", QueryMode::kOr, 2));
  ASSERT_EQ(r.status, 200) << r.body;
  // The final two hits are a5 and b700: c is not asked, a and b for exactly their docs.
  ASSERT_EQ(a.fetches().size(), 1u);
  ASSERT_EQ(b.fetches().size(), 1u);
  EXPECT_TRUE(c.fetches().empty());
  EXPECT_EQ(a.fetches()[0].docs, std::vector<uint32_t>{5});
  EXPECT_EQ(b.fetches()[0].docs, std::vector<uint32_t>{700});
  EXPECT_TRUE(a.fetches()[0].source);
  EXPECT_FALSE(a.fetches()[0].highlight);
  EXPECT_NE(a.fetches()[0].deadline_unix_micros, 0);
  // Byte for byte: the text holds each source exactly as the node sent it.
  EXPECT_NE(r.body.find("\"_source\":" + SourceOf(5)), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"_source\":" + SourceOf(700)), std::string::npos) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["hits"]["hits"].size(), 2u);
  EXPECT_EQ(HitWithDoc(j, 5)["_source"]["contents"], "caf\xc3\xa9 \xc3\xa9 \"quoted\" apple");
  EXPECT_FALSE(HitWithDoc(j, 5).contains("highlight"));
  EXPECT_FALSE(HitWithDoc(j, 5).contains("_source_missing"));
  EXPECT_EQ(j["_shards"]["failed"], 0);

  // _source=false: no fetch at all.
  SearchParams p = Params("apple", QueryMode::kOr, 2);
  p.source = false;
  const json none = json::parse((*in)->Search(p).body);
  EXPECT_EQ(a.fetches().size(), 1u);
  EXPECT_FALSE(none["hits"]["hits"][0].contains("_source"));
  EXPECT_FALSE(none["hits"]["hits"][0].contains("_source_missing"));

  // Highlight alone: the analyzed query terms travel, fragments come back, no source.
  p.q = "Apple PIE";
  p.highlight = true;
  const json hl = json::parse((*in)->Search(p).body);
  ASSERT_EQ(a.fetches().size(), 2u);
  EXPECT_FALSE(a.fetches()[1].source);
  EXPECT_TRUE(a.fetches()[1].highlight);
  EXPECT_EQ(a.fetches()[1].highlight_terms, (std::vector<std::string>{"apple", "pie"}));
  EXPECT_FALSE(HitWithDoc(hl, 5).contains("_source"));
  EXPECT_EQ(HitWithDoc(hl, 5)["highlight"]["contents"], json({"<em>apple</em> in 5", "<em>pie</em> in 5"}));

  // A count never fetches.
  SearchParams count = Params("apple");
  count.count_only = true;
  ASSERT_EQ((*in)->Search(count).status, 200);
  EXPECT_EQ(a.fetches().size(), 2u);
  EXPECT_EQ(b.fetches().size(), 2u);
}

TEST(Fetch, PhrasesOfATreeAreHighlightedAndMustNotClausesAreNot) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}}));
  a.set_fetch_handler(Sources());
  auto in = Integrator::Start(Options({a.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  SearchParams p = Params("\"heart of gold\" +towel -vogon");
  p.highlight = true;
  ASSERT_EQ((*in)->Search(p).status, 200);
  ASSERT_EQ(a.fetches().size(), 1u);
  EXPECT_EQ(a.fetches()[0].highlight_terms, std::vector<std::string>{"towel"});
  EXPECT_EQ(a.fetches()[0].highlight_phrases, (std::vector<std::vector<std::string>>{{"heart", "of", "gold"}}));
}

TEST(Fetch, AShardWithoutSourcesSaysNotStored) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}}));  // the default fetch answer: not stored
  auto in = Integrator::Start(Options({a.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  const HttpReply r = (*in)->Search(Params("apple"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["hits"]["hits"][0]["_source_missing"], "not stored");
  EXPECT_FALSE(j["hits"]["hits"][0].contains("_source"));
  EXPECT_EQ(j["_shards"]["failed"], 0);
}

// A shard whose pongs say it stores no sources (generate, import-ciff, --no-source) is never sent a
// fetch: its hits say "not stored" at once, beside a shard with sources that is asked as usual, and
// a cluster with no sources anywhere answers in the query phase alone (not even highlights need one).
TEST(Fetch, AShardThatReportsNoSourcesIsNotAsked) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}}), 2), b(1, AnswerWith(1, {{600, 2.0f, "b600"}}), 2);
  ShardHealthMsg h = a.health();
  h.has_sources = false;
  a.set_health(h);
  b.set_fetch_handler(Sources());
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  SearchParams p = Params("apple");
  p.highlight = true;
  const HttpReply r = (*in)->Search(p);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["hits"]["hits"].size(), 2u);
  EXPECT_EQ(j["hits"]["hits"][0]["_id"], "a5");
  EXPECT_EQ(j["hits"]["hits"][0]["_source_missing"], "not stored");
  EXPECT_EQ(j["hits"]["hits"][1]["_source"], json::parse(SourceOf(600)));
  EXPECT_EQ(j["_shards"]["failed"], 0);
  EXPECT_TRUE(a.fetches().empty());
  EXPECT_EQ(b.fetches().size(), 1u);

  h = b.health();
  h.has_sources = false;
  b.set_health(h);
  // The next pongs (a ping interval away) tell the integrator; until then b is still asked.
  const auto end = Clock::now() + 10s;
  size_t before = 0;
  do {
    before = b.fetches().size();
    (void)(*in)->Search(Params("apple" + std::to_string(before)));
  } while (b.fetches().size() != before && Clock::now() < end);
  p.q = "pear";  // not the first search's: that answer is cached
  const HttpReply none = (*in)->Search(p);
  ASSERT_EQ(none.status, 200) << none.body;
  EXPECT_EQ(b.fetches().size(), before);
  EXPECT_EQ(json::parse(none.body)["hits"]["hits"][1]["_source_missing"], "not stored");
}

TEST(Fetch, ADocumentPastTheAnswersBudgetSaysTooLarge) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}, {6, 2.0f, "a6"}}));
  a.set_fetch_handler([](const FetchRequestMsg& f) -> std::optional<FetchResponseMsg> {
    FetchResponseMsg r;
    for (uint32_t d : f.docs) r.docs.push_back(FetchedDocMsg{d, true, d == 5 ? SourceOf(5) : "", {}, d != 5});
    return r;
  });
  auto in = Integrator::Start(Options({a.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  const HttpReply r = (*in)->Search(Params("apple"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(HitWithDoc(j, 5)["_source"], json::parse(SourceOf(5)));
  EXPECT_EQ(HitWithDoc(j, 6)["_source_missing"], "too large");
  EXPECT_FALSE(HitWithDoc(j, 6).contains("_source"));
  EXPECT_EQ(j["_shards"]["failed"], 0);
}

TEST(Fetch, AShardFailingOrSilentAtFetchLeavesItsHitsWithoutSourceInA200) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}}), 2), b(1, AnswerWith(1, {{700, 2.0f, "b700"}}), 2);
  a.set_fetch_handler(Sources());
  b.set_fetch_handler([](const FetchRequestMsg&) -> std::optional<FetchResponseMsg> {
    FetchResponseMsg r;
    r.status = Status::Corruption("source block 3 fails its checksum");
    return r;
  });
  auto in = Integrator::Start(Options({a.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  SearchParams p = Params("apple");
  p.track_total_hits = true;
  HttpReply r = (*in)->Search(p);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(HitWithDoc(j, 5)["_source"], json::parse(SourceOf(5)));
  EXPECT_EQ(HitWithDoc(j, 700)["_source_missing"], "fetch failed");
  EXPECT_FALSE(HitWithDoc(j, 700).contains("_source"));
  ASSERT_EQ(j["_shards"]["failures"].size(), 1u);
  EXPECT_EQ(j["_shards"]["failures"][0]["shard"], 1);
  EXPECT_EQ(j["_shards"]["failures"][0]["phase"], "fetch");
  EXPECT_NE(j["_shards"]["failures"][0]["reason"].get<std::string>().find("checksum"), std::string::npos);
  EXPECT_EQ(j["_shards"]["successful"], 1);
  EXPECT_EQ(j["_shards"]["failed"], 1);
  EXPECT_EQ(j["coverage"]["shards"], 2);
  EXPECT_EQ(j["coverage"]["full"], false);
  EXPECT_EQ(j["hits"]["total"]["relation"], "eq");  // the query phase was complete
  // Not cached: the next search asks again.
  EXPECT_EQ(json::parse((*in)->Search(p).body)["cached"], false);
  EXPECT_EQ(b.fetches().size(), 2u);

  // Silent at fetch: timed out within the same deadline, still a 200 with the other's source.
  b.set_fetch_handler([](const FetchRequestMsg&) { return std::optional<FetchResponseMsg>(); });
  p.timeout_ms = 300;
  const auto t0 = Clock::now();
  r = (*in)->Search(p);
  EXPECT_LT(Clock::now() - t0, 5s);
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  EXPECT_EQ(HitWithDoc(j, 5)["_source"], json::parse(SourceOf(5)));
  EXPECT_EQ(HitWithDoc(j, 700)["_source_missing"], "fetch failed");
  ASSERT_EQ(j["_shards"]["failures"].size(), 1u);
  EXPECT_NE(j["_shards"]["failures"][0]["reason"].get<std::string>().find("deadline"), std::string::npos);
}

// A node of wire minor 1 cannot read a FetchRequest: it is not sent one, and its hits fail at once
// (not at the deadline) with a reason naming the version; a newer replica of the shard serves it.
TEST(Fetch, ANodeWithoutTheFetchPhaseIsNotAskedAndItsHitsFailAtOnce) {
  FakeNode old(0, AnswerWith(0, {{5, 3.0f, "a5"}}), 2), b(1, AnswerWith(1, {{700, 2.0f, "b700"}}), 2);
  old.set_minor(1);
  b.set_fetch_handler(Sources());
  auto in = Integrator::Start(Options({old.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  SearchParams p = Params("apple");
  p.timeout_ms = 20000;
  const auto t0 = Clock::now();
  const HttpReply r = (*in)->Search(p);
  EXPECT_LT(Clock::now() - t0, 10s);  // not the deadline
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_TRUE(old.fetches().empty());
  EXPECT_EQ(HitWithDoc(j, 5)["_source_missing"], "fetch failed");
  EXPECT_EQ(HitWithDoc(j, 700)["_source"], json::parse(SourceOf(700)));
  ASSERT_EQ(j["_shards"]["failures"].size(), 1u);
  EXPECT_NE(
      j["_shards"]["failures"][0]["reason"].get<std::string>().find("speaks protocol 1.1, which has no fetch phase"),
      std::string::npos)
      << r.body;

  // With a current replica beside it, the shard's fetch goes there.
  FakeNode current(0, AnswerWith(0, {{5, 3.0f, "a5"}}), 2);
  current.set_fetch_handler(Sources());
  auto both = Integrator::Start(Options({old.endpoint() + "|" + current.endpoint(), b.endpoint()}), nullptr);
  ASSERT_TRUE(both.ok());
  ASSERT_TRUE(WaitReady(**both));
  std::this_thread::sleep_for(200ms);  // both replicas' first pongs
  const json k = json::parse((*both)->Search(p).body);
  EXPECT_EQ(HitWithDoc(k, 5)["_source"], json::parse(SourceOf(5)));
  EXPECT_TRUE(old.fetches().empty());
  EXPECT_EQ(k["_shards"]["failed"], 0);
}

TEST(Fetch, AnswersWithSourcesAreCachedUnderTheirOwnKey) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}}));
  a.set_fetch_handler(Sources());
  auto in = Integrator::Start(Options({a.endpoint()}), nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  const std::string first = (*in)->Search(Params("apple")).body;
  const std::string again = (*in)->Search(Params("apple")).body;
  EXPECT_EQ(json::parse(again)["cached"], true);
  EXPECT_NE(again.find("\"_source\":" + SourceOf(5)), std::string::npos) << again;
  EXPECT_EQ(a.fetches().size(), 1u);
  EXPECT_GT((*in)->cache().stats().bytes, SourceOf(5).size());
  SearchParams p = Params("apple");
  p.source = false;
  const json without = json::parse((*in)->Search(p).body);
  EXPECT_EQ(without["cached"], false);  // another key
  EXPECT_FALSE(without["hits"]["hits"][0].contains("_source"));
  p.source = true;
  p.highlight = true;
  EXPECT_EQ(json::parse((*in)->Search(p).body)["cached"], false);
  EXPECT_EQ(a.fetches().size(), 2u);
}

// The asynchronous path: the fetch round's results come back through `post` like the query's.
TEST(Fetch, TheAsynchronousPathFetchesAsTheBlockingOne) {
  FakeNode a(0, AnswerWith(0, {{5, 3.0f, "a5"}}), 2), b(1, AnswerWith(1, {{700, 2.0f, "b700"}}), 2);
  a.set_fetch_handler(Sources());
  b.set_fetch_handler(Sources());
  IntegratorOptions o = Options({a.endpoint(), b.endpoint()});
  o.cache_bytes = 0;
  auto in = Integrator::Start(o, nullptr);
  ASSERT_TRUE(in.ok());
  ASSERT_TRUE(WaitReady(**in));
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  std::optional<HttpReply> reply;
  Integrator::Post post = [&](std::function<void()> f) {
    std::lock_guard lock(mu);
    queue.push_back(std::move(f));
    cv.notify_one();
  };
  ParsedSearch ps;
  ps.params = Params("apple");
  ps.params.mode = QueryMode::kAndOr;  // the split round, then the fetch round
  ps.params.highlight = true;
  (*in)->HandleSearchAsync(ps, 0, post, [&](HttpReply r) { reply = std::move(r); });
  const auto end = Clock::now() + 10s;
  while (!reply && Clock::now() < end) {
    std::function<void()> f;
    {
      std::unique_lock lock(mu);
      cv.wait_for(lock, 50ms, [&] { return !queue.empty(); });
      if (queue.empty()) continue;
      f = std::move(queue.front());
      queue.pop_front();
    }
    f();
  }
  ASSERT_TRUE(reply.has_value());
  ASSERT_EQ(reply->status, 200) << reply->body;
  const HttpReply blocking = (*in)->Search(ps.params);
  const json ja = json::parse(reply->body), jb = json::parse(blocking.body);
  EXPECT_EQ(ja["hits"], jb["hits"]);
  EXPECT_EQ(HitWithDoc(ja, 700)["_source"], json::parse(SourceOf(700)));
  EXPECT_EQ(HitWithDoc(ja, 5)["highlight"]["contents"][0], "<em>apple</em> in 5");
  EXPECT_EQ(a.fetches().size(), 2u);
}

}  // namespace
}  // namespace search
