// The integrator's answer to one search and its JSON shapes (Elasticsearch-like):
//   search:  {"took": ms, "took_us": us, "timed_out": b, "cached": b,
//             "_shards": {"total", "successful", "failed", "failures": [{"shard", "reason"}]},
//             (a failure of the fetch phase adds "phase": "fetch" and, as in Elasticsearch, counts
//             as failed, not successful; its hits lack their documents; coverage, which is the
//             query phase's, still counts that shard)
//             "coverage": {"shards", "shards_total", "documents", "documents_total", "percent", "full"},
//             "hits": {"total": n, "max_score": s|null, "hits": [{"_id", "_score", "_shard", "_doc",
//                      "_source": {...}, "_source_missing": why, "highlight": {"contents": [...]}}]}}
//            where _source is the stored object spliced in byte for byte (never re-serialized),
//            present when the hit has one; _source_missing ("not stored", "fetch failed", "too
//            large": past what one fetch answer carries, 15 MiB) when the source was asked for and
//            is absent; highlight when the hit has fragments;
//            where hits.total is the number of hits returned, or with track_total_hits Elasticsearch's
//            {"value": N, "relation": "eq"|"gte"}: N the exact matches summed over the shards that
//            answered, "gte" when some shard did not (a lower bound; _shards and coverage say which)
//   count:   {"count": N, "timed_out": b, "cached": b, "_shards": {...}, "coverage": {...}} (Elasticsearch's
//            _count, N summed as above; a partial count is a lower bound, as _shards and coverage say)
//   error:   {"error": {"type", "reason"}, "status": http} (+ "_shards" when shards were asked)
//   health:  {"status": green|yellow|red, "shards": [{"shard", "endpoint", "state", "last_seen_ms", ...}]}
// MergeShardHits merges per-shard top-k lists in docs/SCORING.md order (score desc, smaller docID first).
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "integrator/result_cache.hpp"
#include "integrator/search_params.hpp"

namespace search {

struct ShardFailure {
  uint32_t shard = 0;
  std::string reason;
  bool fetch = false;  // failed the fetch phase (its hits lack their documents), not the query
};

struct ShardsSummary {
  uint32_t total = 0;
  uint32_t successful = 0;
  std::vector<ShardFailure> failures;  // failed = failures.size()
};

// Vespa-style coverage: how much of the collection the answer covers.
struct Coverage {
  uint64_t documents = 0;        // docs of the shards that answered
  uint64_t documents_total = 0;  // docs of the collection (0: unknown)
};

struct SearchAnswer {
  uint64_t took_us = 0;
  bool timed_out = false;
  bool cached = false;
  ShardsSummary shards;
  Coverage coverage;
  std::vector<MergedHit> hits;  // best first
  std::optional<uint64_t> total;  // counted: the matches in the shards that answered
  bool complete() const { return !timed_out && shards.failures.empty() && shards.successful == shards.total; }
  // The shards that answered the query phase: the successful ones and those that failed the fetch
  // phase only (as Elasticsearch's, _shards.successful leaves those out; coverage counts them).
  uint32_t query_shards() const {
    uint32_t n = shards.successful;
    for (const auto& f : shards.failures) n += f.fetch ? 1 : 0;
    return n;
  }
  // Every shard answered the query phase (the hits and the total are exact), whatever the fetch.
  bool query_complete() const {
    for (const auto& f : shards.failures)
      if (!f.fetch) return false;
    return !timed_out && query_shards() == shards.total;
  }
};

// The best k of all lists in docs/SCORING.md order (score desc, then smaller docID). Ties between equal
// (score, doc) pairs, which only a broken cluster produces, keep the first list's hit.
std::vector<MergedHit> MergeShardHits(const std::vector<std::vector<MergedHit>>& lists, uint32_t k);
// The same, moving the hits out of `lists` (left holding moved-from hits).
std::vector<MergedHit> MergeShardHits(std::vector<std::vector<MergedHit>>&& lists, uint32_t k);

std::string SearchAnswerJson(const SearchAnswer& answer);
// The _count shape of an answer (REQUIRES: answer.total).
std::string CountAnswerJson(const SearchAnswer& answer);
// `shards`: included when given (the 503 "no shard answered" case).
std::string ErrorJson(const RequestError& error, const ShardsSummary* shards = nullptr);

struct ShardHealthView {
  uint32_t shard = 0;      // the shard id the node reports (its position in --shards until known)
  std::string endpoint;
  std::string state;       // "up", "down", "mismatch"
  int64_t last_seen_ms = -1;  // ms since the last pong or reply; -1 = never
  std::string node_state;  // the node's own state string ("serving", "draining", ...), if known
  uint32_t in_flight = 0, queued = 0;
  uint32_t doc_begin = 0, doc_end = 0;
  bool gpu = false;
  std::string last_error;
  uint32_t replicas = 1, replicas_up = 0;
  struct Replica {
    std::string endpoint, state, node_state, last_error;
  };
  std::vector<Replica> replica_detail;  // every replica of the shard
};

// The integrator's view from each lane's own connections (one Fanout a lane): a replica is up only
// where it is up in every lane, so that "up" means any search, on any loop, reaches it.
std::vector<ShardHealthView> MergeLaneHealth(std::vector<std::vector<ShardHealthView>> lanes);

// green: every shard up; yellow: some up; red: none up.
std::string HealthStatus(const std::vector<ShardHealthView>& shards);
// GET /health's status: HealthStatus, or red while searches are refused (analyzer_error not empty).
std::string HealthStatus(const std::vector<ShardHealthView>& shards, const std::string& analyzer_error);
std::string HealthJson(const std::vector<ShardHealthView>& shards, const std::string& analyzer_error);
// The HTTP status of `GET /health?wait_for_status=W` (Elasticsearch's parameter, for readiness
// probes): 200 when `status` is W or better (green > yellow > red), 503 when worse (it answers at
// once, it does not wait), 400 when W is not green, yellow or red.
int HealthHttpStatus(const std::string& status, const std::string& wait_for_status);

}  // namespace search
