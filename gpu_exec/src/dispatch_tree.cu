// dispatch.cuh: the tree-path launch sequence (kernel_tree.cuh): per query a bit per shard document
// and slot (scatter), the program on words (the count); with a top-k the matches ranked, their
// tfs gathered compactly (fill) and scored, then the top-k tail (kTree); kTreeCount stops at the
// counts.
// Status is [[nodiscard]]; nvcc flags assignments to Status members (operator= returns one).
#pragma nv_diag_suppress 2810

#include <algorithm>
#include <cstddef>
#include <vector>

#include "dispatch.cuh"
#include "dispatch_phrase.cuh"
#include "kernel_tree.cuh"

namespace search::gpu::engine_internal {
namespace {

// The slots whose tf can reach a document's score: every clause on the way from the root is a
// must or should clause (a must_not or filter clause, or anything inside one, adds nothing).
uint32_t ScoringSlots(const std::vector<uint32_t>& prog) {
  std::vector<uint32_t> group_occur(prog.size(), 0);  // a boolean's occurrence, from its end
  std::vector<size_t> open;
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const uint32_t kind = prog[pc] & 3u;
    if (kind == kTreeBegin) {
      open.push_back(pc);
    } else if (kind == kTreeEnd) {
      if (open.empty()) return ~0u;  // not a program CompileTree makes: every slot
      group_occur[open.back()] = (prog[pc] >> 2) & 7u;
      open.pop_back();
    }
  }
  auto adds = [](uint32_t occur) {
    return occur == static_cast<uint32_t>(Occur::kMust) || occur == static_cast<uint32_t>(Occur::kShould);
  };
  uint32_t mask = 0;
  std::vector<bool> scoring;  // per open boolean: its sum reaches the score
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const uint32_t op = prog[pc], kind = op & 3u, occur = (op >> 2) & 7u, slot = (op >> 8) & 0xffu;
    if (kind == kTreeBegin) {
      scoring.push_back(scoring.empty() || (scoring.back() && adds(group_occur[pc])));
    } else if (kind == kTreeTerm) {
      if (!scoring.empty() && scoring.back() && adds(occur) && slot < 32) mask |= 1u << slot;
    } else if (!scoring.empty()) {
      scoring.pop_back();
    }
  }
  return mask;
}

}  // namespace

Status EnqueueTree(GpuContext::Impl& ctx, const ShardDev& shard, const std::vector<QState>& st, const Phase& ph) {
  cudaStream_t stream = ctx.stream.get();
  const bool topk = ph.kind == PhaseKind::kTree;
  const uint32_t q = static_cast<uint32_t>(ph.ids.size());
  const uint32_t num_docs = shard.num_docs;
  const size_t words = (size_t{num_docs} + 31) / 32;
  const size_t chunks = (words + kThreads - 1) / kThreads;
  std::vector<DevList> lists;
  std::vector<TreeDesc> descs(q);
  std::vector<uint32_t> progs;
  std::vector<uint64_t> caps(q);
  uint32_t max_m = 1;
  uint64_t max_nb = 1, max_leaf = 1;
  for (uint32_t a = 0; a < q; ++a) {
    const QState& s = st[ph.ids[a]];
    TreeDesc& d = descs[a];
    d.m = static_cast<uint32_t>(s.present.size());
    d.list_off = static_cast<uint32_t>(lists.size());
    lists.insert(lists.end(), s.present.begin(), s.present.end());
    d.prog_off = static_cast<uint32_t>(progs.size());
    d.prog_len = static_cast<uint32_t>(s.prog.size());
    progs.insert(progs.end(), s.prog.begin(), s.prog.end());
    for (const DevList& l : s.present) {
      max_nb = std::max<uint64_t>(max_nb, l.num_blocks);
      if (l.meta == nullptr) max_leaf = std::max<uint64_t>(max_leaf, l.count);
    }
    d.cap = static_cast<uint32_t>(std::min<uint64_t>(num_docs, TreeMatchBound(s.prog, s.present)));
    d.score_mask = ScoringSlots(s.prog);
    caps[a] = d.cap;
    max_m = std::max(max_m, d.m);
  }
  std::vector<TreeLeaf> leaves(lists.size());  // term slots: none
  // Phrase slots: the producer's compact arrays (dispatch_phrase.cuh), freed on the stream when
  // `phrases` goes out of scope, after every launch below.
  PhraseBatch phrases;
  SEARCH_RETURN_IF_ERROR(phrases.Enqueue(ctx, st, ph));
  for (uint32_t a = 0; a < q; ++a) {
    const std::vector<PhraseLeaf>& pl = st[ph.ids[a]].phrases;
    for (uint32_t j = 0; j < pl.size(); ++j) {
      const PhraseOut o = phrases.Out(a, j);
      leaves[descs[a].list_off + pl[j].slot] = TreeLeaf{o.docs, o.tfs, o.d_len, o.cap};
    }
  }
  TopkPlan tp;
  if (topk) SEARCH_RETURN_IF_ERROR(PrepareTopk(tp, caps, stream));

  QueryOut* d_out = nullptr;
  TreeDesc* d_descs = nullptr;
  DevList* d_lists = nullptr;
  TreeLeaf* d_leaves = nullptr;
  uint32_t* d_progs = nullptr;
  auto layout = [&](Arena& ar) {
    d_out = topk ? TakeAnswers(ar, tp, q, ph.total_k) : ar.Take<QueryOut>(q);
    for (uint32_t a = 0; a < q; ++a) {
      descs[a].bits = ar.Take<uint32_t>(std::max<size_t>(size_t{descs[a].m} * words, 1));
      if (topk) TakeTopkZeroed(ar, tp, a);
    }
    const size_t zeroed = ar.size();
    d_descs = ar.Take<TreeDesc>(q);
    d_lists = ar.Take<DevList>(std::max<size_t>(lists.size(), 1));
    d_leaves = ar.Take<TreeLeaf>(std::max<size_t>(leaves.size(), 1));
    d_progs = ar.Take<uint32_t>(std::max<size_t>(progs.size(), 1));
    if (topk) TakeTopkUploads(ar, tp, q);
    for (uint32_t a = 0; a < q; ++a) {
      TreeDesc& d = descs[a];
      d.out = d_out + a;
      if (!topk) continue;
      const size_t cap = std::max<uint32_t>(d.cap, 1);
      d.match = ar.Take<uint32_t>(std::max<size_t>(words, 1));
      d.wpre = ar.Take<uint32_t>(std::max<size_t>(words, 1));
      d.chunk_base = ar.Take<uint32_t>(std::max<size_t>(chunks, 1));
      d.tfc = ar.Take<uint32_t>(size_t{d.m} * cap);
      d.docs = ar.Take<uint32_t>(cap);
      d.scores = ar.Take<float>(cap);
      const auto* d_total =
          reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(d.out) + offsetof(QueryOut, total));
      SetTopkInput(tp, ph, st, a, d.scores, d.docs, d_total, d.cap, d.out);
    }
    if (topk) TakeTopkRest(ar, tp, q);
    return zeroed;
  };
  SEARCH_ASSIGN_OR_RETURN(void* scratch, AllocateScratch(ctx, layout));
  Uploads up;
  up.Add(d_descs, descs.data(), q);
  up.Add(d_lists, lists.data(), lists.size());
  up.Add(d_leaves, leaves.data(), leaves.size());
  up.Add(d_progs, progs.data(), progs.size());
  if (topk) AddTopkUploads(up, tp, q);
  SEARCH_RETURN_IF_ERROR(up.Flush(ctx, stream));
  // Slots: a warp per block of a list, a thread per entry of a decoded leaf.
  const uint64_t slots = uint64_t{q} * max_m;
  const dim3 slot_grid(std::max(GridFor(max_nb, kWarpsPerCta, slots), GridFor(max_leaf, kThreads, slots)), q, max_m);
  const dim3 word_grid(GridFor(words, kThreads, q), q);
  SEARCH_RETURN_IF_ERROR(Launch(TreeScatterKernel, slot_grid, stream, d_descs, d_lists, d_leaves, shard));
  if (!topk) {
    SEARCH_RETURN_IF_ERROR(Launch(TreeEvalKernel<false>, word_grid, stream, d_descs, d_progs, shard));
    SEARCH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ph.h_out, d_out, q * sizeof(QueryOut), cudaMemcpyDeviceToHost, stream));
    SEARCH_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch, stream));
    return Status::Ok();  // phrase leaves (GA): release them here and after FinishTopk
  }
  SEARCH_RETURN_IF_ERROR(Launch(TreeEvalKernel<true>, word_grid, stream, d_descs, d_progs, shard));
  SEARCH_RETURN_IF_ERROR(Launch(TreeChunkScanKernel, dim3(1, q), stream, d_descs, shard));
  SEARCH_RETURN_IF_ERROR(Launch(TreeFillKernel, slot_grid, stream, d_descs, d_lists, d_leaves, shard));
  SEARCH_RETURN_IF_ERROR(Launch(TreeScoreKernel, word_grid, stream, d_descs, d_lists, d_progs, shard));
  return FinishTopk(ctx, tp, ph, d_out, shard.doc_begin, scratch);
}

}  // namespace search::gpu::engine_internal
