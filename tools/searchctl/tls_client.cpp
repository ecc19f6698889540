// TlsClient (tls_client.hpp).
#include "tls_client.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include "integrator/openssl_errors.hpp"

namespace search::cli {
namespace {


// The TlsClient an SSL_CTX belongs to (its ex_data slot).
int ClientIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

}  // namespace

Result<std::unique_ptr<TlsClient>> TlsClient::Make(const std::string& ca_file, const std::string& host) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return Status::Internal("SSL_CTX_new: " + OpenSslErrors());
  std::unique_ptr<TlsClient> out(new TlsClient(ctx, host));
  in6_addr ip{};
  out->host_is_ip_ = ::inet_pton(AF_INET, host.c_str(), &ip) == 1 || ::inet_pton(AF_INET6, host.c_str(), &ip) == 1;
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
    return Status::Internal("TLS settings: " + OpenSslErrors());
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const int loaded = ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                     : SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  if (loaded != 1)
    return Status::InvalidArgument("--cacert " + ca_file + ": not a readable PEM file of CA certificates (" +
                                   OpenSslErrors() + ")");
  // Sessions are kept here (OnNewSession), not in OpenSSL's client cache.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, &TlsClient::OnNewSession);
  SSL_CTX_set_ex_data(ctx, ClientIndex(), out.get());
  return out;
}

TlsClient::~TlsClient() {
  if (latest_ != nullptr) SSL_SESSION_free(latest_);
  SSL_CTX_free(ctx_);
}

int TlsClient::OnNewSession(SSL* ssl, SSL_SESSION* session) {
  auto* self = static_cast<TlsClient*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ClientIndex()));
  if (self == nullptr || !SSL_SESSION_is_resumable(session)) return 0;
  std::lock_guard lock(self->mu_);
  if (self->latest_ != nullptr) SSL_SESSION_free(self->latest_);
  self->latest_ = session;
  return 1;  // the reference is ours now
}

SslPtr TlsClient::Connect(int fd) {
  SslPtr ssl(SSL_new(ctx_));
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) return nullptr;
  SSL_set_connect_state(ssl.get());
  if (!host_is_ip_) SSL_set_tlsext_host_name(ssl.get(), host_.c_str());  // SNI names hosts, not addresses
  // The certificate must name the host (or carry the IP address as a subjectAltName).
  if (host_is_ip_) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), host_.c_str());
  } else {
    SSL_set1_host(ssl.get(), host_.c_str());
  }
  std::lock_guard lock(mu_);
  if (latest_ != nullptr) SSL_set_session(ssl.get(), latest_);
  return ssl;
}

void TlsClient::Handshaken(SSL* ssl) {
  handshakes_.fetch_add(1, std::memory_order_relaxed);
  if (SSL_session_reused(ssl)) resumed_.fetch_add(1, std::memory_order_relaxed);
}

void TlsClient::Failed(SSL* ssl) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  std::string why = OpenSslErrors();
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) why += std::string(why.empty() ? "" : "; ") + X509_verify_cert_error_string(verify);
  if (why.empty()) why = "the connection closed during the handshake";
  std::lock_guard lock(mu_);
  if (first_failure_.empty()) first_failure_ = why;
}

std::string TlsClient::first_failure() const {
  std::lock_guard lock(mu_);
  return first_failure_;
}

Result<std::string> ApiKeyHeader(const std::string& id_colon_key) {
  const size_t colon = id_colon_key.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == id_colon_key.size())
    return Status::InvalidArgument("--api-key must be ID:KEY (as `searchctl apikey create` prints it)");
  std::string b64(4 * ((id_colon_key.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                reinterpret_cast<const unsigned char*>(id_colon_key.data()),
                                static_cast<int>(id_colon_key.size()));
  b64.resize(static_cast<size_t>(n));
  return "Authorization: ApiKey " + b64 + "\r\n";
}

}  // namespace search::cli
