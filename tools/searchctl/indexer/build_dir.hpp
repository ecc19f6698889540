// BuildDir: where an index build writes (DIR.tmp-<pid>, a sibling of the target DIR) and how it is
// published: everything is written and fsynced in the temporary directory, manifest.json last,
// then the directory is renamed onto DIR in one step (renameat2 RENAME_NOREPLACE, or
// RENAME_EXCHANGE to replace an existing index under --force) and the parent directory fsynced.
// A build killed at any point leaves DIR as it was (absent, or the old index) plus at most a
// DIR.tmp-<pid> that is not at DIR; the next build removes such leftovers of dead processes.
// Thread-safety: not thread-safe.
#pragma once

#include <cstdint>

#include <memory>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace search {

class BuildDir {
 public:
  // Validates the target: its parent must exist; DIR must not exist unless `force`, and then it
  // must be an index (it holds manifest.json) or an empty directory, never other data.
  // Creates the temporary directory. `notes` receives human-readable remarks (leftovers removed).
  static Result<std::unique_ptr<BuildDir>> Create(const std::string& target, bool force,
                                                  std::vector<std::string>* notes);
  ~BuildDir();  // removes the temporary directory unless Publish succeeded
  BuildDir(const BuildDir&) = delete;
  BuildDir& operator=(const BuildDir&) = delete;

  const std::string& path() const { return tmp_; }
  const std::string& target() const { return target_; }

  // Makes the temporary directory DIR: fsyncs it, renames it into place (replacing an old index
  // under force, which is then removed) and fsyncs the parent. REQUIRES: manifest.json written.
  Status Publish();

 private:
  BuildDir() = default;
  std::string target_, parent_, tmp_;
  bool force_ = false;
  bool published_ = false;
};

// Removes trailing slashes ("idx/" -> "idx"); "" stays "".
std::string NormalizeDirPath(std::string path);

// The size of a directory's regular files, recursively (0 for what cannot be read).
uint64_t DirectoryBytes(const std::string& dir);

}  // namespace search
