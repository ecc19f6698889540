// The index directory: DIR/manifest.json plus one RocksDB database per shard, DIR/shard-<i>.
// Shards are document-partitioned into contiguous docID ranges: shard i of S holds docIDs
// [i * N / S, (i + 1) * N / S) (integer arithmetic), so every shard differs by at most one document.
// The manifest lists the shards, their ranges, the analyzer, the format version and a checksum per
// shard (CRC-32C over the shard's SST files in name order). An index is loadable only when the
// manifest exists and parses: builds write everything aside, fsync, and rename into place last.
// Thread-safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "core/bm25.hpp"
#include "core/status.hpp"

namespace search {

struct ShardEntry {
  uint32_t id = 0;
  std::string path;  // relative to the index directory: "shard-<id>"
  uint32_t doc_begin = 0, doc_end = 0;
  uint64_t num_terms = 0, num_postings = 0;
  std::string checksum;  // "crc32c:<8 hex digits>"
};

struct Manifest {
  uint32_t format_version = 0;
  CollectionStats stats;
  Bm25Params bm25;
  AnalyzerConfig analyzer;
  std::vector<ShardEntry> shards;
  bool positions = false;  // every shard has positions (codec/FORMAT.md "Positions")
  bool sources = false;    // every shard stores its documents' sources (FORMAT.md "Sources")
  std::string created_by;  // tool and version

  static Result<Manifest> Read(const std::string& index_dir);
  // Writes DIR/manifest.json via a temporary file, fsync and rename.
  Status Write(const std::string& index_dir) const;
  std::string ToJson() const;
  static Result<Manifest> FromJson(std::string_view json);
};

// The docID range of shard i of S over N documents (the rule above).
inline void ShardRange(uint64_t n, uint32_t shards, uint32_t i, uint32_t* begin, uint32_t* end) {
  *begin = static_cast<uint32_t>(n * i / shards);
  *end = static_cast<uint32_t>(n * (i + 1) / shards);
}

// CRC-32C over the shard's *.sst files (sorted by name), as "crc32c:xxxxxxxx".
Result<std::string> ComputeShardChecksum(const std::string& shard_dir);
// Checks every shard's checksum against the manifest: Corruption naming the shard otherwise.
Status VerifyIndex(const std::string& index_dir);

// fsyncs a file or directory; IOError on failure.
Status SyncPath(const std::string& path);

}  // namespace search
