// dispatch.cuh: the tree-path launch sequence (kernel_tree.cuh): scatter, evaluate, and the top-k
// tail (kTree) or the counts alone (kTreeCount).
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <vector>

#include "dispatch.cuh"
#include "kernel_tree.cuh"

namespace search::gpu::engine_internal {

Status EnqueueTree(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const bool topk = ph.kind == PhaseKind::kTree;
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  const uint32_t num_docs = shard.num_docs;
  std::vector<DevList> lists;
  std::vector<TreeDesc> descs(q);
  std::vector<uint32_t> progs;
  std::vector<uint64_t> caps(q);
  uint32_t max_m = 1;
  uint64_t max_nb = 1;
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    TreeDesc& d = descs[a];
    d.m = static_cast<uint32_t>(s.present.size());
    d.list_off = static_cast<uint32_t>(lists.size());
    lists.insert(lists.end(), s.present.begin(), s.present.end());
    d.prog_off = static_cast<uint32_t>(progs.size());
    d.prog_len = static_cast<uint32_t>(s.prog.size());
    progs.insert(progs.end(), s.prog.begin(), s.prog.end());
    uint64_t postings = 0;
    for (const DevList& l : s.present) {
      postings += l.count;
      max_nb = std::max<uint64_t>(max_nb, l.num_blocks);
    }
    // Every match holds a present term: at most that many keys.
    caps[a] = std::min<uint64_t>(num_docs, postings);
    max_m = std::max(max_m, d.m);
  }
  TopkPlan tp;
  if (topk) {
    SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));
    tp.max_items = num_docs;  // dense scans
  }

  QueryOut* d_out = nullptr;
  TreeDesc* d_descs = nullptr;
  DevList* d_lists = nullptr;
  uint32_t* d_progs = nullptr;
  auto layout = [&](Arena& ar) {
    d_out = topk ? TakeAnswers(ar, tp, q, ph.total_k) : ar.Take<QueryOut>(q);
    for (uint32_t a = 0; a < q; ++a) {
      descs[a].tfs = ar.Take<uint32_t>(std::max<size_t>(size_t{descs[a].m} * num_docs, 1));
      if (topk) TakeTopkZeroed(ar, tp, a);
    }
    const size_t zeroed = ar.size();
    d_descs = ar.Take<TreeDesc>(q);
    d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    d_progs = ar.Take<uint32_t>(std::max<size_t>(progs.size(), 1));
    if (topk) TakeTopkUploads(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) {
      TreeDesc& d = descs[a];
      d.out = d_out + a;
      if (topk) {
        d.scores = ar.Take<float>(std::max<uint32_t>(num_docs, 1));
        SetTopkInput(tp, ph, st, a, d.scores, nullptr, nullptr, num_docs, d.out);
      }
    }
    if (topk) TakeTopkRest(ar, tp, q);
    return zeroed;
  };
  SEARCH_ASSIGN_OR_RETURN(void* scratch, AllocateScratch(ctx, layout));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  up.Add(d_progs, progs.data(), progs.size());
  if (topk) AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  SEARCH_RETURN_IF_ERROR(Launch(TreeScatterKernel, dim3(GridFor(max_nb, kWarpsPerCta, uint64_t{q} * max_m), q, max_m),
                                stream, d_descs, d_lists, shard));
  SEARCH_RETURN_IF_ERROR(
      Launch(TreeEvalKernel, dim3(GridFor(num_docs, kThreads, q), q), stream, d_descs, d_lists, d_progs, shard));
  if (topk) return FinishTopk(ctx, tp, ph, d_out, shard.doc_begin, scratch);
  SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ph.h_out, d_out, q * sizeof(QueryOut), cudaMemcpyDeviceToHost, stream));
  SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch, stream));
  return Status::Ok();
}

}  // namespace search::gpu::engine_internal
