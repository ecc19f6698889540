// Test harness for multi-process tests: child processes (fork/exec with logs in a temp dir, the
// "ready" JSON line their stdout prints, signals, exit status), a random corpus indexed with the
// indexer library, and small HTTP helpers.
// Thread-safety: single-threaded test helpers.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/status.hpp"
#include "indexer/index_builder.hpp"
#include "../temp_dir.hpp"

namespace search::testing {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

inline std::string Slurp(const std::string& path);

// One child process; killed (SIGKILL) on destruction if still running.
class Process {
 public:
  Process() = default;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() {
    if (running()) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      Wait(std::chrono::seconds(5));
    }
  }

  // Starts argv[0] with stdout/stderr to `log_prefix`.out / .err.
  bool Start(const std::vector<std::string>& argv, const std::string& log_prefix) {
    out_path_ = log_prefix + ".out";
    err_path_ = log_prefix + ".err";
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      _exit(127);
    }
    exited_ = false;
    return true;
  }

  // The first {"event":"ready",...} line on stdout, or nullopt after `limit` or if it exits.
  std::optional<json> WaitReady(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      std::ifstream in(out_path_);
      std::string line;
      while (std::getline(in, line)) {
        auto j = json::parse(line, nullptr, false);
        if (!j.is_discarded() && j.is_object() && j.value("event", "") == "ready") return j;
      }
      if (!running()) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  bool running() {
    if (pid_ <= 0 || exited_) return false;
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      status_ = st;
      return false;
    }
    return true;
  }
  void Signal(int sig) {
    if (pid_ > 0 && !exited_) ::kill(pid_, sig);
  }
  // True once every thread of the process is stopped (state T in /proc/PID/task/*/stat), false
  // after `limit` or if it is gone. SIGSTOP takes effect when the process next runs, not when
  // kill() returns: on a loaded machine a "stopped" process can still answer a request or two.
  bool WaitStopped(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end && running()) {
      bool all = true, any = false;
      std::error_code ec;
      for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid_) + "/task", ec)) {
        const std::string stat = Slurp(task.path().string() + "/stat");
        const size_t paren = stat.rfind(')');  // the name in parentheses may hold spaces
        if (paren == std::string::npos || paren + 2 >= stat.size()) continue;  // the thread just ended
        any = true;
        all = all && (stat[paren + 2] == 'T' || stat[paren + 2] == 't');
      }
      if (!ec && any && all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  // Waits for exit; returns the raw wait status or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      if (!running()) return status_;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  }
  std::string Logs() const { return "--- " + out_path_ + "\n" + Slurp(out_path_) + "\n--- " + err_path_ + "\n" + Slurp(err_path_); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = true;
  int status_ = 0;
  std::string out_path_, err_path_;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A loopback TCP port free right now (bound, read back and closed).
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

inline std::string DescribeExit(std::optional<int> st) {
  if (!st) return "still running";
  if (WIFEXITED(*st)) return "exit " + std::to_string(WEXITSTATUS(*st));
  if (WIFSIGNALED(*st)) return "signal " + std::to_string(WTERMSIG(*st));
  return "status " + std::to_string(*st);
}

// A random corpus over a Zipf-like vocabulary; words are "w<rank>" plus a few capitalised and
// UTF-8 forms so the analyzer matters.
struct Corpus {
  std::vector<std::string> vocab;
  std::string jsonl_path;
  size_t docs = 0;
};

inline Corpus WriteCorpus(const std::string& dir, size_t docs, uint32_t seed) {
  Corpus c;
  std::mt19937 rng(seed);
  for (int i = 0; i < 400; ++i) {
    std::string w = "w";  // not "w" + to_string(...): a -Wrestrict false positive in GCC 12's inlining
    w += std::to_string(i);
    c.vocab.push_back(std::move(w));
  }
  c.vocab.push_back("caf\xc3\xa9");
  c.vocab.push_back("na\xc3\xafve");
  std::vector<double> weights;
  for (size_t i = 0; i < c.vocab.size(); ++i) weights.push_back(1.0 / static_cast<double>(i + 1));
  std::discrete_distribution<size_t> word(weights.begin(), weights.end());
  c.jsonl_path = dir + "/corpus.jsonl";
  std::ofstream out(c.jsonl_path);
  for (size_t d = 0; d < docs; ++d) {
    std::string text;
    const size_t len = 3 + rng() % 60;
    for (size_t t = 0; t < len; ++t) {
      std::string w = c.vocab[word(rng)];
      if (rng() % 10 == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
      text += w;
      text += (rng() % 7 == 0) ? ", " : " ";
    }
    out << json{{"id", "doc-" + std::to_string(d)}, {"contents", text}}.dump() << "\n";
  }
  c.docs = docs;
  return c;
}

// `searchctl index` of the JSON lines at `jsonl` into `out` (2 threads, 64 MiB), with stored
// sources unless `sources` is false.
inline Status BuildTestIndex(const std::string& jsonl, const std::string& out, uint32_t shards, bool sources = true) {
  IndexBuildOptions o;
  o.input = jsonl;
  o.output = out;
  o.shards = shards;
  o.threads = 2;
  o.memory_bytes = size_t{64} << 20;
  o.sources = sources;
  auto r = BuildIndex(o);
  return r.ok() ? Status::Ok() : r.status();
}

inline Status BuildTestIndex(const Corpus& c, const std::string& out, uint32_t shards) {
  return BuildTestIndex(c.jsonl_path, out, shards);
}

// A random query text: 1..4 words, sometimes repeated, sometimes absent from the index, mixed case.
inline std::string RandomQuery(const Corpus& c, std::mt19937& rng) {
  std::string q;
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    std::string w;
    const uint32_t r = rng() % 20;
    if (r == 0) w = "absent" + std::to_string(rng() % 5);
    else if (r < 12) w = c.vocab[rng() % 30];  // frequent words: long lists, many ties
    else w = c.vocab[rng() % c.vocab.size()];
    if (rng() % 5 == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
    q += w;
    q += (rng() % 3 == 0) ? " ,  " : " ";
  }
  return q;
}

struct HttpResult {
  int status = 0;  // 0: no answer
  json body;
  std::string raw;
  double seconds = 0;
};

// GET (or POST `post_body` as JSON) http://host:port/path.
inline HttpResult Fetch(const std::string& host, int port, const std::string& path,
                        const httplib::Params& params = {}, const std::string* post_body = nullptr) {
  httplib::Client cli(host, port);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(15, 0);
  HttpResult r;
  const auto t0 = Clock::now();
  httplib::Result res = post_body ? cli.Post(path, *post_body, "application/json")
                                  : cli.Get(path, params, httplib::Headers{});
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!res) return r;
  r.status = res->status;
  r.raw = res->body;
  r.body = json::parse(res->body, nullptr, false);
  return r;
}

inline HttpResult Fetch(int port, const std::string& path, const httplib::Params& params = {},
                        const std::string* post_body = nullptr) {
  return Fetch("127.0.0.1", port, path, params, post_body);
}

}  // namespace search::testing
