// searchctl gen-queries: a synthetic, web-log-like query file drawn from an index's terms
// (indexer/query_log.hpp).
#include <cstdio>
#include <fstream>
#include <iostream>

#include "args.hpp"
#include "common.hpp"
#include "index_store/manifest.hpp"
#include "index_store/shard_store.hpp"
#include "indexer/query_log.hpp"

namespace search::cli {

CLI::App* AddGenQueriesCommand(CLI::App& app, GenQueriesArgs* a) {
  CLI::App* cmd = app.add_subcommand("gen-queries", "Generate a query log from an index's terms");
  cmd->footer(
      "Query lengths follow --lengths, the percentages of 1, 2, 3 and 4+ terms (4+ = 4 to 6, uniformly;\n"
      "with --four-share F, 4 terms with probability F, else 5 or 6).\n"
      "Terms with global df >= --min-df are drawn with probability proportional to df^--df-exponent,\n"
      "never twice in one query. The same index and --seed always give the same file.\n"
      "Terms are index terms: with a stemmed index they are stems. Statistics go to stderr.");
  cmd->add_option("--index", a->index, "index directory")->required();
  cmd->add_option("--count", a->count, "number of queries")->capture_default_str();
  cmd->add_option("--out", a->out, "output file, one query per line ('-' = stdout)")->required();
  cmd->add_option("--seed", a->seed, "random seed")->capture_default_str();
  cmd->add_option("--lengths", a->lengths, "percentages for 1,2,3,4+ terms")->capture_default_str();
  cmd->add_option("--min-df", a->min_df, "smallest df of a candidate term")->capture_default_str();
  cmd->add_option("--df-exponent", a->df_exponent, "term weight = df^exponent")->capture_default_str();
  cmd->add_option("--four-share", a->four_share,
                  "share of the 4+ queries with exactly 4 terms, the rest 5 or 6 (default: 4, 5, 6 alike)");
  return cmd;
}

int RunGenQueries(const GenQueriesArgs& a) {
  QueryLogOptions o;
  auto weights = ParseLengthWeights(a.lengths);
  if (!weights.ok()) return ReportError("gen-queries", weights.status(), kExitUsage);
  o.length_weights = *weights;
  o.count = a.count;
  o.seed = a.seed;
  o.df_exponent = a.df_exponent;
  o.four_share = a.four_share;
  if (!(a.four_share == -1 || (a.four_share >= 0 && a.four_share <= 1)))
    return ReportError("gen-queries", Status::InvalidArgument("--four-share must be in [0, 1]"), kExitUsage);
  if (a.count > (uint64_t{1} << 32))
    return ReportError("gen-queries", Status::InvalidArgument("--count is too large"), kExitUsage);
  if (!(a.df_exponent >= 0 && a.df_exponent <= 10))
    return ReportError("gen-queries", Status::InvalidArgument("--df-exponent must be in [0, 10]"), kExitUsage);

  auto manifest = Manifest::Read(a.index);
  if (!manifest.ok()) return ReportError("gen-queries", manifest.status(), kExitFailure);
  ShardReaderOptions ro;
  ro.list_cache_bytes = size_t{1} << 20;
  ro.block_cache_bytes = size_t{8} << 20;
  std::vector<std::unique_ptr<ShardReader>> shards;
  std::vector<const ShardReader*> views;
  for (const auto& e : manifest->shards) {
    auto r = ShardReader::Open(a.index + "/" + e.path, ro);
    if (!r.ok()) return ReportError("gen-queries", r.status(), kExitFailure);
    views.push_back(r->get());
    shards.push_back(std::move(r).value());
  }
  auto terms = CollectTerms(views, a.min_df);
  if (!terms.ok()) return ReportError("gen-queries", terms.status(), kExitFailure);
  QueryLogStats stats;
  auto log = GenerateQueryLog(*terms, o, &stats);
  if (!log.ok()) return ReportError("gen-queries", log.status(), kExitFailure);

  std::ofstream file;
  std::ostream* out = &std::cout;
  if (a.out != "-") {
    file.open(a.out, std::ios::binary | std::ios::trunc);
    if (!file) return ReportError("gen-queries", Status::IOError("cannot create " + a.out), kExitFailure);
    out = &file;
  }
  for (const auto& q : *log) *out << q << '\n';
  out->flush();
  if (!*out) return ReportError("gen-queries", Status::IOError("write error on " + a.out), kExitFailure);

  std::fprintf(stderr, "gen-queries: %llu queries from %zu candidate terms (df >= %u)\n",
               static_cast<unsigned long long>(a.count), terms->size(), a.min_df);
  for (size_t len = 1; len <= 6; ++len) {
    if (stats.by_length[len] == 0) continue;
    std::fprintf(stderr, "  %zu term%s: %llu (%.1f%%)\n", len, len == 1 ? " " : "s",
                 static_cast<unsigned long long>(stats.by_length[len]),
                 a.count == 0 ? 0.0 : 100.0 * static_cast<double>(stats.by_length[len]) / static_cast<double>(a.count));
  }
  std::fprintf(stderr, "  mean df per term: %.1f  mean postings per query: %.1f\n", stats.mean_df, stats.mean_postings);
  return kExitOk;
}

}  // namespace search::cli
