// The Common Index File Format (CIFF, github.com/osirrc/ciff, version 1), read and written by hand
// over the protobuf wire format, with no protobuf library:
//
//   file := delimited(Header) delimited(PostingsList) * num_postings_lists
//           delimited(DocRecord) * num_docs                      (and nothing after)
//   delimited(m) := varint(byte size of m) m
//   Header       { version = 1 (int32); num_postings_lists = 2 (int32); num_docs = 3 (int32);
//                  total_postings_lists = 4 (int32); total_docs = 5 (int32);
//                  total_terms_in_collection = 6 (int64); average_doclength = 7 (double);
//                  description = 8 (string) }
//   PostingsList { term = 1 (string); df = 2 (int64); cf = 3 (int64); repeated Posting postings = 4 }
//   Posting      { docid = 1 (int32, the gap to the previous posting's docid; the first is absolute);
//                  tf = 2 (int32) }
//   DocRecord    { docid = 1 (int32); collection_docid = 2 (string); doclength = 3 (int32) }
//
// proto3 rules apply: a field equal to 0 / "" may be absent (and the writer omits it), fields may
// come in any order, a repeated scalar field keeps its last value, unknown fields of every wire
// type (varint, fixed64, length-delimited, groups, fixed32) are skipped. Negative int32 values
// are 10-byte sign-extended varints.
//
// Every parser here is bounds-checked and returns Corruption("CIFF <what> at byte <offset>:
// <reason>") for malformed bytes: truncated or over-long varints, lengths past the end of the
// enclosing message, wrong wire types for known fields, values out of range, docIDs that do not
// increase or pass num_docs, df/cf that disagree with the postings. It never reads outside the
// given bytes.
// Thread-safety: pure functions over caller-owned bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search {

struct CiffHeader {
  int64_t version = 1;
  int64_t num_postings_lists = 0;
  int64_t num_docs = 0;
  int64_t total_postings_lists = 0;
  int64_t total_docs = 0;
  int64_t total_terms_in_collection = 0;
  double average_doclength = 0;
  std::string description;
};

struct CiffDocRecord {
  uint32_t docid = 0;
  std::string_view collection_docid;  // points into the parsed bytes
  uint32_t doclength = 0;
};

// A varint-delimited message: [begin, end) absolute offsets of its body. `pos` advances past it.
struct CiffSpan {
  uint64_t begin = 0, end = 0;
};
Result<CiffSpan> ReadCiffDelimited(std::span<const uint8_t> file, uint64_t* pos, std::string_view what);

// The message bodies at [span.begin, span.end) of `file` (offsets in errors are file offsets).
Result<CiffHeader> ParseCiffHeader(std::span<const uint8_t> file, CiffSpan span);
// Decodes the list: term (a view into file), absolute docIDs (checked strictly increasing and below
// num_docs) and tfs (>= 1); df and cf must match the postings. `count_only` skips filling docs/tfs
// (still validating everything).
Status ParseCiffPostingsList(std::span<const uint8_t> file, CiffSpan span, uint64_t num_docs, std::string_view* term,
                             std::vector<uint32_t>* docs, std::vector<uint32_t>* tfs, uint64_t* count);
Result<CiffDocRecord> ParseCiffDocRecord(std::span<const uint8_t> file, CiffSpan span, uint64_t num_docs);

// Writers (canonical proto3: zero fields omitted), each appending one delimited message.
void AppendCiffHeader(std::string* out, const CiffHeader& header);
// docs absolute and ascending (written as gaps); df = docs.size() and cf = sum(tfs) unless given.
void AppendCiffPostingsList(std::string* out, std::string_view term, std::span<const uint32_t> docs,
                            std::span<const uint32_t> tfs, int64_t df = -1, int64_t cf = -1);
void AppendCiffDocRecord(std::string* out, uint32_t docid, std::string_view collection_docid, uint32_t doclength);
// Low-level, for tests that hand-craft odd messages.
void AppendVarint(std::string* out, uint64_t v);

}  // namespace search
