// Wire codec: round trips of every message, version and field validation, and untrusted bytes
// (random, truncated, bit-flipped, misaligned frames) that must return errors and never crash.
#include "proto/wire.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "proto/search.capnp.h"

namespace search {
namespace {

std::string RandomTerm(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> len(1, 12), ch('a', 'z');
  std::string t(len(rng), 'a');
  for (auto& c : t) c = static_cast<char>(ch(rng));
  return t;
}

SearchRequestMsg RandomRequest(std::mt19937_64& rng) {
  SearchRequestMsg m;
  m.request_id = rng();
  std::uniform_int_distribution<int> nterms(0, 20);
  std::vector<std::string> terms;
  for (int i = nterms(rng); i > 0; --i) terms.push_back(RandomTerm(rng));
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  m.terms = terms;
  m.mode = static_cast<QueryMode>(rng() % 3);
  m.k = 1 + static_cast<uint32_t>(rng() % kMaxK);
  m.deadline_unix_micros = static_cast<int64_t>(rng() >> 1);
  m.flags = static_cast<uint32_t>(rng() & 7);
  return m;
}

SearchResponseMsg RandomResponse(std::mt19937_64& rng, size_t hits) {
  SearchResponseMsg m;
  m.request_id = rng();
  m.shard_id = static_cast<uint32_t>(rng() % 64);
  for (size_t i = 0; i < hits; ++i) {
    m.hits.push_back(HitMsg{static_cast<uint32_t>(rng()), static_cast<float>(rng() % 100000) / 7.0f,
                            "doc-" + std::to_string(rng() % 1000000)});
  }
  m.stats = ExecStatsMsg{Processor::kGpu, rng() % 1000, rng() % 100000, rng() % 1000, rng() % 77, rng() % 99};
  m.doc_begin = 100;
  m.doc_end = 200;
  if (hits % 2 == 0) {  // the andor split's OR hits
    m.has_or_hits = true;
    for (size_t i = 0; i < hits / 2; ++i) m.or_hits.push_back(HitMsg{static_cast<uint32_t>(rng()), 1.5f, "or"});
  }
  return m;
}

EnvelopeMsg DecodeOk(const std::string& frame) {
  auto r = DecodeEnvelope(frame);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : EnvelopeMsg{};
}

TEST(WireTest, SearchRequestRoundTrip) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200; ++i) {
    SearchRequestMsg m = RandomRequest(rng);
    std::string frame = EncodeSearchRequest(m);
    ASSERT_EQ(frame.size() % 8, 0u);
    EnvelopeMsg env = DecodeOk(frame);
    EXPECT_EQ(env.major, kProtocolMajor);
    ASSERT_EQ(env.kind(), MessageKind::kSearchRequest);
    EXPECT_EQ(std::get<SearchRequestMsg>(env.body), m);
  }
}

TEST(WireTest, SearchResponseRoundTripKeepsEveryField) {
  std::mt19937_64 rng(2);
  for (size_t hits : {0u, 1u, 10u, 1000u, 10000u}) {
    SearchResponseMsg m = RandomResponse(rng, hits);
    EnvelopeMsg env = DecodeOk(EncodeSearchResponse(m));
    ASSERT_EQ(env.kind(), MessageKind::kSearchResponse);
    const auto& got = std::get<SearchResponseMsg>(env.body);
    EXPECT_EQ(got.request_id, m.request_id);
    EXPECT_EQ(got.shard_id, m.shard_id);
    EXPECT_TRUE(got.status.ok());
    EXPECT_EQ(got.hits, m.hits);
    EXPECT_EQ(got.stats, m.stats);
    EXPECT_EQ(got.doc_begin, 100u);
    EXPECT_EQ(got.doc_end, 200u);
    EXPECT_EQ(got.has_or_hits, m.has_or_hits);
    EXPECT_EQ(got.or_hits, m.or_hits);
  }
}

// An ok status and default stats (a CPU answer without kFlagIncludeStats) are left unset, as
// Cap'n Proto reads an unset struct as its defaults. Mixed versions: a reply of an older node,
// which set both always, decodes to the same message as the compact one, and the compact one reads,
// field by field as an older integrator reads it, as ok with default stats.
TEST(WireTest, DefaultStatusAndStatsAreLeftUnsetAndReadTheSame) {
  std::mt19937_64 rng(5);
  SearchResponseMsg m = RandomResponse(rng, 10);
  m.stats = ExecStatsMsg{};
  m.has_or_hits = false;
  m.or_hits.clear();
  capnp::MallocMessageBuilder old_message;  // as a node before the compact replies wrote it
  {
    auto env = old_message.initRoot<wire::Envelope>();
    env.setMajor(kProtocolMajor);
    env.setMinor(3);
    auto b = env.getBody().initSearchResponse();
    b.setRequestId(m.request_id);
    b.setShardId(m.shard_id);
    auto st = b.initStatus();
    st.setCode(wire::StatusCode::OK);
    st.setMessage("");
    auto hits = b.initHits(static_cast<unsigned>(m.hits.size()));
    for (unsigned i = 0; i < m.hits.size(); ++i) {
      hits[i].setDoc(m.hits[i].doc);
      hits[i].setScore(m.hits[i].score);
      hits[i].setExternalId(m.hits[i].external_id);
    }
    b.initStats().setProcessor(wire::Processor::CPU);
    b.setDocBegin(m.doc_begin);
    b.setDocEnd(m.doc_end);
  }
  kj::Array<capnp::word> old_words = capnp::messageToFlatArray(old_message);
  const std::string old_frame(reinterpret_cast<const char*>(old_words.asBytes().begin()), old_words.asBytes().size());
  const std::string frame = EncodeSearchResponse(m);
  EXPECT_EQ(old_frame.size() - frame.size(), 72u);  // ErrorInfo + its empty message, ExecStats
  for (const std::string* f : {&old_frame, &frame}) {
    const auto got = std::get<SearchResponseMsg>(DecodeOk(*f).body);
    EXPECT_EQ(got.request_id, m.request_id);
    EXPECT_TRUE(got.status.ok());
    EXPECT_EQ(got.status.message(), "");
    EXPECT_EQ(got.hits, m.hits);
    EXPECT_EQ(got.stats, ExecStatsMsg{});
    EXPECT_EQ(got.doc_end, m.doc_end);
  }
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(frame.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), frame.data(), frame.size());
  capnp::FlatArrayMessageReader reader(words);
  auto r = reader.getRoot<wire::Envelope>().getBody().getSearchResponse();
  EXPECT_FALSE(r.hasStatus());
  EXPECT_FALSE(r.hasStats());
  EXPECT_EQ(r.getStatus().getCode(), wire::StatusCode::OK);
  EXPECT_EQ(r.getStatus().getMessage().size(), 0u);
  EXPECT_EQ(r.getStats().getProcessor(), wire::Processor::CPU);
  EXPECT_EQ(r.getStats().getPostingsDecoded(), 0u);
  EXPECT_EQ(r.getStats().getRunMicros(), 0u);
  // Set stats (a GPU answer, or asked for) and an error are written as before.
  m.stats.processor = Processor::kGpu;
  EXPECT_EQ(std::get<SearchResponseMsg>(DecodeOk(EncodeSearchResponse(m)).body).stats.processor, Processor::kGpu);
  m.status = Status::Unavailable("draining");
  EXPECT_EQ(std::get<SearchResponseMsg>(DecodeOk(EncodeSearchResponse(m)).body).status.message(), "draining");
}

TEST(WireTest, StatusCodesRoundTrip) {
  const std::vector<Status> statuses = {
      Status::Ok(), Status::InvalidArgument("a"), Status::NotFound("b"), Status::Corruption("c"),
      Status::IOError("d"), Status::Unavailable("e"), Status::DeadlineExceeded("f"),
      Status::ResourceExhausted("g"), Status::Internal("h")};
  for (const Status& s : statuses) {
    SearchResponseMsg m;
    m.request_id = 5;
    m.status = s;
    EnvelopeMsg env = DecodeOk(EncodeSearchResponse(m));
    const auto& got = std::get<SearchResponseMsg>(env.body);
    EXPECT_EQ(got.status.code(), s.code());
    EXPECT_EQ(got.status.message(), s.message());
  }
  // Codes the wire lacks travel as internal, keeping the message.
  SearchResponseMsg m;
  m.status = Status::AlreadyExists("dup");
  EnvelopeMsg env = DecodeOk(EncodeSearchResponse(m));
  EXPECT_EQ(std::get<SearchResponseMsg>(env.body).status.code(), StatusCode::kInternal);
  EXPECT_EQ(std::get<SearchResponseMsg>(env.body).status.message(), "dup");
}

TEST(WireTest, PingPongRoundTrip) {
  EnvelopeMsg ping = DecodeOk(EncodePing(PingMsg{77}));
  ASSERT_EQ(ping.kind(), MessageKind::kPing);
  EXPECT_EQ(std::get<PingMsg>(ping.body).request_id, 77u);

  PongMsg pong;
  pong.request_id = 78;
  pong.health = ShardHealthMsg{3, 4, 10, 20, 40, "serving", 2, 5, true, R"({"stem":null})", 1, true};
  pong.status = Status::Unavailable("draining");
  EnvelopeMsg env = DecodeOk(EncodePong(pong));
  ASSERT_EQ(env.kind(), MessageKind::kPong);
  const auto& got = std::get<PongMsg>(env.body);
  EXPECT_EQ(got.request_id, 78u);
  EXPECT_EQ(got.health, pong.health);
  EXPECT_EQ(got.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(got.status.message(), "draining");
}

TEST(WireTest, UnknownMajorVersionIsRejectedWithRecoverableId) {
  SearchRequestMsg m;
  m.request_id = 4242;
  m.terms = {"a", "b"};
  EnvelopeMsg env{.major = 2, .minor = 0, .body = m};
  RecoveredHeader rec;
  auto r = DecodeEnvelope(EncodeEnvelope(env), &rec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "unsupported protocol major version 2 (this node speaks 1)");
  EXPECT_EQ(rec.kind, MessageKind::kSearchRequest);
  ASSERT_TRUE(rec.request_id.has_value());
  EXPECT_EQ(*rec.request_id, 4242u);
  EXPECT_EQ(rec.major, 2);

  // A ping with major 0 likewise.
  auto p = DecodeEnvelope(EncodeEnvelope(EnvelopeMsg{.major = 0, .minor = 0, .body = PingMsg{9}}), &rec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(rec.kind, MessageKind::kPing);
  EXPECT_EQ(rec.request_id.value_or(0), 9u);
}

TEST(WireTest, NewerMinorVersionIsAccepted) {
  EnvelopeMsg env{.major = kProtocolMajor, .minor = 7, .body = PingMsg{3}};
  EnvelopeMsg got = DecodeOk(EncodeEnvelope(env));
  EXPECT_EQ(got.minor, 7);
}

TEST(WireTest, InvalidRequestFieldsAreRejected) {
  auto expect_bad = [](const SearchRequestMsg& m, const std::string& needle) {
    RecoveredHeader rec;
    auto r = DecodeEnvelope(EncodeSearchRequest(m), &rec);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_EQ(rec.request_id.value_or(0), m.request_id);
  };
  SearchRequestMsg base;
  base.request_id = 11;
  base.terms = {"apple", "pear"};
  base.k = 10;
  ASSERT_TRUE(ValidateSearchRequest(base).ok());

  SearchRequestMsg m = base;
  m.k = 0;
  expect_bad(m, "k");
  m.k = kMaxK + 1;
  expect_bad(m, "k");
  m = base;
  m.terms = {"pear", "apple"};
  expect_bad(m, "ascending");
  m.terms = {"apple", "apple"};
  expect_bad(m, "ascending");
  m.terms = {""};
  expect_bad(m, "empty term");
  m.terms = {std::string(kMaxTermBytes + 1, 'x')};
  expect_bad(m, "bytes");
  m.terms.clear();
  for (size_t i = 0; i <= kMaxTerms; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "t%06zu", i);
    m.terms.push_back(buf);
  }
  expect_bad(m, "too many terms");
  m.terms.pop_back();
  EXPECT_TRUE(DecodeEnvelope(EncodeSearchRequest(m)).ok());  // exactly at the limit
}

TEST(WireTest, UnknownModeAndUnknownBodyAreRejected) {
  {
    capnp::MallocMessageBuilder b;
    auto env = b.initRoot<wire::Envelope>();
    env.setMajor(kProtocolMajor);
    auto req = env.initBody().initSearchRequest();
    req.setRequestId(5);
    req.setK(3);
    req.setMode(static_cast<wire::Mode>(9));
    auto words = capnp::messageToFlatArray(b);
    RecoveredHeader rec;
    auto r = DecodeEnvelope(std::as_bytes(std::span(words.begin(), words.size())), &rec);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("mode"), std::string::npos);
    EXPECT_EQ(rec.request_id.value_or(0), 5u);
  }
  {
    // A union member from a future minor version: the discriminant lies past the known ones.
    std::string frame = EncodePing(PingMsg{1});
    capnp::MallocMessageBuilder b;
    auto env = b.initRoot<wire::Envelope>();
    env.setMajor(kProtocolMajor);
    env.initBody().initPing().setRequestId(1);
    auto words = capnp::messageToFlatArray(b);
    // Layout: segment table (8 bytes), root pointer (8), Envelope data word: major, minor,
    // discriminant (bytes 4..5 of the data word).
    auto bytes = words.asBytes();
    ASSERT_EQ(bytes[20], 2);  // Body::PING == 2
    bytes[20] = 9;
    capnp::FlatArrayMessageReader check(words.asPtr());
    ASSERT_EQ(static_cast<int>(check.getRoot<wire::Envelope>().getBody().which()), 9);
    RecoveredHeader rec;
    auto r = DecodeEnvelope(std::as_bytes(std::span(words.begin(), words.size())), &rec);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("unknown message type 9"), std::string::npos) << r.status().message();
    EXPECT_EQ(rec.kind, MessageKind::kUnknown);
  }
}

TEST(WireTest, FrameShapeLimits) {
  EXPECT_FALSE(DecodeEnvelope(std::string_view()).ok());
  std::string frame = EncodePing(PingMsg{1});
  auto odd = DecodeEnvelope(std::string_view(frame.data(), frame.size() - 3));
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("multiple of 8"), std::string::npos);
  std::string trailing = frame + std::string(8, '\0');
  auto t = DecodeEnvelope(trailing);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("trailing"), std::string::npos);
  std::string huge(kMaxFrameBytes + 8, '\0');
  auto h = DecodeEnvelope(huge);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("exceeds"), std::string::npos);
}

TEST(WireTest, MisalignedInputDecodes) {
  std::mt19937_64 rng(3);
  SearchResponseMsg m = RandomResponse(rng, 37);
  std::string frame = EncodeSearchResponse(m);
  std::vector<char> buf(frame.size() + 16);
  for (size_t off = 0; off < 8; ++off) {
    std::memcpy(buf.data() + off, frame.data(), frame.size());
    auto r = DecodeEnvelope(std::string_view(buf.data() + off, frame.size()));
    ASSERT_TRUE(r.ok()) << "offset " << off << ": " << r.status().ToString();
    EXPECT_EQ(std::get<SearchResponseMsg>(r->body).hits, m.hits);
  }
}

TEST(WireTest, RandomBytesNeverDecodeAsValidGarbage) {
  std::mt19937_64 rng(4);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes(8 * (1 + rng() % 64) + (i % 4 == 0 ? rng() % 8 : 0), '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    auto r = DecodeEnvelope(bytes);
    if (r.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
  // The segment table alone rejects nearly every random frame.
  EXPECT_LT(ok, 30);
}

TEST(WireTest, TruncatedFramesAreRejected) {
  std::mt19937_64 rng(5);
  std::string frame = EncodeSearchResponse(RandomResponse(rng, 20));
  for (size_t len = 0; len < frame.size(); ++len) {
    auto r = DecodeEnvelope(std::string_view(frame.data(), len));
    EXPECT_FALSE(r.ok()) << "prefix of " << len << " bytes decoded";
  }
  std::string req = EncodeSearchRequest(RandomRequest(rng));
  for (size_t len = 0; len < req.size(); ++len) EXPECT_FALSE(DecodeEnvelope(std::string_view(req.data(), len)).ok());
}

// A request with a tree of every node kind and occurrence, counted, for the bit-flip test.
SearchRequestMsg TreeSeed() {
  QueryNode group;
  group.clauses = {{Occur::kShould, QueryNode{QueryNode::Kind::kTerm, {"uk"}, {}}},
                   {Occur::kFilter, QueryNode{QueryNode::Kind::kTerm, {"band"}, {}}}};
  QueryNode root;
  root.clauses = {{Occur::kMust, QueryNode{QueryNode::Kind::kPhrase, {"the", "who", "the"}, {}}},
                  {Occur::kMustNot, QueryNode{QueryNode::Kind::kTerm, {"car"}, {}}},
                  {Occur::kDefault, group}};
  SearchRequestMsg m;
  m.request_id = 5;
  m.tree = std::make_shared<const QueryNode>(Canonicalize(root));
  m.terms = TreeTerms(*m.tree);
  m.count = true;
  m.k = 0;
  return m;
}

TEST(WireTest, BitFlippedFramesNeverCrash) {
  std::mt19937_64 rng(6);
  SearchResponseMsg counted = RandomResponse(rng, 4);
  counted.has_total = true;
  counted.total = 77;
  counted.or_total = 99;
  std::vector<std::string> seeds = {EncodeSearchRequest(RandomRequest(rng)), EncodeSearchResponse(RandomResponse(rng, 30)),
                                    EncodeSearchRequest(TreeSeed()), EncodeSearchResponse(counted),
                                    EncodePing(PingMsg{1}), EncodePong(PongMsg{.request_id = 2, .health = ShardHealthMsg{.state = "serving", .analyzer_json = "{}"}, .status = {}})};
  int rejected = 0, accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string f = seeds[i % seeds.size()];
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < flips; ++j) f[rng() % f.size()] ^= static_cast<char>(1u << (rng() % 8));
    RecoveredHeader rec;
    auto r = DecodeEnvelope(f, &rec);
    if (!r.ok()) {
      ++rejected;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    ++accepted;
    // Whatever decoded must re-encode and decode to the same kind (a stable, valid message).
    auto again = DecodeEnvelope(EncodeEnvelope(*r));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->kind(), r->kind());
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);
}

// A random canonical tree: terms and phrases over a small vocabulary (so duplicates and repeats
// occur), groups down to `depth`, every occurrence.
QueryNode RandomNode(std::mt19937_64& rng, int depth) {
  static const char* kWords[] = {"a", "b", "c", "d", "e", "f"};
  QueryNode n;
  const int kind = depth > 0 ? static_cast<int>(rng() % 3) : static_cast<int>(rng() % 2);
  if (kind == 0) {
    n.kind = QueryNode::Kind::kTerm;
    n.tokens = {kWords[rng() % 6]};
  } else if (kind == 1) {
    n.kind = QueryNode::Kind::kPhrase;
    for (size_t i = 2 + rng() % 4; i > 0; --i) n.tokens.push_back(kWords[rng() % 6]);
  } else {
    n.kind = QueryNode::Kind::kBool;
    for (size_t i = 1 + rng() % 4; i > 0; --i)
      n.clauses.push_back({static_cast<Occur>(rng() % 5), RandomNode(rng, depth - 1)});
  }
  return n;
}

SearchRequestMsg TreeRequest(QueryNode tree) {
  SearchRequestMsg m;
  m.request_id = 7;
  auto canonical = std::make_shared<const QueryNode>(Canonicalize(std::move(tree)));
  m.terms = TreeTerms(*canonical);
  m.tree = canonical;
  return m;
}

QueryNode Term(std::string t) { return QueryNode{QueryNode::Kind::kTerm, {std::move(t)}, {}}; }

TEST(WireTest, TreeRequestsRoundTrip) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    QueryNode root;
    for (size_t c = 1 + rng() % 5; c > 0; --c)
      root.clauses.push_back({static_cast<Occur>(rng() % 5), RandomNode(rng, 3)});
    SearchRequestMsg m = TreeRequest(std::move(root));
    ASSERT_TRUE(ValidateTree(*m.tree).ok());
    m.mode = static_cast<QueryMode>(rng() % 3);
    m.count = rng() % 2 == 0;
    m.k = m.count && rng() % 3 == 0 ? 0 : 1 + static_cast<uint32_t>(rng() % kMaxK);
    m.flags = static_cast<uint32_t>(rng() & 15);
    EnvelopeMsg env = DecodeOk(EncodeSearchRequest(m));
    ASSERT_EQ(env.kind(), MessageKind::kSearchRequest);
    const auto& got = std::get<SearchRequestMsg>(env.body);
    ASSERT_NE(got.tree, nullptr);
    EXPECT_EQ(*got.tree, *m.tree);
    EXPECT_EQ(got, m);
    const Query q = ToQuery(got);
    EXPECT_EQ(q.terms, m.terms);
    EXPECT_EQ(q.k, m.k);
    EXPECT_EQ(q.count, m.count);
    EXPECT_EQ(q.tree, got.tree);
  }
  // The deepest tree the limits allow, nested far past capnp's nesting limit (the list is flat).
  QueryNode deep;
  deep.clauses = {{Occur::kMust, Term("x")}, {Occur::kShould, Term("y")}};
  for (uint32_t d = 0; d < kMaxTreeDepth; ++d) {
    QueryNode up;
    up.clauses = {{Occur::kMust, std::move(deep)}, {Occur::kMustNot, Term("z" + std::to_string(d))}};
    deep = std::move(up);
  }
  SearchRequestMsg m = TreeRequest(deep);
  ASSERT_TRUE(ValidateTree(*m.tree).ok());
  EXPECT_EQ(std::get<SearchRequestMsg>(DecodeOk(EncodeSearchRequest(m)).body), m);
}

TEST(WireTest, BagOfWordsRequestsCarryNoTree) {
  SearchRequestMsg m;
  m.terms = {"a", "b"};
  m.count = true;
  m.k = 0;
  const EnvelopeMsg env = DecodeOk(EncodeSearchRequest(m));
  const auto& got = std::get<SearchRequestMsg>(env.body);
  EXPECT_EQ(got.tree, nullptr);
  EXPECT_TRUE(got.count);
  EXPECT_EQ(got.k, 0u);
  EXPECT_EQ(ToQuery(got).tree, nullptr);
}

TEST(WireTest, ResponseTotalsRoundTrip) {
  SearchResponseMsg m;
  m.request_id = 3;
  m.hits = {HitMsg{1, 2.0f, "x"}};
  m.has_total = true;
  m.total = uint64_t{1} << 40;
  m.has_or_hits = true;
  m.or_hits = {HitMsg{2, 1.0f, "y"}};
  m.or_total = 12345;
  auto got = std::get<SearchResponseMsg>(DecodeOk(EncodeSearchResponse(m)).body);
  EXPECT_TRUE(got.has_total);
  EXPECT_EQ(got.total, m.total);
  EXPECT_EQ(got.or_total, 12345u);
  // Without a count the totals stay unset.
  m.has_total = false;
  got = std::get<SearchResponseMsg>(DecodeOk(EncodeSearchResponse(m)).body);
  EXPECT_FALSE(got.has_total);
  EXPECT_EQ(got.total, 0u);
  EXPECT_EQ(got.or_total, 0u);
}

TEST(WireTest, ZeroKNeedsACount) {
  SearchRequestMsg m;
  m.terms = {"a"};
  m.k = 0;
  auto r = DecodeEnvelope(EncodeSearchRequest(m));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("k"), std::string::npos);
  m.count = true;
  EXPECT_TRUE(DecodeEnvelope(EncodeSearchRequest(m)).ok());
  m.k = kMaxK + 1;
  EXPECT_FALSE(DecodeEnvelope(EncodeSearchRequest(m)).ok());
}

// A raw tree, node by node as search.capnp lays it out: what a hostile sender can put there.
struct RawNode {
  wire::NodeKind kind = wire::NodeKind::BOOLEAN;
  wire::Occur occur = wire::Occur::DEFAULT;
  std::vector<std::string> tokens;
  uint32_t clauses = 0;
};

Result<EnvelopeMsg> DecodeRawTree(const std::vector<RawNode>& nodes, const std::vector<std::string>& terms,
                                  RecoveredHeader* rec) {
  capnp::MallocMessageBuilder b;
  auto env = b.initRoot<wire::Envelope>();
  env.setMajor(kProtocolMajor);
  env.setMinor(kProtocolMinor);
  auto req = env.initBody().initSearchRequest();
  req.setRequestId(99);
  req.setK(10);
  auto t = req.initTerms(static_cast<unsigned>(terms.size()));
  for (size_t i = 0; i < terms.size(); ++i) t.set(static_cast<unsigned>(i), terms[i]);
  auto list = req.initTree(static_cast<unsigned>(nodes.size()));
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto n = list[static_cast<unsigned>(i)];
    n.setKind(nodes[i].kind);
    n.setOccur(nodes[i].occur);
    auto tokens = n.initTokens(static_cast<unsigned>(nodes[i].tokens.size()));
    for (size_t j = 0; j < nodes[i].tokens.size(); ++j) tokens.set(static_cast<unsigned>(j), nodes[i].tokens[j]);
    n.setClauses(nodes[i].clauses);
  }
  auto words = capnp::messageToFlatArray(b);
  return DecodeEnvelope(std::as_bytes(std::span(words.begin(), words.size())), rec);
}

TEST(WireTest, BadTreesAreRejectedWithTheirReason) {
  using K = wire::NodeKind;
  using O = wire::Occur;
  auto expect_bad = [](const std::vector<RawNode>& nodes, const std::vector<std::string>& terms,
                       const std::string& needle) {
    RecoveredHeader rec;
    auto r = DecodeRawTree(nodes, terms, &rec);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_EQ(rec.request_id.value_or(0), 99u);  // answerable
  };
  const RawNode a{K::TERM, O::MUST, {"a"}, 0}, b{K::TERM, O::MUST, {"b"}, 0};
  // The well-formed reference: (+a +b).
  RecoveredHeader rec;
  ASSERT_TRUE(DecodeRawTree({{K::BOOLEAN, O::DEFAULT, {}, 2}, a, b}, {"a", "b"}, &rec).ok());

  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 3}, a, b}, {"a", "b"}, "only 2 nodes follow");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 2}, {K::BOOLEAN, O::MUST, {}, 2}, a, b}, {"a", "b"}, "ends inside a boolean");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 1}, a, b}, {"a", "b"}, "after its root's last clause");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 0xffffffffu}, a}, {"a"}, "only 1 nodes follow");
  expect_bad({{K::BOOLEAN, O::MUST, {}, 2}, a, b}, {"a", "b"}, "root has an occurrence");
  expect_bad({{K::TERM, O::DEFAULT, {"a"}, 0}}, {"a"}, "root is not a boolean");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 1}, {K::TERM, O::MUST, {"a"}, 1}, b}, {"a", "b"}, "with clauses");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 1}, {K::TERM, O::MUST, {"a", "b"}, 0}}, {"a", "b"}, "exactly one token");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 1}, {K::TERM, O::MUST, {""}, 0}}, {}, "empty");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 0}}, {}, "no clauses");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 2}, b, a}, {"a", "b"}, "canonical");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 2}, a, a}, {"a"}, "canonical");  // a repeat counts once
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 2}, a, b}, {"a"}, "tokens");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 2}, a, b}, {"a", "b", "c"}, "tokens");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 1}, {K::TERM, static_cast<O>(9), {"a"}, 0}}, {"a"}, "occurrence");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 1}, {static_cast<K>(7), O::MUST, {"a"}, 0}}, {"a"}, "node kind");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 1}, {K::PHRASE, O::MUST, std::vector<std::string>(kMaxPhraseTokens + 1, "a"), 0}},
             {"a"}, "tokens (limit");
  expect_bad({{K::BOOLEAN, O::DEFAULT, {}, 1}, {K::TERM, O::MUST, {std::string(kMaxTermBytes + 1, 'a')}, 0}}, {},
             "bytes");
  // Nested one boolean deeper than the limit: refused while rebuilding.
  std::vector<RawNode> deep;
  for (uint32_t d = 0; d <= kMaxTreeDepth + 1; ++d) deep.push_back({K::BOOLEAN, d == 0 ? O::DEFAULT : O::MUST, {}, 1});
  deep.push_back(a);
  expect_bad(deep, {"a"}, "deeper than");
  // Millions of nested booleans cannot recurse: refused at the depth limit, whatever follows.
  std::vector<RawNode> very_deep(kMaxTreeClauses + 1, RawNode{K::BOOLEAN, O::MUST, {}, 1});
  very_deep.front().occur = O::DEFAULT;
  expect_bad(very_deep, {}, "deeper than");
  // Too many nodes.
  std::vector<RawNode> wide = {{K::BOOLEAN, O::DEFAULT, {}, kMaxTreeClauses + 1}};
  for (uint32_t i = 0; i <= kMaxTreeClauses; ++i) wide.push_back(a);
  expect_bad(wide, {"a"}, "nodes (limit");
}

TEST(WireTest, PointerAmplificationHitsTheTraversalLimit) {
  // 10000 hits whose externalId pointers are rewritten to all point at the last hit's 8 MiB text:
  // an 8 MiB frame that would read ~80 GiB. The traversal limit (8 Mi words) must stop it.
  const uint64_t big_bytes = 8 * 1024 * 1024;
  // One segment big enough for everything, so every pointer is a near pointer.
  capnp::MallocMessageBuilder b(big_bytes / 8 + (1 << 16), capnp::AllocationStrategy::FIXED_SIZE);
  auto env = b.initRoot<wire::Envelope>();
  env.setMajor(kProtocolMajor);
  auto resp = env.initBody().initSearchResponse();
  resp.setRequestId(1);
  auto hit_list = resp.initHits(10000);
  for (uint32_t i = 0; i < 10000; ++i) {
    hit_list[i].setDoc(i);
    hit_list[i].setScore(1.0f);
  }
  hit_list[9999].initExternalId(big_bytes);
  auto flat = capnp::messageToFlatArray(b);
  ASSERT_EQ(b.getSegmentsForOutput().size(), 1u);
  const std::string frame(reinterpret_cast<const char*>(flat.asBytes().begin()), flat.asBytes().size());
  ASSERT_TRUE(DecodeEnvelope(frame).ok());  // unpatched, it is valid
  ASSERT_LE(frame.size(), kMaxFrameBytes);

  std::vector<uint64_t> words(frame.size() / 8);
  std::memcpy(words.data(), frame.data(), frame.size());
  // Locate the hit list: Hit i is a data word (doc = i, score = 1.0f) followed by its pointer.
  auto data_word = [](uint32_t doc) { return uint64_t{doc} | (uint64_t{0x3f800000u} << 32); };
  size_t first = 0;
  while (first + 2 < words.size() && !(words[first] == data_word(0) && words[first + 2] == data_word(1))) ++first;
  ASSERT_LT(first + 2, words.size());
  // The last hit's pointer locates the big text: a list pointer's bits 2..31 are the signed word
  // offset from the end of the pointer; bits 32..34 the element size (2 = byte); 35..63 the count.
  const size_t last_ptr = first + 2 * 9999 + 1;
  const int64_t big_word = static_cast<int64_t>(last_ptr) + 1 + (static_cast<int32_t>(words[last_ptr] & 0xffffffffu) >> 2);
  ASSERT_EQ(words[last_ptr] >> 35, big_bytes + 1);  // NUL included
  for (size_t i = 0; i < 9999; ++i) {
    const size_t ptr_word = first + 2 * i + 1;
    const int64_t offset = big_word - static_cast<int64_t>(ptr_word + 1);
    words[ptr_word] = 1u | (static_cast<uint64_t>(static_cast<uint32_t>(offset) & 0x3fffffffu) << 2) |
                      (uint64_t{2} << 32) | ((big_bytes + 1) << 35);
  }
  auto r = DecodeEnvelope(std::as_bytes(std::span(words.data(), words.size())));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("malformed message"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("traversal limit"), std::string::npos) << r.status().message();
}

// ---- the fetch phase (minor 2) -------------------------------------------------------------------

FetchRequestMsg RandomFetch(std::mt19937_64& rng) {
  FetchRequestMsg m;
  m.request_id = rng();
  m.deadline_unix_micros = static_cast<int64_t>(rng() >> 1);
  for (int i = 1 + static_cast<int>(rng() % 50); i > 0; --i) m.docs.push_back(static_cast<uint32_t>(rng()));
  m.source = rng() % 2 == 0;
  m.highlight = rng() % 2 == 0;
  for (int i = static_cast<int>(rng() % 5); i > 0; --i) m.highlight_terms.push_back(RandomTerm(rng));
  for (int i = static_cast<int>(rng() % 3); i > 0; --i) {
    m.highlight_phrases.emplace_back();
    for (int t = 2 + static_cast<int>(rng() % 4); t > 0; --t) m.highlight_phrases.back().push_back(RandomTerm(rng));
  }
  return m;
}

TEST(WireTest, FetchRequestRoundTrip) {
  std::mt19937_64 rng(51);
  for (int i = 0; i < 200; ++i) {
    const FetchRequestMsg m = RandomFetch(rng);
    RecoveredHeader rec;
    auto env = DecodeEnvelope(EncodeFetchRequest(m), &rec);
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    ASSERT_EQ(env->kind(), MessageKind::kFetchRequest);
    EXPECT_EQ(env->minor, kProtocolMinor);
    EXPECT_EQ(std::get<FetchRequestMsg>(env->body), m);
    EXPECT_EQ(rec.kind, MessageKind::kFetchRequest);
    EXPECT_EQ(rec.request_id, m.request_id);
  }
  EXPECT_EQ(MessageKindName(MessageKind::kFetchRequest), "fetchRequest");
  EXPECT_EQ(MessageKindName(MessageKind::kFetchResponse), "fetchResponse");
}

TEST(WireTest, FetchResponseCarriesSourcesByteForByte) {
  FetchResponseMsg m;
  m.request_id = 77;
  m.shard_id = 3;
  // Any bytes: NULs, invalid UTF-8, escapes, a large document.
  FetchedDocMsg a{5, true, std::string("{\"id\":\"a\",\"contents\":\"caf\xc3\xa9 \\u00e9 \\\"q\\\"\"}"),
                  {"<em>caf\xc3\xa9</em>"}};
  FetchedDocMsg b{9, true, std::string("\x00\xff{}", 4), {}};
  FetchedDocMsg c{11, false, "", {}};  // not stored
  FetchedDocMsg d{12, true, std::string(size_t{3} << 20, 'x'), {"one", "two", "three"}};
  FetchedDocMsg omitted{13, true, "", {}, /*omitted=*/true};
  m.docs = {a, b, c, d, omitted};
  auto env = DecodeEnvelope(EncodeFetchResponse(m));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  ASSERT_EQ(env->kind(), MessageKind::kFetchResponse);
  const auto& got = std::get<FetchResponseMsg>(env->body);
  EXPECT_EQ(got.request_id, 77u);
  EXPECT_EQ(got.shard_id, 3u);
  EXPECT_TRUE(got.status.ok());
  ASSERT_EQ(got.docs.size(), 5u);
  EXPECT_EQ(got.docs[0], a);
  EXPECT_EQ(got.docs[1], b);
  EXPECT_EQ(got.docs[1].source.size(), 4u);
  EXPECT_EQ(got.docs[2], c);
  EXPECT_FALSE(got.docs[2].has_source);
  EXPECT_EQ(got.docs[3], d);
  EXPECT_EQ(got.docs[4], omitted);
  EXPECT_TRUE(got.docs[4].omitted);
  EXPECT_FALSE(got.docs[3].omitted);

  FetchResponseMsg err;
  err.request_id = 8;
  err.status = Status::Corruption("source block 4 fails its checksum");
  auto e = DecodeEnvelope(EncodeFetchResponse(err));
  ASSERT_TRUE(e.ok());
  const auto& ge = std::get<FetchResponseMsg>(e->body);
  EXPECT_EQ(ge.status.code(), StatusCode::kCorruption);
  EXPECT_EQ(ge.status.message(), "source block 4 fails its checksum");
}

TEST(WireTest, BadFetchRequestsAreRejectedWithTheirReason) {
  auto rejected = [](const FetchRequestMsg& m, const std::string& why) {
    RecoveredHeader rec;
    auto env = DecodeEnvelope(EncodeFetchRequest(m), &rec);
    ASSERT_FALSE(env.ok()) << why;
    EXPECT_EQ(env.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(env.status().message().find(why), std::string::npos) << env.status().message();
    // Still answerable: the header names the kind and the id.
    EXPECT_EQ(rec.kind, MessageKind::kFetchRequest);
    EXPECT_EQ(rec.request_id, m.request_id);
  };
  FetchRequestMsg ok;
  ok.request_id = 4;
  ok.docs = {1};
  ASSERT_TRUE(ValidateFetchRequest(ok).ok());
  FetchRequestMsg m = ok;
  m.docs.clear();
  rejected(m, "no docs");
  m = ok;
  m.docs.assign(kMaxK + 1, 7);
  rejected(m, "too many docs");
  m = ok;
  m.highlight_terms = {""};
  rejected(m, "empty highlight token");
  m = ok;
  m.highlight_terms = {std::string(kMaxTermBytes + 1, 'a')};
  rejected(m, "highlight token of");
  m = ok;
  m.highlight_phrases = {{"one"}};
  rejected(m, "highlight phrase of 1 tokens");
  m = ok;
  m.highlight_phrases = {std::vector<std::string>(kMaxPhraseTokens + 1, "a")};
  rejected(m, "highlight phrase tokens");
  m = ok;
  m.highlight_terms.assign(kMaxTerms + 1, "a");
  rejected(m, "too many highlight terms");
}

TEST(WireTest, FetchResponseLimits) {
  FetchResponseMsg m;
  m.docs.resize(kMaxK + 1);
  auto env = DecodeEnvelope(EncodeFetchResponse(m));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("too many fetched docs"), std::string::npos);
  m.docs.assign(1, FetchedDocMsg{1, true, "{}", std::vector<std::string>(kMaxHighlightFragments + 1, "f")});
  env = DecodeEnvelope(EncodeFetchResponse(m));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("too many highlight fragments"), std::string::npos);
}

}  // namespace
}  // namespace search
