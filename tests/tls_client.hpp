// Test helpers for the integrator's TLS front: one blocking TLS client connection over loopback,
// verifying the server (as 127.0.0.1) against a CA file, that writes raw HTTP and reads whole
// answers (http_wire.hpp; reads give up after 30 s without a byte, so a test never hangs on a
// silent server), and a real ClientHello's bytes.
// Thread-safety: one connection, one thread; TlsClientHello from any thread.
#pragma once

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "http_wire.hpp"

namespace search::testing {

class TlsClient {
 public:
  struct Settings {
    std::string ca_file;
    int max_version = 0;             // 0: any; else also offers the old versions down to TLS 1.0
    SSL_SESSION* session = nullptr;  // offered for resumption
  };
  TlsClient(int port, const Settings& s) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_load_verify_locations(ctx_, s.ca_file.c_str(), nullptr) != 1) {
      error_ = "cannot load " + s.ca_file;
      ERR_clear_error();
      return;
    }
    if (s.max_version != 0) {
      // Let this client offer the old versions: a refusal must be the server's.
      SSL_CTX_set_security_level(ctx_, 0);
      SSL_CTX_set_min_proto_version(ctx_, TLS1_VERSION);
      SSL_CTX_set_max_proto_version(ctx_, s.max_version);
      SSL_CTX_set_cipher_list(ctx_, "DEFAULT:@SECLEVEL=0");
    }
    fd_ = ConnectLoopback(port, std::chrono::seconds(30));
    if (fd_ < 0) {
      error_ = "cannot connect";
      return;
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), "127.0.0.1");
    if (s.session) SSL_set_session(ssl_, s.session);
    ok_ = SSL_connect(ssl_) == 1;
    if (!ok_) error_ = ERR_peek_error() ? ERR_reason_error_string(ERR_peek_error()) : "closed";
    ERR_clear_error();
  }
  ~TlsClient() {
    if (ssl_) {
      if (ok_) SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    if (fd_ >= 0) ::close(fd_);
    SSL_CTX_free(ctx_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  bool reused() const { return SSL_session_reused(ssl_) == 1; }
  bool Write(const std::string& bytes) { return SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) > 0; }
  // Reads until `n` answers came (or the connection ended, or 30 s passed without a byte).
  std::vector<HttpAnswer> Read(size_t n) {
    std::vector<HttpAnswer> out;
    while (out.size() < n) {
      char buf[16384];
      const int r = SSL_read(ssl_, buf, sizeof(buf));
      if (r <= 0) break;
      in_.append(buf, static_cast<size_t>(r));
      for (HttpAnswer& a : TakeHttpAnswers(in_)) out.push_back(std::move(a));
    }
    return out;
  }
  HttpAnswer Get(const std::string& target) {
    if (!Write("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")) return {};
    auto a = Read(1);
    return a.empty() ? HttpAnswer{} : a[0];
  }
  // The session to offer next time (after an answer was read: TLS 1.3 tickets come after the
  // handshake). The caller frees it.
  SSL_SESSION* Session() const { return SSL_get1_session(ssl_); }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool ok_ = false;
  std::string error_;
  std::string in_;
};

// The bytes of a real TLS ClientHello (an OpenSSL client writing into memory), for tests that
// send a handshake's start and then misbehave.
inline std::string TlsClientHello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, BIO_new(BIO_s_mem()), wbio);
  SSL_set_connect_state(ssl);
  (void)SSL_do_handshake(ssl);  // writes the ClientHello, then wants the server's answer
  char* data = nullptr;
  const long n = BIO_get_mem_data(wbio, &data);
  std::string out(data, static_cast<size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return out;
}

}  // namespace search::testing
