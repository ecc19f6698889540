// searchctl query: answers queries in the query language (core/query_parser.hpp) over a whole
// index on the CPU (cpu_exec LocalIndex), one JSON line per query, in input order.
#include <chrono>
#include <iostream>
#include <memory>

#include "args.hpp"
#include "common.hpp"
#include "core/parallel_for.hpp"
#include "core/query_parser.hpp"
#include "core/query_tree.hpp"
#include "cpu_exec/local_index.hpp"

namespace search::cli {

namespace {

// The Query for one line of text: the syntax parsed with the index's analyzer (a bag of words
// becomes the flat query it always was). A text whose words the analyzer drops entirely is the
// empty query, which matches nothing, as before the syntax; a syntax error is InvalidArgument
// naming the byte position.
Result<Query> ParseLine(const std::string& text, const Analyzer& analyzer, QueryMode mode, uint32_t k, bool count) {
  auto tree = ParseQuerySyntax(text, analyzer);
  if (tree.ok()) return MakeQuery(std::move(tree).value(), mode, k, count);
  if (tree.status().code() == StatusCode::kInvalidArgument &&
      tree.status().message().find("no searchable terms") != std::string::npos) {
    Query q;  // no terms: nothing matches
    q.mode = mode;
    q.k = k;
    q.count = count;
    return q;
  }
  return tree.status();
}

// The stored sources of `hits` (global docIDs), in order: each shard's by one GetSources.
Status HitSources(const LocalIndex& index, const std::vector<ExternalHit>& hits, std::vector<std::string>* out) {
  out->assign(hits.size(), std::string());
  for (size_t s = 0; s < index.num_shards(); ++s) {
    const ShardReader& shard = index.shard(s);
    std::vector<uint32_t> docs;
    std::vector<size_t> at;
    for (size_t i = 0; i < hits.size(); ++i) {
      if (hits[i].doc >= shard.meta().doc_begin && hits[i].doc < shard.meta().doc_end) {
        docs.push_back(hits[i].doc);
        at.push_back(i);
      }
    }
    if (docs.empty()) continue;
    std::vector<std::string> sources;
    SEARCH_RETURN_IF_ERROR(shard.GetSources(docs, &sources));
    for (size_t j = 0; j < at.size(); ++j) (*out)[at[j]] = std::move(sources[j]);
  }
  return Status::Ok();
}

}  // namespace

CLI::App* AddQueryCommand(CLI::App& app, QueryArgs* a) {
  CLI::App* cmd = app.add_subcommand("query", "Run queries and print one JSON line per query");
  cmd->footer(
      "Output: {\"query\": TEXT, \"hits\": [{\"id\": EXTERNAL_ID, \"score\": FLOAT}, ...], \"took_us\": N}\n"
      "  with --source each hit also has \"_source\": its stored JSON object, as indexed;\n"
      "  with --count also \"total\": N, the exact number of matching documents;\n"
      "  --count --k 0 counts only (\"hits\" is empty).\n"
      "Query syntax (docs/SCORING.md \"Query language\"): clause := [+|-] ( word | \"phrase\" | ( clauses ) )\n"
      "  +word must match, -word must not, a bare clause is required under --mode and and optional\n"
      "  under --mode or (andor: and, then or when and has fewer than k hits); a word the analyzer\n"
      "  splits is a phrase. Phrases need an index built with positions.\n"
      "  e.g.  +jaguar -car    \"new york times\"    +\"the who\" +(uk britain)\n"
      "Queries are analyzed with the index's own analyzer (stemming, stopwords); a query whose words\n"
      "are all analyzed away matches nothing. A syntax error (unclosed quote or parenthesis, ...) names\n"
      "its byte position and exits non-zero.\n"
      "Query files hold one query per line; blank lines are skipped.");
  cmd->add_option("--index", a->index, "index directory")->required();
  cmd->add_option("--mode", a->mode, "and | or | andor")->capture_default_str();
  cmd->add_option("--k", a->k, "hits per query (1..10000; 0 with --count: the count only)")->capture_default_str();
  cmd->add_flag("--count", a->count, "also print the exact number of matching documents (\"total\")");
  cmd->add_flag("--source", a->source,
                "also print each hit's stored source (\"_source\"); the index must have sources (not --no-source, "
                "import-ciff or generate)");
  auto* q = cmd->add_option("--query", a->query, "one query text");
  auto* f = cmd->add_option("--queries", a->queries, "file of queries, one per line");
  q->excludes(f);
  f->excludes(q);
  cmd->add_option("--threads", a->threads, "queries answered in parallel (file input)")->capture_default_str();
  return cmd;
}

int RunQuery(const QueryArgs& a) {
  auto mode = CheckModeAndK(a.mode, a.count && a.k == 0 ? 1 : a.k);  // k 0: a count only
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
  if (a.source && !(*index)->shard(0).has_sources())
    return ReportError("query",
                       Status::InvalidArgument("--source: the index " + a.index +
                                               " stores no sources (built with --no-source, import-ciff or generate)"),
                       kExitUsage);

  std::vector<std::string> lines(queries.size());
  std::vector<Status> errors(queries.size());
  ParallelFor(queries.size(), a.threads, [&](size_t i) {
    const auto start = std::chrono::steady_clock::now();
    auto query = ParseLine(queries[i], (*index)->analyzer(), *mode, static_cast<uint32_t>(a.k), a.count);
    if (!query.ok()) {
      errors[i] = query.status();
      return;
    }
    auto result = (*index)->Search(*query);
    if (!result.ok()) {
      errors[i] = result.status();
      return;
    }
    auto hits = (*index)->Resolve(result->hits);
    if (!hits.ok()) {
      errors[i] = hits.status();
      return;
    }
    std::vector<std::string> sources;
    if (a.source) {
      if (Status st = HitSources(**index, *hits, &sources); !st.ok()) {
        errors[i] = st;
        return;
      }
    }
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
    lines[i] = FormatAnswer(queries[i], *hits, static_cast<uint64_t>(took.count()),
                            a.count ? std::optional<uint64_t>(result->total) : std::nullopt,
                            a.source ? &sources : nullptr);
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
