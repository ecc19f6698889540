// dispatch.cuh: the and launch sequence and the dense or launch sequence.
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <vector>

#include "dispatch.cuh"
#include "kernel_and.cuh"
#include "kernel_or_dense.cuh"

namespace search::gpu::engine_internal {

Status EnqueueAnd(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  std::vector<DevList> lists;
  std::vector<AndDesc> descs(q);
  std::vector<uint64_t> caps(q);
  std::vector<uint64_t> dec_blocks(q, 1), needed_len(q, 1);
  uint32_t max_n = 0;
  uint64_t max_cap = 0;
  std::vector<uint64_t> step_max_nb(kMaxSteps, 0);
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    AndDesc& d = descs[a];
    d.n = s.n;
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
    caps[a] = d.cap;
    max_cap = std::max<uint64_t>(max_cap, d.cap);
    max_n = std::max(max_n, s.n);
    for (uint32_t j = 0; j < s.n; ++j) {
      const uint64_t nb = s.present[order[j]].num_blocks;
      step_max_nb[j] = std::max(step_max_nb[j], nb);
      if (j == 0) continue;
      if (uint64_t{d.cap} >= kDenseFactor * nb) {
        d.dense_mask |= 1u << j;
        dec_blocks[a] = std::max(dec_blocks[a], nb);
      } else {
        dec_blocks[a] = std::max(dec_blocks[a], std::min<uint64_t>(nb, d.cap));
        needed_len[a] = std::max(needed_len[a], nb);
      }
    }
  }
  TopkPlan tp;
  SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));

  QueryOut* d_out = nullptr;
  AndDesc* d_descs = nullptr;
  DevList* d_lists = nullptr;
  auto layout = [&](Arena& ar) {
    d_out = TakeAnswers(ar, tp, q, ph.total_k);
    for (uint32_t a = 0; a < q; ++a) {
      descs[a].out = d_out + a;
      descs[a].counters = ar.Take<uint32_t>(2 * kMaxSteps);
      descs[a].needed = ar.Take<uint32_t>(needed_len[a]);
      TakeTopkZeroed(ar, tp, a);
    }
    const size_t zeroed = ar.size();
    d_descs = ar.Take<AndDesc>(q);
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
      Launch(AndLeadKernel, dim3(GridFor(step_max_nb[0], kWarpsPerCta, q), q), stream, d_descs, d_lists, shard));
  const dim3 cand_grid(GridFor(max_cap, kThreads, q), q);
  for (uint32_t j = 1; j < max_n; ++j) {
    SEARCH_RETURN_IF_ERROR(Launch(AndLocateKernel, cand_grid, stream, d_descs, d_lists, j));
    SEARCH_RETURN_IF_ERROR(
        Launch(AndDecodeKernel, dim3(GridFor(step_max_nb[j], kWarpsPerCta, q), q), stream, d_descs, d_lists, shard, j));
    SEARCH_RETURN_IF_ERROR(Launch(AndProbeKernel, cand_grid, stream, d_descs, d_lists, j));
  }
  SEARCH_RETURN_IF_ERROR(Launch(AndScoreKernel, cand_grid, stream, d_descs, d_lists, shard));
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
