// Wake-up lateness of a 1 ms sleeper on CPUs kept busy by spinners, with the sleeper's EEVDF slice
// left at the default or set short through sched_setattr (Linux 6.12+: sched_runtime of a fair task).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>
struct Attr { uint32_t size, policy; uint64_t flags; int32_t nice; uint32_t prio; uint64_t runtime, deadline, period; uint32_t umin, umax; };
static int SetSlice(uint64_t ns) { Attr a{}; a.size = sizeof a; a.policy = SCHED_OTHER; a.runtime = ns; return syscall(SYS_sched_setattr, 0, &a, 0); }
int main(int argc, char** argv) {
  uint64_t slice = argc > 1 ? strtoull(argv[1], 0, 10) : 0;
  int spinners = argc > 2 ? atoi(argv[2]) : 4;
  double duty = argc > 3 ? atof(argv[3]) : 0.8;
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int i = 0; i < spinners; ++i) ts.emplace_back([&] {  // busy `duty` of every 5 ms
    while (!stop) { auto t0 = std::chrono::steady_clock::now(); while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(int(5000 * duty))) {} std::this_thread::sleep_for(std::chrono::microseconds(int(5000 * (1 - duty)))); } });
  std::vector<double> late;
  std::thread s([&] {
    if (slice && SetSlice(slice) != 0) { perror("sched_setattr"); }
    for (int i = 0; i < 4000; ++i) {
      timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
      timespec d{0, 1000000}; nanosleep(&d, nullptr);
      clock_gettime(CLOCK_MONOTONIC, &b);
      late.push_back((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6 - 1.0);
    } });
  s.join(); stop = true; for (auto& t : ts) t.join();
  std::sort(late.begin(), late.end());
  printf("slice %lu ns, %d spinners at %.0f%%: late p50 %.3f p99 %.3f p99.9 %.3f max %.3f ms\n", (unsigned long)slice, spinners, duty * 100,
         late[late.size() / 2], late[late.size() * 99 / 100], late[late.size() * 999 / 1000], late.back());
}
