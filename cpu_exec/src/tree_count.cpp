#include "tree_count.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "and_query.hpp"
#include "block_cursor.hpp"

namespace search::cpu_internal {

namespace {

// Keeps the candidates (strictly ascending) that c holds (kPresent) or lacks (!kPresent), in
// order, at the front of cand; returns how many. cand has room for n + 8 values (the eight lanes
// past n are read, never used). c moves forward only: to each candidate's block by metadata
// (next_geq), then through the decoded block by a merge, eight docIDs against eight with AVX2
// (a candidate chunk is done when its largest valid value is at most the block chunk's largest;
// the block's kPad trailing kEndDoc values let every load take eight), else branch-free.
template <bool kPresent>
uint32_t Filter(BlockCursor& c, uint32_t* cand, uint32_t n) {
  uint32_t i = 0, out = 0;
  while (i < n) {
    c.next_geq(cand[i]);
    if (c.doc() == kEndDoc) {  // the list holds none of the rest (or failed: the caller checks)
      if constexpr (!kPresent) {
        std::memmove(cand + out, cand + i, (n - i) * sizeof(uint32_t));
        out += n - i;
      }
      return out;
    }
    const uint32_t* b = c.block_docs();
    const uint32_t nb = c.block_count();
    const uint32_t last = b[nb - 1];
    uint32_t j = c.pos();
#if defined(__AVX2__)
    // The candidates up to the block's last docID: cand[i, m).
    const uint32_t m = static_cast<uint32_t>(std::upper_bound(cand + i, cand + n, last) - cand);
    unsigned acc = 0;  // lanes of the current candidate chunk found in the block so far
    while (i < m) {
      const uint32_t valid = std::min(8u, m - i);
      const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cand + i));
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j));
      acc |= MatchLanes(va, vb);
      const uint32_t la = cand[i + valid - 1], lb = b[j + 7];
      if (lb <= la) j += 8;  // j stays <= nb: a chunk holding padding has lb == kEndDoc > la
      if (la <= lb) {
        unsigned keep = (kPresent ? acc : ~acc) & ((1u << valid) - 1);
        for (; keep != 0; keep &= keep - 1) cand[out++] = cand[i + static_cast<uint32_t>(__builtin_ctz(keep))];
        i += valid;
        acc = 0;
      }
    }
#else
    // cand[i] <= last keeps j < nb: j moves past b[j] only when b[j] <= cand[i] <= last, and the
    // step that consumes last (b[j] == cand[i] == last) also ends the loop (candidates ascend).
    while (i < n && cand[i] <= last) {
      const uint32_t x = cand[i], y = b[j];
      cand[out] = x;
      out += kPresent ? static_cast<uint32_t>(x == y) : static_cast<uint32_t>(x < y);
      i += static_cast<uint32_t>(x <= y);
      j += static_cast<uint32_t>(y <= x);
    }
#endif
    c.set_pos(std::min(j, nb - 1));
  }
  return out;
}

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
      n = Filter<true>(*req[i], cand, n);
      target = std::max(target, req[i]->doc());
    }
    for (size_t i = 0; i < excl.size() && n > 0; ++i) n = Filter<false>(*excl[i], cand, n);
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
      case Occur::kDefault: return Status::InvalidArgument("the tree has a bare clause left: resolve the mode first");
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
  constexpr uint32_t kSkewed = 32;  // |a| + |b| - |a ∩ b| when the longer is this many times longer
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
