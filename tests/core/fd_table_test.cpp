// ReserveFdTable grows the descriptor table at once (FDSize in /proc/self/status), leaves no
// descriptor open, and reports what the limit allows.
#include "core/fd_table.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

namespace search {
namespace {

int OpenDescriptors() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;  // "." and ".." and the directory's own descriptor included: compared, not read
}

TEST(FdTable, ReserveGrowsTheTableNowAndLeavesNothingOpen) {
  const int before = FdTableSlots();
  ASSERT_GT(before, 0);
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  // Beyond the current table, within the hard limit (raised to it where the soft one is lower).
  int want = before * 4 + 1;
  if (rl.rlim_max != RLIM_INFINITY && static_cast<rlim_t>(want) > rl.rlim_max) want = static_cast<int>(rl.rlim_max);
  if (want <= before) GTEST_SKIP() << "the hard descriptor limit " << rl.rlim_max << " leaves no room to grow";
  const int open_before = OpenDescriptors();
  EXPECT_EQ(ReserveFdTable(want), want);
  EXPECT_GE(FdTableSlots(), want);
  EXPECT_EQ(OpenDescriptors(), open_before);
  // Asking again for no more changes nothing.
  const int slots = FdTableSlots();
  EXPECT_EQ(ReserveFdTable(want), want);
  EXPECT_EQ(FdTableSlots(), slots);
}

TEST(FdTable, NothingAskedNothingReserved) {
  const int slots = FdTableSlots();
  EXPECT_EQ(ReserveFdTable(0), 0);
  EXPECT_EQ(ReserveFdTable(-5), 0);
  EXPECT_EQ(FdTableSlots(), slots);
}

}  // namespace
}  // namespace search
