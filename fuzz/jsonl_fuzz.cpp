// Fuzz target: the JSON-lines input of the index builder (tools/searchctl/indexer/jsonl_reader.hpp).
// The input is written to a scratch file and read back through JsonlReader (plain, or gzip when it
// starts with the gzip magic) with several chunk sizes; every line is then split and parsed as the
// parser threads do (parse_phase.cpp: '\n' separated, one trailing '\r' dropped, blank lines
// skipped, ParseDocLine). Checks: chunks are whole lines, in order, numbered correctly, and (for
// plain input) concatenate to exactly the input; ParseDocLine accepts exactly the lines that are
// JSON objects with string "id" and "contents" (checked with an independent nlohmann parse), and
// gives a documented reason otherwise.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "indexer/jsonl_reader.hpp"

namespace {

using search::DocLine;
using search::JsonlReader;
using search::LineChunk;

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

void CheckLine(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  bool blank = true;
  for (const char c : line) blank &= c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
  FUZZ_CHECK(search::IsBlankLine(line) == blank);
  if (blank) return;

  DocLine doc;
  std::string reason;
  const bool ok = search::ParseDocLine(line, &doc, &reason);
  const auto ref = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const bool ref_ok = !ref.is_discarded() && ref.is_object() && ref.contains("id") && ref["id"].is_string() &&
                      ref.contains("contents") && ref["contents"].is_string();
  FUZZ_CHECK_MSG(ok == ref_ok, reason);
  if (ok) {
    FUZZ_CHECK(doc.id == ref["id"].get<std::string>());
    FUZZ_CHECK(doc.contents == ref["contents"].get<std::string>());
    return;
  }
  FUZZ_CHECK_MSG(StartsWith(reason, "invalid JSON: ") || reason == "not a JSON object" ||
                     reason == "missing field 'id'" || reason == "missing field 'contents'" ||
                     reason == "field 'id' is not a string" || reason == "field 'contents' is not a string",
                 reason);
}

// Reads the whole file in chunks of about `target` bytes; returns the concatenation, or nothing
// (with ok = false) on a read error, which only gzip input may give.
std::string ReadAll(const std::string& path, size_t file_size, size_t target, bool plain, bool* ok) {
  auto reader = JsonlReader::Open(path);
  FUZZ_CHECK_MSG(reader.ok(), reader.status().ToString());
  std::string all;
  LineChunk chunk;
  uint64_t seq = 0, line = 1;
  bool last_had_newline = true;
  for (;;) {
    auto more = (*reader)->Next(target, &chunk);
    if (!more.ok()) {
      FUZZ_CHECK_MSG(!plain, more.status().ToString());
      FUZZ_CHECK(more.status().code() == search::StatusCode::kIOError);
      *ok = false;
      return {};
    }
    if (!*more) break;
    // Only the final chunk may end without a newline.
    FUZZ_CHECK(last_had_newline);
    FUZZ_CHECK(!chunk.data.empty());
    FUZZ_CHECK(chunk.seq == seq++);
    FUZZ_CHECK(chunk.first_line == line);
    for (const char c : chunk.data) line += c == '\n';
    last_had_newline = chunk.data.back() == '\n';
    if (!last_had_newline) ++line;
    all += chunk.data;
    FUZZ_CHECK((*reader)->consumed_bytes() <= file_size);
  }
  // Past the end it stays at the end.
  auto again = (*reader)->Next(target, &chunk);
  FUZZ_CHECK(again.ok() && !*again);
  *ok = true;
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 20)) return 0;
  static search_fuzz::ScratchFile file;
  file.Write(data, size);
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const bool plain = !(size >= 2 && data[0] == 0x1f && data[1] == 0x8b);

  std::string first;
  bool have_first = false;
  for (const size_t target : {size_t{1}, size_t{37}, size_t{1} << 16}) {
    bool ok = false;
    const std::string all = ReadAll(file.path(), size, target, plain, &ok);
    if (!ok) continue;
    if (plain) FUZZ_CHECK(all == input);
    // The chunk size never changes the content.
    if (have_first) FUZZ_CHECK(all == first);
    if (!have_first) first = all;
    have_first = true;
  }
  if (!have_first) return 0;

  std::string_view rest = first;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    CheckLine(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }
  return 0;
}
