// GenerateIndex: a SyntheticCorpus written directly as an index directory (`searchctl generate`).
//  1. lengths: every list is generated once, on all threads, and its tfs are added to its
//     documents' lengths (integer sums: they do not depend on the order);
//  2. lists: PostingsIngest regenerates each list (terms in byte order, any thread may take any
//     term) and encodes it with BM25 block maxima from the now known statistics;
//  3. documents "doc<d>", shard finish, checksums, manifest, atomic rename (BuildDir).
// Memory: 8 bytes per document (lengths, norms), plus 4 per document and thread during the
// lengths pass (per-thread sums, while that stays under 4 GiB; atomic adds beyond), plus per
// thread the largest list (~ N/2 docIDs and tfs) and up to 512 MiB of encoded lists waiting for
// the writer; the index goes straight to disk. Same seed, model and N: the same index content,
// whatever the thread count.
// Thread-safety: GenerateIndex may run concurrently for different outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/bm25.hpp"
#include "indexer/build_dir.hpp"  // DirectoryBytes
#include "core/status.hpp"
#include "scale/synthetic_corpus.hpp"

namespace search {

struct GenerateOptions {
  SyntheticOptions corpus;
  std::string output;
  uint32_t shards = 1;
  uint32_t threads = 0;  // 0 = hardware threads
  bool force = false;    // replace an existing index at output
  bool progress = false;
  Bm25Params bm25;
  std::string created_by = "searchctl";
};

struct GenerateSummary {
  uint64_t docs = 0, terms = 0, postings = 0, total_tokens = 0;
  uint64_t bytes = 0;  // size on disk
  double seconds_lengths = 0, seconds_lists = 0, seconds_finish = 0, seconds = 0;
  uint32_t threads = 0;
  std::vector<std::string> notes;
};

Result<GenerateSummary> GenerateIndex(const GenerateOptions& options);


}  // namespace search
