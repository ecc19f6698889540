// The HTTP front over TLS in one process (label unit, so CI runs it): an Integrator over a
// FakeNode behind an HttpFront with a TlsServerContext, asked by OpenSSL clients of this test.
// The CA and the server certificate are made with the OpenSSL API into a temporary directory.
//   - a search over HTTPS answers as Integrator::Search does; pipelined requests over one TLS
//     connection are answered in order, and the connection is kept alive;
//   - a client trusting another CA fails verification; TLS 1.1 is refused (the client allows it);
//   - a session resumes on a new connection (either loop);
//   - a plain HTTP request, garbage and half-open handshakes get no answer and are closed (the
//     stalled ones after the I/O timeout) and counted by OnTlsHandshakeFailure, while HTTPS
//     clients keep getting answers;
//   - TlsServerContext::Load refuses a key others may read, a key that is not the certificate's,
//     and files that are not PEM.
// tests/integration/tls_test.cpp does the same with real processes, curl and openssl s_client.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../http_wire.hpp"
#include "../tls_client.hpp"
#include "fake_node.hpp"
#include "integrator/http_front.hpp"
#include "integrator/integrator.hpp"
#include "integrator/tls_context.hpp"
#include "integrator_fixture.hpp"

namespace search {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using testing::AnswerWith;
using testing::FakeNode;
using testing::Options;
using testing::Params;
using testing::WaitReady;
namespace fs = std::filesystem;

// ---- Certificates ----

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

void AddExt(X509* x, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(ext, nullptr) << value;
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `key` named `cn`, signed by `issuer` / `issuer_key` (itself when null): a CA's
// when `ca`, else a server's for 127.0.0.1 and localhost.
Cert MakeCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, bool ca) {
  static long serial = 1;
  Cert x(X509_new());
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 2 * 86400);
  X509_set_pubkey(x.get(), key);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509* signer = issuer ? issuer : x.get();
  if (ca) {
    AddExt(x.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExt(x.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExt(x.get(), signer, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  }
  X509_sign(x.get(), issuer_key ? issuer_key : key, EVP_sha256());
  return x;
}

void WritePem(const std::string& path, X509* cert) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  PEM_write_X509(f, cert);
  std::fclose(f);
}

void WritePem(const std::string& path, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  ::chmod(path.c_str(), 0600);
}

// ca.pem, server.pem, server.key (0600) and other.pem (another CA) in a temporary directory.
class Pki {
 public:
  Pki() {
    std::string tmpl = (fs::temp_directory_path() / "tls-front-test-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    Pkey ca_key(EVP_EC_gen("P-256")), server_key(EVP_EC_gen("P-256")), other_key(EVP_EC_gen("P-256"));
    Cert ca = MakeCert(ca_key.get(), "tls_front_test CA", nullptr, nullptr, true);
    Cert server = MakeCert(server_key.get(), "localhost", ca.get(), ca_key.get(), false);
    Cert other = MakeCert(other_key.get(), "tls_front_test other CA", nullptr, nullptr, true);
    WritePem(ca_pem(), ca.get());
    WritePem(server_pem(), server.get());
    WritePem(server_key_file(), server_key.get());
    WritePem(other_pem(), other.get());
    WritePem(dir_ + "/other.key", other_key.get());
  }
  ~Pki() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  std::string ca_pem() const { return dir_ + "/ca.pem"; }
  std::string server_pem() const { return dir_ + "/server.pem"; }
  std::string server_key_file() const { return dir_ + "/server.key"; }
  std::string other_pem() const { return dir_ + "/other.pem"; }

 private:
  std::string dir_;
};

// ---- Clients ----

using search::testing::HttpAnswer;

// A loopback connection whose reads give up after 30 s (a test never hangs on a silent server).
int Connect(int port) { return search::testing::ConnectLoopback(port, std::chrono::seconds(30)); }

using Client = search::testing::TlsClient;
using search::testing::TlsClientHello;

// ---- The server ----

class CountingObserver : public IntegratorObserver {
 public:
  void OnTlsHandshakeFailure() override { failures.fetch_add(1); }
  std::atomic<int> failures{0};
};

// An Integrator over one FakeNode behind an HTTPS front with two loops, serving on a thread.
class TlsFront {
 public:
  explicit TlsFront(const Pki& pki) : node_(0, AnswerWith(0, {{5, 3.0f, "a5"}, {1, 1.0f, "a1"}, {9, 0.5f, "a9"}})) {
    auto in = Integrator::Start(Options({node_.endpoint()}), &observer_);
    EXPECT_TRUE(in.ok()) << in.status().ToString();
    if (!in.ok()) return;
    in_ = std::move(in).value();
    EXPECT_TRUE(WaitReady(*in_));
    auto tls = TlsServerContext::Load(pki.server_pem(), pki.server_key_file());
    EXPECT_TRUE(tls.ok()) << tls.status().ToString();
    if (!tls.ok()) return;
    HttpFrontOptions o;
    o.port = 0;
    o.loops = 2;
    o.tls = *tls;
    front_ = std::make_unique<HttpFront>(in_.get(), o);
    const Status st = front_->Bind();
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return;
    thread_ = std::thread([this] { front_->Listen(); });
  }
  ~TlsFront() {
    if (front_) front_->Stop();
    if (thread_.joinable()) thread_.join();
    front_.reset();
    if (in_) in_->Stop();
  }
  int port() const { return front_ ? front_->port() : 0; }
  Integrator& integrator() { return *in_; }
  int failures() const { return observer_.failures.load(); }

 private:
  FakeNode node_;
  CountingObserver observer_;
  std::unique_ptr<Integrator> in_;
  std::unique_ptr<HttpFront> front_;
  std::thread thread_;
};

class TlsFrontTest : public ::testing::Test {
 protected:
  void SetUp() override {
    front_ = std::make_unique<TlsFront>(pki_);
    ASSERT_NE(front_->port(), 0);
  }
  Client::Settings Trusting() const { return {pki_.ca_pem()}; }
  // The hits of the same search through Integrator::Search.
  json Expected(const std::string& q, uint32_t k) {
    return json::parse(front_->integrator().Search(Params(q, QueryMode::kOr, k)).body)["hits"]["hits"];
  }

  Pki pki_;
  std::unique_ptr<TlsFront> front_;
};

TEST_F(TlsFrontTest, SearchOverHttpsAnswersAsTheIntegrator) {
  Client c(front_->port(), Trusting());
  ASSERT_TRUE(c.ok()) << c.error();
  const HttpAnswer a = c.Get("/search?q=apple+mango&mode=or&k=2");
  ASSERT_EQ(a.status, 200) << a.body;
  const json j = json::parse(a.body);
  EXPECT_EQ(j["hits"]["hits"], Expected("apple mango", 2));
  EXPECT_EQ(j["hits"]["hits"][0]["_id"], "a5");
  EXPECT_EQ(front_->failures(), 0);
}

TEST_F(TlsFrontTest, PipelinedRequestsAreAnsweredInOrderOnAKeptAliveConnection) {
  Client c(front_->port(), Trusting());
  ASSERT_TRUE(c.ok()) << c.error();
  std::string batch;
  std::vector<uint32_t> ks;
  for (uint32_t i = 0; i < 12; ++i) {
    ks.push_back(1 + i % 3);
    batch += "GET /search?mode=or&q=word" + std::to_string(i) + "&k=" + std::to_string(ks.back()) +
             " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  }
  batch += "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_TRUE(c.Write(batch));
  const std::vector<HttpAnswer> answers = c.Read(ks.size() + 1);
  ASSERT_EQ(answers.size(), ks.size() + 1);
  for (size_t i = 0; i < ks.size(); ++i) {
    ASSERT_EQ(answers[i].status, 200) << answers[i].body;
    EXPECT_EQ(json::parse(answers[i].body)["hits"]["hits"].size(), ks[i]) << i;  // in order: k tells them apart
  }
  EXPECT_NE(answers.back().body.find("\"status\":\"green\""), std::string::npos) << answers.back().body;
  EXPECT_EQ(c.Get("/search?q=again&mode=or&k=1").status, 200);  // still open
}

// More pipelined bytes than OpenSSL's read buffer takes in one read (many 16 KiB records in one
// write), then requests written one record at a time: the loop must read on until the socket is
// drained (an edge-triggered read that stopped early would leave the rest unanswered).
TEST_F(TlsFrontTest, PipelinedBurstLargerThanTheReadBufferIsAllAnswered) {
  Client c(front_->port(), Trusting());
  ASSERT_TRUE(c.ok()) << c.error();
  const std::string pad(900, 'p');
  std::string batch;
  std::vector<uint32_t> ks;
  for (uint32_t i = 0; i < 90; ++i) {
    ks.push_back(1 + i % 3);
    batch += "GET /search?mode=or&q=word" + std::to_string(i) + "&k=" + std::to_string(ks.back()) +
             " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + pad + "\r\n\r\n";
  }
  ASSERT_GT(batch.size(), 64u << 10);
  ASSERT_TRUE(c.Write(batch));
  std::vector<HttpAnswer> answers = c.Read(ks.size());
  ASSERT_EQ(answers.size(), ks.size());
  for (size_t i = 0; i < ks.size(); ++i) {
    ASSERT_EQ(answers[i].status, 200) << answers[i].body;
    EXPECT_EQ(json::parse(answers[i].body)["hits"]["hits"].size(), ks[i]) << i;
  }
  // A request split over several records (and writes), then two in one record.
  for (const std::string piece : {"GET /search?mode=or&q=a&k=2 HT", "TP/1.1\r\nHost: 127.0.0.1\r", "\n\r\n"})
    ASSERT_TRUE(c.Write(piece));
  ASSERT_TRUE(c.Write("GET /search?mode=or&q=b&k=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  answers = c.Read(3);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(json::parse(answers[0].body)["hits"]["hits"].size(), 2u);
  EXPECT_EQ(json::parse(answers[1].body)["hits"]["hits"].size(), 1u);
  EXPECT_EQ(answers[2].status, 200);
}

TEST_F(TlsFrontTest, AnotherCaFailsVerificationAndOldVersionsAreRefused) {
  Client wrong(front_->port(), {pki_.other_pem()});
  EXPECT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error(), "certificate verify failed");
  for (int version : {TLS1_VERSION, TLS1_1_VERSION}) {
    Client old(front_->port(), {pki_.ca_pem(), version});
    EXPECT_FALSE(old.ok()) << version;
    EXPECT_EQ(old.error(), "tlsv1 alert protocol version") << version;
  }
  for (int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    Client ok(front_->port(), {pki_.ca_pem(), version});
    EXPECT_TRUE(ok.ok()) << version << ": " << ok.error();
    EXPECT_EQ(ok.Get("/health").status, 200);
  }
  // The refused ones failed their handshakes: counted, once each, once the server has seen them go.
  const auto end = Clock::now() + 30s;
  while (front_->failures() < 3 && Clock::now() < end) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(front_->failures(), 3);
}

TEST_F(TlsFrontTest, SessionsResumeOnNewConnections) {
  for (int version : {TLS1_3_VERSION, TLS1_2_VERSION}) {
    SSL_SESSION* session = nullptr;
    {
      Client first(front_->port(), {pki_.ca_pem(), version});
      ASSERT_TRUE(first.ok()) << first.error();
      EXPECT_FALSE(first.reused());
      ASSERT_EQ(first.Get("/health").status, 200);  // reads the TLS 1.3 tickets too
      session = first.Session();
    }
    ASSERT_NE(session, nullptr);
    for (int i = 0; i < 4; ++i) {  // new connections go to the two loops in turn
      Client again(front_->port(), {pki_.ca_pem(), version, session});
      ASSERT_TRUE(again.ok()) << again.error();
      EXPECT_TRUE(again.reused()) << version << " #" << i;
      EXPECT_EQ(again.Get("/health").status, 200);
    }
    SSL_SESSION_free(session);
  }
}

TEST_F(TlsFrontTest, GarbageAndHalfOpenHandshakesAreClosedAndCountedWhileClientsAreServed) {
  const std::string hello = TlsClientHello();
  ASSERT_GT(hello.size(), 100u);
  std::mt19937 rng(49);
  std::vector<std::pair<int, std::string>> bad;  // fd, what it sent
  auto open = [&](const std::string& kind, const std::string& bytes) {
    const int fd = Connect(front_->port());
    ASSERT_GE(fd, 0);
    if (!bytes.empty()) {
      ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    }
    bad.emplace_back(fd, kind);
  };
  std::string garbage(1500, '\0');
  for (char& ch : garbage) ch = static_cast<char>(rng());
  for (int i = 0; i < 30; ++i) open("half a ClientHello", hello.substr(0, hello.size() / 2));
  for (int i = 0; i < 5; ++i) open("nothing", "");
  for (int i = 0; i < 5; ++i) open("ClientHello and garbage", hello + garbage);
  for (int i = 0; i < 5; ++i) open("plain HTTP", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  for (int i = 0; i < 5; ++i) open("garbage", garbage.substr(0, 1 + rng() % garbage.size()));

  // Meanwhile: HTTPS clients are served, exactly.
  for (int i = 0; i < 5; ++i) {
    Client c(front_->port(), Trusting());
    ASSERT_TRUE(c.ok()) << c.error();
    const HttpAnswer a = c.Get("/search?q=apple&mode=or&k=3");
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(json::parse(a.body)["hits"]["hits"], Expected("apple", 3));
  }
  // Each hostile connection is closed by the server (the stalled ones after its I/O timeout; the
  // limit here is generous, not a measurement), with no HTTP answer.
  const auto limit = Clock::now() + 120s;
  for (const auto& [fd, kind] : bad) {
    std::string got;
    while (Clock::now() < limit) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_LT(Clock::now(), limit) << kind << ": never closed";
    EXPECT_NE(got.rfind("HTTP/", 0), 0u) << kind << ": " << got.substr(0, 60);
    ::close(fd);
  }
  while (front_->failures() < static_cast<int>(bad.size()) && Clock::now() < limit) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(front_->failures(), static_cast<int>(bad.size()));
  Client after(front_->port(), Trusting());
  ASSERT_TRUE(after.ok()) << after.error();
  EXPECT_EQ(after.Get("/health").status, 200);
}

TEST(TlsServerContext, RefusesBadFiles) {
  Pki pki;
  const std::string d = pki.dir();
  EXPECT_TRUE(TlsServerContext::Load(pki.server_pem(), pki.server_key_file()).ok());
  // Readable by others: refused, whoever owns it.
  ASSERT_EQ(::chmod(pki.server_key_file().c_str(), 0644), 0);
  auto loose = TlsServerContext::Load(pki.server_pem(), pki.server_key_file());
  ASSERT_FALSE(loose.ok());
  EXPECT_NE(loose.status().message().find("chmod 600"), std::string::npos) << loose.status().message();
  ASSERT_EQ(::chmod(pki.server_key_file().c_str(), 0600), 0);
  // Group-readable is the root-owned exception only.
  ASSERT_EQ(::chmod(pki.server_key_file().c_str(), 0640), 0);
  EXPECT_EQ(TlsServerContext::Load(pki.server_pem(), pki.server_key_file()).ok(), ::geteuid() == 0);
  ASSERT_EQ(::chmod(pki.server_key_file().c_str(), 0600), 0);
  // The other CA's key is not the server certificate's.
  auto mismatch = TlsServerContext::Load(pki.server_pem(), d + "/other.key");
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("does not match"), std::string::npos) << mismatch.status().message();
  // Not PEM, or missing.
  auto not_cert = TlsServerContext::Load(pki.server_key_file(), pki.server_key_file());
  ASSERT_FALSE(not_cert.ok());
  EXPECT_NE(not_cert.status().message().find("--tls-cert"), std::string::npos) << not_cert.status().message();
  auto missing = TlsServerContext::Load(pki.server_pem(), d + "/missing.key");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.key"), std::string::npos) << missing.status().message();
  ASSERT_EQ(::chmod(pki.ca_pem().c_str(), 0600), 0);
  auto cert_as_key = TlsServerContext::Load(pki.server_pem(), pki.ca_pem());
  ASSERT_FALSE(cert_as_key.ok());
  EXPECT_NE(cert_as_key.status().message().find("private key"), std::string::npos) << cert_as_key.status().message();
}

}  // namespace
}  // namespace search
