// searchctl index: JSON lines -> an index directory (indexer/index_builder.hpp).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "args.hpp"
#include "common.hpp"
#include "core/analyzer.hpp"
#include "indexer/index_builder.hpp"

namespace search::cli {

namespace {

uint64_t EnvNumber(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  return std::strtoull(v, nullptr, 10);
}

}  // namespace

CLI::App* AddIndexCommand(CLI::App& app, IndexArgs* a) {
  CLI::App* cmd = app.add_subcommand("index", "Build an index from JSON lines {\"id\": ..., \"contents\": ...}");
  cmd->footer(
      "Documents get docIDs 0, 1, 2, ... in input order. Whitespace-only lines are ignored. A bad line\n"
      "(invalid JSON, not an object, missing or non-string id/contents) stops the build with its line\n"
      "number and leaves nothing at --out; with --skip-bad it is skipped, counted, and gets no docID\n"
      "(later documents' docIDs shift down). Empty contents make a valid document of length 0.\n"
      "The index appears at --out only when complete: it is built in OUT.tmp-<pid> and renamed.\n"
      "Progress is shown on stderr when it is a terminal; a summary line is always printed.");
  cmd->add_option("--input", a->input, "JSON-lines file, plain or gzip-compressed ('-' = stdin)")->required();
  cmd->add_option("--out", a->out, "index directory to create")->required();
  cmd->add_option("--shards", a->shards, "number of document-partitioned shards")->capture_default_str();
  cmd->add_option("--stem", a->stem, "Snowball stemmer language (e.g. english); default none");
  cmd->add_option("--stopwords", a->stopwords, "stopword file: one word per line, '#' comments");
  cmd->add_flag("--skip-bad", a->skip_bad, "skip and count bad lines instead of failing");
  cmd->add_flag("--no-positions", a->no_positions,
                "store no term positions: a smaller index, faster to build, but phrase queries are refused");
  cmd->add_flag("--no-source", a->no_source,
                "store no document sources (each line's JSON object): a smaller index, but hits come without "
                "_source and highlights");
  cmd->add_option("--memory-mb", a->memory_mb, "memory budget for in-memory postings before spilling runs")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "parser/encoder threads (0 = all hardware threads)")->capture_default_str();
  cmd->add_flag("--force", a->force, "replace an existing index at --out");
  cmd->add_flag("--quiet", a->quiet, "no progress line, even on a terminal");
  cmd->add_option("--merge-fan-in", a->merge_fan_in, "runs merged at once")->group("");
  return cmd;
}

int RunIndex(const IndexArgs& a) {
  if (a.shards == 0) return ReportError("index", Status::InvalidArgument("--shards must be at least 1"), kExitUsage);
  if (a.memory_mb == 0 || a.memory_mb > (uint64_t{1} << 30))
    return ReportError("index", Status::InvalidArgument("--memory-mb must be at least 1"), kExitUsage);
  IndexBuildOptions o;
  o.input = a.input;
  o.output = a.out;
  o.shards = a.shards;
  o.analyzer.stem_language = a.stem;
  if (!a.stopwords.empty()) {
    auto words = AnalyzerConfig::ReadStopwordFile(a.stopwords);
    if (!words.ok()) return ReportError("index", words.status(), kExitFailure);
    o.analyzer.stopwords = std::move(words).value();
  }
  if (auto check = Analyzer::Create(o.analyzer); !check.ok()) return ReportError("index", check.status(), kExitUsage);
  o.skip_bad = a.skip_bad;
  o.positions = !a.no_positions;
  o.sources = !a.no_source;
  o.memory_bytes = static_cast<size_t>(a.memory_mb) << 20;
  o.threads = a.threads;
  o.force = a.force;
  o.progress = !a.quiet && ::isatty(STDERR_FILENO) != 0;
  o.max_merge_fan_in = a.merge_fan_in;
  o.created_by = "searchctl " SEARCH_VERSION;
  // Failure injection for tests (simulates a crash: SIGKILL, no cleanup).
  o.kill_after_docs = EnvNumber("SEARCHCTL_FAIL_AFTER_DOCS");
  o.kill_before_publish = EnvNumber("SEARCHCTL_FAIL_BEFORE_PUBLISH") != 0;

  auto summary = BuildIndex(o);
  if (!summary.ok()) return ReportError("index", summary.status(), kExitFailure);
  for (const auto& note : summary->notes) std::cerr << "searchctl index: note: " << note << "\n";
  char line[512];
  std::snprintf(line, sizeof(line),
                "searchctl index: docs=%llu skipped=%llu terms=%llu postings=%llu bytes=%llu seconds=%.2f "
                "shards=%u runs=%llu -> %s\n",
                static_cast<unsigned long long>(summary->docs), static_cast<unsigned long long>(summary->skipped),
                static_cast<unsigned long long>(summary->terms), static_cast<unsigned long long>(summary->postings),
                static_cast<unsigned long long>(summary->bytes), summary->seconds, a.shards,
                static_cast<unsigned long long>(summary->runs), a.out.c_str());
  std::cerr << line;
  return kExitOk;
}

}  // namespace search::cli
