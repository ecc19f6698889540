// dispatch.cuh: the theta round and the pruned or launch sequence (kernel_or.cuh).
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <vector>

#include "core/score_slack.hpp"
#include "dispatch.cuh"
#include "kernel_or.cuh"

namespace search::gpu::engine_internal {
namespace {

// Per-list scratch of the locate/decode/probe kernels for `cap` candidates (zeroed part, rest);
// engine_plan.cpp's ProbeBytes bounds it.
void TakeProbeZeroed(Arena& ar, OrPList& pl, const DevList& l) {
  pl.needed = pl.dense ? nullptr : ar.Take<uint32_t>(l.num_blocks);
}
void TakeProbeRest(Arena& ar, OrPList& pl, const DevList& l, uint64_t cap) {
  const uint64_t slots = pl.dense ? l.num_blocks : std::min<uint64_t>(l.num_blocks, cap);
  pl.decoded = ar.Take<uint32_t>(std::max<uint64_t>(slots, 1) * kBlockSize);
  pl.slot_of = pl.dense ? nullptr : ar.Take<uint32_t>(l.num_blocks);
  pl.need_list = pl.dense ? nullptr : ar.Take<uint32_t>(std::max<uint64_t>(slots, 1));
}

}  // namespace

Status EnqueueTheta(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  const uint32_t sample = ctx.options.or_theta_sample;
  const uint64_t scap = SampleCap(sample);
  std::vector<ThetaDesc> descs(q);
  std::vector<OrPDesc> sdescs(q);
  std::vector<DevList> lists;
  std::vector<OrPList> plists;
  uint64_t max_nb = 1, sum_all_nb = 0;
  uint32_t max_m = 1;
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    const uint32_t slot = ph.theta_slot[a];
    descs[a].list = s.present[slot];
    descs[a].slot = slot;
    descs[a].k = s.k;
    descs[a].sample = sample;
    // The list's k-th best contribution bounds theta when each of its postings is a match: not with
    // must_not lists (they may exclude its documents), nor a RequiredOr's should list (the must
    // list may lack them): the sample's exact scores only (the must list's probe drops those).
    descs[a].contrib_bound = s.excl_mask == 0 && (!s.required_or || slot == s.req_slot) ? 1u : 0u;
    // A single list's k best contributions are its k best scores: its k highest block maxima's
    // blocks hold a tight theta (the sample adds nothing); several lists read `sample` blocks.
    // A single scoring list with must_not lists (`+a -b`): its best documents less the excluded
    // ones, so 4k blocks and a sample of 4k (the sample's live k-th best is theta).
    const bool one_scoring = s.present.size() - static_cast<size_t>(__builtin_popcount(s.excl_mask)) == 1;
    descs[a].blocks = s.present.size() == 1 ? s.k : one_scoring ? 4 * s.k : std::max(s.k, sample);
    if (one_scoring && s.excl_mask != 0) descs[a].sample = std::min(sample, 4 * s.k);
    max_nb = std::max<uint64_t>(max_nb, descs[a].list.num_blocks);
    OrPDesc& d = sdescs[a];
    d.m = static_cast<uint32_t>(s.present.size());
    d.list_off = static_cast<uint32_t>(lists.size());
    d.cap = static_cast<uint32_t>(std::min<uint64_t>(SampleCap(descs[a].sample), descs[a].list.count));  // from it
    max_m = std::max(max_m, d.m);
    for (uint32_t i = 0; i < d.m; ++i) {
      const DevList& l = s.present[i];
      lists.push_back(l);
      OrPList pl;
      // The theta list holds every sampled document at a known position: never decoded for them.
      pl.dense = i != slot && ProbeDense(d.cap, l) ? 1u : 0u;
      pl.exclude = (s.excl_mask >> i) & 1u;
      pl.require = s.required_or && i == s.req_slot ? 1u : 0u;
      plists.push_back(pl);
      sum_all_nb += std::min<uint64_t>(l.num_blocks, d.cap);  // blocks decoded at most
    }
  }
  QueryOut* d_out = nullptr;
  ThetaDesc* d_descs = nullptr;
  OrPDesc* d_sdescs = nullptr;
  DevList* d_lists = nullptr;
  OrPList* d_plists = nullptr;
  auto layout = [&](Arena& ar) {
    d_out = ar.Take<QueryOut>(q);  // zeroed first
    for (uint32_t a = 0; a < q; ++a) {
      descs[a].out = d_out + a;
      descs[a].hist = ar.Take<uint32_t>(kHistBins);
      descs[a].block_hist = ar.Take<uint32_t>(kHistBins);
      OrPDesc& d = sdescs[a];
      d.out = d_out + a;
      d.counters = ar.Take<uint32_t>(1 + d.m);
      for (uint32_t i = 0; i < d.m; ++i) TakeProbeZeroed(ar, plists[d.list_off + i], lists[d.list_off + i]);
    }
    const size_t zeroed = ar.size();
    d_descs = ar.Take<ThetaDesc>(q);
    d_sdescs = ar.Take<OrPDesc>(q);
    d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    d_plists = ar.Take<OrPList>(std::max<size_t>(plists.size(), 1));
    for (uint32_t a = 0; a < q; ++a) {
      descs[a].block_bin = ar.Take<uint32_t>(1);
      descs[a].sample_bin = ar.Take<uint32_t>(1);
      OrPDesc& d = sdescs[a];
      d.cand = ar.Take<uint32_t>(d.cap);
      d.src = ar.Take<uint8_t>(d.cap);
      d.scores = ar.Take<float>(d.cap);
      d.pos = ar.Take<uint32_t>(size_t{d.m} * d.cap);
      for (uint32_t i = 0; i < d.m; ++i) TakeProbeRest(ar, plists[d.list_off + i], lists[d.list_off + i], d.cap);
    }
    return zeroed;
  };
  SEARCH_ASSIGN_OR_RETURN(void* scratch, AllocateScratch(ctx, layout));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_sdescs, sdescs.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  up.Add(d_plists, plists.data(), plists.size());
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  SEARCH_RETURN_IF_ERROR(Launch(ThetaBlockHistKernel, dim3(GridFor(max_nb, kThreads, q), q), stream, d_descs));
  SEARCH_RETURN_IF_ERROR(Launch(ThetaBlockSelectKernel, dim3(1, q), stream, d_descs));
  SEARCH_RETURN_IF_ERROR(Launch(ThetaHistKernel, dim3(GridFor(max_nb, kWarpsPerCta, q), q), stream, d_descs, shard));
  SEARCH_RETURN_IF_ERROR(Launch(ThetaSelectKernel, dim3(1, q), stream, d_descs));
  SEARCH_RETURN_IF_ERROR(
      Launch(SampleGatherKernel, dim3(GridFor(max_nb, kWarpsPerCta, q), q), stream, d_descs, d_sdescs, shard));
  // Every list at once (z = slot), each spread over the batch.
  const uint32_t cand_grid = SpreadGrid(scap * q, kThreads);
  SEARCH_RETURN_IF_ERROR(
      Launch(OrLocateKernel, dim3(cand_grid, 1, max_m), stream, d_sdescs, q, d_lists, d_plists, kNone));
  SEARCH_RETURN_IF_ERROR(Launch(OrDecodeKernel, dim3(SpreadGrid(sum_all_nb, kWarpsPerCta), 1, max_m), stream, d_sdescs,
                                q, d_lists, d_plists, shard, kNone));
  SEARCH_RETURN_IF_ERROR(
      Launch(OrProbeKernel, dim3(cand_grid, 1, max_m), stream, d_sdescs, q, d_lists, d_plists, shard, kNone));
  SEARCH_RETURN_IF_ERROR(Launch(OrScoreKernel, dim3(GridFor(scap, kThreads, q), q), stream, d_sdescs, d_lists, shard));
  SEARCH_RETURN_IF_ERROR(Launch(SampleThetaKernel, dim3(1, q), stream, d_descs, d_sdescs));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ph.h_out, d_out, q * sizeof(QueryOut), cudaMemcpyDeviceToHost, stream));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch, stream));
  return Status::Ok();
}

Status EnqueueTopBlocks(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st,
                        const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  std::vector<ThetaDesc> tdescs(q);
  std::vector<TopBlocksDesc> gdescs(q);
  std::vector<uint64_t> caps(q);
  uint64_t max_nb = 1;
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    ThetaDesc& t = tdescs[a];
    t.list = s.present[0];
    t.k = s.k;
    t.blocks = s.k;
    gdescs[a].cap = TopBlocksCap(s);
    caps[a] = gdescs[a].cap;
    max_nb = std::max<uint64_t>(max_nb, t.list.num_blocks);
  }
  TopkPlan tp;
  SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));
  QueryOut* d_out = nullptr;
  ThetaDesc* d_tdescs = nullptr;
  TopBlocksDesc* d_gdescs = nullptr;
  auto layout = [&](Arena& ar) {
    d_out = TakeAnswers(ar, tp, q, ph.total_k);
    for (uint32_t a = 0; a < q; ++a) {
      tdescs[a].out = d_out + a;
      tdescs[a].block_hist = ar.Take<uint32_t>(kHistBins);
      gdescs[a].count = ar.Take<uint32_t>(1);
      TakeTopkZeroed(ar, tp, a);
    }
    const size_t zeroed = ar.size();
    d_tdescs = ar.Take<ThetaDesc>(q);
    d_gdescs = ar.Take<TopBlocksDesc>(q);
    TakeTopkUploads(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) {
      TopBlocksDesc& g = gdescs[a];
      tdescs[a].block_bin = ar.Take<uint32_t>(1);
      g.docs = ar.Take<uint32_t>(g.cap);
      g.scores = ar.Take<float>(g.cap);
      SetTopkInput(tp, ph, st, a, g.scores, g.docs, g.count, g.cap, d_out + a);
    }
    TakeTopkRest(ar, tp, q);
    return zeroed;
  };
  SEARCH_ASSIGN_OR_RETURN(void* scratch, AllocateScratch(ctx, layout));
  Uploads up;
  up.Add(d_tdescs, tdescs.data(), q);
  up.Add(d_gdescs, gdescs.data(), q);
  AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  SEARCH_RETURN_IF_ERROR(Launch(ThetaBlockHistKernel, dim3(GridFor(max_nb, kThreads, q), q), stream, d_tdescs));
  SEARCH_RETURN_IF_ERROR(Launch(ThetaBlockSelectKernel, dim3(1, q), stream, d_tdescs));
  SEARCH_RETURN_IF_ERROR(Launch(TopBlocksGatherKernel, dim3(GridFor(max_nb, kWarpsPerCta, q), q), stream, d_tdescs,
                                d_gdescs, shard));
  return FinishTopk(ctx, tp, ph, d_out, shard.doc_begin, scratch);
}

Status EnqueueOrPruned(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  std::vector<DevList> lists;
  std::vector<OrPList> plists;
  std::vector<OrPDesc> descs(q);
  std::vector<uint64_t> caps(q);
  uint32_t max_m = 0;
  uint64_t sum_cap = 0, sum_ess_nb = 0, sum_nb = 0;
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    OrPDesc& d = descs[a];
    d.m = static_cast<uint32_t>(s.present.size());
    d.list_off = static_cast<uint32_t>(lists.size());
    d.cap = static_cast<uint32_t>(s.cap);
    d.theta = s.theta;
    d.slack = ScoreSlack(s.n);
    lists.insert(lists.end(), s.present.begin(), s.present.end());
    uint64_t step_nb = 1;
    for (uint32_t i = 0; i < d.m; ++i) {
      OrPList pl;
      pl.essential = (s.ess_mask >> i) & 1u;
      pl.exclude = (s.excl_mask >> i) & 1u;
      pl.require = s.required_or && i == s.req_slot ? 1u : 0u;
      pl.rest = s.rest[i];
      pl.omit = s.omit[i];
      // With theta the candidates are few next to the bound on them: only needed blocks decoded.
      pl.dense = s.theta <= 0.0f && ProbeDense(s.cap, s.present[i]) ? 1u : 0u;
      if (pl.essential) {
        pl.ess_off = d.ess_blocks;
        d.ess_blocks += s.present[i].num_blocks;
      }
      plists.push_back(pl);
      // Blocks decoded for probing: at most one per candidate unless dense (the largest step).
      step_nb = std::max<uint64_t>(
          step_nb, pl.dense ? s.present[i].num_blocks : std::min<uint64_t>(s.present[i].num_blocks, s.cap));
    }
    d.bounded = s.bounded ? 1u : 0u;
    d.probe_bound = ctx.options.or_probe_block_bound && s.theta > 0.0f ? 1u : 0u;
    sum_nb += step_nb;
    sum_ess_nb += d.ess_blocks;
    PlanSteps(s, d, plists.data() + d.list_off, s.theta > 0.0f);
    caps[a] = s.cap;
    sum_cap += s.cap;
    max_m = std::max(max_m, d.m);
  }
  TopkPlan tp;
  SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));
  const size_t bitmap_words = (size_t{shard.num_docs} + 31) / 32;

  QueryOut* d_out = nullptr;
  OrPDesc* d_descs = nullptr;
  DevList* d_lists = nullptr;
  OrPList* d_plists = nullptr;
  auto layout = [&](Arena& ar) {
    d_out = TakeAnswers(ar, tp, q, ph.total_k);  // zeroed first
    for (uint32_t a = 0; a < q; ++a) {
      OrPDesc& d = descs[a];
      d.out = d_out + a;
      d.bitmap = ar.Take<uint32_t>(bitmap_words);
      d.counters = ar.Take<uint32_t>(1 + d.m);
      for (uint32_t i = 0; i < d.m; ++i) TakeProbeZeroed(ar, plists[d.list_off + i], lists[d.list_off + i]);
      TakeTopkZeroed(ar, tp, a);
    }
    const size_t zeroed = ar.size();
    d_descs = ar.Take<OrPDesc>(q);
    d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    d_plists = ar.Take<OrPList>(std::max<size_t>(plists.size(), 1));
    TakeTopkUploads(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) {
      OrPDesc& d = descs[a];
      d.cand = ar.Take<uint32_t>(std::max<uint32_t>(d.cap, 1));
      d.src = ar.Take<uint8_t>(std::max<uint32_t>(d.cap, 1));
      d.scores = ar.Take<float>(std::max<uint32_t>(d.cap, 1));
      d.pos = ar.Take<uint32_t>(std::max<size_t>(size_t{d.m} * d.cap, 1));
      for (uint32_t i = 0; i < d.m; ++i) TakeProbeRest(ar, plists[d.list_off + i], lists[d.list_off + i], d.cap);
      SetTopkInput(tp, ph, st, a, d.scores, d.cand, d.counters, d.cap, d.out);
    }
    TakeTopkRest(ar, tp, q);
    return zeroed;
  };
  SEARCH_ASSIGN_OR_RETURN(void* scratch, AllocateScratch(ctx, layout));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  up.Add(d_plists, plists.data(), plists.size());
  AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  SEARCH_RETURN_IF_ERROR(
      Launch(OrGatherKernel, dim3(SpreadGrid(sum_ess_nb, kWarpsPerCta)), stream, d_descs, q, d_lists, d_plists, shard));
  SEARCH_RETURN_IF_ERROR(Launch(OrDropOverflowKernel, dim3(GridFor(q, kThreads)), stream, d_descs, q));
  // A step per list (PlanSteps' order), each kernel spread over the batch.
  const uint32_t cand_grid = SpreadGrid(sum_cap, kThreads);
  const uint32_t decode_grid = SpreadGrid(sum_nb, kWarpsPerCta);
  for (uint32_t t = 0; t < max_m; ++t) {
    SEARCH_RETURN_IF_ERROR(Launch(OrLocateKernel, dim3(cand_grid), stream, d_descs, q, d_lists, d_plists, t));
    SEARCH_RETURN_IF_ERROR(Launch(OrDecodeKernel, dim3(decode_grid), stream, d_descs, q, d_lists, d_plists, shard, t));
    SEARCH_RETURN_IF_ERROR(Launch(OrProbeKernel, dim3(cand_grid), stream, d_descs, q, d_lists, d_plists, shard, t));
  }
  SEARCH_RETURN_IF_ERROR(
      Launch(OrScoreKernel, dim3(GridFor(sum_cap / q, kThreads, q), q), stream, d_descs, d_lists, shard));
  return FinishTopk(ctx, tp, ph, d_out, shard.doc_begin, scratch);
}

}  // namespace search::gpu::engine_internal
