// The shard key schema's encodings and the RocksDB options shared by writer and reader.
#include "shard_format.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>

#include <algorithm>
#include <charconv>
#include <cstdarg>
#include <cstdio>

#include "json_fields.hpp"

namespace search::store {

const std::vector<std::string>& CfNames() {
  static const std::vector<std::string> kNames = {kCfMeta, kCfTerms, kCfLists, kCfDocs, kCfPositions, kCfSource};
  return kNames;
}

std::string EncodeTermInfo(const TermInfo& info) {
  std::string out;
  out.reserve(kTermInfoBytes);
  PutLe32(&out, kTermInfoVersion);  // u8 version + 3 zero bytes
  PutLe32(&out, info.df);
  PutLe32(&out, info.count);
  PutLe32(&out, static_cast<uint32_t>(info.cf));
  PutLe32(&out, static_cast<uint32_t>(info.cf >> 32));
  uint32_t score_bits;
  std::memcpy(&score_bits, &info.max_score, 4);
  PutLe32(&out, score_bits);
  PutLe32(&out, info.list_bytes);
  return out;
}

Result<TermInfo> DecodeTermInfo(std::string_view value) {
  if (value.size() != kTermInfoBytes)
    return Status::Corruption("term info has " + std::to_string(value.size()) + " bytes, expected " +
                              std::to_string(kTermInfoBytes));
  const char* p = value.data();
  const uint32_t tag = GetLe32(p);
  if (tag != kTermInfoVersion)
    return Status::Corruption("term info version tag " + std::to_string(tag) + ", this build reads " +
                              std::to_string(kTermInfoVersion));
  TermInfo info;
  info.df = GetLe32(p + 4);
  info.count = GetLe32(p + 8);
  info.cf = uint64_t{GetLe32(p + 12)} | uint64_t{GetLe32(p + 16)} << 32;
  const uint32_t score_bits = GetLe32(p + 20);
  std::memcpy(&info.max_score, &score_bits, 4);
  info.list_bytes = GetLe32(p + 24);
  return info;
}

Status FormatVersionMismatch(std::string_view where, uint64_t version) {
  std::string msg = std::string(where) + "index format version " + std::to_string(version) + ", this build reads " +
                    std::to_string(kOldestIndexFormatVersion) + " to " + std::to_string(kIndexFormatVersion);
  if (version < kOldestIndexFormatVersion) {
    msg += ": the index was built by an older version of searchctl; rebuild it (run `searchctl index` again, or "
           "import-ciff / generate for those indexes)";
  } else {
    msg += ": the index was built by a newer version of searchctl";
  }
  return Status::InvalidArgument(std::move(msg));
}

std::string QuoteTerm(std::string_view term) {
  std::string out = "'";
  for (unsigned char c : term.substr(0, 64)) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (term.size() > 64) out += "...";
  return out + "'";
}

double FloatForJson(float v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip form
  double d = 0;
  if (res.ec == std::errc() && std::from_chars(buf, res.ptr, d).ec == std::errc() && static_cast<float>(d) == v)
    return d;
  return static_cast<double>(v);  // exact; always reads back as v
}

Result<CollectionStats> StatsFromJson(const Json& obj, const std::string& where) {
  CollectionStats s;
  SEARCH_ASSIGN_OR_RETURN(s.num_docs, GetUint(obj, "num_docs", where, UINT32_MAX));
  SEARCH_ASSIGN_OR_RETURN(s.total_tokens, GetUint(obj, "total_tokens", where));
  SEARCH_ASSIGN_OR_RETURN(double avgdl, GetDouble(obj, "avgdl", where));
  if (std::fabs(avgdl - s.avgdl()) > 1e-9 * std::max(1.0, s.avgdl()))
    return Status::Corruption(where + ": avgdl " + std::to_string(avgdl) + " disagrees with total_tokens / num_docs");
  return s;
}

Result<Bm25Params> Bm25FromJson(const Json& obj, const std::string& where) {
  Bm25Params p;
  SEARCH_ASSIGN_OR_RETURN(double k1, GetDouble(obj, "k1", where));
  SEARCH_ASSIGN_OR_RETURN(double b, GetDouble(obj, "b", where));
  if (k1 < 0 || k1 > 1e6) return FieldError(where, "k1", "must be in [0, 1e6]");
  if (b < 0 || b > 1) return FieldError(where, "b", "must be in [0, 1]");
  p.k1 = static_cast<float>(k1);
  p.b = static_cast<float>(b);
  return p;
}

Json AnalyzerToJson(const AnalyzerConfig& config) {
  try {
    return Json::parse(config.ToJson());
  } catch (const std::exception&) {
    // ToJson throws on stopwords that are not valid UTF-8; the same object, dumped with
    // replacement characters by the caller, is then rejected on the way back in.
    return Json{{"tokenizer", "ascii-alnum-lower"},
                {"stem", config.stem_language.empty() ? Json(nullptr) : Json(config.stem_language)},
                {"stopwords", config.stopwords}};
  }
}

Result<AnalyzerConfig> AnalyzerFromJson(const Json& obj, const std::string& where) {
  if (!obj.is_object()) return Status::Corruption(where + ": field 'analyzer' must be an object");
  std::string text;
  try {
    text = obj.dump();
  } catch (const std::exception& e) {
    return Status::Corruption(where + ": analyzer: " + e.what());
  }
  auto config = AnalyzerConfig::FromJson(text);
  if (!config.ok()) return Status::Corruption(where + ": analyzer: " + config.status().message());
  return std::move(config).value();
}

std::string ShardMetaToJson(const ShardMeta& m) {
  Json j{{"format_version", m.format_version},
         {"shard_id", m.shard_id},
         {"num_shards", m.num_shards},
         {"doc_begin", m.doc_begin},
         {"doc_end", m.doc_end},
         {"stats", StatsToJson(m.stats)},
         {"bm25", Bm25ToJson(m.bm25)},
         {"analyzer", AnalyzerToJson(m.analyzer)},
         {"num_terms", m.num_terms},
         {"num_postings", m.num_postings},
         {"positions", m.positions},
         {"sources", m.sources}};
  return j.dump();
}

Result<ShardMeta> ShardMetaFromJson(std::string_view text) {
  const std::string where = "shard metadata";
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(where + " is not a JSON object");
  ShardMeta m;
  uint64_t v;
  SEARCH_ASSIGN_OR_RETURN(v, GetUint(j, "format_version", where, UINT32_MAX));
  m.format_version = static_cast<uint32_t>(v);
  SEARCH_ASSIGN_OR_RETURN(v, GetUint(j, "shard_id", where, UINT32_MAX));
  m.shard_id = static_cast<uint32_t>(v);
  SEARCH_ASSIGN_OR_RETURN(v, GetUint(j, "num_shards", where, UINT32_MAX));
  m.num_shards = static_cast<uint32_t>(v);
  SEARCH_ASSIGN_OR_RETURN(v, GetUint(j, "doc_begin", where, UINT32_MAX));
  m.doc_begin = static_cast<uint32_t>(v);
  SEARCH_ASSIGN_OR_RETURN(v, GetUint(j, "doc_end", where, UINT32_MAX));
  m.doc_end = static_cast<uint32_t>(v);
  SEARCH_ASSIGN_OR_RETURN(const Json* stats, GetObject(j, "stats", where));
  SEARCH_ASSIGN_OR_RETURN(m.stats, StatsFromJson(*stats, where + " stats"));
  SEARCH_ASSIGN_OR_RETURN(const Json* bm25, GetObject(j, "bm25", where));
  SEARCH_ASSIGN_OR_RETURN(m.bm25, Bm25FromJson(*bm25, where + " bm25"));
  SEARCH_ASSIGN_OR_RETURN(const Json* analyzer, GetObject(j, "analyzer", where));
  SEARCH_ASSIGN_OR_RETURN(m.analyzer, AnalyzerFromJson(*analyzer, where));
  SEARCH_ASSIGN_OR_RETURN(m.num_terms, GetUint(j, "num_terms", where));
  SEARCH_ASSIGN_OR_RETURN(m.num_postings, GetUint(j, "num_postings", where));
  SEARCH_ASSIGN_OR_RETURN(m.positions, GetBool(j, "positions", where));
  if (m.format_version >= 3) {  // version 2: no sources
    SEARCH_ASSIGN_OR_RETURN(m.sources, GetBool(j, "sources", where));
  }
  if (m.num_shards == 0 || m.shard_id >= m.num_shards)
    return Status::Corruption(where + ": shard_id " + std::to_string(m.shard_id) + " not below num_shards " +
                              std::to_string(m.num_shards));
  if (m.doc_begin > m.doc_end || m.doc_end > m.stats.num_docs)
    return Status::Corruption(where + ": doc range [" + std::to_string(m.doc_begin) + ", " +
                              std::to_string(m.doc_end) + ") not inside [0, num_docs)");
  return m;
}

namespace {

std::shared_ptr<const rocksdb::FilterPolicy> BloomPolicy() {
  // 10 bits per key, whole-key: about 1% false positives (terms are looked up whole).
  static const std::shared_ptr<const rocksdb::FilterPolicy> kPolicy(rocksdb::NewBloomFilterPolicy(10));
  return kPolicy;
}

// ZSTD where RocksDB has it, LZ4 otherwise, else none; for every column family but source.
// Even the bit-packed blobs compress well: most terms have a few postings, and their headers, block
// metadata and width bytes dominate; long lists' block metadata compresses too. RocksDB stores a
// block uncompressed when compression saves less than 1/8 of it. Level kZstdLevel, except
// kListsZstdLevel for the lists: they are most of a large index's bytes (compressed on RocksDB's
// parallel compression threads: shard_writer.cpp), so their level sets the build time; 3 is the
// fastest level that keeps an index with positions under Lucene 8's size (index_store/FORMAT.md
// "Tuning choices" has the sizes and times).
constexpr int kZstdLevel = 6;
constexpr int kListsZstdLevel = 3;
rocksdb::CompressionType Compression() {
  static const rocksdb::CompressionType kType = [] {
    const auto supported = rocksdb::GetSupportedCompressions();
    for (auto want : {rocksdb::kZSTD, rocksdb::kLZ4Compression})
      for (auto t : supported)
        if (t == want) return t;
    return rocksdb::kNoCompression;
  }();
  return kType;
}

}  // namespace

bool CfHasFilter(int idx) { return idx == kTermsIdx; }

std::vector<rocksdb::ColumnFamilyOptions> CfOptions(const std::shared_ptr<rocksdb::Cache>& cache) {
  std::vector<rocksdb::ColumnFamilyOptions> out;
  for (int i = 0; i < kNumCfs; ++i) {
    rocksdb::BlockBasedTableOptions t;
    t.filter_policy = BloomPolicy();
    t.whole_key_filtering = true;
    t.cache_index_and_filter_blocks = true;
    t.cache_index_and_filter_blocks_with_high_priority = true;
    t.pin_l0_filter_and_index_blocks_in_cache = true;
    // Ingested files live on the bottommost level, which the L0 flag above does not reach:
    // pin every table's (unpartitioned) index and filter blocks in the block cache.
    t.metadata_cache_options.unpartitioned_pinning = rocksdb::PinningTier::kAll;
    t.format_version = 5;
    t.block_cache = cache;
    rocksdb::ColumnFamilyOptions cf;
    cf.disable_auto_compactions = true;  // built by ingestion, read-only afterwards
    cf.compression = Compression();
    if (cf.compression == rocksdb::kZSTD) cf.compression_opts.level = i == kListsIdx ? kListsZstdLevel : kZstdLevel;
    // Only the terms CF sees lookups of absent keys (query terms missing from this shard);
    // every lists/docs/meta lookup follows a hit, so their filters would be dead weight.
    cf.optimize_filters_for_hits = !CfHasFilter(i);
    switch (i) {
      case kTermsIdx:
        t.block_size = 4 << 10;
        break;
      case kListsIdx:
        // Large blocks: lists are read whole, a value larger than a block is one block anyway,
        // and a small index keeps the pinned metadata small. (Compressed at kListsZstdLevel: see Compression()).
        t.block_size = 32 << 10;
        break;
      case kPositionsIdx:
        // As the lists: read whole, once per cache miss, outside the block cache.
        t.block_size = 32 << 10;
        break;
      case kDocsIdx:
        t.block_size = 4 << 10;
        break;
      case kSourceIdx:
        // Values are source blocks, compressed by the writer (zstd, FORMAT.md "Sources"): RocksDB
        // would only spend time on them. One block read per value that is not cached above.
        cf.compression = rocksdb::kNoCompression;
        t.block_size = 4 << 10;
        break;
      default:  // meta: a few keys plus 16 KiB length chunks, read once at open
        t.block_size = 16 << 10;
        break;
    }
    cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
    out.push_back(std::move(cf));
  }
  return out;
}

namespace {

class StderrLogger final : public rocksdb::Logger {
 public:
  explicit StderrLogger(std::string name) : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), name_(std::move(name)) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    std::fprintf(stderr, "rocksdb[%s]: %s\n", name_.c_str(), buf);
  }

 private:
  const std::string name_;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> MakeStderrLogger(std::string name) {
  return std::make_shared<StderrLogger>(std::move(name));
}

namespace {

// The format version key of a shard whose column families are not this version's: opened with the
// meta column family alone. Ok when the version is current.
Status CheckVersionOfPartialShard(const rocksdb::DBOptions& db_options, const std::string& path) {
  const auto cf_options = CfOptions(rocksdb::NewLRUCache(size_t{1} << 20));
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(CfNames()[kMetaIdx], cf_options[kMetaIdx]);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  SEARCH_RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &handles, &raw), "open shard " + path));
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::PinnableSlice value;
  const auto s = db->Get(rocksdb::ReadOptions(), handles[0], rocksdb::Slice(kKeyFormatVersion.data(), kKeyFormatVersion.size()), &value);
  Status st;
  if (s.ok() && value.size() == 4 &&
      (GetLe32(value.data()) < kOldestIndexFormatVersion || GetLe32(value.data()) > kIndexFormatVersion))
    st = FormatVersionMismatch("shard " + path + ": ", GetLe32(value.data()));
  value.Reset();
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  (void)db->Close();
  return st;
}

}  // namespace

Status CheckColumnFamilies(const rocksdb::DBOptions& db_options, const std::string& path, bool* has_source) {
  std::vector<std::string> present;
  SEARCH_RETURN_IF_ERROR(FromRocks(rocksdb::DB::ListColumnFamilies(db_options, path, &present),
                                   "shard " + path + " is not a RocksDB database"));
  *has_source = std::find(present.begin(), present.end(), CfNames()[kSourceIdx]) != present.end();
  for (const auto& name : CfNames()) {
    if (name == CfNames()[kSourceIdx]) continue;  // version 2 has none; the version key decides
    if (std::find(present.begin(), present.end(), name) == present.end()) {
      if (std::find(present.begin(), present.end(), CfNames()[kMetaIdx]) != present.end())
        SEARCH_RETURN_IF_ERROR(CheckVersionOfPartialShard(db_options, path));
      return Status::Corruption("shard " + path + " lacks column family '" + name + "': not an index shard");
    }
  }
  return Status::Ok();
}

Status FromRocks(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return Status::Ok();
  std::string msg = std::string(context) + ": " + s.ToString();
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return Status::NotFound(std::move(msg));
    case rocksdb::Status::kCorruption:
      return Status::Corruption(std::move(msg));
    case rocksdb::Status::kIOError:
      return Status::IOError(std::move(msg));
    case rocksdb::Status::kInvalidArgument:
    case rocksdb::Status::kNotSupported:
      return Status::InvalidArgument(std::move(msg));
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTryAgain:
      return Status::Unavailable(std::move(msg));
    default:
      return Status::Internal(std::move(msg));
  }
}

}  // namespace search::store
