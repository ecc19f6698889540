// GenerateIndex (generate_index.hpp).
#include "scale/generate_index.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/parallel_for.hpp"
#include "index_store/postings_ingest.hpp"
#include "indexer/build_dir.hpp"

namespace search {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Per-thread length arrays are used while they take at most this much memory in all.
constexpr uint64_t kMaxPartialBytes = uint64_t{4} << 30;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Prints "generate: <phase> <done>/<total> terms" on stderr every second while alive (if enabled).
class Progress {
 public:
  Progress(bool enabled, uint64_t total) : total_(total) {
    if (enabled) thread_ = std::thread([this] { Loop(); });
  }
  ~Progress() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::fprintf(stderr, "\r%60s\r", "");
  }
  void Phase(const char* name) {
    std::lock_guard lk(mu_);
    phase_ = name;
    done.store(0);
  }
  std::atomic<uint64_t> done{0};

 private:
  void Loop() {
    std::unique_lock lk(mu_);
    while (!cv_.wait_for(lk, std::chrono::seconds(1), [this] { return stop_; })) {
      std::fprintf(stderr, "\rgenerate: %s %llu/%llu terms   ", phase_,
                   static_cast<unsigned long long>(done.load()), static_cast<unsigned long long>(total_));
      std::fflush(stderr);
    }
  }
  const uint64_t total_;
  std::mutex mu_;
  std::condition_variable cv_;
  const char* phase_ = "lengths";  // GUARDED_BY(mu_)
  bool stop_ = false;              // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace

Result<GenerateSummary> GenerateIndex(const GenerateOptions& options) {
  const auto start = Clock::now();
  if (options.output.empty()) return Status::InvalidArgument("no output directory given");
  if (options.shards == 0) return Status::InvalidArgument("--shards must be at least 1");
  if (options.threads > 4096) return Status::InvalidArgument("at most 4096 threads");
  SEARCH_ASSIGN_OR_RETURN(SyntheticCorpus corpus, SyntheticCorpus::Create(options.corpus));
  if (options.shards > corpus.num_docs())
    return Status::InvalidArgument(std::to_string(options.shards) + " shards for " +
                                   std::to_string(corpus.num_docs()) + " documents: every shard needs at least one");
  GenerateSummary summary;
  summary.threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  const uint32_t threads = summary.threads;
  SEARCH_ASSIGN_OR_RETURN(auto dir, BuildDir::Create(options.output, options.force, &summary.notes));
  const uint32_t num_terms = corpus.num_terms();
  Progress progress(options.progress, num_terms);

  // 1. Document lengths: the sum of each document's tfs over all lists. Each thread adds into
  // its own array (plain adds overlap their cache misses; atomic ones would serialise), summed
  // at the end; past kMaxPartialBytes of such arrays, relaxed atomic adds into one array instead.
  auto t = Clock::now();
  const uint64_t n = corpus.num_docs();
  std::vector<uint32_t> lengths(n, 0);
  const bool partials = uint64_t{threads} * n * sizeof(uint32_t) <= kMaxPartialBytes;
  std::vector<std::vector<uint32_t>> partial(partials ? threads : 0);
  std::atomic<uint64_t> total_postings{0};
  std::atomic<uint32_t> next_chunk{0};
  constexpr uint32_t kChunk = 64;  // terms per hand-out: the many short lists share one atomic
  auto lengths_worker = [&](uint32_t id) {
    std::vector<uint32_t> docs, tfs;
    SyntheticScratch scratch;
    uint32_t* acc = lengths.data();
    if (partials && id > 0) {
      partial[id].assign(n, 0);
      acc = partial[id].data();
    }
    uint64_t postings = 0;
    for (;;) {
      const uint64_t first = uint64_t{next_chunk.fetch_add(1, std::memory_order_relaxed)} * kChunk + 1;
      if (first > num_terms) break;
      const uint64_t last = std::min<uint64_t>(num_terms, first + kChunk - 1);
      for (uint64_t rank = first; rank <= last; ++rank) {
        corpus.Generate(static_cast<uint32_t>(rank), &docs, &tfs, &scratch);
        if (partials) {
          for (size_t i = 0; i < docs.size(); ++i) acc[docs[i]] += tfs[i];
        } else {
          for (size_t i = 0; i < docs.size(); ++i)
            std::atomic_ref<uint32_t>(acc[docs[i]]).fetch_add(tfs[i], std::memory_order_relaxed);
        }
        postings += docs.size();
      }
      progress.done.fetch_add(last - first + 1, std::memory_order_relaxed);
    }
    total_postings.fetch_add(postings, std::memory_order_relaxed);
  };
  {
    std::vector<std::thread> pool;
    for (uint32_t id = 1; id < threads; ++id) pool.emplace_back(lengths_worker, id);
    lengths_worker(0);
    for (auto& th : pool) th.join();
  }
  if (partials && threads > 1) {
    constexpr uint64_t kBlock = uint64_t{1} << 16;
    ParallelFor((n + kBlock - 1) / kBlock, threads, [&](size_t b) {
      const uint64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
      for (uint32_t id = 1; id < threads; ++id) {
        const uint32_t* p = partial[id].data();
        for (uint64_t d = lo; d < hi; ++d) lengths[d] += p[d];
      }
    });
    std::vector<std::vector<uint32_t>>().swap(partial);
  }
  summary.seconds_lengths = SecondsSince(t);

  // 2. The lists, in term byte order.
  t = Clock::now();
  progress.Phase("lists");
  IngestOptions io;
  io.shards = options.shards;
  io.bm25 = options.bm25;
  io.threads = threads;
  io.created_by = options.created_by;
  SEARCH_ASSIGN_OR_RETURN(auto ingest, PostingsIngest::Create(dir->path(), std::move(lengths), io));
  summary.total_tokens = ingest->stats().total_tokens;
  SEARCH_RETURN_IF_ERROR(ingest->AddListsParallel(num_terms, [&](uint64_t i, TermPostings* out) {
    thread_local SyntheticScratch scratch;
    const uint32_t rank = corpus.RankAt(static_cast<uint32_t>(i));
    out->term = SyntheticCorpus::TermName(rank);
    corpus.Generate(rank, &out->docs, &out->tfs, &scratch);
    progress.done.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }));
  summary.seconds_lists = SecondsSince(t);

  // 3. Documents, shards, manifest, publish.
  t = Clock::now();
  progress.Phase("documents");
  SEARCH_ASSIGN_OR_RETURN(IngestSummary done, ingest->Finish([](uint32_t doc, std::string* id) {
    id->assign("doc").append(std::to_string(doc));
    return Status::Ok();
  }));
  ingest.reset();
  if (done.postings != total_postings.load())
    return Status::Internal("the lists changed between the two passes (" + std::to_string(total_postings.load()) +
                            " vs " + std::to_string(done.postings) + " postings)");
  SEARCH_RETURN_IF_ERROR(dir->Publish());
  summary.seconds_finish = SecondsSince(t);
  summary.docs = corpus.num_docs();
  summary.terms = done.terms;
  summary.postings = done.postings;
  summary.bytes = DirectoryBytes(dir->target());
  summary.seconds = SecondsSince(start);
  return summary;
}

}  // namespace search
