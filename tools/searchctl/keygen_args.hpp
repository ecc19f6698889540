// searchctl keygen: a CURVE key pair for CurveZMQ between the integrator and the nodes
// (curve/curve_keys.hpp; docs/OPERATIONS.md "CURVE keys"). Same conventions as args.hpp.
// Thread-safety: used from main's thread only.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace search::cli {

struct KeygenArgs {
  std::string out;     // PREFIX: writes PREFIX.key (secret, 0600) and PREFIX.pub
  bool force = false;  // replace existing files
};
CLI::App* AddKeygenCommand(CLI::App& app, KeygenArgs* args);
int RunKeygen(const KeygenArgs& args);

}  // namespace search::cli
