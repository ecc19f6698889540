// CpuExecutorAdapter (see node/executor.hpp).
#include "node/executor.hpp"

#include "index_store/shard_store.hpp"

namespace search {

CpuExecutorAdapter::CpuExecutorAdapter(const ShardReader* shard) : shard_(shard), executor_(shard) {}

Result<ExecOutput> CpuExecutorAdapter::Execute(const Query& query, Deadline deadline, uint32_t flags) {
  if ((flags & kFlagForceGpu) != 0) return Status::Unavailable("this node has no GPU executor");
  if (deadline != kNoDeadline && std::chrono::steady_clock::now() >= deadline) {
    return Status::DeadlineExceeded("deadline passed before execution");
  }
  auto result = executor_.Search(query);
  if (!result.ok()) return result.status();
  ExecOutput out;
  out.processor = Processor::kCpu;
  out.stats = result->stats;
  out.hits.reserve(result->hits.size());
  for (const ScoredDoc& d : result->hits) {
    auto id = shard_->GetExternalId(d.doc);
    if (!id.ok()) return id.status().WithContext("external id of doc " + std::to_string(d.doc));
    out.hits.push_back(HitMsg{d.doc, d.score, std::move(id).value()});
  }
  return out;
}

}  // namespace search
