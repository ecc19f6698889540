// transport_floor: what one request/reply round trip between two processes costs on this host at
// low load, with no search code in it: the floor under issue 52's goal 4 (served p50 within 100 us
// of in-process). A forked echo server and this process's client exchange one message at a time
// (--bytes long), sent at Poisson arrivals of each --rates rate for --seconds, over
//   zmq-tcp  ZeroMQ DEALER -> ROUTER over TCP loopback (the integrator -> node hop: each message
//            crosses both processes' ZeroMQ I/O threads, four thread hand-offs a round trip);
//   zmq-ipc  the same over a Unix socket;
//   tcp      a plain TCP socket, blocking reads (one wake-up per process a round trip).
// Prints one line per mode and rate: round trips, p50, p90, p99 and mean in us.
// --idle-spinner: a thread at SCHED_IDLE priority spins through the whole run, as the CPU homes'
// poller does in the served path (core/cpu_home.hpp); with `taskset -c N` (both processes on one
// CPU, as the homes put a chain) it keeps that CPU from halting between round trips, so what is
// left is the hand-offs' own cost.
//   transport_floor [--rates 100,1000,10000] [--seconds 3] [--bytes 200] [--modes zmq-tcp,zmq-ipc,tcp]
//                   [--idle-spinner]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "transport_floor: %s\n", what.c_str());
  std::exit(2);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

double Positive(const char* flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x > 0) || x > 1e9) Die(std::string(flag) + ": '" + v + "' is not a positive number");
  return x;
}

// Moves all n bytes through `io` (read or write), again after EINTR; false at EOF or an error.
template <class Io, class Byte>
bool Full(Io io, int fd, Byte* p, size_t n) {
  while (n > 0) {
    const ssize_t r = io(fd, p, n);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool ReadFull(int fd, char* p, size_t n) { return Full(::read, fd, p, n); }
bool WriteFull(int fd, const char* p, size_t n) { return Full(::write, fd, p, n); }

// The echo server of a mode, in the forked child: writes its endpoint (one line) to `report`, then
// echoes until killed.
[[noreturn]] void Serve(const std::string& mode, size_t bytes, int report) {
  if (mode == "tcp") {
    const int ls = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      _exit(3);
    const std::string port = std::to_string(ntohs(a.sin_port)) + "\n";
    if (!WriteFull(report, port.data(), port.size())) _exit(3);
    const int fd = accept(ls, nullptr, nullptr);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<char> buf(bytes);
    while (ReadFull(fd, buf.data(), bytes) && WriteFull(fd, buf.data(), bytes)) {
    }
    _exit(0);
  }
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_ROUTER);
  const std::string bind_to =
      mode == "zmq-ipc" ? "ipc:///tmp/transport_floor." + std::to_string(getpid()) : "tcp://127.0.0.1:*";
  if (zmq_bind(s, bind_to.c_str()) != 0) _exit(3);
  char endpoint[256] = {};
  size_t n = sizeof(endpoint);
  zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, endpoint, &n);
  const std::string line = std::string(endpoint) + "\n";
  if (!WriteFull(report, line.data(), line.size())) _exit(3);
  std::vector<char> id(256), buf(bytes + 64);
  for (;;) {
    const int idn = zmq_recv(s, id.data(), id.size(), 0);
    const int bn = idn < 0 ? -1 : zmq_recv(s, buf.data(), buf.size(), 0);
    if (idn < 0 || bn < 0) continue;  // EINTR
    zmq_send(s, id.data(), static_cast<size_t>(idn), ZMQ_SNDMORE);
    zmq_send(s, buf.data(), static_cast<size_t>(bn), 0);
  }
}

struct Client {
  std::string mode;
  size_t bytes = 0;
  int fd = -1;
  void* ctx = nullptr;
  void* sock = nullptr;
  std::vector<char> out, in;

  Client(const std::string& m, size_t b, const std::string& endpoint) : mode(m), bytes(b), out(b, 'x'), in(b + 64) {
    if (mode == "tcp") {
      fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint)));
      if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) Die("tcp connect: " + endpoint);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    } else {
      ctx = zmq_ctx_new();
      sock = zmq_socket(ctx, ZMQ_DEALER);
      if (zmq_connect(sock, endpoint.c_str()) != 0) Die("zmq connect: " + endpoint);
    }
  }
  ~Client() {
    if (fd >= 0) close(fd);
    if (sock != nullptr) {
      int zero = 0;
      zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
      zmq_close(sock);
      zmq_ctx_term(ctx);
    }
  }
  bool RoundTrip() {
    if (mode == "tcp") return WriteFull(fd, out.data(), bytes) && ReadFull(fd, in.data(), bytes);
    if (zmq_send(sock, out.data(), bytes, 0) < 0) return false;
    for (;;) {
      if (zmq_recv(sock, in.data(), in.size(), 0) >= 0) return true;
      if (errno != EINTR) return false;
    }
  }
};

double Pct(std::vector<double>& v, double p) {
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

// A thread at SCHED_IDLE that spins until destroyed; Die when the kernel refuses the policy.
class IdleSpinner {
 public:
  IdleSpinner() {
    std::atomic<int> started{0};  // 1: spinning, -1: refused
    thread_ = std::thread([this, &started] {
      sched_param p{};
      if (sched_setscheduler(0, SCHED_IDLE, &p) != 0) {
        started = -1;
        return;
      }
      started = 1;
      while (!stop_.load(std::memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    });
    while (started.load() == 0) std::this_thread::yield();
    if (started.load() < 0) {
      thread_.join();
      Die("--idle-spinner: SCHED_IDLE refused");
    }
  }
  ~IdleSpinner() {
    stop_ = true;
    thread_.join();
  }
  IdleSpinner(const IdleSpinner&) = delete;
  IdleSpinner& operator=(const IdleSpinner&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string rates = "100,1000,10000", modes = "zmq-tcp,zmq-ipc,tcp";
  double seconds = 3, bytes = 200;
  bool idle_spinner = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::puts(
          "transport_floor [--rates 100,1000,10000] [--seconds 3] [--bytes 200] [--modes zmq-tcp,zmq-ipc,tcp] "
          "[--idle-spinner]");
      return 0;
    }
    if (a == "--idle-spinner") {
      idle_spinner = true;
      continue;
    }
    if (i + 1 >= argc) Die(a + ": needs a value (--help)");
    const std::string v = argv[++i];
    if (a == "--rates")
      rates = v;
    else if (a == "--modes")
      modes = v;
    else if (a == "--seconds")
      seconds = Positive("--seconds", v);
    else if (a == "--bytes")
      bytes = Positive("--bytes", v);
    else
      Die("unknown flag " + a + " (--help)");
  }
  if (bytes > (1 << 20)) Die("--bytes: at most 1048576");
  std::vector<double> rate_list;
  for (const std::string& r : Split(rates)) rate_list.push_back(Positive("--rates", r));
  const std::vector<std::string> mode_list = Split(modes);
  for (const std::string& mode : mode_list)
    if (mode != "tcp" && mode != "zmq-tcp" && mode != "zmq-ipc") Die("unknown mode " + mode + " (zmq-tcp, zmq-ipc, tcp)");
  if (mode_list.empty() || rate_list.empty()) Die("--modes and --rates need at least one value");
  std::unique_ptr<IdleSpinner> spinner;
  if (idle_spinner) spinner = std::make_unique<IdleSpinner>();
  std::printf("%-8s %8s %8s %8s %8s %8s %8s\n", "mode", "rate", "trips", "p50_us", "p90_us", "p99_us", "mean_us");
  for (const std::string& mode : mode_list) {
    int p[2];
    if (pipe(p) != 0) Die("pipe");
    const pid_t child = fork();
    if (child < 0) Die("fork");
    if (child == 0) {
      close(p[0]);
      Serve(mode, static_cast<size_t>(bytes), p[1]);
    }
    close(p[1]);
    std::string endpoint;
    for (char c; read(p[0], &c, 1) == 1 && c != '\n';) endpoint += c;
    close(p[0]);
    if (endpoint.empty()) Die(mode + ": the echo server did not start");
    {
      Client c(mode, static_cast<size_t>(bytes), endpoint);
      for (int w = 0; w < 200; ++w)
        if (!c.RoundTrip()) Die(mode + ": warm-up round trip failed");
      std::mt19937_64 rng(1);
      for (double rate : rate_list) {
        std::exponential_distribution<double> gap(rate);
        std::vector<double> us;
        const auto end = Clock::now() + std::chrono::duration<double>(seconds);
        auto next = Clock::now();
        while (next < end) {
          next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
          std::this_thread::sleep_until(next);
          const auto t0 = Clock::now();
          if (!c.RoundTrip()) Die(mode + ": round trip failed");
          us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        double sum = 0;
        for (double x : us) sum += x;
        const double mean = sum / static_cast<double>(us.size());
        const double p50 = Pct(us, 0.5), p90 = Pct(us, 0.9), p99 = Pct(us, 0.99);
        std::printf("%-8s %8.0f %8zu %8.1f %8.1f %8.1f %8.1f\n", mode.c_str(), rate, us.size(), p50, p90, p99, mean);
        std::fflush(stdout);
      }
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    if (mode == "zmq-ipc") unlink(("/tmp/transport_floor." + std::to_string(child)).c_str());
  }
  return 0;
}
