#include "core/cpu_home.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>

namespace search {
namespace {

// The schedstat file of a thread of this process, held open: a read is one pread, and once the
// thread has ended it fails (ESRCH) even if the kernel gives its id to a new thread.
int OpenSchedstat(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", static_cast<int>(tid));
  return ::open(path, O_RDONLY | O_CLOEXEC);
}

// cpu + wait ns (the first two fields of schedstat).
std::optional<uint64_t> ReadBusyNs(int fd) {
  char buf[96];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return std::nullopt;
  buf[n] = 0;
  char* end = nullptr;
  const unsigned long long run = std::strtoull(buf, &end, 10);
  if (end == buf) return std::nullopt;
  char* end2 = nullptr;
  const unsigned long long wait = std::strtoull(end, &end2, 10);
  if (end2 == end) return std::nullopt;
  return run + wait;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

std::string ReadComm(const char* tid) {
  const std::string path = std::string("/proc/self/task/") + tid + "/comm";
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return {};
  char buf[32] = {0};
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (!ok) return {};
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n')) s.pop_back();
  return s;
}

}  // namespace

// The poller of one CPU in this process, shared by every CpuHome there whose home it is (For), and
// spinning only while it holds the host's flock for that CPU: one poller spins on a CPU at a time.
class CpuHome::Poller {
 public:
  static std::shared_ptr<Poller> For(int cpu, const std::string& lock_dir, std::chrono::milliseconds window) {
    static std::mutex mu;
    static std::map<std::pair<int, std::string>, std::weak_ptr<Poller>> pollers;
    std::lock_guard lock(mu);
    std::weak_ptr<Poller>& slot = pollers[{cpu, lock_dir}];
    std::shared_ptr<Poller> p = slot.lock();
    if (!p) {
      p = std::shared_ptr<Poller>(new Poller(cpu, lock_dir, window));
      slot = p;
    }
    return p;
  }

  ~Poller() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (lock_fd_ >= 0) ::close(lock_fd_);  // and with it the flock
  }

  void Add(const CpuHome* home) {
    std::lock_guard lock(mu_);
    homes_.push_back(home);
  }
  void Remove(const CpuHome* home) {
    std::lock_guard lock(mu_);
    homes_.erase(std::remove(homes_.begin(), homes_.end(), home), homes_.end());
  }
  void Wake() { cv_.notify_all(); }

 private:
  Poller(int cpu, const std::string& lock_dir, std::chrono::milliseconds window) : cpu_(cpu), window_(window) {
    const std::string path = lock_dir + "/search-cpu-home-poll." + std::to_string(cpu);
    // Read-only: any user's process may take its turn on a file another user made.
    lock_fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    thread_ = std::thread([this] { Loop(); });
  }

  // Whether any chain of this CPU wants polling now. REQUIRES: mu_ held.
  bool Wanted(Clock::time_point now) const {
    for (const CpuHome* h : homes_)
      if (h->PollingAt(now)) return true;
    return false;
  }

  // This process's turn: the flock held (or no lock file to take turns through).
  bool Turn() {
    if (lock_fd_ < 0) return true;
    if (!locked_) locked_ = ::flock(lock_fd_, LOCK_EX | LOCK_NB) == 0;
    return locked_;
  }
  void EndTurn() {
    if (locked_) ::flock(lock_fd_, LOCK_UN);
    locked_ = false;
  }

  // At SCHED_IDLE on the CPU, so that any other thread that wants it takes it at once; spins while
  // a chain wants polling and it is this process's turn, else sleeps until Wake (or a turn is
  // tried again: kTurnRetry). Every kSpinBurst it sleeps a moment: a CPU that runs an idle-priority
  // thread never goes idle, and only a CPU going idle pulls at once threads queued on busy ones
  // (else the periodic balance does, after milliseconds).
  void Loop() {
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // the moment's sleep: a microsecond, not 50
    sched_param p{};
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu_, &set);
    // Spinning at normal priority would take the CPU from the members: without SCHED_IDLE, no poller.
    const bool ok = ::sched_setscheduler(0, SCHED_IDLE, &p) == 0 && ::sched_setaffinity(0, sizeof set, &set) == 0;
    // Named only now: whoever finds a thread by this name (CPU accounting, the tests) finds it at
    // its own policy, not at the one it inherited.
    pthread_setname_np(pthread_self(), kPollerName);
    constexpr auto kTurnRetry = std::chrono::milliseconds(10);
    std::unique_lock lock(mu_);
    Clock::time_point burst_end{};
    while (!stop_) {
      const Clock::time_point now = Clock::now();
      const bool wanted = ok && Wanted(now);
      if (wanted && Turn()) {
        lock.unlock();
        if (burst_end == Clock::time_point{}) {
          burst_end = now + kSpinBurst;
        } else if (now >= burst_end) {
          const timespec moment{0, 1000};
          ::nanosleep(&moment, nullptr);
          burst_end = Clock::now() + kSpinBurst;
        }
        for (int i = 0; i < 256; ++i) CpuRelax();
        lock.lock();
      } else {
        burst_end = {};
        EndTurn();
        cv_.wait_for(lock, wanted ? kTurnRetry : window_);
      }
    }
    EndTurn();
  }

  const int cpu_;
  const std::chrono::milliseconds window_;
  int lock_fd_ = -1;
  bool locked_ = false;  // the poller thread's own
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<const CpuHome*> homes_;  // GUARDED_BY(mu_)
  bool stop_ = false;                  // GUARDED_BY(mu_)
  std::thread thread_;
};

CpuHome::CpuHome(int home, std::vector<int> allowed, std::chrono::milliseconds window, std::string lock_dir)
    : home_(home),
      allowed_(std::move(allowed)),
      window_(window),
      lock_dir_(std::move(lock_dir)),
      active_(allowed_.size() >= 2 && std::find(allowed_.begin(), allowed_.end(), home) != allowed_.end()) {}

int CpuHome::PickHome(const std::vector<int>& allowed) {
  if (allowed.empty()) return -1;
  // The same CPU for every process of one host (containers too: they see the host's boot id), so
  // that a node and the integrator that queries it hand requests on without waking another CPU;
  // another host most likely another. Without a boot id, drawn once a process.
  static const size_t base = [] {
    std::string id;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "re")) {
      char b[64] = {0};
      if (std::fgets(b, sizeof b, f) != nullptr) id = b;
      std::fclose(f);
    }
    return id.empty() ? static_cast<size_t>(std::random_device{}()) : std::hash<std::string>{}(id);
  }();
  return allowed[base % allowed.size()];
}

pid_t CpuHome::ThisThread() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

CpuHome::~CpuHome() {
  if (poller_) poller_->Remove(this);
  for (const Member& m : members_) ::close(m.fd);
}

bool CpuHome::polling() const { return PollingAt(Clock::now()); }

bool CpuHome::PollingAt(Clock::time_point now) const {
  return pinned() && active() && now.time_since_epoch().count() < poll_until_.load(std::memory_order_relaxed);
}

void CpuHome::AddThread(pid_t tid) {
  if (!active()) return;
  const int fd = OpenSchedstat(tid);
  if (fd < 0) return;
  std::lock_guard lock(mu_);
  members_.push_back({tid, fd, 0, true});
  if (pinned_.load(std::memory_order_relaxed)) Pin(tid, true);
}

void CpuHome::Leave(pid_t tid) {
  if (!active()) return;
  std::lock_guard lock(mu_);
  for (auto it = members_.begin(); it != members_.end();) {
    if (it->tid == tid) {
      ::close(it->fd);
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
  Pin(tid, false);
}

void CpuHome::AddNamedThread(std::string name) {
  if (!active()) return;
  std::lock_guard lock(mu_);
  names_.push_back(std::move(name));
}

int CpuHome::AddZmqIoThread() {
  const int prefix = NextZmqThreadPrefix();
  AddNamedThread(ZmqIoThreadName(prefix));
  return prefix;
}

bool CpuHome::Pin(pid_t tid, bool home) const {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (home) {
    CPU_SET(home_, &set);
  } else {
    for (int c : allowed_)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return ::sched_setaffinity(tid, sizeof set, &set) == 0;
}

void CpuHome::FindNamed() {  // REQUIRES: mu_ held, names_ not empty
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return;
  std::vector<bool> found(names_.size(), false);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string comm = ReadComm(e->d_name);
    for (size_t i = 0; i < names_.size(); ++i)
      if (!found[i] && comm == names_[i]) {
        const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
        const int fd = OpenSchedstat(tid);
        if (fd < 0) continue;
        members_.push_back({tid, fd, 0, true});
        if (pinned_.load(std::memory_order_relaxed)) Pin(tid, true);
        found[i] = true;
      }
  }
  ::closedir(d);
  std::vector<std::string> left;
  for (size_t i = 0; i < names_.size(); ++i)
    if (!found[i]) left.push_back(std::move(names_[i]));
  names_.swap(left);
}

void CpuHome::Tick(Clock::time_point now) {
  if (!active() || now < window_end_) return;
  const bool first = window_end_ == Clock::time_point{};
  const double window_ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   now - (first ? now : window_end_ - window_))
                                                   .count());
  window_end_ = now + window_;
  std::lock_guard lock(mu_);
  if (!names_.empty()) FindNamed();
  uint64_t busy_ns = 0;
  for (auto it = members_.begin(); it != members_.end();) {
    const std::optional<uint64_t> ns = ReadBusyNs(it->fd);
    if (!ns) {
      ::close(it->fd);
      it = members_.erase(it);
      continue;
    }
    if (!it->fresh) busy_ns += *ns - std::min(*ns, it->last_ns);
    it->last_ns = *ns;
    it->fresh = false;
    ++it;
  }
  if (first || window_ns <= 0) return;
  const double busy = static_cast<double>(busy_ns) / window_ns;
  if (busy >= kServingAbove) {
    const bool was = PollingAt(now);
    poll_until_.store((now + kPollWindows * window_).time_since_epoch().count(), std::memory_order_relaxed);
    if (!was && poller_) poller_->Wake();
  }
  const bool pinned = pinned_.load(std::memory_order_relaxed);
  // A move is counted and marked before its first member moves, so that whoever sees a member
  // moved (a scrape, a test reading the threads' affinities) sees the mark too.
  if (!pinned && busy < kReturnBelow) {
    moves_home_.fetch_add(1, std::memory_order_seq_cst);
    pinned_.store(true, std::memory_order_seq_cst);
    size_t moved = 0;
    for (const Member& m : members_) moved += Pin(m.tid, true) ? 1 : 0;
    if (moved == 0 && !members_.empty()) {  // the kernel refuses: stay off, and it was no move
      pinned_.store(false, std::memory_order_seq_cst);
      moves_home_.fetch_sub(1, std::memory_order_seq_cst);
      active_.store(false, std::memory_order_relaxed);
      return;
    }
    if (!poller_) {
      poller_ = Poller::For(home_, lock_dir_, window_);
      poller_->Add(this);
    }
    poller_->Wake();
  } else if (pinned && busy > kLeaveAbove) {
    moves_out_.fetch_add(1, std::memory_order_seq_cst);
    pinned_.store(false, std::memory_order_seq_cst);
    for (const Member& m : members_) Pin(m.tid, false);
  }
}

int NextZmqThreadPrefix() {
  static std::atomic<int> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) % 999 + 1;
}

std::string ZmqIoThreadName(int prefix) { return std::to_string(prefix) + "/ZMQbg/IO/0"; }

}  // namespace search
