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
  p.ids = std::move(ids);
  for (uint32_t id : p.ids) {
    p.hit_off.push_back(p.total_k);
    if (kind != PhaseKind::kTheta) p.total_k += st[id].k;
  }
  return p;
}

bool Prepare(const GpuShardView& shard, const GpuQueryInput& in, QState* s) {
  s->mode = in.mode;
  s->k = in.k;
  s->n = static_cast<uint32_t>(in.terms.size());
  s->status = ValidateK(in.k);
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
    if (t.d_blob == nullptr) {
      s->status = Status::InvalidArgument("GpuTermInput with a list but no device blob");
      return false;
    }
    DevList l;
    l.meta = reinterpret_cast<const BlockMeta*>(t.d_blob + sizeof(ListHeader));
    l.payload = t.d_blob + sizeof(ListHeader) + sizeof(BlockMeta) * size_t{t.list->num_blocks()};
    l.count = t.list->count();
    l.num_blocks = t.list->num_blocks();
    l.base_doc = t.list->base_doc();
    l.idf = t.idf;
    s->present.push_back(l);
    s->max_score.push_back(SanitizeBoundHD(t.list->max_score()));
  }
  return !in.terms.empty();
}

bool NeedTheta(QState& s, uint64_t min_postings) {
  const size_t m = s.present.size();
  if (m < 2) return false;
  uint64_t postings = 0;
  for (const DevList& l : s.present) postings += l.count;
  if (postings < min_postings) return false;
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
  for (uint32_t j = first_ess; j < m; ++j) {
    const uint32_t e = order[j];
    s.ess_mask |= 1u << e;
    s.cap += s.present[e].count;
    float rest = 0.0f;
    for (uint32_t i = 0; i < m; ++i)
      if (order[i] != e) rest += s.max_score[order[i]];
    s.rest[e] = rest;
  }
  const uint64_t ess = s.cap;
  if (s.theta > 0.0f) s.cap = std::min<uint64_t>(s.cap, o.or_candidate_cap);
  if ((s.theta > 0.0f || ess <= uint64_t{num_docs} / divisor) && s.cap < (uint64_t{1} << 30))
    s.or_path = PhaseKind::kOrPruned;
}

void AddPhases(PhaseKind kind, const std::vector<uint32_t>& ids, const std::vector<QState>& st, uint32_t num_docs,
               const GpuContextOptions& o, std::vector<Phase>* phases) {
  std::vector<uint32_t> cur;
  uint64_t cur_bytes = 0;
  for (uint32_t id : ids) {
    const uint64_t b = kind == PhaseKind::kOrDense    ? OrQueryBytes(st[id], num_docs)
                       : kind == PhaseKind::kOrPruned ? OrPrunedBytes(st[id], num_docs)
                       : kind == PhaseKind::kTheta    ? ThetaBytes(st[id], o.or_theta_sample)
                                                      : 0;
    // The pruned kernels spread a launch's work over at most kMaxSpreadQueries queries.
    const size_t max_q = kind == PhaseKind::kOrPruned || kind == PhaseKind::kTheta ? kMaxSpreadQueries : kMaxBatchY;
    if (!cur.empty() && (cur.size() >= max_q || cur_bytes + b > kOrGroupBytes)) {
      phases->push_back(MakePhase(kind, std::move(cur), st));
      cur.clear();
      cur_bytes = 0;
    }
    cur.push_back(id);
    cur_bytes += b;
  }
  if (!cur.empty()) phases->push_back(MakePhase(kind, std::move(cur), st));
}

void PlanSteps(const QState& s, OrPDesc& d, OrPList* pl, bool progressive) {
  const uint32_t m = d.m;
  std::vector<uint32_t> order(m);
  for (uint32_t i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
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

}  // namespace search::gpu::engine_internal
