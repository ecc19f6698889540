// TlsClient: the HTTPS side of `searchctl loadgen` (an https:// --url). One OpenSSL client
// context for every connection of every loop: TLS 1.2 or 1.3, the server's certificate verified
// against --cacert (or the system's CAs) and its name against the URL's host, and session
// resumption: each new connection offers the latest session (TLS 1.3 ticket or TLS 1.2 session)
// any connection received, so only the first connection pays a full handshake.
// Thread-safety: Connect and the counters may be called from any thread (the latest session is
// guarded by a mutex; OpenSSL's SSL_CTX is shared); each SSL object belongs to one thread.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.hpp"

namespace search::cli {

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

class TlsClient {
 public:
  // `ca_file`: PEM CA certificates to trust ("" : the system's); `host`: the name (or IP address)
  // the server's certificate must carry, and the SNI sent.
  static Result<std::unique_ptr<TlsClient>> Make(const std::string& ca_file, const std::string& host);
  ~TlsClient();
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  // A client SSL object over the connected (or connecting) non-blocking socket `fd`, offering
  // the latest session; null when OpenSSL is out of memory.
  SslPtr Connect(int fd);
  // After a handshake completed: counts it (resumed or full).
  void Handshaken(SSL* ssl);
  // After one failed: counts it and keeps the first reason (OpenSSL's error queue and the
  // certificate verification's result).
  void Failed(SSL* ssl);

  uint64_t handshakes() const { return handshakes_.load(); }
  uint64_t resumed() const { return resumed_.load(); }
  uint64_t failures() const { return failures_.load(); }
  std::string first_failure() const;

 private:
  TlsClient(SSL_CTX* ctx, std::string host) : ctx_(ctx), host_(std::move(host)) {}
  static int OnNewSession(SSL* ssl, SSL_SESSION* session);

  SSL_CTX* ctx_;
  std::string host_;
  bool host_is_ip_ = false;
  mutable std::mutex mu_;
  SSL_SESSION* latest_ = nullptr;  // GUARDED_BY(mu_); owned (one reference)
  std::string first_failure_;      // GUARDED_BY(mu_)
  std::atomic<uint64_t> handshakes_{0}, resumed_{0}, failures_{0};
};

// "Authorization: ApiKey base64(id:key)\r\n" for --api-key ID:KEY; InvalidArgument when it is
// not ID:KEY with both parts non-empty.
Result<std::string> ApiKeyHeader(const std::string& id_colon_key);

}  // namespace search::cli
