// Sorted runs: the index builder's spill files. A run holds terms in ascending byte order, each
// with its postings in ascending docID order, as
//   record := varint(term_len > 0) term varint(count) varint(payload_len) payload
//   payload := count x (varint(doc - previous doc of the record, the first doc as is), varint(tf)
//                       [, tf x varint(position delta)])
// The position deltas are present in every record of a build with positions and in none
// otherwise (the reader is told which): a posting's first position as is, then gap - 1.
// and ends with varint(0) (no term is empty), so a truncated run is detected.
// RunReader streams a run back; RunMerger walks many runs term by term (a heap over cursors).
// Thread-safety: none of these types are thread-safe; one thread per object.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search {

struct Posting {
  uint32_t doc = 0;
  uint32_t tf = 0;
  uint64_t pos = 0;  // with positions: index of its first position in the positions vector beside
};

inline void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Decodes a varint from [*p, end); false on overrun or more than 10 bytes.
inline bool GetVarint(const char** p, const char* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && *p < end; shift += 7) {
    const auto byte = static_cast<uint8_t>(*(*p)++);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

// Decodes a record payload (see above) and appends its postings; with `positions`, the payload has
// positions, which are appended there (each posting's `pos` pointing at its first). Corruption on
// malformed bytes.
Status DecodePostings(std::string_view payload, uint32_t count, std::vector<Posting>* out,
                      std::vector<uint32_t>* positions = nullptr);
// Appends one posting to a payload; `positions` (tf of them, ascending) when the run has positions.
void EncodePosting(std::string* payload, uint32_t doc_delta, uint32_t tf, const uint32_t* positions);

class RunWriter {
 public:
  static Result<std::unique_ptr<RunWriter>> Create(const std::string& path);
  ~RunWriter();
  // REQUIRES: terms strictly ascending, non-empty; payload encodes `count` postings.
  Status Add(std::string_view term, uint32_t count, std::string_view payload);
  // Adds postings (ascending docIDs), encoding them, with their positions (Posting::pos indexes
  // `positions`) when given.
  Status AddPostings(std::string_view term, const std::vector<Posting>& postings,
                     const std::vector<uint32_t>* positions = nullptr);
  // Writes the end marker and closes the file.
  Status Finish();
  uint64_t bytes_written() const { return bytes_; }

 private:
  RunWriter() = default;
  Status Write(const void* data, size_t n);
  std::string path_;
  FILE* file_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  std::string scratch_;
  uint64_t bytes_ = 0;
};

class RunReader {
 public:
  static Result<std::unique_ptr<RunReader>> Open(const std::string& path);
  ~RunReader();
  // Moves to the next record; false after the last. Corruption on malformed or truncated files.
  Result<bool> Next();
  const std::string& term() const { return term_; }
  uint32_t count() const { return count_; }
  const std::string& payload() const { return payload_; }
  uint64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }

 private:
  RunReader() = default;
  Result<uint64_t> ReadVarint();
  Status ReadExact(std::string* out, size_t n);
  std::string path_;
  FILE* file_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  std::string term_, payload_;
  uint32_t count_ = 0;
  uint64_t bytes_read_ = 0;
};

// Walks runs term by term. Each run's records for a term hold disjoint docIDs.
class RunMerger {
 public:
  // Takes ownership; every reader must be freshly opened.
  static Result<std::unique_ptr<RunMerger>> Create(std::vector<std::unique_ptr<RunReader>> runs);
  // The next term (ascending) and its postings from every run, as `segments` of `postings`, each
  // sorted by docID: segment i is postings[starts[i], starts[i + 1]) (starts ends with the size).
  // With `positions` (runs with positions), the term's positions are decoded there (cleared first),
  // each posting's `pos` pointing at its first. Returns false after the last term.
  Result<bool> Next(std::string* term, std::vector<Posting>* postings, std::vector<size_t>* starts,
                    std::vector<uint32_t>* positions = nullptr);
  // Total bytes read from all runs so far.
  uint64_t bytes_read() const;

 private:
  RunMerger() = default;
  std::vector<std::unique_ptr<RunReader>> runs_;
  std::vector<size_t> heap_;  // indexes of runs positioned on a record; min-heap by term
};

// Sorts segmented postings (see RunMerger::Next) into one docID-ascending sequence.
// Corruption when a docID appears twice.
Status MergeSegments(std::vector<Posting>* postings, const std::vector<size_t>& starts);

}  // namespace search
