// PostingAccumulator: one parser thread's in-memory inverted index (term -> postings of the
// documents it was given), kept compact as varint bytes in the run format (run_file.hpp), and
// spilled as one sorted run when it outgrows its memory share.
// Thread-safety: not thread-safe; each parser thread owns one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.hpp"

namespace search {

class PostingAccumulator {
 public:
  // One document's terms with their frequencies (any order, each term once).
  // REQUIRES: doc larger than every doc added before.
  void AddDoc(uint32_t doc, const std::vector<std::pair<std::string, uint32_t>>& term_tfs);

  bool empty() const { return terms_.empty(); }
  // Approximate heap bytes held (keys, payloads and per-entry overhead).
  size_t memory_bytes() const { return memory_; }
  uint64_t postings() const { return postings_; }

  // Writes every term (ascending) to a new run file at `path` and empties the accumulator.
  Status Spill(const std::string& path);

 private:
  struct Entry {
    std::string payload;  // run-format postings
    uint32_t last_doc = 0;
    uint32_t count = 0;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Entry, Hash, std::equal_to<>> terms_;
  size_t memory_ = 0;
  uint64_t postings_ = 0;
};

}  // namespace search
