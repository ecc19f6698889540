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
        {"--scheduler", "cpu", "--sched-cpu-workers", "2", "--sched-trace", trace_path, "--sched-trace-every", "4"},
        &node));
    const nlohmann::json& ready = node.ready;
    EXPECT_EQ(ready["scheduler"], "cpu");
    EXPECT_EQ(ready.value("gpu_dispatchers", -1), 0) << ready;  // no GPU: no dispatchers
    EXPECT_EQ(ready.value("sched_cpu_nice", -1), 0) << ready;   // cpu: the workers keep the node's priority
    // cpu: the workers share the node's CPUs unless told otherwise (DefaultSchedCpuCores).
    EXPECT_TRUE(ready.value("sched_cpu_cores", std::vector<int>{1}).empty()) << ready;
    ExpectExactCpuAnswers(shard_path, node.listen(), kVocab, 40, 8);
  }  // the node stopped (SIGTERM, exit 0): its trace is complete
  // --sched-trace: the header and one line in four of the 40 jobs, each run on the CPU.
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

// Each thread name of the process, with the CPUs of each thread of that name.
std::map<std::string, std::vector<std::vector<int>>> CpusByThreadName(pid_t pid) {
  std::map<std::string, std::vector<std::vector<int>>> out;
  for (const auto& [name, cpus] : ThreadCpuLists(pid)) out[name].push_back(ParseCpuList(cpus));
  return out;
}

// --sched-cpu-cores N: the scheduler's CPU workers run on the last N of the node's CPUs and every
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
       {std::vector<std::string>{"--scheduler", "cpu", "--sched-cpu-cores", std::to_string(allowed.size())},
        std::vector<std::string>{"--sched-cpu-cores", "1"}})
    ExpectRefused(shard_path, bad, "--sched-cpu-cores");
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, {"--scheduler", "cpu", "--sched-cpu-cores", "1"}, &node));
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

// --sched-spill-workers N: N more CPU workers ("sched-cpu-spill") on the node's other CPUs, beside
// the dedicated ones; answers stay exact; the ready line counts them. Without CPUs of the workers'
// own (--sched-cpu-cores) it is refused with a clear error.
TEST(NodeProcessTest, SchedSpillWorkersRunOnTheOtherCpus) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs, has " << allowed.size();
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 10).ok());
  ExpectRefused(shard_path, {"--scheduler", "cpu", "--sched-spill-workers", "1"}, "--sched-spill-workers needs");
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(
      StartReady(shard_path, {"--scheduler", "cpu", "--sched-cpu-cores", "1", "--sched-spill-workers", "2"}, &node));
  const nlohmann::json& ready = node.ready;
  EXPECT_EQ(ready.value("sched_spill_workers", 0), 2) << ready;
  ExpectExactCpuAnswers(shard_path, ready["listen"].get<std::string>(), kVocab, 20, 10);
  const std::vector<int> rest(allowed.begin(), allowed.end() - 1);
  auto threads = CpusByThreadName(node.c.pid);
  EXPECT_EQ(threads["sched-cpu"], std::vector<std::vector<int>>{{allowed.back()}});
  EXPECT_EQ(threads["sched-cpu-spill"], std::vector<std::vector<int>>(2, rest));
}

// Each thread name of the process, with the scheduling policy (sched_getscheduler) of each thread
// of that name.
std::map<std::string, std::vector<int>> PoliciesByThreadName(pid_t pid) {
  std::map<std::string, std::vector<int>> out;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& e : std::filesystem::directory_iterator(task)) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    std::getline(comm, name);
    out[name].push_back(sched_getscheduler(static_cast<pid_t>(std::stol(e.path().filename().string()))));
  }
  return out;
}

// --sched-spill-idle: the spill workers run under SCHED_IDLE, every other thread keeps
// SCHED_OTHER; answers stay exact; the ready line says so.
TEST(NodeProcessTest, SchedSpillIdleRunsTheSpillWorkersUnderSchedIdle) {
  if (AllowedCpus().size() < 2) GTEST_SKIP() << "needs 2 CPUs, has " << AllowedCpus().size();
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 10).ok());
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(StartReady(
      shard_path, {"--scheduler", "cpu", "--sched-cpu-cores", "1", "--sched-spill-workers", "2", "--sched-spill-idle", "true"},
      &node));
  EXPECT_TRUE(node.ready.value("sched_spill_idle", false)) << node.ready;
  ExpectExactCpuAnswers(shard_path, node.ready["listen"].get<std::string>(), kVocab, 20, 10);
  const auto policies = PoliciesByThreadName(node.c.pid);
  ASSERT_TRUE(policies.count("sched-cpu-spill"));
  EXPECT_EQ(policies.at("sched-cpu-spill"), std::vector<int>(2, SCHED_IDLE));
  for (const auto& [name, list] : policies) {
    if (name == "sched-cpu-spill") continue;
    for (int policy : list) EXPECT_EQ(policy, SCHED_OTHER) << name;
  }
}

// --sched-cpu-spin-us: refused (exit 2) where the CPU workers share the node's cores; with cores
// of their own the node reports it, answers exactly, and counts its workers' spins.
TEST(NodeProcessTest, SchedCpuSpinNeedsCoresOfTheirOwn) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 10).ok());
  ExpectRefused(shard_path, {"--scheduler", "cpu", "--sched-cpu-spin-us", "200"}, "--sched-cpu-spin-us needs");
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(StartReady(
      shard_path,
      {"--scheduler", "cpu", "--sched-cpu-cores", "1", "--sched-cpu-spin-us", "200", "--metrics", "127.0.0.1:0"},
      &node));
  const nlohmann::json& ready = node.ready;
  EXPECT_EQ(ready.value("sched_cpu_spin_us", 0.0), 200.0) << ready;
  ExpectExactCpuAnswers(shard_path, ready["listen"].get<std::string>(), kVocab, 20, 10);
  const std::string metrics = ready["metrics"];
  const std::string scrape = HttpGet(std::stoi(metrics.substr(metrics.rfind(':') + 1)), "/metrics");
  EXPECT_NE(scrape.find("search_sched_cpu_spins_total{outcome=\"timeout\"}"), std::string::npos) << scrape;
  EXPECT_NE(scrape.find("search_sched_cpu_spins_total{outcome=\"work\"}"), std::string::npos) << scrape;
}

// --gpu-sync takes only its four names; without a GPU the node still serves on the CPU.
TEST(NodeProcessTest, GpuSyncFlagIsCheckedAndHarmlessWithoutAGpu) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 200, 50, 3).ok());
  {
    Child c = StartWithoutGpu(shard_path, "auto", {"--gpu-sync", "sometimes"});
    ASSERT_GT(c.pid, 0);
    EXPECT_NE(WaitExit(c.pid, 10000), 0);
    const std::string err = ReadAll(c.err, 1000);
    EXPECT_NE(err.find("--gpu-sync"), std::string::npos) << err;
    EXPECT_EQ(ReadLine(c.out, 100), "");
    ::close(c.out);
    ::close(c.err);
  }
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, {"--gpu-sync", "block"}, &node));
  EXPECT_EQ(node.ready["executor"], "cpu");
}

// --sched-answer-threads N: N threads named sched-answer answer what the CPU workers finish, on
// the node's CPUs other than the workers' own; answers stay exact; the ready line says N.
TEST(NodeProcessTest, SchedAnswerThreadsRunBesideTheCpuWorkers) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs, has " << allowed.size();
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 12).ok());
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(
      StartReady(shard_path, {"--scheduler", "cpu", "--sched-cpu-cores", "1", "--sched-answer-threads", "2"}, &node));
  const nlohmann::json& ready = node.ready;
  EXPECT_EQ(ready.value("sched_answer_threads", 0), 2) << ready;
  ExpectExactCpuAnswers(shard_path, ready["listen"].get<std::string>(), kVocab, 20, 12);
  const auto threads = CpusByThreadName(node.c.pid);
  ASSERT_EQ(threads.count("sched-answer"), 1u);
  EXPECT_EQ(threads.at("sched-answer").size(), 2u);
  for (const std::vector<int>& cpus : threads.at("sched-answer"))
    EXPECT_EQ(std::count(cpus.begin(), cpus.end(), allowed.back()), 0) << "an answer thread on the workers' CPU";
}

// --io-spin-us US: the I/O thread polls without sleeping for US after each message; answers stay
// exact and the ready line says US (0, off, by default). A negative value is refused, nothing served.
TEST(NodeProcessTest, IoSpinKeepsAnswersExact) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 13).ok());
  {
    Child bad = StartWithoutGpu(shard_path, "auto", {"--scheduler", "cpu", "--io-spin-us", "-5"});
    ASSERT_GT(bad.pid, 0);
    EXPECT_NE(WaitExit(bad.pid, 10000), 0);
    const std::string err = ReadAll(bad.err, 1000);
    EXPECT_NE(err.find("--io-spin-us"), std::string::npos) << err;
    EXPECT_EQ(ReadLine(bad.out, 100), "");
    ::close(bad.out);
    ::close(bad.err);
  }
  for (const char* spin : {"0", "300"}) {
    std::vector<std::string> args = {"--scheduler", "cpu"};
    if (std::string(spin) != "0") args.insert(args.end(), {"--io-spin-us", spin});
    ReadyNode node;
    ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, args, &node));
    EXPECT_EQ(node.ready.value("io_spin_us", -1), std::stoi(spin)) << node.ready.dump();
    ExpectExactCpuAnswers(shard_path, node.listen(), kVocab, 30, 14);
  }
}

// --huge-pages (norms and long cached lists on transparent huge pages, core/large_buffer.hpp): the
// ready line says so, off by default, and the answers stay exact either way.
TEST(NodeProcessTest, HugePagesKeepAnswersExact) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 17).ok());
  for (const bool huge : {false, true}) {
    std::vector<std::string> args = {"--scheduler", "cpu"};
    if (huge) args.push_back("--huge-pages");
    ReadyNode node;
    ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, args, &node));
    EXPECT_EQ(node.ready.value("huge_pages", !huge), huge) << node.ready.dump();
    ExpectExactCpuAnswers(shard_path, node.listen(), kVocab, 30, 18);
  }
}

// --dense-bitmaps D: the dense lists' bitmaps (the and-path's membership tests) leave every
// answer exact; the ready line says D (0 by default), and /metrics the bitmaps' bytes in the list
// cache. A 400-document shard over 60 terms has lists holding one document in 4 or more of their
// range, so D = 4 gives some of them bitmaps.
TEST(NodeProcessTest, DenseBitmapsKeepAnswersExact) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 19).ok());
  for (const uint32_t d : {0u, 4u, 64u}) {
    std::vector<std::string> args = {"--scheduler", "cpu", "--metrics", "127.0.0.1:0"};
    if (d != 0) args.insert(args.end(), {"--dense-bitmaps", std::to_string(d)});
    ReadyNode node;
    ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, args, &node));
    EXPECT_EQ(node.ready.value("dense_bitmaps", 12345u), d) << node.ready.dump();
    ExpectExactCpuAnswers(shard_path, node.listen(), kVocab, 30, 20);
    const std::string metrics = node.ready["metrics"];
    const std::string scrape = HttpGet(std::stoi(metrics.substr(metrics.rfind(':') + 1)), "/metrics");
    const double dense_bytes = testing::SeriesValue(scrape, "search_list_cache_dense_bitmap_bytes");
    ASSERT_GE(dense_bytes, 0.0) << scrape;  // -1: the series is missing
    if (d == 0) EXPECT_EQ(dense_bytes, 0.0);
    else EXPECT_GT(dense_bytes, 0.0);
  }
}

// --sched-cheap-fill-busy and --sched-cheap-fill-measured: only with the fill rule (hybrid, by
// default where its CPU workers have cores of their own); under another scheduler each is refused
// (exit 2) with a clear error, and both are off by default (the ready line says so). Likewise
// --sched-cheap-by-ratio outside hybrid.
TEST(NodeProcessTest, SchedCheapFillBusyNeedsTheFillRule) {
  testing::TempDir dir;
  const std::string shard_path = dir.path() + "/shard-0";
  constexpr uint32_t kVocab = 60;
  ASSERT_TRUE(testing::WriteRandomShard(shard_path, 400, kVocab, 11).ok());
  for (const auto& [flag, value] : {std::pair<std::string, std::string>{"--sched-cheap-fill-busy", "0.9"},
                                    std::pair<std::string, std::string>{"--sched-cheap-fill-measured", "true"}}) {
    ExpectRefused(shard_path, {"--scheduler", "cpu", flag, value}, flag + " needs the fill rule");
    ExpectRefused(shard_path, {"--scheduler", "cpu", "--sched-cheap-fill-us", "200", flag, value},
                  flag + " needs the fill rule");
  }
  // --sched-cheap-by-ratio: only hybrid has cheap jobs.
  ExpectRefused(shard_path, {"--scheduler", "cpu", "--sched-cheap-by-ratio", "true"},
                "--sched-cheap-by-ratio needs --scheduler hybrid");
  ReadyNode node;
  ASSERT_NO_FATAL_FAILURE(StartReady(shard_path, {"--scheduler", "cpu"}, &node));
  const nlohmann::json& ready = node.ready;
  EXPECT_EQ(ready.value("sched_cheap_fill_busy", -1.0), 0.0) << ready;
  EXPECT_FALSE(ready.value("sched_cheap_fill_measured", true)) << ready;
  EXPECT_FALSE(ready.value("sched_cheap_by_ratio", true)) << ready;
  ExpectExactCpuAnswers(shard_path, ready["listen"].get<std::string>(), kVocab, 10, 11);
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
