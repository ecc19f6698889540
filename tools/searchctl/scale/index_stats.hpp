// ComputeIndexStats: what an index's posting lists cost (`searchctl stats`): lists, postings,
// blocks, and the bytes of the docID-gap payloads, the (tf - 1) payloads and the per-list/per-block
// metadata, so that "bits per docID" and "bits per frequency" compare with the compression
// tables of the literature (Mallia et al. 2019 Table 2: GPU-BP128 on Gov2, 6.66 and 4.27 bits).
// Payload bits are what the bit-packed blocks take (codec/FORMAT.md PackedBytes); metadata
// (32-byte list headers, 16-byte block entries) is reported apart, and the size on disk covers
// everything (term dictionary, document table, RocksDB overhead). Optionally a content checksum:
// CRC-32C over every key and value of every column family of every shard, in order (terms,
// TermInfos, lists, documents, lengths, shard metadata), equal for equal index contents whatever
// wrote them (unlike the manifest's SST checksums, which cover RocksDB's file properties too).
// The shards are opened read-only with RocksDB directly and scanned sequentially
// (index_store/FORMAT.md names the column families): ShardReader::GetList would read a whole
// 32 KiB table block per small list.
// Thread-safety: a pure function; it opens the shards itself.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace search {

struct IndexStats {
  uint64_t shards = 0, docs = 0, total_tokens = 0;
  uint64_t lists = 0;  // (term, shard) pairs: a term with postings in 3 shards counts 3 times
  uint64_t postings = 0, blocks = 0, max_list = 0;
  uint64_t list_bytes = 0;          // whole blobs
  uint64_t positions_bytes = 0;     // positions blobs (0 for an index without positions), uncompressed
  uint64_t source_blocks = 0;       // stored-source blocks (0 for an index without sources)
  uint64_t source_bytes = 0;        // their bytes as stored (zstd blocks; the dictionary is not counted)
  uint64_t metadata_bytes = 0;      // list headers + block entries
  uint64_t docid_payload_bytes = 0;
  uint64_t freq_payload_bytes = 0;
  uint64_t disk_bytes = 0;  // every file of the index directory
  // Lists by length: [0] 1..127, [1] 128..999, [2] 1e3..1e4-1, ... [6] >= 1e7 postings.
  std::array<uint64_t, 7> lists_by_length{}, postings_by_length{};
  bool has_checksum = false;
  uint32_t content_crc32c = 0;

  double BitsPerDocId() const { return postings == 0 ? 0 : 8.0 * static_cast<double>(docid_payload_bytes) / static_cast<double>(postings); }
  double BitsPerFreq() const { return postings == 0 ? 0 : 8.0 * static_cast<double>(freq_payload_bytes) / static_cast<double>(postings); }
  double ListBitsPerPosting() const { return postings == 0 ? 0 : 8.0 * static_cast<double>(list_bytes) / static_cast<double>(postings); }
  double DiskBitsPerPosting() const { return postings == 0 ? 0 : 8.0 * static_cast<double>(disk_bytes) / static_cast<double>(postings); }
  std::string ToJson() const;  // one line
};

// checksum: also compute content_crc32c (a second scan of every column family).
Result<IndexStats> ComputeIndexStats(const std::string& index_dir, bool checksum);

}  // namespace search
