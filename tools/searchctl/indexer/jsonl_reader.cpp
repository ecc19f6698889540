// JsonlReader and ParseDocLine (jsonl_reader.hpp).
#include "indexer/jsonl_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace search {

namespace {
constexpr size_t kReadBytes = size_t{1} << 20;
constexpr size_t kMinReadBytes = 4096;
constexpr unsigned kGzBuffer = 1u << 18;
}  // namespace

struct JsonlReader::GzHandle {
  gzFile file = nullptr;
  ~GzHandle() {
    if (file != nullptr) gzclose(file);
  }
};

JsonlReader::~JsonlReader() = default;

Result<std::unique_ptr<JsonlReader>> JsonlReader::Open(const std::string& path) {
  std::unique_ptr<JsonlReader> r(new JsonlReader());
  r->path_ = path;
  int fd;
  if (path == "-") {
    fd = ::dup(STDIN_FILENO);
    if (fd < 0) return Status::IOError("cannot read standard input: " + std::string(std::strerror(errno)));
  } else {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      const std::string why = std::strerror(err);
      if (err == ENOENT) return Status::NotFound("input file " + path + " does not exist");
      return Status::IOError("cannot open input file " + path + ": " + why);
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        return Status::InvalidArgument("input " + path + " is a directory, not a JSON-lines file");
      }
      if (S_ISREG(st.st_mode)) r->file_size_ = static_cast<uint64_t>(st.st_size);
    }
  }
  r->gz_ = std::make_unique<GzHandle>();
  r->gz_->file = gzdopen(fd, "rb");
  if (r->gz_->file == nullptr) {
    ::close(fd);
    return Status::IOError("cannot open input file " + path + " (out of memory)");
  }
  gzbuffer(r->gz_->file, kGzBuffer);
  return r;
}

uint64_t JsonlReader::consumed_bytes() const {
  const z_off_t off = gzoffset(gz_->file);
  return off < 0 ? 0 : static_cast<uint64_t>(off);
}

Result<bool> JsonlReader::Next(size_t target_bytes, LineChunk* out) {
  std::string& data = out->data;
  data.clear();
  data.swap(carry_);
  size_t checked = data.size();  // data[0, checked) holds no '\n' (the carry never does)
  for (;;) {
    if (data.size() >= target_bytes || eof_) {
      const void* hit = checked < data.size() ? ::memrchr(data.data() + checked, '\n', data.size() - checked) : nullptr;
      if (hit != nullptr) {
        const size_t nl = static_cast<size_t>(static_cast<const char*>(hit) - data.data());
        carry_.assign(data, nl + 1, std::string::npos);
        data.resize(nl + 1);
        break;
      }
      checked = data.size();
      if (eof_) break;  // the final line has no '\n' (or the input is exhausted)
    }
    const size_t old = data.size();
    const size_t want = std::min<size_t>(kReadBytes, std::max<size_t>(target_bytes, kMinReadBytes));
    data.resize(old + want);
    const int n = gzread(gz_->file, data.data() + old, static_cast<unsigned>(want));
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(gz_->file, &err);
      return Status::IOError("read " + path_ + ": " + (msg != nullptr ? msg : "error"));
    }
    data.resize(old + static_cast<size_t>(n));
    if (n == 0) {
      int err = Z_OK;
      const char* msg = gzerror(gz_->file, &err);
      if (err != Z_OK && err != Z_STREAM_END)
        return Status::IOError("read " + path_ + ": " + (msg != nullptr ? msg : "error") +
                               " (truncated or corrupt gzip?)");
      eof_ = true;
    }
  }
  if (data.empty()) return false;
  out->seq = next_seq_++;
  out->first_line = next_line_;
  next_line_ += static_cast<uint64_t>(std::count(data.begin(), data.end(), '\n'));
  if (data.back() != '\n') ++next_line_;
  return true;
}

bool IsBlankLine(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; });
}

bool ParseDocLine(std::string_view line, DocLine* doc, std::string* reason) {
  using Json = nlohmann::json;
  using Adapter = nlohmann::detail::iterator_input_adapter<const char*>;
  using Parser = nlohmann::detail::parser<Json, Adapter>;
  // The parser (Json::parse's) at a 64-byte boundary: its lexer adds to a 16-byte position
  // counter for every character, and where the stack put that across a cache line, store
  // forwarding failed on each and parsing took several times as long.
  struct alignas(64) AlignedParser {
    Parser parser;
  };
  Json j;
  try {
    AlignedParser p{Parser(Adapter(line.data(), line.data() + line.size()))};
    p.parser.parse(true, j);
  } catch (const Json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 7: ..."
    std::string what = e.what();
    const size_t cut = what.find("] ");
    *reason = "invalid JSON: " + (cut == std::string::npos ? what : what.substr(cut + 2));
    return false;
  }
  if (!j.is_object()) {
    *reason = "not a JSON object";
    return false;
  }
  for (const char* field : {"id", "contents"}) {
    auto it = j.find(field);
    if (it == j.end()) {
      *reason = std::string("missing field '") + field + "'";
      return false;
    }
    if (!it->is_string()) {
      *reason = std::string("field '") + field + "' is not a string";
      return false;
    }
  }
  doc->id = std::move(j["id"].get_ref<std::string&>());
  doc->contents = std::move(j["contents"].get_ref<std::string&>());
  return true;
}

}  // namespace search
