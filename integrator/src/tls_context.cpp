// TlsServerContext (integrator/tls_context.hpp).
#include "integrator/tls_context.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "integrator/openssl_errors.hpp"

namespace search {
namespace {

// TLS 1.2 suites: forward secrecy (ECDHE) and AEAD only, the strongest first.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// TLS 1.3 suites (all AEAD): AES-128-GCM first, the cheapest where the CPU has AES instructions.
constexpr const char* kTls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
constexpr unsigned char kSessionIdContext[] = "search-integrator";

// OpenSSL's queued errors, oldest first, as one line (and the queue emptied).
// The error queue for a message, never empty.
std::string OpenSslReason() {
  std::string e = OpenSslErrors();
  return e.empty() ? "unknown OpenSSL error" : e;
}

}  // namespace

Status CheckTlsKeyFilePermissions(const std::string& key_file) {
  struct stat st{};
  if (::stat(key_file.c_str(), &st) != 0)
    return Status::InvalidArgument("--tls-key " + key_file + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("--tls-key " + key_file + ": not a regular file");
  const mode_t allowed = st.st_uid == 0 ? 0640 : 0600;
  if ((st.st_mode & 0777 & ~allowed) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::InvalidArgument("--tls-key " + key_file + " has permissions " + mode +
                                   ", which let others read or change the private key; it must be 0600 "
                                   "(or 0640 owned by root): chmod 600 " + key_file);
  }
  return Status::Ok();
}

Result<std::shared_ptr<TlsServerContext>> TlsServerContext::Load(const std::string& cert_file,
                                                                 const std::string& key_file) {
  SEARCH_RETURN_IF_ERROR(CheckTlsKeyFilePermissions(key_file));
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Status::Internal("SSL_CTX_new: " + OpenSslReason());
  std::shared_ptr<TlsServerContext> out(new TlsServerContext(ctx));
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1 || SSL_CTX_set_ciphersuites(ctx, kTls13Suites) != 1)
    return Status::Internal("TLS settings: " + OpenSslReason());
  // A client that closes without a close_notify (most HTTP clients, once they have their answer)
  // reads as an end of stream, as over plain TCP, not as an error.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_IGNORE_UNEXPECTED_EOF);
  // Read ahead: a record's header and body (and what follows) in one recv, not two.
  SSL_CTX_set_read_ahead(ctx, 1);
  // The loops write an answer as far as the socket takes it and append the next pipelined one
  // to the same buffer (which may move): partial writes, and a retry from a moved buffer.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  SSL_CTX_set_session_id_context(ctx, kSessionIdContext, sizeof(kSessionIdContext) - 1);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1)
    return Status::InvalidArgument("--tls-cert " + cert_file + ": not a readable PEM certificate chain (" +
                                   OpenSslReason() + ")");
  EVP_PKEY* key = nullptr;
  if (BIO* in = BIO_new_file(key_file.c_str(), "r")) {
    key = PEM_read_bio_PrivateKey(in, nullptr, nullptr, nullptr);
    BIO_free(in);
  }
  if (key == nullptr)
    return Status::InvalidArgument("--tls-key " + key_file + ": not a readable, unencrypted PEM private key (" +
                                   OpenSslReason() + ")");
  const int used = SSL_CTX_use_PrivateKey(ctx, key);
  EVP_PKEY_free(key);
  if (used != 1 || SSL_CTX_check_private_key(ctx) != 1)
    return Status::InvalidArgument("--tls-key " + key_file + " does not match the certificate in --tls-cert " +
                                   cert_file + " (" + OpenSslReason() + ")");
  return out;
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

}  // namespace search
