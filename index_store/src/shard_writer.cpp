// ShardWriter: streams each column family into SST files with rocksdb::SstFileWriter (keys arrive
// sorted), then ingests them all at once (IngestExternalFiles, move_files) into a fresh database.
// No memtable, WAL or compaction is involved, so a shard of GBs is written at disk speed.
#include <fcntl.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/sst_file_writer.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <system_error>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "core/cpus.hpp"
#include "index_store/manifest.hpp"
#include "index_store/shard_store.hpp"
#include "index_store/source_block.hpp"
#include "shard_format.hpp"

namespace search {

namespace fs = std::filesystem;
using namespace store;  // NOLINT(google-build-using-namespace)

namespace {

constexpr const char* kTmpDirName = "ingest.tmp";
// Rolls to a new SST file past this size: smaller per-file index blocks, and ingestion of
// several non-overlapping files per column family is as cheap as one.
constexpr uint64_t kTargetSstBytes = uint64_t{256} << 20;

// A sequence of SST files for one column family, rolled at kTargetSstBytes.
class CfSink {
 public:
  CfSink(const rocksdb::Options& options, rocksdb::ColumnFamilyHandle* cf, std::string dir, std::string stem,
         bool skip_filters)
      : options_(options), cf_(cf), dir_(std::move(dir)), stem_(std::move(stem)), skip_filters_(skip_filters) {}

  Status Put(std::string_view key, std::string_view value) {
    if (writer_ && writer_->FileSize() >= kTargetSstBytes) SEARCH_RETURN_IF_ERROR(Close());
    if (!writer_) {
      writer_ = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(options_), options_, cf_,
                                                         /*invalidate_page_cache=*/true,
                                                         rocksdb::Env::IOPriority::IO_TOTAL, skip_filters_);
      std::string path = dir_ + "/" + stem_ + "-" + std::to_string(files_.size()) + ".sst";
      SEARCH_RETURN_IF_ERROR(FromRocks(writer_->Open(path), "open " + path));
      files_.push_back(std::move(path));
    }
    return FromRocks(writer_->Put(rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size())),
                     "write " + files_.back());
  }

  // Finishes the open file, if any.
  Status Close() {
    if (!writer_) return Status::Ok();
    Status s = FromRocks(writer_->Finish(), "finish " + files_.back());
    writer_.reset();
    return s;
  }

  rocksdb::ColumnFamilyHandle* cf() const { return cf_; }
  const std::vector<std::string>& files() const { return files_; }

 private:
  const rocksdb::Options options_;
  rocksdb::ColumnFamilyHandle* const cf_;
  const std::string dir_, stem_;
  const bool skip_filters_;
  std::unique_ptr<rocksdb::SstFileWriter> writer_;
  std::vector<std::string> files_;
};

Status ValidateMeta(const ShardMeta& m) {
  if (m.format_version != kIndexFormatVersion)
    return Status::InvalidArgument("index format version " + std::to_string(m.format_version) +
                                   ", this build writes " + std::to_string(kIndexFormatVersion));
  if (m.num_shards == 0 || m.shard_id >= m.num_shards)
    return Status::InvalidArgument("shard_id " + std::to_string(m.shard_id) + " not below num_shards " +
                                   std::to_string(m.num_shards));
  if (m.doc_begin > m.doc_end || m.doc_end > m.stats.num_docs)
    return Status::InvalidArgument("doc range [" + std::to_string(m.doc_begin) + ", " + std::to_string(m.doc_end) +
                                   ") not inside [0, num_docs = " + std::to_string(m.stats.num_docs) + ")");
  if (!(m.bm25.k1 >= 0 && m.bm25.k1 <= 1e6f) || !(m.bm25.b >= 0 && m.bm25.b <= 1))
    return Status::InvalidArgument("bm25 parameters out of range (k1 in [0, 1e6], b in [0, 1])");
  return Status::Ok();
}

// Documents' sources gathered for a block (or, before the dictionary is decided, for several).
struct SourceRun {
  uint32_t first_doc = 0;
  std::string text;
  std::vector<uint32_t> ends;
  std::vector<std::string_view> Docs(size_t from, size_t to) const {
    std::vector<std::string_view> out;
    for (size_t i = from; i < to; ++i) {
      const uint32_t b = i == 0 ? 0 : ends[i - 1];
      out.emplace_back(text.data() + b, ends[i] - b);
    }
    return out;
  }
};

// fsyncs every regular file directly in `dir`, then `dir` itself.
Status SyncDirectoryFiles(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) SEARCH_RETURN_IF_ERROR(SyncPath(entry.path().string()));
  }
  if (ec) return Status::IOError("list " + dir + ": " + ec.message());
  return SyncPath(dir);
}

}  // namespace

struct ShardWriter::Impl {
  std::string path;
  ShardMeta meta;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  std::vector<std::unique_ptr<CfSink>> sinks;  // by CF index
  std::string tmp_dir;

  std::string last_term;
  bool have_term = false;
  uint64_t num_terms = 0, num_postings = 0;
  uint32_t next_doc = 0;
  std::vector<uint32_t> len_chunk;  // lengths of the chunk being filled
  uint32_t next_chunk = 0;
  bool finished = false;
  Status failed;  // the first write error; the writer is unusable after one

  std::string aligned;  // scratch copy when list bytes are not 4-byte aligned

  // Sources: the block being filled; the closed blocks held until the dictionary is decided.
  SourceBlockEncoder source_encoder{kSourceZstdLevel};
  SourceRun source_block;
  std::vector<SourceRun> held_blocks;
  size_t held_bytes = 0;
  bool dict_decided = false;
  std::shared_ptr<const SourceDict> dict;  // null: blocks without a dictionary
  std::vector<uint32_t> block_starts;      // first doc of every written block
  bool prebuilt = false;                   // SetSourceDict was called: blocks come ready
  uint32_t next_block_doc = 0;             // with prebuilt blocks: the next block's first doc

  // Once the dictionary is decided, closed blocks are encoded a batch at a time on a second thread
  // while the caller goes on adding documents (the finish phase of a build with fewer shards than
  // cores leaves cores idle), and written in order. One batch is in flight at a time.
  struct EncodeBatch {
    std::vector<SourceRun> runs;
    std::vector<std::string> values;
    Status status;
  };
  static constexpr size_t kEncodeBatchBlocks = 64;
  std::vector<SourceRun> filling;                      // closed, not yet handed over
  std::unique_ptr<EncodeBatch> in_flight;              // read by the encoding thread until it ends
  SourceBlockEncoder batch_encoder{kSourceZstdLevel};  // the encoding thread's
  std::future<void> encoding;  // declared last: destroyed (waited for) before what it uses

  Status WriteInFlight() {
    if (!encoding.valid()) return Status::Ok();
    encoding.get();
    std::unique_ptr<EncodeBatch> b = std::move(in_flight);
    SEARCH_RETURN_IF_ERROR(b->status);
    for (size_t i = 0; i < b->runs.size(); ++i) SEARCH_RETURN_IF_ERROR(WriteBlock(b->runs[i], b->values[i]));
    return Status::Ok();
  }

  // Writes the batch in flight, then hands `filling` to the encoding thread.
  Status LaunchBatch() {
    SEARCH_RETURN_IF_ERROR(WriteInFlight());
    if (filling.empty()) return Status::Ok();
    in_flight = std::make_unique<EncodeBatch>();
    in_flight->runs = std::move(filling);
    filling.clear();
    encoding = std::async(std::launch::async, [b = in_flight.get(), d = dict.get(), enc = &batch_encoder] {
      b->values.resize(b->runs.size());
      for (size_t i = 0; i < b->runs.size() && b->status.ok(); ++i)
        b->status = enc->Encode(b->runs[i].Docs(0, b->runs[i].ends.size()), d, &b->values[i]);
    });
    return Status::Ok();
  }

  Status WriteBlock(const SourceRun& run, std::string_view value) { return WriteBlock(run.first_doc, value); }
  Status WriteBlock(uint32_t first_doc, std::string_view value) {
    block_starts.push_back(first_doc);
    return sinks[kSourceIdx]->Put(Be32Key(first_doc), value);
  }

  // Trains a dictionary on the held sources, keeps it if what it saves on the held blocks,
  // extrapolated to the shard's documents, exceeds its own size, and writes the held blocks.
  Status DecideDict() {
    dict_decided = true;
    std::vector<std::string_view> samples;
    for (const SourceRun& b : held_blocks)
      for (std::string_view d : b.Docs(0, b.ends.size())) samples.push_back(d);
    const std::string trained = SourceDict::Train(samples, kSourceDictBytes);
    std::vector<std::string> plain(held_blocks.size());
    size_t plain_bytes = 0;
    for (size_t i = 0; i < held_blocks.size(); ++i) {
      const auto docs = held_blocks[i].Docs(0, held_blocks[i].ends.size());
      SEARCH_RETURN_IF_ERROR(source_encoder.Encode(docs, nullptr, &plain[i]));
      plain_bytes += plain[i].size();
    }
    std::vector<std::string> with(held_blocks.size());
    if (!trained.empty() && !held_blocks.empty()) {
      auto made = SourceDict::Make(trained, kSourceZstdLevel);
      if (made.ok()) {
        size_t with_bytes = 0;
        for (size_t i = 0; i < held_blocks.size(); ++i) {
          const auto docs = held_blocks[i].Docs(0, held_blocks[i].ends.size());
          SEARCH_RETURN_IF_ERROR(source_encoder.Encode(docs, made->get(), &with[i]));
          with_bytes += with[i].size();
        }
        const double held_docs = static_cast<double>(held_blocks.back().first_doc + held_blocks.back().ends.size() -
                                                     held_blocks.front().first_doc);
        const double saved_per_doc = (static_cast<double>(plain_bytes) - static_cast<double>(with_bytes)) / held_docs;
        if (SourceDictPays(saved_per_doc, meta.doc_end - meta.doc_begin, trained.size()))
          dict = std::move(made).value();
      }
    }
    for (size_t i = 0; i < held_blocks.size(); ++i)
      SEARCH_RETURN_IF_ERROR(WriteBlock(held_blocks[i], dict ? with[i] : plain[i]));
    held_blocks.clear();
    held_bytes = 0;
    return Status::Ok();
  }

  // Closes the block being filled (if any): held while the dictionary is undecided, else written.
  Status CloseSourceBlock() {
    if (source_block.ends.empty()) return Status::Ok();
    SourceRun run = std::move(source_block);
    source_block = SourceRun{};
    if (!dict_decided) {
      held_bytes += run.text.size();
      held_blocks.push_back(std::move(run));
      if (held_bytes >= kSourceTrainBytes) return DecideDict();
      return Status::Ok();
    }
    filling.push_back(std::move(run));
    return filling.size() >= kEncodeBatchBlocks ? LaunchBatch() : Status::Ok();
  }

  Status AddSource(uint32_t doc, std::string_view source) {
    if (source_block.ends.empty()) source_block.first_doc = doc;
    source_block.text.append(source);
    source_block.ends.push_back(static_cast<uint32_t>(source_block.text.size()));
    if (SourceBlockFull(source_block.text.size(), source_block.ends.size())) return CloseSourceBlock();
    return Status::Ok();
  }

  ~Impl() {
    if (db) {
      for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
      (void)db->Close();
    }
    std::error_code ec;
    if (!tmp_dir.empty()) fs::remove_all(tmp_dir, ec);
  }

  Status Check() const {
    if (finished) return Status::InvalidArgument("shard writer " + path + " is already finished");
    return failed;
  }
  Status Track(Status s) {
    if (!s.ok() && failed.ok()) failed = s;
    return s;
  }

  Status FlushLenChunk() {
    if (len_chunk.empty()) return Status::Ok();
    std::string value;
    value.reserve(len_chunk.size() * 4);
    for (uint32_t len : len_chunk) PutLe32(&value, len);
    len_chunk.clear();
    return sinks[kMetaIdx]->Put(LenChunkKey(next_chunk++), value);
  }
};

ShardWriter::ShardWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShardWriter::~ShardWriter() = default;

Result<std::unique_ptr<ShardWriter>> ShardWriter::Create(const std::string& path, const ShardMeta& meta) {
  SEARCH_RETURN_IF_ERROR(ValidateMeta(meta));
  try {
    (void)ShardMetaToJson(meta);  // the analyzer config must serialise (valid UTF-8)
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("shard metadata does not serialise: ") + e.what());
  }
  std::error_code ec;
  if (fs::exists(path, ec)) return Status::AlreadyExists("shard path " + path + " already exists");
  if (!fs::create_directories(path, ec) || ec)
    return Status::IOError("create " + path + ": " + (ec ? ec.message() : "failed"));

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->meta = meta;
  impl->next_doc = meta.doc_begin;
  impl->len_chunk.reserve(kLenChunk);

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.error_if_exists = true;
  db_options.create_missing_column_families = true;
  db_options.info_log = MakeStderrLogger(path);
  db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db_options.keep_log_file_num = 1;
  // RocksDB 7.8 records no unique ID for ingested files and would warn on every open; block
  // checksums and the index manifest's CRC cover integrity.
  db_options.verify_sst_unique_id_in_manifest = false;

  const auto cf_options = CfOptions(rocksdb::NewLRUCache(size_t{8} << 20));
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (int i = 0; i < kNumCfs; ++i) descriptors.emplace_back(CfNames()[i], cf_options[i]);
  rocksdb::DB* raw = nullptr;
  SEARCH_RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(db_options, path, descriptors, &impl->handles, &raw),
                                   "create shard " + path));
  impl->db.reset(raw);

  impl->tmp_dir = path + "/" + kTmpDirName;
  if (!fs::create_directory(impl->tmp_dir, ec) || ec)
    return Status::IOError("create " + impl->tmp_dir + ": " + (ec ? ec.message() : "failed"));
  // The lists' and positions' blocks are compressed by RocksDB's parallel compression threads, not
  // by the one thread that delivers a shard's terms: compressing 10 GB of lists at ZSTD level 3 on
  // that thread took 150-200 s of a 25.2M-document shard's 200-250 s build on 16 cores. The file
  // format is the same either way. A host's cores are split among the shards written side by side.
  const uint32_t compress_threads = std::clamp<uint32_t>(AvailableCores() / std::max<uint32_t>(1, meta.num_shards), 1, 8);
  for (int i = 0; i < kNumCfs; ++i) {
    rocksdb::Options options(db_options, cf_options[i]);
    if ((i == kListsIdx || i == kPositionsIdx) && options.compression != rocksdb::kNoCompression)
      options.compression_opts.parallel_threads = compress_threads;
    impl->sinks.push_back(
        std::make_unique<CfSink>(options, impl->handles[i], impl->tmp_dir, CfNames()[i], !CfHasFilter(i)));
  }
  return std::unique_ptr<ShardWriter>(new ShardWriter(std::move(impl)));
}

Status ShardWriter::AddTerm(std::string_view term, const TermInfo& info, std::string_view list_bytes,
                            std::string_view positions) {
  Impl& w = *impl_;
  SEARCH_RETURN_IF_ERROR(w.Check());
  if (term.empty()) return Status::InvalidArgument("empty term");
  if (w.have_term && term <= std::string_view(w.last_term))
    return Status::InvalidArgument("term " + QuoteTerm(term) + " is not after " + QuoteTerm(w.last_term) +
                                   ": terms must be strictly ascending");
  // ListView::Parse needs 4-byte aligned bytes; callers' strings usually are, copy otherwise.
  std::string_view bytes = list_bytes;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 4 != 0) {
    w.aligned.assign(list_bytes);
    bytes = w.aligned;
  }
  auto view = ListView::Parse(bytes, /*verify_crc=*/true);
  if (!view.ok()) return Status::InvalidArgument("list of term " + QuoteTerm(term) + ": " + view.status().message());
  if (view->num_blocks() == 0) return Status::InvalidArgument("list of term " + QuoteTerm(term) + " is empty");
  const uint32_t first_floor = view->base_doc();
  const uint32_t last_doc = view->block(view->num_blocks() - 1).last_doc;
  if (first_floor < w.meta.doc_begin || last_doc >= w.meta.doc_end)
    return Status::InvalidArgument("list of term " + QuoteTerm(term) + " has docIDs in [" + std::to_string(first_floor) +
                                   ", " + std::to_string(last_doc) + "], outside the shard's [" +
                                   std::to_string(w.meta.doc_begin) + ", " + std::to_string(w.meta.doc_end) + ")");
  if (info.count != view->count())
    return Status::InvalidArgument("term " + QuoteTerm(term) + ": TermInfo count " + std::to_string(info.count) +
                                   " but the list holds " + std::to_string(view->count()));
  if (info.list_bytes != 0 && info.list_bytes != list_bytes.size())
    return Status::InvalidArgument("term " + QuoteTerm(term) + ": TermInfo list_bytes " + std::to_string(info.list_bytes) +
                                   " but the list is " + std::to_string(list_bytes.size()) + " bytes");
  if (info.df < info.count || info.df > w.meta.stats.num_docs)
    return Status::InvalidArgument("term " + QuoteTerm(term) + ": df " + std::to_string(info.df) +
                                   " must lie in [count, num_docs]");
  if (!w.meta.positions && !positions.empty())
    return Status::InvalidArgument("term " + QuoteTerm(term) + ": positions given to a shard built without positions");
  if (w.meta.positions) {
    if (positions.empty())
      return Status::InvalidArgument("term " + QuoteTerm(term) + ": the shard has positions, the term none");
    auto pv = PositionsView::Parse(positions, view->count());
    if (!pv.ok())
      return Status::InvalidArgument("positions of term " + QuoteTerm(term) + ": " + pv.status().message());
  }
  TermInfo stored = info;
  stored.list_bytes = static_cast<uint32_t>(list_bytes.size());
  SEARCH_RETURN_IF_ERROR(w.Track(w.sinks[kTermsIdx]->Put(term, EncodeTermInfo(stored))));
  SEARCH_RETURN_IF_ERROR(w.Track(w.sinks[kListsIdx]->Put(term, list_bytes)));
  if (w.meta.positions) SEARCH_RETURN_IF_ERROR(w.Track(w.sinks[kPositionsIdx]->Put(term, positions)));
  w.last_term.assign(term);
  w.have_term = true;
  ++w.num_terms;
  w.num_postings += info.count;
  return Status::Ok();
}

Status ShardWriter::AddDoc(uint32_t doc, std::string_view external_id, uint32_t length,
                           std::optional<std::string_view> source) {
  Impl& w = *impl_;
  SEARCH_RETURN_IF_ERROR(w.Check());
  if (doc < w.meta.doc_begin || doc >= w.meta.doc_end)
    return Status::InvalidArgument("doc " + std::to_string(doc) + " outside the shard's [" +
                                   std::to_string(w.meta.doc_begin) + ", " + std::to_string(w.meta.doc_end) + ")");
  if (doc < w.next_doc)
    return Status::InvalidArgument("doc " + std::to_string(doc) + " added twice or out of order (expected " +
                                   std::to_string(w.next_doc) + ")");
  if (doc > w.next_doc)
    return Status::InvalidArgument("doc " + std::to_string(doc) + " added before doc " + std::to_string(w.next_doc) +
                                   ": every doc of the range must be added, ascending");
  if (w.meta.sources && w.prebuilt) {
    if (source.has_value())
      return Status::InvalidArgument("doc " + std::to_string(doc) + ": a source given to a writer of ready blocks");
  } else if (w.meta.sources != source.has_value())
    return Status::InvalidArgument("doc " + std::to_string(doc) +
                                   (w.meta.sources ? ": the shard stores sources, the doc has none"
                                                   : ": a source given to a shard built without sources"));
  if (source && source->size() > kMaxSourceBytes)
    return Status::InvalidArgument("doc " + std::to_string(doc) + ": its source of " + std::to_string(source->size()) +
                                   " bytes exceeds the limit of " + std::to_string(kMaxSourceBytes));
  SEARCH_RETURN_IF_ERROR(w.Track(w.sinks[kDocsIdx]->Put(Be32Key(doc), external_id)));
  if (source) SEARCH_RETURN_IF_ERROR(w.Track(w.AddSource(doc, *source)));
  w.len_chunk.push_back(length);
  if (w.len_chunk.size() == kLenChunk) SEARCH_RETURN_IF_ERROR(w.Track(w.FlushLenChunk()));
  ++w.next_doc;
  return Status::Ok();
}

Status ShardWriter::SetSourceDict(std::shared_ptr<const SourceDict> dict) {
  Impl& w = *impl_;
  SEARCH_RETURN_IF_ERROR(w.Check());
  if (!w.meta.sources) return Status::InvalidArgument("source blocks given to a shard built without sources");
  if (w.prebuilt || w.next_doc != w.meta.doc_begin)
    return Status::InvalidArgument("SetSourceDict after documents or a second time");
  w.prebuilt = true;
  w.dict_decided = true;
  w.dict = std::move(dict);
  w.next_block_doc = w.meta.doc_begin;
  return Status::Ok();
}

Status ShardWriter::AddSourceBlock(uint32_t first_doc, std::string_view value) {
  Impl& w = *impl_;
  SEARCH_RETURN_IF_ERROR(w.Check());
  if (!w.prebuilt) return Status::InvalidArgument("AddSourceBlock before SetSourceDict");
  const uint32_t count = PeekSourceBlockCount(value);
  if (first_doc != w.next_block_doc || count == 0 || count > w.meta.doc_end - first_doc)
    return Status::InvalidArgument("source block at doc " + std::to_string(first_doc) + " of " + std::to_string(count) +
                                   " documents: the next block starts at doc " + std::to_string(w.next_block_doc) +
                                   " and the shard ends at " + std::to_string(w.meta.doc_end));
  const auto codec = static_cast<uint8_t>(value[5]);
  if (static_cast<uint8_t>(value[4]) != kSourceBlockVersion || codec > static_cast<uint8_t>(SourceCodec::kZstdDict) ||
      (codec == static_cast<uint8_t>(SourceCodec::kZstdDict) && !w.dict) ||
      Crc32c(value.data() + 4, value.size() - 4) != GetLe32(value.data()))
    return Status::InvalidArgument("source block at doc " + std::to_string(first_doc) +
                                   ": bad header or CRC, or a dictionary the shard lacks");
  w.next_block_doc = first_doc + count;
  return w.Track(w.WriteBlock(first_doc, value));
}

Status ShardWriter::Finish() {
  Impl& w = *impl_;
  SEARCH_RETURN_IF_ERROR(w.Check());
  if (w.next_doc != w.meta.doc_end)
    return Status::InvalidArgument("docs [" + std::to_string(w.next_doc) + ", " + std::to_string(w.meta.doc_end) +
                                   ") of shard " + w.path + " were never added");
  w.finished = true;
  SEARCH_RETURN_IF_ERROR(w.FlushLenChunk());

  ShardMeta meta = w.meta;
  meta.num_terms = w.num_terms;
  meta.num_postings = w.num_postings;
  std::string version;
  PutLe32(&version, kIndexFormatVersion);
  SEARCH_RETURN_IF_ERROR(w.sinks[kMetaIdx]->Put(kKeyFormatVersion, version));
  SEARCH_RETURN_IF_ERROR(w.sinks[kMetaIdx]->Put(kKeyShardMeta, ShardMetaToJson(meta)));
  if (meta.sources && w.prebuilt && w.next_block_doc != meta.doc_end)
    return Status::InvalidArgument("the source blocks of shard " + w.path + " end at doc " +
                                   std::to_string(w.next_block_doc) + ", the shard at " + std::to_string(meta.doc_end));
  if (meta.sources) {
    SEARCH_RETURN_IF_ERROR(w.CloseSourceBlock());
    if (!w.dict_decided) SEARCH_RETURN_IF_ERROR(w.DecideDict());
    SEARCH_RETURN_IF_ERROR(w.LaunchBatch());
    SEARCH_RETURN_IF_ERROR(w.WriteInFlight());
    std::string starts;
    starts.reserve(4 * w.block_starts.size());
    for (uint32_t b : w.block_starts) PutLe32(&starts, b);
    SEARCH_RETURN_IF_ERROR(w.sinks[kMetaIdx]->Put(kKeySourceBlocks, starts));
    if (w.dict) {
      std::string value;
      PutLe32(&value, Crc32c(w.dict->bytes().data(), w.dict->bytes().size()));
      value.append(w.dict->bytes());
      SEARCH_RETURN_IF_ERROR(w.sinks[kMetaIdx]->Put(kKeySourceDict, value));
    }
  }

  std::vector<rocksdb::IngestExternalFileArg> args;
  for (auto& sink : w.sinks) {
    SEARCH_RETURN_IF_ERROR(sink->Close());
    if (sink->files().empty()) continue;  // e.g. no terms: an SST cannot be empty
    rocksdb::IngestExternalFileArg arg;
    arg.column_family = sink->cf();
    arg.external_files = sink->files();
    arg.options.move_files = true;
    arg.options.snapshot_consistency = false;
    arg.options.allow_global_seqno = true;  // stays 0: the database is empty
    arg.options.write_global_seqno = false;
    arg.options.verify_checksums_before_ingest = false;
    args.push_back(std::move(arg));
  }
  SEARCH_RETURN_IF_ERROR(FromRocks(w.db->IngestExternalFiles(args), "ingest into " + w.path));

  for (auto* h : w.handles) SEARCH_RETURN_IF_ERROR(FromRocks(w.db->DestroyColumnFamilyHandle(h), "close " + w.path));
  w.handles.clear();
  SEARCH_RETURN_IF_ERROR(FromRocks(w.db->Close(), "close " + w.path));
  w.db.reset();
  std::error_code ec;
  fs::remove_all(w.tmp_dir, ec);
  if (ec) return Status::IOError("remove " + w.tmp_dir + ": " + ec.message());
  w.tmp_dir.clear();
  return SyncDirectoryFiles(w.path);
}

}  // namespace search
