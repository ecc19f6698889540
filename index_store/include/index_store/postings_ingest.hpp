// PostingsIngest: builds every shard of an index directory, and its manifest, from posting lists
// that arrive already inverted: terms in ascending byte order, each with its docIDs (ascending,
// global, 0-based) and term frequencies. The document lengths come first (Create), so the global
// statistics (N, total tokens, avgdl) and every document's BM25 norm are known before the first
// list: each list is cut at the shard ranges (ShardRange) and encoded at once (codec EncodeList,
// base_doc = the shard's doc_begin, block maxima from Bm25TermScore(Bm25Idf(N, df), tf, norm)),
// then handed to the shard's ShardWriter. Nothing but the lengths, the norms and the lists in
// flight is held in memory (see AddListsParallel).
//
// Used by `searchctl generate` (synthetic collections) and `searchctl import-ciff`; the JSON-lines
// builder (tools/searchctl/indexer/) has its own merge phase and produces the same bytes for the
// same postings.
//
// Atomic publication is the caller's job: Create writes into `dir` (normally the temporary
// DIR.tmp-<pid> of tools/searchctl/indexer/build_dir.hpp, which renames it into place afterwards);
// Finish writes manifest.json last, after every shard is finished and fsynced, so a directory
// without a manifest is never mistaken for an index.
//
// Thread-safety: one PostingsIngest is driven by one thread at a time. AddListsParallel runs the
// producer on `threads` threads internally and delivers lists to the shard writers in term order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/analyzer.hpp"
#include "core/bm25.hpp"
#include "core/status.hpp"
#include "index_store/manifest.hpp"

namespace search {

struct IngestOptions {
  uint32_t shards = 1;
  Bm25Params bm25;
  AnalyzerConfig analyzer;  // recorded in the manifest and every shard; lists are not re-analyzed
  uint32_t threads = 0;     // AddListsParallel / Finish threads; 0 = hardware threads
  // AddListsParallel: terms ahead of the next one written (0: 2^20, capped at the term count).
  // Wide, because the window, not the thread count, bounds the parallelism: in term order the
  // few long lists of a Zipf vocabulary lie far apart (at 25M documents the thousand longest hold
  // 58% of the postings, one per ~19K terms), and each is produced by one thread; a 64K-term
  // window kept only ~3 of them in flight (2.4 of 16 cores busy).
  size_t window = 0;
  uint64_t max_inflight_bytes = uint64_t{1} << 30;  // encoded bytes waiting to be written
  std::string created_by = "searchctl";
};

// One term's postings, as a producer fills it for AddListsParallel. The vectors are reused from
// call to call on the same thread (clear them, keep their capacity).
struct TermPostings {
  std::string term;
  std::vector<uint32_t> docs;  // ascending global docIDs in [0, N)
  std::vector<uint32_t> tfs;   // >= 1, docs.size() of them
  bool skip = false;           // set by a producer to add nothing for this index
};

struct IngestSummary {
  uint64_t terms = 0;
  uint64_t postings = 0;
  uint64_t list_bytes = 0;  // encoded list blobs, all shards
  Manifest manifest;        // as written (checksums filled in)
};

class PostingsIngest {
 public:
  // Creates shard-<i> for every shard inside `dir` (an existing empty directory, or a path whose
  // parent exists). `lengths[d]` is the token count of document d; N = lengths.size().
  // InvalidArgument for N == 0, N >= 2^32, shards == 0 or shards > N, or bad BM25 parameters.
  static Result<std::unique_ptr<PostingsIngest>> Create(const std::string& dir, std::vector<uint32_t> lengths,
                                                        const IngestOptions& options);
  ~PostingsIngest();
  PostingsIngest(const PostingsIngest&) = delete;
  PostingsIngest& operator=(const PostingsIngest&) = delete;

  const CollectionStats& stats() const;
  const std::vector<uint32_t>& lengths() const;

  // Encodes and writes one term's list on the calling thread.
  // REQUIRES: term non-empty and strictly after every earlier term (bytewise); docs non-empty,
  // strictly ascending, < N; tfs.size() == docs.size(), every tf >= 1. InvalidArgument naming the
  // term otherwise (the ingest stays usable: nothing of that term was written).
  Status AddList(std::string_view term, std::span<const uint32_t> docs, std::span<const uint32_t> tfs);

  // Adds `count` terms: produce(i, &out) fills term i (0 <= i < count), and the terms must be
  // strictly ascending in i. Producing and encoding run on `threads` threads (calls for different
  // i run concurrently, in no particular order); lists are written in i order. A thread starts a
  // term only within `window` terms of the next one to write and while fewer than
  // max_inflight_bytes encoded bytes wait (the next term to write always starts), so memory stays
  // near max_inflight_bytes + threads * (largest list). The first error (a producer's, or a
  // violated REQUIRES of AddList) stops the work and is returned; the ingest is unusable after.
  using Producer = std::function<Status(uint64_t i, TermPostings* out)>;
  Status AddListsParallel(uint64_t count, const Producer& produce);

  // Adds every document with its external id (id_of(doc, &id) for doc = 0 .. N-1, called on up to
  // one thread per shard, each shard's docs ascending; it must be safe to call concurrently for
  // different docs), finishes every shard, computes their checksums and writes manifest.json last.
  using IdFn = std::function<Status(uint32_t doc, std::string* id)>;
  Result<IngestSummary> Finish(const IdFn& id_of);

 private:
  struct Impl;
  explicit PostingsIngest(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace search
