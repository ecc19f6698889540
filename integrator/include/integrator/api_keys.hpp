// API keys for the integrator's HTTP front (`search-integrator --api-keys FILE`, written by
// `searchctl apikey create --file FILE`). A client sends
//   Authorization: ApiKey <base64(id:key)>
// as Elasticsearch does; the file holds, per key, only its id, a random salt and SHA-256(salt || key),
// never the key itself. A key is 32 random bytes (base64url, 43 characters): with that much entropy
// a single salted SHA-256 is as strong as a slow password hash (nobody can guess through 2^256 keys,
// fast hash or slow), and it keeps checking a request at one hash of about 60 bytes. The salt makes
// equal keys (and rainbow tables) useless across files.
//
// File format: one key a line, `ID SALT HASH [NAME]`, separated by single spaces or tabs: ID 1 to 64
// characters of [A-Za-z0-9_-]; SALT 32 lower-case hex digits (16 bytes); HASH 64 lower-case hex digits;
// NAME (optional) the rest of the line, printable. Blank lines and lines starting with '#' are
// skipped. A repeated id, or any other line, is an error naming the file and line (never echoing the
// line, which could be a key pasted by mistake).
//
// Check: 401 when the header is missing or malformed (not "ApiKey", not base64, no ':', empty id or
// key, over 1 KiB); 403 when the id is unknown or the key wrong; 0 when it is right. The hash is
// compared with CRYPTO_memcmp (constant time); an unknown id costs the same hash. Nothing here logs.
// Thread-safety: a loaded ApiKeys is immutable: Check may run on any number of threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.hpp"

namespace search {

class ApiKeys {
 public:
  // Reads and parses FILE (see above). IOError when it cannot be read; InvalidArgument naming the
  // file and line when a line is malformed, an id repeated, or the file holds no key.
  static Result<std::shared_ptr<const ApiKeys>> Load(const std::string& path);
  // Parses the file's text; `origin` names it in errors.
  static Result<std::shared_ptr<const ApiKeys>> Parse(std::string_view text, const std::string& origin);

  // 0 (the key is right), 401 (missing or malformed) or 403 (unknown id, wrong key) for the value of
  // an Authorization header (null: no such header).
  int Check(const std::string* authorization) const;
  // Check for the requests of one connection. `verified` (empty at first, owned by the connection)
  // holds the last Authorization value that passed on it: a value of the same length and the same
  // bytes (compared with CRYPTO_memcmp) passes without the hash; any other value is checked in
  // full, and kept when it passes. `verified` is only ever given to this ApiKeys (the integrator's
  // one set, fixed while it runs); the connection OPENSSL_cleanses it when it closes.
  int CheckOnConnection(const std::string* authorization, std::string* verified) const;

  size_t size() const { return keys_.size(); }

 private:
  struct Entry {
    std::array<uint8_t, 16> salt{};
    std::array<uint8_t, 32> hash{};
  };
  std::unordered_map<std::string, Entry> keys_;
};

// A new key: its id and key (to hand to the client once), and the file line holding its hash.
struct NewApiKey {
  std::string id;
  std::string key;
  std::string line;  // "ID SALT HASH[ NAME]" without the newline
};
// Random id (16 hex digits) and key (32 bytes, base64url) from OpenSSL's RAND_bytes. InvalidArgument
// when `name` holds a character that is not printable ASCII or a space; Internal when RAND_bytes fails.
Result<NewApiKey> MakeApiKey(std::string_view name);
// Appends `line` and a newline to FILE, creating it with mode 0600 (and a comment line saying what it
// holds) when it does not exist; an existing file keeps its mode. IOError on failure.
Status AppendApiKeyLine(const std::string& path, const std::string& line);

// "ApiKey " + base64(id:key): the Authorization header's value.
std::string ApiKeyAuthorization(std::string_view id, std::string_view key);

// Standard base64 (RFC 4648 §4) with padding; Base64Decode also takes it unpadded, and refuses any
// other byte or a malformed end (false).
std::string Base64Encode(std::string_view bytes);
bool Base64Decode(std::string_view text, std::string* out);

}  // namespace search
