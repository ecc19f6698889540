// BuildIndex: JSON lines in, a published index directory out (index_store/manifest.hpp layout).
//
// Memory-bounded, for collections far larger than RAM (GOV2: 25M documents):
//  1. parse: the calling thread reads the input in chunks of whole lines; `threads` parser
//     threads parse and analyze them in parallel. Chunks are committed in input order, which
//     assigns docIDs (0-based input position among the good documents), records each
//     document's length (kept in memory, 4 bytes each) and its external id (appended to a temp
//     file). With sources, each parser thread encodes its chunk's sources into source blocks
//     (zstd, with a dictionary trained on the input's first MiB meanwhile), which the commit
//     appends to a second temp file. Each parser thread accumulates an inverted index of its documents (with each
//     posting's positions: indexes into the analyzed token stream, unless !positions) and, past
//     its share of `memory_bytes`, spills it as a sorted run (indexer/run_file.hpp).
//  2. merge: runs are merged term by term (in passes of at most `max_merge_fan_in` runs);
//     each term's postings get the global df and are cut at the shard boundaries; batches of
//     terms are encoded in parallel (codec EncodeList, block maxima from BM25 with global
//     statistics; EncodePositions for the positions) and added to every shard's ShardWriter in
//     term order. Documents and their ready source blocks follow (a block crossing a shard
//     boundary is split and encoded again).
//  3. publish: shards are finished and checksummed, manifest.json is written last, and the
//     temporary directory is renamed onto the target (indexer/build_dir.hpp). Nothing is ever
//     left loadable at the target unless the build completed; on error the temp dir is removed.
// Thread-safety: BuildIndex may run concurrently for different targets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "core/bm25.hpp"
#include "core/status.hpp"

namespace search {

struct IndexBuildOptions {
  std::string input;   // JSON lines, plain or gzip; "-" reads standard input
  std::string output;  // the index directory DIR
  uint32_t shards = 1;
  AnalyzerConfig analyzer;
  Bm25Params bm25;
  bool skip_bad = false;                     // skip (and count) bad lines instead of failing; they get no docID
  bool positions = true;                     // store term positions (phrase queries need them)
  bool sources = true;                       // store each line's JSON object (trimmed), byte for byte
  size_t memory_bytes = size_t{1024} << 20;  // budget for in-memory postings over all threads
  uint32_t threads = 0;                      // parser/encoder threads; 0 = hardware threads
  bool force = false;                        // replace an existing index at `output`
  bool progress = false;                     // a live progress line on stderr (for terminals)
  size_t max_merge_fan_in = 128;             // runs merged at once (bounds open files)
  size_t chunk_bytes = size_t{1} << 20;      // input handed to a parser thread at a time
  std::string created_by = "searchctl";
  // Failure injection for tests: raise SIGKILL once this many documents are committed (0: off),
  // or right before the finished temporary directory is renamed into place.
  uint64_t kill_after_docs = 0;
  bool kill_before_publish = false;
};

struct IndexBuildSummary {
  uint64_t docs = 0;
  uint64_t skipped = 0;      // bad lines skipped under skip_bad
  uint64_t blank_lines = 0;  // whitespace-only lines (never documents)
  uint64_t terms = 0;        // distinct terms
  uint64_t postings = 0;
  uint64_t total_tokens = 0;
  uint64_t runs = 0;          // sorted runs spilled by the parse phase
  uint64_t merge_passes = 0;  // extra passes needed because runs exceeded max_merge_fan_in
  uint64_t bytes = 0;         // the index's size on disk
  double seconds = 0;
  std::vector<std::string> notes;  // remarks for the user (e.g. leftovers removed)
};

// Errors: NotFound/IOError for the input; InvalidArgument "line N: reason" for a bad line (unless
// skip_bad), for an input without documents, more shards than documents or bad options;
// AlreadyExists when the output exists and !force. Nothing is changed at `output` on error.
Result<IndexBuildSummary> BuildIndex(const IndexBuildOptions& options);

}  // namespace search
