// ShardListCacheNeed and PlanListCache (index_store/shard_store.hpp): the list cache's default size
// from the shards' lists column family and the machine's available memory.
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/table_properties.h>

#include <memory>
#include <numeric>

#include "index_store/shard_store.hpp"
#include "shard_format.hpp"

namespace search {

using namespace store;  // NOLINT(google-build-using-namespace)

Result<uint64_t> ShardListCacheNeed(const std::string& shard_dir) {
  rocksdb::DBOptions db_options;
  db_options.info_log = MakeStderrLogger(shard_dir);
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.skip_stats_update_on_db_open = true;
  db_options.verify_sst_unique_id_in_manifest = false;  // ingested files have none (shard_writer.cpp)
  bool has_source = false;
  SEARCH_RETURN_IF_ERROR(CheckColumnFamilies(db_options, shard_dir, &has_source));  // an older index says so
  const auto cf_options = CfOptions(rocksdb::NewLRUCache(size_t{1} << 20));
  // Read-only opens may name a subset of the column families: the meta one, lists and positions.
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(CfNames()[kMetaIdx], cf_options[kMetaIdx]);
  descriptors.emplace_back(CfNames()[kListsIdx], cf_options[kListsIdx]);
  descriptors.emplace_back(CfNames()[kPositionsIdx], cf_options[kPositionsIdx]);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  SEARCH_RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::OpenForReadOnly(db_options, shard_dir, descriptors, &handles, &raw), "open shard " + shard_dir));
  std::unique_ptr<rocksdb::DB> db(raw);
  // A finished shard is compacted: every list (positions blob) is in exactly one table, once.
  uint64_t need = 0;
  rocksdb::Status s;
  for (const auto& [idx, entry] : {std::pair<int, size_t>{1, sizeof(CachedList)}, {2, sizeof(CachedPositions)}}) {
    rocksdb::TablePropertiesCollection props;
    s = db->GetPropertiesOfAllTables(handles[idx], &props);
    if (!s.ok()) break;
    for (const auto& [file, p] : props) need += p->raw_value_size + p->num_entries * entry;
  }
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  (void)db->Close();
  SEARCH_RETURN_IF_ERROR(FromRocks(s, "table properties of shard " + shard_dir));
  return need;
}

Result<ListCachePlan> PlanListCache(const std::vector<std::string>& shard_dirs, std::optional<uint64_t> mem_available) {
  std::vector<uint64_t> needs;
  for (const std::string& dir : shard_dirs) {
    SEARCH_ASSIGN_OR_RETURN(uint64_t need, ShardListCacheNeed(dir));
    needs.push_back(need);
  }
  const uint64_t total = std::accumulate(needs.begin(), needs.end(), uint64_t{0});
  ListCachePlan plan;
  plan.total = SizeListCache(total,
                             "the lists column family's table properties" +
                                 (shard_dirs.size() > 1 ? " of " + std::to_string(shard_dirs.size()) + " shards"
                                                        : std::string()),
                             mem_available);
  for (uint64_t need : needs) {
    // Each shard's part of the budget in proportion to its need.
    const double part = total == 0 ? 0.0 : static_cast<double>(need) / static_cast<double>(total);
    plan.per_shard.push_back(static_cast<size_t>(static_cast<double>(plan.total.bytes) * part));
  }
  return plan;
}

}  // namespace search
