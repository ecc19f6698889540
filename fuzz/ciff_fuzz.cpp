// Fuzz target: the CIFF reader (tools/searchctl/scale/ciff_format.hpp) on arbitrary bytes, walked
// the way ImportCiff's validation pass walks a file (scale/import_ciff.cpp): the delimited Header,
// num_postings_lists PostingsLists, then num_docs DocRecords. Every parser must return OK or
// Corruption and never read outside the bytes (ASan); what parses must keep the documented
// promises (docIDs strictly increasing and below num_docs, tf >= 1, the count-only pass agreeing
// with the full one) and round-trip through the writers: Append* then parse gives the same values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "fuzz_check.hpp"
#include "scale/ciff_format.hpp"

namespace {

using namespace search;  // NOLINT: a fuzz target over one API

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

void CheckError(const Status& s) {
  FUZZ_CHECK_MSG(s.code() == StatusCode::kCorruption, s.ToString());
  FUZZ_CHECK(s.message().rfind("CIFF ", 0) == 0);
}

bool SameDouble(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b) && std::memcmp(&a, &b, sizeof(double)) == 0);
}

// Reads one delimited message of `file` at *pos; checks the span.
Result<CiffSpan> Delimited(std::span<const uint8_t> file, uint64_t* pos, std::string_view what) {
  const uint64_t at = *pos;
  auto body = ReadCiffDelimited(file, pos, what);
  if (!body.ok()) {
    CheckError(body.status());
    FUZZ_CHECK(*pos == at);
    return body;
  }
  FUZZ_CHECK(at < body->begin && body->begin <= body->end && body->end <= file.size() && *pos == body->end);
  return body;
}

void CheckHeaderRoundTrip(const CiffHeader& h) {
  std::string out;
  AppendCiffHeader(&out, h);
  uint64_t pos = 0;
  auto span = ReadCiffDelimited(Bytes(out), &pos, "Header");
  FUZZ_CHECK(span.ok() && pos == out.size());
  auto back = ParseCiffHeader(Bytes(out), *span);
  FUZZ_CHECK_MSG(back.ok(), back.status().ToString());
  FUZZ_CHECK(back->version == h.version && back->num_postings_lists == h.num_postings_lists &&
             back->num_docs == h.num_docs && back->total_postings_lists == h.total_postings_lists &&
             back->total_docs == h.total_docs && back->total_terms_in_collection == h.total_terms_in_collection &&
             SameDouble(back->average_doclength, h.average_doclength) && back->description == h.description);
}

// Returns false when the list is refused (the importer stops there).
bool CheckPostingsList(std::span<const uint8_t> file, CiffSpan span, uint64_t num_docs) {
  std::string_view term;
  uint64_t count = 0;
  const Status counted = ParseCiffPostingsList(file, span, num_docs, &term, nullptr, nullptr, &count);
  std::string_view term2;
  std::vector<uint32_t> docs, tfs;
  uint64_t count2 = 0;
  const Status full = ParseCiffPostingsList(file, span, num_docs, &term2, &docs, &tfs, &count2);
  FUZZ_CHECK(counted.ok() == full.ok());
  if (!full.ok()) {
    CheckError(full);
    FUZZ_CHECK(counted.message() == full.message());
    return false;
  }
  FUZZ_CHECK(count == count2 && term == term2 && docs.size() == count && tfs.size() == count);
  FUZZ_CHECK(term.data() == nullptr || term.empty() ||
             (reinterpret_cast<const uint8_t*>(term.data()) >= file.data() + span.begin &&
              reinterpret_cast<const uint8_t*>(term.data()) + term.size() <= file.data() + span.end));
  for (size_t i = 0; i < docs.size(); ++i) {
    FUZZ_CHECK(docs[i] < num_docs && tfs[i] >= 1);
    FUZZ_CHECK(i == 0 || docs[i] > docs[i - 1]);
  }
  // Written back canonically, the list reads the same.
  std::string out;
  AppendCiffPostingsList(&out, term, docs, tfs);
  uint64_t pos = 0;
  auto back_span = ReadCiffDelimited(Bytes(out), &pos, "PostingsList");
  FUZZ_CHECK(back_span.ok() && pos == out.size());
  std::string_view back_term;
  std::vector<uint32_t> back_docs, back_tfs;
  uint64_t back_count = 0;
  const Status back = ParseCiffPostingsList(Bytes(out), *back_span, num_docs, &back_term, &back_docs, &back_tfs, &back_count);
  FUZZ_CHECK_MSG(back.ok(), back.ToString());
  FUZZ_CHECK(back_term == term && back_docs == docs && back_tfs == tfs && back_count == count);
  return true;
}

bool CheckDocRecord(std::span<const uint8_t> file, CiffSpan span, uint64_t num_docs, std::unordered_set<uint32_t>* seen) {
  auto rec = ParseCiffDocRecord(file, span, num_docs);
  if (!rec.ok()) {
    CheckError(rec.status());
    return false;
  }
  FUZZ_CHECK(rec->docid < num_docs);
  std::string out;
  AppendCiffDocRecord(&out, rec->docid, rec->collection_docid, rec->doclength);
  uint64_t pos = 0;
  auto back_span = ReadCiffDelimited(Bytes(out), &pos, "DocRecord");
  FUZZ_CHECK(back_span.ok() && pos == out.size());
  auto back = ParseCiffDocRecord(Bytes(out), *back_span, num_docs);
  FUZZ_CHECK_MSG(back.ok(), back.status().ToString());
  FUZZ_CHECK(back->docid == rec->docid && back->collection_docid == rec->collection_docid &&
             back->doclength == rec->doclength);
  return seen->insert(rec->docid).second;  // the importer refuses a docid seen twice
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> file(data, size);
  uint64_t pos = 0;
  auto header_span = Delimited(file, &pos, "Header");
  if (!header_span.ok()) return 0;
  auto header = ParseCiffHeader(file, *header_span);
  if (!header.ok()) {
    CheckError(header.status());
    return 0;
  }
  CheckHeaderRoundTrip(*header);
  // ImportCiff refuses these before reading further.
  if (header->version != 1 || header->num_docs <= 0 || header->num_postings_lists < 0) return 0;
  const auto num_docs = static_cast<uint64_t>(header->num_docs);
  const auto num_lists = static_cast<uint64_t>(header->num_postings_lists);
  // Each message takes at least its one length byte, so the loops below end with the bytes.
  for (uint64_t i = 0; i < num_lists; ++i) {
    auto body = Delimited(file, &pos, "PostingsList");
    if (!body.ok() || !CheckPostingsList(file, *body, num_docs)) return 0;
  }
  std::unordered_set<uint32_t> seen;
  for (uint64_t j = 0; j < num_docs; ++j) {
    auto body = Delimited(file, &pos, "DocRecord");
    if (!body.ok() || !CheckDocRecord(file, *body, num_docs, &seen)) return 0;
  }
  FUZZ_CHECK(pos <= size);
  FUZZ_CHECK(seen.size() == num_docs);  // num_docs distinct docids below num_docs: each exactly once
  return 0;
}
