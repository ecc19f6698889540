// Internal to index_store: the shard's key schema and value encodings (index_store/FORMAT.md is
// the spec), the RocksDB options shared by ShardWriter and ShardReader, and Status conversion.
// Thread-safety: pure functions and immutable constants.
#pragma once

#include <rocksdb/options.h>
#include <rocksdb/status.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"
#include "index_store/shard_store.hpp"

namespace rocksdb {
struct DBOptions;
class Cache;
class Logger;
}  // namespace rocksdb

namespace search::store {

// Column families, in the order the writer creates them and the reader opens them.
inline constexpr const char* kCfMeta = "default";
inline constexpr const char* kCfTerms = "terms";
inline constexpr const char* kCfLists = "lists";
inline constexpr const char* kCfDocs = "docs";
inline constexpr const char* kCfPositions = "positions";  // since format version 2
inline constexpr const char* kCfSource = "source";        // since format version 3
inline constexpr int kNumCfs = 6;
inline constexpr int kMetaIdx = 0, kTermsIdx = 1, kListsIdx = 2, kDocsIdx = 3, kPositionsIdx = 4, kSourceIdx = 5;
const std::vector<std::string>& CfNames();

// Keys of the meta ("default") column family. "len/" sorts before "meta/", so the writer can
// stream length chunks first and append the meta keys at Finish.
inline constexpr std::string_view kKeyFormatVersion = "meta/format_version";  // u32 LE
inline constexpr std::string_view kKeyShardMeta = "meta/shard";               // JSON
inline constexpr std::string_view kKeySourceBlocks = "meta/source_blocks";    // u32 LE first docs
inline constexpr std::string_view kKeySourceDict = "meta/source_dict";        // u32 LE crc + dict
inline constexpr std::string_view kLenPrefix = "len/";                        // + be32 chunk
inline constexpr uint32_t kLenChunk = 4096;                                   // lengths per chunk

inline constexpr uint8_t kTermInfoVersion = 1;
inline constexpr size_t kTermInfoBytes = 28;

// ---- little/big-endian helpers (explicit byte order, independent of the host) ----
inline void PutLe32(std::string* out, uint32_t v) {
  char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16), static_cast<char>(v >> 24)};
  out->append(b, 4);
}
inline uint32_t GetLe32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 | uint32_t{u[3]} << 24;
}
inline uint32_t GetBe32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} << 24 | uint32_t{u[1]} << 16 | uint32_t{u[2]} << 8 | uint32_t{u[3]};
}
inline std::string Be32Key(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
}
inline std::string LenChunkKey(uint32_t chunk) { return std::string(kLenPrefix) + Be32Key(chunk); }

// TermInfo v1: u8 version | 3 zero bytes | u32 df | u32 count | u64 cf | f32 max_score |
// u32 list_bytes, little-endian, 28 bytes.
std::string EncodeTermInfo(const TermInfo& info);
// Corruption on a wrong size or an unknown version.
Result<TermInfo> DecodeTermInfo(std::string_view value);

// ShardMeta <-> JSON (the value of meta/shard).
std::string ShardMetaToJson(const ShardMeta& meta);
Result<ShardMeta> ShardMetaFromJson(std::string_view json);

// The per-column-family options, all sharing the block cache `cache` (required: cached index
// and filter blocks need one; the writer passes a small one, it reads nothing back).
std::vector<rocksdb::ColumnFamilyOptions> CfOptions(const std::shared_ptr<rocksdb::Cache>& cache);
// Whether the writer builds a bloom filter for column family `idx` (see FORMAT.md "Tuning").
bool CfHasFilter(int idx);
// A logger that writes WARN and above to stderr, prefixed with `name`: no LOG file is written
// into the shard directory (which may be read-only when served).
std::shared_ptr<rocksdb::Logger> MakeStderrLogger(std::string name);

// Checks that the database at `path` has every column family a readable format version needs
// (all but `source`, which version 2 lacks; *has_source says whether it is there). A shard of an
// unreadable version (version 1 had no positions) gives FormatVersionMismatch's InvalidArgument,
// read from its meta column family alone; other gaps are Corruption ("not an index shard").
Status CheckColumnFamilies(const rocksdb::DBOptions& db_options, const std::string& path, bool* has_source);

// A term for an error message: quoted, non-printable bytes as \xNN, long terms cut at 64 bytes.
std::string QuoteTerm(std::string_view term);

Status FromRocks(const rocksdb::Status& s, std::string_view context);

}  // namespace search::store
