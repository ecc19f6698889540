// searchctl: the command-line tool. Each subcommand lives in its own <name>_cmd.cpp (args.hpp).
#include "args.hpp"

int main(int argc, char** argv) {
  using namespace search::cli;  // NOLINT(google-build-using-namespace)
  CLI::App app{"searchctl: build, query and benchmark an exact-BM25 search index"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "searchctl " SEARCH_VERSION);
  IndexArgs index_args;
  QueryArgs query_args;
  BenchArgs bench_args;
  GenQueriesArgs gen_args;
  VerifyArgs verify_args;
  CLI::App* index = AddIndexCommand(app, &index_args);
  CLI::App* query = AddQueryCommand(app, &query_args);
  CLI::App* bench = AddBenchCommand(app, &bench_args);
  CLI::App* gen = AddGenQueriesCommand(app, &gen_args);
  CLI::App* verify = AddVerifyCommand(app, &verify_args);
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
  return kExitUsage;
}
