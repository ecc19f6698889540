// PostingAccumulator (posting_accumulator.hpp).
#include "indexer/posting_accumulator.hpp"

#include <algorithm>
#include <numeric>

#include "indexer/run_file.hpp"

namespace search {

namespace {
// Hash node and bucket, the key's string header, the id and view, the Entry: a rough per-term cost.
constexpr size_t kEntryOverhead = 128;
}  // namespace

uint32_t PostingAccumulator::TermId(std::string_view term) {
  auto it = ids_.find(term);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(entries_.size());
  it = ids_.emplace(std::string(term), id).first;
  terms_.push_back(it->first);
  entries_.emplace_back();
  memory_ += kEntryOverhead + (term.size() > 15 ? term.size() + 1 : 0);
  return id;
}

void PostingAccumulator::AddDoc(uint32_t doc, const std::vector<std::pair<uint32_t, uint32_t>>& id_tfs,
                                const uint32_t* positions) {
  for (const auto& [id, tf] : id_tfs) {
    Entry& e = entries_[id];
    const size_t before = e.payload.capacity();
    EncodePosting(&e.payload, e.count == 0 ? doc : doc - e.last_doc, tf, positions);
    if (positions != nullptr) positions += tf;
    memory_ += e.payload.capacity() - before;
    e.last_doc = doc;
    ++e.count;
    ++postings_;
  }
}

void PostingAccumulator::AddDoc(uint32_t doc, const std::vector<std::pair<std::string, uint32_t>>& term_tfs) {
  std::vector<std::pair<uint32_t, uint32_t>> id_tfs;
  id_tfs.reserve(term_tfs.size());
  for (const auto& [term, tf] : term_tfs) id_tfs.emplace_back(TermId(term), tf);
  AddDoc(doc, id_tfs);
}

Status PostingAccumulator::Spill(const std::string& path) {
  std::vector<uint32_t> order(entries_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) { return terms_[a] < terms_[b]; });
  SEARCH_ASSIGN_OR_RETURN(auto writer, RunWriter::Create(path));
  for (uint32_t id : order) {
    const Entry& e = entries_[id];
    if (e.count != 0) SEARCH_RETURN_IF_ERROR(writer->Add(terms_[id], e.count, e.payload));
  }
  SEARCH_RETURN_IF_ERROR(writer->Finish());
  entries_ = {};
  terms_ = {};
  ids_ = {};
  memory_ = 0;
  postings_ = 0;
  return Status::Ok();
}

}  // namespace search
