// The merge phase of the index builder (build_phases.hpp): runs -> per-shard posting lists,
// encoded in parallel batches and written in term order; then the document table.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "core/bm25.hpp"
#include "index_store/shard_store.hpp"
#include "indexer/build_phases.hpp"
#include "indexer/run_file.hpp"

namespace search {

namespace fs = std::filesystem;

namespace {

constexpr size_t kBatchPostings = size_t{4} << 20;
constexpr size_t kBatchTerms = 32768;

struct EncodedPart {
  uint32_t shard = 0;
  TermInfo info;
  std::string bytes;
  std::string positions;  // the positions blob, in a build with positions
};

struct TermJob {
  std::string term;
  std::vector<Posting> postings;
  std::vector<size_t> starts;
  std::vector<uint32_t> positions;  // with positions: indexed by Posting::pos
  std::vector<EncodedPart> parts;
  Status status;
};

struct ShardLayout {
  uint64_t num_docs = 0;
  std::vector<uint32_t> begin, end;
  uint32_t ShardOf(uint32_t doc) const {
    return static_cast<uint32_t>(std::upper_bound(end.begin(), end.end(), doc) - end.begin());
  }
};

Status RemoveFile(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return Status::IOError("remove " + path + ": " + ec.message());
  return Status::Ok();
}

Result<std::vector<std::unique_ptr<RunReader>>> OpenRuns(const std::vector<std::string>& paths) {
  std::vector<std::unique_ptr<RunReader>> readers;
  readers.reserve(paths.size());
  for (const auto& p : paths) {
    SEARCH_ASSIGN_OR_RETURN(auto r, RunReader::Open(p));
    readers.push_back(std::move(r));
  }
  return readers;
}

// Merges `inputs` into one run at `out_path` and deletes the inputs.
Status MergeToRun(const std::vector<std::string>& inputs, const std::string& out_path, bool with_positions) {
  SEARCH_ASSIGN_OR_RETURN(auto readers, OpenRuns(inputs));
  SEARCH_ASSIGN_OR_RETURN(auto merger, RunMerger::Create(std::move(readers)));
  SEARCH_ASSIGN_OR_RETURN(auto writer, RunWriter::Create(out_path));
  std::string term;
  std::vector<Posting> postings;
  std::vector<size_t> starts;
  std::vector<uint32_t> positions;
  std::vector<uint32_t>* pos = with_positions ? &positions : nullptr;
  for (;;) {
    SEARCH_ASSIGN_OR_RETURN(bool more, merger->Next(&term, &postings, &starts, pos));
    if (!more) break;
    SEARCH_RETURN_IF_ERROR(MergeSegments(&postings, starts));
    SEARCH_RETURN_IF_ERROR(writer->AddPostings(term, postings, pos));
  }
  SEARCH_RETURN_IF_ERROR(writer->Finish());
  merger.reset();
  for (const auto& p : inputs) SEARCH_RETURN_IF_ERROR(RemoveFile(p));
  return Status::Ok();
}

// Sorts a term's postings, then encodes the part of each shard that has any (and its positions,
// when `with_positions`).
Status EncodeTerm(TermJob* job, const ShardLayout& layout, const float* norms, const Bm25Params& bm25,
                  bool with_positions, std::vector<uint32_t>* docs, std::vector<uint32_t>* tfs,
                  std::vector<uint32_t>* positions) {
  job->parts.clear();
  SEARCH_RETURN_IF_ERROR(MergeSegments(&job->postings, job->starts));
  const std::vector<Posting>& p = job->postings;
  const size_t n = p.size();
  if (n == 0 || n > layout.num_docs || p.back().doc >= layout.num_docs)
    return Status::Corruption("term " + job->term + ": postings outside the collection");
  const float idf = Bm25Idf(layout.num_docs, n);
  const float k1 = bm25.k1;
  const PostingScorer scorer = [&](uint32_t doc, uint32_t tf) { return Bm25TermScore(idf, tf, norms[doc], k1); };
  size_t i = 0;
  while (i < n) {
    const uint32_t s = layout.ShardOf(p[i].doc);
    docs->clear();
    tfs->clear();
    positions->clear();
    uint64_t cf = 0;
    size_t j = i;
    for (; j < n && p[j].doc < layout.end[s]; ++j) {
      docs->push_back(p[j].doc);
      tfs->push_back(p[j].tf);
      cf += p[j].tf;
      if (with_positions) {
        const uint32_t* first = job->positions.data() + p[j].pos;
        positions->insert(positions->end(), first, first + p[j].tf);
      }
    }
    auto bytes = EncodeList(*docs, *tfs, layout.begin[s], scorer);
    if (!bytes.ok()) return bytes.status().WithContext("encode term " + job->term);
    EncodedPart& part = job->parts.emplace_back();
    part.shard = s;
    part.bytes = std::move(bytes).value();
    part.info.df = static_cast<uint32_t>(n);
    part.info.count = static_cast<uint32_t>(j - i);
    part.info.cf = cf;
    ListHeader header;
    std::memcpy(&header, part.bytes.data(), sizeof(header));
    part.info.max_score = header.max_score;
    part.info.list_bytes = static_cast<uint32_t>(part.bytes.size());
    if (with_positions) {
      auto blob = EncodePositions(*tfs, *positions);
      if (!blob.ok()) return blob.status().WithContext("encode the positions of term " + job->term);
      part.positions = std::move(blob).value();
    }
    i = j;
  }
  return Status::Ok();
}

Result<uint64_t> ReadVarint(FILE* f) {
  uint64_t v = 0;
  for (int shift = 0; shift <= 63; shift += 7) {
    const int c = getc_unlocked(f);
    if (c == EOF) return Status::Corruption("the external id file is truncated");
    v |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) return v;
  }
  return Status::Corruption("the external id file holds an overlong varint");
}

// Reads one varint-prefixed string of the ids file.
Status ReadString(FILE* f, std::string* out) {
  SEARCH_ASSIGN_OR_RETURN(uint64_t len, ReadVarint(f));
  if (len > (uint64_t{1} << 32)) return Status::Corruption("the external id file holds an oversized string");
  out->resize(len);
  if (len != 0 && std::fread(out->data(), 1, len, f) != len) return Status::Corruption("the external id file is truncated");
  return Status::Ok();
}

// Gives shard s's writer its source blocks: the parse phase's blocks as they are, except a block
// that crosses the shard's boundary (its documents inside are encoded again as one block) and one
// made with another choice of dictionary than the shard's (encoded again with the shard's).
Status AddShardSources(const ParseOutput& parsed, const ShardLayout& layout, uint32_t s, ShardWriter* writer) {
  const uint32_t begin = layout.begin[s], end = layout.end[s];
  const auto& dict = parsed.source_dict;
  const bool keep = dict && SourceDictPays(parsed.source_dict_saved_per_doc, end - begin, dict->bytes().size());
  SEARCH_RETURN_IF_ERROR(writer->SetSourceDict(keep ? dict : nullptr));
  if (begin == end) return Status::Ok();
  const auto& blocks = parsed.source_blocks;
  auto it = std::upper_bound(blocks.begin(), blocks.end(), begin,
                             [](uint32_t doc, const ParseOutput::SourceBlockRef& b) { return doc < b.first_doc; });
  if (it == blocks.begin()) return Status::Internal("no source block holds doc " + std::to_string(begin));
  --it;
  const std::string& path = parsed.sources_path;
  std::vector<char> buffer(size_t{1} << 20);  // declared first: it outlives the FILE
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::IOError("open " + path + ": " + std::strerror(errno));
  std::setvbuf(f.get(), buffer.data(), _IOFBF, buffer.size());
  if (::fseeko(f.get(), static_cast<off_t>(it->offset), SEEK_SET) != 0)
    return Status::IOError("seek " + path + ": " + std::strerror(errno));
  SourceBlockEncoder encoder(kSourceZstdLevel);
  DecodedSourceBlock decoded;
  std::vector<std::string_view> views;
  std::string value, recoded;
  for (; it != blocks.end() && it->first_doc < end; ++it) {
    value.resize(it->bytes);
    if (std::fread(value.data(), 1, value.size(), f.get()) != value.size())
      return Status::Corruption("the source block file is truncated");
    const uint32_t first = std::max(it->first_doc, begin), last = std::min(it->first_doc + it->count, end);
    const bool with_dict =
        value.size() > 5 && static_cast<uint8_t>(value[5]) == static_cast<uint8_t>(SourceCodec::kZstdDict);
    if (first == it->first_doc && last == it->first_doc + it->count && (keep ? !it->early : !with_dict)) {
      SEARCH_RETURN_IF_ERROR(writer->AddSourceBlock(first, value));
      continue;
    }
    SEARCH_RETURN_IF_ERROR(DecodeSourceBlock(value, dict.get(), &decoded));
    views.clear();
    for (uint32_t d = first; d < last; ++d) views.push_back(decoded.doc(d - it->first_doc));
    SEARCH_RETURN_IF_ERROR(encoder.Encode(views, keep ? dict.get() : nullptr, &recoded));
    SEARCH_RETURN_IF_ERROR(writer->AddSourceBlock(first, recoded));
  }
  return Status::Ok();
}

// Adds shard s's documents (external id from the ids file, read from the checkpoint before the
// shard's first document; length) to its writer, after its source blocks when it has sources.
Status AddShardDocs(const ParseOutput& parsed, bool sources, const ShardLayout& layout, uint32_t s,
                    ShardWriter* writer) {
  if (sources) SEARCH_RETURN_IF_ERROR(AddShardSources(parsed, layout, s, writer));
  const std::string& path = parsed.ids_path;
  std::vector<char> buffer(size_t{1} << 20);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::IOError("open " + path + ": " + std::strerror(errno));
  std::setvbuf(f.get(), buffer.data(), _IOFBF, buffer.size());
  const uint32_t begin = layout.begin[s], end = layout.end[s];
  if (begin == end) return Status::Ok();
  const uint64_t checkpoint = begin / kIdsCheckpointDocs;
  if (checkpoint >= parsed.ids_checkpoints.size()) return Status::Internal("the ids file lacks a checkpoint");
  if (::fseeko(f.get(), static_cast<off_t>(parsed.ids_checkpoints[checkpoint]), SEEK_SET) != 0)
    return Status::IOError("seek " + path + ": " + std::strerror(errno));
  std::string id;
  for (uint64_t doc = checkpoint * kIdsCheckpointDocs; doc < end; ++doc) {
    SEARCH_RETURN_IF_ERROR(ReadString(f.get(), &id));
    if (doc < begin) continue;
    SEARCH_RETURN_IF_ERROR(writer->AddDoc(static_cast<uint32_t>(doc), id, parsed.lengths[doc]));
  }
  return Status::Ok();
}

}  // namespace

Status RunMergePhase(const IndexBuildOptions& options, const std::string& index_dir, const std::string& work_dir,
                     uint32_t threads, ParseOutput* parsed, BuildProgress* progress, MergeOutput* out) {
  const uint64_t num_docs = parsed->lengths.size();
  const uint32_t num_shards = options.shards;
  ShardLayout layout;
  layout.num_docs = num_docs;
  for (uint32_t i = 0; i < num_shards; ++i) {
    uint32_t b, e;
    ShardRange(num_docs, num_shards, i, &b, &e);
    layout.begin.push_back(b);
    layout.end.push_back(e);
  }
  CollectionStats stats{num_docs, parsed->total_tokens};
  std::vector<float> norms(num_docs);
  const double avgdl = stats.avgdl();
  for (uint64_t d = 0; d < num_docs; ++d) norms[d] = Bm25Norm(parsed->lengths[d], avgdl, options.bm25);

  // Merge passes until the runs fit one merge.
  std::vector<std::string> runs = parsed->runs;
  const size_t fan_in = std::max<size_t>(2, options.max_merge_fan_in);
  uint64_t next_merged = 0;
  while (runs.size() > fan_in) {
    std::vector<std::string> group(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(fan_in));
    const std::string merged = work_dir + "/runs/merged-" + std::to_string(next_merged++) + ".run";
    SEARCH_RETURN_IF_ERROR(MergeToRun(group, merged, options.positions));
    runs.erase(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(fan_in));
    runs.push_back(merged);
    ++out->merge_passes;
  }

  // The shard writers.
  std::vector<std::unique_ptr<ShardWriter>> writers;
  for (uint32_t i = 0; i < num_shards; ++i) {
    ShardMeta meta;
    meta.shard_id = i;
    meta.num_shards = num_shards;
    meta.doc_begin = layout.begin[i];
    meta.doc_end = layout.end[i];
    meta.stats = stats;
    meta.bm25 = options.bm25;
    meta.analyzer = options.analyzer;
    meta.positions = options.positions;
    meta.sources = options.sources;
    SEARCH_ASSIGN_OR_RETURN(auto w, ShardWriter::Create(index_dir + "/shard-" + std::to_string(i), meta));
    writers.push_back(std::move(w));
    ShardEntry e;
    e.id = i;
    e.path = "shard-" + std::to_string(i);
    e.doc_begin = layout.begin[i];
    e.doc_end = layout.end[i];
    out->shards.push_back(std::move(e));
  }

  // The final merge: batches of terms, encoded in parallel, written in term order.
  uint64_t total_run_bytes = 0;
  for (const auto& r : runs) {
    std::error_code ec;
    total_run_bytes += fs::file_size(r, ec);
  }
  progress->merge_total.store(total_run_bytes);
  progress->phase.store(BuildProgress::kMerge);
  SEARCH_ASSIGN_OR_RETURN(auto readers, OpenRuns(runs));
  SEARCH_ASSIGN_OR_RETURN(auto merger, RunMerger::Create(std::move(readers)));
  std::vector<TermJob> jobs;
  bool done = false;
  while (!done) {
    size_t used = 0, batch_postings = 0;
    while (used < kBatchTerms && batch_postings < kBatchPostings) {
      if (used == jobs.size()) jobs.emplace_back();
      TermJob& job = jobs[used];
      SEARCH_ASSIGN_OR_RETURN(bool more, merger->Next(&job.term, &job.postings, &job.starts,
                                                      options.positions ? &job.positions : nullptr));
      if (!more) {
        done = true;
        break;
      }
      batch_postings += job.postings.size() + job.positions.size();
      ++used;
    }
    progress->merge_bytes.store(merger->bytes_read(), std::memory_order_relaxed);
    ParallelFor(used, threads, [&](size_t i) {
      thread_local std::vector<uint32_t> docs, tfs, positions;
      jobs[i].status =
          EncodeTerm(&jobs[i], layout, norms.data(), options.bm25, options.positions, &docs, &tfs, &positions);
    });
    for (size_t i = 0; i < used; ++i) {
      TermJob& job = jobs[i];
      SEARCH_RETURN_IF_ERROR(job.status);
      for (EncodedPart& part : job.parts) {
        SEARCH_RETURN_IF_ERROR(writers[part.shard]->AddTerm(job.term, part.info, part.bytes, part.positions));
        ++out->shards[part.shard].num_terms;
        out->shards[part.shard].num_postings += part.info.count;
        std::string().swap(part.bytes);
        std::string().swap(part.positions);
      }
      ++out->terms;
      out->postings += job.postings.size();
    }
    progress->terms.store(out->terms, std::memory_order_relaxed);
    if (batch_postings >= kBatchPostings) {  // don't keep a huge batch's buffers for small terms
      for (auto& job : jobs) {
        std::vector<Posting>().swap(job.postings);
        std::vector<uint32_t>().swap(job.positions);
      }
    }
  }
  merger.reset();
  jobs.clear();
  std::error_code ec;
  fs::remove_all(work_dir + "/runs", ec);
  if (ec) return Status::IOError("remove " + work_dir + "/runs: " + ec.message());

  // Documents, then finish every shard (in parallel: each writer is independent).
  progress->phase.store(BuildProgress::kFinish);
  std::vector<Status> finished(num_shards);
  ParallelFor(num_shards, threads, [&](size_t i) {
    finished[i] = AddShardDocs(*parsed, options.sources, layout, static_cast<uint32_t>(i), writers[i].get());
    if (finished[i].ok()) finished[i] = writers[i]->Finish();
  });
  SEARCH_RETURN_IF_ERROR(RemoveFile(parsed->ids_path));
  if (options.sources) SEARCH_RETURN_IF_ERROR(RemoveFile(parsed->sources_path));
  for (auto& s : finished) SEARCH_RETURN_IF_ERROR(s);
  return Status::Ok();
}

}  // namespace search
