// CIFF wire format (ciff_format.hpp): a bounds-checked protobuf reader and a canonical writer.
#include "scale/ciff_format.hpp"

#include <cstring>
#include <limits>

namespace search {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };
constexpr size_t kMaxGroupDepth = 64;

const char* WireTypeName(uint32_t wt) {
  switch (wt) {
    case kVarint: return "varint";
    case kFixed64: return "fixed64";
    case kLengthDelimited: return "length-delimited";
    case kStartGroup: return "start-group";
    case kEndGroup: return "end-group";
    case kFixed32: return "fixed32";
  }
  return "invalid";
}

// A cursor over one message body [begin, end) of the file; errors name the message and the
// absolute byte offset.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> file, CiffSpan span, std::string_view what)
      : data_(file.data()), file_size_(file.size()), pos_(span.begin), end_(span.end), what_(what) {}

  bool done() const { return pos_ >= end_; }
  uint64_t pos() const { return pos_; }

  Status Error(uint64_t at, const std::string& reason) const {
    return Status::Corruption("CIFF " + std::string(what_) + " at byte " + std::to_string(at) + ": " + reason);
  }

  Status Varint(uint64_t* v) {
    const uint64_t start = pos_;
    uint64_t r = 0;
    for (int i = 0; i < 10; ++i) {
      if (pos_ >= end_) return Error(start, "truncated varint");
      const uint8_t b = data_[pos_++];
      if (i == 9 && b > 1) return Error(start, "varint overflows 64 bits");
      r |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *v = r;
        return Status::Ok();
      }
    }
    return Error(start, "varint longer than 10 bytes");
  }

  Status Tag(uint32_t* field, uint32_t* wire_type, uint64_t* at) {
    *at = pos_;
    uint64_t t = 0;
    SEARCH_RETURN_IF_ERROR(Varint(&t));
    if ((t >> 3) == 0 || (t >> 3) > 0x1fffffff) return Error(*at, "invalid field number " + std::to_string(t >> 3));
    if ((t & 7) > 5) return Error(*at, "invalid wire type " + std::to_string(t & 7));
    *field = static_cast<uint32_t>(t >> 3);
    *wire_type = static_cast<uint32_t>(t & 7);
    return Status::Ok();
  }

  // The body of a length-delimited field whose tag was just read.
  Status Length(CiffSpan* out) {
    const uint64_t at = pos_;
    uint64_t n = 0;
    SEARCH_RETURN_IF_ERROR(Varint(&n));
    if (n > end_ - pos_)
      return Error(at, "length " + std::to_string(n) + " runs past the end of the " +
                           (end_ == file_size_ ? std::string("file") : std::string("enclosing message")) + " (" +
                           std::to_string(end_ - pos_) + " bytes left)");
    out->begin = pos_;
    out->end = pos_ + n;
    pos_ += n;
    return Status::Ok();
  }

  Status Fixed(uint32_t bytes, uint64_t* v) {
    if (end_ - pos_ < bytes) return Error(pos_, "truncated fixed" + std::to_string(8 * bytes) + " value");
    uint64_t r = 0;
    for (uint32_t i = 0; i < bytes; ++i) r |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += bytes;
    *v = r;
    return Status::Ok();
  }

  // Skips the value of an unknown field (groups included, nested up to kMaxGroupDepth).
  Status Skip(uint32_t field, uint32_t wire_type, uint64_t at) {
    std::vector<uint32_t> open;
    for (;;) {
      uint64_t v = 0;
      CiffSpan s;
      switch (wire_type) {
        case kVarint: SEARCH_RETURN_IF_ERROR(Varint(&v)); break;
        case kFixed64: SEARCH_RETURN_IF_ERROR(Fixed(8, &v)); break;
        case kLengthDelimited: SEARCH_RETURN_IF_ERROR(Length(&s)); break;
        case kFixed32: SEARCH_RETURN_IF_ERROR(Fixed(4, &v)); break;
        case kStartGroup:
          if (open.size() == kMaxGroupDepth) return Error(at, "groups nested too deeply");
          open.push_back(field);
          break;
        case kEndGroup:
          if (open.empty() || open.back() != field) return Error(at, "unmatched end-group of field " + std::to_string(field));
          open.pop_back();
          break;
      }
      if (open.empty()) return Status::Ok();
      if (done()) return Error(pos_, "group of field " + std::to_string(open.back()) + " is not closed");
      SEARCH_RETURN_IF_ERROR(Tag(&field, &wire_type, &at));
    }
  }

  Status Expect(uint32_t wire_type, uint32_t want, uint32_t field, const char* name, uint64_t at) const {
    if (wire_type == want) return Status::Ok();
    return Error(at, "field " + std::to_string(field) + " (" + name + ") has wire type " + WireTypeName(wire_type) +
                         ", expected " + WireTypeName(want));
  }

  // A varint field holding an int32 (negative values are sign-extended to 64 bits).
  Status Int32(int64_t* out, const char* name, uint64_t at) {
    uint64_t v = 0;
    SEARCH_RETURN_IF_ERROR(Varint(&v));
    const auto s = static_cast<int64_t>(v);
    if (s < std::numeric_limits<int32_t>::min() || s > std::numeric_limits<int32_t>::max())
      return Error(at, std::string(name) + " " + std::to_string(s) + " is out of the int32 range");
    *out = s;
    return Status::Ok();
  }

  Status Int64(int64_t* out) {
    uint64_t v = 0;
    SEARCH_RETURN_IF_ERROR(Varint(&v));
    *out = static_cast<int64_t>(v);
    return Status::Ok();
  }

  std::string_view View(CiffSpan s) const {
    return {reinterpret_cast<const char*>(data_ + s.begin), static_cast<size_t>(s.end - s.begin)};
  }

 private:
  const uint8_t* data_;
  uint64_t file_size_, pos_, end_;
  std::string_view what_;
};

void AppendTag(std::string* out, uint32_t field, uint32_t wire_type) { AppendVarint(out, (uint64_t{field} << 3) | wire_type); }

void AppendVarintField(std::string* out, uint32_t field, uint64_t v) {
  if (v == 0) return;  // proto3: defaults are omitted
  AppendTag(out, field, kVarint);
  AppendVarint(out, v);
}

void AppendBytesField(std::string* out, uint32_t field, std::string_view bytes, bool keep_empty = false) {
  if (bytes.empty() && !keep_empty) return;
  AppendTag(out, field, kLengthDelimited);
  AppendVarint(out, bytes.size());
  out->append(bytes);
}

void AppendDelimited(std::string* out, const std::string& message) {
  AppendVarint(out, message.size());
  out->append(message);
}

}  // namespace

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

Result<CiffSpan> ReadCiffDelimited(std::span<const uint8_t> file, uint64_t* pos, std::string_view what) {
  Cursor c(file, CiffSpan{*pos, file.size()}, what);
  if (c.done()) return c.Error(*pos, "missing (the file ends here)");
  CiffSpan body;
  SEARCH_RETURN_IF_ERROR(c.Length(&body));
  *pos = body.end;
  return body;
}

Result<CiffHeader> ParseCiffHeader(std::span<const uint8_t> file, CiffSpan span) {
  Cursor c(file, span, "Header");
  CiffHeader h;
  h.version = 0;
  while (!c.done()) {
    uint32_t field = 0, wt = 0;
    uint64_t at = 0;
    SEARCH_RETURN_IF_ERROR(c.Tag(&field, &wt, &at));
    static const char* const kNames[] = {"", "version", "num_postings_lists", "num_docs", "total_postings_lists",
                                         "total_docs"};
    int64_t* const kInt32Fields[] = {nullptr, &h.version, &h.num_postings_lists, &h.num_docs, &h.total_postings_lists,
                                     &h.total_docs};
    if (field >= 1 && field <= 5) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kVarint, field, kNames[field], at));
      SEARCH_RETURN_IF_ERROR(c.Int32(kInt32Fields[field], kNames[field], at));
    } else if (field == 6) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kVarint, field, "total_terms_in_collection", at));
      SEARCH_RETURN_IF_ERROR(c.Int64(&h.total_terms_in_collection));
    } else if (field == 7) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kFixed64, field, "average_doclength", at));
      uint64_t bits = 0;
      SEARCH_RETURN_IF_ERROR(c.Fixed(8, &bits));
      std::memcpy(&h.average_doclength, &bits, sizeof(bits));
    } else if (field == 8) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kLengthDelimited, field, "description", at));
      CiffSpan s;
      SEARCH_RETURN_IF_ERROR(c.Length(&s));
      h.description = std::string(c.View(s));
    } else {
      SEARCH_RETURN_IF_ERROR(c.Skip(field, wt, at));
    }
  }
  return h;
}

Status ParseCiffPostingsList(std::span<const uint8_t> file, CiffSpan span, uint64_t num_docs, std::string_view* term,
                             std::vector<uint32_t>* docs, std::vector<uint32_t>* tfs, uint64_t* count) {
  Cursor c(file, span, "PostingsList");
  *term = {};
  bool have_df = false, have_cf = false;
  int64_t df = 0, cf = 0;
  uint64_t n = 0, tf_sum = 0;
  int64_t prev = -1;
  while (!c.done()) {
    uint32_t field = 0, wt = 0;
    uint64_t at = 0;
    SEARCH_RETURN_IF_ERROR(c.Tag(&field, &wt, &at));
    if (field == 1) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kLengthDelimited, field, "term", at));
      CiffSpan s;
      SEARCH_RETURN_IF_ERROR(c.Length(&s));
      *term = c.View(s);
    } else if (field == 2 || field == 3) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kVarint, field, field == 2 ? "df" : "cf", at));
      SEARCH_RETURN_IF_ERROR(c.Int64(field == 2 ? &df : &cf));
      (field == 2 ? have_df : have_cf) = true;
    } else if (field == 4) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kLengthDelimited, field, "postings", at));
      CiffSpan s;
      SEARCH_RETURN_IF_ERROR(c.Length(&s));
      Cursor p(file, s, "Posting");
      int64_t gap = 0, tf = 0;
      while (!p.done()) {
        uint32_t pf = 0, pwt = 0;
        uint64_t pat = 0;
        SEARCH_RETURN_IF_ERROR(p.Tag(&pf, &pwt, &pat));
        if (pf == 1 || pf == 2) {
          SEARCH_RETURN_IF_ERROR(p.Expect(pwt, kVarint, pf, pf == 1 ? "docid" : "tf", pat));
          SEARCH_RETURN_IF_ERROR(p.Int32(pf == 1 ? &gap : &tf, pf == 1 ? "docid" : "tf", pat));
        } else {
          SEARCH_RETURN_IF_ERROR(p.Skip(pf, pwt, pat));
        }
      }
      if (gap < 0) return p.Error(s.begin, "negative docid gap " + std::to_string(gap));
      if (prev >= 0 && gap == 0) return p.Error(s.begin, "docid gap 0 repeats docID " + std::to_string(prev));
      const int64_t doc = prev < 0 ? gap : prev + gap;
      if (static_cast<uint64_t>(doc) >= num_docs)
        return p.Error(s.begin, "docID " + std::to_string(doc) + " is not below num_docs " + std::to_string(num_docs));
      if (tf < 1) return p.Error(s.begin, "tf " + std::to_string(tf) + " (must be at least 1)");
      prev = doc;
      ++n;
      tf_sum += static_cast<uint64_t>(tf);
      if (docs != nullptr) docs->push_back(static_cast<uint32_t>(doc));
      if (tfs != nullptr) tfs->push_back(static_cast<uint32_t>(tf));
    } else {
      SEARCH_RETURN_IF_ERROR(c.Skip(field, wt, at));
    }
  }
  const std::string term_text = "term '" + std::string(term->substr(0, 64)) + "'";
  if ((have_df || n > 0) && df != static_cast<int64_t>(n))
    return c.Error(span.begin, term_text + ": df " + std::to_string(df) + " but " + std::to_string(n) + " postings");
  if ((have_cf || n > 0) && cf != static_cast<int64_t>(tf_sum))
    return c.Error(span.begin, term_text + ": cf " + std::to_string(cf) + " but the tfs sum to " + std::to_string(tf_sum));
  *count = n;
  return Status::Ok();
}

Result<CiffDocRecord> ParseCiffDocRecord(std::span<const uint8_t> file, CiffSpan span, uint64_t num_docs) {
  Cursor c(file, span, "DocRecord");
  CiffDocRecord r;
  int64_t docid = 0, length = 0;
  while (!c.done()) {
    uint32_t field = 0, wt = 0;
    uint64_t at = 0;
    SEARCH_RETURN_IF_ERROR(c.Tag(&field, &wt, &at));
    if (field == 1 || field == 3) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kVarint, field, field == 1 ? "docid" : "doclength", at));
      SEARCH_RETURN_IF_ERROR(c.Int32(field == 1 ? &docid : &length, field == 1 ? "docid" : "doclength", at));
    } else if (field == 2) {
      SEARCH_RETURN_IF_ERROR(c.Expect(wt, kLengthDelimited, field, "collection_docid", at));
      CiffSpan s;
      SEARCH_RETURN_IF_ERROR(c.Length(&s));
      r.collection_docid = c.View(s);
    } else {
      SEARCH_RETURN_IF_ERROR(c.Skip(field, wt, at));
    }
  }
  if (docid < 0 || static_cast<uint64_t>(docid) >= num_docs)
    return c.Error(span.begin, "docid " + std::to_string(docid) + " is not in [0, num_docs = " +
                                   std::to_string(num_docs) + ")");
  if (length < 0) return c.Error(span.begin, "negative doclength " + std::to_string(length));
  r.docid = static_cast<uint32_t>(docid);
  r.doclength = static_cast<uint32_t>(length);
  return r;
}

void AppendCiffHeader(std::string* out, const CiffHeader& h) {
  std::string m;
  AppendVarintField(&m, 1, static_cast<uint64_t>(h.version));
  AppendVarintField(&m, 2, static_cast<uint64_t>(h.num_postings_lists));
  AppendVarintField(&m, 3, static_cast<uint64_t>(h.num_docs));
  AppendVarintField(&m, 4, static_cast<uint64_t>(h.total_postings_lists));
  AppendVarintField(&m, 5, static_cast<uint64_t>(h.total_docs));
  AppendVarintField(&m, 6, static_cast<uint64_t>(h.total_terms_in_collection));
  if (h.average_doclength != 0) {
    AppendTag(&m, 7, kFixed64);
    uint64_t bits = 0;
    std::memcpy(&bits, &h.average_doclength, sizeof(bits));
    for (int i = 0; i < 8; ++i) m.push_back(static_cast<char>(bits >> (8 * i)));
  }
  AppendBytesField(&m, 8, h.description);
  AppendDelimited(out, m);
}

void AppendCiffPostingsList(std::string* out, std::string_view term, std::span<const uint32_t> docs,
                            std::span<const uint32_t> tfs, int64_t df, int64_t cf) {
  std::string m, p;
  AppendBytesField(&m, 1, term);
  uint64_t sum = 0;
  for (uint32_t tf : tfs) sum += tf;
  AppendVarintField(&m, 2, static_cast<uint64_t>(df >= 0 ? df : static_cast<int64_t>(docs.size())));
  AppendVarintField(&m, 3, static_cast<uint64_t>(cf >= 0 ? cf : static_cast<int64_t>(sum)));
  for (size_t i = 0; i < docs.size(); ++i) {
    p.clear();
    AppendVarintField(&p, 1, i == 0 ? docs[0] : docs[i] - docs[i - 1]);
    AppendVarintField(&p, 2, i < tfs.size() ? tfs[i] : 0);
    AppendBytesField(&m, 4, p, /*keep_empty=*/true);
  }
  AppendDelimited(out, m);
}

void AppendCiffDocRecord(std::string* out, uint32_t docid, std::string_view collection_docid, uint32_t doclength) {
  std::string m;
  AppendVarintField(&m, 1, docid);
  AppendBytesField(&m, 2, collection_docid);
  AppendVarintField(&m, 3, doclength);
  AppendDelimited(out, m);
}

}  // namespace search
