// searchctl apikey create: a new API key for search-integrator --api-keys (integrator/api_keys.hpp;
// docs/OPERATIONS.md "API keys"). Same conventions as args.hpp.
// Thread-safety: used from main's thread only.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace search::cli {

struct ApiKeyArgs {
  std::string file;  // the key file: a line with the new key's salted hash is appended (created 0600)
  std::string name;  // optional label kept on the line (who or what the key is for)
};
// Registers `apikey` and its subcommand `create`.
CLI::App* AddApiKeyCommand(CLI::App& app, ApiKeyArgs* args);
int RunApiKey(const ApiKeyArgs& args);

}  // namespace search::cli
