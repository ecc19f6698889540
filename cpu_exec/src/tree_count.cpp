#include "tree_count.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "block_cursor.hpp"
#include "doc_filter.hpp"

namespace search::cpu_internal {

namespace {

// |req[0] ∩ req[1] ∩ ... \ (excl...)|; req sorted by length ascending, non-empty.
uint64_t IntersectCount(std::span<BlockCursor*> req, std::span<BlockCursor*> excl) {
  BlockCursor& lead = *req[0];
  alignas(32) uint32_t cand[kBlockSize + 8] = {};
  uint64_t total = 0;
  lead.next_geq(0);
  while (lead.doc() != kEndDoc) {
    const uint32_t p = lead.pos();
    uint32_t n = lead.block_count() - p;
    std::memcpy(cand, lead.block_docs() + p, n * sizeof(uint32_t));
    uint32_t target = 0;  // every other required list holds nothing in (last candidate, target)
    for (size_t i = 1; i < req.size() && n > 0; ++i) {
      n = FilterDocs<true>(*req[i], cand, n);
      target = std::max(target, req[i]->doc());
    }
    for (size_t i = 0; i < excl.size() && n > 0; ++i) n = FilterDocs<false>(*excl[i], cand, n);
    total += n;
    lead.skip_block();
    if (lead.doc() == kEndDoc) break;
    for (size_t i = 1; i < req.size(); ++i) target = std::max(target, req[i]->doc());
    if (target == kEndDoc) break;  // a required list ran out
    lead.next_geq(std::max(target, lead.doc()));
  }
  return total;
}

}  // namespace

bool AsTermBoolean(const QueryNode& tree, std::span<const std::string> terms, std::span<const TreeTermInput> inputs,
                   std::vector<TermClause>* out) {
  if (tree.kind != QueryNode::Kind::kBool || tree.clauses.empty() || terms.size() != inputs.size()) return false;
  out->clear();
  for (size_t i = 0; i < tree.clauses.size(); ++i) {
    const QueryNode::Clause& c = tree.clauses[i];
    if (c.node.kind != QueryNode::Kind::kTerm || c.node.tokens.size() != 1) return false;
    if (c.occur == Occur::kDefault || c.occur > Occur::kFilter) return false;
    auto it = std::lower_bound(terms.begin(), terms.end(), c.node.tokens[0]);
    if (it == terms.end() || *it != c.node.tokens[0]) return false;
    out->push_back({c.occur, &inputs[static_cast<size_t>(it - terms.begin())], static_cast<uint32_t>(i)});
  }
  return true;
}

Result<uint64_t> CountTermBoolean(std::span<const TermClause> clauses, uint32_t doc_begin, uint64_t num_docs,
                                  QueryStats* stats) {
  std::vector<const ListView*> req, should, excl;
  for (const TermClause& c : clauses) {
    const ListView* l = c.input->list;
    switch (c.occur) {
      case Occur::kMust:
      case Occur::kFilter:
        if (l == nullptr) return uint64_t{0};
        req.push_back(l);
        break;
      case Occur::kShould:
        if (l != nullptr) should.push_back(l);
        break;
      case Occur::kMustNot:
        if (l != nullptr) excl.push_back(l);
        break;
      case Occur::kDefault:
        return Status::InvalidArgument("the tree has a bare clause left: resolve the mode first");
    }
  }
  for (auto* v : {&req, &should, &excl}) {  // a token named twice is one list
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  auto by_length = [](const ListView* a, const ListView* b) { return a->count() < b->count(); };
  std::sort(req.begin(), req.end(), by_length);
  std::sort(should.begin(), should.end(), by_length);
  if (req.empty() && should.empty()) return uint64_t{0};
  if (excl.empty() && (req.size() == 1 || (req.empty() && should.size() == 1)))
    return uint64_t{req.empty() ? should[0]->count() : req[0]->count()};

  Status error;
  CursorEnv env;
  env.doc_begin = doc_begin;
  env.stats = stats;
  env.error = &error;
  // Cursors: one per list; pointers into `cursors` stay put (sized once).
  std::vector<BlockCursor> cursors(req.size() + should.size() + excl.size());
  size_t next = 0;
  auto open = [&](const ListView* l) {
    BlockCursor* c = &cursors[next++];
    c->reset(l, 0.0f, 0, &env);
    return c;
  };
  uint64_t total = 0;
  constexpr uint32_t kSkewed = 32;            // |a| + |b| - |a ∩ b| when the longer is this many times longer
  if (req.size() == 1 && excl.size() == 1) {  // |a| - |a ∩ b|, the intersection driven by the shorter
    std::vector<BlockCursor*> r = {open(req[0]), open(excl[0])};
    if (excl[0]->count() < req[0]->count()) std::swap(r[0], r[1]);
    total = req[0]->count() - IntersectCount(r, {});
  } else if (!req.empty()) {
    std::vector<BlockCursor*> r, x;
    for (const ListView* l : req) r.push_back(open(l));
    for (const ListView* l : excl) x.push_back(open(l));
    total = IntersectCount(r, x);
  } else if (should.size() == 2 && excl.empty() && should[1]->count() / kSkewed >= should[0]->count()) {
    std::vector<BlockCursor*> r = {open(should[0]), open(should[1])};
    total = uint64_t{should[0]->count()} + should[1]->count() - IntersectCount(r, {});
  } else {
    // A bitset over the shard's documents: set by every should list, cleared by every excluded one.
    thread_local std::vector<uint64_t> bits;
    bits.assign(static_cast<size_t>((num_docs + 63) / 64), 0);
    alignas(32) uint32_t docs[kBlockSize];
    auto each_doc = [&](const ListView* l, auto&& f) -> Status {
      for (uint32_t j = 0; j < l->num_blocks(); ++j) {
        const BlockMeta& m = l->block(j);
        ++stats->blocks_decoded;
        stats->postings_decoded += m.count;
        stats->bytes_touched += PackedBytes(m.count, m.doc_bits);
        SEARCH_RETURN_IF_ERROR(l->DecodeDocs(j, docs));
        if (m.count == 0 || docs[0] < doc_begin)
          return Status::Corruption("posting list docID below the shard's first document");
        for (uint32_t i = 0; i < m.count; ++i) f(docs[i] - doc_begin);
      }
      return Status::Ok();
    };
    for (const ListView* l : should)
      SEARCH_RETURN_IF_ERROR(each_doc(l, [&](uint32_t off) { bits[off >> 6] |= uint64_t{1} << (off & 63); }));
    for (const ListView* l : excl)
      SEARCH_RETURN_IF_ERROR(each_doc(l, [&](uint32_t off) { bits[off >> 6] &= ~(uint64_t{1} << (off & 63)); }));
    for (uint64_t w : bits) total += static_cast<uint64_t>(std::popcount(w));
  }
  if (!error.ok()) return error;
  return total;
}

}  // namespace search::cpu_internal
