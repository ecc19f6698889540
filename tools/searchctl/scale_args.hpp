// The scale subcommands of searchctl (tools/searchctl/scale/README.md): generate (a synthetic
// collection written directly as an index), import-ciff (Common Index File Format) and stats
// (sizes of an index's lists). Same conventions as args.hpp: one argument struct, one function
// registering the options, one running the command; exit codes kExitOk/kExitFailure/kExitUsage.
// Thread-safety: used from main's thread only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace search::cli {

struct GenerateArgs {
  uint64_t docs = 0;
  std::string out;
  uint32_t shards = 1;
  std::string model = "zipf";
  uint64_t seed = 1;
  uint32_t threads = 0;
  bool force = false;
  bool quiet = false;
};
CLI::App* AddGenerateCommand(CLI::App& app, GenerateArgs* args);
int RunGenerate(const GenerateArgs& args);

struct ImportCiffArgs {
  std::string input;
  std::string out;
  uint32_t shards = 1;
  uint32_t threads = 0;
  std::string stem;
  bool force = false;
};
CLI::App* AddImportCiffCommand(CLI::App& app, ImportCiffArgs* args);
int RunImportCiff(const ImportCiffArgs& args);

struct StatsArgs {
  std::string index;
  bool checksum = false;
};
CLI::App* AddStatsCommand(CLI::App& app, StatsArgs* args);
int RunStats(const StatsArgs& args);

}  // namespace search::cli
