// searchctl keygen: writes a CURVE key pair (see keygen_args.hpp).
#include <iostream>

#include "common.hpp"
#include "curve/curve_keys.hpp"
#include "keygen_args.hpp"

namespace search::cli {

CLI::App* AddKeygenCommand(CLI::App& app, KeygenArgs* a) {
  CLI::App* cmd = app.add_subcommand("keygen", "Write a CURVE key pair for CurveZMQ between integrator and nodes");
  cmd->footer(
      "Writes PREFIX.key (the Z85 secret key, mode 0600: give it to the process that owns it, with\n"
      "--curve-key) and PREFIX.pub (the Z85 public key: list it where peers must know it, a node's in the\n"
      "integrator's --curve-servers file, the integrator's in each node's --curve-clients file). Refuses to\n"
      "replace existing files unless --force. Prints the public key.");
  cmd->add_option("--out", a->out, "PREFIX of the two files (e.g. keys/node0)")->required();
  cmd->add_flag("--force", a->force, "replace PREFIX.key and PREFIX.pub if they exist");
  return cmd;
}

int RunKeygen(const KeygenArgs& a) {
  if (!curve::CurveAvailable())
    return ReportError("keygen", Status::Internal("this libzmq was built without CURVE (libsodium)"), kExitFailure);
  auto keys = curve::GenerateKeyPair();
  if (!keys.ok()) return ReportError("keygen", keys.status(), kExitFailure);
  if (Status st = curve::WriteKeyPair(a.out, *keys, a.force); !st.ok()) return ReportError("keygen", st, kExitFailure);
  std::cout << keys->public_key << std::endl;
  return kExitOk;
}

}  // namespace search::cli
