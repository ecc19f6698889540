// BuildDir (build_dir.hpp).
#include "indexer/build_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "index_store/manifest.hpp"

namespace search {

namespace fs = std::filesystem;

namespace {

std::string ErrnoText() {
  return std::strerror(errno);
}

bool ProcessAlive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// renameat2(2); callers fall back to rename(2) where the file system lacks the flag.
int Rename2(const std::string& from, const std::string& to, unsigned flags) {
  return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags);
}

// Leftovers "<base>.tmp-<pid>" of builds whose process is gone. ("<base>.old-<pid>", from the
// non-atomic fallback of Publish, may be the only copy of an old index and is left alone.)
void RemoveStale(const std::string& parent, const std::string& base, std::vector<std::string>* notes) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent.empty() ? "." : parent, ec)) {
    const std::string name = entry.path().filename().string();
    for (const char* tag : {".tmp-"}) {
      const std::string prefix = base + tag;
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string digits = name.substr(prefix.size());
      if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
      if (ProcessAlive(std::stol(digits))) continue;
      std::error_code rm;
      fs::remove_all(entry.path(), rm);
      if (notes != nullptr)
        notes->push_back(rm ? "could not remove leftover " + entry.path().string() + ": " + rm.message()
                            : "removed leftover " + entry.path().string() + " of an interrupted build");
    }
  }
}

}  // namespace

std::string NormalizeDirPath(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

Result<std::unique_ptr<BuildDir>> BuildDir::Create(const std::string& target, bool force,
                                                   std::vector<std::string>* notes) {
  std::unique_ptr<BuildDir> d(new BuildDir());
  d->target_ = NormalizeDirPath(target);
  if (d->target_.empty() || d->target_ == "/" || d->target_ == "." || d->target_ == "..")
    return Status::InvalidArgument("output directory '" + target + "' is not a usable index path");
  const fs::path p(d->target_);
  const std::string base = p.filename().string();
  if (base == "." || base == "..")
    return Status::InvalidArgument("output directory '" + target + "' must name a directory");
  d->parent_ = p.parent_path().string();
  const std::string parent = d->parent_.empty() ? "." : d->parent_;
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    return Status::NotFound("parent directory " + parent + " of the output does not exist");
  d->force_ = force;
  const fs::file_status st = fs::symlink_status(d->target_, ec);
  if (fs::exists(st)) {
    if (!force) return Status::AlreadyExists(d->target_ + " already exists (use --force to replace it)");
    if (!fs::is_directory(st))
      return Status::InvalidArgument(d->target_ + " exists and is not a directory; refusing to replace it");
    const bool is_index = fs::exists(d->target_ + "/manifest.json", ec);
    const bool empty = fs::is_empty(d->target_, ec);
    if (!is_index && !empty)
      return Status::InvalidArgument(d->target_ +
                                     " exists and is not an index (no manifest.json); refusing to replace it");
  }
  RemoveStale(d->parent_, base, notes);
  d->tmp_ = d->target_ + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(d->tmp_, ec);  // our own pid: a leftover of an earlier process with this pid
  if (!fs::create_directory(d->tmp_, ec) || ec)
    return Status::IOError("create " + d->tmp_ + ": " + (ec ? ec.message() : "failed"));
  return d;
}

BuildDir::~BuildDir() {
  if (!published_ && !tmp_.empty()) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

Status BuildDir::Publish() {
  if (published_) return Status::InvalidArgument(target_ + " is already published");
  std::error_code ec;
  if (!fs::exists(tmp_ + "/manifest.json", ec)) return Status::Internal("publishing " + tmp_ + " without a manifest");
  SEARCH_RETURN_IF_ERROR(SyncPath(tmp_));
  const std::string parent = parent_.empty() ? "." : parent_;
  const bool exists = fs::exists(fs::symlink_status(target_, ec));
  if (!exists) {
    if (Rename2(tmp_, target_, RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST) return Status::AlreadyExists(target_ + " appeared during the build; not replacing it");
      if (errno != EINVAL && errno != ENOSYS)
        return Status::IOError("rename " + tmp_ + " to " + target_ + ": " + ErrnoText());
      if (fs::exists(fs::symlink_status(target_, ec)))
        return Status::AlreadyExists(target_ + " appeared during the build; not replacing it");
      if (::rename(tmp_.c_str(), target_.c_str()) != 0)
        return Status::IOError("rename " + tmp_ + " to " + target_ + ": " + ErrnoText());
    }
    published_ = true;
    return SyncPath(parent);
  }
  if (!force_) return Status::AlreadyExists(target_ + " appeared during the build; not replacing it");
  // Swap atomically: afterwards tmp_ holds the old index, which is then removed.
  std::string old = tmp_;
  if (Rename2(tmp_, target_, RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS)
      return Status::IOError("exchange " + tmp_ + " with " + target_ + ": " + ErrnoText());
    // No atomic exchange here: move the old aside, then the new in (a crash between the two
    // leaves the old index at DIR.old-<pid>, which is reported, never removed automatically).
    old = target_ + ".old-" + std::to_string(::getpid());
    if (::rename(target_.c_str(), old.c_str()) != 0)
      return Status::IOError("rename " + target_ + " to " + old + ": " + ErrnoText());
    if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
      Status s = Status::IOError("rename " + tmp_ + " to " + target_ + ": " + ErrnoText());
      (void)::rename(old.c_str(), target_.c_str());
      return s;
    }
  }
  published_ = true;
  SEARCH_RETURN_IF_ERROR(SyncPath(parent));
  fs::remove_all(old, ec);
  if (ec) return Status::IOError("remove the replaced index " + old + ": " + ec.message());
  return Status::Ok();
}

uint64_t DirectoryBytes(const std::string& dir) {
  namespace fs = std::filesystem;
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const auto n = it->file_size(size_ec);
      if (!size_ec) total += n;
    }
  }
  return total;
}

}  // namespace search
