// searchctl stats (placeholder while being written).
#include "common.hpp"
#include "scale_args.hpp"

namespace search::cli {

CLI::App* AddStatsCommand(CLI::App& app, StatsArgs* a) {
  CLI::App* cmd = app.add_subcommand("stats", "Sizes of an index's posting lists");
  cmd->add_option("--index", a->index, "index directory")->required();
  return cmd;
}

int RunStats(const StatsArgs&) {
  return ReportError("stats", Status::Unavailable("not implemented yet"), kExitFailure);
}

}  // namespace search::cli
