// PostingAccumulator: one parser thread's in-memory inverted index (term -> postings of the
// documents it was given), kept compact as varint bytes in the run format (run_file.hpp), and
// spilled as one sorted run when it outgrows its memory share. Terms get small integer ids
// (TermId) so a document's term frequencies are counted by sorting integers, not strings;
// ids are valid until the next Spill.
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
  // The id of `term`, added to the dictionary if new. REQUIRES: term not empty.
  uint32_t TermId(std::string_view term);
  // One document's (term id, tf) pairs, each id once, any order; with `positions`, the terms'
  // positions in the same order (tf of them per pair, ascending), recorded in the run payloads.
  // REQUIRES: doc larger than every doc added before; ids from TermId since the last Spill; every
  // document of one accumulator with positions, or none.
  void AddDoc(uint32_t doc, const std::vector<std::pair<uint32_t, uint32_t>>& id_tfs,
              const uint32_t* positions = nullptr);
  // Convenience: (term, tf) pairs.
  void AddDoc(uint32_t doc, const std::vector<std::pair<std::string, uint32_t>>& term_tfs);

  bool empty() const { return postings_ == 0; }
  // Approximate heap bytes held (dictionary, payloads and per-entry overhead).
  size_t memory_bytes() const { return memory_; }
  uint64_t postings() const { return postings_; }

  // Writes every term with postings (ascending) to a new run file at `path` and empties the
  // accumulator, dictionary included.
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
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;
  std::vector<std::string_view> terms_;  // by id, pointing into ids_' keys (stable in a node map)
  std::vector<Entry> entries_;           // by id
  size_t memory_ = 0;
  uint64_t postings_ = 0;
};

}  // namespace search
