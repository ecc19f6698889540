// PostingAccumulator (posting_accumulator.hpp).
#include "indexer/posting_accumulator.hpp"

#include <algorithm>

#include "indexer/run_file.hpp"

namespace search {

namespace {
// Hash node, bucket pointer, two std::string headers and the counters: a rough per-term cost.
constexpr size_t kEntryOverhead = 96;
}  // namespace

void PostingAccumulator::AddDoc(uint32_t doc, const std::vector<std::pair<std::string, uint32_t>>& term_tfs) {
  for (const auto& [term, tf] : term_tfs) {
    auto it = terms_.find(std::string_view(term));
    if (it == terms_.end()) {
      it = terms_.emplace(term, Entry{}).first;
      memory_ += kEntryOverhead + (term.size() > 15 ? term.size() + 1 : 0);
    }
    Entry& e = it->second;
    const size_t before = e.payload.capacity();
    PutVarint(&e.payload, e.count == 0 ? doc : doc - e.last_doc);
    PutVarint(&e.payload, tf);
    memory_ += e.payload.capacity() - before;
    e.last_doc = doc;
    ++e.count;
    ++postings_;
  }
}

Status PostingAccumulator::Spill(const std::string& path) {
  std::vector<std::pair<std::string_view, const Entry*>> sorted;
  sorted.reserve(terms_.size());
  for (const auto& [term, entry] : terms_) sorted.emplace_back(term, &entry);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  SEARCH_ASSIGN_OR_RETURN(auto writer, RunWriter::Create(path));
  for (const auto& [term, entry] : sorted) SEARCH_RETURN_IF_ERROR(writer->Add(term, entry->count, entry->payload));
  SEARCH_RETURN_IF_ERROR(writer->Finish());
  sorted.clear();
  terms_ = {};
  memory_ = 0;
  postings_ = 0;
  return Status::Ok();
}

}  // namespace search
