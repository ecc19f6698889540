// Fault injection into a shard's RocksDB for tests: corrupt what a disk or a bug would.
// Thread-safety: opens the database itself; the shard must not be open elsewhere.
#pragma once

#include <rocksdb/db.h>

#include <memory>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace search::testing {

// Flips a byte in the middle of `term`'s stored posting list (RocksDB column family "lists"),
// as a disk or software fault would: the list no longer passes its CRC.
inline Status CorruptList(const std::string& path, const std::string& term) {
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
  rocksdb::ColumnFamilyHandle* lists = nullptr;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == "lists") lists = handles[i];
  std::string value;
  Status out = Status::Ok();
  if (lists == nullptr) {
    out = Status::NotFound("no lists column family");
  } else if (!(s = db->Get(rocksdb::ReadOptions(), lists, term, &value)).ok()) {
    out = Status::NotFound(s.ToString());
  } else {
    value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x5a);
    s = db->Put(rocksdb::WriteOptions(), lists, term, value);
    if (s.ok()) s = db->Flush(rocksdb::FlushOptions(), lists);
    if (!s.ok()) out = Status::IOError(s.ToString());
  }
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  return out;
}

}  // namespace search::testing
