// searchctl verify: checks every shard's checksum against the manifest.
#include <iostream>

#include "args.hpp"
#include "index_store/manifest.hpp"

namespace search::cli {

CLI::App* AddVerifyCommand(CLI::App& app, VerifyArgs* a) {
  CLI::App* cmd = app.add_subcommand("verify", "Check an index's shard checksums against its manifest");
  cmd->footer("Prints OK (exit 0) or the problem found (exit 1).");
  cmd->add_option("--index", a->index, "index directory")->required();
  return cmd;
}

int RunVerify(const VerifyArgs& a) {
  const Status s = VerifyIndex(a.index);
  if (s.ok()) {
    std::cout << "OK\n";
    return kExitOk;
  }
  std::cout << s.ToString() << "\n";
  return kExitFailure;
}

}  // namespace search::cli
