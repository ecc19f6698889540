// Reading a Prometheus text exposition in tests: the value of one series line, and how often a
// piece of text occurs (a family's # HELP and # TYPE lines, a series).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>

namespace search::testing {

// The value of the series line `series` (name{labels}) in a text exposition, or -1 when absent.
inline double SeriesValue(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  for (size_t p = text.find(prefix); p != std::string::npos; p = text.find(prefix, p + 1)) {
    if (p == 0 || text[p - 1] == '\n') return std::stod(text.substr(p + prefix.size()));
  }
  return -1;
}

// How many times `needle` occurs in `text` (overlapping occurrences counted).
inline size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace search::testing
