// searchctl import-ciff: a CIFF file (Common Index File Format) -> an index directory
// (scale/import_ciff.hpp).
#include <cstdio>
#include <iostream>

#include "common.hpp"
#include "scale/import_ciff.hpp"
#include "scale_args.hpp"

namespace search::cli {

CLI::App* AddImportCiffCommand(CLI::App& app, ImportCiffArgs* a) {
  CLI::App* cmd = app.add_subcommand("import-ciff", "Build an index from a CIFF file (Anserini, PISA, JASS exports)");
  cmd->footer(
      "CIFF (github.com/osirrc/ciff) holds analyzed terms with d-gap docIDs and tfs, then one DocRecord per\n"
      "document (id and length). The whole file is validated before anything is written: a malformed file\n"
      "is reported with its byte offset and leaves nothing at --out. Terms are imported as they are, in\n"
      "any order (they are sorted); queries are analyzed with the default analyzer (lowercased ASCII\n"
      "letters and digits) unless --stem records a stemmer: a CIFF exported from a stemmed Lucene index\n"
      "holds stems, so give --stem english (Snowball; Lucene's Porter stems differ on a few words) or\n"
      "query with pre-stemmed terms. Compressed files must be decompressed first (gunzip -k).");
  cmd->add_option("input", a->input, "CIFF file (uncompressed)")->required();
  cmd->add_option("--out", a->out, "index directory to create")->required();
  cmd->add_option("--shards", a->shards, "number of document-partitioned shards")->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads (0 = all hardware threads)")->capture_default_str();
  cmd->add_option("--stem", a->stem, "Snowball stemmer to record for queries (e.g. english); default none");
  cmd->add_flag("--force", a->force, "replace an existing index at --out");
  return cmd;
}

int RunImportCiff(const ImportCiffArgs& a) {
  if (a.shards == 0) return ReportError("import-ciff", Status::InvalidArgument("--shards must be at least 1"), kExitUsage);
  if (a.threads > 4096)
    return ReportError("import-ciff", Status::InvalidArgument("--threads must be <= 4096"), kExitUsage);
  CiffImportOptions o;
  o.input = a.input;
  o.output = a.out;
  o.shards = a.shards;
  o.threads = a.threads;
  o.force = a.force;
  o.analyzer.stem_language = a.stem;
  if (auto check = Analyzer::Create(o.analyzer); !check.ok())
    return ReportError("import-ciff", check.status(), kExitUsage);
  o.created_by = "searchctl " SEARCH_VERSION " import-ciff";
  auto summary = ImportCiff(o);
  if (!summary.ok()) return ReportError("import-ciff", summary.status(), kExitFailure);
  for (const auto& note : summary->notes) std::cerr << "searchctl import-ciff: note: " << note << "\n";
  const auto& s = *summary;
  std::fprintf(stderr,
               "searchctl import-ciff: docs=%llu terms=%llu postings=%llu tokens=%llu empty_lists=%llu bytes=%llu "
               "seconds=%.2f shards=%u -> %s\n",
               static_cast<unsigned long long>(s.docs), static_cast<unsigned long long>(s.terms),
               static_cast<unsigned long long>(s.postings), static_cast<unsigned long long>(s.total_tokens),
               static_cast<unsigned long long>(s.empty_lists), static_cast<unsigned long long>(s.bytes), s.seconds,
               a.shards, a.out.c_str());
  return kExitOk;
}

}  // namespace search::cli
