// The real search-node binary as a subprocess: it prints its ready line, answers queries exactly
// like CpuExecutor, serves /metrics over HTTP, and exits 0 within seconds of SIGTERM.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <random>
#include <thread>

#include "core/cpus.hpp"
#include "node_fixture.hpp"
#include "../prometheus_text.hpp"

#ifndef SEARCH_NODE_BINARY
#error "SEARCH_NODE_BINARY must name the search-node executable"
#endif

namespace search {
namespace {

// Reads one line from fd within timeout_ms ("" on timeout or EOF).
std::string ReadLine(int fd, int timeout_ms) {
  std::string line;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char c;
    if (::read(fd, &c, 1) != 1) break;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return "";
}

std::string HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

// Waits for the child up to timeout_ms; its exit status, or -1 if it did not exit.
int WaitExit(pid_t pid, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

TEST(NodeProcessTest, ServesQueriesAndExitsCleanlyOnSigterm) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 200;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 1500, kVocab, 9).ok());

  int out_pipe[2];
  ASSERT_EQ(::pipe(out_pipe), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    ::execl(SEARCH_NODE_BINARY, SEARCH_NODE_BINARY, "--index", shard_path.c_str(), "--listen", "tcp://127.0.0.1:*",
            "--metrics", "127.0.0.1:0", "--threads", "2", "--cache-mb", "16", "--log-level", "warn",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  const std::string line = ReadLine(out_pipe[0], 15000);
  ASSERT_FALSE(line.empty()) << "search-node printed no ready line";
  const auto ready = nlohmann::json::parse(line);
  ASSERT_EQ(ready["event"], "ready");
  ASSERT_TRUE(ready.contains("gpu")) << line;
  std::cerr << "search-node --gpu auto runs on " << ready.value("executor", std::string("?")) << "\n";
  const std::string endpoint = ready["listen"];
  const std::string metrics = ready["metrics"];
  const int metrics_port = std::stoi(metrics.substr(metrics.rfind(':') + 1));
  ASSERT_GT(metrics_port, 0);

  {
    auto reader = ShardReader::Open(shard_path);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    zmq::context_t ctx(1);
    testing::Client client(ctx, endpoint);
    std::mt19937_64 rng(11);
    for (uint64_t id = 1; id <= 50; ++id) {
      SearchRequestMsg r = testing::RandomRequest(rng, kVocab, id);
      client.Send(EncodeSearchRequest(r));
      SearchResponseMsg resp = client.RecvResponse();
      ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
      EXPECT_EQ(resp.request_id, id);
      EXPECT_EQ(resp.hits, testing::Reference(**reader, r));
    }
    client.Send(EncodePing(PingMsg{7}));
    auto pong = client.Recv();
    ASSERT_TRUE(pong.has_value());
    EXPECT_EQ(std::get<PongMsg>(pong->body).health.state, "serving");
  }
  const std::string scrape = HttpGet(metrics_port, "/metrics");
  EXPECT_NE(scrape.find("200 OK"), std::string::npos);
  EXPECT_NE(scrape.find("search_requests_total{component=\"node\""), std::string::npos);
  EXPECT_NE(scrape.find("search_list_cache_misses_total "), std::string::npos);

  const auto sigterm_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid, 5000), 0);
  const auto exit_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - sigterm_at).count();
  EXPECT_LT(exit_ms, 5000);
  std::cerr << "search-node exited " << exit_ms << " ms after SIGTERM\n";
  ::close(out_pipe[0]);
}

// Starts search-node with SEARCH_GPU_DISABLE=1 (no GPU, whatever the machine has) and `--gpu mode`;
// the child's stdout and stderr come back through pipes.
struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;
};
Child StartWithoutGpu(const std::string& shard_path, const char* mode, std::vector<std::string> extra = {}) {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    ::setenv("SEARCH_GPU_DISABLE", "1", 1);
    std::vector<std::string> args = {SEARCH_NODE_BINARY, "--index", shard_path, "--listen", "tcp://127.0.0.1:*",
                                     "--threads", "1", "--gpu", mode, "--log-level", "info"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(SEARCH_NODE_BINARY, argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  return Child{pid, out_pipe[0], err_pipe[0]};
}

std::string ReadAll(int fd, int timeout_ms) {
  std::string all;
  for (std::string line; !(line = ReadLine(fd, timeout_ms)).empty();) all += line + "\n";
  return all;
}

// A node started (without a GPU) with `args` refuses them: exit status 2, `needle` in its error,
// no ready line.
void ExpectRefused(const std::string& shard_path, const std::vector<std::string>& args, const std::string& needle) {
  Child c = StartWithoutGpu(shard_path, "auto", args);
  ASSERT_GT(c.pid, 0);
  EXPECT_EQ(WaitExit(c.pid, 10000), 2) << args.back();
  const std::string err = ReadAll(c.err, 1000);
  EXPECT_NE(err.find(needle), std::string::npos) << err;
  EXPECT_EQ(ReadLine(c.out, 100), "");
  ::close(c.out);
  ::close(c.err);
}

// n random requests to the node at `endpoint`: each answered on the CPU, as the reference does.
void ExpectExactCpuAnswers(const std::string& shard_path, const std::string& endpoint, uint32_t vocab, uint64_t n,
                           uint64_t seed) {
  auto reader = ShardReader::Open(shard_path);
  ASSERT_TRUE(reader.ok());
  zmq::context_t ctx(1);
  testing::Client client(ctx, endpoint);
  std::mt19937_64 rng(seed);
  for (uint64_t id = 1; id <= n; ++id) {
    SearchRequestMsg r = testing::RandomRequest(rng, vocab, id);
    client.Send(EncodeSearchRequest(r));
    SearchResponseMsg resp = client.RecvResponse();
    ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
    EXPECT_EQ(resp.hits, testing::Reference(**reader, r)) << "request " << id;
    EXPECT_EQ(resp.stats.processor, Processor::kCpu);
  }
}

// A node started without a GPU (StartWithoutGpu) with `args`, and its ready line. StartReady
// fails the test when no ready line comes; the node is stopped with SIGTERM, and must exit 0,
// when the object goes out of scope.
struct ReadyNode {
  Child c;
  nlohmann::json ready;
  ReadyNode() = default;
  ReadyNode(const ReadyNode&) = delete;
  ReadyNode& operator=(const ReadyNode&) = delete;
  ~ReadyNode() {
    if (c.pid <= 0) return;
    EXPECT_EQ(::kill(c.pid, SIGTERM), 0);
    EXPECT_EQ(WaitExit(c.pid, 5000), 0);
    ::close(c.out);
    ::close(c.err);
  }
  std::string listen() const { return ready["listen"].get<std::string>(); }
};

void StartReady(const std::string& shard_path, const std::vector<std::string>& args, ReadyNode* node) {
  node->c = StartWithoutGpu(shard_path, "auto", args);
  ASSERT_GT(node->c.pid, 0);
  const std::string line = ReadLine(node->c.out, 15000);
  ASSERT_FALSE(line.empty()) << "no ready line; stderr: " << ReadAll(node->c.err, 500);
  node->ready = nlohmann::json::parse(line);
}

TEST(NodeProcessTest, GpuOnWithoutAGpuFailsWithAClearError) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 200, 50, 3).ok());
  Child c = StartWithoutGpu(shard_path, "on");
  ASSERT_GT(c.pid, 0);
  EXPECT_EQ(WaitExit(c.pid, 10000), 1);
  const std::string err = ReadAll(c.err, 1000);
  EXPECT_NE(err.find("--gpu on"), std::string::npos) << err;
  EXPECT_TRUE(err.find("no usable GPU") != std::string::npos || err.find("without GPU support") != std::string::npos)
      << err;
  EXPECT_EQ(ReadLine(c.out, 100), "");  // never ready
  ::close(c.out);
  ::close(c.err);
}

TEST(NodeProcessTest, GpuAutoWithoutAGpuServesOnTheCpu) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 50;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 300, kVocab, 4).ok());
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, {}, &node));
  const nlohmann::json& ready = node.ready;
  EXPECT_EQ(ready["executor"], "cpu");
  EXPECT_EQ(ready["gpu"], false);
  {
    auto reader = ShardReader::Open(shard_path);
    ASSERT_TRUE(reader.ok());
    zmq::context_t ctx(1);
    testing::Client client(ctx, ready["listen"].get<std::string>());
    std::mt19937_64 rng(5);
    SearchRequestMsg r = testing::RandomRequest(rng, kVocab, 1);
    client.Send(EncodeSearchRequest(r));
    SearchResponseMsg resp = client.RecvResponse();
    ASSERT_TRUE(resp.status.ok()) << resp.status.ToString();
    EXPECT_EQ(resp.hits, testing::Reference(**reader, r));
    EXPECT_EQ(resp.stats.processor, Processor::kCpu);
    client.Send(EncodePing(PingMsg{2}));
    auto pong = client.Recv();
    ASSERT_TRUE(pong.has_value());
    EXPECT_FALSE(std::get<PongMsg>(pong->body).health.gpu);
  }
}

TEST(NodeProcessTest, MissingIndexFailsWithAClearError) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl(SEARCH_NODE_BINARY, SEARCH_NODE_BINARY, "--index", "/nonexistent/shard-0", "--log-level", "off",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  EXPECT_EQ(WaitExit(pid, 10000), 1);
}

TEST(NodeProcessTest, SchedulerCpuServesExactAnswers) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 6).ok());
  const std::string trace_path = dir.path() + "/trace.csv";
  {
    ReadyNode node;
    ASSERT_NO_FATAL_FAILURE(StartReady(
        shard_path,
        {"--scheduler", "cpu", "--tuning", "trace=" + trace_path, "--tuning", "trace_every=4"},
        &node));
    const nlohmann::json& ready = node.ready;
    EXPECT_EQ(ready["scheduler"], "cpu");
    EXPECT_EQ(ready.value("gpu_dispatchers", -1), 0) << ready;  // no GPU: no dispatchers
    EXPECT_EQ(ready.value("sched_cpu_nice", -1), 0) << ready;   // cpu: the workers keep the node's priority
    // cpu: the workers share the node's CPUs unless told otherwise (DefaultSchedCpuCores).
    EXPECT_TRUE(ready.value("sched_cpu_cores", std::vector<int>{1}).empty()) << ready;
    ExpectExactCpuAnswers(shard_path, node.listen(), kVocab, 40, 8);
  }  // the node stopped (SIGTERM, exit 0): its trace is complete
  // --tuning trace: the header and one line in four of the 40 jobs, each run on the CPU.
  std::ifstream trace(trace_path);
  ASSERT_TRUE(trace.good()) << trace_path;
  std::string header, row;
  ASSERT_TRUE(std::getline(trace, header));
  EXPECT_EQ(header.rfind("t_us,id,mode,", 0), 0u) << header;
  int rows = 0;
  while (std::getline(trace, row)) {
    ++rows;
    EXPECT_NE(row.find(",cpu,"), std::string::npos) << row;
  }
  EXPECT_EQ(rows, 10);
}

// /proc/PID/task/TID/{comm,status}: each thread's name and its Cpus_allowed_list.
std::vector<std::pair<std::string, std::string>> ThreadCpuLists(pid_t pid) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& e : std::filesystem::directory_iterator(task)) {
    std::ifstream comm(e.path() / "comm"), status(e.path() / "status");
    std::string name, line, cpus;
    std::getline(comm, name);
    while (std::getline(status, line))
      if (line.rfind("Cpus_allowed_list:", 0) == 0) cpus = line.substr(line.find_first_not_of(" \t", 18));
    out.emplace_back(name, cpus);
  }
  return out;
}

// "0-2,5" -> {0, 1, 2, 5}.
std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> out;
  std::stringstream ss(list);
  for (std::string part; std::getline(ss, part, ',');) {
    const size_t dash = part.find('-');
    const int lo = std::stoi(part.substr(0, dash)), hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

// --tuning sched_cpu_cores=N: the scheduler's CPU workers run on the last N of the node's CPUs and every
// other thread on the rest; answers stay exact; the ready line names the CPUs. Asking for every
// CPU, or with --scheduler auto, is refused with a clear error.
TEST(NodeProcessTest, SchedCpuCoresDedicatesCpusToTheWorkers) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs, has " << allowed.size();
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 9).ok());
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--scheduler", "cpu", "--tuning", "sched_cpu_cores=" + std::to_string(allowed.size())},
        std::vector<std::string>{"--tuning", "sched_cpu_cores=1"}})
    ExpectRefused(shard_path, bad, "sched_cpu_cores");
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, {"--scheduler", "cpu", "--tuning", "sched_cpu_cores=1"}, &node));
  const nlohmann::json& ready = node.ready;
  EXPECT_EQ(ready.value("sched_cpu_cores", std::vector<int>{}), std::vector<int>{allowed.back()}) << ready;
  EXPECT_EQ(ready.value("sched_cpu_nice", -1), 0) << ready;
  // The fill rule comes with cores of their own only under hybrid.
  EXPECT_EQ(ready.value("sched_cheap_fill_us", -1.0), 0.0) << ready;
  EXPECT_FALSE(ready.value("sched_batch_latency", true)) << ready;
  ExpectExactCpuAnswers(shard_path, ready["listen"].get<std::string>(), kVocab, 20, 10);
  const std::vector<int> rest(allowed.begin(), allowed.end() - 1);
  int workers = 0, others = 0;
  for (const auto& [name, cpus] : ThreadCpuLists(node.c.pid)) {
    if (name == "sched-cpu") {
      ++workers;
      EXPECT_EQ(ParseCpuList(cpus), std::vector<int>{allowed.back()}) << name << ": " << cpus;
    } else {
      ++others;
      EXPECT_EQ(ParseCpuList(cpus), rest) << name << ": " << cpus;
    }
  }
  EXPECT_EQ(workers, 1);
  EXPECT_GT(others, 1);
}

// --tuning: an unknown key, a value that is not a whole number in range, text that is neither
// KEY=VALUE nor a readable file, or a bad line in a tuning file is refused (exit 2) with the reason
// and nothing served; a file of KEY=VALUE lines (comments and blank lines skipped) is applied.
TEST(NodeProcessTest, TuningIsValidated) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 11).ok());
  ExpectRefused(shard_path, {"--tuning", "no_such_key=1"}, "unknown key 'no_such_key'");
  ExpectRefused(shard_path, {"--tuning", "trace_every=abc"}, "trace_every");
  ExpectRefused(shard_path, {"--tuning", "sched_cpu_cores=-4"}, "sched_cpu_cores");
  ExpectRefused(shard_path, {"--tuning", "trace_every=0"}, "trace_every");
  ExpectRefused(shard_path, {"--tuning", "calibration_queries=12x"}, "calibration_queries");
  ExpectRefused(shard_path, {"--tuning", dir.path() + "/missing.conf"}, "neither KEY=VALUE nor a readable file");
  const std::string bad_file = dir.path() + "/bad.conf";
  std::ofstream(bad_file) << "# a comment\n\ntrace_every=4\nwhat=ever\n";
  ExpectRefused(shard_path, {"--tuning", bad_file}, "bad.conf:4");
  const std::string good_file = dir.path() + "/good.conf";
  const std::string trace_path = dir.path() + "/trace.csv";
  std::ofstream(good_file) << "# a trace of every job\n trace = " << trace_path << " \n\ntrace_every=1\n";
  {
    ReadyNode node;
    ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, {"--scheduler", "cpu", "--tuning", good_file}, &node));
    ExpectExactCpuAnswers(shard_path, node.listen(), kVocab, 10, 11);
  }  // stopped: the trace is complete
  std::ifstream trace(trace_path);
  int lines = 0;
  for (std::string line; std::getline(trace, line);) ++lines;
  EXPECT_EQ(lines, 11);  // the header and each of the 10 jobs
}

// search-node --help: at most 15 options (--help included), each with its help text, and the
// --tuning keys' table.
TEST(NodeProcessTest, HelpListsFewOptionsAndTheTuningKeys) {
  std::FILE* p = ::popen((std::string(SEARCH_NODE_BINARY) + " --help").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string help;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) help.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << help;
  std::istringstream lines(help);
  int options = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t dash = line.find_first_not_of(' ');
    if (dash == 2 && line.compare(dash, 1, "-") == 0) ++options;
  }
  EXPECT_GT(options, 5) << help;
  // 15 serving options plus the three of security (--insecure, --curve-key, --curve-clients).
  EXPECT_LE(options, 18) << help;
  for (const char* key : {"sched_cpu_cores", "calibration_queries", "trace", "trace_every"})
    EXPECT_NE(help.find(std::string("  ") + key + " ("), std::string::npos) << key << "\n" << help;
}

TEST(NodeProcessTest, GpuSchedulerWithoutAGpuFailsWithAClearError) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 200, 50, 3).ok());
  for (const char* mode : {"gpu", "hybrid", "griffin"}) {
    Child c = StartWithoutGpu(shard_path, "auto", {"--scheduler", mode});
    ASSERT_GT(c.pid, 0);
    EXPECT_EQ(WaitExit(c.pid, 10000), 1) << mode;
    const std::string err = ReadAll(c.err, 1000);
    EXPECT_NE(err.find(std::string("--scheduler ") + mode), std::string::npos) << err;
    EXPECT_NE(err.find("needs a GPU"), std::string::npos) << err;
    EXPECT_EQ(ReadLine(c.out, 100), "");
    ::close(c.out);
    ::close(c.err);
  }
}

}  // namespace
}  // namespace search
