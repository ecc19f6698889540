#include "core/cpu_home.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../thread_cpus.hpp"
#include "core/cpus.hpp"

namespace search {
namespace {

using namespace std::chrono_literals;
using Clock = CpuHome::Clock;

std::vector<int> CpusOf(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(tid, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// A thread that sleeps until told to spin or to end; reports its id.
class Member {
 public:
  explicit Member(const char* name = nullptr) {
    thread_ = std::thread([this, name] {
      if (name != nullptr) pthread_setname_np(pthread_self(), name);
      tid_ = CpuHome::ThisThread();
      std::unique_lock lock(mu_);
      started_ = true;
      cv_.notify_all();
      while (!end_) {
        if (spin_) {
          lock.unlock();
          const auto until = Clock::now() + 2ms;
          while (Clock::now() < until) {
          }
          lock.lock();
        } else {
          cv_.wait(lock);
        }
      }
    });
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return started_; });
  }
  ~Member() { End(); }
  pid_t tid() const { return tid_; }
  void Spin(bool on) {
    std::lock_guard lock(mu_);
    spin_ = on;
    cv_.notify_all();
  }
  void End() {
    {
      std::lock_guard lock(mu_);
      end_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false, spin_ = false, end_ = false;
  pid_t tid_ = 0;
  std::thread thread_;
};

// Ticks `home` once a window until `done` holds or 3 s pass.
template <typename F>
bool TickUntil(CpuHome& home, F done) {
  const auto give_up = Clock::now() + 3s;
  while (Clock::now() < give_up) {
    home.Tick(Clock::now());
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(CpuHomeTest, InactiveWithOneCpuOrAHomeOutsideTheAllowedOnes) {
  CpuHome one(0, {0}, 10ms);
  EXPECT_FALSE(one.active());
  CpuHome outside(7, {0, 1}, 10ms);
  EXPECT_FALSE(outside.active());
  Member m;
  outside.AddThread(m.tid());
  for (int i = 0; i < 5; ++i) {
    outside.Tick(Clock::now());
    std::this_thread::sleep_for(12ms);
  }
  EXPECT_FALSE(outside.pinned());
  EXPECT_EQ(outside.moves_home(), 0u);
  EXPECT_EQ(CpuHome::PickHome({}), -1);
  EXPECT_EQ(CpuHome::PickHome({4}), 4);
}

// One home a host: every call (every lane, the node, another process of this boot) gets the same
// CPU of the same set, one of them.
TEST(CpuHomeTest, OneHomeAHost) {
  const std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  const int home = CpuHome::PickHome(cpus);
  EXPECT_GE(home, 0);
  EXPECT_LE(home, 7);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(CpuHome::PickHome(cpus), home);
}

// A lock dir of the test's own: the host's pollers (other tests' nodes and integrators, on the same
// home) take turns through /dev/shm, and this test's poller must not wait for theirs.
class LockDir {
 public:
  LockDir() {
    char tmpl[] = "/tmp/cpu-home-test-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d != nullptr) path_ = d;
  }
  ~LockDir() {
    if (path_.empty()) return;
    for (int c = 0; c < CPU_SETSIZE; ++c) ::unlink((path_ + "/search-cpu-home-poll." + std::to_string(c)).c_str());
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The poller threads of this process.
size_t Pollers() {
  size_t n = 0;
  for (const testing::ThreadCpus& t : testing::ThreadsOf(getpid())) n += t.name == CpuHome::kPollerName;
  return n;
}

// Pollers(), once it reads `want` or 3 s have passed: a new thread is listed under its name only
// once it has run, and a joined one's /proc entry may outlive the join by a moment (the kernel
// clears the tid the join waits on before it reaps the task).
size_t PollersAfterSettling(size_t want) {
  const auto give_up = Clock::now() + 3s;
  size_t n = Pollers();
  while (n != want && Clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
    n = Pollers();
  }
  return n;
}

// The poller's CPU time so far (0 when there is none).
uint64_t PollerNs() {
  uint64_t ns = 0;
  for (const testing::ThreadCpus& t : testing::ThreadsOf(getpid())) {
    if (t.name != CpuHome::kPollerName) continue;
    std::ifstream stat("/proc/self/task/" + std::to_string(t.tid) + "/schedstat");
    uint64_t run = 0;
    stat >> run;
    ns += run;
    EXPECT_EQ(sched_getscheduler(t.tid), SCHED_IDLE);
  }
  return ns;
}

// The poller's tests: 2 CPUs allowed (allowed), SCHED_IDLE allowed, and a lock dir of their own (dir).
// The test's own thread stays off the home CPU (allowed.back()) while it runs: a CPU that runs only
// an idle-priority poller looks idle to the kernel's wake-up placement, so on a 2-CPU machine the
// driver would often wake there, and the member pinned home would then queue behind it and leave.
class CpuHomePollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
    if (!testing::SchedIdleAllowed()) GTEST_SKIP() << "SCHED_IDLE refused here: the home runs without a poller";
    ASSERT_FALSE(dir.path().empty());
    ASSERT_EQ(sched_getaffinity(0, sizeof saved_, &saved_), 0);
    cpu_set_t away;
    CPU_ZERO(&away);
    for (size_t i = 0; i + 1 < allowed.size(); ++i) CPU_SET(allowed[i], &away);
    ASSERT_EQ(sched_setaffinity(0, sizeof away, &away), 0);
    restore_ = true;
  }
  void TearDown() override {
    if (restore_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  const std::vector<int> allowed = AllowedCpus();
  LockDir dir;

 private:
  cpu_set_t saved_{};
  bool restore_ = false;
};

// A home chain that serves gets a poller on its CPU at SCHED_IDLE; it spins while the chain works
// now and then, and stops once a chain has not served for kPollWindows windows.
TEST_F(CpuHomePollerTest, APollerSpinsWhileTheChainServesAndStopsAfter) {
  const auto window = 20ms;
  CpuHome home(allowed.back(), allowed, window, dir.path());
  Member m;
  home.AddThread(m.tid());
  ASSERT_TRUE(TickUntil(home, [&] { return home.pinned(); }));
  EXPECT_TRUE(TickUntil(home, [&] { return !home.polling(); }));  // asleep (past its start): not serving
  // Serving: a little work a window (~1 ms of 20, under the quarter that would take it out), until
  // the poller has spun for 1 ms (at SCHED_IDLE it gets little of a CPU other tests keep busy).
  const uint64_t before = PollerNs();
  bool polled = false, spun = false;
  const auto give_up = Clock::now() + 5s;
  while (!(polled && spun) && Clock::now() < give_up) {
    m.Spin(true);
    std::this_thread::sleep_for(1ms);
    m.Spin(false);
    home.Tick(Clock::now());
    polled = polled || home.polling();
    spun = PollerNs() > before + 1'000'000;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(polled) << "a serving chain at home should poll";
  EXPECT_TRUE(spun) << "the poller should spin";
  // Asleep again: polling ends kPollWindows windows after the last serving one.
  EXPECT_TRUE(TickUntil(home, [&] { return !home.polling(); }));
  EXPECT_TRUE(home.pinned()) << "moves out " << home.moves_out() << " home " << home.moves_home();
  std::this_thread::sleep_for(3 * window);
  const uint64_t b = PollerNs();
  std::this_thread::sleep_for(100ms);
  EXPECT_LT(PollerNs(), b + 2'000'000) << "the poller should sleep";
}

// Serves `home` (a little work a window by `m`) until `done` holds or 5 s pass.
template <typename F>
bool ServeUntil(CpuHome& home, Member& m, F done) {
  const auto give_up = Clock::now() + 5s;
  while (Clock::now() < give_up) {
    m.Spin(true);
    std::this_thread::sleep_for(1ms);
    m.Spin(false);
    home.Tick(Clock::now());
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Two chains of a process with one home share one poller: two threads spinning on one CPU would
// keep it from ever going idle, pauses or not.
TEST_F(CpuHomePollerTest, ChainsWithOneHomeShareOnePoller) {
  const size_t before = Pollers();
  {
    CpuHome a(allowed.back(), allowed, 20ms, dir.path()), b(allowed.back(), allowed, 20ms, dir.path());
    Member ma, mb;
    a.AddThread(ma.tid());
    b.AddThread(mb.tid());
    ASSERT_TRUE(TickUntil(a, [&] { return a.pinned(); }));
    ASSERT_TRUE(TickUntil(b, [&] { return b.pinned(); }));
    const uint64_t ns = PollerNs();
    EXPECT_TRUE(ServeUntil(a, ma, [&] {
      b.Tick(Clock::now());
      return a.polling() && PollerNs() > ns + 1'000'000;
    }));
    EXPECT_EQ(Pollers(), before + 1);
    // Another home (another CPU): a poller of its own.
    CpuHome c(allowed.front(), allowed, 20ms, dir.path());
    Member mc;
    c.AddThread(mc.tid());
    ASSERT_TRUE(TickUntil(c, [&] { return c.pinned(); }));
    EXPECT_EQ(PollersAfterSettling(before + 2), before + 2);  // a thread names itself once it runs
  }
  // Gone with the last chain of its home.
  EXPECT_EQ(PollersAfterSettling(before), before);
}

// The processes of a host take turns: a poller spins only while it holds the flock of its CPU in
// the lock dir, which another process's poller (here: the test, through a file of its own) may
// hold. It still counts as polled (the CPU is, by the other), and spins once the lock is free.
TEST_F(CpuHomePollerTest, PollersOfAHostTakeTurns) {
  const int cpu = allowed.back();
  const std::string lock_path = dir.path() + "/search-cpu-home-poll." + std::to_string(cpu);
  const int other = ::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(other, 0);
  ASSERT_EQ(::flock(other, LOCK_EX | LOCK_NB), 0);
  CpuHome home(cpu, allowed, 20ms, dir.path());
  Member m;
  home.AddThread(m.tid());
  ASSERT_TRUE(TickUntil(home, [&] { return home.pinned(); }));
  ASSERT_TRUE(ServeUntil(home, m, [&] { return home.polling(); }));
  // Not its turn: it waits (a try every 10 ms), it does not spin.
  const uint64_t waiting = PollerNs();
  const auto half_a_second = Clock::now() + 500ms;
  int polled = 0;  // windows that wanted polling (a loaded machine may take the chain out of home)
  const bool spun_waiting = ServeUntil(home, m, [&] {
                              polled += home.polling();
                              return PollerNs() > waiting + 5'000'000 || Clock::now() > half_a_second;
                            }) &&
                            PollerNs() > waiting + 5'000'000;
  EXPECT_FALSE(spun_waiting) << "a poller spun without its turn";
  EXPECT_GT(polled, 0);
  // The other process's turn ends: this one spins.
  ASSERT_EQ(::flock(other, LOCK_UN), 0);
  const uint64_t free = PollerNs();
  EXPECT_TRUE(ServeUntil(home, m, [&] { return PollerNs() > free + 1'000'000; })) << "the poller should spin";
  // And holds the turn while it spins: another cannot take it.
  EXPECT_NE(::flock(other, LOCK_EX | LOCK_NB), 0);
  ::close(other);
}

// A home the kernel will not pin to (here a CPU that does not exist; a sandbox forbidding
// sched_setaffinity is alike): the home turns itself off and the threads keep their CPUs.
TEST(CpuHomeTest, AHomeTheKernelRefusesTurnsItselfOff) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.empty() || allowed.back() >= CPU_SETSIZE - 1) GTEST_SKIP() << "needs a CPU number left over";
  std::vector<int> with_missing = allowed;
  with_missing.push_back(CPU_SETSIZE - 1);
  CpuHome home(CPU_SETSIZE - 1, with_missing, 10ms);
  ASSERT_TRUE(home.active());
  Member m;
  home.AddThread(m.tid());
  EXPECT_TRUE(TickUntil(home, [&] { return !home.active(); }));
  EXPECT_FALSE(home.pinned());
  EXPECT_EQ(home.moves_home(), 0u);
  EXPECT_EQ(CpusOf(m.tid()), allowed);
}

TEST(CpuHomeTest, IdleMembersGoHomeBusyOnesLeaveAndComeBack) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
  const int home_cpu = allowed.back();
  CpuHome home(home_cpu, allowed, 20ms);
  ASSERT_TRUE(home.active());
  Member a, b;
  home.AddThread(a.tid());
  home.AddThread(b.tid());
  // Asleep: home after a window.
  ASSERT_TRUE(TickUntil(home, [&] { return home.pinned(); }));
  EXPECT_EQ(home.moves_home(), 1u);
  EXPECT_EQ(CpusOf(a.tid()), std::vector<int>{home_cpu});
  EXPECT_EQ(CpusOf(b.tid()), std::vector<int>{home_cpu});
  // One of them busy all the time: both get every CPU back.
  a.Spin(true);
  ASSERT_TRUE(TickUntil(home, [&] { return !home.pinned(); }));
  EXPECT_EQ(home.moves_out(), 1u);
  EXPECT_EQ(CpusOf(a.tid()), allowed);
  EXPECT_EQ(CpusOf(b.tid()), allowed);
  // Quiet again: home again.
  a.Spin(false);
  ASSERT_TRUE(TickUntil(home, [&] { return home.pinned(); }));
  EXPECT_EQ(home.moves_home(), 2u);
  EXPECT_EQ(CpusOf(a.tid()), std::vector<int>{home_cpu});
  // A thread added while home goes home at once; one that leaves gets every CPU back.
  Member c;
  home.AddThread(c.tid());
  EXPECT_EQ(CpusOf(c.tid()), std::vector<int>{home_cpu});
  home.Leave(c.tid());
  EXPECT_EQ(CpusOf(c.tid()), allowed);
  // A member that ended is dropped, and the others still move.
  b.End();
  a.Spin(true);
  ASSERT_TRUE(TickUntil(home, [&] { return !home.pinned(); }));
  EXPECT_EQ(CpusOf(a.tid()), allowed);
}

TEST(CpuHomeTest, FindsAThreadByName) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
  const int prefix = NextZmqThreadPrefix();
  EXPECT_NE(NextZmqThreadPrefix(), prefix);
  const std::string name = ZmqIoThreadName(prefix);
  EXPECT_EQ(name, std::to_string(prefix) + "/ZMQbg/IO/0");
  CpuHome home(allowed.front(), allowed, 20ms);
  home.AddNamedThread(name);
  Member named(name.c_str()), other((std::to_string(prefix) + "/ZMQbg/Reaper").c_str());
  ASSERT_TRUE(TickUntil(home, [&] { return home.pinned(); }));
  EXPECT_EQ(CpusOf(named.tid()), std::vector<int>{allowed.front()});
  EXPECT_EQ(CpusOf(other.tid()), allowed);
  named.Spin(true);
  ASSERT_TRUE(TickUntil(home, [&] { return !home.pinned(); }));  // it counts: found and measured
  EXPECT_EQ(CpusOf(named.tid()), allowed);
}

}  // namespace
}  // namespace search
