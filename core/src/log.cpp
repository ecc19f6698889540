// The stderr logger (see core/log.hpp).
#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace search {
namespace {

LogLevel InitialLevel() {
  const char* env = std::getenv("SEARCH_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  auto level = ParseLogLevel(env);
  return level.ok() ? *level : LogLevel::kInfo;
}

std::atomic<int>& LevelVar() {
  static std::atomic<int> level{static_cast<int>(InitialLevel())};
  return level;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO ";
    case LogLevel::kWarn: return "WARN ";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kOff: return "OFF  ";
  }
  return "?    ";
}

}  // namespace

void SetLogLevel(LogLevel level) { LevelVar().store(static_cast<int>(level), std::memory_order_relaxed); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(LevelVar().load(std::memory_order_relaxed)); }

Result<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  return Status::InvalidArgument("unknown log level '" + std::string(name) + "' (debug|info|warn|error|off)");
}

LogLine::LogLine(LogLevel level, std::string_view component, bool enabled)
    : level_(level), component_(component), enabled_(enabled) {}

LogLine::~LogLine() {
  if (!enabled_) return;
  const auto now = std::chrono::system_clock::now();
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[64];
  std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(micros % 1000000));
  std::string line;
  line.reserve(96);
  line += stamp;
  line += ' ';
  line += LevelName(level_);
  line += " [";
  line += component_;
  line += "] ";
  line += out_.str();
  line += '\n';
  // One write(2): lines from different threads do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace search
