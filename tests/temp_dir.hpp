// A fresh directory under the system's temporary directory for one test or suite, removed with
// everything in it when the TempDir goes. The tests' one definition (fixtures include it).
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace search::testing {

class TempDir {
 public:
  // PREFIX.XXXXXX under the temporary directory (mkdtemp: 0700, a name no other process holds).
  explicit TempDir(std::string_view prefix = "search-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (std::string(prefix) + ".XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror(("mkdtemp " + tmpl).c_str());
      std::abort();
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace search::testing
