// Helpers shared by searchctl's subcommands: error reporting, mode/k validation, query files and
// the JSON line of a query's answer.
// Thread-safety: free functions; FormatAnswer is reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/query.hpp"
#include "core/status.hpp"
#include "cpu_exec/local_index.hpp"

namespace search::cli {

// searchctl's exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // bad input, corrupt index, I/O error
inline constexpr int kExitUsage = 2;    // bad command-line arguments

// Prints "searchctl <command>: error: <message>" on stderr and returns `code`.
int ReportError(std::string_view command, const Status& status, int code);

// The query mode and k, validated: InvalidArgument with a clear message otherwise.
Result<QueryMode> CheckModeAndK(const std::string& mode, int64_t k);

// One query per line; '\r' before '\n' dropped; blank (whitespace-only) lines skipped.
Result<std::vector<std::string>> ReadQueryFile(const std::string& path);

// {"query": TEXT, "hits": [{"id": ID, "score": S}, ...], "took_us": N} (no trailing newline), with
// "total": T before "took_us" when `total` is given (the exact number of matches).
// Scores are printed so that parsing them back as float gives the same float exactly. With
// `sources` (one per hit: the stored JSON object, spliced as is), each hit also has "_source".
std::string FormatAnswer(std::string_view query, const std::vector<ExternalHit>& hits, uint64_t took_us,
                         std::optional<uint64_t> total = std::nullopt,
                         const std::vector<std::string>* sources = nullptr);

// Nearest-rank percentile (p in [0, 1]) of an ascending sample; 0 for an empty one.
double Percentile(const std::vector<double>& sorted, double p);

// Escapes `s` as a JSON string (with quotes); invalid UTF-8 bytes become U+FFFD.
std::string JsonString(std::string_view s);

}  // namespace search::cli
