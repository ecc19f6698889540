// The integrator's HTTP front against clients that mean harm, with real processes on loopback: a
// search-node over a random 1-shard index and search-integrator(s) in front of it, answers compared
// with LocalIndex (the single-process twin) throughout.
//   ApiKeysWithCurl      --api-keys from `searchctl apikey create`: curl without a key 401 (with
//                        WWW-Authenticate: ApiKey), malformed 401, wrong key 403, right key 200 with
//                        the same hits as an integrator without keys; /health open with --open-health;
//                        search_http_auth_failures_total{status} counts; the key is in no log.
//   StatusPageOpenWithApiKeys  --api-keys without --open-health: GET and HEAD / (the status page, no
//                        data) answer 200 without a key, the same page as without keys, uncounted;
//                        everything the page fetches (/search, /stats, /health), the other routes and
//                        other methods on / answer 401 without a key and 403 with a wrong one.
//   BindingRule          --http beyond loopback without TLS and API keys exits 2 before binding, with
//                        either alone too; --insecure, or TLS and keys, serve.
//   SlowlorisIsTimedOut  many connections each sending a header byte a second are closed by the
//                        header timeout (counted, reason header_timeout) while ordinary clients get
//                        exact answers within their deadline.
//   ConnectionLimit      beyond --max-connections new connections are closed at once (counted, reason
//                        max_connections); once the slow ones are gone, clients are served again.
//   OversizedAndMalformedUnderLoad  long URIs, huge headers and bodies, garbage, bad versions and
//                        codings each get their 4xx/5xx and a closed connection, from several threads
//                        at once (until at least 200 ordinary searches ran alongside), while
//                        ordinary clients get exact answers; no crash.
// No test bounds how fast anything happens: waits are generous limits on liveness only.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "../http_wire.hpp"
#include "cluster_expect.hpp"
#include "cluster_harness.hpp"
#include "core/url_encode.hpp"

namespace search::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kDocs = 2000;
ReplicatedIndex* g_index = nullptr;

int PortOf(const std::string& host_port) {
  return std::stoi(host_port.substr(host_port.rfind(':') + 1));
}

// Runs a shell command; its stdout.
std::string Shell(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (rc != nullptr) *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

struct CurlResult {
  int status = 0;
  std::string headers, body;
};

CurlResult Curl(int port, const std::string& path, const std::string& extra, const std::string& dir) {
  const std::string h = dir + "/curl.h", b = dir + "/curl.b";
  const std::string code = Shell("curl -s -m 30 -o " + b + " -D " + h + " -w '%{http_code}' " + extra +
                                 " 'http://127.0.0.1:" + std::to_string(port) + path + "'");
  CurlResult r;
  r.status = code.empty() ? 0 : std::atoi(code.c_str());
  r.headers = Slurp(h);
  r.body = Slurp(b);
  return r;
}


bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until the server closes (EOF or reset) or `limit` passes; *closed says which.
std::string ReadUntilClosed(int fd, std::chrono::milliseconds limit, bool* closed) {
  std::string got;
  *closed = false;
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[8192];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    *closed = true;
    return got;
  }
  return got;
}

// True when the server has closed `fd` (EOF or reset seen without blocking).
bool ServerClosed(int fd) {
  char buf[256];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return true;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
}

// A metric's value in Prometheus text (the first line starting with `series`), or -1.
double Metric(int metrics_port, const std::string& series) {
  const HttpResult m = Fetch(metrics_port, "/metrics");
  size_t at = m.raw.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::atof(m.raw.c_str() + at + series.size() + 2);
}

class HostileHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_index = new ReplicatedIndex;
    g_index->Build(kDocs, 4949, 1, 1);
  }
  static void TearDownTestSuite() {
    delete g_index;
    g_index = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(g_index->local, nullptr);
    run_ = std::make_unique<TempDir>();
    nodes_.push_back(std::make_unique<Process>());
    ASSERT_TRUE(nodes_[0]->Start({SEARCH_NODE_BIN, "--index", g_index->dirs[0] + "/shard-0", "--listen",
                                  "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:0", "--threads", "2"},
                                 run_->path() + "/node"));
    auto ready = nodes_[0]->WaitReady();
    ASSERT_TRUE(ready.has_value()) << nodes_[0]->Logs();
    endpoint_ = ready->at("listen").get<std::string>();
  }

  void TearDown() override {
    std::vector<std::unique_ptr<Process>> none;
    for (auto& in : integrators_) StopGracefully(in.get(), none);
    StopGracefully(nullptr, nodes_);
  }

  struct Front {
    Process* process = nullptr;
    int http = 0, metrics = 0;
  };

  // Starts an integrator over the node with `extra` flags and waits until it is ready and green.
  Front StartIntegrator(const std::vector<std::string>& extra, const std::string& auth_header = "") {
    integrators_.push_back(std::make_unique<Process>());
    Process* p = integrators_.back().get();
    std::vector<std::string> args = {
        SEARCH_INTEGRATOR_BIN, "--shards", endpoint_,    "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
        "--ping-ms",           "200",      "--cache-mb", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    Front f;
    if (!p->Start(args, run_->path() + "/integrator" + std::to_string(integrators_.size()))) return f;
    auto ready = p->WaitReady();
    EXPECT_TRUE(ready.has_value()) << p->Logs();
    if (!ready) return f;
    f.process = p;
    f.http = PortOf(ready->at("http").get<std::string>());
    f.metrics = PortOf(ready->at("metrics").get<std::string>());
    const auto end = Clock::now() + 30s;
    while (Clock::now() < end) {
      const CurlResult h = Curl(f.http, "/health", auth_header, run_->path());
      if (h.status == 200 && h.body.find("\"green\"") != std::string::npos) return f;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "integrator never green\n" << p->Logs();
    return f;
  }

  // Ordinary clients: searches in a loop on fresh connections until `stop`, each checked exact
  // (200, not timed out, the hits of LocalIndex). Counts answers and failures.
  void OrdinaryClients(int port, std::atomic<bool>* stop, std::atomic<int>* ok, std::atomic<int>* bad,
                       std::string* first_failure, std::mutex* mu) {
    std::mt19937 rng(7);
    while (!stop->load()) {
      const std::string q = RandomQuery(g_index->corpus, rng);
      const HttpResult r = Fetch(port, "/search", {{"q", q}, {"k", "10"}, {"mode", "or"}, {"timeout_ms", "5000"}});
      std::string why;
      if (r.status != 200)
        why = "status " + std::to_string(r.status) + " " + r.raw.substr(0, 200);
      else if (r.body.value("timed_out", true))
        why = "timed out";
      else
        why = HitsDiffer(r.body["hits"]["hits"], ExpectedHits(*g_index->local, q, QueryMode::kOr, 10));
      if (why.empty()) {
        ++*ok;
      } else {
        ++*bad;
        std::lock_guard lock(*mu);
        if (first_failure->empty()) *first_failure = q + ": " + why;
      }
    }
  }

  std::unique_ptr<TempDir> run_;
  std::vector<std::unique_ptr<Process>> nodes_;
  std::vector<std::unique_ptr<Process>> integrators_;
  std::string endpoint_;
};

json HitsOf(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  return j.is_object() && j.contains("hits") ? j["hits"] : json();
}

TEST_F(HostileHttpTest, ApiKeysWithCurl) {
  const std::string keys = run_->path() + "/api-keys";
  int rc = -1;
  const std::string created =
      Shell(std::string(SEARCHCTL_BIN) + " apikey create --file " + keys + " --name test 2>/dev/null", &rc);
  ASSERT_EQ(rc, 0) << created;
  const std::string idkey = created.substr(0, created.find('\n'));
  ASSERT_NE(idkey.find(':'), std::string::npos) << created;
  const std::string key = idkey.substr(idkey.find(':') + 1);
  struct stat st {};
  ASSERT_EQ(::stat(keys.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Slurp(keys).find(key), std::string::npos) << "the key file holds the key";
  const std::string b64 = Shell("printf %s '" + idkey + "' | base64 -w0");
  const std::string right = "-H 'Authorization: ApiKey " + b64 + "'";
  const std::string wrong_key =
      "-H 'Authorization: ApiKey " +
      Shell("printf %s '" + idkey.substr(0, idkey.size() - 1) + (idkey.back() == 'A' ? "B" : "A") + "' | base64 -w0") +
      "'";
  const std::string unknown_id =
      "-H 'Authorization: ApiKey " + Shell("printf %s '0000000000000000:" + key + "' | base64 -w0") + "'";

  const Front secured = StartIntegrator({"--api-keys", keys, "--open-health"});
  ASSERT_NE(secured.process, nullptr);
  const Front plain = StartIntegrator({});
  ASSERT_NE(plain.process, nullptr);

  std::mt19937 rng(3);
  const std::string path = "/search?q=" + UrlEncode(RandomQuery(g_index->corpus, rng)) + "&k=10&mode=or";
  const CurlResult none = Curl(secured.http, path, "", run_->path());
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_NE(none.headers.find("WWW-Authenticate: ApiKey"), std::string::npos) << none.headers;
  EXPECT_NE(none.body.find("security_exception"), std::string::npos) << none.body;
  for (const std::string& malformed :
       {std::string("-H 'Authorization: Basic " + b64 + "'"), std::string("-H 'Authorization: ApiKey not-base64!'"),
        std::string("-H 'Authorization: ApiKey " + Shell("printf %s nocolon | base64 -w0") + "'")}) {
    EXPECT_EQ(Curl(secured.http, path, malformed, run_->path()).status, 401) << malformed;
  }
  const CurlResult wrong = Curl(secured.http, path, wrong_key, run_->path());
  EXPECT_EQ(wrong.status, 403) << wrong.body;
  EXPECT_EQ(Curl(secured.http, path, unknown_id, run_->path()).status, 403);
  EXPECT_EQ(Curl(secured.http, "/stats", "", run_->path()).status, 401);
  EXPECT_EQ(Curl(secured.http, "/no-such-route", "", run_->path()).status, 401);
  EXPECT_EQ(Curl(secured.http, "/health", "", run_->path()).status, 200) << "--open-health";

  const CurlResult ok = Curl(secured.http, path, right, run_->path());
  ASSERT_EQ(ok.status, 200) << ok.body;
  const CurlResult open = Curl(plain.http, path, "", run_->path());
  ASSERT_EQ(open.status, 200) << open.body;
  EXPECT_EQ(HitsOf(ok.body), HitsOf(open.body));
  EXPECT_FALSE(HitsOf(ok.body).is_null());
  EXPECT_EQ(Curl(secured.http, "/stats", right, run_->path()).status, 200);

  EXPECT_EQ(Metric(secured.metrics, "search_http_auth_failures_total{component=\"integrator\",status=\"401\"}"), 6);
  EXPECT_EQ(Metric(secured.metrics, "search_http_auth_failures_total{component=\"integrator\",status=\"403\"}"), 2);
  // The key appears in no log.
  EXPECT_EQ(secured.process->Logs().find(key), std::string::npos);

  // A key file that does not parse: exit 2 with the file and line named.
  const std::string bad = run_->path() + "/bad-keys";
  std::ofstream(bad) << idkey << "\n";
  Process refused;
  ASSERT_TRUE(refused.Start(
      {SEARCH_INTEGRATOR_BIN, "--shards", endpoint_, "--http", "127.0.0.1:0", "--metrics", "", "--api-keys", bad},
      run_->path() + "/refused"));
  const auto exit = refused.Wait(30s);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 2) << DescribeExit(exit);
  EXPECT_NE(refused.Logs().find(bad + ":1:"), std::string::npos) << refused.Logs();
  EXPECT_EQ(refused.Logs().find(key), std::string::npos) << "a pasted key is not echoed";
}

TEST_F(HostileHttpTest, StatusPageOpenWithApiKeys) {
  const std::string keys = run_->path() + "/api-keys";
  int rc = -1;
  const std::string created = Shell(std::string(SEARCHCTL_BIN) + " apikey create --file " + keys + " 2>/dev/null", &rc);
  ASSERT_EQ(rc, 0) << created;
  const std::string idkey = created.substr(0, created.find('\n'));
  ASSERT_NE(idkey.find(':'), std::string::npos) << created;
  const std::string right = "-H 'Authorization: ApiKey " + Shell("printf %s '" + idkey + "' | base64 -w0") + "'";
  const std::string wrong =
      "-H 'Authorization: ApiKey " +
      Shell("printf %s '" + idkey.substr(0, idkey.size() - 1) + (idkey.back() == 'A' ? "B" : "A") + "' | base64 -w0") +
      "'";
  const Front secured = StartIntegrator({"--api-keys", keys}, right);  // /health is not open
  ASSERT_NE(secured.process, nullptr);
  const Front plain = StartIntegrator({});
  ASSERT_NE(plain.process, nullptr);
  const std::string& dir = run_->path();
  const std::string failures401 = "search_http_auth_failures_total{component=\"integrator\",status=\"401\"}";
  const std::string failures403 = "search_http_auth_failures_total{component=\"integrator\",status=\"403\"}";
  const double before401 = std::max(0.0, Metric(secured.metrics, failures401));
  const double before403 = std::max(0.0, Metric(secured.metrics, failures403));

  const CurlResult page = Curl(secured.http, "/", "", dir);
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_NE(page.headers.find("text/html"), std::string::npos) << page.headers;
  EXPECT_EQ(page.body, Curl(plain.http, "/", "", dir).body) << "the page is the same with and without keys";
  EXPECT_NE(page.body.find("id=\"key-form\""), std::string::npos) << "the page can ask for a key";
  EXPECT_EQ(Curl(secured.http, "/?q=gold&mode=or&k=3", "", dir).status, 200) << "a linked search opens";
  EXPECT_EQ(Curl(secured.http, "/", "-I", dir).status, 200) << "HEAD /";
  EXPECT_EQ(Metric(secured.metrics, failures401), before401) << "GET / is no auth failure";

  std::mt19937 rng(5);
  const std::string q = UrlEncode(RandomQuery(g_index->corpus, rng));
  const std::vector<std::string> guarded = {"/search?q=" + q + "&k=5&mode=or&highlight=true&track_total_hits=true",
                                            "/_search?q=" + q,
                                            "/count?q=" + q,
                                            "/_count?q=" + q,
                                            "/stats",
                                            "/health",
                                            "/index.html",
                                            "//",
                                            "/no-such-route"};
  for (const std::string& path : guarded) {
    const CurlResult none = Curl(secured.http, path, "", dir);
    EXPECT_EQ(none.status, 401) << path << " " << none.body;
    EXPECT_NE(none.headers.find("WWW-Authenticate: ApiKey"), std::string::npos) << path;
    EXPECT_EQ(Curl(secured.http, path, wrong, dir).status, 403) << path;
  }
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS"}) {
    const std::string with_body = std::string("-X ") + method + " -H 'Content-Type: application/json' -d '{}'";
    EXPECT_EQ(Curl(secured.http, "/", with_body, dir).status, 401) << method << " /";
  }
  EXPECT_EQ(Metric(secured.metrics, failures401), before401 + guarded.size() + 4);
  EXPECT_EQ(Metric(secured.metrics, failures403), before403 + guarded.size());

  // With the key, what the page fetches is served.
  for (const std::string& path : {guarded[0], std::string("/stats"), std::string("/health")}) {
    const CurlResult ok = Curl(secured.http, path, right, dir);
    EXPECT_EQ(ok.status, 200) << path << " " << ok.body;
  }
  EXPECT_EQ(Curl(secured.http, "/", "-X POST -H 'Content-Type: application/json' -d '{}' " + right, dir).status, 404);
}

TEST_F(HostileHttpTest, BindingRule) {
  const std::string keys = run_->path() + "/api-keys";
  int rc = -1;
  Shell(std::string(SEARCHCTL_BIN) + " apikey create --file " + keys + " 2>/dev/null", &rc);
  ASSERT_EQ(rc, 0);
  const std::string cert = run_->path() + "/cert.pem", key = run_->path() + "/key.pem";
  Shell("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost -keyout " +
            key + " -out " + cert + " 2>/dev/null && chmod 600 " + key,
        &rc);
  ASSERT_EQ(rc, 0) << "openssl req failed";
  int started = 0;  // each process its own log files: WaitReady must not read an earlier one's
  const auto exits2 = [&](const std::vector<std::string>& extra, const std::string& says) {
    Process p;
    std::vector<std::string> args = {SEARCH_INTEGRATOR_BIN, "--shards",  endpoint_, "--http",
                                     "0.0.0.0:0",           "--metrics", ""};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(p.Start(args, run_->path() + "/bind-" + std::to_string(++started)));
    const auto st = p.Wait(30s);
    ASSERT_TRUE(st.has_value()) << p.Logs();
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 2) << DescribeExit(st) << p.Logs();
    EXPECT_NE(p.Logs().find("beyond loopback without " + says), std::string::npos) << p.Logs();
    EXPECT_EQ(p.Logs().find("\"ready\""), std::string::npos);
  };
  exits2({}, "TLS and API keys");
  exits2({"--api-keys", keys}, "TLS");
  exits2({"--tls-cert", cert, "--tls-key", key}, "API keys");
  const auto serves = [&](const std::vector<std::string>& extra, const std::string& http = "0.0.0.0:0") {
    Process p;
    std::vector<std::string> args = {SEARCH_INTEGRATOR_BIN, "--shards", endpoint_, "--http", http, "--metrics", ""};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(p.Start(args, run_->path() + "/bind-ok-" + std::to_string(++started)));
    EXPECT_TRUE(p.WaitReady().has_value()) << p.Logs();
    p.Signal(SIGTERM);
    const auto st = p.Wait(30s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << DescribeExit(st) << p.Logs();
  };
  serves({"--insecure"});
  serves({"--tls-cert", cert, "--tls-key", key, "--api-keys", keys});
  // Loopback needs nothing: every other test here, and "localhost".
  serves({}, "localhost:0");
}

TEST_F(HostileHttpTest, SlowlorisIsTimedOut) {
  const Front f = StartIntegrator({});
  ASSERT_NE(f.process, nullptr);
  constexpr int kSlow = 200;
  const std::string request = "GET /search?q=" + std::string(64, 'a') + " HTTP/1.1\r\nHost: slow\r\nX-Pad: ";
  std::vector<int> slow;
  std::vector<Clock::time_point> opened;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = ConnectLoopback(f.http);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, request.substr(0, 1)));
    slow.push_back(fd);
    opened.push_back(Clock::now());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, bad{0};
  std::string first_failure;
  std::mutex mu;
  std::thread ordinary([&] { OrdinaryClients(f.http, &stop, &ok, &bad, &first_failure, &mu); });

  // A byte a second on each slow connection (the padding header never ends) until the server closes it.
  std::vector<bool> closed(kSlow, false);
  std::vector<double> lived(kSlow, 0);
  int open = kSlow;
  const auto limit = Clock::now() + 120s;
  for (size_t byte = 1; open > 0 && Clock::now() < limit; ++byte) {
    for (int i = 0; i < kSlow; ++i) {
      if (closed[i]) continue;
      const char c = byte < request.size() ? request[byte] : 'x';
      if (ServerClosed(slow[i]) || ::send(slow[i], &c, 1, MSG_NOSIGNAL) != 1) {
        closed[i] = true;
        lived[i] = std::chrono::duration<double>(Clock::now() - opened[i]).count();
        --open;
      }
    }
    std::this_thread::sleep_for(1s);
  }
  stop = true;
  ordinary.join();
  for (int fd : slow) ::close(fd);
  EXPECT_EQ(open, 0) << "slow connections still open after 120 s";
  std::cout << "slowloris: " << kSlow << " slow connections closed after "
            << *std::min_element(lived.begin(), lived.end()) << " to " << *std::max_element(lived.begin(), lived.end())
            << " s; " << ok.load() << " ordinary searches answered exactly meanwhile\n";
  for (int i = 0; i < kSlow; ++i) EXPECT_GE(lived[i], 9.0) << "closed before the header timeout: " << i;
  EXPECT_GE(
      Metric(f.metrics, "search_http_connections_refused_total{component=\"integrator\",reason=\"header_timeout\"}"),
      kSlow);
  EXPECT_EQ(
      Metric(f.metrics, "search_http_connections_refused_total{component=\"integrator\",reason=\"max_connections\"}"),
      0);
  EXPECT_EQ(bad.load(), 0) << first_failure;
  EXPECT_GT(ok.load(), 0);
  ASSERT_TRUE(f.process->running()) << f.process->Logs();
}

TEST_F(HostileHttpTest, ConnectionLimit) {
  constexpr int kLimit = 40, kExtra = 30;
  // Two loops: one accepts, the other may adopt; the limit holds across them.
  const Front f = StartIntegrator({"--max-connections", std::to_string(kLimit), "--http-loops", "2"});
  ASSERT_NE(f.process, nullptr);
  // Let the health checks' connections close (kept-alive ones idle out after 2 s).
  std::this_thread::sleep_for(3s);
  std::vector<int> fds;
  for (int i = 0; i < kLimit + kExtra; ++i) {
    const int fd = ConnectLoopback(f.http);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, "G"));  // a request begun: held until the header timeout
    fds.push_back(fd);
  }
  // Those beyond the limit are closed at once; the others stay until the header timeout.
  int refused = 0;
  const auto end = Clock::now() + 60s;
  while (refused < kExtra && Clock::now() < end) {
    refused = 0;
    for (int fd : fds) refused += ServerClosed(fd) ? 1 : 0;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(refused, kExtra);
  EXPECT_EQ(
      Metric(f.metrics, "search_http_connections_refused_total{component=\"integrator\",reason=\"max_connections\"}"),
      kExtra);
  // Once the header timeout has closed the held ones, an ordinary client is served exactly again.
  const auto served_by = Clock::now() + 90s;
  HttpResult r;
  std::mt19937 rng(5);
  const std::string q = RandomQuery(g_index->corpus, rng);
  while (Clock::now() < served_by) {
    r = Fetch(f.http, "/search", {{"q", q}, {"k", "10"}, {"mode", "or"}, {"timeout_ms", "5000"}});
    if (r.status == 200) break;
    std::this_thread::sleep_for(500ms);
  }
  ASSERT_EQ(r.status, 200) << r.raw;
  ExpectSameHits(r.body["hits"]["hits"], ExpectedHits(*g_index->local, q, QueryMode::kOr, 10), q);
  for (int fd : fds) ::close(fd);
}

TEST_F(HostileHttpTest, OversizedAndMalformedUnderLoad) {
  const Front f = StartIntegrator({});
  ASSERT_NE(f.process, nullptr);
  struct Case {
    std::string name, request;
    int status;
  };
  std::mt19937 rng(11);
  std::string junk(4096, '\0');
  for (char& c : junk) c = static_cast<char>(rng() % 256);
  junk[0] = '\x16';  // not a token character: the request line is malformed at once
  const std::vector<Case> cases = {
      {"uri over 8 KiB", "GET /search?q=" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
      {"headers over 16 KiB", "GET /health HTTP/1.1\r\nX-Big: " + std::string(20000, 'b') + "\r\n\r\n", 431},
      {"body over 1 MiB", "POST /search HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n{\"q\":", 413},
      {"chunked body over 1 MiB",
       "POST /search HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n" + std::string(0x10000, 'c'), 413},
      {"space before colon", "GET /health HTTP/1.1\r\nHost : x\r\n\r\n", 400},
      {"garbage line", "HELLO THERE\r\n\r\n", 400},
      {"binary junk", junk, 400},
      {"nul in a header", std::string("GET /health HTTP/1.1\r\nX: a\0b\r\n\r\n", 33), 400},
      {"both lengths", "POST /search HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       400},
      {"HTTP/2.0", "GET /health HTTP/2.0\r\n\r\n", 505},
      {"gzip coding", "POST /search HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"bad json body", "POST /search HTTP/1.1\r\nConnection: close\r\nContent-Length: 5\r\n\r\n{\"q\":", 400},
  };
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, bad{0};
  std::string first_failure;
  std::mutex mu;
  std::thread ordinary([&] { OrdinaryClients(f.http, &stop, &ok, &bad, &first_failure, &mu); });
  std::atomic<int> answered{0};
  std::vector<std::string> wrong;
  std::vector<std::thread> hostile;
  for (int t = 0; t < 4; ++t) {
    hostile.emplace_back([&, t] {
      // Rounds until at least 200 ordinary searches were answered alongside (and at least 10).
      for (int round = 0; round < 10 || (ok.load() + bad.load() < 200 && round < 1000); ++round) {
        for (const Case& c : cases) {
          const int fd = ConnectLoopback(f.http);
          std::string why;
          if (fd < 0) {
            why = "connect failed";
          } else {
            SendAll(fd, c.request);  // the server may answer (and stop reading) before all is sent
            bool closed = false;
            const std::string got = ReadUntilClosed(fd, 60s, &closed);
            ::close(fd);
            const std::string want = " " + std::to_string(c.status) + " ";
            if (got.rfind("HTTP/1.1" + want, 0) != 0)
              why = "answer " + got.substr(0, 80);
            else if (!closed)
              why = "connection not closed";
          }
          if (why.empty()) {
            ++answered;
          } else {
            std::lock_guard lock(mu);
            wrong.push_back("thread " + std::to_string(t) + " " + c.name + ": " + why);
          }
        }
      }
    });
  }
  for (auto& h : hostile) h.join();
  stop = true;
  ordinary.join();
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " wrong, first: " << wrong.front();
  std::cout << "malformed: " << answered.load() << " hostile requests answered and closed; " << ok.load()
            << " ordinary searches answered exactly meanwhile\n";
  EXPECT_GE(answered.load(), 4 * 10 * static_cast<int>(cases.size()));
  EXPECT_EQ(bad.load(), 0) << first_failure;
  EXPECT_GT(ok.load(), 0);
  ASSERT_TRUE(f.process->running()) << f.process->Logs();
}

}  // namespace
}  // namespace search::testing
