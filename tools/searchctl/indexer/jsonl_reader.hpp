// JsonlReader: reads a JSON-lines file (plain or gzip, through zlib's gzread, which passes plain
// files through unchanged) in chunks of whole lines, for the index builder's parser threads.
// DocLine: parses one line into the Anserini document fields {"id": "...", "contents": "..."}.
// Thread-safety: a JsonlReader is used by one thread; ParseDocLine is reentrant.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace search {

// A run of whole lines of the input. `data` ends with '\n' except possibly at the end of input.
struct LineChunk {
  uint64_t seq = 0;         // 0, 1, 2, ... in input order
  uint64_t first_line = 1;  // 1-based line number of the chunk's first line
  std::string data;
};

class JsonlReader {
 public:
  // "-" reads standard input. NotFound / IOError with the path when the file cannot be opened.
  static Result<std::unique_ptr<JsonlReader>> Open(const std::string& path);
  ~JsonlReader();
  JsonlReader(const JsonlReader&) = delete;
  JsonlReader& operator=(const JsonlReader&) = delete;

  // Fills `out` with the next lines, about `target_bytes` of them (a longer single line is kept
  // whole). Returns false at the end of input. IOError on a read error or a truncated gzip stream.
  Result<bool> Next(size_t target_bytes, LineChunk* out);

  // Bytes of the file consumed so far (the compressed offset for gzip input).
  uint64_t consumed_bytes() const;
  // The file's size on disk; 0 when unknown (standard input, a pipe).
  uint64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }

 private:
  JsonlReader() = default;
  struct GzHandle;
  std::unique_ptr<GzHandle> gz_;
  std::string path_;
  uint64_t file_size_ = 0;
  std::string carry_;  // a partial line read past the last chunk
  uint64_t next_seq_ = 0;
  uint64_t next_line_ = 1;
  bool eof_ = false;
};

struct DocLine {
  std::string id;
  std::string contents;
};

// Parses one input line. On failure returns false and sets `reason` to a short explanation
// ("invalid JSON: ...", "not a JSON object", "missing field 'id'", "field 'contents' is not a
// string"). A line may carry other fields; they are ignored.
bool ParseDocLine(std::string_view line, DocLine* doc, std::string* reason);

// True when the line holds only ASCII whitespace (such lines are not documents).
bool IsBlankLine(std::string_view line);

}  // namespace search
