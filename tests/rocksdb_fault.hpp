// Fault injection into a shard's RocksDB for tests: corrupt what a disk or a bug would.
// Thread-safety: opens the database itself; the shard must not be open elsewhere.
#pragma once

#include <rocksdb/db.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.hpp"

namespace search::testing {

// Opens the shard's RocksDB at `path` with all its column families and returns
// fn(db, the handle of column family `family`, or null when the database has none).
inline Status WithColumnFamily(const std::string& path, const std::string& family,
                               const std::function<Status(rocksdb::DB*, rocksdb::ColumnFamilyHandle*)>& fn) {
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  if (!s.ok()) return Status::IOError(s.ToString());
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::Open(rocksdb::DBOptions(), path, cfs, &handles, &raw);
  if (!s.ok()) return Status::IOError(s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::ColumnFamilyHandle* handle = nullptr;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == family) handle = handles[i];
  Status out = fn(db.get(), handle);
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  return out;
}

// Flips a byte in the middle of `term`'s stored posting list (RocksDB column family "lists"),
// as a disk or software fault would: the list no longer passes its CRC.
inline Status CorruptList(const std::string& path, const std::string& term) {
  return WithColumnFamily(path, "lists", [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* lists) {
    if (lists == nullptr) return Status::NotFound("no lists column family");
    std::string value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), lists, term, &value);
    if (!s.ok()) return Status::NotFound(s.ToString());
    value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x5a);
    s = db->Put(rocksdb::WriteOptions(), lists, term, value);
    if (s.ok()) s = db->Flush(rocksdb::FlushOptions(), lists);
    if (!s.ok()) return Status::IOError(s.ToString());
    return Status::Ok();
  });
}

// Flips a byte in the middle of every stored source block (column family "source"): their
// checksums fail. NotFound when the shard stores no source blocks.
inline Status CorruptSources(const std::string& path) {
  return WithColumnFamily(path, "source", [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* source) {
    Status out = Status::NotFound("no source blocks");
    if (source == nullptr) return out;
    std::vector<std::pair<std::string, std::string>> blocks;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), source));
    for (it->SeekToFirst(); it->Valid(); it->Next()) blocks.emplace_back(it->key().ToString(), it->value().ToString());
    rocksdb::Status s;
    for (auto& [key, value] : blocks) {
      if (value.empty()) continue;
      value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x5a);
      s = db->Put(rocksdb::WriteOptions(), source, key, value);
      if (!s.ok()) break;
      out = Status::Ok();
    }
    if (s.ok()) s = db->Flush(rocksdb::FlushOptions(), source);
    if (!s.ok()) out = Status::IOError(s.ToString());
    return out;
  });
}

}  // namespace search::testing
