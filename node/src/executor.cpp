// CpuExecutorAdapter (see node/executor.hpp).
#include "node/executor.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "core/query_tree.hpp"
#include "index_store/shard_store.hpp"

namespace search {

ExecTiming& ExecTiming::operator+=(const ExecTiming& o) {
  features_us += o.features_us;
  submit_us += o.submit_us;
  wait_us += o.wait_us;
  run_us += o.run_us;
  return_us += o.return_us;
  resolve_us += o.resolve_us;
  gpu_batch = std::max(gpu_batch, o.gpu_batch);
  migrated = migrated || o.migrated;
  stolen = stolen || o.stolen;
  retried = retried || o.retried;
  return *this;
}

namespace {
// The distinct term leaves' tokens and the distinct phrases (as their keys) of a tree.
void TreeSlots(const QueryNode& node, std::vector<std::string>* keys) {
  if (node.kind == QueryNode::Kind::kTerm) keys->push_back(node.tokens.empty() ? std::string() : node.tokens[0]);
  if (node.kind == QueryNode::Kind::kPhrase) keys->push_back(CanonicalKey(node));
  for (const QueryNode::Clause& c : node.clauses) TreeSlots(c.node, keys);
}
}  // namespace

std::optional<GpuUnsupportedReason> GpuUnsupported(const Query& query) {
  if (query.tree == nullptr || !TreeHasPhrase(*query.tree)) return std::nullopt;
  std::vector<std::string> keys;
  TreeSlots(*query.tree, &keys);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  if (keys.size() > kGpuTreeSlots) return GpuUnsupportedReason::kPhrase;
  return std::nullopt;
}

CpuExecutorAdapter::CpuExecutorAdapter(const ShardReader* shard) : shard_(shard), executor_(shard) {}

Result<ExecOutput> CpuExecutorAdapter::Execute(const Query& query, Deadline deadline, uint32_t flags) {
  return Execute(query, deadline, flags, nullptr);
}

Result<ExecOutput> CpuExecutorAdapter::Execute(const Query& query, Deadline deadline, uint32_t flags,
                                               const std::vector<PreparedTerm>* prepared, bool resolve_ids) {
  if ((flags & kFlagForceGpu) != 0) return Status::Unavailable("this node has no GPU executor");
  if (deadline != kNoDeadline && std::chrono::steady_clock::now() >= deadline) {
    return Status::DeadlineExceeded("deadline passed before execution");
  }
  auto result = executor_.Search(query, prepared);
  if (!result.ok()) return result.status();
  return ToOutput(*result, Processor::kCpu, resolve_ids);
}

Result<ExecOutput> CpuExecutorAdapter::ExecuteFromCandidates(const Query& query, std::span<const uint32_t> candidates,
                                                             Deadline deadline, bool resolve_ids) {
  if (deadline != kNoDeadline && std::chrono::steady_clock::now() >= deadline) {
    return Status::DeadlineExceeded("deadline passed before execution");
  }
  auto result = executor_.SearchFromCandidates(query, candidates);
  if (!result.ok()) return result.status();
  return ToOutput(*result, Processor::kHybrid, resolve_ids);
}

Status ResolveExternalIds(const ShardReader& shard, std::vector<HitMsg>* hits) {
  std::vector<uint32_t> docs;
  docs.reserve(hits->size());
  for (const HitMsg& h : *hits) docs.push_back(h.doc);
  std::vector<std::string> ids;
  if (Status st = shard.GetExternalIds(docs, &ids); !st.ok()) return st.WithContext("external ids");
  for (size_t i = 0; i < hits->size(); ++i) (*hits)[i].external_id = std::move(ids[i]);
  return Status::Ok();
}

Result<ExecOutput> CpuExecutorAdapter::ToOutput(const SearchResult& r, Processor p, bool resolve_ids) const {
  ExecOutput out;
  out.processor = p;
  out.stats = r.stats;
  out.has_total = r.has_total;
  out.total = r.total;
  out.hits.reserve(r.hits.size());
  for (const ScoredDoc& d : r.hits) out.hits.push_back(HitMsg{d.doc, d.score, {}});
  if (resolve_ids) SEARCH_RETURN_IF_ERROR(ResolveExternalIds(*shard_, &out.hits));
  return out;
}

}  // namespace search
