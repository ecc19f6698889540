// Helpers shared by the fuzz targets: an invariant check that aborts (so libFuzzer and the CTest
// replay both report it as a crash), and a scratch file for targets whose API reads a path.
// Thread-safety: a fuzz target runs one input at a time; ScratchFile is not thread-safe.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

// Aborts with the failed condition (and an optional message) when `cond` does not hold.
#define FUZZ_CHECK(cond) FUZZ_CHECK_MSG(cond, std::string_view())
#define FUZZ_CHECK_MSG(cond, msg)                                                                   \
  do {                                                                                              \
    if (!(cond)) ::search_fuzz::Fail(__FILE__, __LINE__, #cond, (msg));                            \
  } while (0)

namespace search_fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* cond, std::string_view msg) {
  std::fprintf(stderr, "%s:%d: invariant violated: %s%s%.*s\n", file, line, cond, msg.empty() ? "" : ": ",
               static_cast<int>(msg.size()), msg.data());
  std::abort();
}

// A file whose content is replaced on each Write, for APIs that open a path (the JSONL reader,
// the stopword file reader). An anonymous memfd opened through /proc/self/fd when available
// (nothing touches the disk), else a temporary file removed at exit.
class ScratchFile {
 public:
  ScratchFile() {
    fd_ = ::memfd_create("search-fuzz", MFD_CLOEXEC);
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
      if (::access(path_.c_str(), R_OK) == 0) return;
      ::close(fd_);
    }
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/search-fuzz-XXXXXX";
    fd_ = ::mkstemp(tmpl.data());
    if (fd_ < 0) Fail(__FILE__, __LINE__, "mkstemp", "cannot create a scratch file");
    path_ = tmpl;
    temp_ = true;
  }
  ~ScratchFile() {
    ::close(fd_);
    if (temp_) ::unlink(path_.c_str());
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  void Write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) Fail(__FILE__, __LINE__, "ftruncate", "scratch file");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) Fail(__FILE__, __LINE__, "pwrite", "scratch file");
      done += static_cast<size_t>(n);
    }
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  bool temp_ = false;
  std::string path_;
};

}  // namespace search_fuzz
