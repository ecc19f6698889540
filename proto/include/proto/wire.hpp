// The wire codec: plain C++ messages <-> Cap'n Proto frames of proto/search.capnp (the contract;
// read its comments). Integrator and node only ever see these structs: every capnp reader stays
// inside wire.cpp, where each kj::Exception a malformed frame raises is caught and returned as
// InvalidArgument("malformed message: ...").
//
// A frame is one unpacked capnp message (messageToFlatArray) holding an Envelope. Decoding:
//   - frames larger than kMaxFrameBytes, empty or not a multiple of 8 bytes are rejected;
//   - the bytes are copied into a word-aligned buffer (any input alignment is fine);
//   - parsed with ReaderOptions{traversalLimitInWords = kTraversalLimitWords,
//     nestingLimit = kNestingLimit}; trailing bytes after the message are rejected;
//   - an unknown major version is rejected ("unsupported protocol major version X (this node
//     speaks Y)"); minor versions are accepted;
//   - a SearchRequest is validated: <= kMaxTerms terms, each 1..kMaxTermBytes bytes, strictly
//     ascending (canonical), k in 1..kMaxK (ValidateK; 0..kMaxK with count), a known mode; a tree
//     (the flat pre-order list of search.capnp) is rebuilt within core/query_tree.hpp's limits
//     (kMaxTreeClauses + 1 nodes, depth kMaxTreeDepth, checked while rebuilding so no input
//     recurses deeper), then must pass ValidateTree, be canonical (Canonicalize leaves it as it is)
//     and have exactly `terms` as its tokens (TreeTerms);
//   - a SearchResponse carries at most kMaxK hits;
//   - a FetchRequest (minor 2) asks for 1..kMaxK docs; its highlight terms and phrases follow the
//     limits of a SearchRequest's terms (<= kMaxTerms each, 1..kMaxTermBytes bytes a token,
//     phrases of 2..kMaxPhraseTokens tokens); a FetchResponse carries at most kMaxK docs, each
//     with at most kMaxHighlightFragments fragments.
// When decoding fails after the envelope parsed, DecodeEnvelope reports the message kind and
// request id it could still read, so the receiver can answer with an error for that request.
// Thread-safety: free functions over values; reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/query.hpp"
#include "core/query_tree.hpp"
#include "core/status.hpp"

namespace search {

inline constexpr uint16_t kProtocolMajor = 1;  // = search.capnp protocolMajor
inline constexpr uint16_t kProtocolMinor = 3;  // = search.capnp protocolMinor
// The first minor version with query trees and counts: a reply in an older envelope to a request
// with a tree or a count comes from a node that ignored them (search.capnp).
inline constexpr uint16_t kMinorQueryTrees = 1;
// The first minor version with the fetch phase (FetchRequest, FetchResponse).
inline constexpr uint16_t kMinorFetch = 2;
// The first minor version whose nodes take a message as one frame, without the empty delimiter
// frame before it, and answer it in one frame (a delimited request still gets a delimited reply).
inline constexpr uint16_t kMinorOneFrame = 3;
inline constexpr size_t kMaxHighlightFragments = 16;
inline constexpr size_t kMaxFrameBytes = size_t{16} << 20;
inline constexpr uint64_t kTraversalLimitWords = uint64_t{8} << 20;
inline constexpr int kNestingLimit = 16;
inline constexpr size_t kMaxTerms = 1024;
inline constexpr size_t kMaxTermBytes = 1024;

// SearchRequest.flags bits.
inline constexpr uint32_t kFlagIncludeStats = 1u << 0;
inline constexpr uint32_t kFlagForceCpu = 1u << 1;
inline constexpr uint32_t kFlagForceGpu = 1u << 2;
// andor split (with mode kAnd): the node runs AND and, when it has fewer than k AND hits, OR too,
// answering both
// (SearchResponseMsg::or_hits); the integrator picks on the merged AND hits (exact, one round trip).
inline constexpr uint32_t kFlagAndOrSplit = 1u << 3;

// Processor and ProcessorName: core/query.hpp.

struct SearchRequestMsg {
  uint64_t request_id = 0;
  std::vector<std::string> terms;  // canonical: analyzed, unique, ascending (with a tree: TreeTerms)
  QueryMode mode = QueryMode::kAnd;
  uint32_t k = 10;  // 1..kMaxK; 0..kMaxK with count
  int64_t deadline_unix_micros = 0;  // absolute wall clock; 0 = none
  uint32_t flags = 0;
  std::shared_ptr<const QueryNode> tree;  // the canonical tree; null: the bag of words
  bool count = false;                     // also count the matches exactly
  // Compares the trees' values, not their pointers.
  bool operator==(const SearchRequestMsg& o) const;
};

// The request's query as the engines take it (Query: terms, mode, k, tree, count).
Query ToQuery(const SearchRequestMsg& msg);

struct HitMsg {
  uint32_t doc = 0;  // global docID
  float score = 0.0f;
  std::string external_id;
  bool operator==(const HitMsg&) const = default;
};

struct ExecStatsMsg {
  Processor processor = Processor::kCpu;
  uint64_t blocks_decoded = 0;
  uint64_t postings_decoded = 0;
  uint64_t postings_scored = 0;
  uint64_t queue_micros = 0;
  uint64_t run_micros = 0;
  bool operator==(const ExecStatsMsg&) const = default;
};

struct SearchResponseMsg {
  uint64_t request_id = 0;
  uint32_t shard_id = 0;
  Status status;              // OK, or the error (then hits is empty)
  std::vector<HitMsg> hits;   // best first, at most k
  ExecStatsMsg stats;
  uint32_t doc_begin = 0, doc_end = 0;
  std::vector<HitMsg> or_hits;  // andor split: the OR top-k when has_or_hits
  bool has_or_hits = false;
  bool has_total = false;  // the request asked for a count (status OK)
  uint64_t total = 0;      // then: this shard's matching documents
  uint64_t or_total = 0;   // and with has_or_hits: the OR query's
};

struct PingMsg {
  uint64_t request_id = 0;
  bool operator==(const PingMsg&) const = default;
};

struct ShardHealthMsg {
  uint32_t shard_id = 0;
  uint32_t num_shards = 0;
  uint32_t doc_begin = 0, doc_end = 0;
  uint64_t num_docs_global = 0;
  std::string state;  // "serving", "draining", "degraded: <reason>"
  uint32_t in_flight = 0;
  uint32_t queued = 0;
  bool gpu = false;
  std::string analyzer_json;
  uint32_t index_format_version = 0;
  bool has_sources = false;  // minor 2: the shard stores its documents' sources
  bool operator==(const ShardHealthMsg&) const = default;
};

struct PongMsg {
  uint64_t request_id = 0;
  ShardHealthMsg health;
  Status status;
};

// The fetch phase (minor 2): the stored sources and highlight fragments of some of a shard's docs.
struct FetchRequestMsg {
  uint64_t request_id = 0;
  int64_t deadline_unix_micros = 0;  // absolute wall clock; 0 = none
  std::vector<uint32_t> docs;        // global docIDs of the shard, 1..kMaxK, any order
  bool source = false;               // send the stored sources
  bool highlight = false;            // send highlight fragments of "contents"
  std::vector<std::string> highlight_terms;                 // analyzed (HighlightTerms::terms)
  std::vector<std::vector<std::string>> highlight_phrases;  // analyzed (HighlightTerms::phrases)
  bool operator==(const FetchRequestMsg&) const = default;
};

struct FetchedDocMsg {
  uint32_t doc = 0;
  bool has_source = false;  // false: the shard stores no sources ("not stored")
  std::string source;       // with has_source and the request's source: the JSON object, byte for byte
  std::vector<std::string> highlights;  // best first
  bool omitted = false;  // source and highlights left out: the answer would pass the frame limit
  bool operator==(const FetchedDocMsg&) const = default;
};

struct FetchResponseMsg {
  uint64_t request_id = 0;
  uint32_t shard_id = 0;
  Status status;                     // OK, or the error (then docs is empty)
  std::vector<FetchedDocMsg> docs;   // one per requested doc, in the request's order
};

enum class MessageKind : uint8_t {
  kUnknown = 0,
  kSearchRequest,
  kSearchResponse,
  kPing,
  kPong,
  kFetchRequest,
  kFetchResponse
};
std::string_view MessageKindName(MessageKind kind);

struct EnvelopeMsg {
  uint16_t major = kProtocolMajor;  // what the sender speaks; tests set older versions
  uint16_t minor = kProtocolMinor;
  std::variant<SearchRequestMsg, SearchResponseMsg, PingMsg, PongMsg, FetchRequestMsg, FetchResponseMsg> body;
  MessageKind kind() const { return static_cast<MessageKind>(body.index() + 1); }
};

// What a failed decode could still read, for addressing an error reply.
struct RecoveredHeader {
  MessageKind kind = MessageKind::kUnknown;
  std::optional<uint64_t> request_id;
  uint16_t major = 0;
};

// Frames. Encoding never fails for valid structs (it does not validate: tests build bad ones).
std::string EncodeEnvelope(const EnvelopeMsg& msg);
std::string EncodeSearchRequest(const SearchRequestMsg& msg);
std::string EncodeSearchResponse(const SearchResponseMsg& msg);
std::string EncodePing(const PingMsg& msg);
std::string EncodePong(const PongMsg& msg);
std::string EncodeFetchRequest(const FetchRequestMsg& msg);
std::string EncodeFetchResponse(const FetchResponseMsg& msg);

// Decodes and validates one frame (rules above). InvalidArgument on any problem; `recovered`, when
// given, is filled with whatever header fields could be read (also on success).
Result<EnvelopeMsg> DecodeEnvelope(std::span<const std::byte> frame, RecoveredHeader* recovered = nullptr);
inline Result<EnvelopeMsg> DecodeEnvelope(std::string_view frame, RecoveredHeader* recovered = nullptr) {
  return DecodeEnvelope(std::as_bytes(std::span<const char>(frame.data(), frame.size())), recovered);
}

// Checks a request's fields as DecodeEnvelope does (terms, k, mode, tree).
Status ValidateSearchRequest(const SearchRequestMsg& msg);
// Checks a fetch request's fields as DecodeEnvelope does (docs, highlight terms and phrases).
Status ValidateFetchRequest(const FetchRequestMsg& msg);

}  // namespace search
