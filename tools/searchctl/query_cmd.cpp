// searchctl query: answers queries over a whole index on the CPU (cpu_exec LocalIndex), one JSON
// line per query, in input order.
#include <chrono>
#include <iostream>

#include "args.hpp"
#include "common.hpp"
#include "cpu_exec/local_index.hpp"
#include "indexer/parallel_for.hpp"

namespace search::cli {

CLI::App* AddQueryCommand(CLI::App& app, QueryArgs* a) {
  CLI::App* cmd = app.add_subcommand("query", "Run queries and print one JSON line per query");
  cmd->footer(
      "Output: {\"query\": TEXT, \"hits\": [{\"id\": EXTERNAL_ID, \"score\": FLOAT}, ...], \"took_us\": N}\n"
      "Queries are analyzed with the index's own analyzer (stemming, stopwords).\n"
      "Query files hold one query per line; blank lines are skipped.");
  cmd->add_option("--index", a->index, "index directory")->required();
  cmd->add_option("--mode", a->mode, "and | or | andor")->capture_default_str();
  cmd->add_option("--k", a->k, "hits per query (1..10000)")->capture_default_str();
  auto* q = cmd->add_option("--query", a->query, "one query text");
  auto* f = cmd->add_option("--queries", a->queries, "file of queries, one per line");
  q->excludes(f);
  f->excludes(q);
  cmd->add_option("--threads", a->threads, "queries answered in parallel (file input)")->capture_default_str();
  return cmd;
}

int RunQuery(const QueryArgs& a) {
  auto mode = CheckModeAndK(a.mode, a.k);
  if (!mode.ok()) return ReportError("query", mode.status(), kExitUsage);
  if (a.query.empty() == a.queries.empty())
    return ReportError("query", Status::InvalidArgument("give exactly one of --query TEXT or --queries FILE"),
                       kExitUsage);
  if (a.threads == 0 || a.threads > 4096)
    return ReportError("query", Status::InvalidArgument("--threads must be between 1 and 4096"), kExitUsage);
  std::vector<std::string> queries;
  if (!a.query.empty()) {
    queries.push_back(a.query);
  } else {
    auto file = ReadQueryFile(a.queries);
    if (!file.ok()) return ReportError("query", file.status(), kExitFailure);
    queries = std::move(file).value();
  }
  auto index = LocalIndex::Open(a.index);
  if (!index.ok())
    return ReportError("query", index.status().WithContext("cannot open index " + a.index), kExitFailure);

  std::vector<std::string> lines(queries.size());
  std::vector<Status> errors(queries.size());
  ParallelFor(queries.size(), a.threads, [&](size_t i) {
    const auto start = std::chrono::steady_clock::now();
    auto result = (*index)->Search(queries[i], *mode, static_cast<uint32_t>(a.k));
    if (!result.ok()) {
      errors[i] = result.status();
      return;
    }
    auto hits = (*index)->Resolve(result->hits);
    if (!hits.ok()) {
      errors[i] = hits.status();
      return;
    }
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
    lines[i] = FormatAnswer(queries[i], *hits, static_cast<uint64_t>(took.count()));
  });
  for (size_t i = 0; i < queries.size(); ++i) {
    if (!errors[i].ok()) {
      std::cout.flush();
      return ReportError("query", errors[i].WithContext("query '" + queries[i] + "'"), kExitFailure);
    }
    std::cout << lines[i] << '\n';
  }
  std::cout.flush();
  return std::cout.good() ? kExitOk : kExitFailure;
}

}  // namespace search::cli
