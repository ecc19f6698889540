// Sorted run files (run_file.hpp).
#include "indexer/run_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace search {

namespace {
constexpr size_t kIoBuffer = size_t{1} << 20;
constexpr uint64_t kMaxTermBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 40;

std::string ErrnoText() {
  return std::strerror(errno);
}

bool HeapAfter(const std::vector<std::unique_ptr<RunReader>>& runs, size_t a, size_t b) {
  // std heap functions keep the "largest" on top; we want the smallest term (then lowest run).
  const int c = runs[a]->term().compare(runs[b]->term());
  return c > 0 || (c == 0 && a > b);
}
}  // namespace

namespace {
// Writes v as a varint at p (at most 5 bytes); returns the end.
inline char* PutVarint32(char* p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}
}  // namespace

void EncodePosting(std::string* payload, uint32_t doc_delta, uint32_t tf, const uint32_t* positions) {
  // Varints go to a stack buffer and are appended in pieces: one append per 64 values, not one
  // push_back per byte (positions make this the accumulators' hottest write).
  constexpr uint32_t kPiece = 64;
  char buf[5 * (kPiece + 2)];
  char* p = PutVarint32(buf, doc_delta);
  p = PutVarint32(p, tf);
  if (positions != nullptr) {
    for (uint32_t k = 0; k < tf; ++k) {
      p = PutVarint32(p, k == 0 ? positions[0] : positions[k] - positions[k - 1] - 1);
      if ((k + 1) % kPiece == 0) {
        payload->append(buf, static_cast<size_t>(p - buf));
        p = buf;
      }
    }
  }
  payload->append(buf, static_cast<size_t>(p - buf));
}

Status DecodePostings(std::string_view payload, uint32_t count, std::vector<Posting>* out,
                      std::vector<uint32_t>* positions) {
  const char* p = payload.data();
  const char* end = p + payload.size();
  uint64_t doc = 0;
  out->reserve(out->size() + count);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t delta, tf;
    if (!GetVarint(&p, end, &delta) || !GetVarint(&p, end, &tf))
      return Status::Corruption("run payload ends after " + std::to_string(i) + " of " + std::to_string(count) +
                                " postings");
    doc = (i == 0) ? delta : doc + delta;
    if ((i > 0 && delta == 0) || doc > UINT32_MAX || tf == 0 || tf > UINT32_MAX)
      return Status::Corruption("run payload holds an invalid posting");
    out->push_back(Posting{static_cast<uint32_t>(doc), static_cast<uint32_t>(tf), 0});
    if (positions == nullptr) continue;
    // Each position takes at least one byte: a bogus tf cannot make us allocate past the payload.
    if (tf > static_cast<uint64_t>(end - p)) return Status::Corruption("run payload ends inside a posting's positions");
    out->back().pos = positions->size();
    uint64_t pos = 0;
    for (uint64_t k = 0; k < tf; ++k) {
      uint64_t d;
      if (!GetVarint(&p, end, &d)) return Status::Corruption("run payload ends inside a posting's positions");
      pos = k == 0 ? d : pos + d + 1;
      if (pos > UINT32_MAX) return Status::Corruption("run payload holds a position above 2^32 - 1");
      positions->push_back(static_cast<uint32_t>(pos));
    }
  }
  if (p != end) return Status::Corruption("run payload has trailing bytes");
  return Status::Ok();
}

// ---- RunWriter ----

Result<std::unique_ptr<RunWriter>> RunWriter::Create(const std::string& path) {
  std::unique_ptr<RunWriter> w(new RunWriter());
  w->path_ = path;
  w->file_ = std::fopen(path.c_str(), "wbx");
  if (w->file_ == nullptr) return Status::IOError("create run file " + path + ": " + ErrnoText());
  w->buffer_.reset(new char[kIoBuffer]);
  std::setvbuf(w->file_, w->buffer_.get(), _IOFBF, kIoBuffer);
  return w;
}

RunWriter::~RunWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Status RunWriter::Write(const void* data, size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, file_) != n) return Status::IOError("write " + path_ + ": " + ErrnoText());
  bytes_ += n;
  return Status::Ok();
}

Status RunWriter::Add(std::string_view term, uint32_t count, std::string_view payload) {
  if (file_ == nullptr) return Status::InvalidArgument("run " + path_ + " is finished");
  scratch_.clear();
  PutVarint(&scratch_, term.size());
  scratch_.append(term);
  PutVarint(&scratch_, count);
  PutVarint(&scratch_, payload.size());
  SEARCH_RETURN_IF_ERROR(Write(scratch_.data(), scratch_.size()));
  return Write(payload.data(), payload.size());
}

Status RunWriter::AddPostings(std::string_view term, const std::vector<Posting>& postings,
                              const std::vector<uint32_t>* positions) {
  std::string payload;
  payload.reserve(postings.size() * 3);
  uint32_t prev = 0;
  for (size_t i = 0; i < postings.size(); ++i) {
    EncodePosting(&payload, i == 0 ? postings[i].doc : postings[i].doc - prev, postings[i].tf,
                  positions == nullptr ? nullptr : positions->data() + postings[i].pos);
    prev = postings[i].doc;
  }
  return Add(term, static_cast<uint32_t>(postings.size()), payload);
}

Status RunWriter::Finish() {
  if (file_ == nullptr) return Status::InvalidArgument("run " + path_ + " is finished");
  const char end = 0;
  Status s = Write(&end, 1);
  if (s.ok() && std::fflush(file_) != 0) s = Status::IOError("write " + path_ + ": " + ErrnoText());
  if (std::fclose(file_) != 0 && s.ok()) s = Status::IOError("close " + path_ + ": " + ErrnoText());
  file_ = nullptr;
  return s;
}

// ---- RunReader ----

Result<std::unique_ptr<RunReader>> RunReader::Open(const std::string& path) {
  std::unique_ptr<RunReader> r(new RunReader());
  r->path_ = path;
  r->file_ = std::fopen(path.c_str(), "rb");
  if (r->file_ == nullptr) return Status::IOError("open run file " + path + ": " + ErrnoText());
  r->buffer_.reset(new char[kIoBuffer]);
  std::setvbuf(r->file_, r->buffer_.get(), _IOFBF, kIoBuffer);
  return r;
}

RunReader::~RunReader() {
  if (file_ != nullptr) std::fclose(file_);
}

Result<uint64_t> RunReader::ReadVarint() {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63; shift += 7) {
    const int c = getc_unlocked(file_);
    if (c == EOF) return Status::Corruption("run file " + path_ + " is truncated");
    ++bytes_read_;
    result |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) return result;
  }
  return Status::Corruption("run file " + path_ + " holds an overlong varint");
}

Status RunReader::ReadExact(std::string* out, size_t n) {
  out->resize(n);
  if (n != 0 && std::fread(out->data(), 1, n, file_) != n)
    return Status::Corruption("run file " + path_ + " is truncated");
  bytes_read_ += n;
  return Status::Ok();
}

Result<bool> RunReader::Next() {
  if (file_ == nullptr) return false;
  SEARCH_ASSIGN_OR_RETURN(uint64_t term_len, ReadVarint());
  if (term_len == 0) {
    std::fclose(file_);
    file_ = nullptr;
    term_.clear();
    payload_.clear();
    return false;
  }
  if (term_len > kMaxTermBytes) return Status::Corruption("run file " + path_ + " holds an oversized term");
  std::string prev = std::move(term_);
  SEARCH_RETURN_IF_ERROR(ReadExact(&term_, term_len));
  if (!prev.empty() && term_ <= prev) return Status::Corruption("run file " + path_ + " is not sorted by term");
  SEARCH_ASSIGN_OR_RETURN(uint64_t count, ReadVarint());
  SEARCH_ASSIGN_OR_RETURN(uint64_t payload_len, ReadVarint());
  if (count == 0 || count > UINT32_MAX || payload_len > kMaxPayloadBytes)
    return Status::Corruption("run file " + path_ + " holds an invalid record");
  count_ = static_cast<uint32_t>(count);
  SEARCH_RETURN_IF_ERROR(ReadExact(&payload_, payload_len));
  return true;
}

// ---- RunMerger ----

Result<std::unique_ptr<RunMerger>> RunMerger::Create(std::vector<std::unique_ptr<RunReader>> runs) {
  std::unique_ptr<RunMerger> m(new RunMerger());
  m->runs_ = std::move(runs);
  for (size_t i = 0; i < m->runs_.size(); ++i) {
    SEARCH_ASSIGN_OR_RETURN(bool has, m->runs_[i]->Next());
    if (has) m->heap_.push_back(i);
  }
  auto after = [&m](size_t a, size_t b) { return HeapAfter(m->runs_, a, b); };
  std::make_heap(m->heap_.begin(), m->heap_.end(), after);
  return m;
}

Result<bool> RunMerger::Next(std::string* term, std::vector<Posting>* postings, std::vector<size_t>* starts,
                             std::vector<uint32_t>* positions) {
  postings->clear();
  starts->clear();
  if (positions != nullptr) positions->clear();
  if (heap_.empty()) return false;
  auto after = [this](size_t a, size_t b) { return HeapAfter(runs_, a, b); };
  *term = runs_[heap_.front()]->term();
  while (!heap_.empty() && runs_[heap_.front()]->term() == *term) {
    std::pop_heap(heap_.begin(), heap_.end(), after);
    const size_t i = heap_.back();
    RunReader& run = *runs_[i];
    starts->push_back(postings->size());
    SEARCH_RETURN_IF_ERROR(
        DecodePostings(run.payload(), run.count(), postings, positions).WithContext("run " + run.path()));
    SEARCH_ASSIGN_OR_RETURN(bool has, run.Next());
    if (has) {
      std::push_heap(heap_.begin(), heap_.end(), after);
    } else {
      heap_.pop_back();
    }
  }
  starts->push_back(postings->size());
  return true;
}

uint64_t RunMerger::bytes_read() const {
  uint64_t n = 0;
  for (const auto& r : runs_) n += r->bytes_read();
  return n;
}

Status MergeSegments(std::vector<Posting>* postings, const std::vector<size_t>& starts) {
  auto by_doc = [](const Posting& a, const Posting& b) { return a.doc < b.doc; };
  std::vector<size_t> bounds = starts;  // segment boundaries, merged pairwise bottom-up
  while (bounds.size() > 2) {
    std::vector<size_t> next;
    next.reserve(bounds.size() / 2 + 2);
    size_t i = 0;
    for (; i + 2 < bounds.size(); i += 2) {
      next.push_back(bounds[i]);
      std::inplace_merge(postings->begin() + static_cast<std::ptrdiff_t>(bounds[i]),
                         postings->begin() + static_cast<std::ptrdiff_t>(bounds[i + 1]),
                         postings->begin() + static_cast<std::ptrdiff_t>(bounds[i + 2]), by_doc);
    }
    for (; i < bounds.size(); ++i) next.push_back(bounds[i]);
    bounds.swap(next);
  }
  for (size_t i = 1; i < postings->size(); ++i) {
    if ((*postings)[i - 1].doc >= (*postings)[i].doc)
      return Status::Corruption("document " + std::to_string((*postings)[i].doc) + " appears twice in a term's runs");
  }
  return Status::Ok();
}

}  // namespace search
