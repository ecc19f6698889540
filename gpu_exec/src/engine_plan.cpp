// engine_plan.hpp: the GPU engine's host planning.
#include "engine_plan.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "core/score_slack.hpp"

namespace search::gpu::engine_internal {

Phase MakePhase(PhaseKind kind, std::vector<uint32_t> ids, const std::vector<QState>& st) {
  Phase p;
  p.kind = kind;
  if (kind == PhaseKind::kTheta) {
    for (uint32_t id : ids) {
      p.ids.push_back(id);
      p.theta_slot.push_back(st[id].theta_slot);
      if (st[id].alt_theta_slot != kNone) {
        p.ids.push_back(id);
        p.theta_slot.push_back(st[id].alt_theta_slot);
      }
    }
  } else {
    p.ids = std::move(ids);
  }
  for (uint32_t id : p.ids) {
    p.hit_off.push_back(p.total_k);
    if (kind != PhaseKind::kTheta) p.total_k += st[id].k;
  }
  return p;
}

namespace {

Status Emit(const QueryNode& node, uint32_t occur, uint32_t depth, std::span<const std::string> terms,
            std::span<const uint32_t> slot_of, PhraseCollector* phrases, std::vector<uint32_t>* prog) {
  switch (node.kind) {
    case QueryNode::Kind::kTerm: {
      if (node.tokens.size() != 1) return Status::InvalidArgument("a term node must hold one token");
      const auto it = std::lower_bound(terms.begin(), terms.end(), node.tokens[0]);
      if (it == terms.end() || *it != node.tokens[0])
        return Status::InvalidArgument("query token '" + node.tokens[0] + "' is not among the query's terms");
      prog->push_back(TreeOp(kTreeTerm, occur, 0, slot_of[static_cast<size_t>(it - terms.begin())]));
      return Status::Ok();
    }
    case QueryNode::Kind::kPhrase: {  // a slot of the phrase producer's tfs (phrase_plan.hpp)
      if (phrases == nullptr) return GpuUnimplemented("a phrase without its term inputs");
      SEARCH_ASSIGN_OR_RETURN(const uint32_t slot, phrases->Slot(node.tokens));
      prog->push_back(TreeOp(kTreeTerm, occur, 0, slot));
      return Status::Ok();
    }
    case QueryNode::Kind::kBool: {
      if (depth >= kTreeFrames) return Status::InvalidArgument("query tree nested too deep");
      bool required = false;
      for (const QueryNode::Clause& c : node.clauses) {
        if (c.occur == Occur::kDefault)
          return Status::InvalidArgument("the tree has a bare clause left: resolve the mode first");
        if (c.occur > Occur::kFilter) return Status::InvalidArgument("unknown clause occurrence");
        required = required || c.occur == Occur::kMust || c.occur == Occur::kFilter;
      }
      prog->push_back(TreeOp(kTreeBegin, 0, required ? 1u : 0u, 0));
      for (const QueryNode::Clause& c : node.clauses)
        SEARCH_RETURN_IF_ERROR(
            Emit(c.node, static_cast<uint32_t>(c.occur), depth + 1, terms, slot_of, phrases, prog));
      prog->push_back(TreeOp(kTreeEnd, occur, 0, 0));
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown query node kind");
}

// The flat query {terms, mode} (kAnd or kOr) as a program: one term clause per term in order.
std::vector<uint32_t> FlatProgram(std::span<const uint32_t> slot_of, QueryMode mode) {
  const bool all = mode == QueryMode::kAnd;
  const uint32_t occur = static_cast<uint32_t>(all ? Occur::kMust : Occur::kShould);
  std::vector<uint32_t> prog{TreeOp(kTreeBegin, 0, all ? 1u : 0u, 0)};
  for (uint32_t slot : slot_of) prog.push_back(TreeOp(kTreeTerm, occur, 0, slot));
  prog.push_back(TreeOp(kTreeEnd, 0, 0, 0));
  return prog;
}

// Sets leaf[i] for every terms[i] (sorted) that is a term leaf of `node`.
void MarkTermLeaves(const QueryNode& node, std::span<const std::string> terms, std::vector<bool>* leaf) {
  if (node.kind == QueryNode::Kind::kTerm && node.tokens.size() == 1) {
    const auto it = std::lower_bound(terms.begin(), terms.end(), node.tokens[0]);
    if (it != terms.end() && *it == node.tokens[0]) (*leaf)[static_cast<size_t>(it - terms.begin())] = true;
  }
  for (const QueryNode::Clause& c : node.clauses) MarkTermLeaves(c.node, terms, leaf);
}

// Compiles a tree or count query's program(s); false when it is answered already (an error, or no
// term present here: no match, total 0).
bool PrepareTree(const GpuQueryInput& in, QState* s) {
  if (in.mode != QueryMode::kAnd && in.mode != QueryMode::kOr && in.mode != QueryMode::kAndOr) {
    s->status = Status::InvalidArgument("unknown query mode");
    return false;
  }
  std::vector<uint32_t> slot_of;
  uint32_t present = 0;
  for (const GpuTermInput& t : in.terms) slot_of.push_back(t.list == nullptr ? kTreeAbsent : present++);
  const QueryMode first = in.mode == QueryMode::kOr ? QueryMode::kOr : QueryMode::kAnd;
  if (in.tree == nullptr) {
    s->prog = FlatProgram(slot_of, first);
    if (in.mode == QueryMode::kAndOr) s->prog_or = FlatProgram(slot_of, QueryMode::kOr);
  } else {
    s->status = ValidateTree(*in.tree);
    if (!s->status.ok()) return false;
    const std::vector<std::string> terms = TreeTerms(*in.tree);
    if (terms.size() != in.terms.size()) {
      s->status = Status::InvalidArgument("a query tree of " + std::to_string(terms.size()) + " distinct tokens with " +
                                          std::to_string(in.terms.size()) + " term inputs");
      return false;
    }
    if (in.tree->kind != QueryNode::Kind::kBool) {
      s->status = Status::InvalidArgument("the root of a query tree is a boolean");
      return false;
    }
    // Only a token that is a term leaf takes a term slot: one only inside phrases is read through
    // its positions (phrase_plan.hpp), its list left undecoded.
    std::vector<bool> leaf(terms.size(), false);
    MarkTermLeaves(*in.tree, terms, &leaf);
    std::vector<DevList> kept;
    std::vector<float> kept_max;
    for (size_t i = 0, j = 0; i < in.terms.size(); ++i) {
      if (in.terms[i].list == nullptr) continue;
      slot_of[i] = leaf[i] ? static_cast<uint32_t>(kept.size()) : kTreeAbsent;
      if (leaf[i]) {
        kept.push_back(s->present[j]);
        kept_max.push_back(s->max_score[j]);
      }
      ++j;
    }
    s->present = std::move(kept);
    s->max_score = std::move(kept_max);
    PhraseCollector phrases(in.terms, terms, static_cast<uint32_t>(s->present.size()), &s->phrases);
    s->status = CompileTree(ResolveMode(*in.tree, first), terms, slot_of, &s->prog, &phrases);
    if (s->status.ok() && in.mode == QueryMode::kAndOr)
      s->status = CompileTree(ResolveMode(*in.tree, QueryMode::kOr), terms, slot_of, &s->prog_or, &phrases);
    if (!s->status.ok()) return false;
    for (const PhraseLeaf& p : s->phrases) {  // the phrase slots, after the terms' (phrase_plan.hpp)
      DevList l;
      l.count = p.toks[0].count;
      l.idf = p.idf;
      s->present.push_back(l);
      s->max_score.push_back(std::numeric_limits<float>::infinity());
    }
  }
  if (s->present.empty()) return false;
  // A count alone that list lengths answer: no GPU work (the and-resolution, k == 0).
  uint64_t total = 0;
  if (in.count && in.k == 0 && TreeCountFromLengths(s->prog, s->present, &total)) {
    s->result.total = total;
    return false;
  }
  // A bag of words with a count and a top k (one resolution): the flat paths give the top k; the
  // count is the and-path's survivors (and), or a list's length, else a kTreeCount phase of the
  // program beside the or-path (or).
  if (in.count && in.k > 0 && in.mode != QueryMode::kAndOr && s->phrases.empty()) {
    QueryMode flat_mode = first;
    std::vector<std::string> flat_terms;
    const bool flat = in.tree == nullptr || (AsFlatQuery(*in.tree, in.mode, &flat_terms, &flat_mode) &&
                                             flat_terms.size() == in.terms.size());
    if (flat && flat_mode == QueryMode::kAnd) {
      s->tree = false;
      s->mode = QueryMode::kAnd;
    } else if (flat && flat_mode == QueryMode::kOr) {
      s->tree = false;
      s->mode = QueryMode::kOr;
      if (TreeCountFromLengths(s->prog, s->present, &total))
        s->result.total = total;
      else
        s->count_phase = true;
    }
  }
  // One required term with should and must_not terms and a top k: the pruned or-path
  // (RequiredOr); a count is the required list's length, or with must_not terms a kTreeCount
  // phase beside it.
  if (s->tree && in.k > 0 && in.mode != QueryMode::kAndOr && s->phrases.empty() &&
      RequiredOr(s->prog, s->present, &s->req_slot, &s->excl_mask)) {
    s->tree = false;
    s->mode = QueryMode::kOr;
    s->required_or = true;
    for (uint32_t i = 0; i < s->present.size(); ++i)
      if ((s->excl_mask >> i) & 1u) s->max_score[i] = 0.0f;  // adds nothing to a match's score
    if (in.count && s->excl_mask == 0)
      s->result.total = s->present[s->req_slot].count;
    else
      s->count_phase = in.count;
  }
  return true;
}

}  // namespace

bool RequiredOr(std::span<const uint32_t> prog, std::span<const DevList> present, uint32_t* req, uint32_t* excl) {
  if (prog.size() < 3 || (prog.front() & 3u) != kTreeBegin || (prog.back() & 3u) != kTreeEnd) return false;
  uint32_t musts = 0, scoring = 0, last = 0, n = 0, seen = 0;
  bool increasing = true;
  *excl = 0;
  for (size_t i = 1; i + 1 < prog.size(); ++i) {
    const uint32_t op = prog[i];
    if ((op & 3u) != kTreeTerm) return false;
    const uint32_t occur = (op >> 2) & 7u, slot = (op >> 8) & 0xffu;
    const bool must = occur == static_cast<uint32_t>(Occur::kMust);
    const bool must_not = occur == static_cast<uint32_t>(Occur::kMustNot);
    if (!must && !must_not && occur != static_cast<uint32_t>(Occur::kShould)) return false;
    if (slot == kTreeAbsent) {
      if (must) return false;  // matches nothing: the tree path answers it at once
      continue;
    }
    if (slot >= present.size() || slot >= 32 || present[slot].meta == nullptr || ((seen >> slot) & 1u)) return false;
    seen |= 1u << slot;
    ++n;
    if (must_not) {
      *excl |= 1u << slot;
      continue;
    }
    if (scoring > 0 && slot <= last) increasing = false;
    last = slot;
    ++scoring;
    if (must) {
      ++musts;
      *req = slot;
    }
  }
  return musts == 1 && n == present.size() && (increasing || scoring <= 2);
}

Status CompileTree(const QueryNode& resolved, std::span<const std::string> terms, std::span<const uint32_t> slot_of,
                   std::vector<uint32_t>* prog, PhraseCollector* phrases) {
  static_assert(kTreeFrames == kMaxTreeDepth + 1, "a frame per boolean: the root and kMaxTreeDepth below it");
  prog->clear();
  if (resolved.kind != QueryNode::Kind::kBool) return Status::InvalidArgument("the root of a query tree is a boolean");
  if (terms.size() != slot_of.size()) return Status::InvalidArgument("one slot per query term is needed");
  return Emit(resolved, 0, 0, terms, slot_of, phrases, prog);
}

bool Prepare(const GpuShardView& shard, const GpuQueryInput& in, QState* s, bool host_only) {
  static const BlockMeta kHostOnlyMeta{};  // a non-null meta: the slot is a list (not a phrase)
  s->mode = in.mode;
  s->k = in.k;
  s->n = static_cast<uint32_t>(in.terms.size());
  s->tree = in.tree != nullptr || in.count;
  s->count = in.count;
  s->result.has_total = in.count;
  s->status = in.count && in.k == 0 ? Status::Ok() : ValidateK(in.k);
  if (!s->status.ok()) return false;
  if (in.terms.size() > kGpuMaxTerms) {
    s->status = GpuUnimplemented("query of " + std::to_string(in.terms.size()) + " terms (the GPU engine takes " +
                                 std::to_string(kGpuMaxTerms) + ")");
    return false;
  }
  const uint64_t doc_end = uint64_t{shard.doc_begin} + shard.num_docs;
  for (const GpuTermInput& t : in.terms) {
    if (t.list == nullptr) continue;
    if (t.list->count() == 0 || t.list->num_blocks() == 0) {
      s->status = Status::Corruption("empty posting list");
      return false;
    }
    const uint32_t last = t.list->block(t.list->num_blocks() - 1).last_doc;
    if (last == 0xffffffffu || uint64_t{last} >= doc_end) {
      s->status = Status::Corruption("posting list docID " + std::to_string(last) + " outside the shard's documents [" +
                                     std::to_string(shard.doc_begin) + ", " + std::to_string(doc_end) + ")");
      return false;
    }
    DevList l;
    if (host_only) {
      l.meta = &kHostOnlyMeta;
    } else if (t.d_blob == nullptr) {
      s->status = Status::InvalidArgument("GpuTermInput with a list but no device blob");
      return false;
    } else {
      l.meta = reinterpret_cast<const BlockMeta*>(t.d_blob + sizeof(ListHeader));
      l.payload = t.d_blob + sizeof(ListHeader) + sizeof(BlockMeta) * size_t{t.list->num_blocks()};
    }
    l.count = t.list->count();
    l.num_blocks = t.list->num_blocks();
    l.base_doc = t.list->base_doc();
    l.idf = t.idf;
    s->present.push_back(l);
    s->max_score.push_back(SanitizeBoundHD(t.list->max_score()));
  }
  if (s->tree) return PrepareTree(in, s);
  return !in.terms.empty();
}

bool NeedTheta(QState& s, uint64_t min_postings) {
  s.alt_theta_slot = kNone;
  const size_t m = s.present.size();
  if (m < 1) return false;
  uint64_t postings = 0;
  for (const DevList& l : s.present) postings += l.count;
  if (postings < min_postings) return false;
  if (s.required_or) {  // theta from the required list: its documents are the matches
    s.theta_slot = s.req_slot;
    if (s.present[s.req_slot].count < s.k) return false;
    for (uint32_t i = 0; i < m; ++i) {
      if (i == s.req_slot || ((s.excl_mask >> i) & 1u) || s.present[i].count == 0) continue;
      const uint32_t best = s.alt_theta_slot == kNone ? s.req_slot : s.alt_theta_slot;
      if (s.max_score[i] > s.max_score[best]) s.alt_theta_slot = i;
    }
    return true;
  }
  bool found = false;
  for (uint32_t i = 0; i < m; ++i) {
    if (s.present[i].count < s.k) continue;
    if (!found || s.max_score[i] > s.max_score[s.theta_slot] ||
        (s.max_score[i] == s.max_score[s.theta_slot] && s.present[i].count < s.present[s.theta_slot].count))
      s.theta_slot = i;
    found = true;
  }
  return found;
}

void PlanOr(QState& s, uint32_t num_docs, const GpuContextOptions& o) {
  const uint32_t divisor = o.or_pruned_divisor;
  s.or_path = PhaseKind::kOrDense;
  s.bounded = false;
  if (divisor == 0 || num_docs == 0) return;
  const uint32_t m = static_cast<uint32_t>(s.present.size());
  const float slack = ScoreSlack(s.n);
  std::vector<uint32_t> order(m);
  for (uint32_t i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) { return s.max_score[x] < s.max_score[y]; });
  uint32_t first_ess = 0;
  float ub = 0.0f;
  while (first_ess < m) {
    ub += s.max_score[order[first_ess]];
    if (!(ub * slack < s.theta)) break;
    ++first_ess;
  }
  if (first_ess == m) return;  // inconsistent bounds (a corrupt header): the dense path needs none
  s.ess_mask = 0;
  s.cap = 0;
  s.rest.assign(m, std::numeric_limits<float>::infinity());
  s.omit.assign(m, 0u);
  // The essential lists, fewest postings first: a document is gathered from the first of them that
  // holds it, so a later one's documents need no bound of the earlier ones (those lack them), and
  // the long lists, gathered last, are bounded by the fewest others.
  std::vector<uint32_t> sources;
  for (uint32_t j = first_ess; j < m; ++j) {
    const uint32_t e = order[j];
    if ((s.excl_mask >> e) & 1u) continue;  // RequiredOr: a must_not list is never a source
    sources.push_back(e);
  }
  std::sort(sources.begin(), sources.end(), [&](uint32_t x, uint32_t y) {
    return s.present[x].count != s.present[y].count ? s.present[x].count < s.present[y].count : x < y;
  });
  uint32_t earlier = 0;
  for (const uint32_t e : sources) {
    s.ess_mask |= 1u << e;
    s.cap += s.present[e].count;
    float rest = 0.0f;
    for (uint32_t i = 0; i < m; ++i)
      if (i != e && !((earlier >> i) & 1u)) rest += s.max_score[i];
    s.rest[e] = rest;
    s.omit[e] = earlier;
    earlier |= 1u << e;
  }
  // RequiredOr: every match is in the must list, so when that list is essential its postings alone
  // are the candidates. Another essential list's documents would only add work: those outside the
  // must list are dropped at its probe, and those inside it are gathered from it anyway.
  if (s.required_or && ((s.ess_mask >> s.req_slot) & 1u)) {
    for (uint32_t i = 0; i < m; ++i)
      if (i != s.req_slot) s.rest[i] = std::numeric_limits<float>::infinity();
    float rest = 0.0f;
    for (uint32_t i = 0; i < m; ++i)
      if (i != s.req_slot) rest += s.max_score[i];
    s.rest[s.req_slot] = rest;
    s.omit.assign(m, 0u);
    s.ess_mask = 1u << s.req_slot;
    s.cap = s.present[s.req_slot].count;
  }
  const uint64_t ess = s.cap;
  if (s.theta > 0.0f) s.cap = std::min<uint64_t>(s.cap, o.or_candidate_cap);
  // Bounded by the other lists' blocks (WindowBound, DocBound) whenever there is a theta: at 25.2M
  // documents it ran 0.5-4% more or-queries a second than bounding queries of three or more lists
  // by the max_scores, on each of five logs (5-6 terms the most; BENCHMARKS.md).
  s.bounded = o.or_bounded_gather && s.theta > 0.0f;
  if ((s.theta > 0.0f || ess <= uint64_t{num_docs} / divisor) && s.cap < (uint64_t{1} << 30))
    s.or_path = PhaseKind::kOrPruned;
}

uint32_t AndSampleWant(const QState& s, uint32_t num_docs, uint64_t min_lead) {
  if (s.count || s.k == 0 || s.present.size() < 2 || num_docs == 0) return 0;
  uint64_t lead = s.present[0].count;
  size_t lead_slot = 0;
  for (size_t i = 1; i < s.present.size(); ++i)
    if (s.present[i].count < lead) {
      lead = s.present[i].count;
      lead_slot = i;
    }
  if (lead < std::max<uint64_t>(min_lead, 1)) return 0;
  double p = 1.0;  // the chance that a lead posting is a match
  for (size_t i = 0; i < s.present.size(); ++i)
    if (i != lead_slot) p *= std::min(1.0, static_cast<double>(s.present[i].count) / num_docs);
  if (static_cast<double>(lead) * p < 4.0 * s.k) return 0;
  const double want = std::clamp(8.0 * s.k / std::max(p, 1e-9), 256.0, 8192.0);
  return static_cast<uint32_t>(std::min<double>(want, static_cast<double>(lead)));
}

bool TopBlocksExact(const QState& s) {
  if (s.theta == 0.0f) return true;  // every posting was a candidate
  return s.result.hits.size() == s.k && s.result.hits.back().score >= s.theta * ScoreSlack(1);
}

void AddPhases(PhaseKind kind, const std::vector<uint32_t>& ids, const std::vector<QState>& st, uint32_t num_docs,
               const GpuContextOptions& o, std::vector<Phase>* phases) {
  std::vector<uint32_t> cur;
  uint64_t cur_bytes = 0;
  size_t cur_n = 0;  // entries: a theta phase samples a query twice when it has alt_theta_slot
  for (uint32_t id : ids) {
    const uint32_t n = kind == PhaseKind::kTheta && st[id].alt_theta_slot != kNone ? 2 : 1;
    const uint64_t b = n * (kind == PhaseKind::kOrDense    ? OrQueryBytes(st[id], num_docs)
                       : kind == PhaseKind::kOrPruned ? OrPrunedBytes(st[id], num_docs)
                       : kind == PhaseKind::kTheta    ? ThetaBytes(st[id], o.or_theta_sample)
                       : kind == PhaseKind::kTopBlocks ? uint64_t{TopBlocksCap(st[id])} * 32 + kHistBins * 8
                       : kind == PhaseKind::kTree || kind == PhaseKind::kTreeCount ? TreeBytes(st[id], num_docs)
                                                                                   : 0);
    // The pruned kernels spread a launch's work over at most kMaxSpreadQueries queries.
    const size_t max_q = kind == PhaseKind::kOrPruned || kind == PhaseKind::kTheta ? kMaxSpreadQueries : kMaxBatchY;
    if (!cur.empty() && (cur_n + n > max_q || cur_bytes + b > kOrGroupBytes)) {
      phases->push_back(MakePhase(kind, std::move(cur), st));
      cur.clear();
      cur_bytes = 0;
      cur_n = 0;
    }
    cur.push_back(id);
    cur_bytes += b;
    cur_n += n;
  }
  if (!cur.empty()) phases->push_back(MakePhase(kind, std::move(cur), st));
}

void PlanSteps(const QState& s, OrPDesc& d, OrPList* pl, bool progressive) {
  const uint32_t m = d.m;
  std::vector<uint32_t> order(m);
  for (uint32_t i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    if (s.required_or && x != y && (x == s.req_slot || y == s.req_slot)) return x == s.req_slot;  // drops most
    if (s.max_score[x] != s.max_score[y]) return s.max_score[x] > s.max_score[y];
    return s.present[x].count < s.present[y].count;
  });
  for (uint32_t t = 0; t < m; ++t) d.order[t] = static_cast<uint8_t>(order[t]);
  for (uint32_t src = 0; src < m; ++src)
    for (uint32_t t = 0; t < m; ++t) {
      float after = progressive ? 0.0f : std::numeric_limits<float>::infinity();
      for (uint32_t u = t + 1; u < m; ++u)
        if (order[u] != src) after += s.max_score[order[u]];
      pl[src].after[t] = after;
    }
}

namespace {
// The probe kernels' scratch for one list and `cap` candidates (dispatch_or.cu's TakeProbe*).
uint64_t ProbeBytes(const DevList& l, uint64_t cap) {
  const uint64_t slots = ProbeDense(cap, l) ? uint64_t{l.num_blocks} : std::min<uint64_t>(l.num_blocks, cap);
  return 2 * 4 * uint64_t{l.num_blocks} + 768 + slots * (kBlockSize + 1) * 4;
}
}  // namespace

uint64_t OrQueryBytes(const QState& s, uint32_t num_docs) {
  uint64_t postings = 0;
  for (const DevList& l : s.present) postings += l.count;
  return uint64_t{num_docs} * 4 + 16 * std::min<uint64_t>(num_docs, postings) + kHistBins * 4 + s.k * 8 + 4096;
}

uint64_t OrPrunedBytes(const QState& s, uint32_t num_docs) {
  const uint64_t m = s.present.size();
  uint64_t b = (uint64_t{num_docs} + 31) / 32 * 4 + s.cap * (4 + 4 + 1 + 4 * m + 16) + kHistBins * 4 + s.k * 8 + 8192;
  for (const DevList& l : s.present) b += ProbeBytes(l, s.cap);
  return b;
}

// Theta round: bytes of device scratch one query needs.
uint64_t ThetaBytes(const QState& s, uint32_t sample) {
  uint64_t b = 2 * kHistBins * 4 + 4096;
  const uint64_t cap = SampleCap(sample);
  b += cap * (4 + 4 + 1 + 4 * s.present.size());
  for (const DevList& l : s.present) b += ProbeBytes(l, cap);
  return b;
}

uint64_t TreeBytes(const QState& s, uint32_t num_docs) {
  const uint64_t words = (uint64_t{num_docs} + 31) / 32;
  uint64_t b = words * 4 * s.present.size() + 4096;
  if (s.k > 0) {
    const uint64_t cap = std::min<uint64_t>(num_docs, TreeMatchBound(s.prog, s.present));
    b += words * 8 + words / kThreads * 4 + cap * (4 * s.present.size() + 8 + 16) + kHistBins * 4 + s.k * 8;
  }
  return b;
}

uint64_t TreeMatchBound(std::span<const uint32_t> prog, std::span<const DevList> present) {
  struct Frame {
    bool required;
    uint64_t must, should;
  };
  Frame frames[kTreeFrames];
  int top = -1;
  uint64_t root = 0;
  auto apply = [](Frame& f, uint32_t occur, uint64_t bound) {
    if (occur == static_cast<uint32_t>(Occur::kMust) || occur == static_cast<uint32_t>(Occur::kFilter))
      f.must = std::min(f.must, bound);
    else if (occur == static_cast<uint32_t>(Occur::kShould))
      f.should += bound;
  };
  for (const uint32_t op : prog) {
    const uint32_t kind = op & 3u, occur = (op >> 2) & 7u, slot = (op >> 8) & 0xffu;
    if (kind == kTreeBegin) {
      if (top + 1 >= static_cast<int>(kTreeFrames)) return std::numeric_limits<uint64_t>::max();
      frames[++top] = Frame{((op >> 5) & 1u) != 0, std::numeric_limits<uint64_t>::max(), 0};
    } else if (top < 0) {
      return std::numeric_limits<uint64_t>::max();  // not a program CompileTree makes
    } else if (kind == kTreeTerm) {
      apply(frames[top], occur, slot < present.size() ? present[slot].count : 0);
    } else {
      const Frame f = frames[top--];
      const uint64_t bound = f.required ? f.must : f.should;
      if (top < 0)
        root = bound;
      else
        apply(frames[top], occur, bound);
    }
  }
  return root;
}

bool TreeCountFromLengths(std::span<const uint32_t> prog, std::span<const DevList> present, uint64_t* total) {
  if (prog.size() < 2 || (prog.front() & 3u) != kTreeBegin || (prog.back() & 3u) != kTreeEnd) return false;
  std::vector<uint32_t> req, should, excl;
  bool req_absent = false;
  for (size_t i = 1; i + 1 < prog.size(); ++i) {
    const uint32_t op = prog[i];
    if ((op & 3u) != kTreeTerm) return false;
    const uint32_t occur = (op >> 2) & 7u, slot = (op >> 8) & 0xffu;
    const bool required =
        occur == static_cast<uint32_t>(Occur::kMust) || occur == static_cast<uint32_t>(Occur::kFilter);
    if (slot == kTreeAbsent) {
      req_absent = req_absent || required;
      continue;
    }
    if (slot >= present.size() || present[slot].meta == nullptr) return false;
    (required ? req : occur == static_cast<uint32_t>(Occur::kShould) ? should : excl).push_back(slot);
  }
  for (auto* v : {&req, &should, &excl}) {  // a slot named twice is one list
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  if (req_absent || (req.empty() && should.empty())) {
    *total = 0;
    return true;
  }
  const std::vector<uint32_t>& one = req.empty() ? should : req;
  if (one.size() != 1 || !excl.empty()) return false;
  *total = present[one[0]].count;
  return true;
}

}  // namespace search::gpu::engine_internal
