// The shard a benchmark reads: the directory named by SEARCH_BENCH_SHARD, opened once.
// OpenBenchShard gives the reader, or no reader and an error saying what to set or what failed
// (a benchmark then calls state.SkipWithError(error)). Thread-safety: as ShardReader's after Open.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "index_store/shard_store.hpp"

namespace search {

struct BenchShard {
  std::unique_ptr<ShardReader> shard;  // null when error is set
  std::string error;
};

// made_by: the searchctl command that makes a fitting shard ("index", "generate"), for the message;
// need_sources: a shard without stored sources is an error.
inline BenchShard OpenBenchShard(std::string_view made_by, bool need_sources) {
  BenchShard x;
  const char* path = std::getenv("SEARCH_BENCH_SHARD");
  if (path == nullptr) {
    x.error = "set SEARCH_BENCH_SHARD to a shard directory (searchctl " + std::string(made_by) +
              " ... --out DIR; DIR/shard-0)";
    return x;
  }
  auto r = ShardReader::Open(path);
  if (!r.ok()) {
    x.error = r.status().ToString();
    return x;
  }
  if (need_sources && !(*r)->has_sources()) {
    x.error = std::string(path) + " stores no sources";
    return x;
  }
  x.shard = std::move(r).value();
  return x;
}

}  // namespace search
