// The stderr logger: level names parse, lines below the level are dropped, and an enabled line is
// written whole in the documented format.
#include "core/log.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace search {
namespace {

TEST(LogTest, LevelsParseAndFilter) {
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarn);
  EXPECT_FALSE(ParseLogLevel("loud").ok());
  const LogLevel saved = GetLogLevel();
  SetLogLevel(LogLevel::kWarn);
  Logger log("test");
  EXPECT_FALSE(log.Enabled(LogLevel::kInfo));
  EXPECT_TRUE(log.Enabled(LogLevel::kError));
  ::testing::internal::CaptureStderr();
  log.Info() << "hidden";
  log.Warn() << "shown " << 42;
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("hidden"), std::string::npos);
  EXPECT_TRUE(std::regex_search(err, std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z WARN  \[test\] shown 42\n$)"))) << err;
  SetLogLevel(saved);
}

}  // namespace
}  // namespace search
