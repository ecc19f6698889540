// A tiny leveled stderr logger: one named Logger per component ("node", "integrator", ...).
// Each line is "2024-05-01T12:00:00.123456Z INFO  [node] message" and is written with a single
// write(2), so lines from different threads never interleave. The process-wide level starts from
// the environment variable SEARCH_LOG_LEVEL (debug|info|warn|error|off; default info).
//   static const Logger kLog("node");
//   kLog.Info() << "listening on " << endpoint;
// Thread-safety: everything is thread-safe; a LogLine belongs to the thread that made it.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace search {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
Result<LogLevel> ParseLogLevel(std::string_view name);

// Collects one line and writes it when destroyed (only when its level is enabled).
class LogLine {
 public:
  LogLine(LogLevel level, std::string_view component, bool enabled);
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;

  template <class T>
  LogLine& operator<<(const T& v) {
    if (enabled_) out_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::string_view component_;
  bool enabled_;
  std::ostringstream out_;
};

class Logger {
 public:
  explicit Logger(std::string component) : component_(std::move(component)) {}
  const std::string& component() const { return component_; }
  bool Enabled(LogLevel level) const { return level >= GetLogLevel() && level != LogLevel::kOff; }

  LogLine Debug() const { return LogLine(LogLevel::kDebug, component_, Enabled(LogLevel::kDebug)); }
  LogLine Info() const { return LogLine(LogLevel::kInfo, component_, Enabled(LogLevel::kInfo)); }
  LogLine Warn() const { return LogLine(LogLevel::kWarn, component_, Enabled(LogLevel::kWarn)); }
  LogLine Error() const { return LogLine(LogLevel::kError, component_, Enabled(LogLevel::kError)); }

 private:
  std::string component_;
};

}  // namespace search
