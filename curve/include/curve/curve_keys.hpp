// CURVE keys: the Z85 key files and key lists of CurveZMQ between the integrator and the nodes
// (docs/OPERATIONS.md "CURVE keys").
//   PREFIX.key  the Z85 secret key (40 characters) and a newline; mode 0600. The public key is
//               derived from it (zmq_curve_public), so a .key file holds nothing else.
//   PREFIX.pub  the Z85 public key and a newline.
//   clients     (search-node --curve-clients) one Z85 public key a line; blank lines and lines
//               starting with '#' are skipped.
//   servers     (search-integrator --curve-servers) lines `ENDPOINT PUBLIC_KEY`, and at most one
//               line holding only a key: the key of every endpoint without a line of its own.
// Every reader returns InvalidArgument naming the file (and line) on bad input; a secret key file
// that its group or others may read is refused.
// Thread-safety: free functions without shared state.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search::curve {

inline constexpr size_t kZ85KeyChars = 40;  // a 32-byte key in Z85

struct KeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
};

// Whether libzmq was built with CURVE (libsodium); every function below needs it.
bool CurveAvailable();

// A fresh key pair (zmq_curve_keypair). Internal when libzmq has no CURVE.
Result<KeyPair> GenerateKeyPair();

// True when `key` is 40 characters of the Z85 alphabet (a 32-byte key).
bool IsZ85Key(std::string_view key);

// The public key of a Z85 secret key (zmq_curve_public).
Result<std::string> PublicKeyOf(std::string_view secret_key);

// Writes PREFIX.key (created 0600 under a temporary name, then moved into place) and PREFIX.pub
// (0644). Without `force`, AlreadyExists when either file exists and neither is written.
Status WriteKeyPair(const std::string& prefix, const KeyPair& keys, bool force);

// Reads a secret key file: the key and its derived public key. InvalidArgument when the file is
// not a regular file, may be read by its group or others (mode & 077), or holds anything but one
// Z85 key (and an optional trailing newline).
Result<KeyPair> ReadSecretKeyFile(const std::string& path);

// Reads a public key file (PREFIX.pub): one Z85 key.
Result<std::string> ReadPublicKeyFile(const std::string& path);

// Reads a client list: at least one key.
Result<std::vector<std::string>> ReadClientKeys(const std::string& path);

// The nodes' public keys, by endpoint.
struct ServerKeys {
  std::map<std::string, std::string> by_endpoint;  // endpoint -> Z85 key
  std::string all;                                 // the key for every other endpoint; may be empty
  // The key of `endpoint` (exact match, else `all`); NotFound naming it when there is none.
  Result<std::string> For(const std::string& endpoint) const;
};
Result<ServerKeys> ReadServerKeys(const std::string& path);

// The integrator's CURVE settings: its own pair and the nodes' public keys.
struct ClientKeys {
  KeyPair client;
  ServerKeys servers;
};

// The integrator's flags over its --shards list (shards separated by ',' or given one each,
// replicas by '|'): --curve-key and --curve-servers, both or neither. With them: the keys, and
// InvalidArgument naming the first replica endpoint without a server key. Without them: nullopt
// (plain ZeroMQ), and InvalidArgument for an endpoint beyond loopback unless `insecure`.
Result<std::optional<ClientKeys>> ClientKeysForFlags(const std::string& key_file, const std::string& servers_file,
                                                     bool insecure, const std::vector<std::string>& shards);

// True for endpoints only this machine can reach: tcp://127.x.y.z:P, tcp://[::1]:P,
// tcp://localhost:P, ipc://..., inproc://...
bool IsLoopbackEndpoint(std::string_view endpoint);

}  // namespace search::curve
