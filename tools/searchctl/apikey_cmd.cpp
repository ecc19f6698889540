// searchctl apikey create --file FILE [--name NAME]: makes a random API key, appends its salted hash
// to FILE (created 0600) and prints `ID:KEY` once on stdout, its only line (written after stderr's
// note, so it is also the last line of both streams together), for the client to keep; stderr says
// how to send it (the Authorization header's value, for curl). The key itself is
// written nowhere.
#include <iostream>

#include "apikey_args.hpp"
#include "common.hpp"
#include "integrator/api_keys.hpp"

namespace search::cli {

CLI::App* AddApiKeyCommand(CLI::App& app, ApiKeyArgs* args) {
  CLI::App* apikey = app.add_subcommand("apikey", "API keys for search-integrator --api-keys");
  apikey->require_subcommand(1);
  CLI::App* create = apikey->add_subcommand(
      "create",
      "make an API key: append its salted hash to FILE and print ID:KEY once (keep it: it is stored nowhere)");
  create->add_option("--file", args->file, "the integrator's --api-keys file (created with mode 0600)")->required();
  create->add_option("--name", args->name, "a label kept beside the hash (who or what the key is for)");
  return apikey;
}

int RunApiKey(const ApiKeyArgs& args) {
  auto key = MakeApiKey(args.name);
  if (!key.ok()) {
    std::cerr << "searchctl apikey create: " << key.status().message() << "\n";
    return key.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  if (Status st = AppendApiKeyLine(args.file, key->line); !st.ok()) {
    std::cerr << "searchctl apikey create: " << st.message() << "\n";
    return kExitFailure;
  }
  // The notes first, on stderr: ID:KEY is then the last line whether a caller reads stdout alone
  // or both streams together.
  std::cerr << "searchctl apikey create: added key " << key->id << " to " << args.file
            << "; restart search-integrator to use it. Send it as\n  Authorization: "
            << ApiKeyAuthorization(key->id, key->key) << "\n";
  std::cout << key->id << ":" << key->key << std::endl;
  return kExitOk;
}

}  // namespace search::cli
