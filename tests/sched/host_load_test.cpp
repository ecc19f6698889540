// HostLoad over a fake /proc/stat: idle cores are the idle (+ iowait) share of the ticks between
// two samples times the cores (the per-CPU lines); unreadable or malformed input gives -1 (no limit); samples closer
// than the interval return the previous answer.
#include "sched/host_load.hpp"

#include <gtest/gtest.h>

#include "core/cpus.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace search {
namespace {

class HostLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("host_load_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove(path_); }
  // The aggregate line, then four per-CPU lines (the cores), then another counter.
  void Write(const std::string& first_line) {
    std::ofstream out(path_);
    out << first_line << "\n";
    for (int c = 0; c < 4; ++c) out << "cpu" << c << " 1 2 3 4 5 6 7 8\n";
    out << "intr 12345\n";
  }
  std::filesystem::path path_;
};

TEST_F(HostLoadTest, IdleShareOfTheTicksSinceTheLastSample) {
  const double cores = 4;  // Write's per-CPU lines
  Write("cpu  100 0 100 800 0 0 0 0 0 0");
  HostLoad load(std::chrono::microseconds(0), path_.string());
  // user +100, system +100, idle +500, iowait +100: 600 of 800 ticks idle.
  Write("cpu  200 0 200 1300 100 0 0 0 0 0");
  EXPECT_DOUBLE_EQ(load.IdleCores(), cores * 600 / 800);
  // Fully busy.
  Write("cpu  1000 0 200 1300 100 0 0 0 0 0");
  EXPECT_DOUBLE_EQ(load.IdleCores(), 0.0);
  // No ticks passed: the previous answer.
  EXPECT_DOUBLE_EQ(load.IdleCores(), 0.0);
  // Fully idle.
  Write("cpu  1000 0 200 2300 100 0 0 0 0 0");
  EXPECT_DOUBLE_EQ(load.IdleCores(), cores);
}

TEST_F(HostLoadTest, SamplesCloserThanTheIntervalReturnThePreviousAnswer) {
  Write("cpu  100 0 100 800 0 0 0 0");
  HostLoad load(std::chrono::hours(1), path_.string());
  Write("cpu  900 0 100 800 0 0 0 0");
  // The constructor's sample was under an hour ago: nothing measured yet.
  EXPECT_EQ(load.IdleCores(), -1.0);
}

TEST_F(HostLoadTest, UnreadableOrMalformedIsUnknown) {
  HostLoad missing(std::chrono::microseconds(0), (path_ / "absent").string());
  EXPECT_EQ(missing.IdleCores(), -1.0);
  for (const char* bad : {"", "intr 1 2 3", "cpu", "cpu  1 2", "cpux 1 2 3 4"}) {
    SCOPED_TRACE(bad);
    Write(bad);
    HostLoad load(std::chrono::microseconds(0), path_.string());
    EXPECT_EQ(load.IdleCores(), -1.0);
  }
}

// A node pinned to CPUs 1 and 3 (its affinity mask) counts only their lines: their idle share
// times 2, however idle the host's other CPUs are; a mask none of whose CPUs has a line is unknown.
TEST_F(HostLoadTest, OnlyTheCpusOfTheMaskCount) {
  auto write = [&](const uint64_t user[4], const uint64_t idle[4]) {
    std::ofstream out(path_);
    out << "cpu  0 0 0 0 0 0 0 0\n";  // the aggregate line is not read with a mask
    for (int c = 0; c < 4; ++c) out << "cpu" << c << " " << user[c] << " 0 0 " << idle[c] << " 0 0 0 0\n";
    out << "intr 12345\n";
  };
  const uint64_t user0[4] = {100, 100, 100, 100}, idle0[4] = {0, 0, 0, 0};
  write(user0, idle0);
  HostLoad load(std::chrono::microseconds(0), path_.string(), {3, 1});
  // 100 ticks later: CPUs 0 and 2 fully idle, 1 idle for half of them, 3 busy: 0.5 of the mask's 2 cores.
  const uint64_t user1[4] = {100, 150, 100, 200}, idle1[4] = {100, 50, 100, 0};
  write(user1, idle1);
  EXPECT_DOUBLE_EQ(load.IdleCores(), 2 * 50.0 / 200.0);
  HostLoad absent(std::chrono::microseconds(0), path_.string(), {7});
  EXPECT_EQ(absent.IdleCores(), -1.0);
}

// AllowedCpus / AvailableCores follow the affinity mask (taskset, a cpuset), not the host's count:
// a thread pinned to one CPU sees that CPU alone.
TEST(CpusTest, AffinityMaskIsWhatCounts) {
  const std::vector<int> all = AllowedCpus();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(AvailableCores(), all.size());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  std::vector<int> seen;
  unsigned cores = 0;
  std::thread pinned([&] {
    if (!PinThisThread({all.back()})) return;
    seen = AllowedCpus();
    cores = AvailableCores();
  });
  pinned.join();
  EXPECT_EQ(seen, std::vector<int>{all.back()});
  EXPECT_EQ(cores, 1u);
}

TEST(HostLoadLiveTest, ReadsThisHostsProcStat) {
  std::ifstream in("/proc/stat");
  if (!in) GTEST_SKIP() << "no /proc/stat here";
  size_t cpus = 0;
  for (std::string line; std::getline(in, line);)
    if (line.size() > 3 && line.rfind("cpu", 0) == 0 && std::isdigit(static_cast<unsigned char>(line[3]))) ++cpus;
  HostLoad load(std::chrono::microseconds(0));
  double idle = -1;
  for (int i = 0; i < 50 && idle < 0; ++i) {  // until the kernel's tick counters move
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    idle = load.IdleCores();
  }
  EXPECT_GE(idle, 0.0);
  EXPECT_LE(idle, static_cast<double>(cpus) + 1e-9);
}

}  // namespace
}  // namespace search
