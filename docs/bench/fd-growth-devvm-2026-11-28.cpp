// Micro-benchmark behind BENCHMARKS.md issue 6 (2026-11-28): the cost of the socket() calls that grow the
// descriptor table (fds 64, 128, 256, 512) in a process with threads, without and with the table grown
// first (argument 'pre'). Build: g++ -O2 -pthread fd-growth-devvm-2026-11-28.cpp -o fdy; run: ./fdy; ./fdy pre
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <atomic>
#include <algorithm>
// Child process per trial: threads started, then 600 sockets; prints the time of the calls that grew the table.
int main(int argc, char** argv) {
  bool pre = argc > 1;
  if (pre) { int fd = open("/dev/null", O_RDONLY); int hi = fcntl(fd, F_DUPFD, 1023); close(hi); close(fd); }
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int i = 0; i < 2; ++i) th.emplace_back([&] { while (!stop) std::this_thread::sleep_for(std::chrono::microseconds(200)); });
  double grow = 0, other = 0; int n_other = 0;
  for (int i = 0; i < 600; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    int s = socket(AF_INET, SOCK_STREAM, 0);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (s == 64 || s == 128 || s == 256 || s == 512) grow += us; else { other = std::max(other, us); }
  }
  printf("%s grow-sum %.0f us, worst other %.0f us\n", pre ? "pre " : "plain", grow, other);
  stop = true; for (auto& t : th) t.join();
}
