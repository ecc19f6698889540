// Documents in the answers, end to end with real processes on loopback (issue 51's query-then-fetch):
// a small JSONL corpus with unicode, escapes, odd spacing and extra fields, indexed as `searchctl
// index` does (with sources, and with --no-source), served by search-node processes (1 and 3 shards)
// behind a search-integrator, asked over HTTP.
//   - every hit's _source is its input line's object byte for byte (found verbatim in the answer's
//     text), with GET and POST, 1 and 3 shards;
//   - _source=false (GET) and "_source": false (POST) leave it out;
//   - highlight=true and {"highlight": {"fields": {"contents": {}}}} give fragments with <em> around
//     the query's terms, HTML-escaped elsewhere; another field is a 400;
//   - a shard killed between the query phase and the fetch phase (a ZeroMQ relay in front of it
//     kills it when its first FetchRequest passes) leaves its hits "fetch failed", listed in
//     _shards.failures, the search still a 200 with the other shards' sources;
//   - an index built with --no-source answers "not stored", a 200.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "cluster_expect.hpp"
#include "cluster_harness.hpp"
#include "proto/wire.hpp"

namespace search::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kDocs = 400;

// The corpus: each line written by hand (not through a JSON library), so that the bytes the index
// must keep are exactly these: escapes, spacing, key order, nested extra fields.
struct SourceCorpus {
  std::string path;
  std::map<std::string, std::string> line_of;  // id -> its line, as written
};

SourceCorpus WriteSourceCorpus(const std::string& dir) {
  SourceCorpus c;
  c.path = dir + "/docs.jsonl";
  std::ofstream out(c.path, std::ios::binary);
  std::mt19937 rng(51);
  const std::vector<std::string> words = {"heart",          "gold",          "towel",    "vogon",       "poetry",
                                          "caf\\u00e9",     "na\xc3\xafve",  "Whale",    "petunia",     "babel",
                                          "fish",           "improbability", "drive",    "<b>bold</b>", "fish&chips",
                                          "\\\"quoted\\\"", "mostly",        "harmless", "zaphod",      "arthur"};
  for (size_t d = 0; d < kDocs; ++d) {
    std::string text;
    for (size_t n = 4 + rng() % 40; n > 0; --n) {
      if (!text.empty()) text += rng() % 9 == 0 ? ", " : " ";
      text += words[rng() % words.size()];
    }
    const std::string id = "doc-" + std::to_string(d);
    std::string line;
    switch (d % 4) {
      case 0:
        line = "{\"id\":\"" + id + "\",\"contents\":\"" + text + "\"}";
        break;
      case 1:
        line = "{ \"contents\" : \"" + text + "\",  \"id\": \"" + id +
               "\", \"meta\": {\"n\": 1.50, \"list\": [1, \"two\", null, true], \"emoji\": \"\\ud83d\\ude00 "
               "\xf0\x9f\x90\x8b\"} }";
        break;
      case 2:
        line =
            "{\"id\":\"" + id + "\",\"title\":\"T\\u00e9st \\/ \\t tab\",\"contents\":\"" + text + "\",\"n\":-0.0e+1}";
        break;
      default:
        line = "{\"id\":\t\"" + id + "\",   \"contents\":\"" + text + "\",\"deep\":[[[{\"a\":[]}]]]}";
        break;
    }
    c.line_of[id] = line;
    out << line << "\n";
  }
  return c;
}

// A relay between the integrator and one node: SearchRequests, Pings and their replies pass; when
// armed, the first FetchRequest calls on_fetch (which kills the node) and is dropped. Messages from
// the integrator come [empty][frame] or [frame] (kMinorOneFrame); each reply goes back in the shape
// of its request.
class Relay {
 public:
  Relay(const std::string& node_endpoint, std::function<void()> on_fetch)
      : front_(ctx_, zmq::socket_type::router), back_(ctx_, zmq::socket_type::dealer), on_fetch_(std::move(on_fetch)) {
    front_.set(zmq::sockopt::linger, 0);
    back_.set(zmq::sockopt::linger, 0);
    front_.bind("tcp://127.0.0.1:*");
    endpoint_ = front_.get(zmq::sockopt::last_endpoint);
    back_.connect(node_endpoint);
    thread_ = std::thread([this] { Run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  void Arm() { armed_ = true; }
  bool fired() const { return fired_; }

 private:
  static std::vector<zmq::message_t> Receive(zmq::socket_t& s) {
    std::vector<zmq::message_t> parts;
    while (true) {
      zmq::message_t m;
      if (!s.recv(m, zmq::recv_flags::dontwait)) break;
      const bool more = m.more();
      parts.push_back(std::move(m));
      if (!more) break;
    }
    return parts;
  }
  static std::string Text(const zmq::message_t& m) { return std::string(static_cast<const char*>(m.data()), m.size()); }

  void Run() {
    // request id -> the integrator's socket, and whether its request came [empty][frame]
    std::map<uint64_t, std::pair<std::string, bool>> identity_of;
    while (!stop_) {
      zmq::pollitem_t items[2] = {{front_.handle(), 0, ZMQ_POLLIN, 0}, {back_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(5));
      if (items[0].revents & ZMQ_POLLIN) {
        auto parts = Receive(front_);
        const bool delimited = parts.size() == 3 && parts[1].size() == 0;
        if (!delimited && parts.size() != 2) continue;
        const std::string frame = Text(parts.back());
        RecoveredHeader rec;
        (void)DecodeEnvelope(frame, &rec);
        if (!rec.request_id) continue;
        if (rec.kind == MessageKind::kFetchRequest && armed_ && !fired_) {
          fired_ = true;
          on_fetch_();
          continue;  // dropped: the node is gone
        }
        identity_of[*rec.request_id] = {Text(parts[0]), delimited};
        back_.send(zmq::message_t(), zmq::send_flags::sndmore);
        back_.send(zmq::message_t(frame.data(), frame.size()), zmq::send_flags::dontwait);
      }
      if (items[1].revents & ZMQ_POLLIN) {
        auto parts = Receive(back_);
        if (parts.size() != 2) continue;
        const std::string frame = Text(parts[1]);
        RecoveredHeader rec;
        (void)DecodeEnvelope(frame, &rec);
        if (!rec.request_id) continue;
        auto it = identity_of.find(*rec.request_id);
        if (it == identity_of.end()) continue;
        const auto [id, delimited] = it->second;
        identity_of.erase(it);
        try {
          front_.send(zmq::message_t(id.data(), id.size()), zmq::send_flags::sndmore);
          if (delimited) front_.send(zmq::message_t(), zmq::send_flags::sndmore);
          front_.send(zmq::message_t(frame.data(), frame.size()), zmq::send_flags::none);
        } catch (const zmq::error_t&) {
        }
      }
    }
  }

  zmq::context_t ctx_{1};
  zmq::socket_t front_, back_;
  std::string endpoint_;
  std::function<void()> on_fetch_;
  std::atomic<bool> stop_{false}, armed_{false}, fired_{false};
  std::thread thread_;
};

// Nodes over `index`'s shards and an integrator (relay_shard: that shard's node behind a Relay).
struct Cluster {
  TempDir run;
  std::vector<std::unique_ptr<Process>> nodes;
  std::unique_ptr<Process> integrator;
  std::unique_ptr<Relay> relay;
  int port = 0;

  void Start(const std::string& index, uint32_t shards, int relay_shard = -1, int timeout_ms = 10000) {
    std::string endpoints;
    for (uint32_t s = 0; s < shards; ++s) {
      nodes.push_back(std::make_unique<Process>());
      ASSERT_TRUE(nodes.back()->Start({SEARCH_NODE_BIN, "--index", index + "/shard-" + std::to_string(s), "--listen",
                                       "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:0", "--threads", "2"},
                                      run.path() + "/node" + std::to_string(s)));
      auto ready = nodes.back()->WaitReady();
      ASSERT_TRUE(ready.has_value()) << nodes.back()->Logs();
      std::string ep = ready->at("listen").get<std::string>();
      if (static_cast<int>(s) == relay_shard) {
        Process* node = nodes.back().get();
        const pid_t pid = node->pid();
        relay = std::make_unique<Relay>(ep, [pid] { ::kill(pid, SIGKILL); });
        ep = relay->endpoint();
      }
      endpoints += (endpoints.empty() ? "" : ",") + ep;
    }
    integrator = std::make_unique<Process>();
    ASSERT_TRUE(integrator->Start(
        {SEARCH_INTEGRATOR_BIN, "--shards", endpoints, "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--ping-ms",
         "200", "--cache-mb", "16", "--timeout-ms", std::to_string(timeout_ms)},
        run.path() + "/integrator"));
    auto ready = integrator->WaitReady();
    ASSERT_TRUE(ready.has_value()) << integrator->Logs();
    const std::string http = ready->at("http").get<std::string>();
    port = std::stoi(http.substr(http.rfind(':') + 1));
    const auto end = Clock::now() + 15s;
    while (Clock::now() < end) {
      auto h = Fetch(port, "/health");
      if (h.status == 200 && h.body.is_object() && h.body["status"] == "green") return;
      std::this_thread::sleep_for(20ms);
    }
    FAIL() << "the cluster did not turn green: " << Fetch(port, "/health").raw << integrator->Logs();
  }
  ~Cluster() {
    relay.reset();
    StopGracefully(integrator.get(), nodes);
  }
};

struct Indexes {
  TempDir dir;
  SourceCorpus corpus;
  std::string one, three, no_source;
};
Indexes* g = nullptr;

class SourceFetchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new Indexes;
    g->corpus = WriteSourceCorpus(g->dir.path());
    g->one = g->dir.path() + "/one";
    g->three = g->dir.path() + "/three";
    g->no_source = g->dir.path() + "/nosource";
    Status st = BuildTestIndex(g->corpus.path, g->one, 1, true);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = BuildTestIndex(g->corpus.path, g->three, 3, true);
    ASSERT_TRUE(st.ok()) << st.ToString();
    st = BuildTestIndex(g->corpus.path, g->no_source, 1, false);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() {
    delete g;
    g = nullptr;
  }
};

// Every hit's _source is its line, verbatim in the answer's text, and parses to the line's object.
void ExpectSourcesVerbatim(const HttpResult& r, const std::string& what) {
  ASSERT_EQ(r.status, 200) << what << ": " << r.raw;
  const json& hits = r.body["hits"]["hits"];
  ASSERT_FALSE(hits.empty()) << what;
  for (const auto& h : hits) {
    const std::string id = h["_id"].get<std::string>();
    ASSERT_TRUE(g->corpus.line_of.count(id)) << what << ": " << id;
    const std::string& line = g->corpus.line_of.at(id);
    EXPECT_NE(r.raw.find("\"_source\":" + line + "}"), std::string::npos) << what << ": " << id << " not verbatim";
    ASSERT_TRUE(h.contains("_source")) << what << ": " << h.dump();
    EXPECT_EQ(h["_source"], json::parse(line)) << what;
    EXPECT_FALSE(h.contains("_source_missing")) << what;
  }
}

// Every fragment marks at least one query term or phrase (`terms`: their tokens joined by a space),
// and everything outside the marks is escaped.
void ExpectHighlights(const json& hits, const std::set<std::string>& terms, const std::string& what) {
  size_t fragments = 0;
  for (const auto& h : hits) {
    ASSERT_TRUE(h.contains("highlight")) << what << ": " << h.dump();
    for (const auto& f : h["highlight"]["contents"]) {
      std::string s = f.get<std::string>();
      ++fragments;
      size_t marked = 0;
      for (size_t at = s.find("<em>"); at != std::string::npos; at = s.find("<em>", at + 1)) {
        const size_t end = s.find("</em>", at);
        ASSERT_NE(end, std::string::npos) << what << ": " << s;
        // The marked text as its tokens: lowercased, punctuation between a phrase's words as one space.
        std::string inner;
        for (unsigned char ch : s.substr(at + 4, end - at - 4)) {
          if (std::isalnum(ch) || ch >= 0x80) {
            inner += static_cast<char>(std::tolower(ch));
          } else if (!inner.empty() && inner.back() != ' ') {
            inner += ' ';
          }
        }
        while (!inner.empty() && inner.back() == ' ') inner.pop_back();
        EXPECT_TRUE(terms.count(inner)) << what << ": <em>" << inner << "</em> in " << s;
        ++marked;
      }
      EXPECT_GT(marked, 0u) << what << ": " << s;
      // The corpus's "<b>bold</b>" and "&" come back escaped.
      std::string rest = s;
      for (const char* tag : {"<em>", "</em>"})
        for (size_t at; (at = rest.find(tag)) != std::string::npos;) rest.erase(at, std::string(tag).size());
      EXPECT_EQ(rest.find('<'), std::string::npos) << what << ": " << s;
    }
  }
  EXPECT_GT(fragments, 0u) << what;
}

TEST_F(SourceFetchTest, SourcesAreTheInputObjectsByteForByteOnOneAndThreeShards) {
  for (const std::string* index : {&g->one, &g->three}) {
    Cluster c;
    ASSERT_NO_FATAL_FAILURE(c.Start(*index, index == &g->one ? 1 : 3));
    const std::string what = index == &g->one ? "1 shard" : "3 shards";
    for (const char* q : {"towel", "gold fish", "caf\xc3\xa9", "zaphod arthur"}) {
      ExpectSourcesVerbatim(Fetch(c.port, "/search", {{"q", q}, {"k", "50"}, {"mode", "or"}}), what + " q=" + q);
    }
    const std::string body = R"({"query": {"match": {"contents": "whale petunia"}}, "size": 30})";
    ExpectSourcesVerbatim(Fetch(c.port, "/_search", {}, &body), what + " POST");
    // _source=false, GET and POST: no source, no marker.
    auto off = Fetch(c.port, "/search", {{"q", "towel"}, {"_source", "false"}});
    ASSERT_EQ(off.status, 200) << off.raw;
    EXPECT_EQ(off.raw.find("_source"), std::string::npos) << off.raw;
    const std::string off_body = R"({"query": {"match": {"contents": "towel"}}, "_source": false})";
    off = Fetch(c.port, "/_search", {}, &off_body);
    ASSERT_EQ(off.status, 200) << off.raw;
    EXPECT_EQ(off.raw.find("_source"), std::string::npos) << off.raw;
    EXPECT_FALSE(off.body["hits"]["hits"].empty());
    // A repeat comes from the cache, sources and all.
    auto again = Fetch(c.port, "/search", {{"q", "towel"}, {"k", "50"}, {"mode", "or"}});
    EXPECT_EQ(again.body["cached"], true);
    ExpectSourcesVerbatim(again, what + " cached");
  }
}

TEST_F(SourceFetchTest, HighlightsMarkTheQueryTerms) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start(g->three, 3));
  auto r = Fetch(c.port, "/search", {{"q", "Towel whale"}, {"mode", "or"}, {"k", "20"}, {"highlight", "true"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  ExpectHighlights(r.body["hits"]["hits"], {"towel", "whale"}, "GET");
  ExpectSourcesVerbatim(r, "GET highlight");
  const std::string body =
      R"({"query": {"bool": {"should": [{"match_phrase": {"contents": "gold fish"}}, {"match": {"contents": "bold"}}]}},)"
      R"( "highlight": {"fields": {"contents": {}}}, "_source": false, "size": 20})";
  r = Fetch(c.port, "/_search", {}, &body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.raw.find("\"_source\""), std::string::npos);
  ExpectHighlights(r.body["hits"]["hits"], {"gold fish", "bold"}, "POST");
  const std::string bad = R"({"query": {"match": {"contents": "towel"}}, "highlight": {"fields": {"title": {}}}})";
  r = Fetch(c.port, "/_search", {}, &bad);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.raw.find("highlight.fields.title"), std::string::npos) << r.raw;
  r = Fetch(c.port, "/count", {{"q", "towel"}, {"_source", "false"}});
  EXPECT_EQ(r.status, 400) << r.raw;  // a count takes no _source: it never fetches
}

TEST_F(SourceFetchTest, AShardKilledBetweenQueryAndFetchLeavesItsHitsFetchFailed) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start(g->three, 3, /*relay_shard=*/1, /*timeout_ms=*/2000));
  // Before: every source arrives through the relay too.
  ExpectSourcesVerbatim(Fetch(c.port, "/search", {{"q", "fish"}, {"k", "100"}}), "before");
  c.relay->Arm();
  auto r = Fetch(c.port, "/search", {{"q", "towel harmless"}, {"mode", "or"}, {"k", "100"}});
  ASSERT_TRUE(c.relay->fired()) << r.raw;
  ASSERT_EQ(r.status, 200) << r.raw;
  size_t failed = 0, fetched = 0;
  for (const auto& h : r.body["hits"]["hits"]) {
    if (h["_shard"] == 1) {
      EXPECT_EQ(h.value("_source_missing", ""), "fetch failed") << h.dump();
      EXPECT_FALSE(h.contains("_source"));
      ++failed;
    } else {
      const std::string& line = g->corpus.line_of.at(h["_id"].get<std::string>());
      EXPECT_NE(r.raw.find("\"_source\":" + line + "}"), std::string::npos);
      ++fetched;
    }
  }
  EXPECT_GT(failed, 0u);
  EXPECT_GT(fetched, 0u);
  const json& failures = r.body["_shards"]["failures"];
  ASSERT_EQ(failures.size(), 1u) << r.raw;
  EXPECT_EQ(failures[0]["shard"], 1);
  EXPECT_EQ(failures[0]["phase"], "fetch");
  EXPECT_EQ(r.body["_shards"]["successful"], 2);  // as Elasticsearch counts a fetch failure
  EXPECT_EQ(r.body["_shards"]["failed"], 1);
  EXPECT_EQ(r.body["coverage"]["shards"], 3);  // every shard answered the query phase
  c.nodes[1]->Wait(5s);                           // reaped: killed, not stopped gracefully
}

TEST_F(SourceFetchTest, AnIndexWithoutSourcesSaysNotStored) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start(g->no_source, 1));
  auto r = Fetch(c.port, "/search", {{"q", "towel"}, {"highlight", "true"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_FALSE(r.body["hits"]["hits"].empty());
  for (const auto& h : r.body["hits"]["hits"]) {
    EXPECT_EQ(h.value("_source_missing", ""), "not stored") << h.dump();
    EXPECT_FALSE(h.contains("_source"));
    EXPECT_FALSE(h.contains("highlight"));
  }
  EXPECT_EQ(r.body["_shards"]["failed"], 0);
}

}  // namespace
}  // namespace search::testing
