// The parse phase of the index builder (build_phases.hpp): a reader (the calling thread), parser
// threads (which also encode source blocks), a dictionary trainer thread, and an in-order commit
// that assigns docIDs.
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "index_store/source_block.hpp"
#include "indexer/build_phases.hpp"
#include "indexer/jsonl_reader.hpp"
#include "indexer/posting_accumulator.hpp"
#include "indexer/run_file.hpp"

namespace search {

namespace {

constexpr uint64_t kMaxDocs = UINT32_MAX;  // docIDs are uint32 and N must fit as well
constexpr size_t kMinShareBytes = size_t{64} << 10;

struct ParsedDoc {
  uint64_t line = 0;
  bool ok = false;
  std::string reason;  // when !ok
  std::string id;
  std::string_view source;  // with sources: the line, ASCII whitespace trimmed (in the chunk's data)
  uint32_t length = 0;
  std::vector<std::pair<uint32_t, uint32_t>> id_tfs;  // (term id in the worker's accumulator, tf)
  std::vector<uint32_t> positions;  // with positions: each id_tfs term's positions, in that order
};

// A source block of a chunk: `count` good documents from the chunk's `first`-th good one.
struct ChunkBlock {
  uint32_t first = 0;
  uint32_t count = 0;
  bool early = false;  // encoded before the dictionary was ready
  std::string value;
};

struct ParsedChunk {
  uint64_t seq = 0;
  uint64_t blank_lines = 0;
  std::vector<ParsedDoc> docs;
  std::vector<ChunkBlock> blocks;  // with sources
  size_t num_blocks = 0;           // blocks[0, num_blocks) are this chunk's (the vector is reused)
};

bool IsAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

// The line without its leading and trailing ASCII whitespace: the JSON object as stored.
std::string_view TrimAscii(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Parses one chunk's lines and analyzes every good document; terms get ids from `acc`. With
// `positions`, each term's positions (indexes into the analyzed token stream) are kept too; with
// `sources`, each document's line (trimmed), a view into `chunk`, which outlives the commit.
void ParseChunk(const LineChunk& chunk, const Analyzer& analyzer, bool positions, bool sources,
                PostingAccumulator* acc, ParsedChunk* out) {
  out->seq = chunk.seq;
  out->blank_lines = 0;
  out->docs.clear();
  std::string_view rest(chunk.data);
  uint64_t line_no = chunk.first_line;
  DocLine doc;
  std::vector<std::string> tokens;
  std::vector<uint32_t> ids;
  std::vector<uint64_t> id_pos;  // (term id << 32 | position), sorted: by term, then position
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    const uint64_t this_line = line_no++;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (IsBlankLine(line)) {
      ++out->blank_lines;
      continue;
    }
    ParsedDoc& pd = out->docs.emplace_back();
    pd.line = this_line;
    if (!ParseDocLine(line, &doc, &pd.reason)) continue;
    if (sources) {
      const std::string_view source = TrimAscii(line);
      if (source.size() > kMaxSourceBytes) {
        pd.reason = "the line has " + std::to_string(source.size()) + " bytes, more than a stored source may (" +
                    std::to_string(kMaxSourceBytes) + "); index with --no-source to skip sources";
        continue;
      }
      pd.source = source;
    }
    tokens.clear();
    analyzer.Analyze(doc.contents, &tokens);
    if (tokens.size() > UINT32_MAX) {
      pd.reason = "document has more than 2^32 - 1 tokens";
      continue;
    }
    pd.ok = true;
    pd.id = std::move(doc.id);
    pd.length = static_cast<uint32_t>(tokens.size());
    ids.clear();
    for (const auto& t : tokens) ids.push_back(acc->TermId(t));
    if (positions) {
      id_pos.clear();
      for (size_t i = 0; i < ids.size(); ++i) id_pos.push_back(uint64_t{ids[i]} << 32 | i);
      std::sort(id_pos.begin(), id_pos.end());
      for (size_t i = 0; i < id_pos.size(); ++i) {
        ids[i] = static_cast<uint32_t>(id_pos[i] >> 32);
        pd.positions.push_back(static_cast<uint32_t>(id_pos[i]));
      }
    } else {
      std::sort(ids.begin(), ids.end());
    }
    for (size_t i = 0; i < ids.size();) {
      size_t j = i + 1;
      while (j < ids.size() && ids[j] == ids[i]) ++j;
      pd.id_tfs.emplace_back(ids[i], static_cast<uint32_t>(j - i));
      i = j;
    }
  }
}

// Encodes the chunk's good documents' sources into blocks (SourceBlockFull closes one, and the
// chunk's end), with `dict` when given.
Status EncodeChunkBlocks(const SourceDict* dict, bool early, SourceBlockEncoder* encoder,
                         std::vector<std::string_view>* views, ParsedChunk* chunk) {
  chunk->num_blocks = 0;
  uint32_t good = 0, block_first = 0;
  size_t text = 0;
  views->clear();
  auto close = [&]() -> Status {
    if (chunk->num_blocks == chunk->blocks.size()) chunk->blocks.emplace_back();
    ChunkBlock& b = chunk->blocks[chunk->num_blocks++];
    b.first = block_first;
    b.count = static_cast<uint32_t>(views->size());
    b.early = early;
    SEARCH_RETURN_IF_ERROR(encoder->Encode(*views, dict, &b.value));
    views->clear();
    text = 0;
    return Status::Ok();
  };
  for (const ParsedDoc& d : chunk->docs) {
    if (!d.ok) continue;
    if (views->empty()) block_first = good;
    views->push_back(d.source);
    text += d.source.size();
    ++good;
    if (SourceBlockFull(text, views->size())) SEARCH_RETURN_IF_ERROR(close());
  }
  if (!views->empty()) SEARCH_RETURN_IF_ERROR(close());
  return Status::Ok();
}

class ParseState {
 public:
  ParseState(const IndexBuildOptions& options, const Analyzer& analyzer, std::string work_dir, uint32_t threads,
             BuildProgress* progress, ParseOutput* out)
      : options_(options),
        analyzer_(analyzer),
        work_dir_(std::move(work_dir)),
        threads_(threads),
        progress_(progress),
        out_(out) {
    share_ = std::max(kMinShareBytes, options.memory_bytes / threads);
    queue_cap_ = 2 * static_cast<size_t>(threads);
  }

  ~ParseState() {
    if (trainer_.joinable()) trainer_.join();
    if (ids_file_ != nullptr) std::fclose(ids_file_);
    if (sources_file_ != nullptr) std::fclose(sources_file_);
  }

  Status Run() {
    SEARCH_ASSIGN_OR_RETURN(auto reader, JsonlReader::Open(options_.input));
    SEARCH_RETURN_IF_ERROR(OpenIds());
    progress_->input_size = reader->file_size();
    std::vector<std::thread> workers;
    workers.reserve(threads_);
    for (uint32_t t = 0; t < threads_; ++t) workers.emplace_back([this] { Worker(); });
    Status read_status;
    for (;;) {
      LineChunk chunk;
      auto more = reader->Next(options_.chunk_bytes, &chunk);
      progress_->input_bytes.store(reader->consumed_bytes(), std::memory_order_relaxed);
      if (!more.ok()) {
        read_status = more.status();
        break;
      }
      if (!*more) break;
      if (options_.sources && !trainer_.joinable() && AddSample(chunk.data))
        trainer_ = std::thread([this] { TrainDict(); });
      std::unique_lock lk(queue_mu_);
      queue_cv_.wait(lk, [&] { return queue_.size() < queue_cap_ || Aborted(); });
      if (Aborted()) break;
      queue_.push_back(std::move(chunk));
      queue_cv_.notify_all();
    }
    {
      std::lock_guard lk(queue_mu_);
      input_done_ = true;
    }
    queue_cv_.notify_all();
    if (!read_status.ok()) Fail(read_status);
    if (options_.sources && !trainer_.joinable()) TrainDict();  // a small input: the whole of it
    for (auto& w : workers) w.join();
    if (trainer_.joinable()) trainer_.join();
    CloseFile(&ids_file_, out_->ids_path);
    CloseFile(&sources_file_, out_->sources_path);
    std::lock_guard lk(error_mu_);
    return error_;
  }

 private:
  bool Aborted() const { return aborted_.load(std::memory_order_acquire); }

  void CloseFile(FILE** f, const std::string& path) {
    if (*f == nullptr) return;
    const bool bad = std::fflush(*f) != 0;
    std::fclose(*f);
    *f = nullptr;
    if (bad) Fail(Status::IOError("write " + path + ": " + std::strerror(errno)));
  }

  // Copies the chunk's trimmed non-blank lines into the dictionary's sample (the reader thread,
  // before the trainer starts); true once it holds kSourceTrainBytes.
  bool AddSample(std::string_view data) {
    while (!data.empty() && sample_text_.size() < kSourceTrainBytes) {
      const size_t nl = data.find('\n');
      const std::string_view line = TrimAscii(data.substr(0, nl));
      data.remove_prefix(nl == std::string_view::npos ? data.size() : nl + 1);
      if (line.empty() || line.size() > kMaxSourceBytes) continue;
      sample_text_.append(line);
      sample_ends_.push_back(sample_text_.size());
    }
    return sample_text_.size() >= kSourceTrainBytes;
  }

  // Trains the dictionary on the sample and measures what it saves there, block by block as the
  // writer makes them; publishes it to the parser threads (null when it saves nothing).
  void TrainDict() {
    std::vector<std::string_view> samples;
    for (size_t i = 0, b = 0; i < sample_ends_.size(); b = sample_ends_[i++])
      samples.emplace_back(sample_text_.data() + b, sample_ends_[i] - b);
    const std::string trained = SourceDict::Train(samples, kSourceDictBytes);
    if (!trained.empty()) {
      auto made = SourceDict::Make(trained, kSourceZstdLevel);
      if (made.ok()) {
        SourceBlockEncoder encoder(kSourceZstdLevel);
        std::string value;
        size_t plain = 0, with = 0, text = 0, from = 0;
        Status st;
        for (size_t i = 0; i < samples.size() && st.ok(); ++i) {
          text += samples[i].size();
          if (!SourceBlockFull(text, i + 1 - from) && i + 1 < samples.size()) continue;
          const std::span<const std::string_view> block(samples.data() + from, i + 1 - from);
          st = encoder.Encode(block, nullptr, &value);
          plain += value.size();
          if (st.ok()) st = encoder.Encode(block, made->get(), &value);
          with += value.size();
          from = i + 1;
          text = 0;
        }
        const double saved = (static_cast<double>(plain) - static_cast<double>(with)) / samples.size();
        if (st.ok() && saved > 0) {
          out_->source_dict = std::move(made).value();
          out_->source_dict_saved_per_doc = saved;
        }
      }
    }
    std::string().swap(sample_text_);
    std::vector<size_t>().swap(sample_ends_);
    dict_ready_.store(true, std::memory_order_release);
  }

  void Fail(Status s) {
    {
      std::lock_guard lk(error_mu_);
      if (error_.ok()) error_ = std::move(s);
    }
    aborted_.store(true, std::memory_order_release);
    { std::lock_guard lk(queue_mu_); }
    queue_cv_.notify_all();
    { std::lock_guard lk(commit_mu_); }
    commit_cv_.notify_all();
  }

  Status OpenIds() {
    out_->ids_path = work_dir_ + "/ids.tmp";
    ids_file_ = std::fopen(out_->ids_path.c_str(), "wbx");
    if (ids_file_ == nullptr) return Status::IOError("create " + out_->ids_path + ": " + std::strerror(errno));
    ids_buffer_.reset(new char[size_t{1} << 20]);
    std::setvbuf(ids_file_, ids_buffer_.get(), _IOFBF, size_t{1} << 20);
    if (options_.sources) {
      out_->sources_path = work_dir_ + "/sources.tmp";
      sources_file_ = std::fopen(out_->sources_path.c_str(), "wbx");
      if (sources_file_ == nullptr)
        return Status::IOError("create " + out_->sources_path + ": " + std::strerror(errno));
      sources_buffer_.reset(new char[size_t{1} << 20]);
      std::setvbuf(sources_file_, sources_buffer_.get(), _IOFBF, size_t{1} << 20);
    }
    std::error_code ec;
    std::filesystem::create_directory(work_dir_ + "/runs", ec);
    if (ec) return Status::IOError("create " + work_dir_ + "/runs: " + ec.message());
    return Status::Ok();
  }

  Status Spill(PostingAccumulator* acc) {
    std::string path;
    {
      std::lock_guard lk(runs_mu_);
      path = work_dir_ + "/runs/run-" + std::to_string(next_run_++) + ".run";
    }
    SEARCH_RETURN_IF_ERROR(acc->Spill(path));
    std::lock_guard lk(runs_mu_);
    out_->runs.push_back(std::move(path));
    return Status::Ok();
  }

  // Waits for the chunk's turn, then assigns docIDs in input order. Returns the first docID, or
  // an error (a bad line when !skip_bad) — the earliest in input order, whatever the threads did.
  Result<uint32_t> Commit(const ParsedChunk& chunk) {
    std::unique_lock lk(commit_mu_);
    commit_cv_.wait(lk, [&] { return next_commit_ == chunk.seq || Aborted(); });
    if (Aborted()) return Status::Internal("aborted");
    const uint64_t first = next_doc_;
    std::string rec;
    for (const ParsedDoc& d : chunk.docs) {
      if (!d.ok) {
        if (!options_.skip_bad) return Status::InvalidArgument("line " + std::to_string(d.line) + ": " + d.reason);
        ++out_->skipped;
        continue;
      }
      if (next_doc_ >= kMaxDocs) return Status::InvalidArgument("more than 4294967295 documents: docIDs are 32-bit");
      if (next_doc_ % kIdsCheckpointDocs == 0) out_->ids_checkpoints.push_back(ids_bytes_);
      rec.clear();
      PutVarint(&rec, d.id.size());
      rec.append(d.id);
      if (std::fwrite(rec.data(), 1, rec.size(), ids_file_) != rec.size())
        return Status::IOError("write " + out_->ids_path + ": " + std::strerror(errno));
      ids_bytes_ += rec.size();
      out_->lengths.push_back(d.length);
      out_->total_tokens += d.length;
      ++next_doc_;
    }
    for (size_t i = 0; i < chunk.num_blocks; ++i) {
      const ChunkBlock& b = chunk.blocks[i];
      if (std::fwrite(b.value.data(), 1, b.value.size(), sources_file_) != b.value.size())
        return Status::IOError("write " + out_->sources_path + ": " + std::strerror(errno));
      out_->source_blocks.push_back({static_cast<uint32_t>(first + b.first), b.count, sources_bytes_,
                                     static_cast<uint32_t>(b.value.size()), b.early});
      sources_bytes_ += b.value.size();
    }
    out_->blank_lines += chunk.blank_lines;
    ++next_commit_;
    progress_->docs.store(next_doc_, std::memory_order_relaxed);
    if (options_.kill_after_docs != 0 && next_doc_ >= options_.kill_after_docs) {
      std::fflush(ids_file_);
      ::raise(SIGKILL);
    }
    lk.unlock();
    commit_cv_.notify_all();
    return static_cast<uint32_t>(first);
  }

  void Worker() {
    PostingAccumulator acc;
    ParsedChunk parsed;
    SourceBlockEncoder encoder(kSourceZstdLevel);
    std::vector<std::string_view> views;
    for (;;) {
      LineChunk chunk;
      {
        std::unique_lock lk(queue_mu_);
        queue_cv_.wait(lk, [&] { return !queue_.empty() || input_done_ || Aborted(); });
        if (Aborted() || queue_.empty()) break;
        chunk = std::move(queue_.front());
        queue_.pop_front();
      }
      queue_cv_.notify_all();
      ParseChunk(chunk, analyzer_, options_.positions, options_.sources, &acc, &parsed);
      parsed.num_blocks = 0;
      if (options_.sources) {
        const bool ready = dict_ready_.load(std::memory_order_acquire);
        if (Status s = EncodeChunkBlocks(ready ? out_->source_dict.get() : nullptr, !ready, &encoder, &views, &parsed);
            !s.ok()) {
          Fail(s);
          return;
        }
      }
      auto first = Commit(parsed);
      if (!first.ok()) {
        if (!Aborted()) Fail(first.status());
        return;
      }
      uint32_t doc = *first;
      for (const ParsedDoc& d : parsed.docs) {
        if (d.ok) acc.AddDoc(doc++, d.id_tfs, options_.positions ? d.positions.data() : nullptr);
      }
      if (acc.memory_bytes() >= share_) {
        if (Status s = Spill(&acc); !s.ok()) {
          Fail(s);
          return;
        }
      }
    }
    if (!Aborted() && !acc.empty()) {
      if (Status s = Spill(&acc); !s.ok()) Fail(s);
    }
  }

  const IndexBuildOptions& options_;
  const Analyzer& analyzer_;
  const std::string work_dir_;
  const uint32_t threads_;
  BuildProgress* const progress_;
  ParseOutput* const out_;
  size_t share_ = 0;
  size_t queue_cap_ = 0;

  std::atomic<bool> aborted_{false};
  std::mutex error_mu_;
  Status error_;  // GUARDED_BY(error_mu_)

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<LineChunk> queue_;  // GUARDED_BY(queue_mu_)
  bool input_done_ = false;      // GUARDED_BY(queue_mu_)

  std::mutex commit_mu_;
  std::condition_variable commit_cv_;
  uint64_t next_commit_ = 0;  // GUARDED_BY(commit_mu_)
  uint64_t next_doc_ = 0;     // GUARDED_BY(commit_mu_)
  FILE* ids_file_ = nullptr;  // GUARDED_BY(commit_mu_)
  uint64_t ids_bytes_ = 0;    // GUARDED_BY(commit_mu_): written to ids_file_
  std::unique_ptr<char[]> ids_buffer_;
  FILE* sources_file_ = nullptr;  // GUARDED_BY(commit_mu_)
  uint64_t sources_bytes_ = 0;    // GUARDED_BY(commit_mu_): written to sources_file_
  std::unique_ptr<char[]> sources_buffer_;

  // The dictionary's sample (the reader's until the trainer starts, then the trainer's); the
  // trainer sets out_->source_dict before dict_ready_.
  std::string sample_text_;
  std::vector<size_t> sample_ends_;
  std::atomic<bool> dict_ready_{false};
  std::thread trainer_;

  std::mutex runs_mu_;
  uint64_t next_run_ = 0;  // GUARDED_BY(runs_mu_)
};

}  // namespace

Status RunParsePhase(const IndexBuildOptions& options, const Analyzer& analyzer, const std::string& work_dir,
                     uint32_t threads, BuildProgress* progress, ParseOutput* out) {
  ParseState state(options, analyzer, work_dir, threads, progress, out);
  return state.Run();
}

}  // namespace search
