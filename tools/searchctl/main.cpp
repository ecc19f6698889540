// searchctl: the command-line tool. Each subcommand lives in its own <name>_cmd.cpp (args.hpp).
#include <malloc.h>

#include "apikey_args.hpp"
#include "args.hpp"
#include "keygen_args.hpp"
#include "scale_args.hpp"

int main(int argc, char** argv) {
  // The builders hand multi-MB list buffers between threads all the time. glibc serves blocks
  // above its mmap threshold with mmap/munmap, and every munmap in a 16-thread process means page
  // faults and TLB shootdowns (system time rivalled user time in `generate`); keep them in the
  // heap (32 MiB is the largest threshold glibc accepts) and do not trim the heap eagerly.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  using namespace search::cli;  // NOLINT(google-build-using-namespace)
  CLI::App app{"searchctl: build, query and benchmark an exact-BM25 search index"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "searchctl " SEARCH_VERSION);
  IndexArgs index_args;
  QueryArgs query_args;
  BenchArgs bench_args;
  GenQueriesArgs gen_args;
  VerifyArgs verify_args;
  GenerateArgs generate_args;
  ImportCiffArgs import_args;
  StatsArgs stats_args;
  LoadgenArgs loadgen_args;
  CLI::App* index = AddIndexCommand(app, &index_args);
  CLI::App* query = AddQueryCommand(app, &query_args);
  CLI::App* bench = AddBenchCommand(app, &bench_args);
  CLI::App* gen = AddGenQueriesCommand(app, &gen_args);
  CLI::App* verify = AddVerifyCommand(app, &verify_args);
  CLI::App* generate = AddGenerateCommand(app, &generate_args);
  CLI::App* import_ciff = AddImportCiffCommand(app, &import_args);
  CLI::App* stats = AddStatsCommand(app, &stats_args);
  CLI::App* loadgen = AddLoadgenCommand(app, &loadgen_args);
  ApiKeyArgs apikey_args;
  CLI::App* apikey = AddApiKeyCommand(app, &apikey_args);
  KeygenArgs keygen_args;
  CLI::App* keygen = AddKeygenCommand(app, &keygen_args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (index->parsed()) return RunIndex(index_args);
  if (query->parsed()) return RunQuery(query_args);
  if (bench->parsed()) return RunBench(bench_args);
  if (gen->parsed()) return RunGenQueries(gen_args);
  if (verify->parsed()) return RunVerify(verify_args);
  if (generate->parsed()) return RunGenerate(generate_args);
  if (import_ciff->parsed()) return RunImportCiff(import_args);
  if (stats->parsed()) return RunStats(stats_args);
  if (loadgen->parsed()) return RunLoadgen(loadgen_args);
  if (apikey->parsed()) return RunApiKey(apikey_args);
  if (keygen->parsed()) return RunKeygen(keygen_args);
  return kExitUsage;
}
