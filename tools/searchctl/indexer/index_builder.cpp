// BuildIndex (index_builder.hpp): options, the build directory, the phases, the manifest and the
// progress line.
#include "indexer/index_builder.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "index_store/manifest.hpp"
#include "index_store/shard_store.hpp"
#include "indexer/build_dir.hpp"
#include "indexer/build_phases.hpp"

namespace search {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string FormatDuration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const auto t = static_cast<uint64_t>(std::llround(s));
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof(buf), "%luh%02lum", static_cast<unsigned long>(t / 3600),
                  static_cast<unsigned long>(t % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lum%02lus", static_cast<unsigned long>(t / 60),
                  static_cast<unsigned long>(t % 60));
  }
  return buf;
}

// Prints the progress line on stderr about twice a second while alive (when enabled).
class ProgressPrinter {
 public:
  ProgressPrinter(bool enabled, const BuildProgress* progress) : progress_(progress) {
    if (enabled) thread_ = std::thread([this] { Loop(); });
  }
  ~ProgressPrinter() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::fprintf(stderr, "\r%*s\r", static_cast<int>(last_width_), "");
    std::fflush(stderr);
  }

 private:
  void Loop() {
    const auto start = Clock::now();
    std::unique_lock lk(mu_);
    while (!cv_.wait_for(lk, std::chrono::milliseconds(500), [this] { return stop_; })) Print(SecondsSince(start));
  }

  void Print(double elapsed) {
    char line[256];
    const BuildProgress& p = *progress_;
    const int phase = p.phase.load();
    if (phase == BuildProgress::kParse) {
      const double docs = static_cast<double>(p.docs.load());
      const double bytes = static_cast<double>(p.input_bytes.load());
      const double rate = elapsed > 0 ? bytes / elapsed : 0;
      if (p.input_size > 0) {
        const double frac = std::min(1.0, bytes / static_cast<double>(p.input_size));
        const double eta = rate > 0 ? (static_cast<double>(p.input_size) - bytes) / rate : -1;
        std::snprintf(line, sizeof(line), "indexing: %.0f docs  %.0f docs/s  %.1f MB/s  %.1f%%  ETA %s", docs,
                      elapsed > 0 ? docs / elapsed : 0.0, rate / 1e6, 100 * frac, FormatDuration(eta).c_str());
      } else {
        std::snprintf(line, sizeof(line), "indexing: %.0f docs  %.0f docs/s  %.1f MB/s", docs,
                      elapsed > 0 ? docs / elapsed : 0.0, rate / 1e6);
      }
    } else if (phase == BuildProgress::kMerge) {
      const double total = static_cast<double>(p.merge_total.load());
      const double frac = total > 0 ? std::min(1.0, static_cast<double>(p.merge_bytes.load()) / total) : 1.0;
      std::snprintf(line, sizeof(line), "merging: %.1f%% of runs  %lu terms  (%s elapsed)", 100 * frac,
                    static_cast<unsigned long>(p.terms.load()), FormatDuration(elapsed).c_str());
    } else {
      std::snprintf(line, sizeof(line), "finishing shards  (%s elapsed)", FormatDuration(elapsed).c_str());
    }
    const size_t width = std::strlen(line);
    std::fprintf(stderr, "\r%s%*s", line, static_cast<int>(last_width_ > width ? last_width_ - width : 0), "");
    std::fflush(stderr);
    last_width_ = width;
  }

  const BuildProgress* progress_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  size_t last_width_ = 0;
  std::thread thread_;
};

Status ValidateOptions(const IndexBuildOptions& o) {
  if (o.input.empty()) return Status::InvalidArgument("no input file given");
  if (o.output.empty()) return Status::InvalidArgument("no output directory given");
  if (o.shards == 0) return Status::InvalidArgument("the number of shards must be at least 1");
  if (o.memory_bytes == 0) return Status::InvalidArgument("the memory budget must be positive");
  if (o.chunk_bytes == 0) return Status::InvalidArgument("the chunk size must be positive");
  if (o.threads > 4096) return Status::InvalidArgument("at most 4096 threads");
  if (!(o.bm25.k1 >= 0) || !(o.bm25.b >= 0 && o.bm25.b <= 1)) return Status::InvalidArgument("bad BM25 parameters");
  if (o.input != "-") {
    std::error_code ec;
    if (!fs::exists(o.input, ec)) return Status::NotFound("input file " + o.input + " does not exist");
    if (fs::is_directory(o.input, ec))
      return Status::InvalidArgument("input " + o.input + " is a directory, not a JSON-lines file");
  }
  return Status::Ok();
}

}  // namespace

Result<IndexBuildSummary> BuildIndex(const IndexBuildOptions& options) {
  const auto start = Clock::now();
  SEARCH_RETURN_IF_ERROR(ValidateOptions(options));
  SEARCH_ASSIGN_OR_RETURN(Analyzer analyzer, Analyzer::Create(options.analyzer));
  const uint32_t threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());

  IndexBuildSummary summary;
  SEARCH_ASSIGN_OR_RETURN(auto dir, BuildDir::Create(options.output, options.force, &summary.notes));
  const std::string work_dir = dir->path() + "/build.tmp";
  std::error_code ec;
  if (!fs::create_directory(work_dir, ec) || ec)
    return Status::IOError("create " + work_dir + ": " + (ec ? ec.message() : "failed"));

  BuildProgress progress;
  ParseOutput parsed;
  MergeOutput merged;
  {
    ProgressPrinter printer(options.progress, &progress);
    SEARCH_RETURN_IF_ERROR(RunParsePhase(options, analyzer, work_dir, threads, &progress, &parsed));
    const uint64_t n = parsed.lengths.size();
    if (n == 0)
      return Status::InvalidArgument(
          "the input " + options.input + " holds no documents" +
          (parsed.skipped > 0 ? " (" + std::to_string(parsed.skipped) + " bad lines skipped)" : std::string()));
    if (options.shards > n)
      return Status::InvalidArgument(std::to_string(options.shards) + " shards for " + std::to_string(n) +
                                     " documents: every shard needs at least one document");
    SEARCH_RETURN_IF_ERROR(RunMergePhase(options, dir->path(), work_dir, threads, &parsed, &progress, &merged));
  }
  fs::remove_all(work_dir, ec);
  if (ec) return Status::IOError("remove " + work_dir + ": " + ec.message());

  std::vector<Status> sums(merged.shards.size());
  ParallelFor(merged.shards.size(), threads, [&](size_t i) {
    auto sum = ComputeShardChecksum(dir->path() + "/" + merged.shards[i].path);
    if (sum.ok()) {
      merged.shards[i].checksum = *sum;
    } else {
      sums[i] = sum.status();
    }
  });
  for (auto& s : sums) SEARCH_RETURN_IF_ERROR(s);

  Manifest manifest;
  manifest.format_version = kIndexFormatVersion;
  manifest.stats = CollectionStats{parsed.lengths.size(), parsed.total_tokens};
  manifest.bm25 = options.bm25;
  manifest.analyzer = options.analyzer;
  manifest.shards = merged.shards;
  manifest.positions = options.positions;
  manifest.sources = options.sources;
  manifest.created_by = options.created_by;
  SEARCH_RETURN_IF_ERROR(manifest.Write(dir->path()));
  if (options.kill_before_publish) ::raise(SIGKILL);
  SEARCH_RETURN_IF_ERROR(dir->Publish());

  summary.docs = parsed.lengths.size();
  summary.skipped = parsed.skipped;
  summary.blank_lines = parsed.blank_lines;
  summary.terms = merged.terms;
  summary.postings = merged.postings;
  summary.total_tokens = parsed.total_tokens;
  summary.runs = parsed.runs.size();
  summary.merge_passes = merged.merge_passes;
  summary.bytes = DirectoryBytes(dir->target());
  summary.seconds = SecondsSince(start);
  return summary;
}

}  // namespace search
