#include "node/tuning.hpp"

#include <charconv>
#include <fstream>
#include <limits>

namespace search {
namespace {

constexpr TuningKey kTuningKeys[] = {
    {"sched_cpu_cores", "int", "-1",
     "CPUs (the last ones) given to the scheduler's CPU workers alone; -1 = by scheduler (hybrid on 8+ CPUs: "
     "5/8 of them), 0 = share every CPU: set 0 when several nodes share one host"},
    {"calibration_queries", "uint", "48",
     "queries the scheduler times at start to fit its cost model; lower only to start faster (tests)"},
    {"trace", "path", "",
     "write the scheduler's decisions to this CSV file, one line per sampled finished job (at most 2,000,000 "
     "lines): to study where queries ran"},
    {"trace_every", "uint", "16", "with trace: record one finished job in this many"},
};

template <typename T>
Status ParseNumber(std::string_view key, std::string_view text, T lo, T hi, T* out) {
  T v{};
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < lo || v > hi)
    return Status::InvalidArgument("--tuning " + std::string(key) + ": '" + std::string(text) +
                                   "' is not an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  *out = v;
  return Status::Ok();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::span<const TuningKey> TuningKeys() {
  return kTuningKeys;
}

std::string TuningHelp() {
  std::string out;
  for (const TuningKey& k : kTuningKeys) {
    out += "  " + std::string(k.key) + " (" + std::string(k.type) + ", default " +
           (k.default_value.empty() ? std::string("none") : std::string(k.default_value)) +
           "): " + std::string(k.help) + "\n";
  }
  return out;
}

Status ApplyTuning(std::string_view key_value, NodeTuning* tuning) {
  const size_t eq = key_value.find('=');
  if (eq == std::string_view::npos)
    return Status::InvalidArgument("--tuning: '" + std::string(key_value) + "' is not KEY=VALUE");
  const std::string_view key = Trim(key_value.substr(0, eq));
  const std::string_view value = Trim(key_value.substr(eq + 1));
  if (key == "sched_cpu_cores") return ParseNumber<int64_t>(key, value, -1, 4096, &tuning->sched_cpu_cores);
  if (key == "calibration_queries") return ParseNumber<uint64_t>(key, value, 1, 1000000, &tuning->calibration_queries);
  if (key == "trace_every") return ParseNumber<uint64_t>(key, value, 1, uint64_t{1} << 40, &tuning->trace_every);
  if (key == "trace") {
    if (value.empty()) return Status::InvalidArgument("--tuning trace: needs a file path");
    tuning->trace = std::string(value);
    return Status::Ok();
  }
  std::string known;
  for (const TuningKey& k : kTuningKeys) known += (known.empty() ? "" : ", ") + std::string(k.key);
  return Status::InvalidArgument("--tuning: unknown key '" + std::string(key) + "' (known: " + known + ")");
}

Status ApplyTuningArg(const std::string& arg, NodeTuning* tuning) {
  if (arg.find('=') != std::string::npos) return ApplyTuning(arg, tuning);
  std::ifstream in(arg);
  if (!in) return Status::InvalidArgument("--tuning: '" + arg + "' is neither KEY=VALUE nor a readable file");
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string_view t = Trim(line);
    if (t.empty() || t.front() == '#') continue;
    if (Status st = ApplyTuning(t, tuning); !st.ok())
      return Status::InvalidArgument(arg + ":" + std::to_string(n) + ": " + st.message());
  }
  return Status::Ok();
}

}  // namespace search
