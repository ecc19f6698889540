// searchctl's subcommands: one argument struct per subcommand, the function that registers its
// options with CLI11 and the function that runs it (pisa tools/ style: one .cpp per subcommand).
// Exit codes: 0 success, 1 failure (bad input, corrupt index, I/O), 2 bad command-line arguments.
// Thread-safety: used from main's thread only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common.hpp"  // kExitOk, kExitFailure, kExitUsage

namespace search::cli {

struct IndexArgs {
  std::string input;
  std::string out;
  uint32_t shards = 1;
  std::string stem;
  std::string stopwords;
  bool skip_bad = false;
  bool no_positions = false;
  bool no_source = false;
  uint64_t memory_mb = 1024;
  uint32_t threads = 0;
  bool force = false;
  bool quiet = false;
  uint64_t merge_fan_in = 128;  // hidden: runs merged at once
};
CLI::App* AddIndexCommand(CLI::App& app, IndexArgs* args);
int RunIndex(const IndexArgs& args);

struct QueryArgs {
  std::string index;
  std::string mode = "and";
  int64_t k = 10;
  std::string query;
  std::string queries;
  uint32_t threads = 1;
  bool count = false;  // also the exact number of matches; with k 0, only that
  bool source = false;  // also each hit's stored source ("_source")
};
CLI::App* AddQueryCommand(CLI::App& app, QueryArgs* args);
int RunQuery(const QueryArgs& args);

struct BenchArgs {
  std::string index;
  std::string queries;
  std::string mode = "and";
  int64_t k = 10;
  uint32_t threads = 0;            // 0: the CPUs this process may use
  double seconds = 10;
  double warmup = 1;
  std::string engine = "cpu";      // cpu | gpu
  uint32_t batch = 64;             // queries per GPU launch sequence
  uint64_t gpu_cache_mib = 0;      // GPU list cache per shard; 0: kGpuListCacheShare of free GPU memory
  bool cold = false;               // no untimed pass first; gpu: also empty the GPU cache before every batch
  std::vector<std::string> tuning;  // --tuning KEY=VALUE: experimental settings (bench_cmd.cpp's table)
  uint32_t verify = 0;             // gpu: queries checked against the CPU engine after the run
  std::string per_query;           // after the run: each query timed alone, one CSV row each
  uint64_t list_cache_mib = 0;     // main-memory list cache per shard; 0: PlanListCache
  std::string command = "top";     // top | topcount | count (the search-benchmark-game's commands)
};
CLI::App* AddBenchCommand(CLI::App& app, BenchArgs* args);
int RunBench(const BenchArgs& args);

struct LoadgenArgs {
  std::string url = "http://127.0.0.1:9200";  // the integrator
  std::string queries;
  std::string mode = "and";
  int64_t k = 10;
  double rate = 100;            // mean arrivals per second (Poisson)
  double seconds = 10;          // measured arrivals
  double warmup = 1;            // arrivals before the measured ones, at the same rate
  bool ramp_up = false;         // the warm-up's rate rises linearly from 0 to `rate` instead
  bool no_source = false;       // ask for ids only (_source=false): the query phase alone, no fetch round
  bool keep_idle = false;       // never close an idle connection (default: closed after 1 s idle)
  int64_t deadline_ms = 500;    // sent as timeout_ms; a later or partial answer is a miss
  uint32_t connections = 64;    // concurrent kept-alive HTTP connections
  uint32_t threads = 0;         // event loops sharing the connections; 0: a quarter of the cores, 1..4
  uint64_t seed = 1;
  std::string trace;            // CSV of every query (arrival, latency, status); empty: none
  bool pin_loops = false;       // each loop on one CPU of the process's mask (loop l on the l-th, modulo)
  std::string cacert;           // https: the CA certificates (PEM) to verify the integrator against
  std::string api_key;          // ID:KEY sent as Authorization: ApiKey base64(ID:KEY); empty: none
};
CLI::App* AddLoadgenCommand(CLI::App& app, LoadgenArgs* args);
int RunLoadgen(const LoadgenArgs& args);

struct GenQueriesArgs {
  std::string index;
  uint64_t count = 1000;
  std::string out;
  uint64_t seed = 1;
  std::string lengths = "25,30,25,20";
  uint32_t min_df = 2;
  double df_exponent = 0.8;
  double four_share = -1;
};
CLI::App* AddGenQueriesCommand(CLI::App& app, GenQueriesArgs* args);
int RunGenQueries(const GenQueriesArgs& args);

struct VerifyArgs {
  std::string index;
};
CLI::App* AddVerifyCommand(CLI::App& app, VerifyArgs* args);
int RunVerify(const VerifyArgs& args);

}  // namespace search::cli
