// One shard of the index in RocksDB (index_store/FORMAT.md is the key schema): the term
// dictionary, the compressed posting lists (codec/ format), the document table and the global
// statistics, so that BM25 computed here is identical to BM25 on any other shard.
//
// ShardWriter builds a shard once (terms and documents in ascending order); ShardReader opens it
// read-only for serving, with a main-memory list cache (ListCache) above RocksDB's block cache.
// Thread-safety: ShardWriter is single-threaded. ShardReader is thread-safe after Open.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codec/block_codec.hpp"
#include "core/analyzer.hpp"
#include "core/bm25.hpp"
#include "core/cache_sizing.hpp"
#include "core/status.hpp"
#include "index_store/list_cache.hpp"
#include "index_store/source_block.hpp"

namespace search {

// 3: the source column family and the `sources` flag; 2: the positions column family and the
// `positions` flag (1 had neither). Writers write kIndexFormatVersion; readers accept
// kOldestIndexFormatVersion to kIndexFormatVersion (a version-2 index opens without sources);
// another is InvalidArgument saying to rebuild the index.
inline constexpr uint32_t kIndexFormatVersion = 3;
inline constexpr uint32_t kOldestIndexFormatVersion = 2;

struct TermInfo {
  uint32_t df = 0;          // global document frequency (all shards)
  uint32_t count = 0;       // postings of the term in this shard (its list length)
  uint64_t cf = 0;          // sum of tf over this shard's postings
  float max_score = 0.0f;   // max BM25 contribution of any posting in this shard
  uint32_t list_bytes = 0;  // size of the encoded list blob
};

struct ShardMeta {
  uint32_t format_version = kIndexFormatVersion;
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  uint32_t doc_begin = 0;  // first global docID of the shard
  uint32_t doc_end = 0;    // one past the last
  CollectionStats stats;   // global: N and total tokens of the whole collection
  Bm25Params bm25;
  AnalyzerConfig analyzer;
  uint64_t num_terms = 0;     // terms with postings in this shard
  uint64_t num_postings = 0;  // postings in this shard
  bool positions = false;     // whether every term has a positions blob (codec/FORMAT.md "Positions")
  bool sources = false;       // whether every document's source is stored (FORMAT.md "Sources")
};

class ShardWriter {
 public:
  // Creates a new RocksDB database at `path` (which must not exist).
  static Result<std::unique_ptr<ShardWriter>> Create(const std::string& path, const ShardMeta& meta);
  ~ShardWriter();

  // REQUIRES: terms strictly ascending (bytewise); list_bytes a valid codec list whose docIDs lie
  // in [doc_begin, doc_end); positions a valid positions blob for that list when meta.positions,
  // empty otherwise. InvalidArgument otherwise.
  Status AddTerm(std::string_view term, const TermInfo& info, std::string_view list_bytes,
                 std::string_view positions = {});
  // REQUIRES: every doc in [doc_begin, doc_end) exactly once, ascending; `source` (the document's
  // JSON object, stored byte for byte, at most kMaxSourceBytes of source_block.hpp) when
  // meta.sources, absent otherwise. InvalidArgument otherwise.
  Status AddDoc(uint32_t doc, std::string_view external_id, uint32_t length,
                std::optional<std::string_view> source = std::nullopt);
  // Ready source blocks instead of each document's source (meta.sources): SetSourceDict first,
  // with the dictionary the blocks were encoded with (null: none; it is stored at
  // meta/source_dict), before any AddDoc; then every AddDoc takes no source, and AddSourceBlock
  // takes the blocks (SourceBlockEncoder's values) covering [doc_begin, doc_end) in order,
  // `first_doc` each time the doc after the previous block's last. A block's header, CRC and
  // range are checked (InvalidArgument), its payload is not decoded.
  Status SetSourceDict(std::shared_ptr<const SourceDict> dict);
  Status AddSourceBlock(uint32_t first_doc, std::string_view value);
  // Writes the metadata, compacts, syncs and closes. num_terms/num_postings are filled in.
  Status Finish();

 private:
  struct Impl;
  explicit ShardWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// External-id lookups since the shard was opened: answered from the memo, and read from RocksDB.
struct ExternalIdStats {
  uint64_t memo_hits = 0;
  uint64_t reads = 0;
};

struct ShardReaderOptions {
  size_t list_cache_bytes = size_t{256} << 20;   // main-memory cache of decoded-ready lists
  size_t list_cache_shards = 0;                   // its shards (ListCache); 0 = by its budget
  size_t block_cache_bytes = size_t{64} << 20;   // RocksDB's shared block cache
  size_t source_cache_bytes = size_t{4} << 20;   // decoded source blocks (GetSources)
};

class ShardReader {
 public:
  static Result<std::unique_ptr<ShardReader>> Open(const std::string& path, const ShardReaderOptions& options = {});
  ~ShardReader();

  const ShardMeta& meta() const;
  // nullopt when the term has no postings in this shard. Answers (found or not) are remembered
  // in memory (bounded), so a query's repeated lookups of a term read RocksDB once.
  Result<std::optional<TermInfo>> GetTermInfo(std::string_view term) const;
  // The term's list through the list cache; NotFound when the term has no postings here;
  // Corruption when the stored bytes fail validation (header, metadata or CRC).
  Result<std::shared_ptr<const CachedList>> GetList(std::string_view term) const;
  // Whether the shard was built with positions (ShardMeta::positions).
  bool has_positions() const;
  // The term's positions (parsed for its list's count) through the positions cache; NotFound when
  // the term has no postings here; InvalidArgument saying so when the shard was built without
  // positions (a phrase query against it is a client error); Corruption when the stored bytes fail
  // validation.
  Result<std::shared_ptr<const CachedPositions>> GetPositions(std::string_view term) const;
  // External ids are remembered once read (a bounded memo; errors are not remembered), so the
  // top hits that recur across queries cost no RocksDB read.
  Result<std::string> GetExternalId(uint32_t doc) const;
  // The external ids of `docs`, in order: from the memo, the rest by one RocksDB MultiGet (a
  // top-k's ids at once); the same errors as GetExternalId.
  Status GetExternalIds(std::span<const uint32_t> docs, std::vector<std::string>* ids) const;
  ExternalIdStats external_id_stats() const;
  // Whether the shard stores its documents' sources (ShardMeta::sources; an index built with
  // --no-source, import-ciff and generate have none).
  bool has_sources() const;
  // The stored sources of `docs` (global docIDs of this shard, any order, repeats allowed), in
  // order: (*sources)[i] is the JSON object of docs[i] byte for byte as it was indexed. Decoded
  // source blocks are cached (bounded), so the hits that recur cost no decompression.
  // InvalidArgument for a doc outside the shard; NotFound when !has_sources();
  // Corruption when a stored block fails validation (never wrong text).
  Status GetSources(std::span<const uint32_t> docs, std::vector<std::string>* sources) const;
  // Per-document BM25 length norms (core/bm25.hpp Bm25Norm), indexed by doc - doc_begin.
  const float* norms() const;
  uint32_t DocLength(uint32_t doc) const;  // REQUIRES: doc in [doc_begin, doc_end)
  // Visits every term of the shard in ascending order; stops early when fn returns false.
  Status ForEachTerm(const std::function<bool(std::string_view, const TermInfo&)>& fn) const;
  ListCache& list_cache() const;
  // The positions cache: its budget is the part of list_cache_bytes in proportion to the
  // positions column family's share of ShardListCacheNeed (none without positions).
  PositionsCache& positions_cache() const;

 private:
  struct Impl;
  explicit ShardReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What the list cache would be charged for holding every list and every positions blob of the shard
// at `shard_dir` (each blob plus its entry, as ListCache and PositionsCache charge them), from the
// table properties of the shard's lists and positions column families: nothing is read.
// IOError / Corruption when the shard does not open.
Result<uint64_t> ShardListCacheNeed(const std::string& shard_dir);

// The main-memory list cache of shards served in one process (search-node's one shard, searchctl's
// LocalIndex): their needs (ShardListCacheNeed) summed and sized by SizeListCache
// (core/cache_sizing.hpp) against `mem_available`, then shared out in proportion to each need.
struct ListCachePlan {
  CacheSizing total;
  std::vector<size_t> per_shard;  // bytes, in the order of shard_dirs
};
Result<ListCachePlan> PlanListCache(const std::vector<std::string>& shard_dirs, std::optional<uint64_t> mem_available);

}  // namespace search
