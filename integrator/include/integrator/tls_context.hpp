// TlsServerContext: the integrator's HTTPS settings (search-integrator --tls-cert/--tls-key), one
// OpenSSL SSL_CTX that every HTTP event loop (integrator/src/http_loops.cpp) makes its connections'
// SSL objects from.
//   - TLS 1.2 and 1.3 only; TLS 1.2 with ECDHE and AEAD ciphers only (Mozilla's "intermediate"
//     list), TLS 1.3 with its three AEAD suites, AES-128-GCM preferred; the server's order
//     decides; no renegotiation, no compression.
//   - Session resumption: TLS 1.3 tickets and TLS 1.2 tickets and session ids. The ticket keys
//     and the server session cache live in this one SSL_CTX, so a session made on one loop resumes
//     on any other (until the process restarts: the ticket keys are random per start).
//   - Load checks the certificate chain (PEM: the server's certificate first, then any
//     intermediates), the private key (PEM, unencrypted) and that they match; and it refuses a key
//     file that others may read: the file must not be readable or writable by "other" nor writable
//     by the group, and readable by the group only when it belongs to root (PostgreSQL's rule for
//     its ssl_key_file: 0600, or 0640 owned by root).
// Thread-safety: immutable after Load; OpenSSL's SSL_CTX is safe to share among threads that each
// make their own SSL objects from it.
#pragma once

#include <memory>
#include <string>

#include "core/status.hpp"

typedef struct ssl_ctx_st SSL_CTX;  // as <openssl/types.h> declares it

namespace search {

class TlsServerContext {
 public:
  // InvalidArgument with a message naming the file and what is wrong with it.
  static Result<std::shared_ptr<TlsServerContext>> Load(const std::string& cert_file, const std::string& key_file);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsServerContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

// The key-file rule above, alone (for tests and for checks before anything starts).
Status CheckTlsKeyFilePermissions(const std::string& key_file);

}  // namespace search
