// searchctl stats: sizes of an index's posting lists (scale/index_stats.hpp).
#include <iostream>

#include "common.hpp"
#include "scale/index_stats.hpp"
#include "scale_args.hpp"

namespace search::cli {

CLI::App* AddStatsCommand(CLI::App& app, StatsArgs* a) {
  CLI::App* cmd = app.add_subcommand("stats", "Report what an index's posting lists, positions and stored sources take");
  cmd->footer(
      "Prints one JSON line: shards, docs, total_tokens, lists (term x shard), postings, blocks, max_list,\n"
      "list_bytes (whole blobs), positions_bytes, source_blocks and source_bytes (stored documents), metadata_bytes (list headers and block entries), docid_payload_bytes and\n"
      "freq_payload_bytes (the bit-packed gaps and tf - 1), disk_bytes (every file), bits_per_docid and\n"
      "bits_per_freq (payload bits / postings; compare Mallia et al. 2019 Table 2, GPU-BP128 on Gov2:\n"
      "6.66 and 4.27), list_bits_per_posting, disk_bits_per_posting and lists/postings by list length.\n"
      "--checksum adds content_crc32c: a CRC over terms, TermInfos, lists, lengths and external ids, equal\n"
      "for equal contents (the manifest's SST checksums also cover RocksDB's file metadata).");
  cmd->add_option("--index", a->index, "index directory")->required();
  cmd->add_flag("--checksum", a->checksum, "also compute the content checksum (a second scan)");
  return cmd;
}

int RunStats(const StatsArgs& a) {
  auto st = ComputeIndexStats(a.index, a.checksum);
  if (!st.ok()) return ReportError("stats", st.status(), kExitFailure);
  std::cout << st->ToJson() << std::endl;
  return kExitOk;
}

}  // namespace search::cli
