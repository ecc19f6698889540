// ComputeIndexStats (index_stats.hpp).
#include "scale/index_stats.hpp"

#include <rocksdb/db.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "codec/block_codec.hpp"
#include "index_store/manifest.hpp"
#include "scale/generate_index.hpp"

namespace search {

namespace {

// The column families of a shard (index_store/FORMAT.md), opened read-only and scanned in key
// order. Going through ShardReader::GetList instead would read a whole 32 KiB table block per
// small list; a sequential scan reads each block once.
enum CfIndex { kMeta = 0, kTerms = 1, kLists = 2, kDocs = 3, kPositions = 4, kSource = 5 };

class QuietLogger : public rocksdb::Logger {
 public:
  QuietLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    std::vfprintf(stderr, format, ap);
    std::fputc('\n', stderr);
  }
};

class RawShard {
 public:
  // `sources`: the shard has a source column family (format 3 with sources) to open as well.
  static Result<std::unique_ptr<RawShard>> Open(const std::string& path, bool sources) {
    rocksdb::DBOptions options;
    options.info_log = std::make_shared<QuietLogger>();
    options.max_open_files = -1;
    options.verify_sst_unique_id_in_manifest = false;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const char* name : {"default", "terms", "lists", "docs", "positions"})
      cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
    if (sources) cfs.emplace_back("source", rocksdb::ColumnFamilyOptions());
    auto shard = std::unique_ptr<RawShard>(new RawShard());
    rocksdb::DB* db = nullptr;
    const rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, path, cfs, &shard->handles_, &db);
    if (!s.ok()) return Status::Corruption("open shard " + path + ": " + s.ToString());
    shard->db_.reset(db);
    return shard;
  }
  ~RawShard() {
    for (auto* h : handles_) (void)db_->DestroyColumnFamilyHandle(h);
  }
  Status Scan(int cf, const std::function<Status(std::string_view, std::string_view)>& fn) const {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    ro.readahead_size = size_t{4} << 20;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[cf]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      SEARCH_RETURN_IF_ERROR(fn(std::string_view(it->key().data(), it->key().size()),
                                std::string_view(it->value().data(), it->value().size())));
    }
    if (!it->status().ok()) return Status::Corruption("scan: " + it->status().ToString());
    return Status::Ok();
  }

 private:
  RawShard() = default;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

size_t LengthBucket(uint64_t n) {
  if (n < 128) return 0;
  size_t b = 1;
  for (uint64_t limit = 1000; n >= limit && b < 6; limit *= 10) ++b;
  return b;
}

uint32_t CrcOf(uint32_t crc, const void* data, size_t n) { return Crc32c(data, n, crc); }

template <class T>
uint32_t CrcValue(uint32_t crc, T v) {
  return Crc32c(&v, sizeof(v), crc);
}

}  // namespace

std::string IndexStats::ToJson() const {
  nlohmann::ordered_json j;
  j["shards"] = shards;
  j["docs"] = docs;
  j["total_tokens"] = total_tokens;
  j["lists"] = lists;
  j["postings"] = postings;
  j["blocks"] = blocks;
  j["max_list"] = max_list;
  j["list_bytes"] = list_bytes;
  j["positions_bytes"] = positions_bytes;
  j["source_blocks"] = source_blocks;
  j["source_bytes"] = source_bytes;
  j["metadata_bytes"] = metadata_bytes;
  j["docid_payload_bytes"] = docid_payload_bytes;
  j["freq_payload_bytes"] = freq_payload_bytes;
  j["disk_bytes"] = disk_bytes;
  j["bits_per_docid"] = BitsPerDocId();
  j["bits_per_freq"] = BitsPerFreq();
  j["list_bits_per_posting"] = ListBitsPerPosting();
  j["disk_bits_per_posting"] = DiskBitsPerPosting();
  static const char* const kNames[] = {"1-127", "128-999", "1e3-1e4", "1e4-1e5", "1e5-1e6", "1e6-1e7", ">=1e7"};
  nlohmann::ordered_json by = nlohmann::ordered_json::object();
  for (size_t b = 0; b < lists_by_length.size(); ++b)
    by[kNames[b]] = {{"lists", lists_by_length[b]}, {"postings", postings_by_length[b]}};
  j["by_list_length"] = by;
  if (has_checksum) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", content_crc32c);
    j["content_crc32c"] = buf;
  }
  return j.dump();
}

Result<IndexStats> ComputeIndexStats(const std::string& index_dir, bool checksum) {
  // One sequential scan per shard reads at disk speed; parsing the list metadata is cheap.
  SEARCH_ASSIGN_OR_RETURN(Manifest manifest, Manifest::Read(index_dir));
  IndexStats st;
  st.shards = manifest.shards.size();
  st.docs = manifest.stats.num_docs;
  st.total_tokens = manifest.stats.total_tokens;
  uint32_t crc = 0;
  std::string aligned;
  for (const ShardEntry& entry : manifest.shards) {
    const std::string path = index_dir + "/" + entry.path;
    SEARCH_ASSIGN_OR_RETURN(auto db, RawShard::Open(path, manifest.sources));
    // The lists, in term order: sizes from each blob's header and block entries.
    SEARCH_RETURN_IF_ERROR(db->Scan(kLists, [&](std::string_view term, std::string_view value) -> Status {
      aligned.assign(value);  // ListView needs 4-byte alignment; a std::string's buffer has it
      auto view = ListView::Parse(aligned, /*verify_crc=*/true);
      if (!view.ok()) return view.status().WithContext("shard " + path + " term '" + std::string(term) + "'");
      const ListView& v = *view;
      ++st.lists;
      st.postings += v.count();
      st.max_list = std::max<uint64_t>(st.max_list, v.count());
      st.blocks += v.num_blocks();
      st.list_bytes += value.size();
      st.metadata_bytes += sizeof(ListHeader) + sizeof(BlockMeta) * uint64_t{v.num_blocks()};
      for (uint32_t b = 0; b < v.num_blocks(); ++b) {
        st.docid_payload_bytes += PackedBytes(v.block(b).count, v.block(b).doc_bits);
        st.freq_payload_bytes += PackedBytes(v.block(b).count, v.block(b).freq_bits);
      }
      const size_t bucket = LengthBucket(v.count());
      ++st.lists_by_length[bucket];
      st.postings_by_length[bucket] += v.count();
      return Status::Ok();
    }));
    SEARCH_RETURN_IF_ERROR(db->Scan(kPositions, [&](std::string_view, std::string_view value) -> Status {
      st.positions_bytes += value.size();
      return Status::Ok();
    }));
    if (manifest.sources) {
      SEARCH_RETURN_IF_ERROR(db->Scan(kSource, [&](std::string_view, std::string_view value) -> Status {
        ++st.source_blocks;
        st.source_bytes += value.size();
        return Status::Ok();
      }));
    }
    if (checksum) {
      for (int cf : {kMeta, kTerms, kLists, kDocs, kPositions}) {
        SEARCH_RETURN_IF_ERROR(db->Scan(cf, [&](std::string_view key, std::string_view value) -> Status {
          crc = CrcValue(crc, static_cast<uint64_t>(key.size()));
          crc = CrcOf(crc, key.data(), key.size());
          crc = CrcValue(crc, static_cast<uint64_t>(value.size()));
          crc = CrcOf(crc, value.data(), value.size());
          return Status::Ok();
        }));
      }
    }
  }
  st.disk_bytes = DirectoryBytes(index_dir);
  if (checksum) {
    st.has_checksum = true;
    st.content_crc32c = crc;
  }
  return st;
}

}  // namespace search
