// Fuzz target: Cap'n Proto frame decoding (proto/wire.hpp DecodeEnvelope) on arbitrary bytes, the
// path every ZeroMQ message from the network takes in the node (SearchRequest, FetchRequest, Ping)
// and in the integrator (SearchResponse, FetchResponse, Pong). A decoded message must satisfy the documented validation
// (terms canonical and bounded, k in range, 0 only with a count, a query tree valid, canonical and
// with exactly the terms as its tokens, at most kMaxK hits, totals only with a count), agree with
// the recovered header, and survive a round trip: encoded again, it decodes to the same values.
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "fuzz_check.hpp"
#include "proto/wire.hpp"

namespace {

using namespace search;  // NOLINT: a fuzz target over one API

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

bool SameHits(const std::vector<HitMsg>& a, const std::vector<HitMsg>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].doc != b[i].doc || !SameBits(a[i].score, b[i].score) || a[i].external_id != b[i].external_id)
      return false;
  }
  return true;
}

// Texts may hold NULs: they must survive too (capnp's std::string conversion would stop at one).
bool SameStatus(const Status& a, const Status& b) { return a.code() == b.code() && a.message() == b.message(); }

// Status codes the wire can carry (kAlreadyExists travels as internal).
Status WireStatus(const Status& s) {
  if (s.code() == StatusCode::kAlreadyExists) return Status::Internal(s.message());
  return s;
}

void CheckRequest(const SearchRequestMsg& m) {
  FUZZ_CHECK(ValidateSearchRequest(m).ok());
  FUZZ_CHECK(m.terms.size() <= kMaxTerms);
  for (size_t i = 0; i < m.terms.size(); ++i) {
    FUZZ_CHECK(!m.terms[i].empty() && m.terms[i].size() <= kMaxTermBytes);
    FUZZ_CHECK(i == 0 || m.terms[i - 1] < m.terms[i]);
  }
  FUZZ_CHECK(m.k <= kMaxK && (m.k >= 1 || m.count));
  FUZZ_CHECK(m.mode == QueryMode::kAnd || m.mode == QueryMode::kOr || m.mode == QueryMode::kAndOr);
  if (m.tree != nullptr) {
    FUZZ_CHECK(ValidateTree(*m.tree).ok());
    FUZZ_CHECK(Canonicalize(*m.tree) == *m.tree);
    FUZZ_CHECK(TreeTerms(*m.tree) == m.terms);
  }
}

void CheckResponse(const SearchResponseMsg& m) {
  FUZZ_CHECK(m.hits.size() <= kMaxK);
  FUZZ_CHECK(m.or_hits.size() <= kMaxK);
  FUZZ_CHECK(m.has_or_hits || m.or_hits.empty());
  FUZZ_CHECK(m.has_total || (m.total == 0 && m.or_total == 0));
  FUZZ_CHECK(m.has_or_hits || m.or_total == 0);
  FUZZ_CHECK(m.stats.processor == Processor::kCpu || m.stats.processor == Processor::kGpu ||
             m.stats.processor == Processor::kHybrid);
}

uint64_t RequestId(const EnvelopeMsg& e) {
  return std::visit([](const auto& m) { return m.request_id; }, e.body);
}

void CheckRoundTrip(const EnvelopeMsg& a) {
  const std::string frame = EncodeEnvelope(a);
  FUZZ_CHECK(!frame.empty() && frame.size() % 8 == 0);
  RecoveredHeader rec;
  auto back = DecodeEnvelope(frame, &rec);
  FUZZ_CHECK_MSG(back.ok(), back.status().ToString());
  const EnvelopeMsg& b = *back;
  FUZZ_CHECK(b.major == a.major && b.minor == a.minor && b.kind() == a.kind());
  FUZZ_CHECK(rec.kind == a.kind() && rec.request_id == RequestId(a) && rec.major == a.major);
  if (const auto* r = std::get_if<SearchRequestMsg>(&a.body)) {
    FUZZ_CHECK(*r == std::get<SearchRequestMsg>(b.body));
  } else if (const auto* r = std::get_if<SearchResponseMsg>(&a.body)) {
    const auto& s = std::get<SearchResponseMsg>(b.body);
    FUZZ_CHECK(r->request_id == s.request_id && r->shard_id == s.shard_id);
    FUZZ_CHECK(SameStatus(WireStatus(r->status), s.status));
    FUZZ_CHECK(SameHits(r->hits, s.hits) && SameHits(r->or_hits, s.or_hits) && r->has_or_hits == s.has_or_hits);
    FUZZ_CHECK(r->stats == s.stats && r->doc_begin == s.doc_begin && r->doc_end == s.doc_end);
    FUZZ_CHECK(r->has_total == s.has_total && r->total == s.total && r->or_total == s.or_total);
  } else if (const auto* r = std::get_if<PingMsg>(&a.body)) {
    FUZZ_CHECK(*r == std::get<PingMsg>(b.body));
  } else if (const auto* r = std::get_if<FetchRequestMsg>(&a.body)) {
    FUZZ_CHECK(*r == std::get<FetchRequestMsg>(b.body));
  } else if (const auto* r = std::get_if<FetchResponseMsg>(&a.body)) {
    const auto& s = std::get<FetchResponseMsg>(b.body);
    FUZZ_CHECK(r->request_id == s.request_id && r->shard_id == s.shard_id && r->docs == s.docs);
    FUZZ_CHECK(SameStatus(WireStatus(r->status), s.status));
  } else {
    const auto& p = std::get<PongMsg>(a.body);
    const auto& q = std::get<PongMsg>(b.body);
    FUZZ_CHECK(p.request_id == q.request_id && p.health == q.health);
    FUZZ_CHECK(SameStatus(WireStatus(p.status), q.status));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);
  RecoveredHeader rec;
  auto env = DecodeEnvelope(frame, &rec);
  if (!env.ok()) {
    FUZZ_CHECK(env.status().code() == StatusCode::kInvalidArgument);
    FUZZ_CHECK(!env.status().message().empty());
    // A frame that is not a whole number of words, or empty, cannot reveal a header.
    if (size == 0 || size % 8 != 0) FUZZ_CHECK(rec.kind == MessageKind::kUnknown && !rec.request_id);
    return 0;
  }
  const EnvelopeMsg& e = *env;
  FUZZ_CHECK(size % 8 == 0 && size <= kMaxFrameBytes);
  FUZZ_CHECK(e.major == kProtocolMajor);
  FUZZ_CHECK(rec.kind == e.kind() && rec.request_id == RequestId(e) && rec.major == e.major);
  if (const auto* r = std::get_if<SearchRequestMsg>(&e.body)) CheckRequest(*r);
  if (const auto* r = std::get_if<SearchResponseMsg>(&e.body)) CheckResponse(*r);
  if (const auto* r = std::get_if<FetchRequestMsg>(&e.body)) {
    FUZZ_CHECK(ValidateFetchRequest(*r).ok());
    FUZZ_CHECK(!r->docs.empty() && r->docs.size() <= kMaxK);
  }
  if (const auto* r = std::get_if<FetchResponseMsg>(&e.body)) {
    FUZZ_CHECK(r->docs.size() <= kMaxK);
    for (const auto& d : r->docs) FUZZ_CHECK(d.highlights.size() <= kMaxHighlightFragments);
  }
  CheckRoundTrip(e);
  return 0;
}
