#include "integrator/integrator.hpp"

#include <map>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "index_store/manifest.hpp"
#include "core/cpu_home.hpp"
#include "core/cpus.hpp"
#include "core/highlight.hpp"
#include "core/log.hpp"
#include "core/query_parser.hpp"
#include "core/query_tree.hpp"

namespace search {
namespace {

using Clock = std::chrono::steady_clock;

const Logger& Log() {
  static const Logger kLog("integrator");
  return kLog;
}

HttpReply Error(int status, std::string type, std::string reason, const ShardsSummary* shards = nullptr) {
  return {status, ErrorJson(RequestError{status, std::move(type), std::move(reason)}, shards)};
}

uint64_t MicrosSince(Clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

// Seconds from `from` to `to`, never negative (a phase's length: RequestPhase).
double SecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

// Canonical form for comparing analyzers reported as JSON: parsed and re-serialised.
std::string CanonicalAnalyzer(const std::string& json, std::string* error) {
  auto cfg = AnalyzerConfig::FromJson(json);
  if (!cfg.ok()) {
    *error = cfg.status().ToString();
    return {};
  }
  return cfg->ToJson();
}

}  // namespace

// Forwards fan-out events to the observer and watches the analyzer the shards report.
class Integrator::Listener : public FanoutListener {
 public:
  explicit Listener(Integrator* owner) : owner_(owner) {}
  void OnShardReply(size_t i, ShardCallState s, double sec) override {
    if (owner_->observer_) owner_->observer_->OnShardReply(i, s, sec);
  }
  void OnLateReply(size_t i) override {
    owner_->late_replies_.fetch_add(1, std::memory_order_relaxed);
    if (owner_->observer_) owner_->observer_->OnLateReply(i);
  }
  void OnMalformedReply(size_t i, const Status& why) override {
    Log().Warn() << "malformed reply from " << owner_->options_.shards[i] << ": " << why.ToString();
    if (owner_->observer_) owner_->observer_->OnMalformedReply(i, why);
  }
  void OnShardUp(size_t i, bool up) override {
    Log().Info() << "shard endpoint " << owner_->options_.shards[i] << (up ? " up" : " down");
    if (owner_->observer_) owner_->observer_->OnShardUp(i, up);
  }
  void OnHealth(size_t i, const ShardHealthMsg& h) override {
    owner_->OnHealth(i, h);
    if (owner_->observer_) owner_->observer_->OnHealth(i, h);
  }
  void OnRetry(size_t i) override {
    if (owner_->observer_) owner_->observer_->OnRetry(i);
  }
  void OnHedge(size_t i) override {
    if (owner_->observer_) owner_->observer_->OnHedge(i);
  }

 private:
  Integrator* owner_;
};

// The lanes after the first: their per-request events count like the first lane's, but shard
// up/down and health come from the first lane alone (every lane sees the same nodes).
class Integrator::LaneListener : public FanoutListener {
 public:
  explicit LaneListener(FanoutListener* all) : all_(all) {}
  void OnShardReply(size_t i, ShardCallState s, double sec) override { all_->OnShardReply(i, s, sec); }
  void OnLateReply(size_t i) override { all_->OnLateReply(i); }
  void OnMalformedReply(size_t i, const Status& why) override { all_->OnMalformedReply(i, why); }
  void OnRetry(size_t i) override { all_->OnRetry(i); }
  void OnHedge(size_t i) override { all_->OnHedge(i); }

 private:
  FanoutListener* all_;
};

Integrator::Integrator(IntegratorOptions options, IntegratorObserver* observer)
    : options_(std::move(options)), observer_(observer), cache_(options_.cache_bytes) {}

Integrator::~Integrator() { Stop(); }

Result<std::unique_ptr<Integrator>> Integrator::Start(IntegratorOptions options, IntegratorObserver* observer) {
  if (options.shards.empty()) return Status::InvalidArgument("--shards lists no endpoint");
  if (options.default_timeout_ms < 1 || options.default_timeout_ms > kMaxTimeoutMs)
    return Status::InvalidArgument("--timeout-ms must be in 1.." + std::to_string(kMaxTimeoutMs));
  if (options.max_inflight < 1) return Status::InvalidArgument("--max-inflight must be at least 1");
  if (options.fanout_lanes < 1 || options.fanout_lanes > kMaxFanoutLanes)
    return Status::InvalidArgument("fanout_lanes must be in 1.." + std::to_string(kMaxFanoutLanes));
  std::unique_ptr<Integrator> in(new Integrator(std::move(options), observer));
  if (!in->options_.index_dir.empty()) {
    auto m = Manifest::Read(in->options_.index_dir);
    if (!m.ok()) return m.status().WithContext("--index " + in->options_.index_dir);
    in->manifest_analyzer_ = m->analyzer;
    in->manifest_num_docs_ = m->stats.num_docs;
    if (m->shards.size() != in->options_.shards.size())
      return Status::InvalidArgument("--index " + in->options_.index_dir + " has " + std::to_string(m->shards.size()) +
                                     " shards but --shards lists " + std::to_string(in->options_.shards.size()));
  }
  {
    std::lock_guard lock(in->analyzer_mu_);
    in->reported_.assign(in->options_.shards.size(), std::nullopt);
    in->no_sources_ = std::make_unique<std::atomic<bool>[]>(in->options_.shards.size());
    in->RecomputeAnalyzer();
  }
  in->listener_ = std::make_unique<Listener>(in.get());
  in->lane_listener_ = std::make_unique<LaneListener>(in->listener_.get());
  const int home = CpuHome::PickHome(AllowedCpus());  // the same for every lane: one home a host
  for (uint32_t lane = 0; lane < in->options_.fanout_lanes; ++lane) {
    FanoutOptions fo = in->options_.fanout;
    fo.endpoints = in->options_.shards;
    fo.home_cpu = home;
    FanoutListener* l = lane == 0 ? static_cast<FanoutListener*>(in->listener_.get()) : in->lane_listener_.get();
    SEARCH_ASSIGN_OR_RETURN(auto f, Fanout::Start(std::move(fo), l));
    in->fanouts_.push_back(std::move(f));
  }
  in->waiter_ = std::thread([raw = in.get()] { raw->WaiterLoop(); });
  return in;
}

void Integrator::Stop() {
  {
    std::lock_guard lock(waiter_mu_);
    waiter_stop_ = true;
  }
  waiter_cv_.notify_all();
  {  // the waiter may be waiting for the first shard report (WaiterLoop): under the lock, so that
     // it is either before its check of waiter_stop_ or already waiting
    std::lock_guard lock(analyzer_mu_);
  }
  analyzer_cv_.notify_all();
  if (waiter_.joinable() && waiter_.get_id() != std::this_thread::get_id()) waiter_.join();
  for (auto& f : fanouts_) f->Stop();
}

uint64_t Integrator::retries() const {
  uint64_t n = 0;
  for (const auto& f : fanouts_) n += f->retries();
  return n;
}

uint64_t Integrator::hedges() const {
  uint64_t n = 0;
  for (const auto& f : fanouts_) n += f->hedges();
  return n;
}

void Integrator::OnHealth(size_t index, const ShardHealthMsg& health) {
  no_sources_[index].store(!health.has_sources, std::memory_order_relaxed);
  std::lock_guard lock(analyzer_mu_);
  auto& slot = reported_[index];
  const bool changed = !slot || slot->analyzer_json != health.analyzer_json ||
                       slot->num_docs_global != health.num_docs_global || slot->num_shards != health.num_shards ||
                       slot->shard_id != health.shard_id;
  slot = health;
  if (changed) RecomputeAnalyzer();
}

void Integrator::RecomputeAnalyzer() {
  auto state = std::make_shared<AnalyzerState>();
  std::string error;
  std::optional<std::string> agreed;  // canonical analyzer JSON
  std::string agreed_from;
  if (manifest_analyzer_) {
    agreed = manifest_analyzer_->ToJson();
    agreed_from = "the index manifest (--index)";
  }
  std::optional<uint64_t> num_docs;
  if (manifest_analyzer_) num_docs = manifest_num_docs_;
  std::map<uint32_t, size_t> ids;
  const size_t n = reported_.size();
  for (size_t i = 0; i < n && error.empty(); ++i) {
    if (!reported_[i]) continue;
    const ShardHealthMsg& h = *reported_[i];
    const std::string who = "shard " + std::to_string(h.shard_id) + " (" + options_.shards[i] + ")";
    std::string parse_error;
    const std::string canon = CanonicalAnalyzer(h.analyzer_json, &parse_error);
    if (!parse_error.empty()) {
      error = who + " reports an unreadable analyzer: " + parse_error;
      break;
    }
    if (!agreed) {
      agreed = canon;
      agreed_from = who;
    }
    if (*agreed != canon) {
      error = "shards disagree on the analyzer: " + agreed_from + " has " + *agreed + " but " + who + " has " + canon;
    } else if (num_docs && *num_docs != h.num_docs_global) {
      error = "shards disagree on the collection size: " + std::to_string(*num_docs) + " documents vs " +
              std::to_string(h.num_docs_global) + " at " + who;
    } else if (h.num_shards != 0 && h.num_shards != n) {
      error = who + " belongs to an index of " + std::to_string(h.num_shards) + " shards but --shards lists " +
              std::to_string(n);
    } else if (auto [it, fresh] = ids.emplace(h.shard_id, i); !fresh) {
      error = "two endpoints serve shard " + std::to_string(h.shard_id) + ": " + options_.shards[it->second] +
              " and " + options_.shards[i];
    }
    if (!num_docs) num_docs = h.num_docs_global;
  }
  if (error.empty() && !agreed) {
    error = "no shard has reported its analyzer yet (waiting for pongs)";
    state->waiting = true;
  }
  if (error.empty()) {
    auto cfg = AnalyzerConfig::FromJson(*agreed);
    if (cfg.ok()) {
      auto an = Analyzer::Create(*cfg);
      if (an.ok()) {
        // Reuse the current analyzer when nothing changed (keeps its per-thread stemmers warm).
        if (analyzer_ && analyzer_->analyzer && analyzer_->analyzer->config() == *cfg)
          state->analyzer = analyzer_->analyzer;
        else
          state->analyzer = std::make_shared<const Analyzer>(std::move(*an));
      } else {
        error = "cannot build the index's analyzer: " + an.status().ToString();
      }
    } else {
      error = "cannot read the index's analyzer: " + cfg.status().ToString();
    }
  }
  if (!error.empty()) state->analyzer.reset();
  // Logged on changes only (the first state, "waiting for pongs", is not news).
  if ((analyzer_ && error != analyzer_->error) || (!analyzer_ && error.empty())) {
    if (error.empty())
      Log().Info() << "searches enabled: analyzer " << *agreed;
    else
      Log().Warn() << "searches refused: " << error;
  }
  state->error = std::move(error);
  analyzer_ = std::move(state);
  analyzer_cv_.notify_all();
}

std::shared_ptr<const Integrator::AnalyzerState> Integrator::CurrentAnalyzer() const {
  std::lock_guard lock(analyzer_mu_);
  return analyzer_;
}

std::shared_ptr<const Integrator::AnalyzerState> Integrator::AnalyzerBy(Clock::time_point until) const {
  std::unique_lock lock(analyzer_mu_);
  analyzer_cv_.wait_until(lock, until, [&] { return !analyzer_->waiting; });
  return analyzer_;
}

std::string Integrator::AnalyzerError() const { return CurrentAnalyzer()->error; }

HttpReply Integrator::Finish(std::optional<QueryMode> mode, HttpReply reply, Clock::time_point start, bool partial,
                             bool timed_out) {
  const double sec = static_cast<double>(MicrosSince(start)) * 1e-6;
  requests_.fetch_add(1, std::memory_order_relaxed);
  if (reply.status != 200) errors_.fetch_add(1, std::memory_order_relaxed);
  window_.Record(sec);
  if (observer_) observer_->OnRequest(mode, reply.status, partial, timed_out, sec);
  return reply;
}

HttpReply Integrator::HandleSearch(const ParsedSearch& parsed, size_t waiting) {
  if (!parsed.ok()) {
    const RequestError& e = *parsed.error;
    return Finish(std::nullopt, {e.http_status, ErrorJson(e)}, Clock::now());
  }
  return Search(parsed.params, waiting);
}

// One admitted search between its rounds: what the rounds and the answer need, and its place among
// the searches in flight (released when the state goes, on whichever thread ends it).
struct Integrator::SearchState {
  Integrator* self = nullptr;
  SearchParams params;
  Clock::time_point start;
  Query query;            // as the shards get it: MakeQuery's (flat for a bag of words without a count)
  std::string cache_key;  // empty without the cache
  Clock::time_point deadline;
  int64_t deadline_unix = 0;
  // The query phase's: the deadline less the fetch phase's reserve when the search will fetch.
  Clock::time_point query_deadline;
  int64_t query_deadline_unix = 0;
  bool or_round = false;                     // andor's second round is out
  std::vector<ShardCallResult> and_results;  // andor: the first round's, while the second is out
  bool source = true, highlight = false;     // what the fetch phase adds to each hit
  // The fetch phase (query-then-fetch): the merged answer waiting for its documents, and the
  // request of each shard that owns some of its hits (endpoint order).
  bool fetching = false;
  SearchAnswer answer;
  std::vector<std::optional<FetchRequestMsg>> fetches;
  std::vector<std::vector<size_t>> fetch_hits;  // per shard: the answer's hits its request asks for, in order
  SearchState() = default;
  SearchState(const SearchState&) = delete;
  SearchState& operator=(const SearchState&) = delete;
  ~SearchState() {
    if (!self) return;
    self->in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    if (self->observer_) self->observer_->OnInFlight(-1);
  }
};

SearchRequestMsg Integrator::Request(const SearchState& st, QueryMode mode, uint32_t flags) const {
  SearchRequestMsg req;
  req.terms = st.query.terms;
  req.mode = mode;
  req.k = st.query.k;
  req.tree = st.query.tree;
  req.count = st.query.count;
  req.flags = flags;
  req.deadline_unix_micros = st.query_deadline_unix;
  return req;
}

namespace {
// The lane of the calling HTTP loop thread (Integrator::JoinLane), or none. A loop thread serves
// one Integrator; a search started elsewhere (Search, a waiter's hand-off) takes the lanes in turn.
thread_local const Integrator* t_lane_owner = nullptr;
thread_local size_t t_lane = 0;
}  // namespace

void Integrator::JoinLane(size_t loop) {
  t_lane_owner = this;
  t_lane = loop % fanouts_.size();
  fanouts_[t_lane]->JoinHome();
}

std::vector<CpuHomeState> Integrator::CpuHomes() const {
  std::vector<CpuHomeState> out;
  for (const auto& f : fanouts_)
    if (std::optional<CpuHomeState> s = f->HomeState()) out.push_back(*s);
  return out;
}

void Integrator::LeaveLane() {
  if (t_lane_owner != this) return;
  fanouts_[t_lane]->LeaveHome();
  t_lane_owner = nullptr;
}

Fanout& Integrator::PickLane() {
  // The calling loop's own lane while it has every shard up; else the lanes in turn: a lane still
  // without every shard up (just started, or its connection to a node dropped) gives its turn to
  // the next one that has them all.
  if (t_lane_owner == this && fanouts_[t_lane]->AllUp()) return *fanouts_[t_lane];
  const size_t n = fanouts_.size();
  const size_t first = n == 1 ? 0 : static_cast<size_t>(next_lane_.fetch_add(1, std::memory_order_relaxed) % n);
  for (size_t i = 0; i < n; ++i) {
    const size_t l = (first + i) % n;
    if (fanouts_[l]->AllUp()) return *fanouts_[l];
  }
  return *fanouts_[first];
}

Integrator::Begun Integrator::Begin(const SearchParams& p, size_t waiting, Clock::time_point start, bool may_wait) {
  Begun out;
  const QueryMode mode_name = p.mode;
  // A freshly started integrator (a restart under load) has not heard from any shard yet: the
  // search waits for the first report, up to its deadline (at most 2 s), instead of a 503. A
  // caller that may not block is told so before the search counts as in flight.
  auto an = CurrentAnalyzer();
  if (an->waiting && !may_wait) {
    out.must_wait = true;
    return out;
  }
  // Overload: bound the searches in flight.
  const int64_t before = in_flight_.fetch_add(1, std::memory_order_acq_rel);
  if (before + static_cast<int64_t>(waiting) >= static_cast<int64_t>(options_.max_inflight)) {
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    rejected_.fetch_add(1, std::memory_order_relaxed);
    out.reply = Finish(mode_name,
                       Error(429, "es_rejected_execution_exception",
                             "too many searches in flight or queued (at most " +
                                 std::to_string(options_.max_inflight) + ")"),
                       start);
    return out;
  }
  if (observer_) observer_->OnInFlight(+1);
  auto st = std::make_shared<SearchState>();
  st->self = this;  // from here the state releases the search's place
  st->params = p;
  st->start = start;

  if (an->waiting) {
    const auto timeout = std::chrono::milliseconds(p.timeout_ms.value_or(options_.default_timeout_ms));
    an = AnalyzerBy(start + std::min<Clock::duration>(timeout, std::chrono::seconds(2)));
  }
  if (!an->analyzer) {
    out.reply = Finish(mode_name, Error(503, "illegal_state_exception", an->error), start);
    return out;
  }
  // The query: the syntax (a bag of words keeps its flat Query and its fast paths) or the DSL, both
  // analyzed here, once, with the cluster's analyzer.
  uint32_t k = p.k;
  bool count = p.track_total_hits || p.count_only;
  bool source = p.source, highlight = p.highlight;
  Result<QueryNode> tree = Status::Internal("not parsed");
  if (p.is_dsl) {
    auto body = ParseSearchDsl(p.dsl, *an->analyzer);
    if (body.ok()) {
      if (p.count_only && (body->size.has_value() || body->track_total_hits.has_value())) {
        body = Status::InvalidArgument(std::string(body->size.has_value() ? "size" : "track_total_hits") +
                                       ": not a field of a _count body (it takes query only)");
      } else {
        k = body->size.value_or(kDefaultK);
        count = count || body->track_total_hits.value_or(false) || k == 0;
        source = body->source.value_or(source);
        highlight = highlight || body->highlight;
        tree = std::move(body->tree);
      }
    }
    if (!body.ok()) tree = body.status();
  } else {
    tree = ParseQuerySyntax(p.q, *an->analyzer);
  }
  if (!tree.ok()) {
    out.reply = Finish(mode_name, Error(400, p.is_dsl ? "parsing_exception" : "query_shard_exception",
                                        "failed to parse the query: " + tree.status().message()),
                       start);
    return out;
  }
  if (p.count_only) {  // a count never fetches
    k = 0;
    source = highlight = false;
  }
  st->source = source;
  st->highlight = highlight;
  st->query = MakeQuery(std::move(tree).value(), p.mode, k, count);
  const std::vector<std::string>& terms = st->query.terms;
  if (terms.size() > kMaxTerms) {
    out.reply = Finish(mode_name,
                       Error(400, "illegal_argument_exception",
                             "query has " + std::to_string(terms.size()) + " distinct terms (at most " +
                                 std::to_string(kMaxTerms) + ")"),
                       start);
    return out;
  }
  for (const auto& t : terms)
    if (t.size() > kMaxTermBytes) {
      out.reply = Finish(mode_name,
                         Error(400, "illegal_argument_exception",
                               "query term of " + std::to_string(t.size()) + " bytes (at most " +
                                   std::to_string(kMaxTermBytes) + ")"),
                         start);
      return out;
    }

  const uint32_t n = static_cast<uint32_t>(num_shards());
  if (cache_.capacity_bytes() > 0) {
    st->cache_key = ResultCacheKey(st->query, st->source, st->highlight);
    std::optional<uint64_t> total;
    auto cached = cache_.Lookup(st->cache_key, &total);
    if (cached && total.has_value() == st->query.count) {
      SearchAnswer a;
      a.cached = true;
      a.shards.total = n;
      a.shards.successful = n;
      a.hits = std::move(*cached);
      a.total = total;
      a.took_us = MicrosSince(start);
      out.reply = Finish(mode_name, {200, p.count_only ? CountAnswerJson(a) : SearchAnswerJson(a)}, start);
      return out;
    }
  }

  const uint32_t timeout_ms = p.timeout_ms.value_or(options_.default_timeout_ms);
  st->deadline = start + std::chrono::milliseconds(timeout_ms);
  st->deadline_unix =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count() +
      int64_t{timeout_ms} * 1000 - static_cast<int64_t>(MicrosSince(start));
  // A search that will fetch keeps the last fifth of its deadline for the fetch phase, so that a
  // shard silent until the query phase's end still leaves the others' hits time to get their
  // documents (a fetch takes a node microseconds to a few milliseconds; a query phase that ends
  // early leaves the fetch more).
  bool sources_somewhere = false;  // a cluster of shards without sources (generate, import-ciff) never fetches
  for (size_t i = 0; i < num_shards() && !sources_somewhere; ++i)
    sources_somewhere = !no_sources_[i].load(std::memory_order_relaxed);
  const bool will_fetch = !p.count_only && st->query.k > 0 && (st->source || st->highlight) && sources_somewhere;
  const int64_t reserve_us = will_fetch ? int64_t{timeout_ms} * 1000 / 5 : 0;
  st->query_deadline = st->deadline - std::chrono::microseconds(reserve_us);
  st->query_deadline_unix = st->deadline_unix - reserve_us;
  out.state = std::move(st);
  return out;
}

std::pair<QueryMode, uint32_t> Integrator::FirstRound(const SearchState& st) {
  // andor: one round trip: every shard answers AND, plus OR when it alone has fewer than k AND
  // hits. (Sent as mode and: a node that does not know the flag answers AND alone, and a second
  // round, from Advance, makes it exact.)
  // With k 0 (a count alone) andor is and: no split.
  if (st.query.mode == QueryMode::kAndOr) return {QueryMode::kAnd, st.query.k > 0 ? kFlagAndOrSplit : 0};
  return {st.query.mode, 0};
}

std::optional<HttpReply> Integrator::Advance(SearchState& st, std::vector<ShardCallResult> results) {
  // A shard that refused the request itself (InvalidArgument: a phrase on an index without
  // positions, ...) makes it a bad request, whatever the others answered.
  for (const auto& r : results)
    if (r.node_status.code() == StatusCode::kInvalidArgument)
      return Finish(st.params.mode, Error(400, "illegal_argument_exception", r.node_status.message()), st.start);
  const Query& q = st.query;
  if (q.mode == QueryMode::kAndOr && q.k > 0 && !st.or_round) {
    // Fewer than k AND hits over the shards that answered means each of them sent OR: OR decides.
    size_t and_hits = 0;
    bool all_or = true;
    for (const auto& r : results) {
      if (r.state != ShardCallState::kOk) continue;
      and_hits += r.hits.size();
      all_or = all_or && r.has_or_hits;
    }
    if (and_hits < q.k && all_or) {
      for (auto& r : results)
        if (r.state == ShardCallState::kOk) {
          r.hits = std::move(r.or_hits);
          r.total = r.or_total;
        }
    } else if (and_hits < q.k) {
      // A node without the split (an older version) sent no OR hits: a second round for OR.
      // The whole collection (as far as it answered) has fewer than k AND hits: OR decides.
      st.or_round = true;
      st.and_results = std::move(results);
      return std::nullopt;
    }
  } else if (st.or_round) {
    // A shard that failed the AND phase leaves the answer partial even if it answered OR.
    for (size_t i = 0; i < results.size() && i < st.and_results.size(); ++i)
      if (st.and_results[i].state != ShardCallState::kOk && results[i].state == ShardCallState::kOk) {
        results[i].state = st.and_results[i].state;
        results[i].reason = st.and_results[i].reason + " (AND phase of andor)";
        results[i].hits.clear();
      }
  }
  return Complete(st, std::move(results));
}

std::optional<HttpReply> Integrator::Complete(SearchState& st, std::vector<ShardCallResult> results) {
  const SearchParams& p = st.params;
  SearchAnswer a;
  if (st.query.count) a.total = 0;
  a.shards.total = static_cast<uint32_t>(num_shards());
  a.coverage.documents_total = CollectionDocs();
  std::vector<std::vector<MergedHit>> lists;
  lists.reserve(results.size());
  for (auto& r : results) {
    if (r.state == ShardCallState::kOk) {
      ++a.shards.successful;
      a.coverage.documents += r.doc_end > r.doc_begin ? r.doc_end - r.doc_begin : 0;
      if (a.total.has_value()) *a.total += r.total;
      lists.push_back(std::move(r.hits));
    } else {
      if (r.state == ShardCallState::kTimedOut) a.timed_out = true;
      a.shards.failures.push_back(ShardFailure{r.shard, r.reason});
    }
  }
  if (a.shards.successful == 0) {
    a.took_us = MicrosSince(st.start);
    return Finish(p.mode,
                  Error(503, "search_phase_execution_exception",
                        a.timed_out ? "all shards failed or timed out" : "all shards failed", &a.shards),
                  st.start, false, a.timed_out);
  }
  a.hits = MergeShardHits(std::move(lists), st.query.k);
  if (p.count_only || !(st.source || st.highlight) || a.hits.empty()) return Answer(st, std::move(a));

  // Query-then-fetch: one FetchRequest to each shard that owns some of the final hits.
  std::unordered_map<uint32_t, size_t> index_of;  // the node's shard id -> its endpoint
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].state == ShardCallState::kOk) index_of.emplace(results[i].shard, i);
  const HighlightTerms marks = !st.highlight            ? HighlightTerms{}
                               : st.query.tree != nullptr ? HighlightTermsOf(*st.query.tree)
                                                          : HighlightTermsOf(st.query.terms);
  st.fetches.assign(results.size(), std::nullopt);
  st.fetch_hits.assign(results.size(), {});
  bool any = false;
  for (size_t h = 0; h < a.hits.size(); ++h) {
    auto it = index_of.find(a.hits[h].shard);
    if (it == index_of.end()) continue;  // cannot happen: every hit comes from a shard that answered
    if (no_sources_[it->second].load(std::memory_order_relaxed)) {
      if (st.source) a.hits[h].source_missing = "not stored";
      continue;
    }
    any = true;
    std::optional<FetchRequestMsg>& f = st.fetches[it->second];
    if (!f) {
      f.emplace();
      f->deadline_unix_micros = st.deadline_unix;
      f->source = st.source;
      f->highlight = st.highlight;
      f->highlight_terms = marks.terms;
      f->highlight_phrases = marks.phrases;
    }
    f->docs.push_back(a.hits[h].doc);
    st.fetch_hits[it->second].push_back(h);
  }
  if (!any) return Answer(st, std::move(a));
  st.answer = std::move(a);
  st.fetching = true;
  return std::nullopt;
}

HttpReply Integrator::Fetched(SearchState& st, std::vector<ShardCallResult> results) {
  SearchAnswer a = std::move(st.answer);
  for (size_t i = 0; i < results.size() && i < st.fetch_hits.size(); ++i) {
    const std::vector<size_t>& hits = st.fetch_hits[i];
    if (hits.empty()) continue;
    ShardCallResult& r = results[i];
    if (r.state == ShardCallState::kOk && r.docs.size() == hits.size()) {
      for (size_t j = 0; j < hits.size(); ++j) {
        MergedHit& h = a.hits[hits[j]];
        FetchedDocMsg& d = r.docs[j];
        h.highlights = std::move(d.highlights);
        if (!st.source) continue;
        h.has_source = d.has_source && !d.omitted;
        if (!d.has_source) {
          h.source_missing = "not stored";
        } else if (d.omitted) {
          h.source_missing = "too large";  // past what one fetch answer carries (node/fetch.hpp)
        } else {
          h.source = std::move(d.source);
        }
      }
      continue;
    }
    // The shard failed the fetch: its hits stay, without their documents; _shards says why.
    if (st.source)
      for (size_t h : hits) a.hits[h].source_missing = "fetch failed";
    a.shards.failures.push_back(ShardFailure{r.shard, "fetch: " + (r.reason.empty() ? std::string("failed") : r.reason),
                                             /*fetch=*/true});
    if (a.shards.successful > 0) --a.shards.successful;  // successful + failed = total, as Elasticsearch's
  }
  return Answer(st, std::move(a));
}

HttpReply Integrator::Answer(const SearchState& st, SearchAnswer a) {
  const SearchParams& p = st.params;
  if (a.complete()) {
    if (!st.cache_key.empty()) (void)cache_.Insert(st.cache_key, a.hits, a.total);
  } else {
    partial_.fetch_add(1, std::memory_order_relaxed);
  }
  a.took_us = MicrosSince(st.start);
  return Finish(p.mode, {200, p.count_only ? CountAnswerJson(a) : SearchAnswerJson(a)}, st.start, !a.complete(),
                a.timed_out);
}

HttpReply Integrator::Search(const SearchParams& p, size_t waiting) {
  Begun b = Begin(p, waiting, Clock::now(), /*may_wait=*/true);
  if (b.reply) return std::move(*b.reply);
  SearchState& st = *b.state;
  auto [mode, flags] = FirstRound(st);
  std::optional<HttpReply> reply = Advance(st, PickLane().Search(Request(st, mode, flags), st.query_deadline));
  if (!reply && !st.fetching)
    reply = Advance(st, PickLane().Search(Request(st, QueryMode::kOr, 0), st.query_deadline));
  if (!reply) reply = Fetched(st, PickLane().Fetch(std::move(st.fetches), st.deadline));
  return std::move(*reply);
}

void Integrator::HandleSearchAsync(const ParsedSearch& parsed, size_t waiting, const Post& post, ReplyCallback done) {
  const auto start = Clock::now();
  if (!parsed.ok()) {
    const RequestError& e = *parsed.error;
    done(Finish(std::nullopt, {e.http_status, ErrorJson(e)}, start));
    return;
  }
  SearchAsyncFrom(parsed.params, waiting, start, /*may_wait=*/false, post, std::move(done));
}

void Integrator::SearchAsyncFrom(const SearchParams& p, size_t waiting, Clock::time_point start, bool may_wait,
                                 const Post& post, ReplyCallback done) {
  Begun b = Begin(p, waiting, start, may_wait);
  if (b.reply) {
    done(std::move(*b.reply));
    return;
  }
  if (b.must_wait) {  // no shard has reported yet: the waiter thread waits, then the caller goes on
    {
      std::lock_guard lock(waiter_mu_);
      if (!waiter_stop_) {
        waiter_queue_.push_back(Waiting{p, waiting, start, post, std::move(done)});
        waiter_cv_.notify_one();
        return;
      }
    }
    done(Finish(p.mode, Error(503, "illegal_state_exception", "integrator shutting down"), start));
    return;
  }
  auto [mode, flags] = FirstRound(*b.state);
  Round(std::move(b.state), mode, flags, post, std::move(done));
}

void Integrator::Round(std::shared_ptr<SearchState> st, QueryMode mode, uint32_t flags, const Post& post,
                       ReplyCallback done) {
  SearchRequestMsg req = Request(*st, mode, flags);
  // One round in kPhaseSample asks the nodes for their queue and engine times (the replies stay
  // compact otherwise), which split its round trip in the phase metrics.
  const bool timed = observer_ != nullptr && phase_sample_.fetch_add(1, std::memory_order_relaxed) % kPhaseSample == 0;
  if (timed) req.flags |= kFlagIncludeStats;
  const auto deadline = st->query_deadline;
  // The results go back to the caller's thread (post): the I/O thread only hands them over.
  // The first round's hand-off counts from the search's start (its analysis and cache lookup too).
  const Clock::time_point begun = st->or_round ? Clock::now() : st->start;
  PickLane().SearchAsync(std::move(req), deadline,
                         [this, st = std::move(st), post, done = std::move(done), begun, timed](std::vector<ShardCallResult> r) {
                           post([this, st, post, done, r = std::move(r), begun, timed]() mutable {
                             const Clock::time_point resumed = Clock::now();
                             if (observer_ != nullptr) ObservePhases(begun, resumed, r, timed);
                             std::optional<HttpReply> reply = Advance(*st, std::move(r));
                             if (reply) {
                               done(std::move(*reply));
                               if (observer_ != nullptr)
                                 observer_->OnPhase(RequestPhase::kAnswer, SecondsBetween(resumed, Clock::now()));
                             } else if (st->fetching)
                               FetchRound(std::move(st), post, std::move(done));
                             else
                               Round(std::move(st), QueryMode::kOr, 0, post, std::move(done));
                           });
                         });
}

const char* RequestPhaseName(RequestPhase p) {
  static constexpr const char* kNames[kNumRequestPhases] = {"parse",     "to_lane", "node_queue", "engine",
                                                            "transport", "to_loop", "fetch",      "answer"};
  return kNames[static_cast<int>(p)];
}

void Integrator::ObservePhases(Clock::time_point begun, Clock::time_point resumed,
                               const std::vector<ShardCallResult>& results, bool timed) const {
  // The shard answered last decides the round's time: its round trip, split by its own stats.
  const ShardCallResult* last = nullptr;
  for (const auto& r : results)
    if (r.state == ShardCallState::kOk && (last == nullptr || r.settled_at > last->settled_at)) last = &r;
  if (last == nullptr) return;
  const double queue = static_cast<double>(last->node_queue_us) * 1e-6;
  const double run = static_cast<double>(last->node_run_us) * 1e-6;
  observer_->OnPhase(RequestPhase::kToLane, SecondsBetween(begun, last->sent_at));
  if (timed) {
    observer_->OnPhase(RequestPhase::kNodeQueue, queue);
    observer_->OnPhase(RequestPhase::kEngine, run);
    observer_->OnPhase(RequestPhase::kTransport,
                       std::max(0.0, SecondsBetween(last->sent_at, last->settled_at) - queue - run));
  }
  observer_->OnPhase(RequestPhase::kToLoop, SecondsBetween(last->settled_at, resumed));
}

void Integrator::FetchRound(std::shared_ptr<SearchState> st, const Post& post, ReplyCallback done) {
  auto requests = std::move(st->fetches);
  const auto deadline = st->deadline;
  const Clock::time_point begun = Clock::now();
  PickLane().FetchAsync(std::move(requests), deadline,
                        [this, st = std::move(st), post, done = std::move(done), begun](std::vector<ShardCallResult> r) {
                          post([this, st, done, r = std::move(r), begun]() mutable {
                            const Clock::time_point resumed = Clock::now();
                            done(Fetched(*st, std::move(r)));
                            if (observer_ != nullptr) {
                              observer_->OnPhase(RequestPhase::kFetch, SecondsBetween(begun, resumed));
                              observer_->OnPhase(RequestPhase::kAnswer, SecondsBetween(resumed, Clock::now()));
                            }
                          });
                        });
}

void Integrator::WaiterLoop() {
  while (true) {
    Waiting w;
    {
      std::unique_lock lock(waiter_mu_);
      waiter_cv_.wait(lock, [&] { return waiter_stop_ || !waiter_queue_.empty(); });
      if (waiter_stop_) return;  // what is queued is dropped: its caller is stopping too
      w = std::move(waiter_queue_.front());
      waiter_queue_.pop_front();
    }
    const auto timeout = std::chrono::milliseconds(w.params.timeout_ms.value_or(options_.default_timeout_ms));
    bool stopping = false;
    {
      // As AnalyzerBy, but Stop() ends the wait too (it must not wait out a search's deadline).
      // Lock order: analyzer_mu_, then waiter_mu_ (nothing takes them the other way round).
      std::unique_lock lock(analyzer_mu_);
      analyzer_cv_.wait_until(lock, w.start + std::min<Clock::duration>(timeout, std::chrono::seconds(2)), [&] {
        std::lock_guard stop_lock(waiter_mu_);
        stopping = waiter_stop_;
        return stopping || !analyzer_->waiting;
      });
    }
    Post post = w.post;
    if (stopping) {  // answered now: on the caller's thread the search would wait out its deadline
      const QueryMode mode = w.params.mode;
      const auto start = w.start;
      post([this, mode, start, done = std::move(w.done)] {
        done(Finish(mode, Error(503, "illegal_state_exception", "integrator shutting down"), start));
      });
      return;
    }
    // Back on the caller's thread, now allowed to wait (it will not: the analyzer is known, or it
    // is not and the search is answered 503 as any other once its wait is over).
    post([this, w = std::move(w)]() mutable {
      SearchAsyncFrom(w.params, w.waiting, w.start, /*may_wait=*/true, w.post, std::move(w.done));
    });
  }
}

uint64_t Integrator::CollectionDocs() const {
  std::lock_guard lock(analyzer_mu_);
  for (const auto& h : reported_)
    if (h) return h->num_docs_global;
  return manifest_num_docs_;
}

std::vector<ShardHealthView> Integrator::LaneHealth() const {
  std::vector<std::vector<ShardHealthView>> lanes;
  lanes.reserve(fanouts_.size());
  for (const auto& f : fanouts_) lanes.push_back(f->Health());
  return MergeLaneHealth(std::move(lanes));
}

std::string Integrator::HealthJson(std::string* status) const {
  auto views = LaneHealth();
  const std::string err = AnalyzerError();
  if (status) *status = HealthStatus(views, err);
  return search::HealthJson(views, err);
}

std::string Integrator::StatsJson() const {
  using nlohmann::json;
  const auto w = window_.Take();
  const auto c = cache_.stats();
  const uint64_t lookups = c.hits + c.misses;
  const auto views = LaneHealth();
  json out = {
      {"health", HealthStatus(views)},
      {"shards_total", views.size()},
      {"shards_up", std::count_if(views.begin(), views.end(), [](const auto& v) { return v.state == "up"; })},
      {"qps", w.qps},
      {"latency_ms",
       {{"p50", w.p50 * 1e3}, {"p95", w.p95 * 1e3}, {"p99", w.p99 * 1e3}, {"p999", w.p999 * 1e3}, {"max", w.max * 1e3},
        {"samples", w.samples}}},
      {"requests_total", requests_.load()},
      {"errors_total", errors_.load()},
      {"partial_total", partial_.load()},
      {"rejected_total", rejected_.load()},
      {"late_replies_total", late_replies_.load()},
      {"in_flight", in_flight_.load()},
      {"cache",
       {{"hits", c.hits},
        {"misses", c.misses},
        {"hit_ratio", lookups ? static_cast<double>(c.hits) / static_cast<double>(lookups) : 0.0},
        {"entries", c.entries},
        {"bytes", c.bytes},
        {"capacity_bytes", c.capacity_bytes},
        {"evictions", c.evictions}}},
      {"analyzer_error", AnalyzerError()},
  };
  return out.dump();
}

}  // namespace search
