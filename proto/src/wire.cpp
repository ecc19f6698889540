// The wire codec over the generated search.capnp code (see proto/wire.hpp).
#include "proto/wire.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

#include <array>
#include <cstring>
#include <exception>

#include "proto/search.capnp.h"

namespace search {
namespace {

static_assert(kProtocolMajor == wire::PROTOCOL_MAJOR, "wire.hpp and search.capnp disagree");
static_assert(kProtocolMinor == wire::PROTOCOL_MINOR, "wire.hpp and search.capnp disagree");

wire::Mode ToWire(QueryMode m) {
  switch (m) {
    case QueryMode::kAnd: return wire::Mode::AND;
    case QueryMode::kOr: return wire::Mode::OR;
    case QueryMode::kAndOr: return wire::Mode::AND_OR;
  }
  return wire::Mode::AND;
}

Result<QueryMode> FromWire(wire::Mode m) {
  switch (m) {
    case wire::Mode::AND: return QueryMode::kAnd;
    case wire::Mode::OR: return QueryMode::kOr;
    case wire::Mode::AND_OR: return QueryMode::kAndOr;
  }
  return Status::InvalidArgument("unknown query mode " + std::to_string(static_cast<uint16_t>(m)));
}

wire::Processor ToWire(Processor p) {
  switch (p) {
    case Processor::kCpu: return wire::Processor::CPU;
    case Processor::kGpu: return wire::Processor::GPU;
    case Processor::kHybrid: return wire::Processor::HYBRID;
  }
  return wire::Processor::CPU;
}

Processor FromWire(wire::Processor p) {
  switch (p) {
    case wire::Processor::CPU: return Processor::kCpu;
    case wire::Processor::GPU: return Processor::kGpu;
    case wire::Processor::HYBRID: return Processor::kHybrid;
  }
  return Processor::kCpu;  // a newer processor kind: report it as CPU rather than fail
}

wire::StatusCode ToWire(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return wire::StatusCode::OK;
    case StatusCode::kInvalidArgument: return wire::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound: return wire::StatusCode::NOT_FOUND;
    case StatusCode::kCorruption: return wire::StatusCode::CORRUPTION;
    case StatusCode::kIOError: return wire::StatusCode::IO_ERROR;
    case StatusCode::kUnavailable: return wire::StatusCode::UNAVAILABLE;
    case StatusCode::kDeadlineExceeded: return wire::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kResourceExhausted: return wire::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kAlreadyExists:
    case StatusCode::kInternal: return wire::StatusCode::INTERNAL;
  }
  return wire::StatusCode::INTERNAL;
}

Status FromWire(wire::ErrorInfo::Reader e) {
  std::string msg(e.getMessage().cStr(), e.getMessage().size());
  switch (e.getCode()) {
    case wire::StatusCode::OK: return Status::Ok();
    case wire::StatusCode::INVALID_ARGUMENT: return Status::InvalidArgument(std::move(msg));
    case wire::StatusCode::NOT_FOUND: return Status::NotFound(std::move(msg));
    case wire::StatusCode::CORRUPTION: return Status::Corruption(std::move(msg));
    case wire::StatusCode::IO_ERROR: return Status::IOError(std::move(msg));
    case wire::StatusCode::UNAVAILABLE: return Status::Unavailable(std::move(msg));
    case wire::StatusCode::DEADLINE_EXCEEDED: return Status::DeadlineExceeded(std::move(msg));
    case wire::StatusCode::RESOURCE_EXHAUSTED: return Status::ResourceExhausted(std::move(msg));
    case wire::StatusCode::INTERNAL: return Status::Internal(std::move(msg));
  }
  return Status::Internal("unknown status code " + std::to_string(static_cast<uint16_t>(e.getCode())) + ": " + msg);
}

// Text of any bytes, NULs included (a std::string converts through c_str(), which would stop at
// the first NUL and make decode -> encode -> decode change the message).
capnp::Text::Reader TextOf(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

void SetError(wire::ErrorInfo::Builder b, const Status& s) {
  b.setCode(ToWire(s.code()));
  b.setMessage(TextOf(s.message()));
}

std::string ToString(kj::StringPtr s) { return std::string(s.cStr(), s.size()); }

std::string Flatten(capnp::MallocMessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

wire::Occur ToWire(Occur o) {
  switch (o) {
    case Occur::kDefault: return wire::Occur::DEFAULT;
    case Occur::kMust: return wire::Occur::MUST;
    case Occur::kShould: return wire::Occur::SHOULD;
    case Occur::kMustNot: return wire::Occur::MUST_NOT;
    case Occur::kFilter: return wire::Occur::FILTER;
  }
  return wire::Occur::DEFAULT;
}

Result<Occur> FromWire(wire::Occur o) {
  switch (o) {
    case wire::Occur::DEFAULT: return Occur::kDefault;
    case wire::Occur::MUST: return Occur::kMust;
    case wire::Occur::SHOULD: return Occur::kShould;
    case wire::Occur::MUST_NOT: return Occur::kMustNot;
    case wire::Occur::FILTER: return Occur::kFilter;
  }
  return Status::InvalidArgument("unknown clause occurrence " + std::to_string(static_cast<uint16_t>(o)));
}

wire::NodeKind ToWire(QueryNode::Kind k) {
  switch (k) {
    case QueryNode::Kind::kTerm: return wire::NodeKind::TERM;
    case QueryNode::Kind::kPhrase: return wire::NodeKind::PHRASE;
    case QueryNode::Kind::kBool: return wire::NodeKind::BOOLEAN;
  }
  return wire::NodeKind::BOOLEAN;
}

Result<QueryNode::Kind> FromWire(wire::NodeKind k) {
  switch (k) {
    case wire::NodeKind::TERM: return QueryNode::Kind::kTerm;
    case wire::NodeKind::PHRASE: return QueryNode::Kind::kPhrase;
    case wire::NodeKind::BOOLEAN: return QueryNode::Kind::kBool;
  }
  return Status::InvalidArgument("unknown query node kind " + std::to_string(static_cast<uint16_t>(k)));
}

// The nodes of `tree` in pre-order, each with the occurrence of the clause it is (root: kDefault).
void Flatten(const QueryNode& node, Occur occur, std::vector<std::pair<const QueryNode*, Occur>>* out) {
  out->emplace_back(&node, occur);
  for (const QueryNode::Clause& c : node.clauses) Flatten(c.node, c.occur, out);
}

void FillTree(capnp::List<wire::QueryNode>::Builder out, const std::vector<std::pair<const QueryNode*, Occur>>& nodes) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto b = out[static_cast<unsigned>(i)];
    const QueryNode& n = *nodes[i].first;
    b.setKind(ToWire(n.kind));
    b.setOccur(ToWire(nodes[i].second));
    auto tokens = b.initTokens(static_cast<unsigned>(n.tokens.size()));
    for (size_t t = 0; t < n.tokens.size(); ++t)
      tokens.set(static_cast<unsigned>(t), capnp::Text::Reader(n.tokens[t].data(), n.tokens[t].size()));
    b.setClauses(static_cast<uint32_t>(n.clauses.size()));
  }
}

// Rebuilds the subtree that starts at nodes[*next] (advancing *next past it). `depth`: booleans
// above it; a boolean deeper than kMaxTreeDepth below the root is refused before its clauses are
// read, so the recursion is bounded whatever the input.
Status ReadNode(capnp::List<wire::QueryNode>::Reader nodes, uint32_t* next, uint32_t depth, QueryNode* out,
                Occur* occur) {
  const uint32_t at = *next;
  if (at >= nodes.size()) return Status::InvalidArgument("query tree ends inside a boolean (node " + std::to_string(at) + ")");
  ++*next;
  const auto r = nodes[at];
  SEARCH_ASSIGN_OR_RETURN(out->kind, FromWire(r.getKind()));
  SEARCH_ASSIGN_OR_RETURN(*occur, FromWire(r.getOccur()));
  const auto tokens = r.getTokens();
  if (tokens.size() > kMaxPhraseTokens) {
    return Status::InvalidArgument("query tree node " + std::to_string(at) + " has " + std::to_string(tokens.size()) +
                                   " tokens (limit " + std::to_string(kMaxPhraseTokens) + ")");
  }
  out->tokens.reserve(tokens.size());
  for (auto t : tokens) {
    if (t.size() > kMaxTermBytes) {
      return Status::InvalidArgument("query tree node " + std::to_string(at) + " has a token of " +
                                     std::to_string(t.size()) + " bytes (limit " + std::to_string(kMaxTermBytes) + ")");
    }
    out->tokens.push_back(ToString(t));
  }
  const uint32_t clauses = r.getClauses();
  if (out->kind != QueryNode::Kind::kBool) {
    if (clauses != 0) {
      return Status::InvalidArgument("query tree node " + std::to_string(at) + " is a term or phrase with clauses");
    }
    return Status::Ok();
  }
  if (depth > kMaxTreeDepth) {
    return Status::InvalidArgument("query tree nested deeper than " + std::to_string(kMaxTreeDepth) + " booleans");
  }
  if (clauses > nodes.size() - *next) {
    return Status::InvalidArgument("query tree node " + std::to_string(at) + " has " + std::to_string(clauses) +
                                   " clauses but only " + std::to_string(nodes.size() - *next) + " nodes follow");
  }
  out->clauses.resize(clauses);
  for (QueryNode::Clause& c : out->clauses) SEARCH_RETURN_IF_ERROR(ReadNode(nodes, next, depth + 1, &c.node, &c.occur));
  return Status::Ok();
}

Result<std::shared_ptr<const QueryNode>> ReadTree(capnp::List<wire::QueryNode>::Reader nodes) {
  if (nodes.size() == 0) return std::shared_ptr<const QueryNode>();
  if (nodes.size() > kMaxTreeClauses + 1) {
    return Status::InvalidArgument("query tree of " + std::to_string(nodes.size()) + " nodes (limit " +
                                   std::to_string(kMaxTreeClauses + 1) + ")");
  }
  auto tree = std::make_shared<QueryNode>();
  uint32_t next = 0;
  Occur occur = Occur::kDefault;
  SEARCH_RETURN_IF_ERROR(ReadNode(nodes, &next, 0, tree.get(), &occur));
  if (next != nodes.size()) {
    return Status::InvalidArgument("query tree has " + std::to_string(nodes.size() - next) +
                                   " node(s) after its root's last clause");
  }
  if (occur != Occur::kDefault) return Status::InvalidArgument("query tree's root has an occurrence");
  return std::shared_ptr<const QueryNode>(std::move(tree));
}

void Fill(wire::SearchRequest::Builder b, const SearchRequestMsg& m) {
  b.setRequestId(m.request_id);
  auto terms = b.initTerms(static_cast<unsigned>(m.terms.size()));
  for (size_t i = 0; i < m.terms.size(); ++i) {
    terms.set(static_cast<unsigned>(i), capnp::Text::Reader(m.terms[i].data(), m.terms[i].size()));
  }
  b.setMode(ToWire(m.mode));
  b.setK(m.k);
  b.setDeadlineUnixMicros(m.deadline_unix_micros);
  b.setFlags(m.flags);
  if (m.tree != nullptr) {
    std::vector<std::pair<const QueryNode*, Occur>> nodes;
    Flatten(*m.tree, Occur::kDefault, &nodes);
    FillTree(b.initTree(static_cast<unsigned>(nodes.size())), nodes);
  }
  b.setCount(m.count);
}

void FillHits(capnp::List<wire::Hit>::Builder out, const std::vector<HitMsg>& hits) {
  for (size_t i = 0; i < hits.size(); ++i) {
    auto h = out[static_cast<unsigned>(i)];
    h.setDoc(hits[i].doc);
    h.setScore(hits[i].score);
    h.setExternalId(capnp::Text::Reader(hits[i].external_id.data(), hits[i].external_id.size()));
  }
}

Status ReadHits(capnp::List<wire::Hit>::Reader in, std::vector<HitMsg>* out) {
  if (in.size() > kMaxK) {
    return Status::InvalidArgument("too many hits: " + std::to_string(in.size()) + " (limit " + std::to_string(kMaxK) +
                                   ")");
  }
  out->reserve(in.size());
  for (auto h : in) out->push_back(HitMsg{h.getDoc(), h.getScore(), ToString(h.getExternalId())});
  return Status::Ok();
}

// Fields that hold their schema default are left unset (Cap'n Proto reads an unset struct as its
// defaults): an ok status and all-default stats (a CPU answer without kFlagIncludeStats) cost no
// bytes (72 of a 10-hit reply's ~505), which every reply pays in CurveZMQ and every reader, of any
// version, reads back as the same values.
void Fill(wire::SearchResponse::Builder b, const SearchResponseMsg& m) {
  b.setRequestId(m.request_id);
  b.setShardId(m.shard_id);
  if (!m.status.ok()) SetError(b.initStatus(), m.status);
  FillHits(b.initHits(static_cast<unsigned>(m.hits.size())), m.hits);
  if (m.has_or_hits) {
    b.setHasOrHits(true);
    FillHits(b.initOrHits(static_cast<unsigned>(m.or_hits.size())), m.or_hits);
  }
  if (m.has_total) {
    b.setHasTotal(true);
    b.setTotal(m.total);
    b.setOrTotal(m.or_total);
  }
  if (!(m.stats == ExecStatsMsg{})) {
    auto st = b.initStats();
    st.setProcessor(ToWire(m.stats.processor));
    st.setBlocksDecoded(m.stats.blocks_decoded);
    st.setPostingsDecoded(m.stats.postings_decoded);
    st.setPostingsScored(m.stats.postings_scored);
    st.setQueueMicros(m.stats.queue_micros);
    st.setRunMicros(m.stats.run_micros);
  }
  b.setDocBegin(m.doc_begin);
  b.setDocEnd(m.doc_end);
}

void Fill(wire::Pong::Builder b, const PongMsg& m) {
  b.setRequestId(m.request_id);
  auto h = b.initHealth();
  h.setShardId(m.health.shard_id);
  h.setNumShards(m.health.num_shards);
  h.setDocBegin(m.health.doc_begin);
  h.setDocEnd(m.health.doc_end);
  h.setNumDocsGlobal(m.health.num_docs_global);
  h.setState(TextOf(m.health.state));
  h.setInFlight(m.health.in_flight);
  h.setQueued(m.health.queued);
  h.setGpu(m.health.gpu);
  h.setAnalyzerJson(TextOf(m.health.analyzer_json));
  h.setIndexFormatVersion(m.health.index_format_version);
  h.setHasSources(m.health.has_sources);
  SetError(b.initStatus(), m.status);
}

Result<SearchRequestMsg> Read(wire::SearchRequest::Reader r) {
  SearchRequestMsg m;
  m.request_id = r.getRequestId();
  auto terms = r.getTerms();
  if (terms.size() > kMaxTerms) {
    return Status::InvalidArgument("too many terms: " + std::to_string(terms.size()) + " (limit " +
                                   std::to_string(kMaxTerms) + ")");
  }
  m.terms.reserve(terms.size());
  for (auto t : terms) m.terms.push_back(ToString(t));
  auto mode = FromWire(r.getMode());
  if (!mode.ok()) return mode.status();
  m.mode = *mode;
  m.k = r.getK();
  m.deadline_unix_micros = r.getDeadlineUnixMicros();
  m.flags = r.getFlags();
  m.count = r.getCount();
  SEARCH_ASSIGN_OR_RETURN(m.tree, ReadTree(r.getTree()));
  SEARCH_RETURN_IF_ERROR(ValidateSearchRequest(m));
  return m;
}

Result<SearchResponseMsg> Read(wire::SearchResponse::Reader r) {
  SearchResponseMsg m;
  m.request_id = r.getRequestId();
  m.shard_id = r.getShardId();
  m.status = FromWire(r.getStatus());
  SEARCH_RETURN_IF_ERROR(ReadHits(r.getHits(), &m.hits));
  m.has_or_hits = r.getHasOrHits();
  if (m.has_or_hits) SEARCH_RETURN_IF_ERROR(ReadHits(r.getOrHits(), &m.or_hits));
  m.has_total = r.getHasTotal();
  if (m.has_total) {
    m.total = r.getTotal();
    m.or_total = m.has_or_hits ? r.getOrTotal() : 0;
  }
  auto st = r.getStats();
  m.stats.processor = FromWire(st.getProcessor());
  m.stats.blocks_decoded = st.getBlocksDecoded();
  m.stats.postings_decoded = st.getPostingsDecoded();
  m.stats.postings_scored = st.getPostingsScored();
  m.stats.queue_micros = st.getQueueMicros();
  m.stats.run_micros = st.getRunMicros();
  m.doc_begin = r.getDocBegin();
  m.doc_end = r.getDocEnd();
  return m;
}

PongMsg Read(wire::Pong::Reader r) {
  PongMsg m;
  m.request_id = r.getRequestId();
  auto h = r.getHealth();
  m.health.shard_id = h.getShardId();
  m.health.num_shards = h.getNumShards();
  m.health.doc_begin = h.getDocBegin();
  m.health.doc_end = h.getDocEnd();
  m.health.num_docs_global = h.getNumDocsGlobal();
  m.health.state = ToString(h.getState());
  m.health.in_flight = h.getInFlight();
  m.health.queued = h.getQueued();
  m.health.gpu = h.getGpu();
  m.health.analyzer_json = ToString(h.getAnalyzerJson());
  m.health.index_format_version = h.getIndexFormatVersion();
  m.health.has_sources = h.getHasSources();
  m.status = FromWire(r.getStatus());
  return m;
}

void FillTexts(capnp::List<capnp::Text>::Builder out, const std::vector<std::string>& in) {
  for (size_t i = 0; i < in.size(); ++i) out.set(static_cast<unsigned>(i), TextOf(in[i]));
}

void Fill(wire::FetchRequest::Builder b, const FetchRequestMsg& m) {
  b.setRequestId(m.request_id);
  b.setDeadlineUnixMicros(m.deadline_unix_micros);
  auto docs = b.initDocs(static_cast<unsigned>(m.docs.size()));
  for (size_t i = 0; i < m.docs.size(); ++i) docs.set(static_cast<unsigned>(i), m.docs[i]);
  b.setSource(m.source);
  b.setHighlight(m.highlight);
  FillTexts(b.initHighlightTerms(static_cast<unsigned>(m.highlight_terms.size())), m.highlight_terms);
  auto phrases = b.initHighlightPhrases(static_cast<unsigned>(m.highlight_phrases.size()));
  for (size_t i = 0; i < m.highlight_phrases.size(); ++i) {
    const auto& tokens = m.highlight_phrases[i];
    FillTexts(phrases[static_cast<unsigned>(i)].initTokens(static_cast<unsigned>(tokens.size())), tokens);
  }
}

void Fill(wire::FetchResponse::Builder b, const FetchResponseMsg& m) {
  b.setRequestId(m.request_id);
  b.setShardId(m.shard_id);
  SetError(b.initStatus(), m.status);
  auto docs = b.initDocs(static_cast<unsigned>(m.docs.size()));
  for (size_t i = 0; i < m.docs.size(); ++i) {
    const FetchedDocMsg& d = m.docs[i];
    auto o = docs[static_cast<unsigned>(i)];
    o.setDoc(d.doc);
    o.setHasSource(d.has_source);
    if (!d.source.empty())
      o.setSource(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(d.source.data()), d.source.size()));
    FillTexts(o.initHighlights(static_cast<unsigned>(d.highlights.size())), d.highlights);
    o.setOmitted(d.omitted);
  }
}

// A list of texts of at most `limit` entries (`what` names them in the error).
Status ReadTexts(capnp::List<capnp::Text>::Reader in, size_t limit, const char* what, std::vector<std::string>* out) {
  if (in.size() > limit) {
    return Status::InvalidArgument(std::string("too many ") + what + ": " + std::to_string(in.size()) + " (limit " +
                                   std::to_string(limit) + ")");
  }
  out->reserve(in.size());
  for (auto t : in) out->push_back(ToString(t));
  return Status::Ok();
}

Result<FetchRequestMsg> Read(wire::FetchRequest::Reader r) {
  FetchRequestMsg m;
  m.request_id = r.getRequestId();
  m.deadline_unix_micros = r.getDeadlineUnixMicros();
  auto docs = r.getDocs();
  if (docs.size() > kMaxK) {
    return Status::InvalidArgument("too many docs to fetch: " + std::to_string(docs.size()) + " (limit " +
                                   std::to_string(kMaxK) + ")");
  }
  m.docs.reserve(docs.size());
  for (uint32_t d : docs) m.docs.push_back(d);
  m.source = r.getSource();
  m.highlight = r.getHighlight();
  SEARCH_RETURN_IF_ERROR(ReadTexts(r.getHighlightTerms(), kMaxTerms, "highlight terms", &m.highlight_terms));
  auto phrases = r.getHighlightPhrases();
  if (phrases.size() > kMaxTerms) {
    return Status::InvalidArgument("too many highlight phrases: " + std::to_string(phrases.size()) + " (limit " +
                                   std::to_string(kMaxTerms) + ")");
  }
  m.highlight_phrases.reserve(phrases.size());
  for (auto p : phrases) {
    m.highlight_phrases.emplace_back();
    SEARCH_RETURN_IF_ERROR(
        ReadTexts(p.getTokens(), kMaxPhraseTokens, "highlight phrase tokens", &m.highlight_phrases.back()));
  }
  SEARCH_RETURN_IF_ERROR(ValidateFetchRequest(m));
  return m;
}

Result<FetchResponseMsg> Read(wire::FetchResponse::Reader r) {
  FetchResponseMsg m;
  m.request_id = r.getRequestId();
  m.shard_id = r.getShardId();
  m.status = FromWire(r.getStatus());
  auto docs = r.getDocs();
  if (docs.size() > kMaxK) {
    return Status::InvalidArgument("too many fetched docs: " + std::to_string(docs.size()) + " (limit " +
                                   std::to_string(kMaxK) + ")");
  }
  m.docs.reserve(docs.size());
  for (auto d : docs) {
    FetchedDocMsg o;
    o.doc = d.getDoc();
    o.has_source = d.getHasSource();
    auto src = d.getSource();
    o.source.assign(reinterpret_cast<const char*>(src.begin()), src.size());
    SEARCH_RETURN_IF_ERROR(ReadTexts(d.getHighlights(), kMaxHighlightFragments, "highlight fragments", &o.highlights));
    o.omitted = d.getOmitted();
    m.docs.push_back(std::move(o));
  }
  return m;
}

Result<EnvelopeMsg> ReadEnvelope(wire::Envelope::Reader env, RecoveredHeader* rec) {
  struct {
    uint16_t major, minor;
  } out{env.getMajor(), env.getMinor()};
  rec->major = out.major;
  auto body = env.getBody();
  // Header first (kind and request id), so that even a rejected message can be answered.
  switch (body.which()) {
    case wire::Envelope::Body::SEARCH_REQUEST:
      rec->kind = MessageKind::kSearchRequest;
      rec->request_id = body.getSearchRequest().getRequestId();
      break;
    case wire::Envelope::Body::SEARCH_RESPONSE:
      rec->kind = MessageKind::kSearchResponse;
      rec->request_id = body.getSearchResponse().getRequestId();
      break;
    case wire::Envelope::Body::PING:
      rec->kind = MessageKind::kPing;
      rec->request_id = body.getPing().getRequestId();
      break;
    case wire::Envelope::Body::PONG:
      rec->kind = MessageKind::kPong;
      rec->request_id = body.getPong().getRequestId();
      break;
    case wire::Envelope::Body::FETCH_REQUEST:
      rec->kind = MessageKind::kFetchRequest;
      rec->request_id = body.getFetchRequest().getRequestId();
      break;
    case wire::Envelope::Body::FETCH_RESPONSE:
      rec->kind = MessageKind::kFetchResponse;
      rec->request_id = body.getFetchResponse().getRequestId();
      break;
    default:
      return Status::InvalidArgument("unknown message type " + std::to_string(static_cast<uint16_t>(body.which())));
  }
  if (out.major != kProtocolMajor) {
    return Status::InvalidArgument("unsupported protocol major version " + std::to_string(out.major) +
                                   " (this node speaks " + std::to_string(kProtocolMajor) + ")");
  }
  const uint16_t major = out.major, minor = out.minor;
  switch (body.which()) {
    case wire::Envelope::Body::SEARCH_REQUEST: {
      auto m = Read(body.getSearchRequest());
      if (!m.ok()) return m.status();
      return EnvelopeMsg{major, minor, std::move(m).value()};
    }
    case wire::Envelope::Body::SEARCH_RESPONSE: {
      auto m = Read(body.getSearchResponse());
      if (!m.ok()) return m.status();
      return EnvelopeMsg{major, minor, std::move(m).value()};
    }
    case wire::Envelope::Body::PING:
      return EnvelopeMsg{major, minor, PingMsg{body.getPing().getRequestId()}};
    case wire::Envelope::Body::PONG:
      return EnvelopeMsg{major, minor, Read(body.getPong())};
    case wire::Envelope::Body::FETCH_REQUEST: {
      auto m = Read(body.getFetchRequest());
      if (!m.ok()) return m.status();
      return EnvelopeMsg{major, minor, std::move(m).value()};
    }
    case wire::Envelope::Body::FETCH_RESPONSE: {
      auto m = Read(body.getFetchResponse());
      if (!m.ok()) return m.status();
      return EnvelopeMsg{major, minor, std::move(m).value()};
    }
  }
  return Status::InvalidArgument("unknown message type");
}

}  // namespace

std::string_view MessageKindName(MessageKind kind) {
  switch (kind) {
    case MessageKind::kUnknown: return "unknown";
    case MessageKind::kSearchRequest: return "searchRequest";
    case MessageKind::kSearchResponse: return "searchResponse";
    case MessageKind::kPing: return "ping";
    case MessageKind::kPong: return "pong";
    case MessageKind::kFetchRequest: return "fetchRequest";
    case MessageKind::kFetchResponse: return "fetchResponse";
  }
  return "unknown";
}

Status ValidateSearchRequest(const SearchRequestMsg& m) {
  if (m.terms.size() > kMaxTerms) {
    return Status::InvalidArgument("too many terms: " + std::to_string(m.terms.size()) + " (limit " +
                                   std::to_string(kMaxTerms) + ")");
  }
  for (size_t i = 0; i < m.terms.size(); ++i) {
    const std::string& t = m.terms[i];
    if (t.empty()) return Status::InvalidArgument("empty term at position " + std::to_string(i));
    if (t.size() > kMaxTermBytes) {
      return Status::InvalidArgument("term " + std::to_string(i) + " is " + std::to_string(t.size()) +
                                     " bytes (limit " + std::to_string(kMaxTermBytes) + ")");
    }
    if (i > 0 && !(m.terms[i - 1] < t)) {
      return Status::InvalidArgument("terms are not unique and ascending at position " + std::to_string(i));
    }
  }
  switch (m.mode) {
    case QueryMode::kAnd:
    case QueryMode::kOr:
    case QueryMode::kAndOr: break;
    default: return Status::InvalidArgument("unknown query mode");
  }
  if (!(m.count && m.k == 0)) SEARCH_RETURN_IF_ERROR(ValidateK(m.k));
  if (m.tree != nullptr) {
    SEARCH_RETURN_IF_ERROR(ValidateTree(*m.tree).WithContext("query tree"));
    if (Canonicalize(*m.tree) != *m.tree) return Status::InvalidArgument("query tree is not in canonical form");
    if (TreeTerms(*m.tree) != m.terms) return Status::InvalidArgument("terms are not the query tree's tokens");
  }
  return Status::Ok();
}

Status ValidateFetchRequest(const FetchRequestMsg& m) {
  if (m.docs.empty()) return Status::InvalidArgument("a fetch asks for no docs");
  if (m.docs.size() > kMaxK) {
    return Status::InvalidArgument("too many docs to fetch: " + std::to_string(m.docs.size()) + " (limit " +
                                   std::to_string(kMaxK) + ")");
  }
  if (m.highlight_terms.size() > kMaxTerms || m.highlight_phrases.size() > kMaxTerms)
    return Status::InvalidArgument("too many highlight terms or phrases (limit " + std::to_string(kMaxTerms) +
                                   " each)");
  auto check_token = [](const std::string& t) {
    if (t.empty()) return Status::InvalidArgument("empty highlight token");
    if (t.size() > kMaxTermBytes) {
      return Status::InvalidArgument("highlight token of " + std::to_string(t.size()) + " bytes (limit " +
                                     std::to_string(kMaxTermBytes) + ")");
    }
    return Status::Ok();
  };
  for (const std::string& t : m.highlight_terms) SEARCH_RETURN_IF_ERROR(check_token(t));
  for (const auto& p : m.highlight_phrases) {
    if (p.size() < 2 || p.size() > kMaxPhraseTokens) {
      return Status::InvalidArgument("highlight phrase of " + std::to_string(p.size()) + " tokens (2.." +
                                     std::to_string(kMaxPhraseTokens) + ")");
    }
    for (const std::string& t : p) SEARCH_RETURN_IF_ERROR(check_token(t));
  }
  return Status::Ok();
}

bool SearchRequestMsg::operator==(const SearchRequestMsg& o) const {
  const bool same_tree = tree == nullptr || o.tree == nullptr ? tree == o.tree : *tree == *o.tree;
  return request_id == o.request_id && terms == o.terms && mode == o.mode && k == o.k &&
         deadline_unix_micros == o.deadline_unix_micros && flags == o.flags && same_tree && count == o.count;
}

Query ToQuery(const SearchRequestMsg& msg) {
  Query q;
  q.terms = msg.terms;
  q.mode = msg.mode;
  q.k = msg.k;
  q.tree = msg.tree;
  q.count = msg.count;
  return q;
}

namespace {

// The calling thread's first segment for EncodeEnvelope's message: zero, and zeroed again by the
// builder's destructor over what it used, so a small message neither allocates nor clears a fresh
// 8 KiB segment. Its size is capnp's default first segment's: the same segments, the same bytes.
kj::ArrayPtr<capnp::word> FirstSegment() {
  thread_local std::array<capnp::word, capnp::SUGGESTED_FIRST_SEGMENT_WORDS> words{};
  return kj::arrayPtr(words.data(), words.size());
}

}  // namespace

std::string EncodeEnvelope(const EnvelopeMsg& msg) {
  capnp::MallocMessageBuilder message(FirstSegment());  // EncodeEnvelope is never re-entered on a thread
  auto env = message.initRoot<wire::Envelope>();
  env.setMajor(msg.major);
  env.setMinor(msg.minor);
  auto body = env.initBody();
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, SearchRequestMsg>) {
          Fill(body.initSearchRequest(), m);
        } else if constexpr (std::is_same_v<T, SearchResponseMsg>) {
          Fill(body.initSearchResponse(), m);
        } else if constexpr (std::is_same_v<T, PingMsg>) {
          body.initPing().setRequestId(m.request_id);
        } else if constexpr (std::is_same_v<T, PongMsg>) {
          Fill(body.initPong(), m);
        } else if constexpr (std::is_same_v<T, FetchRequestMsg>) {
          Fill(body.initFetchRequest(), m);
        } else {
          static_assert(std::is_same_v<T, FetchResponseMsg>);
          Fill(body.initFetchResponse(), m);
        }
      },
      msg.body);
  return Flatten(message);
}

std::string EncodeSearchRequest(const SearchRequestMsg& msg) { return EncodeEnvelope(EnvelopeMsg{.body = msg}); }
std::string EncodeSearchResponse(const SearchResponseMsg& msg) { return EncodeEnvelope(EnvelopeMsg{.body = msg}); }
std::string EncodePing(const PingMsg& msg) { return EncodeEnvelope(EnvelopeMsg{.body = msg}); }
std::string EncodePong(const PongMsg& msg) { return EncodeEnvelope(EnvelopeMsg{.body = msg}); }
std::string EncodeFetchRequest(const FetchRequestMsg& msg) { return EncodeEnvelope(EnvelopeMsg{.body = msg}); }
std::string EncodeFetchResponse(const FetchResponseMsg& msg) { return EncodeEnvelope(EnvelopeMsg{.body = msg}); }

Result<EnvelopeMsg> DecodeEnvelope(std::span<const std::byte> frame, RecoveredHeader* recovered) {
  RecoveredHeader local;
  RecoveredHeader* rec = recovered != nullptr ? recovered : &local;
  *rec = RecoveredHeader{};
  if (frame.empty()) return Status::InvalidArgument("malformed message: empty frame");
  if (frame.size() > kMaxFrameBytes) {
    return Status::InvalidArgument("malformed message: frame of " + std::to_string(frame.size()) +
                                   " bytes exceeds the limit of " + std::to_string(kMaxFrameBytes));
  }
  if (frame.size() % sizeof(capnp::word) != 0) {
    return Status::InvalidArgument("malformed message: frame size " + std::to_string(frame.size()) +
                                   " is not a multiple of 8");
  }
  try {
    // Word-aligned copy: zmq frames carry no alignment guarantee.
    kj::Array<capnp::word> words = kj::heapArray<capnp::word>(frame.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), frame.data(), frame.size());
    capnp::ReaderOptions options;
    options.traversalLimitInWords = kTraversalLimitWords;
    options.nestingLimit = kNestingLimit;
    capnp::FlatArrayMessageReader reader(words.asPtr(), options);
    if (reader.getEnd() != words.end()) {
      return Status::InvalidArgument("malformed message: trailing bytes after the message");
    }
    return ReadEnvelope(reader.getRoot<wire::Envelope>(), rec);
  } catch (const kj::Exception& e) {
    return Status::InvalidArgument("malformed message: " + ToString(e.getDescription()));
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("malformed message: ") + e.what());
  }
}

}  // namespace search
