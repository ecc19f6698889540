// ShardReader: the shard opened read-only (rocksdb::DB::OpenForReadOnly) for serving. Term and
// document lookups go through one shared LRU block cache; lists go through the ListCache above it
// (read with fill_cache = false, so a list is cached once, in its aligned, parsed form).
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/table_properties.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <unordered_map>

#include "index_store/shard_store.hpp"

#include "codec/block_codec.hpp"
#include "core/large_buffer.hpp"
#include "index_store/source_block.hpp"
#include "json_fields.hpp"
#include "shard_format.hpp"

namespace search {

namespace fs = std::filesystem;
using namespace store;  // NOLINT(google-build-using-namespace)

namespace {

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

// The source cache's shards: GetSources is called by the node's workers at once.
constexpr size_t kSourceCacheShards = 8;

// A docs-table read's answer for `doc`: its external id, or the error the read or the value gives.
Result<std::string> ExternalIdFrom(const std::string& path, uint32_t doc, const rocksdb::Status& s,
                                   const rocksdb::PinnableSlice& value) {
  if (s.IsNotFound()) return Status::Corruption("shard " + path + " lacks doc " + std::to_string(doc));
  SEARCH_RETURN_IF_ERROR(FromRocks(s, "doc " + std::to_string(doc)));
  return std::string(value.data(), value.size());
}

// Sum of the values' sizes and the number of entries of a column family's tables.
std::pair<uint64_t, uint64_t> CfValueBytes(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf) {
  rocksdb::TablePropertiesCollection props;
  if (!db->GetPropertiesOfAllTables(cf, &props).ok()) return {0, 0};
  uint64_t bytes = 0, entries = 0;
  for (const auto& [file, p] : props) {
    bytes += p->raw_value_size;
    entries += p->num_entries;
  }
  return {bytes, entries};
}

}  // namespace

// Memos of immutable answers: a shard never changes once open, so a term's entry (or its
// absence) and a document's external id are answered from memory after their first read.
// Every query looks up each of its terms (the scheduler's features, the engines) and the external
// ids of its top k, and a RocksDB point read costs microseconds (an id read, a docs block missing
// from the block cache: several). Striped by hash so the node's many workers rarely share a lock;
// a full stripe is emptied (bounded memory, no LRU bookkeeping on the hit path). Errors are never
// remembered. Find/Put take anything Hash and Eq accept (string_view for string keys).
template <class Key, class Value, class Hash, class Eq = std::equal_to<>>
class StripedMemo {
 public:
  static constexpr size_t kStripes = 64;
  static constexpr size_t kPerStripe = 4096;

  template <class K>
  bool Find(const K& key, Value* out) {
    Stripe& s = StripeOf(key);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return false;
    *out = it->second;
    return true;
  }
  template <class K>
  void Put(const K& key, const Value& value) {
    Stripe& s = StripeOf(key);
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.map.size() >= kPerStripe) s.map.clear();
    s.map.emplace(Key(key), value);
  }

 private:
  struct Stripe {
    std::mutex mu;
    std::unordered_map<Key, Value, Hash, Eq> map;  // GUARDED_BY(mu)
  };
  template <class K>
  Stripe& StripeOf(const K& key) {
    return stripes_[(Hash{}(key) >> 7) % kStripes];
  }
  std::array<Stripe, kStripes> stripes_;
};

struct TermHash {
  using is_transparent = void;
  size_t operator()(std::string_view v) const { return std::hash<std::string_view>{}(v); }
};
// Docs ids are dense: multiply them apart before the stripe (bits 7 and up) is taken.
struct DocHash {
  size_t operator()(uint32_t doc) const { return static_cast<size_t>((doc * 0x9E3779B97F4A7C15ULL) >> 16); }
};
using TermInfoMemo = StripedMemo<std::string, std::optional<TermInfo>, TermHash>;
using ExternalIdMemo = StripedMemo<uint32_t, std::string, DocHash>;

struct ShardReader::Impl {
  std::string path;
  mutable TermInfoMemo term_memo;
  mutable ExternalIdMemo id_memo;
  mutable std::atomic<uint64_t> id_memo_hits{0}, id_reads{0};
  std::shared_ptr<rocksdb::Cache> block_cache;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  ShardMeta meta;
  std::vector<uint32_t> lengths;  // by doc - doc_begin
  LargeBuffer norms;              // floats, by doc - doc_begin
  std::unique_ptr<ListCache> list_cache;
  std::unique_ptr<PositionsCache> positions_cache;
  bool has_source_cf = false;              // version 3 (version 2 has no source column family)
  std::vector<uint32_t> source_starts;     // first doc of every source block, ascending
  std::shared_ptr<const SourceDict> source_dict;  // null when the blocks use none
  std::unique_ptr<SourceCache> source_cache;
  rocksdb::ReadOptions point_read;  // terms, docs
  rocksdb::ReadOptions list_read;   // lists: not kept in the block cache (the ListCache keeps them)

  ~Impl() {
    if (db) {
      for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
      (void)db->Close();
    }
  }

  Status LoadMeta() {
    rocksdb::PinnableSlice value;
    auto s = db->Get(point_read, handles[kMetaIdx], ToSlice(kKeyFormatVersion), &value);
    if (s.IsNotFound()) return Status::Corruption("shard " + path + " has no format version: not a finished shard");
    SEARCH_RETURN_IF_ERROR(FromRocks(s, "read format version of " + path));
    if (value.size() != 4) return Status::Corruption("shard " + path + ": format version value is not 4 bytes");
    const uint32_t version = GetLe32(value.data());
    if (version < kOldestIndexFormatVersion || version > kIndexFormatVersion)
      return FormatVersionMismatch("shard " + path + ": ", version);
    if (version >= 3 && !has_source_cf)
      return Status::Corruption("shard " + path + " lacks column family 'source': not an index shard");
    value.Reset();
    s = db->Get(point_read, handles[kMetaIdx], ToSlice(kKeyShardMeta), &value);
    if (s.IsNotFound()) return Status::Corruption("shard " + path + " has no shard metadata");
    SEARCH_RETURN_IF_ERROR(FromRocks(s, "read shard metadata of " + path));
    auto m = ShardMetaFromJson(std::string_view(value.data(), value.size()));
    if (!m.ok()) return m.status().WithContext("shard " + path);
    if (m->format_version != version)
      return Status::Corruption("shard " + path + ": metadata format_version disagrees with the version key");
    meta = std::move(m).value();
    return Status::Ok();
  }

  // Reads the source block index and the dictionary (FORMAT.md "Sources").
  Status LoadSources() {
    rocksdb::PinnableSlice value;
    auto s = db->Get(point_read, handles[kMetaIdx], ToSlice(kKeySourceBlocks), &value);
    if (s.IsNotFound()) return Status::Corruption("shard " + path + " stores sources but has no source block index");
    SEARCH_RETURN_IF_ERROR(FromRocks(s, "read the source block index of " + path));
    if (value.size() % 4 != 0) return Status::Corruption("shard " + path + ": source block index size not a multiple of 4");
    source_starts.resize(value.size() / 4);
    for (size_t i = 0; i < source_starts.size(); ++i) {
      source_starts[i] = GetLe32(value.data() + 4 * i);
      const bool ordered = i == 0 ? source_starts[0] == meta.doc_begin : source_starts[i] > source_starts[i - 1];
      if (!ordered || source_starts[i] >= meta.doc_end)
        return Status::Corruption("shard " + path + ": source block index out of order or outside the shard");
    }
    if (source_starts.empty() != (meta.doc_begin == meta.doc_end))
      return Status::Corruption("shard " + path + ": source block index does not cover the shard");
    value.Reset();
    s = db->Get(point_read, handles[kMetaIdx], ToSlice(kKeySourceDict), &value);
    if (s.IsNotFound()) return Status::Ok();
    SEARCH_RETURN_IF_ERROR(FromRocks(s, "read the source dictionary of " + path));
    if (value.size() < 4 || Crc32c(value.data() + 4, value.size() - 4) != GetLe32(value.data()))
      return Status::Corruption("shard " + path + ": source dictionary fails its CRC");
    auto dict = SourceDict::Make(std::string_view(value.data() + 4, value.size() - 4), /*level=*/0);
    if (!dict.ok()) return dict.status().WithContext("shard " + path);
    source_dict = std::move(dict).value();
    return Status::Ok();
  }

  // The source block holding `doc` (in the shard): its index into source_starts.
  size_t SourceBlockOf(uint32_t doc) const {
    return static_cast<size_t>(std::upper_bound(source_starts.begin(), source_starts.end(), doc) -
                               source_starts.begin()) - 1;
  }
  uint32_t SourceBlockCount(size_t b) const {
    return (b + 1 < source_starts.size() ? source_starts[b + 1] : meta.doc_end) - source_starts[b];
  }

  // Reads the "len/<chunk>" values into `lengths` and computes the BM25 norms.
  Status LoadLengths() {
    const uint64_t num_docs = meta.doc_end - meta.doc_begin;
    lengths.resize(num_docs);
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    ro.readahead_size = 2 << 20;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, handles[kMetaIdx]));
    uint64_t loaded = 0;
    uint32_t chunk = 0;
    for (it->Seek(ToSlice(kLenPrefix)); it->Valid() && it->key().starts_with(ToSlice(kLenPrefix)); it->Next(), ++chunk) {
      const rocksdb::Slice key = it->key(), value = it->value();
      if (key.size() != kLenPrefix.size() + 4 || GetBe32(key.data() + kLenPrefix.size()) != chunk)
        return Status::Corruption("shard " + path + ": length chunk " + std::to_string(chunk) + " missing or misnamed");
      const uint64_t want = std::min<uint64_t>(kLenChunk, num_docs - std::min<uint64_t>(num_docs, loaded));
      if (want == 0 || value.size() != want * 4)
        return Status::Corruption("shard " + path + ": length chunk " + std::to_string(chunk) + " has " +
                                  std::to_string(value.size()) + " bytes, expected " + std::to_string(want * 4));
      for (uint64_t i = 0; i < want; ++i) lengths[loaded + i] = GetLe32(value.data() + 4 * i);
      loaded += want;
    }
    SEARCH_RETURN_IF_ERROR(FromRocks(it->status(), "read document lengths of " + path));
    if (loaded != num_docs)
      return Status::Corruption("shard " + path + ": lengths of " + std::to_string(num_docs - loaded) +
                                " documents missing");
    norms = LargeBuffer::Allocate(sizeof(float) * std::max<uint64_t>(num_docs, 1));
    if (norms.get() == nullptr)
      return Status::ResourceExhausted("shard " + path + ": cannot allocate the norms of " + std::to_string(num_docs) +
                                       " documents");
    float* out = reinterpret_cast<float*>(norms.get());
    const double avgdl = meta.stats.avgdl();
    for (uint64_t i = 0; i < num_docs; ++i) out[i] = Bm25Norm(lengths[i], avgdl, meta.bm25);
    return Status::Ok();
  }
};

ShardReader::ShardReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShardReader::~ShardReader() = default;

Result<std::unique_ptr<ShardReader>> ShardReader::Open(const std::string& path, const ShardReaderOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return Status::NotFound("shard " + path + " does not exist");

  rocksdb::DBOptions db_options;
  db_options.info_log = MakeStderrLogger(path);  // nothing is written into the shard directory
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.keep_log_file_num = 1;
  db_options.max_open_files = -1;  // open every table once, at Open; lookups never reopen files
  db_options.skip_stats_update_on_db_open = true;
  db_options.verify_sst_unique_id_in_manifest = false;  // ingested files have none (shard_writer.cpp)

  bool has_source_cf = false;
  SEARCH_RETURN_IF_ERROR(CheckColumnFamilies(db_options, path, &has_source_cf));

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->has_source_cf = has_source_cf;
  impl->block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  const auto cf_options = CfOptions(impl->block_cache);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (int i = 0; i < kNumCfs; ++i)
    if (i != kSourceIdx || has_source_cf) descriptors.emplace_back(CfNames()[i], cf_options[i]);
  rocksdb::DB* raw = nullptr;
  SEARCH_RETURN_IF_ERROR(FromRocks(rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &impl->handles, &raw),
                                   "open shard " + path));
  impl->db.reset(raw);
  impl->list_read.fill_cache = false;
  SEARCH_RETURN_IF_ERROR(impl->LoadMeta());
  SEARCH_RETURN_IF_ERROR(impl->LoadLengths());
  if (impl->meta.sources) SEARCH_RETURN_IF_ERROR(impl->LoadSources());
  impl->source_cache = std::make_unique<SourceCache>(impl->meta.sources ? options.source_cache_bytes : 0,
                                                     kSourceCacheShards);
  // The list cache budget is shared by lists and positions in proportion to what each would take
  // whole (as ShardListCacheNeed counts them), so that both fit whenever the sum does.
  size_t positions_bytes = 0;
  if (impl->meta.positions) {
    const auto [list_bytes, lists] = CfValueBytes(impl->db.get(), impl->handles[kListsIdx]);
    const auto [pos_bytes, pos_entries] = CfValueBytes(impl->db.get(), impl->handles[kPositionsIdx]);
    const double list_need = static_cast<double>(list_bytes + lists * sizeof(CachedList));
    const double pos_need = static_cast<double>(pos_bytes + pos_entries * sizeof(CachedPositions));
    if (pos_need > 0)
      positions_bytes = static_cast<size_t>(static_cast<double>(options.list_cache_bytes) * pos_need /
                                            (list_need + pos_need));
  }
  impl->list_cache =
      std::make_unique<ListCache>(options.list_cache_bytes - positions_bytes, options.list_cache_shards);
  impl->positions_cache = std::make_unique<PositionsCache>(positions_bytes, options.list_cache_shards);
  return std::unique_ptr<ShardReader>(new ShardReader(std::move(impl)));
}

const ShardMeta& ShardReader::meta() const { return impl_->meta; }

Result<std::optional<TermInfo>> ShardReader::GetTermInfo(std::string_view term) const {
  std::optional<TermInfo> memo;
  if (impl_->term_memo.Find(term, &memo)) return memo;
  rocksdb::PinnableSlice value;
  auto s = impl_->db->Get(impl_->point_read, impl_->handles[kTermsIdx], ToSlice(term), &value);
  if (s.IsNotFound()) {
    impl_->term_memo.Put(term, std::nullopt);
    return std::optional<TermInfo>();
  }
  SEARCH_RETURN_IF_ERROR(FromRocks(s, "term " + QuoteTerm(term)));
  auto info = DecodeTermInfo(std::string_view(value.data(), value.size()));
  if (!info.ok()) return info.status().WithContext("shard " + impl_->path + " term " + QuoteTerm(term));
  impl_->term_memo.Put(term, *info);  // errors are not kept: a corrupt entry fails every time
  return std::optional<TermInfo>(*info);
}

Result<std::shared_ptr<const CachedList>> ShardReader::GetList(std::string_view term) const {
  if (auto hit = impl_->list_cache->Lookup(term)) return hit;
  rocksdb::PinnableSlice value;
  auto s = impl_->db->Get(impl_->list_read, impl_->handles[kListsIdx], ToSlice(term), &value);
  if (s.IsNotFound())
    return Status::NotFound("term " + QuoteTerm(term) + " has no postings in shard " + std::to_string(impl_->meta.shard_id));
  SEARCH_RETURN_IF_ERROR(FromRocks(s, "list of term " + QuoteTerm(term)));
  auto list = CachedList::Make(term, std::string_view(value.data(), value.size()));
  if (!list.ok()) return list.status().WithContext("shard " + impl_->path);
  const ListView& view = (*list)->view;
  if (view.num_blocks() == 0 || view.base_doc() < impl_->meta.doc_begin ||
      view.block(view.num_blocks() - 1).last_doc >= impl_->meta.doc_end)
    return Status::Corruption("shard " + impl_->path + ": list of term " + QuoteTerm(term) +
                              " has docIDs outside the shard's range");
  impl_->list_cache->Insert(*list);
  return std::move(list).value();
}

bool ShardReader::has_positions() const { return impl_->meta.positions; }

Result<std::shared_ptr<const CachedPositions>> ShardReader::GetPositions(std::string_view term) const {
  if (!impl_->meta.positions)
    return Status::InvalidArgument(
        "this index was built without positions (searchctl index --no-positions, import-ciff or generate): phrase "
        "queries need positions; rebuild the index with positions (searchctl index)");
  if (auto hit = impl_->positions_cache->Lookup(term)) return hit;
  SEARCH_ASSIGN_OR_RETURN(const std::optional<TermInfo> info, GetTermInfo(term));
  if (!info)
    return Status::NotFound("term " + QuoteTerm(term) + " has no postings in shard " + std::to_string(impl_->meta.shard_id));
  rocksdb::PinnableSlice value;
  auto s = impl_->db->Get(impl_->list_read, impl_->handles[kPositionsIdx], ToSlice(term), &value);
  if (s.IsNotFound())
    return Status::Corruption("shard " + impl_->path + ": term " + QuoteTerm(term) + " has postings but no positions");
  SEARCH_RETURN_IF_ERROR(FromRocks(s, "positions of term " + QuoteTerm(term)));
  auto positions = CachedPositions::Make(term, std::string_view(value.data(), value.size()), info->count);
  if (!positions.ok()) return positions.status().WithContext("shard " + impl_->path);
  impl_->positions_cache->Insert(*positions);
  return std::move(positions).value();
}

Result<std::string> ShardReader::GetExternalId(uint32_t doc) const {
  if (doc < impl_->meta.doc_begin || doc >= impl_->meta.doc_end)
    return Status::NotFound("doc " + std::to_string(doc) + " is not in shard " + std::to_string(impl_->meta.shard_id) +
                            " [" + std::to_string(impl_->meta.doc_begin) + ", " + std::to_string(impl_->meta.doc_end) +
                            ")");
  std::string id;
  if (impl_->id_memo.Find(doc, &id)) {
    impl_->id_memo_hits.fetch_add(1, std::memory_order_relaxed);
    return id;
  }
  rocksdb::PinnableSlice value;
  const std::string key = Be32Key(doc);
  auto s = impl_->db->Get(impl_->point_read, impl_->handles[kDocsIdx], ToSlice(key), &value);
  impl_->id_reads.fetch_add(1, std::memory_order_relaxed);
  auto read = ExternalIdFrom(impl_->path, doc, s, value);
  if (read.ok()) impl_->id_memo.Put(doc, *read);
  return read;
}

Status ShardReader::GetExternalIds(std::span<const uint32_t> docs, std::vector<std::string>* ids) const {
  ids->clear();
  if (docs.empty()) return Status::Ok();
  for (uint32_t doc : docs)
    if (doc < impl_->meta.doc_begin || doc >= impl_->meta.doc_end) return GetExternalId(doc).status();
  ids->resize(docs.size());
  std::vector<size_t> missing;  // positions not in the memo
  for (size_t i = 0; i < docs.size(); ++i)
    if (!impl_->id_memo.Find(docs[i], &(*ids)[i])) missing.push_back(i);
  impl_->id_memo_hits.fetch_add(docs.size() - missing.size(), std::memory_order_relaxed);
  if (missing.empty()) return Status::Ok();
  std::vector<std::string> keys(missing.size());
  std::vector<rocksdb::Slice> slices(missing.size());
  for (size_t m = 0; m < missing.size(); ++m) {
    keys[m] = Be32Key(docs[missing[m]]);
    slices[m] = ToSlice(keys[m]);
  }
  std::vector<rocksdb::PinnableSlice> values(missing.size());
  std::vector<rocksdb::Status> statuses(missing.size());
  impl_->db->MultiGet(impl_->point_read, impl_->handles[kDocsIdx], missing.size(), slices.data(), values.data(),
                      statuses.data());
  impl_->id_reads.fetch_add(missing.size(), std::memory_order_relaxed);
  for (size_t m = 0; m < missing.size(); ++m) {
    const uint32_t doc = docs[missing[m]];
    auto id = ExternalIdFrom(impl_->path, doc, statuses[m], values[m]);
    if (!id.ok()) {
      ids->clear();
      return id.status();
    }
    impl_->id_memo.Put(doc, *id);
    (*ids)[missing[m]] = std::move(id).value();
  }
  return Status::Ok();
}

const float* ShardReader::norms() const { return reinterpret_cast<const float*>(impl_->norms.get()); }

uint32_t ShardReader::DocLength(uint32_t doc) const { return impl_->lengths[doc - impl_->meta.doc_begin]; }

Status ShardReader::ForEachTerm(const std::function<bool(std::string_view, const TermInfo&)>& fn) const {
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;  // a full scan must not flush the hot blocks out of the cache
  ro.readahead_size = 2 << 20;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->handles[kTermsIdx]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view term(it->key().data(), it->key().size());
    auto info = DecodeTermInfo(std::string_view(it->value().data(), it->value().size()));
    if (!info.ok()) return info.status().WithContext("shard " + impl_->path + " term " + QuoteTerm(term));
    if (!fn(term, *info)) return Status::Ok();
  }
  return FromRocks(it->status(), "scan terms of " + impl_->path);
}

ListCache& ShardReader::list_cache() const { return *impl_->list_cache; }

PositionsCache& ShardReader::positions_cache() const { return *impl_->positions_cache; }

bool ShardReader::has_sources() const { return impl_->meta.sources; }

Status ShardReader::GetSources(std::span<const uint32_t> docs, std::vector<std::string>* sources) const {
  sources->clear();
  const Impl& r = *impl_;
  if (!r.meta.sources)
    return Status::NotFound("shard " + std::to_string(r.meta.shard_id) +
                            " stores no sources (an index built with --no-source, import-ciff or generate)");
  for (uint32_t doc : docs)
    if (doc < r.meta.doc_begin || doc >= r.meta.doc_end)
      return Status::InvalidArgument("doc " + std::to_string(doc) + " is not in shard " +
                                     std::to_string(r.meta.shard_id) + " [" + std::to_string(r.meta.doc_begin) + ", " +
                                     std::to_string(r.meta.doc_end) + ")");
  // Each doc's block; the distinct blocks from the cache, the missing ones by one MultiGet.
  std::vector<size_t> block_of(docs.size());
  std::vector<size_t> distinct;
  std::vector<std::shared_ptr<const CachedSourceBlock>> blocks;
  std::vector<size_t> doc_slot(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    block_of[i] = r.SourceBlockOf(docs[i]);
    const auto it = std::find(distinct.begin(), distinct.end(), block_of[i]);
    doc_slot[i] = static_cast<size_t>(it - distinct.begin());
    if (it == distinct.end()) distinct.push_back(block_of[i]);
  }
  blocks.resize(distinct.size());
  std::vector<size_t> missing;
  std::vector<std::string> keys;
  for (size_t j = 0; j < distinct.size(); ++j) {
    std::string key = Be32Key(r.source_starts[distinct[j]]);
    blocks[j] = r.source_cache->Lookup(key);
    if (!blocks[j]) {
      missing.push_back(j);
      keys.push_back(std::move(key));
    }
  }
  if (!missing.empty()) {
    std::vector<rocksdb::Slice> slices(keys.size());
    for (size_t m = 0; m < keys.size(); ++m) slices[m] = ToSlice(keys[m]);
    std::vector<rocksdb::PinnableSlice> values(keys.size());
    std::vector<rocksdb::Status> statuses(keys.size());
    r.db->MultiGet(r.list_read, r.handles[kSourceIdx], keys.size(), slices.data(), values.data(), statuses.data());
    for (size_t m = 0; m < missing.size(); ++m) {
      const size_t b = distinct[missing[m]];
      const std::string what = "shard " + r.path + ": source block of docs [" + std::to_string(r.source_starts[b]) +
                               ", " + std::to_string(r.source_starts[b] + r.SourceBlockCount(b)) + ")";
      if (statuses[m].IsNotFound()) return Status::Corruption(what + " is missing");
      SEARCH_RETURN_IF_ERROR(FromRocks(statuses[m], what));
      auto entry = std::make_shared<CachedSourceBlock>();
      entry->term = std::move(keys[m]);
      Status st = DecodeSourceBlock(std::string_view(values[m].data(), values[m].size()), r.source_dict.get(),
                                    &entry->block);
      if (!st.ok()) return st.WithContext(what);
      if (entry->block.count() != r.SourceBlockCount(b))
        return Status::Corruption(what + " holds " + std::to_string(entry->block.count()) + " documents");
      r.source_cache->Insert(entry);
      blocks[missing[m]] = std::move(entry);
    }
  }
  sources->reserve(docs.size());
  for (size_t i = 0; i < docs.size(); ++i)
    sources->emplace_back(blocks[doc_slot[i]]->block.doc(docs[i] - r.source_starts[block_of[i]]));
  return Status::Ok();
}

ExternalIdStats ShardReader::external_id_stats() const {
  return ExternalIdStats{impl_->id_memo_hits.load(std::memory_order_relaxed),
                         impl_->id_reads.load(std::memory_order_relaxed)};
}

}  // namespace search
