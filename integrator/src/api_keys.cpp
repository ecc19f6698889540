#include "integrator/api_keys.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace search {
namespace {

constexpr size_t kMaxAuthorizationBytes = 1024;
constexpr size_t kMaxIdBytes = 64;
constexpr const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr const char* kFileHeader =
    "# search-integrator API keys (searchctl apikey create): ID SALT SHA256(SALT||KEY) [NAME], one a line\n";

bool IsIdChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

template <size_t N>
bool ParseHex(std::string_view s, std::array<uint8_t, N>* out) {
  if (s.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = HexValue(s[2 * i]), lo = HexValue(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

std::string Hex(const uint8_t* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 15];
  }
  return s;
}

// SHA-256 through EVP, the digest fetched once (OpenSSL 3 would otherwise look it up every call).
std::array<uint8_t, 32> Sha256(const std::array<uint8_t, 16>& salt, std::string_view key) {
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  std::array<uint8_t, 32> out{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned int n = 0;
  const bool ok = ctx != nullptr && kSha256 != nullptr && EVP_DigestInit_ex(ctx, kSha256, nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, salt.data(), salt.size()) == 1 &&
                  EVP_DigestUpdate(ctx, key.data(), key.size()) == 1 && EVP_DigestFinal_ex(ctx, out.data(), &n) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) ERR_clear_error();  // the HTTP loops keep their thread's queue empty (http_loops.cpp TlsRecv)
  if (!ok || n != out.size()) out.fill(0xff);  // matches no stored hash (a stored one is never all 0xff in practice)
  return out;
}

bool Printable(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  return true;
}

std::string_view NextField(std::string_view* rest) {
  size_t b = 0;
  while (b < rest->size() && ((*rest)[b] == ' ' || (*rest)[b] == '\t')) ++b;
  size_t e = b;
  while (e < rest->size() && (*rest)[e] != ' ' && (*rest)[e] != '\t') ++e;
  const std::string_view field = rest->substr(b, e - b);
  rest->remove_prefix(e);
  return field;
}

}  // namespace

Result<std::shared_ptr<const ApiKeys>> ApiKeys::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read API key file " + path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IOError("cannot read API key file " + path);
  return Parse(text.str(), path);
}

Result<std::shared_ptr<const ApiKeys>> ApiKeys::Parse(std::string_view text, const std::string& origin) {
  auto keys = std::make_shared<ApiKeys>();
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view rest = line;
    const std::string_view id = NextField(&rest);
    if (id.empty() || id[0] == '#') continue;
    const auto bad = [&](const std::string& why) {
      return Status::InvalidArgument(origin + ":" + std::to_string(line_no) + ": " + why +
                                     " (want ID SALT HASH [NAME], as searchctl apikey create writes)");
    };
    if (id.size() > kMaxIdBytes) return bad("the id is longer than 64 characters");
    for (char c : id)
      if (!IsIdChar(c)) return bad("the id holds a character other than A-Z a-z 0-9 _ -");
    Entry e;
    if (!ParseHex(NextField(&rest), &e.salt)) return bad("the salt is not 32 lower-case hex digits");
    if (!ParseHex(NextField(&rest), &e.hash)) return bad("the hash is not 64 lower-case hex digits");
    if (!Printable(rest)) return bad("the name holds a control character");
    if (!keys->keys_.emplace(std::string(id), e).second) return bad("the id " + std::string(id) + " is repeated");
  }
  if (keys->keys_.empty())
    return Status::InvalidArgument(origin + ": holds no API key (searchctl apikey create --file " + origin + ")");
  return std::shared_ptr<const ApiKeys>(std::move(keys));
}

int ApiKeys::Check(const std::string* authorization) const {
  if (authorization == nullptr) return 401;
  std::string_view v = *authorization;
  if (v.size() > kMaxAuthorizationBytes || v.size() < 7) return 401;
  static constexpr std::string_view kScheme = "apikey";
  for (size_t i = 0; i < kScheme.size(); ++i)
    if ((v[i] | 0x20) != kScheme[i]) return 401;
  v.remove_prefix(kScheme.size());
  if (v.empty() || v[0] != ' ') return 401;
  while (!v.empty() && v[0] == ' ') v.remove_prefix(1);
  std::string decoded;
  if (!Base64Decode(v, &decoded)) return 401;
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == decoded.size()) {
    OPENSSL_cleanse(decoded.data(), decoded.size());
    return 401;
  }
  const std::string_view id = std::string_view(decoded).substr(0, colon);
  const std::string_view key = std::string_view(decoded).substr(colon + 1);
  const auto it = keys_.find(std::string(id));
  // An unknown id costs the same hash as a known one.
  static const Entry kNone{};
  const Entry& e = it == keys_.end() ? kNone : it->second;
  const std::array<uint8_t, 32> got = Sha256(e.salt, key);
  const bool match = CRYPTO_memcmp(got.data(), e.hash.data(), got.size()) == 0;
  OPENSSL_cleanse(decoded.data(), decoded.size());
  return it != keys_.end() && match ? 0 : 403;
}

int ApiKeys::CheckOnConnection(const std::string* authorization, std::string* verified) const {
  if (authorization != nullptr && !verified->empty() && authorization->size() == verified->size() &&
      CRYPTO_memcmp(authorization->data(), verified->data(), verified->size()) == 0)
    return 0;
  const int status = Check(authorization);
  if (status == 0) {
    OPENSSL_cleanse(verified->data(), verified->size());
    *verified = *authorization;
  }
  return status;
}

Result<NewApiKey> MakeApiKey(std::string_view name) {
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return Status::InvalidArgument("an API key name holds printable ASCII only");
  uint8_t id[8], key[32];
  std::array<uint8_t, 16> salt{};
  if (RAND_bytes(id, sizeof(id)) != 1 || RAND_bytes(key, sizeof(key)) != 1 || RAND_bytes(salt.data(), salt.size()) != 1)
    return Status::Internal("RAND_bytes failed: no randomness for an API key");
  NewApiKey k;
  k.id = Hex(id, sizeof(id));
  // base64url without padding: safe in URLs and shells, and never holds ':'.
  k.key = Base64Encode(std::string_view(reinterpret_cast<const char*>(key), sizeof(key)));
  OPENSSL_cleanse(key, sizeof(key));
  for (char& c : k.key) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!k.key.empty() && k.key.back() == '=') k.key.pop_back();
  const std::array<uint8_t, 32> hash = Sha256(salt, k.key);
  k.line = k.id + " " + Hex(salt.data(), salt.size()) + " " + Hex(hash.data(), hash.size());
  if (!name.empty()) k.line += " " + std::string(name);
  return k;
}

Status AppendApiKeyLine(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const bool created = fd >= 0;
  const int out = created ? fd : ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (out < 0) return Status::IOError("cannot open API key file " + path + ": " + std::strerror(errno));
  std::string text = created ? std::string(kFileHeader) : std::string();
  text += line;
  text += '\n';
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(out, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(out);
      return Status::IOError("cannot write API key file " + path + ": " + why);
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(out) != 0 || ::close(out) != 0)
    return Status::IOError("cannot write API key file " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

std::string ApiKeyAuthorization(std::string_view id, std::string_view key) {
  std::string idkey(id);
  idkey += ':';
  idkey += key;
  return "ApiKey " + Base64Encode(idkey);
}

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                       static_cast<uint8_t>(bytes[i + 2]);
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (bytes.size() - i == 1) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += "==";
  } else if (bytes.size() - i == 2) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8;
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

bool Base64Decode(std::string_view text, std::string* out) {
  out->clear();
  if (text.size() % 4 == 0 && !text.empty()) {  // padded: drop up to two '='
    if (text.back() == '=') text.remove_suffix(1);
    if (text.back() == '=') text.remove_suffix(1);
  }
  if (text.size() % 4 == 1) return false;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else
      return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // Leftover bits must be zero (a canonical encoding).
  return (acc & ((1u << bits) - 1)) == 0;
}

}  // namespace search
