// NodeTuning: every key of the table parses, values out of range or not whole numbers and unknown
// keys are refused with the key named, and a tuning file applies its lines or names the bad one.
#include "node/tuning.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace search {
namespace {

TEST(TuningTest, EveryKeyOfTheTableIsAccepted) {
  std::set<std::string> keys;
  for (const TuningKey& k : TuningKeys()) {
    keys.insert(std::string(k.key));
    EXPECT_FALSE(k.help.empty()) << k.key;
    EXPECT_NE(TuningHelp().find(std::string(k.key) + " ("), std::string::npos) << k.key;
  }
  EXPECT_EQ(keys, (std::set<std::string>{"sched_cpu_cores", "calibration_queries", "trace", "trace_every"}));
  NodeTuning t;
  ASSERT_TRUE(ApplyTuning("sched_cpu_cores=0", &t).ok());
  ASSERT_TRUE(ApplyTuning("calibration_queries=8", &t).ok());
  ASSERT_TRUE(ApplyTuning(" trace = /tmp/x.csv ", &t).ok());
  ASSERT_TRUE(ApplyTuning("trace_every=4", &t).ok());
  ASSERT_TRUE(ApplyTuning("trace_every=16", &t).ok());  // the last value holds
  EXPECT_EQ(t.sched_cpu_cores, 0);
  EXPECT_EQ(t.calibration_queries, 8u);
  EXPECT_EQ(t.trace, "/tmp/x.csv");
  EXPECT_EQ(t.trace_every, 16u);
}

TEST(TuningTest, DefaultsMatchTheTable) {
  const NodeTuning t;
  for (const TuningKey& k : TuningKeys()) {
    std::string value;
    if (k.key == "sched_cpu_cores") value = std::to_string(t.sched_cpu_cores);
    if (k.key == "calibration_queries") value = std::to_string(t.calibration_queries);
    if (k.key == "trace") value = t.trace;
    if (k.key == "trace_every") value = std::to_string(t.trace_every);
    EXPECT_EQ(value, k.default_value) << k.key;
  }
}

TEST(TuningTest, BadInputIsRefusedWithTheKeyNamed) {
  NodeTuning t;
  for (const char* bad : {"no_such_key=1", "sched_cpu_cores=-2", "sched_cpu_cores=1.5", "calibration_queries=0",
                          "calibration_queries=", "calibration_queries=2000000", "trace_every=0", "trace_every=-1",
                          "trace_every=4k", "trace=", "trace_every"}) {
    const Status st = ApplyTuning(bad, &t);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(st.message().find(key), std::string::npos) << bad << ": " << st.message();
  }
  EXPECT_NE(ApplyTuning("no_such_key=1", &t).message().find("known: sched_cpu_cores"), std::string::npos);
  const NodeTuning untouched;
  EXPECT_EQ(t.sched_cpu_cores, untouched.sched_cpu_cores);
  EXPECT_EQ(t.trace_every, untouched.trace_every);
  EXPECT_EQ(t.trace, untouched.trace);
}

TEST(TuningTest, FileLinesAreAppliedOrTheBadOneNamed) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/tuning_good.conf", bad = dir + "/tuning_bad.conf";
  std::ofstream(good) << "# comment\n\n  calibration_queries=8\r\ntrace_every = 2\n";
  std::ofstream(bad) << "calibration_queries=8\nsched_cpu_cores=lots\n";
  NodeTuning t;
  ASSERT_TRUE(ApplyTuningArg(good, &t).ok());
  EXPECT_EQ(t.calibration_queries, 8u);
  EXPECT_EQ(t.trace_every, 2u);
  const Status st = ApplyTuningArg(bad, &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tuning_bad.conf:2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("sched_cpu_cores"), std::string::npos) << st.message();
  EXPECT_FALSE(ApplyTuningArg(dir + "/tuning_missing.conf", &t).ok());
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

}  // namespace
}  // namespace search
