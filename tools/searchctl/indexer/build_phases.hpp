// The index builder's phases (index_builder.hpp): the parse phase (parse_phase.cpp) and the
// merge phase that writes the shards (merge_phase.cpp), plus the progress counters they share
// with the progress printer. Internal to the indexer library.
// Thread-safety: BuildProgress is atomics only; the phases use their own threads internally.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "core/parallel_for.hpp"
#include "core/status.hpp"
#include "index_store/manifest.hpp"
#include "index_store/source_block.hpp"
#include "indexer/index_builder.hpp"

namespace search {

struct BuildProgress {
  enum Phase : int { kParse = 0, kMerge = 1, kFinish = 2 };
  std::atomic<int> phase{kParse};
  std::atomic<uint64_t> docs{0};
  std::atomic<uint64_t> input_bytes{0};  // consumed (compressed offset for gzip)
  uint64_t input_size = 0;               // 0 when unknown
  std::atomic<uint64_t> merge_bytes{0};  // run bytes read by the final merge
  std::atomic<uint64_t> merge_total{0};
  std::atomic<uint64_t> terms{0};
};

struct ParseOutput {
  std::vector<uint32_t> lengths;  // by docID
  uint64_t total_tokens = 0;
  uint64_t skipped = 0;
  uint64_t blank_lines = 0;
  std::vector<std::string> runs;  // run files, in spill order
  std::string ids_path;           // varint(len) id, by docID
  // The ids file's offset of docs 0, kIdsCheckpointDocs, 2 * kIdsCheckpointDocs, ...: each shard's
  // documents are read from their own offset, so the shards take them in parallel.
  std::vector<uint64_t> ids_checkpoints;

  // With sources: the source blocks (SourceBlockEncoder values), encoded by the parser threads
  // from the documents of their chunk (a block also ends at a chunk's end), back to back in
  // `sources_path`, in docID order. Blocks encoded before the dictionary was ready are `early`
  // (made without it). The dictionary is trained on the input's first kSourceTrainBytes of
  // sources; null when training failed or it saved nothing there.
  struct SourceBlockRef {
    uint32_t first_doc = 0;
    uint32_t count = 0;
    uint64_t offset = 0;
    uint32_t bytes = 0;
    bool early = false;
  };
  std::string sources_path;
  std::vector<SourceBlockRef> source_blocks;
  std::shared_ptr<const SourceDict> source_dict;
  double source_dict_saved_per_doc = 0;  // bytes per sample document (SourceDictPays)
};
inline constexpr uint64_t kIdsCheckpointDocs = 1024;

// Reads, parses and analyzes the input; spills runs into `work_dir`.
Status RunParsePhase(const IndexBuildOptions& options, const Analyzer& analyzer, const std::string& work_dir,
                     uint32_t threads, BuildProgress* progress, ParseOutput* out);

struct MergeOutput {
  std::vector<ShardEntry> shards;  // checksums not yet filled in
  uint64_t terms = 0;
  uint64_t postings = 0;
  uint64_t merge_passes = 0;
};

// Merges the runs and writes shard-<i> for every shard into `index_dir` (finished, synced).
// Consumes (deletes) the run files and the ids file.
Status RunMergePhase(const IndexBuildOptions& options, const std::string& index_dir, const std::string& work_dir,
                     uint32_t threads, ParseOutput* parsed, BuildProgress* progress, MergeOutput* out);

}  // namespace search
