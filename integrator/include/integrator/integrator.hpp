// Integrator: the query front of the cluster, independent of HTTP. It parses a query once with
// the index's analyzer (the syntax, ParseQuerySyntax, or the Elasticsearch DSL, ParseSearchDsl;
// MakeQuery keeps a bag of words the flat query of before; a parse error is a 400 naming the
// position or the JSON path), answers from the result cache when it can, otherwise fans it out to
// every shard (Fanout) under one deadline, merges the per-shard top-k in docs/SCORING.md order and
// shapes the Elasticsearch-like JSON answer (answer.hpp). Counts (track_total_hits, /count) are the
// shards' exact totals summed; a shard that answers InvalidArgument (a phrase on an index without
// positions) makes the search a 400 with its reason.
//
// The analyzer comes from --index DIR's manifest when given, otherwise from the shards' pongs
// (ShardHealth.analyzerJson). Every shard must report the same analyzer, collection size and shard
// count, and distinct shard ids; otherwise searches are refused (503, illegal_state_exception) with a
// reason naming the shards, and /health is red.
//
// Query-then-fetch, as Elasticsearch's: when the search wants sources (_source, on by default) or
// highlights and has hits, the merged top-k is followed by one fetch round (Fanout::Fetch) to the
// shards that own those hits only, under the same deadline: such a search's query phase ends a
// fifth of its timeout early, which the fetch round keeps. A shard that fails or times out at
// fetch leaves its hits without source ("_source_missing": "fetch failed") and is listed in
// _shards.failures with "phase": "fetch"; the search stays a 200. Counts never fetch.
//
// andor across shards: the global rule is "AND; if the whole collection has fewer than k AND hits,
// OR" (docs/SCORING.md). A shard cannot decide that locally, so in one round trip every shard
// answers AND, plus OR when it alone has fewer than k AND hits, and the integrator takes the OR
// answers only when all shards' AND hits together are fewer than k (a shard that sent no OR hits
// gets a second round for OR under the same deadline); with a count, the totals of the answer
// taken. A count alone (k 0) under andor is the and count.
//
// Overload: when the searches running plus the requests waiting for an HTTP worker reach
// max_inflight, a search is answered 429 at once (no analysis, no fan-out).
// Thread-safety: HandleSearch, HealthJson and StatsJson are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/analyzer.hpp"
#include "core/status.hpp"
#include "integrator/answer.hpp"
#include "integrator/fanout.hpp"
#include "integrator/result_cache.hpp"
#include "integrator/search_params.hpp"
#include "integrator/stats_window.hpp"

namespace search {

// A search's path through the integrator, phase by phase (search_request_phase_seconds):
// kParse, the HTTP loop from the request's last bytes read to the search begun (HTTP and search
// parameter parsing, the API key); kToLane, from there to a fan-out lane sending it (the hand-off
// to the lane's thread); then, of the slowest shard's answer, kNodeQueue and kEngine, the node's
// time waiting for a worker and executing (its ExecStats), and kTransport, the rest of the round
// trip (both sides' ZeroMQ threads, TCP, the node's I/O loop); kToLoop, from the answer to the
// HTTP loop taking it up (the hand-back); with documents, kFetch, the fetch round from its start
// to the HTTP loop taking its answers up; kAnswer, from the last round's answers taken up to the
// reply written (merge, JSON, the socket write). One observation per phase and round.
enum class RequestPhase : uint8_t { kParse, kToLane, kNodeQueue, kEngine, kTransport, kToLoop, kFetch, kAnswer };
inline constexpr int kNumRequestPhases = 8;
const char* RequestPhaseName(RequestPhase p);

// Hooks for metrics (integrator_metrics.hpp implements them over Prometheus). Fanout events arrive
// on the I/O threads (one a fan-out lane), request events on HTTP threads; implementations must be
// thread-safe and quick.
class IntegratorObserver : public FanoutListener {
 public:
  // A phase of a search (RequestPhase), on the thread that saw it end.
  virtual void OnPhase(RequestPhase /*phase*/, double /*seconds*/) {}
  // mode: nullopt when the request did not parse; status: the HTTP status; partial: a 200 missing
  // some shards (timed_out: some shard missed the deadline).
  virtual void OnRequest(std::optional<QueryMode> /*mode*/, int /*http_status*/, bool /*partial*/,
                         bool /*timed_out*/, double /*seconds*/) {}
  virtual void OnInFlight(int /*delta*/) {}
  // The HTTP front (an event loop's thread): a request refused for its API key (401 missing or
  // malformed, 403 wrong), and a connection closed for the connection limit or the header timeout
  // (reason "max_connections", "header_timeout").
  virtual void OnHttpAuthFailure(int /*http_status*/) {}
  virtual void OnHttpConnectionRefused(const char* /*reason*/) {}
  // The HTTP front (an event loop's thread): a TLS handshake that failed, stalled past the I/O
  // timeout, or ended with the connection before it completed.
  virtual void OnTlsHandshakeFailure() {}
};

inline constexpr uint32_t kMaxFanoutLanes = 16;

// Fan-out lanes for an integrator that may run on `cpus` CPUs: two from 8 CPUs up, else one (on a
// small machine the second lane's thread costs more CPU than it spreads).
constexpr uint32_t DefaultFanoutLanes(unsigned cpus) { return cpus >= 8 ? 2 : 1; }

struct IntegratorOptions {
  std::vector<std::string> shards;    // ZeroMQ endpoints, one per shard ("a|b": its replicas)
  uint32_t default_timeout_ms = 500;  // Ding §9
  size_t cache_bytes = size_t{64} << 20;
  uint32_t max_inflight = 1024;
  std::string index_dir;              // optional: take the analyzer from DIR/manifest.json
  FanoutOptions fanout;               // endpoints are filled from `shards`
  // Fan-out lanes: each its own I/O thread and connections to every replica; searches take them in
  // turn (skipping a lane that does not have every shard up while another does). One thread
  // carries every request and reply of one lane, so at high rates a lane is a serial stage whose
  // stalls (its CPU taken away) hold every search it carries; more lanes split that load. Health
  // and shard up/down events come from the first lane. search-integrator's default is
  // DefaultFanoutLanes(its CPUs).
  uint32_t fanout_lanes = 1;
};

struct HttpReply {
  int status = 200;
  std::string body;  // JSON
};

class Integrator {
 public:
  // Reads the manifest when index_dir is set and starts the fan-out. `observer` may be null and
  // must outlive the Integrator.
  static Result<std::unique_ptr<Integrator>> Start(IntegratorOptions options, IntegratorObserver* observer);
  ~Integrator();

  // Answers one /search request (a parse error included, so that it is counted). `waiting`: the
  // requests queued behind this one for an HTTP worker; they count against max_inflight too.
  HttpReply HandleSearch(const ParsedSearch& parsed, size_t waiting = 0);
  // The same for an already valid request; exposed for tests and benchmarks.
  HttpReply Search(const SearchParams& params, size_t waiting = 0);

  // HandleSearch without blocking the calling thread (an event loop's). `done` gets the reply
  // exactly once: at once, on the calling thread, when no shard need be asked (a bad request, 429,
  // a cache hit, 400/503 before the fan-out); otherwise each fan-out round's results arrive on a
  // fan-out I/O thread, which hands them to `post` (it must queue the work for the caller's thread
  // and return at once), and the work, run there, merges the answer and calls `done`, or sends
  // andor's second round. Before any shard has reported, the search waits for the first report on
  // a thread of the Integrator's, then goes on through `post`. When `post` drops the work (its
  // loop stopped) `done` is never called, and the search's place in flight is released with it.
  using Post = std::function<void(std::function<void()>)>;
  using ReplyCallback = std::function<void(HttpReply)>;
  void HandleSearchAsync(const ParsedSearch& parsed, size_t waiting, const Post& post, ReplyCallback done);

  // For the thread of HTTP loop `loop`: its searches go to lane loop % lanes while that lane has
  // every shard up (PickLane's turn otherwise), and it joins that lane's CPU home (fanout.hpp,
  // core/cpu_home.hpp), so that at low load the loop, the lane and ZeroMQ's I/O thread share a CPU.
  // LeaveLane, before the thread ends, undoes both.
  void JoinLane(size_t loop);
  void LeaveLane();
  // Each lane's CPU home state, in lane order (never pinned where homes are off: fewer than 2 CPUs).
  std::vector<CpuHomeState> CpuHomes() const;

  // GET /health's body; `status`, when given, receives its "status" (green, yellow or red).
  std::string HealthJson(std::string* status = nullptr) const;
  std::string StatsJson() const;
  // "" when searches can run; otherwise why they are refused (analyzer unknown or disagreeing).
  std::string AnalyzerError() const;

  const ResultCache& cache() const { return cache_; }
  IntegratorObserver* observer() const { return observer_; }  // null when none
  size_t num_shards() const { return fanouts_.front()->num_shards(); }
  // Requests resent to another replica after a failure, and hedged, over every lane.
  uint64_t retries() const;
  uint64_t hedges() const;
  // Completes outstanding searches and stops the fan-out. Idempotent.
  void Stop();

 private:
  // Every lane's shard health, merged (MergeLaneHealth): /health, /stats and the status page.
  std::vector<ShardHealthView> LaneHealth() const;
  class Listener;
  class LaneListener;
  struct AnalyzerState {
    std::shared_ptr<const Analyzer> analyzer;  // null when error is set
    std::string error;
    bool waiting = false;  // no shard has reported yet (a fresh start): searches wait a little
  };

  Integrator(IntegratorOptions options, IntegratorObserver* observer);
  void OnHealth(size_t index, const ShardHealthMsg& health);  // I/O thread
  void RecomputeAnalyzer();                                  // REQUIRES: analyzer_mu_ held
  uint64_t CollectionDocs() const;  // documents in the whole collection as the nodes report (0: unknown)
  std::shared_ptr<const AnalyzerState> CurrentAnalyzer() const;
  // The analyzer once a shard has reported, waiting at most until `until` while none has.
  std::shared_ptr<const AnalyzerState> AnalyzerBy(std::chrono::steady_clock::time_point until) const;
  // A search's life, shared by Search (blocking) and HandleSearchAsync: Begin admits it and
  // answers what needs no shard; each round's results go to Advance, which asks for andor's second
  // round (nullopt, st.fetching false), for the fetch phase (nullopt, st.fetching true) or answers.
  struct SearchState;
  struct Begun {
    std::optional<HttpReply> reply;      // answered already
    std::shared_ptr<SearchState> state;  // admitted: fan it out
    bool must_wait = false;              // neither: no shard has reported, and the caller may not block
  };
  Begun Begin(const SearchParams& p, size_t waiting, std::chrono::steady_clock::time_point start, bool may_wait);
  static std::pair<QueryMode, uint32_t> FirstRound(const SearchState& st);  // mode and flags
  std::optional<HttpReply> Advance(SearchState& st, std::vector<ShardCallResult> results);
  // Merges the shards' top-k; answers, or plans the fetch phase (st.fetches) and returns nullopt.
  std::optional<HttpReply> Complete(SearchState& st, std::vector<ShardCallResult> results);
  // The fetch phase's results put into the merged answer, and the answer.
  HttpReply Fetched(SearchState& st, std::vector<ShardCallResult> results);
  HttpReply Answer(const SearchState& st, SearchAnswer a);  // caches a complete answer; the JSON
  void FetchRound(std::shared_ptr<SearchState> st, const Post& post, ReplyCallback done);
  SearchRequestMsg Request(const SearchState& st, QueryMode mode, uint32_t flags) const;
  Fanout& PickLane();
  void SearchAsyncFrom(const SearchParams& p, size_t waiting, std::chrono::steady_clock::time_point start,
                       bool may_wait, const Post& post, ReplyCallback done);
  void Round(std::shared_ptr<SearchState> st, QueryMode mode, uint32_t flags, const Post& post, ReplyCallback done);
  // A round's phases to the observer (RequestPhase): begun when Round handed it to a lane,
  // resumed when the HTTP loop took the answers up; timed: the nodes were asked for their times.
  void ObservePhases(std::chrono::steady_clock::time_point begun, std::chrono::steady_clock::time_point resumed,
                     const std::vector<ShardCallResult>& results, bool timed) const;
  static constexpr uint64_t kPhaseSample = 8;
  std::atomic<uint64_t> phase_sample_{0};
  void WaiterLoop();  // the waiter thread: asynchronous searches waiting for the first shard report
  HttpReply Finish(std::optional<QueryMode> mode, HttpReply reply, std::chrono::steady_clock::time_point start,
                   bool partial = false, bool timed_out = false);

  IntegratorOptions options_;
  IntegratorObserver* observer_;
  std::unique_ptr<Listener> listener_;          // the first lane's: every event
  std::unique_ptr<LaneListener> lane_listener_;  // the other lanes': per-request events only
  std::vector<std::unique_ptr<Fanout>> fanouts_;  // the lanes, never empty once started
  std::atomic<uint64_t> next_lane_{0};
  ResultCache cache_;
  StatsWindow window_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<uint64_t> requests_{0}, errors_{0}, partial_{0}, rejected_{0}, late_replies_{0};

  std::optional<AnalyzerConfig> manifest_analyzer_;
  uint64_t manifest_num_docs_ = 0;
  mutable std::mutex analyzer_mu_;
  std::vector<std::optional<ShardHealthMsg>> reported_;  // GUARDED_BY(analyzer_mu_)
  std::shared_ptr<const AnalyzerState> analyzer_;        // GUARDED_BY(analyzer_mu_)
  mutable std::condition_variable analyzer_cv_;          // notified when analyzer_ changes
  // Per shard (its position in --shards): its last pong said it stores no sources, so its hits are
  // "not stored" at once and it gets no fetch (there would be nothing to send or highlight).
  std::unique_ptr<std::atomic<bool>[]> no_sources_;

  struct Waiting {
    SearchParams params;
    size_t waiting = 0;
    std::chrono::steady_clock::time_point start;
    Post post;
    ReplyCallback done;
  };
  std::mutex waiter_mu_;
  std::condition_variable waiter_cv_;
  std::deque<Waiting> waiter_queue_;  // GUARDED_BY(waiter_mu_)
  bool waiter_stop_ = false;          // GUARDED_BY(waiter_mu_)
  std::thread waiter_;
};

}  // namespace search
