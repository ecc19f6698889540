// The index manifest (DIR/manifest.json), shard checksums and index verification.
#include "index_store/manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "codec/block_codec.hpp"
#include "index_store/shard_store.hpp"
#include "json_fields.hpp"

namespace search {

namespace fs = std::filesystem;
using store::Json;

namespace {

constexpr const char* kManifestName = "manifest.json";
constexpr size_t kMaxManifestBytes = size_t{64} << 20;
constexpr size_t kChecksumChunk = size_t{1} << 20;
constexpr size_t kMaxShards = size_t{1} << 20;

std::string ErrnoText() { return std::strerror(errno); }

bool ValidShardPath(const std::string& p) {
  return !p.empty() && p != "." && p != ".." && p.find('/') == std::string::npos &&
         p.find('\\') == std::string::npos && p.find('\0') == std::string::npos;
}

bool ValidChecksum(const std::string& c) {
  if (c.size() != 15 || c.compare(0, 7, "crc32c:") != 0) return false;
  return std::all_of(c.begin() + 7, c.end(), [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); });
}

Result<ShardEntry> ShardFromJson(const Json& j, size_t index, uint32_t num_shards, uint64_t num_docs) {
  const std::string where = "manifest shards[" + std::to_string(index) + "]";
  if (!j.is_object()) return Status::Corruption(where + " must be an object");
  ShardEntry e;
  uint64_t v;
  SEARCH_ASSIGN_OR_RETURN(v, store::GetUint(j, "id", where, UINT32_MAX));
  e.id = static_cast<uint32_t>(v);
  SEARCH_ASSIGN_OR_RETURN(e.path, store::GetString(j, "path", where));
  SEARCH_ASSIGN_OR_RETURN(v, store::GetUint(j, "doc_begin", where, UINT32_MAX));
  e.doc_begin = static_cast<uint32_t>(v);
  SEARCH_ASSIGN_OR_RETURN(v, store::GetUint(j, "doc_end", where, UINT32_MAX));
  e.doc_end = static_cast<uint32_t>(v);
  SEARCH_ASSIGN_OR_RETURN(e.num_terms, store::GetUint(j, "num_terms", where));
  SEARCH_ASSIGN_OR_RETURN(e.num_postings, store::GetUint(j, "num_postings", where));
  SEARCH_ASSIGN_OR_RETURN(e.checksum, store::GetString(j, "checksum", where));
  if (e.id != index) return Status::Corruption(where + ": id " + std::to_string(e.id) + ", expected " + std::to_string(index));
  if (!ValidShardPath(e.path))
    return Status::Corruption(where + ": path '" + e.path + "' must be a plain name inside the index directory");
  if (!ValidChecksum(e.checksum))
    return Status::Corruption(where + ": checksum '" + e.checksum + "' is not crc32c:<8 lowercase hex digits>");
  uint32_t begin, end;
  ShardRange(num_docs, num_shards, e.id, &begin, &end);
  if (e.doc_begin != begin || e.doc_end != end)
    return Status::Corruption(where + ": doc range [" + std::to_string(e.doc_begin) + ", " + std::to_string(e.doc_end) +
                              ") but shard " + std::to_string(e.id) + " of " + std::to_string(num_shards) +
                              " over " + std::to_string(num_docs) + " docs is [" + std::to_string(begin) + ", " +
                              std::to_string(end) + ")");
  return e;
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("write " + path + ": " + ErrnoText());
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

std::string Manifest::ToJson() const {
  Json shards_json = Json::array();
  for (const auto& s : shards) {
    shards_json.push_back(Json{{"id", s.id},
                               {"path", s.path},
                               {"doc_begin", s.doc_begin},
                               {"doc_end", s.doc_end},
                               {"num_terms", s.num_terms},
                               {"num_postings", s.num_postings},
                               {"checksum", s.checksum}});
  }
  Json j{{"format_version", format_version},
         {"stats", store::StatsToJson(stats)},
         {"bm25", store::Bm25ToJson(bm25)},
         {"analyzer", store::AnalyzerToJson(analyzer)},
         {"shards", std::move(shards_json)},
         {"positions", positions},
         {"sources", sources},
         {"created_by", created_by}};
  // Invalid UTF-8 (in a path, say) is replaced rather than thrown; Write then refuses the result.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Result<Manifest> Manifest::FromJson(std::string_view text) {
  const std::string where = "manifest";
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    return Status::Corruption("manifest is not valid JSON: " + std::string(e.what()));
  }
  if (!j.is_object()) return Status::Corruption("manifest is not a JSON object");
  Manifest m;
  SEARCH_ASSIGN_OR_RETURN(uint64_t version, store::GetUint(j, "format_version", where, UINT32_MAX));
  if (version < kOldestIndexFormatVersion || version > kIndexFormatVersion)
    return store::FormatVersionMismatch("", version);
  m.format_version = static_cast<uint32_t>(version);
  SEARCH_ASSIGN_OR_RETURN(const Json* stats, store::GetObject(j, "stats", where));
  SEARCH_ASSIGN_OR_RETURN(m.stats, store::StatsFromJson(*stats, where + " stats"));
  SEARCH_ASSIGN_OR_RETURN(const Json* bm25, store::GetObject(j, "bm25", where));
  SEARCH_ASSIGN_OR_RETURN(m.bm25, store::Bm25FromJson(*bm25, where + " bm25"));
  SEARCH_ASSIGN_OR_RETURN(const Json* analyzer, store::GetObject(j, "analyzer", where));
  SEARCH_ASSIGN_OR_RETURN(m.analyzer, store::AnalyzerFromJson(*analyzer, where));
  SEARCH_ASSIGN_OR_RETURN(m.created_by, store::GetString(j, "created_by", where));
  SEARCH_ASSIGN_OR_RETURN(m.positions, store::GetBool(j, "positions", where));
  if (m.format_version >= 3) {  // version 2: no sources
    SEARCH_ASSIGN_OR_RETURN(m.sources, store::GetBool(j, "sources", where));
  }
  SEARCH_ASSIGN_OR_RETURN(const Json* shards, store::GetField(j, "shards", where));
  if (!shards->is_array() || shards->empty()) return Status::Corruption("manifest: field 'shards' must be a non-empty array");
  if (shards->size() > kMaxShards)
    return Status::Corruption("manifest: " + std::to_string(shards->size()) + " shards, at most " +
                              std::to_string(kMaxShards) + " are supported");
  const auto num_shards = static_cast<uint32_t>(shards->size());
  m.shards.reserve(num_shards);
  for (uint32_t i = 0; i < num_shards; ++i) {
    SEARCH_ASSIGN_OR_RETURN(ShardEntry e, ShardFromJson((*shards)[i], i, num_shards, m.stats.num_docs));
    m.shards.push_back(std::move(e));
  }
  return m;
}

Result<Manifest> Manifest::Read(const std::string& index_dir) {
  const std::string path = index_dir + "/" + kManifestName;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return Status::NotFound(path + " does not exist: not an index, or its build did not finish");
    return Status::IOError("open " + path + ": " + ErrnoText());
  }
  std::string text;
  char buf[1 << 16];
  Status st;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = Status::IOError("read " + path + ": " + ErrnoText());
      break;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxManifestBytes) {
      st = Status::Corruption(path + " is larger than " + std::to_string(kMaxManifestBytes) + " bytes");
      break;
    }
  }
  ::close(fd);
  SEARCH_RETURN_IF_ERROR(st);
  auto m = FromJson(text);
  if (!m.ok()) return m.status().WithContext(path);
  return m;
}

Status Manifest::Write(const std::string& index_dir) const {
  const std::string text = ToJson();
  // Refuse to write what Read would reject.
  if (auto check = FromJson(text); !check.ok())
    return Status::InvalidArgument("refusing to write an invalid manifest: " + check.status().message());
  const std::string path = index_dir + "/" + kManifestName;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("create " + tmp + ": " + ErrnoText());
  Status st = WriteAll(fd, text, tmp);
  if (st.ok() && ::fsync(fd) != 0) st = Status::IOError("fsync " + tmp + ": " + ErrnoText());
  if (::close(fd) != 0 && st.ok()) st = Status::IOError("close " + tmp + ": " + ErrnoText());
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = Status::IOError("rename " + tmp + ": " + ErrnoText());
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return SyncPath(index_dir);
}

Status SyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("open " + path + " for fsync: " + ErrnoText());
  Status st;
  if (::fsync(fd) != 0) st = Status::IOError("fsync " + path + ": " + ErrnoText());
  ::close(fd);
  return st;
}

Result<std::string> ComputeShardChecksum(const std::string& shard_dir) {
  std::error_code ec;
  if (!fs::is_directory(shard_dir, ec)) return Status::NotFound("shard directory " + shard_dir + " does not exist");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(shard_dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".sst") names.push_back(entry.path().filename().string());
  }
  if (ec) return Status::IOError("list " + shard_dir + ": " + ec.message());
  if (names.empty()) return Status::Corruption("shard directory " + shard_dir + " holds no SST files");
  std::sort(names.begin(), names.end());
  std::unique_ptr<char[]> buf(new char[kChecksumChunk]);
  uint32_t crc = 0;
  for (const auto& name : names) {
    const std::string path = shard_dir + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IOError("open " + path + ": " + ErrnoText());
    Status st;
    for (;;) {
      const ssize_t n = ::read(fd, buf.get(), kChecksumChunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        st = Status::IOError("read " + path + ": " + ErrnoText());
        break;
      }
      if (n == 0) break;
      crc = Crc32c(buf.get(), static_cast<size_t>(n), crc);
    }
    ::close(fd);
    SEARCH_RETURN_IF_ERROR(st);
  }
  char out[32];
  std::snprintf(out, sizeof(out), "crc32c:%08x", crc);
  return std::string(out);
}

Status VerifyIndex(const std::string& index_dir) {
  SEARCH_ASSIGN_OR_RETURN(Manifest m, Manifest::Read(index_dir));
  for (const auto& shard : m.shards) {
    const std::string name = "shard " + std::to_string(shard.id) + " (" + index_dir + "/" + shard.path + ")";
    auto sum = ComputeShardChecksum(index_dir + "/" + shard.path);
    if (!sum.ok()) return Status::Corruption(name + ": " + sum.status().message());
    if (*sum != shard.checksum)
      return Status::Corruption(name + ": checksum " + *sum + ", manifest says " + shard.checksum);
  }
  return Status::Ok();
}

}  // namespace search
