// searchctl import-ciff (placeholder while being written).
#include "common.hpp"
#include "scale_args.hpp"

namespace search::cli {

CLI::App* AddImportCiffCommand(CLI::App& app, ImportCiffArgs* a) {
  CLI::App* cmd = app.add_subcommand("import-ciff", "Import a CIFF file as an index");
  cmd->add_option("input", a->input, "CIFF file")->required();
  cmd->add_option("--out", a->out, "index directory to create")->required();
  return cmd;
}

int RunImportCiff(const ImportCiffArgs&) {
  return ReportError("import-ciff", Status::Unavailable("not implemented yet"), kExitFailure);
}

}  // namespace search::cli
