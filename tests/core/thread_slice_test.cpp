// SetThreadSlice gives the calling thread the slice asked for (as the kernel reads it back in
// /proc/self/task/TID/sched), keeps its nice value, touches no other thread, and refuses what the
// kernel would clamp. Kernels before 6.12 take no custom slices: there the tests skip.
#include "core/thread_slice.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include <cerrno>
#include <cstdio>

#include <thread>

namespace search {
namespace {

using std::chrono::microseconds;

// True where the kernel is 6.12 or later, which takes a fair thread's custom slice.
bool KernelTakesSlices() {
  utsname u{};
  if (::uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 6 || (major == 6 && minor >= 12);
}

// Runs fn on a thread of its own, so no test changes the test runner's main thread.
template <typename Fn>
void OnThread(Fn fn) {
  std::thread t(fn);
  t.join();
}

TEST(ThreadSlice, TheThreadGetsTheSliceAsked) {
  if (!KernelTakesSlices()) GTEST_SKIP() << "this kernel takes no custom slices (before 6.12)";
  OnThread([] {
    const int64_t before = ThreadSliceNs();
    ASSERT_GT(before, 0);
    ASSERT_NE(before, 300000) << "the default slice is the one this test asks for: pick another";
    EXPECT_TRUE(SetThreadSlice(microseconds(300)));
    EXPECT_EQ(ThreadSliceNs(), 300000);
    EXPECT_TRUE(SetThreadSlice(kMinThreadSlice));
    EXPECT_EQ(ThreadSliceNs(), 100000);
  });
}

TEST(ThreadSlice, NiceValueIsKept) {
  if (!KernelTakesSlices()) GTEST_SKIP() << "this kernel takes no custom slices (before 6.12)";
  OnThread([] {
    const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
    ASSERT_EQ(setpriority(PRIO_PROCESS, tid, 7), 0);
    EXPECT_TRUE(SetThreadSlice(microseconds(200)));
    errno = 0;
    EXPECT_EQ(getpriority(PRIO_PROCESS, tid), 7);
    EXPECT_EQ(errno, 0);
  });
}

TEST(ThreadSlice, OtherThreadsKeepTheirs) {
  if (!KernelTakesSlices()) GTEST_SKIP() << "this kernel takes no custom slices (before 6.12)";
  const int main_tid = static_cast<int>(syscall(SYS_gettid));
  const int64_t main_before = ThreadSliceNs(main_tid);
  ASSERT_GT(main_before, 0);
  OnThread([&] {
    EXPECT_TRUE(SetThreadSlice(microseconds(150)));
    EXPECT_EQ(ThreadSliceNs(), 150000);
    EXPECT_EQ(ThreadSliceNs(main_tid), main_before);
  });
  EXPECT_EQ(ThreadSliceNs(), main_before);
}

TEST(ThreadSlice, OutOfRangeIsRefusedAndChangesNothing) {
  OnThread([] {
    const int64_t before = ThreadSliceNs();
    EXPECT_FALSE(SetThreadSlice(microseconds(0)));
    EXPECT_FALSE(SetThreadSlice(microseconds(99)));
    EXPECT_FALSE(SetThreadSlice(kMaxThreadSlice + microseconds(1)));
    EXPECT_EQ(ThreadSliceNs(), before);
  });
}

// A thread's slice passes to the threads it starts (so a process that wants only some threads on a
// short slice asks on those threads, or probes with KernelTakesThreadSlice, not on its main one).
TEST(ThreadSlice, ThreadsStartedAfterwardInheritIt) {
  if (!KernelTakesSlices()) GTEST_SKIP() << "this kernel takes no custom slices (before 6.12)";
  OnThread([] {
    ASSERT_TRUE(SetThreadSlice(microseconds(250)));
    int64_t child = 0;
    std::thread([&] { child = ThreadSliceNs(); }).join();
    EXPECT_EQ(child, 250000);
  });
}

// The probe asks on a passing thread: the caller's own slice is unchanged.
TEST(ThreadSlice, ProbeLeavesTheCallerAlone) {
  OnThread([] {
    const int64_t before = ThreadSliceNs();
    (void)KernelTakesThreadSlice(microseconds(400));
    EXPECT_EQ(ThreadSliceNs(), before);
    EXPECT_FALSE(KernelTakesThreadSlice(microseconds(20)));  // below the kernel's range
  });
}

TEST(ThreadSlice, FlagValues) {
  EXPECT_TRUE(ValidThreadSliceUs(0));
  EXPECT_TRUE(ValidThreadSliceUs(100));
  EXPECT_TRUE(ValidThreadSliceUs(100000));
  EXPECT_FALSE(ValidThreadSliceUs(1));
  EXPECT_FALSE(ValidThreadSliceUs(99));
  EXPECT_FALSE(ValidThreadSliceUs(100001));
  EXPECT_FALSE(ValidThreadSliceUs(-5));
}

TEST(ThreadSlice, UnknownThreadReadsMinusOne) { EXPECT_EQ(ThreadSliceNs(1 << 30), -1); }

}  // namespace
}  // namespace search
