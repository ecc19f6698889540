// dispatch.cuh: the and launch sequence and the dense or launch sequence.
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/score_slack.hpp"

#include "dispatch.cuh"
#include "kernel_and.cuh"
#include "kernel_or_dense.cuh"

namespace search::gpu::engine_internal {

Status EnqueueAnd(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  std::vector<DevList> lists;
  std::vector<AndDesc> descs(q), samples(q);  // a sample desc has n == 0 unless its query is bounded
  std::vector<uint64_t> caps(q);
  std::vector<uint64_t> dec_blocks(q, 1), needed_len(q, 1);
  uint32_t max_n = 0, max_sample_n = 0;
  uint64_t max_cap = 0, max_lead = 0, max_sample_cap = 0;
  std::vector<uint64_t> step_max_nb(kMaxSteps, 0);
  uint64_t bounded = 0;
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    AndDesc& d = descs[a];
    d.n = s.n;
    d.k = s.k;
    d.list_off = static_cast<uint32_t>(lists.size());
    lists.insert(lists.end(), s.present.begin(), s.present.end());
    std::vector<uint32_t> order(s.n);
    for (uint32_t i = 0; i < s.n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t x, uint32_t y) { return s.present[x].count < s.present[y].count; });
    for (uint32_t j = 0; j < s.n; ++j) {
      d.step_slot[j] = static_cast<uint8_t>(order[j]);
      d.slot_step[order[j]] = static_cast<uint8_t>(j);
    }
    d.cap = s.present[order[0]].count;
    d.pos_stride = d.cap;
    caps[a] = d.cap;
    max_cap = std::max<uint64_t>(max_cap, d.cap);
    max_n = std::max(max_n, s.n);
    for (uint32_t j = 0; j < s.n; ++j) {
      const uint64_t nb = s.present[order[j]].num_blocks;
      step_max_nb[j] = std::max(step_max_nb[j], nb);
      if (j == 0) continue;
      needed_len[a] = std::max(needed_len[a], nb);  // a list may be decoded in part when few candidates are left
      if (uint64_t{d.cap} >= kDenseFactor * nb) {
        d.dense_mask |= 1u << j;
        dec_blocks[a] = std::max(dec_blocks[a], nb);
      } else {
        dec_blocks[a] = std::max(dec_blocks[a], std::min<uint64_t>(nb, d.cap));
      }
    }
    const uint32_t want = AndSampleWant(s, shard.num_docs, ctx.options.and_bound_min_lead);
    if (want == 0) continue;
    ++bounded;
    d.lead_count = d.cap;
    d.sample_want = want;
    d.slack = ScoreSlack(s.n);
    const float lead_max = s.max_score[order[0]];
    d.lead_scale = std::isfinite(lead_max) && lead_max > 0.0f ? static_cast<float>(kLeadBins) / lead_max : 0.0f;
    float after = 0.0f;
    for (uint32_t j = s.n; j-- > 0;) {
      d.rest[j] = after;
      after += s.max_score[order[j]];
    }
    AndDesc& sd = samples[a];
    sd = d;
    sd.sample = 1;
    sd.dense_mask = 0;
    sd.cap = static_cast<uint32_t>(std::min<uint64_t>(uint64_t{2} * want, d.cap));
    max_lead = std::max<uint64_t>(max_lead, d.cap);
    max_sample_cap = std::max<uint64_t>(max_sample_cap, sd.cap);
    max_sample_n = std::max(max_sample_n, s.n);
  }
  Counters().and_bounded.fetch_add(bounded, std::memory_order_relaxed);
  TopkPlan tp;
  SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));

  QueryOut* d_out = nullptr;
  AndDesc* d_descs = nullptr;
  AndDesc* d_samples = nullptr;
  DevList* d_lists = nullptr;
  auto layout = [&](Arena& ar) {
    d_out = TakeAnswers(ar, tp, q, ph.total_k);
    for (uint32_t a = 0; a < q; ++a) {
      AndDesc& d = descs[a];
      AndDesc& sd = samples[a];
      d.out = d_out + a;
      sd.out = d_out + a;
      d.counters = ar.Take<uint32_t>(2 * kMaxSteps);
      d.needed = ar.Take<uint32_t>(needed_len[a]);
      TakeTopkZeroed(ar, tp, a);
      if (sd.n != 0) {
        sd.counters = ar.Take<uint32_t>(2 * kMaxSteps);
        d.lead_hist = ar.Take<uint32_t>(kLeadBins);
        d.theta = ar.Take<float>(1);
      }
    }
    const size_t zeroed = ar.size();
    d_descs = ar.Take<AndDesc>(q);
    d_samples = ar.Take<AndDesc>(q);
    d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    TakeTopkUploads(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) {
      AndDesc& d = descs[a];
      for (int b = 0; b < 2; ++b) {
        d.cand_doc[b] = ar.Take<uint32_t>(d.cap);
        d.cand_orig[b] = ar.Take<uint32_t>(d.cap);
      }
      d.cand_block = ar.Take<uint32_t>(d.cap);
      d.posmat = ar.Take<uint32_t>(size_t{d.n - 1} * d.cap + 1);
      d.decoded = ar.Take<uint32_t>(dec_blocks[a] * kBlockSize);
      d.slot_of = ar.Take<uint32_t>(needed_len[a]);
      d.scores = ar.Take<float>(d.cap);
      d.docs = ar.Take<uint32_t>(d.cap);
      SetTopkInput(tp, ph, st, a, d.scores, d.docs, d.counters + (d.n - 1), d.cap, d.out);
      AndDesc& sd = samples[a];
      if (sd.n == 0) continue;
      d.lead_doc = ar.Take<uint32_t>(d.lead_count);
      d.lead_score = ar.Take<float>(d.lead_count);
      d.bound = ar.Take<float>(d.lead_count);
      d.sample_bin = ar.Take<uint32_t>(1);
      for (int b = 0; b < 2; ++b) {
        sd.cand_doc[b] = ar.Take<uint32_t>(sd.cap);
        sd.cand_orig[b] = ar.Take<uint32_t>(sd.cap);
      }
      sd.cand_block = ar.Take<uint32_t>(sd.cap);
      sd.scores = ar.Take<float>(sd.cap);
      sd.docs = ar.Take<uint32_t>(sd.cap);
      // Shared with the main desc, which runs after it: the lead, the block buffers (the sample's
      // candidates are among the main desc's) and the positions (the same values by cand_orig).
      sd.lead_doc = d.lead_doc;
      sd.lead_score = d.lead_score;
      sd.lead_hist = d.lead_hist;
      sd.sample_bin = d.sample_bin;
      sd.posmat = d.posmat;
      sd.decoded = d.decoded;
      sd.needed = d.needed;
      sd.slot_of = d.slot_of;
      sd.theta = nullptr;  // the sample itself is not bounded
    }
    TakeTopkRest(ar, tp, q);
    return zeroed;
  };
  SEARCH_ASSIGN_OR_RETURN(void* scratch, AllocateScratch(ctx, layout));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_samples, samples.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));

  SEARCH_RETURN_IF_ERROR(
      Launch(AndLeadKernel, dim3(GridFor(step_max_nb[0], kWarpsPerCta, q), q), stream, d_descs, d_lists, shard));
  auto steps = [&](const AndDesc* dd, uint32_t n, uint64_t cap) -> Status {
    const dim3 cand_grid(GridFor(cap, kThreads, q), q);
    for (uint32_t j = 1; j < n; ++j) {
      SEARCH_RETURN_IF_ERROR(Launch(AndLocateKernel, cand_grid, stream, dd, d_lists, j));
      SEARCH_RETURN_IF_ERROR(
          Launch(AndDecodeKernel, dim3(GridFor(step_max_nb[j], kWarpsPerCta, q), q), stream, dd, d_lists, shard, j));
      SEARCH_RETURN_IF_ERROR(Launch(AndProbeKernel, cand_grid, stream, dd, d_lists, j));
    }
    return Launch(AndScoreKernel, cand_grid, stream, dd, d_lists, shard);
  };
  if (bounded != 0) {
    const dim3 lead_grid(GridFor(max_lead, kThreads, q), q);
    SEARCH_RETURN_IF_ERROR(Launch(AndSampleBinKernel, dim3(1, q), stream, d_descs));
    SEARCH_RETURN_IF_ERROR(Launch(AndFilterKernel, lead_grid, stream, d_samples));
    SEARCH_RETURN_IF_ERROR(steps(d_samples, max_sample_n, max_sample_cap));
    SEARCH_RETURN_IF_ERROR(Launch(AndThetaKernel, dim3(1, q), stream, d_samples, d_descs));
    SEARCH_RETURN_IF_ERROR(Launch(AndFilterKernel, lead_grid, stream, d_descs));
  }
  SEARCH_RETURN_IF_ERROR(steps(d_descs, max_n, max_cap));
  return FinishTopk(ctx, tp, ph, d_out, shard.doc_begin, scratch);
}

Status EnqueueOr(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  std::vector<DevList> lists;
  std::vector<OrDesc> descs(q);
  std::vector<uint64_t> caps(q);
  uint32_t max_m = 0;
  std::vector<uint64_t> slot_max_nb(kMaxSteps, 0);
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    OrDesc& d = descs[a];
    d.m = static_cast<uint32_t>(s.present.size());
    d.list_off = static_cast<uint32_t>(lists.size());
    lists.insert(lists.end(), s.present.begin(), s.present.end());
    uint64_t postings = 0;
    for (uint32_t i = 0; i < d.m; ++i) {
      postings += s.present[i].count;
      slot_max_nb[i] = std::max<uint64_t>(slot_max_nb[i], s.present[i].num_blocks);
    }
    caps[a] = std::min<uint64_t>(shard.num_docs, postings);
    max_m = std::max(max_m, d.m);
  }
  TopkPlan tp;
  SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));
  tp.max_items = shard.num_docs;  // dense scans

  QueryOut* d_out = nullptr;
  OrDesc* d_descs = nullptr;
  DevList* d_lists = nullptr;
  auto layout = [&](Arena& ar) {
    d_out = TakeAnswers(ar, tp, q, ph.total_k);
    for (uint32_t a = 0; a < q; ++a) TakeTopkZeroed(ar, tp, a);
    const size_t zeroed = ar.size();
    d_descs = ar.Take<OrDesc>(q);
    d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    TakeTopkUploads(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) {
      OrDesc& d = descs[a];
      d.out = d_out + a;
      d.acc = ar.Take<float>(std::max<uint32_t>(shard.num_docs, 1));
      SetTopkInput(tp, ph, st, a, d.acc, nullptr, nullptr, shard.num_docs, d.out);
    }
    TakeTopkRest(ar, tp, q);
    return zeroed;
  };
  SEARCH_ASSIGN_OR_RETURN(void* scratch, AllocateScratch(ctx, layout));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  SEARCH_RETURN_IF_ERROR(
      Launch(OrFillKernel, dim3(GridFor(shard.num_docs, kThreads, q), q), stream, d_descs, shard.num_docs));
  for (uint32_t s = 0; s < max_m; ++s) {  // canonical slot order: the float adds of the CPU engine
    SEARCH_RETURN_IF_ERROR(Launch(OrAccumulateKernel, dim3(GridFor(slot_max_nb[s], kWarpsPerCta, q), q), stream,
                                  d_descs, d_lists, shard, s));
  }
  return FinishTopk(ctx, tp, ph, d_out, shard.doc_begin, scratch);
}

}  // namespace search::gpu::engine_internal
