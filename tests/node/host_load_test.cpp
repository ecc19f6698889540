// HostLoad over a fake /proc/stat: idle cores are the idle (+ iowait) share of the ticks between
// two samples times the cores (the per-CPU lines); unreadable or malformed input gives -1 (no limit); samples closer
// than the interval return the previous answer.
#include "node/host_load.hpp"

#include <gtest/gtest.h>

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
