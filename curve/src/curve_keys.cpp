// CURVE key files and lists (see curve/curve_keys.hpp).
#include "curve/curve_keys.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace search::curve {
namespace {

constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

Result<std::string> ReadSmallFile(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(Errno("cannot read", path));
  std::string text;
  char buf[4096];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > limit) return Status::InvalidArgument(path + ": larger than " + std::to_string(limit) + " bytes");
  }
  return text;
}

// "FILE:LINE: " for a message about a line.
std::string Where(const std::string& path, size_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

std::string NotAKey(std::string_view key) {
  std::string shown(key.substr(0, 48));
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return "'" + shown + (key.size() > 48 ? "...'" : "'") +
         " is not a Z85 CURVE key (40 characters, as searchctl keygen "
         "writes them)";
}

// Writes `text` to `path` (mode `mode`) through a temporary file in the same directory: the file
// appears whole or not at all. Without `force` an existing `path` stays and AlreadyExists.
Status WriteAtomically(const std::string& path, const std::string& text, mode_t mode, bool force) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return Status::IOError(Errno("cannot create", tmp));
  bool ok = ::fchmod(fd, mode) == 0;  // the umask may have taken bits the file should have
  size_t done = 0;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const std::string error = ok ? "" : Errno("cannot write", tmp);
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::IOError(error);
  }
  if (force) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const Status st = Status::IOError(Errno("cannot rename " + tmp + " to", path));
      ::unlink(tmp.c_str());
      return st;
    }
    return Status::Ok();
  }
  // link(2) fails with EEXIST rather than replace: no window in which another writer's file is lost.
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0) {
    errno = link_errno;
    if (link_errno == EEXIST) return Status::AlreadyExists(path + " exists (--force replaces it)");
    return Status::IOError(Errno("cannot create", path));
  }
  return Status::Ok();
}

}  // namespace

bool CurveAvailable() {
  return zmq_has("curve") != 0;
}

Result<KeyPair> GenerateKeyPair() {
  std::array<char, kZ85KeyChars + 1> pub{}, sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0)
    return Status::Internal(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()) +
                            " (libzmq built without CURVE?)");
  return KeyPair{std::string(pub.data(), kZ85KeyChars), std::string(sec.data(), kZ85KeyChars)};
}

bool IsZ85Key(std::string_view key) {
  if (key.size() != kZ85KeyChars) return false;
  for (char c : key)
    if (kZ85Alphabet.find(c) == std::string_view::npos) return false;
  std::array<uint8_t, 32> bytes{};
  const std::string z(key);
  return zmq_z85_decode(bytes.data(), z.c_str()) != nullptr;
}

Result<std::string> PublicKeyOf(std::string_view secret_key) {
  if (!IsZ85Key(secret_key)) return Status::InvalidArgument(NotAKey(secret_key));
  std::array<char, kZ85KeyChars + 1> pub{};
  const std::string sec(secret_key);
  if (zmq_curve_public(pub.data(), sec.c_str()) != 0)
    return Status::Internal(std::string("zmq_curve_public: ") + zmq_strerror(zmq_errno()) +
                            " (libzmq built without CURVE?)");
  return std::string(pub.data(), kZ85KeyChars);
}

Status WriteKeyPair(const std::string& prefix, const KeyPair& keys, bool force) {
  if (!IsZ85Key(keys.secret_key) || !IsZ85Key(keys.public_key))
    return Status::InvalidArgument("WriteKeyPair: not a Z85 key pair");
  const std::string key_path = prefix + ".key", pub_path = prefix + ".pub";
  if (!force) {
    struct stat st {};
    for (const std::string& p : {key_path, pub_path})
      if (::lstat(p.c_str(), &st) == 0) return Status::AlreadyExists(p + " exists (--force replaces it)");
  }
  SEARCH_RETURN_IF_ERROR(WriteAtomically(key_path, keys.secret_key + "\n", 0600, force));
  return WriteAtomically(pub_path, keys.public_key + "\n", 0644, force);
}

Result<KeyPair> ReadSecretKeyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::InvalidArgument(Errno("cannot read secret key file", path));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("secret key file " + path + " is not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument("secret key file " + path + " has mode " + mode +
                                   ": its group or others may read it; chmod 600 " + path);
  }
  SEARCH_ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(path, 1024));
  std::string_view key = text;
  if (!key.empty() && key.back() == '\n') key.remove_suffix(1);
  if (!key.empty() && key.back() == '\r') key.remove_suffix(1);
  if (!IsZ85Key(key)) return Status::InvalidArgument(path + ": " + NotAKey(key));
  auto pub = PublicKeyOf(key);
  if (!pub.ok()) return pub.status().WithContext(path);
  return KeyPair{std::move(pub).value(), std::string(key)};
}

Result<std::string> ReadPublicKeyFile(const std::string& path) {
  SEARCH_ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(path, 1024));
  const size_t eol = std::min(text.size(), text.find('\n'));
  const std::string_view key = Trim(std::string_view(text).substr(0, eol));
  if (!IsZ85Key(key)) return Status::InvalidArgument(path + ": " + NotAKey(key));
  if (text.find_first_not_of(" \t\r\n", eol) != std::string::npos)
    return Status::InvalidArgument(path + ": more than one key (a .pub file holds one)");
  return std::string(key);
}

Result<std::vector<std::string>> ReadClientKeys(const std::string& path) {
  SEARCH_ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(path, size_t{64} << 20));
  std::vector<std::string> keys;
  std::istringstream in(text);
  std::string raw;
  for (size_t line = 1; std::getline(in, raw); ++line) {
    const std::string_view s = Trim(raw);
    if (s.empty() || s.front() == '#') continue;
    if (!IsZ85Key(s)) return Status::InvalidArgument(Where(path, line) + NotAKey(s));
    keys.emplace_back(s);
  }
  if (keys.empty()) return Status::InvalidArgument(path + ": no client public key (one Z85 key a line)");
  return keys;
}

Result<std::string> ServerKeys::For(const std::string& endpoint) const {
  if (auto it = by_endpoint.find(endpoint); it != by_endpoint.end()) return it->second;
  if (!all.empty()) return all;
  return Status::NotFound("no CURVE server key for endpoint " + endpoint + " (add a line `" + endpoint +
                          " PUBLIC_KEY`, or one line with a key for every node)");
}

Result<ServerKeys> ReadServerKeys(const std::string& path) {
  SEARCH_ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(path, size_t{16} << 20));
  ServerKeys keys;
  size_t all_line = 0;
  std::istringstream in(text);
  std::string raw;
  for (size_t line = 1; std::getline(in, raw); ++line) {
    const std::string_view s = Trim(raw);
    if (s.empty() || s.front() == '#') continue;
    const size_t space = s.find_first_of(" \t");
    if (space == std::string_view::npos) {
      if (!IsZ85Key(s)) return Status::InvalidArgument(Where(path, line) + NotAKey(s));
      if (all_line != 0)
        return Status::InvalidArgument(Where(path, line) + "a second key for every endpoint (the first is on line " +
                                       std::to_string(all_line) + ")");
      keys.all = std::string(s);
      all_line = line;
      continue;
    }
    const std::string endpoint(s.substr(0, space));
    const std::string_view key = Trim(s.substr(space + 1));
    if (endpoint.find("://") == std::string::npos)
      return Status::InvalidArgument(Where(path, line) + "'" + endpoint +
                                     "' is not an endpoint (expected `tcp://HOST:PORT PUBLIC_KEY`)");
    if (!IsZ85Key(key)) return Status::InvalidArgument(Where(path, line) + NotAKey(key));
    if (!keys.by_endpoint.emplace(endpoint, std::string(key)).second)
      return Status::InvalidArgument(Where(path, line) + "endpoint " + endpoint + " listed twice");
  }
  if (keys.all.empty() && keys.by_endpoint.empty())
    return Status::InvalidArgument(path + ": no server key (lines `ENDPOINT PUBLIC_KEY`, or one key for all)");
  return keys;
}

Result<std::optional<ClientKeys>> ClientKeysForFlags(const std::string& key_file, const std::string& servers_file,
                                                     bool insecure, const std::vector<std::string>& shards) {
  if (key_file.empty() != servers_file.empty())
    return Status::InvalidArgument("--curve-key and --curve-servers go together");
  std::vector<std::string> endpoints;
  for (const std::string& shard : shards) {
    std::istringstream in(shard);
    for (std::string ep; std::getline(in, ep, '|');)
      if (!ep.empty()) endpoints.push_back(ep);
  }
  if (key_file.empty()) {
    if (!insecure)
      for (const std::string& ep : endpoints)
        if (!IsLoopbackEndpoint(ep))
          return Status::InvalidArgument(
              "shard endpoint " + ep +
              " is beyond loopback and the integrator has no --curve-key: its queries and "
              "answers would cross the network in clear, to any process listening there. Give --curve-key and "
              "--curve-servers (docs/OPERATIONS.md \"CURVE keys\"), or pass --insecure");
    return std::optional<ClientKeys>();
  }
  if (!CurveAvailable()) return Status::InvalidArgument("--curve-key: this libzmq was built without CURVE (libsodium)");
  ClientKeys keys;
  auto pair = ReadSecretKeyFile(key_file);
  if (!pair.ok()) return pair.status().WithContext("--curve-key");
  keys.client = std::move(pair).value();
  auto servers = ReadServerKeys(servers_file);
  if (!servers.ok()) return servers.status().WithContext("--curve-servers");
  keys.servers = std::move(servers).value();
  for (const std::string& ep : endpoints)
    if (auto k = keys.servers.For(ep); !k.ok())
      return Status::InvalidArgument("--curve-servers " + servers_file + ": " + k.status().message());
  return std::optional<ClientKeys>(std::move(keys));
}

bool IsLoopbackEndpoint(std::string_view endpoint) {
  if (endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://")) return true;
  if (!endpoint.starts_with("tcp://")) return false;
  std::string_view rest = endpoint.substr(6);
  // tcp://SOURCE;HOST:PORT names a source address: the destination decides.
  if (const size_t semi = rest.find(';'); semi != std::string_view::npos) rest = rest.substr(semi + 1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view host = rest.substr(0, colon);
  if (host == "localhost" || host == "[::1]") return true;
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return false;
  }
  return dots == 3;
}

}  // namespace search::curve
