#include "tree_prune.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include "block_cursor.hpp"
#include "core/score_slack.hpp"
#include "query_engine.hpp"

namespace search::cpu_internal {

namespace {

// TopRequired's second phase, from docID d on, once the required lists' maxima alone (req_max)
// cannot beat the threshold: candidates are the should lists' documents. A should block range
// whose block maxima plus req_max cannot win is skipped undecoded; a candidate goes on only while
// its should scores plus the required lists' block maxima can win, then into the required lists
// (next_geq) and past the excluded ones, and is scored as the first phase scores it.
void TopShouldDriven(uint32_t d, std::span<BlockCursor* const> req, std::span<BlockCursor* const> should,
                     std::span<BlockCursor* const> excl, const std::vector<bool>& scored, float req_max, float slack,
                     ScoreSheet& sheet, TopKHeap& topk, QueryStats& stats) {
  int64_t passed_through = -1;  // [.., passed_through] passed the metadata bounds below
  while (d != kEndDoc) {
    const float thr = topk.Threshold();
    if (static_cast<int64_t>(d) > passed_through) {
      // Bound the should lists' blocks at d, first with req_max, then with the required lists'
      // block maxima through the end of those blocks, then at d alone: metadata only.
      uint32_t end = kEndDoc;
      float sb_max = 0.0f;
      for (BlockCursor* c : should) {
        c->shallow_seek(d);
        if (c->blocks_exhausted()) continue;
        sb_max += c->block_max_score();
        end = std::min(end, c->block_last_doc());
      }
      if (end == kEndDoc) return;  // every should list is exhausted
      if ((sb_max + req_max) * slack <= thr) {
        d = end + 1;
        continue;
      }
      float over_end = sb_max, at_d = sb_max;
      uint32_t end_d = end;
      for (BlockCursor* c : req) {
        c->shallow_seek(d);
        if (c->blocks_exhausted()) return;  // a required list has nothing left
        end_d = std::min(end_d, c->block_last_doc());
        if (!scored[c->slot()]) continue;
        over_end += c->block_max_score_through(end);
        at_d += c->block_max_score();
      }
      if (over_end * slack <= thr) {
        d = end + 1;
        continue;
      }
      if (at_d * slack <= thr) {
        d = end_d + 1;
        continue;
      }
      passed_through = end_d;
    }
    uint32_t doc = kEndDoc;
    for (BlockCursor* c : should) {
      c->next_geq(d);
      doc = std::min(doc, c->doc());
    }
    if (doc == kEndDoc) return;
    d = doc + 1;  // doc < kEndDoc
    float sb = 0.0f;
    for (BlockCursor* c : should) {
      if (c->doc() != doc) continue;
      const float v = c->score();
      sheet.set(c->slot(), v);
      sb += v;
    }
    float rb = 0.0f;
    for (BlockCursor* c : req) {
      c->shallow_seek(doc);
      if (c->blocks_exhausted()) return;  // a required list has nothing left
      if (scored[c->slot()]) rb += c->block_max_score();
    }
    if ((sb + rb) * slack <= thr) {
      sheet.clear();
      continue;
    }
    bool miss = false;
    for (size_t i = 0; i < req.size() && !miss; ++i) {
      req[i]->next_geq(doc);
      if (req[i]->doc() != doc) {
        if (req[i]->doc() == kEndDoc) return;
        miss = true;
      }
    }
    for (size_t i = 0; i < excl.size() && !miss; ++i) {
      excl[i]->next_geq(doc);
      miss = excl[i]->doc() == doc;
    }
    if (miss) {
      sheet.clear();
      continue;
    }
    for (BlockCursor* c : req)
      if (scored[c->slot()]) sheet.set(c->slot(), c->score());
    topk.Push(doc, sheet.sum_and_clear());
    ++stats.postings_scored;
  }
}

// The top k of a term boolean with at least one required clause (see the header). Lists absent
// here: a required one matches nothing, an optional or excluded one is dropped.
std::vector<ScoredDoc> TopRequired(std::span<const TermClause> clauses, const CursorEnv* env, uint32_t k) {
  std::vector<BlockCursor> cursors(clauses.size());
  std::vector<BlockCursor*> req, must_other, should, excl;  // must_other: scored required lists but the lead
  std::vector<bool> scored(clauses.size(), false);          // by clause index: kMust
  size_t next = 0;
  for (const TermClause& c : clauses) {
    const ListView* l = c.input->list;
    if (l == nullptr) {
      if (c.occur == Occur::kMust || c.occur == Occur::kFilter) return {};
      continue;
    }
    BlockCursor* cur = &cursors[next++];
    cur->reset(l, c.input->idf, c.index, env);
    switch (c.occur) {
      case Occur::kMust:
        scored[c.index] = true;
        [[fallthrough]];
      case Occur::kFilter:
        req.push_back(cur);
        break;
      case Occur::kShould:
        should.push_back(cur);
        break;
      default:
        excl.push_back(cur);
        break;
    }
  }
  std::sort(req.begin(), req.end(), [](const BlockCursor* a, const BlockCursor* b) {
    return a->size() != b->size() ? a->size() < b->size() : a->slot() < b->slot();
  });
  BlockCursor& lead = *req[0];
  const bool lead_scored = scored[lead.slot()];
  for (size_t i = 1; i < req.size(); ++i)
    if (scored[req[i]->slot()]) must_other.push_back(req[i]);
  float others_max = 0.0f;  // the most the other lists add to any document
  for (BlockCursor* c : must_other) others_max += c->max_score();
  for (BlockCursor* c : should) others_max += c->max_score();

  std::vector<float> sheet_vals(clauses.size(), 0.0f);
  ScoreSheet sheet(sheet_vals.data(), clauses.size());
  TopKHeap topk(k);
  const float slack = ScoreSlack(clauses.size());
  QueryStats& stats = *env->stats;

  float req_max = 0.0f;  // the most the scored required lists add to any document
  for (BlockCursor* c : req)
    if (scored[c->slot()]) req_max += c->max_score();
  // The should lists drive the second phase only when they hold under half the lead's postings:
  // a should candidate costs about twice a lead posting (scored one at a time, probed into every
  // required list, against the lead's eight lanes at a time).
  uint64_t should_size = 0;
  for (BlockCursor* c : should) should_size += c->size();
  const bool should_can_drive = !should.empty() && 2 * should_size < lead.size();

  lead.next_geq(0);
  uint32_t d = lead.doc();  // a lower bound of the lead's next document
  while (d != kEndDoc) {
    float thr = topk.Threshold();
    if (should_can_drive && topk.full() && req_max * slack <= thr) {
      // No document without a should match can enter any more: the should lists drive.
      TopShouldDriven(d, req, should, excl, scored, req_max, slack, sheet, topk, stats);
      break;
    }
    if (topk.full()) {
      // Bound every document of [d, end] from metadata (and decoded should blocks) only.
      uint32_t end = kEndDoc;
      float bound = 0.0f;
      for (BlockCursor* c : req) {
        c->shallow_seek(d);
        if (c->blocks_exhausted()) return topk.TakeSorted();  // a required list has nothing left
        if (scored[c->slot()]) bound += c->block_max_score();
        end = std::min(end, c->block_last_doc());
      }
      for (BlockCursor* c : should) {
        c->shallow_seek(d);
        if (c->blocks_exhausted()) continue;
        if (c->decoded()) {
          c->next_geq(d);  // within the decoded block: a scan
          if (c->doc() > d) {
            end = std::min(end, c->doc() - 1);  // nothing from this list before its next document
            continue;
          }
        }
        bound += c->block_max_score();
        end = std::min(end, c->block_last_doc());
      }
      if (bound * slack <= thr) {
        if (end == kEndDoc) break;
        d = end + 1;
        continue;
      }
    }
    lead.next_geq(d);
    if (lead.doc() == kEndDoc) break;
    const uint32_t* docs = lead.block_docs();
    const uint32_t count = lead.block_count();
    const uint32_t last = docs[count - 1];
    // With the heap full: the lead's scores eight lanes at a time, and the other lists' bound
    // over the rest of the block.
    const bool bounded = topk.full();
    const float* lead_scores = bounded && lead_scored ? lead.block_scores() : nullptr;
    float others_range = 0.0f;
    if (bounded) {
      for (BlockCursor* c : must_other) {
        c->shallow_seek(docs[lead.pos()]);
        others_range += c->block_max_score_through(last);
      }
      for (BlockCursor* c : should) {
        c->shallow_seek(docs[lead.pos()]);
        others_range += c->block_max_score_through(last);
      }
      others_range = std::min(others_range, others_max);
    }
    // The positions whose lead score plus others_range can beat the threshold as it stands (it
    // only rises): a branch-free pass, so that the loop below visits only those.
    uint32_t cand[kBlockSize];
    uint32_t num_cand = 0;
    if (lead_scores != nullptr) {
      const float need = thr;
      for (uint32_t j = lead.pos(); j < count; ++j) {
        cand[num_cand] = j;
        num_cand += (lead_scores[j] + others_range) * slack > need ? 1 : 0;
      }
    } else {
      for (uint32_t j = lead.pos(); j < count; ++j) cand[num_cand++] = j;
    }
    for (uint32_t t = 0; t < num_cand; ++t) {
      const uint32_t j = cand[t];
      const uint32_t doc = docs[j];
      float c0 = 0.0f;
      if (bounded) {
        if (lead_scored) c0 = lead_scores[j];
        if ((c0 + others_range) * slack <= thr) continue;
      }
      bool miss = false;
      for (size_t i = 1; i < req.size() && !miss; ++i) {
        req[i]->next_geq(doc);
        if (req[i]->doc() != doc) {
          if (req[i]->doc() == kEndDoc) return topk.TakeSorted();
          miss = true;
        }
      }
      for (size_t i = 0; i < excl.size() && !miss; ++i) {
        excl[i]->next_geq(doc);
        miss = excl[i]->doc() == doc;
      }
      if (miss) continue;
      lead.set_pos(j);
      if (lead_scored) {
        if (!bounded) c0 = lead.score();
        sheet.set(lead.slot(), c0);
      }
      float partial = c0;
      for (BlockCursor* c : must_other) {
        const float v = c->score();  // positioned on doc by the required walk
        sheet.set(c->slot(), v);
        partial += v;
      }
      if (!should.empty()) {
        if (topk.full()) {
          float sb = 0.0f;
          for (BlockCursor* c : should) {
            c->shallow_seek(doc);
            sb += c->block_max_score();  // 0 once the list has no block left
          }
          if ((partial + sb) * slack <= thr) {
            sheet.clear();
            continue;
          }
        }
        for (BlockCursor* c : should) {
          c->next_geq(doc);
          if (c->doc() == doc) sheet.set(c->slot(), c->score());
        }
      }
      topk.Push(doc, sheet.sum_and_clear());
      ++stats.postings_scored;
      thr = topk.Threshold();
    }
    lead.skip_block();
    d = lead.doc();
  }
  return topk.TakeSorted();
}

// True when every clause has the same occurrence among kMust and kShould and the tokens are
// distinct: a bag of words the flat paths answer.
bool IsFlatBag(std::span<const TermClause> clauses, QueryMode* mode) {
  const Occur o = clauses[0].occur;
  if (o != Occur::kMust && o != Occur::kShould) return false;
  for (size_t i = 0; i < clauses.size(); ++i) {
    if (clauses[i].occur != o) return false;
    for (size_t j = 0; j < i; ++j)
      if (clauses[j].input == clauses[i].input) return false;
  }
  *mode = o == Occur::kMust ? QueryMode::kAnd : QueryMode::kOr;
  return true;
}

}  // namespace

Result<std::optional<SearchResult>> ExecuteTermBoolean(const QueryNode& tree, std::span<const std::string> terms,
                                                       std::span<const TreeTermInput> inputs,
                                                       std::span<const float> norms, uint32_t doc_begin, uint32_t k,
                                                       bool count, const Bm25Params& params) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TermClause> clauses;
  if (!AsTermBoolean(tree, terms, inputs, &clauses)) return std::optional<SearchResult>();
  bool required = false, should = false;
  for (const TermClause& c : clauses) {
    required |= c.occur == Occur::kMust || c.occur == Occur::kFilter;
    should |= c.occur == Occur::kShould;
  }
  QueryMode flat_mode = QueryMode::kAnd;
  const bool flat = IsFlatBag(clauses, &flat_mode);
  // The top k of should clauses alone that are no bag of distinct terms: the tree evaluator.
  if (k > 0 && !required && should && !flat) return std::optional<SearchResult>();
  SearchResult result;
  result.has_total = count;
  for (const TermClause& c : clauses) {
    SEARCH_RETURN_IF_ERROR(CheckListRange(c.input->list, doc_begin, norms.size()));
    if (c.input->list != nullptr) ++result.stats.lists;
  }
  if (count) {
    SEARCH_ASSIGN_OR_RETURN(result.total, CountTermBoolean(clauses, doc_begin, norms.size(), &result.stats));
  }
  if (k > 0 && (required || should)) {
    if (flat) {
      std::vector<TermInput> in(clauses.size());
      for (size_t i = 0; i < clauses.size(); ++i) in[i] = TermInput{clauses[i].input->list, clauses[i].input->idf};
      SEARCH_ASSIGN_OR_RETURN(SearchResult top, ExecuteQuery(in, norms, doc_begin, flat_mode, k, params));
      result.hits = std::move(top.hits);
      top.stats.lists = 0;  // counted above
      result.stats += top.stats;
    } else {
      Status error;
      CursorEnv env{
          .norms = norms.data(), .doc_begin = doc_begin, .k1 = params.k1, .stats = &result.stats, .error = &error};
      result.hits = TopRequired(clauses, &env, k);
      if (!error.ok()) return error;
    }
  }
  result.stats.micros = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  return std::optional<SearchResult>(std::move(result));
}

}  // namespace search::cpu_internal
