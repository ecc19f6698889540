// What one TLS record costs the thread that seals or opens it, in the pattern of the integrator's
// HTTP loop (a request, then an idle gap of a few ms): for issue 49's security cost.
//   tls_record_cost gcm|gcm128 LEN GAP_US N  one AES-256-GCM (gcm128: AES-128-GCM) seal + open of
//                                          LEN bytes (EVP, one context each, a new IV a call),
//                                          after GAP_US idle
//   tls_record_cost control LEN GAP_US N   a scalar loop of about the same instruction count
//   tls_record_cost tls CERT KEY GAP_US N  a TLS round trip over a memory BIO pair (client
//                                          SSL_write 200 B, server SSL_read, server SSL_write 450 B,
//                                          client SSL_read), the integrator's TLS 1.3 suites in
//                                          its order (tls_context.cpp: AES-128-GCM first)
// Prints p10 / p50 / p90 microseconds. OPENSSL_ia32cap (set before the start) masks CPU features.
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;
volatile unsigned g_sink;

void Report(const char* what, int gap_us, std::vector<double>& t) {
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  std::printf("%s gap %d us: p10 %.2f p50 %.2f p90 %.2f us\n", what, gap_us, t[n / 10], t[n / 2], t[n * 9 / 10]);
}

void Gap(int gap_us) {
  if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
}

double Since(Clock::time_point a) { return std::chrono::duration<double, std::micro>(Clock::now() - a).count(); }

int Gcm(bool control, const char* cipher, int len, int gap_us, int n) {
  unsigned char key[32] = {1}, iv[12] = {2}, tag[16];
  std::vector<unsigned char> in(static_cast<size_t>(len), 7), out(in.size() + 16), back(in.size() + 16);
  static unsigned arr[4096];
  EVP_CIPHER_CTX* e = EVP_CIPHER_CTX_new();
  EVP_CIPHER_CTX* d = EVP_CIPHER_CTX_new();
  EVP_CIPHER* ci = EVP_CIPHER_fetch(nullptr, cipher, nullptr);
  if (ci == nullptr || EVP_EncryptInit_ex(e, ci, nullptr, key, nullptr) != 1 ||
      EVP_DecryptInit_ex(d, ci, nullptr, key, nullptr) != 1) {
    std::fprintf(stderr, "tls_record_cost: %s unavailable\n", cipher);
    return 1;
  }
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    Gap(gap_us);
    iv[0] = static_cast<unsigned char>(i);
    const auto a = Clock::now();
    if (control) {
      unsigned h = static_cast<unsigned>(i);
      for (int j = 0; j < 1250; ++j) {
        h = h * 31 + arr[(h >> 3) & 4095];
        arr[j & 4095] ^= h;
      }
      g_sink = h;
    } else {
      int ol = 0;
      EVP_EncryptInit_ex(e, nullptr, nullptr, nullptr, iv);
      EVP_EncryptUpdate(e, out.data(), &ol, in.data(), len);
      EVP_EncryptFinal_ex(e, out.data() + ol, &ol);
      EVP_CIPHER_CTX_ctrl(e, EVP_CTRL_GCM_GET_TAG, 16, tag);
      EVP_DecryptInit_ex(d, nullptr, nullptr, nullptr, iv);
      EVP_DecryptUpdate(d, back.data(), &ol, out.data(), len);
      EVP_CIPHER_CTX_ctrl(d, EVP_CTRL_GCM_SET_TAG, 16, tag);
      if (EVP_DecryptFinal_ex(d, back.data() + ol, &ol) != 1) {
        std::fprintf(stderr, "tls_record_cost: tag mismatch\n");
        return 1;
      }
    }
    t.push_back(Since(a));
  }
  const std::string what = std::string(control ? "control" : cipher) + " len " + std::to_string(len);
  Report(what.c_str(), gap_us, t);
  EVP_CIPHER_free(ci);
  EVP_CIPHER_CTX_free(e);
  EVP_CIPHER_CTX_free(d);
  return 0;
}

int Tls(const char* cert, const char* key, int gap_us, int n) {
  SSL_CTX* sc = SSL_CTX_new(TLS_server_method());
  SSL_CTX* cc = SSL_CTX_new(TLS_client_method());
  if (sc == nullptr || cc == nullptr || SSL_CTX_use_certificate_chain_file(sc, cert) != 1 ||
      SSL_CTX_use_PrivateKey_file(sc, key, SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_set_ciphersuites(sc, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1) {
    ERR_print_errors_fp(stderr);
    return 1;
  }
  SSL_CTX_set_options(sc, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL* s = SSL_new(sc);
  SSL* c = SSL_new(cc);
  BIO *b1 = nullptr, *b2 = nullptr;
  BIO_new_bio_pair(&b1, 65536, &b2, 65536);
  SSL_set_bio(s, b1, b1);
  SSL_set_bio(c, b2, b2);
  SSL_set_accept_state(s);
  SSL_set_connect_state(c);
  bool done = false;
  for (int i = 0; i < 100 && !done; ++i) done = (SSL_do_handshake(s) == 1) & (SSL_do_handshake(c) == 1);
  if (!done) {
    std::fprintf(stderr, "tls_record_cost: handshake failed\n");
    return 1;
  }
  char req[200], rep[450], buf[4096];
  std::memset(req, 'q', sizeof req);
  std::memset(rep, 'r', sizeof rep);
  std::vector<double> t;
  for (int i = 0; i < n + 50; ++i) {
    Gap(gap_us);
    const auto a = Clock::now();
    size_t k = 0;
    if (SSL_write_ex(c, req, sizeof req, &k) != 1 || SSL_read_ex(s, buf, sizeof buf, &k) != 1 || k != sizeof req ||
        SSL_write_ex(s, rep, sizeof rep, &k) != 1 || SSL_read_ex(c, buf, sizeof buf, &k) != 1 || k != sizeof rep) {
      std::fprintf(stderr, "tls_record_cost: round trip failed\n");
      return 1;
    }
    if (i >= 50) t.push_back(Since(a));  // the first 50 warm the connection
  }
  const std::string what = std::string("tls ") + SSL_get_cipher(s) + " round trip";
  Report(what.c_str(), gap_us, t);
  SSL_free(s);
  SSL_free(c);
  SSL_CTX_free(sc);
  SSL_CTX_free(cc);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if ((mode == "gcm" || mode == "gcm128" || mode == "control") && argc == 5) {
    const int len = std::atoi(argv[2]), gap = std::atoi(argv[3]), n = std::atoi(argv[4]);
    if (len < 1 || len > (1 << 20) || gap < 0 || n < 10) return std::fprintf(stderr, "bad arguments\n"), 2;
    return Gcm(mode == "control", mode == "gcm128" ? "AES-128-GCM" : "AES-256-GCM", len, gap, n);
  }
  if (mode == "tls" && argc == 6) {
    const int gap = std::atoi(argv[4]), n = std::atoi(argv[5]);
    if (gap < 0 || n < 10) return std::fprintf(stderr, "bad arguments\n"), 2;
    return Tls(argv[2], argv[3], gap, n);
  }
  std::fprintf(stderr,
               "usage: tls_record_cost gcm|gcm128|control LEN GAP_US N | tls CERT KEY GAP_US N\n");
  return 2;
}
