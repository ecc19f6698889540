// CpuHome: keeps a chain of threads that hand each request on to one another (an I/O loop, the
// ZeroMQ I/O thread behind its sockets, the HTTP loops that feed it) on one CPU while together they
// keep less than a quarter of a CPU busy, and lets them run on any of the process's CPUs once they
// need more than half of one.
//
// Why: at low load every hand-off between threads wakes a CPU that sat idle, and on the virtual
// machines we measured (H200 hosts, issue 52 goal 4) waking an idle CPU costs ~50-70 us. A query
// crosses ten threads. Threads that share a CPU hand work on with a context switch instead. Pinned
// for good, a chain caps the process at one CPU (a node's pinned I/O pair broke at 30,000 q/s), so
// the pin follows the load.
//
// Which CPU: one a host (PickHome), so that at low load a node and the integrator that queries it
// share it too, and a request crosses no idle CPU between them.
//
// Polling: while the chain is home and serving (it kept at least 0.1% of a CPU busy in one of the
// last 10 windows), a poller thread spins on the home CPU at SCHED_IDLE priority. Any member that
// wakes takes the CPU from it at once; what it saves is the virtual CPU halting between requests,
// which on the H200 hosts (Firecracker guests: no cpuidle driver, idle means HLT) made the next
// wake-up cost ~50-70 us. Idle time a core while serving below a quarter of a CPU, none when idle
// (a ping a second is not serving) or busy (the chain has left home). Every kSpinBurst it sleeps a
// microsecond, so that its CPU goes idle and pulls threads queued elsewhere. The poller is named
// kPollerName, so that CPU accounting by thread can tell it apart.
// One poller a CPU: the chains of a process with the same home share one thread, and the
// processes of a host take turns through an flock on lock_dir/search-cpu-home-poll.CPU (a poller
// spins only while it holds it). Two spinning on one CPU would leave it never idle, pauses or not.
//
// Measure: every `window` (100 ms), the members' time on a CPU plus their time waiting for one
// (/proc/self/task/TID/schedstat, held open: one pread a member), over the window. Above 0.5 the
// members get the process's CPUs back; below 0.25 they go home. The wait counts so that a home CPU
// crowded by other work is left too. A member whose schedstat cannot be read (it ended) is dropped.
//
// Members: threads by id (AddThread), and a thread found by name (AddNamedThread: a ZeroMQ
// context's I/O thread, named through ZMQ_THREAD_NAME_PREFIX: AddZmqIoThread; looked up
// by Tick until found, since a thread names itself after it starts).
// Inactive (Tick does nothing) with fewer than 2 CPUs allowed or a home outside them, or once no
// member could be pinned (active()).
// Thread-safety: AddThread, AddNamedThread and Leave from any thread; Tick from one thread
// (the chain's I/O loop), cheap when the window has not ended (a clock read).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace search {

// Where a chain is now, for metrics: pinned to its home (1) or on every CPU (0), whether its poller
// spins, and how many times it moved home and out since it started.
struct CpuHomeState {
  bool pinned = false;
  bool polling = false;
  uint64_t moves_home = 0, moves_out = 0;
};

class CpuHome {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kLeaveAbove = 0.5, kReturnBelow = 0.25;
  static constexpr double kServingAbove = 0.001;  // a window this busy counts as serving
  static constexpr int kPollWindows = 10;         // poll this many windows after the last serving one
  static constexpr const char* kPollerName = "cpu-home-poll";
  static constexpr std::chrono::microseconds kSpinBurst{500};  // then the poller sleeps a moment

  static constexpr const char* kHostLockDir = "/dev/shm";  // where a host's pollers take turns

  // lock_dir: where the flock that lets one poller a host spin on `home` lives (a test's own, to
  // keep out of the way of other processes; a dir that cannot hold it: no turns, each spins).
  CpuHome(int home, std::vector<int> allowed, std::chrono::milliseconds window = std::chrono::milliseconds(100),
          std::string lock_dir = kHostLockDir);
  ~CpuHome();
  CpuHome(const CpuHome&) = delete;
  CpuHome& operator=(const CpuHome&) = delete;

  // allowed[base % size], base the hash of the host's boot id (/proc/sys/kernel/random/boot_id):
  // every chain of every process of a host that may run on the same CPUs gets the same home.
  // -1 when `allowed` is empty.
  static int PickHome(const std::vector<int>& allowed);
  // The calling thread's id.
  static pid_t ThisThread();

  void AddThread(pid_t tid);
  // Takes `tid` out and gives it every allowed CPU back.
  void Leave(pid_t tid);
  void AddNamedThread(std::string name);
  // Adds the I/O thread of a ZeroMQ context not started yet (before its first socket): returns the
  // number to set as its ZMQ_THREAD_NAME_PREFIX, under which AddNamedThread finds it.
  int AddZmqIoThread();

  void Tick(Clock::time_point now);

  // False with fewer than 2 CPUs or a home outside them, and once the kernel refused to pin every
  // member (a sandbox that forbids sched_setaffinity, a CPU gone offline): the home then stays off.
  bool active() const { return active_.load(std::memory_order_relaxed); }
  int home() const { return home_; }
  // Whether the members are pinned to home() now; how many times they moved home and left it.
  bool pinned() const { return pinned_.load(std::memory_order_seq_cst); }
  uint64_t moves_home() const { return moves_home_.load(std::memory_order_seq_cst); }
  uint64_t moves_out() const { return moves_out_.load(std::memory_order_seq_cst); }
  CpuHomeState state() const { return {pinned(), polling(), moves_home(), moves_out()}; }
  // Whether the home CPU is polled for this chain now: home, and serving in the last kPollWindows
  // windows (by this process's poller, or another's on the same CPU whose turn it is).
  bool polling() const;
  bool PollingAt(Clock::time_point now) const;

 private:
  struct Member {
    pid_t tid;
    int fd;            // its /proc/self/task/TID/schedstat
    uint64_t last_ns;  // cpu + wait at the last window's end
    bool fresh;        // not read yet
  };
  class Poller;
  bool Pin(pid_t tid, bool home) const;
  void FindNamed();

  const int home_;
  const std::vector<int> allowed_;
  const std::chrono::milliseconds window_;
  const std::string lock_dir_;
  std::atomic<bool> active_;
  std::mutex mu_;
  std::vector<Member> members_;        // GUARDED_BY(mu_)
  std::vector<std::string> names_;  // GUARDED_BY(mu_): named threads not found yet
  Clock::time_point window_end_{};
  std::atomic<bool> pinned_{false};
  std::atomic<uint64_t> moves_home_{0}, moves_out_{0};
  std::atomic<int64_t> poll_until_{0};  // steady-clock ticks
  std::shared_ptr<Poller> poller_;      // the process's poller of home_: joined the first time home (Tick's thread)
};

// A number for ZMQ_THREAD_NAME_PREFIX unique in this process (1 to 999), and the name its context's
// (first) I/O thread then carries ("N/ZMQbg/IO/0").
int NextZmqThreadPrefix();
std::string ZmqIoThreadName(int prefix);

}  // namespace search
