// NodeTuning: search-node's experimental and diagnostic knobs, set by `--tuning KEY=VALUE`
// (repeatable) or `--tuning FILE` (one KEY=VALUE a line; blank lines and lines starting with # are
// skipped). Every key is in one table (kTuningKeys: key, type, default, help); search-node --help
// prints it. Most deployments set none: the defaults are the node's measured behaviour.
// Contract: ApplyTuning accepts only the table's keys, each value parsed whole and within its
// range; anything else is InvalidArgument naming the key or the text (search-node exits 2 on it).
// A key given twice keeps the last value.
// Thread-safety: plain data and pure functions; NodeTuning is not shared between threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace search {

struct NodeTuning {
  int64_t sched_cpu_cores = -1;       // -1: by scheduler (DefaultSchedCpuCores); 0: share every CPU
  uint64_t calibration_queries = 48;  // the scheduler's start-up cost calibration
  std::string trace;                  // scheduler decision trace (CSV path); empty: none
  uint64_t trace_every = 16;          // one traced job in this many
};

struct TuningKey {
  std::string_view key;
  std::string_view type;  // "int", "uint", "path"
  std::string_view default_value;
  std::string_view help;  // when to change it
};

// The table: every key --tuning takes.
std::span<const TuningKey> TuningKeys();

// The table as help text, one key a line ("  key (type, default D): help").
std::string TuningHelp();

// Applies one "KEY=VALUE" to *tuning. REQUIRES: tuning != nullptr.
[[nodiscard]] Status ApplyTuning(std::string_view key_value, NodeTuning* tuning);

// Applies one --tuning argument: KEY=VALUE, or else a file of such lines. REQUIRES: tuning != nullptr.
[[nodiscard]] Status ApplyTuningArg(const std::string& arg, NodeTuning* tuning);

}  // namespace search
