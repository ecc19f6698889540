// Helpers for multi-process tests of a secure cluster: the keys and certificates made at test
// time by docker/secrets-init.sh (the compose "secrets" job: openssl for the CA and the
// integrator's certificate, searchctl keygen for CURVE key pairs, searchctl apikey create for an
// API key), the flags that hand them to search-node and search-integrator, and an HTTPS client
// (cpp-httplib's SSLClient, which Debian builds with OpenSSL) that verifies the integrator
// against the test CA and sends `Authorization: ApiKey base64(id:key)`.
// Thread-safety: Secrets is written once, then read from any thread; FetchTls is thread-safe (a
// client per call).
#pragma once

#include <stdio.h>

#include <string>
#include <vector>

#include "cluster_harness.hpp"

namespace search::testing {

// RFC 4648 base64 with padding.
inline std::string Base64(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// What secrets-init.sh made in `dir`: node i's files are under dir/node-i.
struct Secrets {
  std::string dir;
  std::string api_key;  // id:key, as `searchctl apikey create` printed it
  std::string output;   // the script's whole output (for failure messages)

  std::string ca() const { return dir + "/ca.pem"; }
  std::string authorization() const { return "ApiKey " + Base64(api_key); }
  // search-node's security flags for node `i`.
  std::vector<std::string> NodeFlags(size_t i) const {
    const std::string n = dir + "/node-" + std::to_string(i);
    return {"--curve-key", n + "/curve.key", "--curve-clients", n + "/curve-clients"};
  }
  std::string NodePublicKey(size_t i) const {
    std::string k = Slurp(dir + "/node-" + std::to_string(i) + "/curve.pub");
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r')) k.pop_back();
    return k;
  }
  // Writes `servers` (ENDPOINT PUBLIC_KEY, node i at endpoints[i]) and returns search-integrator's
  // security flags: CURVE to the nodes, HTTPS, API keys.
  std::vector<std::string> IntegratorFlags(const std::vector<std::string>& endpoints, const std::string& servers) const {
    std::ofstream out(servers);
    for (size_t i = 0; i < endpoints.size(); ++i) out << endpoints[i] << " " << NodePublicKey(i) << "\n";
    const std::string in = dir + "/integrator";
    return {"--curve-key", in + "/curve.key", "--curve-servers", servers,        "--tls-cert",
            in + "/tls.crt", "--tls-key", in + "/tls.key", "--api-keys", in + "/api-keys"};
  }
};

// Runs docker/secrets-init.sh (from `source_dir`) into `dir` for `nodes` nodes with `searchctl`.
// Empty api_key on failure (output says why).
inline Secrets MakeSecrets(const std::string& source_dir, const std::string& searchctl, const std::string& dir,
                           size_t nodes) {
  Secrets s;
  s.dir = dir;
  std::string names;
  for (size_t i = 0; i < nodes; ++i) names += (i ? " node-" : "node-") + std::to_string(i);
  const std::string cmd = "SECRETS_DIR='" + dir + "' SEARCHCTL='" + searchctl + "' SECRETS_NODES='" + names +
                          "' SECRETS_HOSTS=localhost sh '" + source_dir + "/docker/secrets-init.sh' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) s.output.append(buf, n);
  const int st = ::pclose(p);
  if (st != 0) {
    s.output += "\n(exit status " + std::to_string(st) + ")";
    return s;
  }
  std::istringstream lines(s.output);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind("api-key ", 0) == 0) s.api_key = line.substr(8);
  return s;
}

// GET (or POST `post_body` as JSON) https://127.0.0.1:port/path, verifying the server against
// `ca` (empty: no verification) and sending `authorization` (empty: no header).
inline HttpResult FetchTls(int port, const std::string& ca, const std::string& authorization, const std::string& path,
                           const httplib::Params& params = {}, const std::string* post_body = nullptr) {
  httplib::SSLClient cli("127.0.0.1", port);
  if (!ca.empty()) {
    cli.set_ca_cert_path(ca.c_str());
    cli.enable_server_certificate_verification(true);
  } else {
    cli.enable_server_certificate_verification(false);
  }
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(15, 0);
  httplib::Headers headers;
  if (!authorization.empty()) headers.emplace("Authorization", authorization);
  HttpResult r;
  const auto t0 = Clock::now();
  httplib::Result res = post_body ? cli.Post(path, headers, *post_body, "application/json")
                                  : cli.Get(path, params, headers);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!res) return r;
  r.status = res->status;
  r.raw = res->body;
  r.body = json::parse(res->body, nullptr, false);
  return r;
}

}  // namespace search::testing
