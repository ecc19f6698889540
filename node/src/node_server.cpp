// NodeServer (see node/node_server.hpp): the ROUTER I/O thread, the job queue and the workers.
#include "node/node_server.hpp"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <zmq.hpp>

#include "core/analyzer.hpp"
#include "core/cpu_home.hpp"
#include "core/cpus.hpp"
#include "core/thread_name.hpp"
#include "core/wake_fd.hpp"
#include "curve/zap_handler.hpp"
#include "index_store/shard_metrics.hpp"
#include "index_store/shard_store.hpp"
#include "core/log.hpp"
#include "metrics/metrics.hpp"
#include "node/fetch.hpp"

namespace search {
namespace {

using Clock = std::chrono::steady_clock;

const Logger& Log() {
  static const Logger kLog("node");
  return kLog;
}

int64_t WallMicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t MicrosBetween(Clock::time_point a, Clock::time_point b) {
  return b <= a ? 0 : static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
}

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The frames of one received multipart message: the first kMaxParts - 1 and the last are kept.
constexpr size_t kMaxParts = 4;
// Messages read per poll round before replies get a turn.
constexpr int kReceiveBatch = 256;
// A search that reaches an idle node (nothing in flight) skips the worker: the I/O thread hands it
// to the executor itself, and runs it too when the engine would run it on the caller at once and
// the cost model predicts at most this many microseconds on the CPU (ExecuteAsync's
// caller_max_us); its reply then leaves without a thread hand-off either. That saves the two
// wake-ups of a worker and of the I/O thread, ~50 us each on an idle host (BENCHMARKS.md "Serving
// path latency"), and holds a request arriving meanwhile back by about as long at most.
constexpr double kIoThreadMaxUs = 100;

// An andor split (the integrator's AND round that may need an OR run too): two runs in a row, on a
// worker (WorkerLoop).
bool IsAndOrSplit(const SearchRequestMsg& r) { return r.mode == QueryMode::kAnd && (r.flags & kFlagAndOrSplit) != 0; }

// Where a reply goes: the ROUTER's identity of the peer, and the shape its request came in (a reply
// mirrors it): [empty][message] (delimited), or the message alone, one frame, which CURVE boxes once
// instead of twice (integrators that know the node speaks kMinorOneFrame send that).
struct Peer {
  std::string identity;
  bool delimited = true;
};

struct Reply {
  Peer peer;
  std::string payload;
  bool fetch = false;  // a FetchResponse: counted by the fetch metrics, not as a search
  QueryMode mode = QueryMode::kAnd;
  Clock::time_point received;
  // For the slow-query log (filled only while it is on).
  Clock::time_point started, finished;  // the worker's take and its reply
  uint64_t request_id = 0;
  uint32_t k = 0, terms = 0;
  StatusCode status = StatusCode::kOk;
  Processor processor = Processor::kCpu;
  ExecTiming timing;
  std::string query;  // the terms, when the worker's part alone reached the threshold
};

// A query's terms for a log line: space-separated, at most ~200 bytes, with quotes, backslashes
// and control bytes written as \xHH (a wire message's terms are any bytes; a log line must stay
// one line that no term can forge).
std::string LoggableTerms(const std::vector<std::string>& terms) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (const std::string& t : terms) {
    if (out.size() + t.size() > 200) break;
    if (!out.empty()) out += ' ';
    for (unsigned char c : t) {
      if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out;
}

// "slow query: ..." for one reply sent at `sent`; key=value fields, milliseconds.
std::string SlowQueryLine(const Reply& r, Clock::time_point sent) {
  const auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const ExecTiming& t = r.timing;
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << "slow query: total_ms=" << ms(r.received, sent) << " queue_ms=" << ms(r.received, r.started)
    << " execute_ms=" << ms(r.started, r.finished) << " reply_ms=" << ms(r.finished, sent)
    << " features_ms=" << t.features_us / 1e3 << " submit_ms=" << t.submit_us / 1e3 << " wait_ms=" << t.wait_us / 1e3
    << " run_ms=" << t.run_us / 1e3 << " return_ms=" << t.return_us / 1e3 << " resolve_ms=" << t.resolve_us / 1e3
    << " processor=" << ProcessorName(r.processor) << " gpu_batch=" << t.gpu_batch << " migrated=" << t.migrated
    << " stolen=" << t.stolen << " retried=" << t.retried << " mode=" << QueryModeName(r.mode) << " k=" << r.k
    << " terms=" << r.terms << " status=" << StatusCodeName(r.status) << " request_id=" << r.request_id;
  if (!r.query.empty()) o << " query=\"" << r.query << '"';
  return o.str();
}

}  // namespace

struct NodeServer::Job {
  Peer peer;
  SearchRequestMsg request;
  std::chrono::steady_clock::time_point received;
  Deadline deadline = kNoDeadline;
  bool is_fetch = false;  // a FetchRequest (in `fetch`), not a search
  FetchRequestMsg fetch{};
};

struct NodeServer::Impl {
  zmq::context_t ctx{1};
  // The I/O thread and the context's ZeroMQ I/O thread share a CPU while they are mostly idle
  // (core/cpu_home.hpp): a request then reaches the I/O thread, and its reply the wire, without
  // waking another CPU.
  std::unique_ptr<CpuHome> home;
  zmq::socket_t router;
  std::unique_ptr<curve::ZapHandler> zap;  // with CURVE; after router: stopped before the context ends
  WakeFd wake;  // the I/O thread's: queued replies wake it only while it may block (wake_fd.hpp)
  std::atomic<bool> draining{false};
  std::string analyzer_json;
  Analyzer analyzer;  // the index's, for highlighting fetched documents
  // Corruption seen while answering (a list or document that failed its checks): the node keeps
  // serving the rest and reports "degraded: ..." in its health.
  std::atomic<uint64_t> corruptions{0};
  std::mutex corruption_mu;
  std::string last_corruption;  // GUARDED_BY(corruption_mu)

  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  std::deque<Job> jobs;  // GUARDED_BY(jobs_mu)
  bool closed = false;   // GUARDED_BY(jobs_mu)

  std::mutex replies_mu;
  std::vector<Reply> replies;  // GUARDED_BY(replies_mu)

  bool RepliesQueued() {
    std::lock_guard<std::mutex> lock(replies_mu);
    return !replies.empty();
  }

  // Queues a reply for the I/O thread, which takes every queued reply at a wake: one wake per
  // empty queue, and none while the thread is awake (wake_fd.hpp).
  void QueueReply(Reply r) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(replies_mu);
      first = replies.empty();
      replies.push_back(std::move(r));
    }
    if (first) wake.WakeIfIdle();
  }

  // Requests handed to ExecuteAsync and not yet answered (Stop() waits for none).
  std::mutex async_mu;
  std::condition_variable async_cv;
  uint64_t async_pending = 0;  // GUARDED_BY(async_mu)
};

NodeServer::NodeServer(const ShardReader* shard, Executor* executor, Metrics* metrics, NodeServerOptions options)
    : shard_(shard), executor_(executor), metrics_(metrics), options_(std::move(options)),
      impl_(std::make_unique<Impl>()) {
  if (metrics_ != nullptr) node_metrics_ = std::make_unique<NodeMetrics>(metrics_->registry());
  if (options_.threads == 0) options_.threads = AvailableCores();
  if (options_.queue_capacity == 0) options_.queue_capacity = 1;
  impl_->analyzer_json = shard_->meta().analyzer.ToJson();
  if (auto a = Analyzer::Create(shard_->meta().analyzer); a.ok()) {
    impl_->analyzer = std::move(a).value();
  } else {  // the executor's engines refuse such an index first; highlights would use the default
    Log().Warn() << "index analyzer: " << a.status().ToString();
  }
}

NodeServer::~NodeServer() { Stop(); }

uint64_t NodeServer::refused_peers() const { return impl_->zap != nullptr ? impl_->zap->refused() : 0; }

uint64_t NodeServer::queued() const {
  std::lock_guard<std::mutex> lock(impl_->jobs_mu);
  return impl_->jobs.size();
}

Status NodeServer::Start() {
  if (running_.load()) return Status::InvalidArgument("node server already started");
  if (io_thread_.joinable()) return Status::InvalidArgument("a stopped node server cannot restart");
  if (!impl_->wake.Open()) return Status::IOError("eventfd failed");
  try {
    if (const std::vector<int> cpus = AllowedCpus(); cpus.size() >= 2) {
      impl_->home = std::make_unique<CpuHome>(CpuHome::PickHome(cpus), cpus);
      zmq_ctx_set(impl_->ctx.handle(), ZMQ_THREAD_NAME_PREFIX, impl_->home->AddZmqIoThread());
    }
    impl_->router = zmq::socket_t(impl_->ctx, zmq::socket_type::router);
    auto& s = impl_->router;
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::maxmsgsize, options_.max_msg_bytes);
    s.set(zmq::sockopt::sndhwm, options_.sndhwm);
    s.set(zmq::sockopt::rcvhwm, options_.rcvhwm);
    s.set(zmq::sockopt::router_mandatory, true);
    s.set(zmq::sockopt::heartbeat_ivl, options_.heartbeat_ivl_ms);
    s.set(zmq::sockopt::heartbeat_timeout, options_.heartbeat_timeout_ms);
    s.set(zmq::sockopt::heartbeat_ttl, options_.heartbeat_ttl_ms);
    if (!options_.curve_secret_key.empty()) {
      if (options_.curve_clients.empty()) {
        impl_->router.close();
        return Status::InvalidArgument("CURVE without client keys: no peer could connect");
      }
      s.set(zmq::sockopt::curve_server, true);
      s.set(zmq::sockopt::curve_secretkey, options_.curve_secret_key);
      s.set(zmq::sockopt::zap_domain, "search");
      // The handler binds before the ROUTER does: a CURVE socket whose context has no ZAP handler
      // would admit any client key.
      NodeMetrics* nm = node_metrics_.get();
      auto zap = curve::ZapHandler::Start(impl_->ctx, s, options_.curve_clients, [nm](curve::RefusalReason r) {
        if (nm != nullptr) nm->refused_peers(r).Increment();
      });
      if (!zap.ok()) {
        impl_->router.close();
        return zap.status();
      }
      impl_->zap = std::move(zap).value();
    }
    if (node_metrics_ != nullptr) node_metrics_->curve().Set(options_.curve_secret_key.empty() ? 0 : 1);
    s.bind(options_.listen);
    endpoint_ = s.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    impl_->router.close();
    if (impl_->zap != nullptr) impl_->zap->Stop();
    return Status::IOError("cannot listen on " + options_.listen + ": " + e.what());
  }
  if (metrics_ != nullptr) {
    auto shard_metrics = std::make_shared<ShardMetrics>(metrics_->registry());
    hook_id_ = metrics_->AddScrapeHook([this, shard_metrics] {
      shard_metrics->Set(shard_->list_cache().stats(), shard_->external_id_stats());
      node_metrics_->queued().Set(static_cast<double>(queued()));
      if (impl_->home) node_metrics_->SetCpuHome(impl_->home->state());
    });
  }
  running_ = true;
  for (size_t i = 0; i < options_.threads; ++i)
    workers_.emplace_back([this] {
      SetThreadName("node-worker");
      WorkerLoop();
    });
  io_thread_ = std::thread([this] {
    SetThreadName("node-io");
    IoLoop();
  });
  Log().Info() << "shard " << shard_->meta().shard_id << " serving on " << endpoint_ << " with " << options_.threads
               << " workers (" << executor_->name() << ")"
               << (curve() ? ", CURVE with " + std::to_string(options_.curve_clients.size()) + " client key(s)"
                           : std::string(", plain ZeroMQ (no CURVE)"));
  return Status::Ok();
}

void NodeServer::RequestStop() {
  stop_requested_.store(true);
  if (impl_->wake.valid()) impl_->wake.Wake();
}

void NodeServer::Stop() {
  if (!io_thread_.joinable()) return;
  RequestStop();
  io_thread_.join();
  {
    std::lock_guard<std::mutex> lock(impl_->jobs_mu);
    impl_->closed = true;
  }
  impl_->jobs_cv.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
  {
    // Requests handed to the executor are answered by its threads, which reach this server's
    // state: wait for the last (the executor finishes or refuses every job it took).
    std::unique_lock<std::mutex> lock(impl_->async_mu);
    impl_->async_cv.wait(lock, [&] { return impl_->async_pending == 0; });
  }
  if (metrics_ != nullptr && hook_id_ != 0) {
    metrics_->RemoveScrapeHook(hook_id_);
    hook_id_ = 0;
  }
  if (impl_->zap != nullptr) impl_->zap->Stop();  // the ROUTER is closed (IoLoop's end)
  impl_->ctx.close();
  running_ = false;
  Log().Info() << "shard " << shard_->meta().shard_id << " stopped";
}

// ---- the I/O thread ---------------------------------------------------------------------------

namespace {

// Everything the I/O thread does with its socket; lives on the I/O thread's stack.
class IoHandler {
 public:
  IoHandler(zmq::socket_t& router, const ShardMeta& meta, Metrics* metrics, NodeMetrics* node_metrics,
            std::atomic<uint64_t>& unroutable, std::atomic<uint64_t>& dropped)
      : router_(router), meta_(meta), metrics_(metrics), node_metrics_(node_metrics), unroutable_(unroutable),
        dropped_(dropped) {}

  // Sends [identity][empty][payload], or [identity][payload] to a peer that sent its request as one
  // frame (Peer::delimited false); a vanished or saturated peer drops the reply (counted).
  void Send(const Peer& peer, const std::string& payload) {
    try {
      zmq::message_t id(peer.identity.data(), peer.identity.size());
      if (!router_.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        Unroutable();
        return;
      }
      if (peer.delimited) router_.send(zmq::message_t(), zmq::send_flags::sndmore);
      router_.send(zmq::message_t(payload.data(), payload.size()), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == EHOSTUNREACH || e.num() == EAGAIN) {
        Unroutable();
      } else {
        Log().Warn() << "send failed: " << e.what();
        Unroutable();
      }
    }
  }

  SearchResponseMsg ErrorResponse(uint64_t request_id, Status status) const {
    SearchResponseMsg r;
    r.request_id = request_id;
    r.shard_id = meta_.shard_id;
    r.status = std::move(status);
    r.doc_begin = meta_.doc_begin;
    r.doc_end = meta_.doc_end;
    return r;
  }

  // An error for a message of `kind` (pings get a Pong, fetches a FetchResponse, everything else a
  // SearchResponse).
  void SendError(const Peer& peer, MessageKind kind, uint64_t request_id, Status status) {
    if (kind == MessageKind::kPing) {
      PongMsg pong;
      pong.request_id = request_id;
      pong.status = std::move(status);
      Send(peer, EncodePong(pong));
    } else if (kind == MessageKind::kFetchRequest || kind == MessageKind::kFetchResponse) {
      FetchResponseMsg r;
      r.request_id = request_id;
      r.shard_id = meta_.shard_id;
      r.status = std::move(status);
      Send(peer, EncodeFetchResponse(r));
    } else {
      Send(peer, EncodeSearchResponse(ErrorResponse(request_id, std::move(status))));
    }
  }

  void BadRequest(BadRequestReason reason) {
    if (metrics_ != nullptr) metrics_->bad_requests(reason).Increment();
  }
  void Dropped() { dropped_.fetch_add(1); }

 private:
  void Unroutable() {
    unroutable_.fetch_add(1);
    if (node_metrics_ != nullptr) node_metrics_->unroutable_replies().Increment();
  }

  zmq::socket_t& router_;
  const ShardMeta& meta_;
  Metrics* metrics_;
  NodeMetrics* node_metrics_;
  std::atomic<uint64_t>& unroutable_;
  std::atomic<uint64_t>& dropped_;
};

}  // namespace

void NodeServer::IoLoop() {
  auto& router = impl_->router;
  const ShardMeta& meta = shard_->meta();
  IoHandler io(router, meta, metrics_, node_metrics_.get(), unroutable_, dropped_);

  auto count_request = [this](QueryMode mode, const Status& st, Clock::time_point received) {
    if (metrics_ == nullptr) return;
    metrics_->requests(mode, ToRequestStatus(st.code())).Increment();
    metrics_->request_duration(mode).Observe(SecondsBetween(received, Clock::now()));
    if (st.code() == StatusCode::kDeadlineExceeded) metrics_->deadline_exceeded().Increment();
  };

  // Slow-query log: at most slow_log_per_second lines in each one-second window; the rest are
  // counted (the metric counts all) and reported with the window's first line after it.
  const bool slow_log = options_.slow_query_ms > 0;
  const auto slow_after = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(slow_log ? options_.slow_query_ms : 0));
  Clock::time_point slow_window{};
  size_t slow_logged = 0;
  uint64_t slow_unlogged = 0;
  auto note_slow = [&](const Reply& r, Clock::time_point sent) {
    if (node_metrics_ != nullptr) node_metrics_->slow_queries().Increment();
    if (sent - slow_window >= std::chrono::seconds(1)) {
      if (slow_unlogged > 0) Log().Warn() << "slow query: " << slow_unlogged << " more not logged (rate limit)";
      slow_window = sent;
      slow_logged = 0;
      slow_unlogged = 0;
    }
    if (slow_logged >= options_.slow_log_per_second) {
      ++slow_unlogged;
      return;
    }
    ++slow_logged;
    Log().Warn() << SlowQueryLine(r, sent);
  };

  auto send_pending = [&]() -> size_t {
    std::vector<Reply> batch;
    {
      std::lock_guard<std::mutex> lock(impl_->replies_mu);
      batch.swap(impl_->replies);
    }
    for (Reply& r : batch) {
      if (r.payload.empty()) {
        io.Dropped();
      } else {
        io.Send(r.peer, r.payload);
      }
      in_flight_.fetch_sub(1);
      const Clock::time_point sent = Clock::now();
      if (metrics_ != nullptr) {
        metrics_->inflight().Decrement();
        if (!r.fetch) metrics_->request_duration(r.mode).Observe(SecondsBetween(r.received, sent));
      }
      if (slow_log && !r.fetch && sent - r.received >= slow_after) note_slow(r, sent);
    }
    return batch.size();
  };

  auto handle_search = [&](const Peer& peer, SearchRequestMsg req, Clock::time_point received) {
    Deadline deadline = kNoDeadline;
    if (req.deadline_unix_micros != 0) {
      const int64_t left = req.deadline_unix_micros - WallMicrosNow();
      if (left <= 0) {
        Status st = Status::DeadlineExceeded("deadline passed " + std::to_string(-left) + " us before arrival");
        io.SendError(peer, MessageKind::kSearchRequest, req.request_id, st);
        count_request(req.mode, st, received);
        return;
      }
      deadline = received + std::chrono::microseconds(left);
    }
    if (impl_->draining.load()) {
      Status st = Status::Unavailable("node is draining (shutting down)");
      io.SendError(peer, MessageKind::kSearchRequest, req.request_id, st);
      count_request(req.mode, st, received);
      return;
    }
    const uint64_t id = req.request_id;
    const QueryMode mode = req.mode;
    bool queued = false;
    size_t depth = 0;
    // An idle node's I/O thread hands the request to the executor itself (below).
    const bool split = IsAndOrSplit(req);
    bool here = false;
    {
      std::lock_guard<std::mutex> lock(impl_->jobs_mu);
      depth = impl_->jobs.size();
      // A worker hands each request on at once, so the queue alone bounds nothing: every request
      // not yet answered counts, against the queue plus one running request a worker.
      const bool room = in_flight_.load() < options_.queue_capacity + options_.threads;
      here = room && in_flight_.load() == 0 && !split && executor_->BoundsCaller();
      if (room && !here) {
        impl_->jobs.push_back(Job{peer, std::move(req), received, deadline});
        queued = true;
      }
      if (room) in_flight_.fetch_add(1);
    }
    if (here) {
      if (metrics_ != nullptr) {
        metrics_->inflight().Increment();
        node_metrics_->io_thread_requests().Increment();
      }
      ExecuteAsync(Job{peer, std::move(req), received, deadline}, Clock::now(), kIoThreadMaxUs);
      send_pending();  // its reply, when the query ran here
      return;
    }
    if (!queued) {
      Status st = Status::ResourceExhausted("node full (" + std::to_string(in_flight_.load()) +
                                            " requests in flight, " + std::to_string(depth) + " waiting; --queue " +
                                            std::to_string(options_.queue_capacity) + " plus " +
                                            std::to_string(options_.threads) + " workers)");
      io.SendError(peer, MessageKind::kSearchRequest, id, st);
      count_request(mode, st, received);
      return;
    }
    impl_->jobs_cv.notify_one();
    if (metrics_ != nullptr) metrics_->inflight().Increment();
  };

  // A fetch takes the search's path (deadline, draining, the bound on requests in flight, the job
  // queue), and a worker answers it (Fetch).
  auto handle_fetch = [&](const Peer& peer, FetchRequestMsg req, Clock::time_point received) {
    auto refuse = [&](Status st) {
      io.SendError(peer, MessageKind::kFetchRequest, req.request_id, std::move(st));
      if (node_metrics_ != nullptr) node_metrics_->fetches(false).Increment();
    };
    Deadline deadline = kNoDeadline;
    if (req.deadline_unix_micros != 0) {
      const int64_t left = req.deadline_unix_micros - WallMicrosNow();
      if (left <= 0) {
        return refuse(Status::DeadlineExceeded("deadline passed " + std::to_string(-left) + " us before arrival"));
      }
      deadline = received + std::chrono::microseconds(left);
    }
    if (impl_->draining.load()) return refuse(Status::Unavailable("node is draining (shutting down)"));
    bool queued = false;
    {
      std::lock_guard<std::mutex> lock(impl_->jobs_mu);
      if (in_flight_.load() < options_.queue_capacity + options_.threads) {
        Job job{peer, {}, received, deadline};
        job.is_fetch = true;
        job.fetch = std::move(req);
        impl_->jobs.push_back(std::move(job));
        queued = true;
        in_flight_.fetch_add(1);
      }
    }
    if (!queued) {
      return refuse(Status::ResourceExhausted("node full (" + std::to_string(in_flight_.load()) +
                                              " requests in flight)"));
    }
    impl_->jobs_cv.notify_one();
    if (metrics_ != nullptr) metrics_->inflight().Increment();
  };

  auto handle_ping = [&](const Peer& peer, const PingMsg& ping) {
    PongMsg pong;
    pong.request_id = ping.request_id;
    ShardHealthMsg& h = pong.health;
    h.shard_id = meta.shard_id;
    h.num_shards = meta.num_shards;
    h.doc_begin = meta.doc_begin;
    h.doc_end = meta.doc_end;
    h.num_docs_global = meta.stats.num_docs;
    if (impl_->draining.load()) {
      h.state = "draining";
    } else if (const uint64_t c = impl_->corruptions.load(); c > 0) {
      std::lock_guard lock(impl_->corruption_mu);
      h.state = "degraded: " + std::to_string(c) + " request(s) hit corrupt data (last: " + impl_->last_corruption + ")";
    } else {
      h.state = "serving";
    }
    const uint64_t q = queued();
    const uint64_t f = in_flight_.load();
    h.queued = static_cast<uint32_t>(q);
    h.in_flight = static_cast<uint32_t>(f > q ? f - q : 0);
    h.gpu = executor_->has_gpu();
    h.analyzer_json = impl_->analyzer_json;
    h.index_format_version = meta.format_version;
    h.has_sources = shard_->has_sources();
    io.Send(peer, EncodePong(pong));
  };

  // One multipart message: [identity][empty][payload] or [identity][payload] expected.
  auto handle_message = [&](std::array<zmq::message_t, kMaxParts>& parts, size_t n) {
    const Clock::time_point received = Clock::now();
    const Peer peer{std::string(static_cast<const char*>(parts[0].data()), parts[0].size()), n != 2};
    const bool shape_ok = n == 2 || (n == 3 && parts[1].size() == 0);
    if (n < 2) {  // nothing but an identity: no payload to answer
      io.BadRequest(BadRequestReason::kBadFrames);
      io.Dropped();
      return;
    }
    const zmq::message_t& payload = parts[std::min(n, kMaxParts) - 1];
    RecoveredHeader rec;
    auto env = DecodeEnvelope(std::string_view(static_cast<const char*>(payload.data()), payload.size()), &rec);
    if (!shape_ok) {
      io.BadRequest(BadRequestReason::kBadFrames);
      if (rec.request_id) {
        io.SendError(peer, rec.kind, *rec.request_id,
                     Status::InvalidArgument("expected frames [empty][message] or [message], got " +
                                             std::to_string(n - 1) + " frames after the identity"));
      } else {
        io.Dropped();
      }
      return;
    }
    if (!env.ok()) {
      BadRequestReason reason = BadRequestReason::kMalformed;
      if (rec.kind != MessageKind::kUnknown) {
        reason = rec.major != kProtocolMajor ? BadRequestReason::kUnsupportedVersion : BadRequestReason::kInvalidArgument;
      }
      io.BadRequest(reason);
      if (rec.request_id) {
        io.SendError(peer, rec.kind, *rec.request_id, env.status());
      } else {
        io.Dropped();
        Log().Debug() << "dropped an unanswerable message: " << env.status().ToString();
      }
      return;
    }
    switch (env->kind()) {
      case MessageKind::kSearchRequest:
        handle_search(peer, std::move(std::get<SearchRequestMsg>(env->body)), received);
        return;
      case MessageKind::kPing:
        handle_ping(peer, std::get<PingMsg>(env->body));
        return;
      case MessageKind::kFetchRequest:
        handle_fetch(peer, std::move(std::get<FetchRequestMsg>(env->body)), received);
        return;
      default:
        io.BadRequest(BadRequestReason::kUnexpectedMessage);
        io.SendError(peer, MessageKind::kSearchResponse, rec.request_id.value_or(0),
                     Status::InvalidArgument("a node accepts searchRequest, fetchRequest and ping, not " +
                                             std::string(MessageKindName(env->kind()))));
        return;
    }
  };

  // Reads one whole multipart message without blocking; false when none is waiting.
  auto receive_one = [&]() -> bool {
    std::array<zmq::message_t, kMaxParts> parts;
    if (!router.recv(parts[0], zmq::recv_flags::dontwait)) return false;
    size_t n = 1;
    bool more = parts[0].more();
    while (more) {  // the rest of a multipart message arrives atomically with its first part
      zmq::message_t part;
      if (!router.recv(part, zmq::recv_flags::dontwait)) break;
      more = part.more();
      parts[std::min(n, kMaxParts - 1)] = std::move(part);  // the last slot keeps the last frame
      ++n;
    }
    try {
      handle_message(parts, n);
    } catch (const std::exception& e) {
      io.Dropped();
      Log().Error() << "request handler failed: " << e.what();
    } catch (...) {
      io.Dropped();
      Log().Error() << "request handler failed with an unknown exception";
    }
    return true;
  };

  std::array<zmq::pollitem_t, 2> items = {zmq::pollitem_t{router.handle(), 0, ZMQ_POLLIN, 0},
                                          zmq::pollitem_t{nullptr, impl_->wake.fd(), ZMQ_POLLIN, 0}};
  bool draining = false;
  Clock::time_point drain_deadline{};
  CpuHome* home = impl_->home.get();
  if (home != nullptr) home->AddThread(CpuHome::ThisThread());
  for (;;) {
    if (home != nullptr) home->Tick(Clock::now());
    try {
      // Idle before the last look at the queue (wake_fd.hpp).
      impl_->wake.SetIdle(true);
      const bool queued_replies = impl_->RepliesQueued();
      zmq::poll(items.data(), items.size(), queued_replies ? std::chrono::milliseconds(0)
                                            : draining     ? std::chrono::milliseconds(10)
                                                           : options_.io_poll);
      impl_->wake.SetIdle(false);
      if ((items[1].revents & ZMQ_POLLIN) != 0) impl_->wake.Drain();
      send_pending();
      if ((items[0].revents & ZMQ_POLLIN) != 0) {
        int received = 0;
        while (received < kReceiveBatch && receive_one()) ++received;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      if (e.num() != EINTR) Log().Error() << "I/O loop: " << e.what();
    } catch (const std::exception& e) {
      Log().Error() << "I/O loop: " << e.what();
    }
    if (stop_requested_.load() && !draining) {
      draining = true;
      impl_->draining = true;
      drain_deadline = Clock::now() + options_.drain_timeout;
      Log().Info() << "draining: " << in_flight_.load() << " requests in flight";
    }
    if (draining) {
      send_pending();
      if (in_flight_.load() == 0) break;
      if (Clock::now() >= drain_deadline) {
        Log().Warn() << "drain timeout: abandoning " << in_flight_.load() << " requests";
        break;
      }
    }
  }
  router.close();
}

// ---- workers ------------------------------------------------------------------------------------

void NodeServer::WorkerLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(impl_->jobs_mu);
      impl_->jobs_cv.wait(lock, [&] { return impl_->closed || !impl_->jobs.empty(); });
      if (impl_->closed) return;
      job = std::move(impl_->jobs.front());
      impl_->jobs.pop_front();
    }
    const Clock::time_point start = Clock::now();
    if (job.is_fetch) {  // sources and highlights: short, on this worker
      Fetch(job, start);
      continue;
    }
    if (job.deadline != kNoDeadline && start >= job.deadline) {
      Respond(job, start, Status::DeadlineExceeded("deadline passed while queued (waited " +
                                                   std::to_string(MicrosBetween(job.received, start)) + " us)"),
              false);
      continue;
    }
    // andor split: AND here; OR too when this shard alone has fewer than k AND hits (the
    // integrator decides on the merged AND hits). Two runs in a row: on this thread.
    const bool split = IsAndOrSplit(job.request);
    if (!split) {
      ExecuteAsync(std::move(job), start, kNoCallerBound);
      continue;
    }
    Result<ExecOutput> out = Status::Internal("not run");
    std::optional<SplitOr> split_or;
    Query query = ToQuery(job.request);
    try {
      out = executor_->Execute(query, job.deadline, job.request.flags);
      if (split && out.ok() && out->hits.size() < query.k) {
        query.mode = QueryMode::kOr;
        auto more = executor_->Execute(query, job.deadline, job.request.flags);
        if (more.ok()) {
          split_or = SplitOr{std::move(more->hits), more->total};
          out->stats += more->stats;
          out->timing += more->timing;
        } else {
          out = more.status();
        }
      }
    } catch (const std::exception& e) {
      out = Status::Internal(std::string("executor failed: ") + e.what());
    }
    Respond(job, start, std::move(out), true, std::move(split_or));
  }
}

void NodeServer::ExecuteAsync(Job job, std::chrono::steady_clock::time_point start, double caller_max_us) {
  // The request's state until its answer; the executor's done may run on another thread (the one
  // that finished the query) or on this one, once. `answered` guards against a throw after the
  // executor took the request.
  struct Pending {
    Job job;
    Clock::time_point start;
    std::atomic<bool> answered{false};
  };
  auto p = std::make_shared<Pending>();
  p->job = std::move(job);
  p->start = start;
  {
    std::lock_guard<std::mutex> lock(impl_->async_mu);
    ++impl_->async_pending;
  }
  auto answer = [this, p](Result<ExecOutput> out) {
    if (p->answered.exchange(true)) return;
    Respond(p->job, p->start, std::move(out), true);
    std::lock_guard<std::mutex> lock(impl_->async_mu);
    if (--impl_->async_pending == 0) impl_->async_cv.notify_all();
  };
  try {
    // A copy of the terms: the reply's slow-query line still names them.
    executor_->ExecuteAsync(ToQuery(p->job.request), p->job.deadline, p->job.request.flags, answer, caller_max_us);
  } catch (const std::exception& e) {
    answer(Status::Internal(std::string("executor failed: ") + e.what()));
  }
}

void NodeServer::Fetch(Job& job, std::chrono::steady_clock::time_point start) {
  const ShardMeta& meta = shard_->meta();
  FetchResponseMsg resp;
  resp.request_id = job.fetch.request_id;
  resp.shard_id = meta.shard_id;
  if (job.deadline != kNoDeadline && start >= job.deadline) {
    resp.status = Status::DeadlineExceeded("deadline passed while queued (waited " +
                                           std::to_string(MicrosBetween(job.received, start)) + " us)");
  } else {
    try {
      auto docs = FetchDocs(*shard_, impl_->analyzer, job.fetch);
      if (docs.ok()) {
        resp.docs = std::move(docs).value();
      } else {
        resp.status = docs.status();
      }
    } catch (const std::exception& e) {
      resp.status = Status::Internal(std::string("fetch failed: ") + e.what());
    }
  }
  if (resp.status.code() == StatusCode::kCorruption) {
    impl_->corruptions.fetch_add(1);
    std::lock_guard lock(impl_->corruption_mu);
    impl_->last_corruption = resp.status.message().substr(0, 200);
  }
  std::string payload;
  try {
    payload = EncodeFetchResponse(resp);
    if (payload.size() > kMaxFrameBytes) {  // the integrator's socket would drop the connection
      const size_t bytes = payload.size();
      resp.docs.clear();
      resp.status = Status::ResourceExhausted("fetch answer of " + std::to_string(bytes) + " bytes exceeds the " +
                                              std::to_string(kMaxFrameBytes) + "-byte frame limit");
      payload = EncodeFetchResponse(resp);
    }
  } catch (const std::exception& e) {
    payload.clear();
    Log().Error() << "cannot encode a fetch response: " << e.what();
  }
  if (metrics_ != nullptr) {
    node_metrics_->fetches(resp.status.ok()).Increment();
    node_metrics_->fetched_docs().Increment(static_cast<double>(job.fetch.docs.size()));
    node_metrics_->fetch_seconds().Observe(SecondsBetween(start, Clock::now()));
  }
  Reply r;
  r.peer = std::move(job.peer);
  r.payload = std::move(payload);
  r.fetch = true;
  r.received = job.received;
  impl_->QueueReply(std::move(r));
}

void NodeServer::Respond(Job& job, std::chrono::steady_clock::time_point start, Result<ExecOutput> out, bool ran_executor,
                         std::optional<SplitOr> split_or) {
  const ShardMeta& meta = shard_->meta();
  SearchResponseMsg resp;
  resp.request_id = job.request.request_id;
  resp.shard_id = meta.shard_id;
  resp.doc_begin = meta.doc_begin;
  resp.doc_end = meta.doc_end;
  Processor processor = Processor::kCpu;
  ExecTiming timing;
  std::string query_text;  // for the slow-query log
  const uint32_t terms = static_cast<uint32_t>(job.request.terms.size());
  bool ran = false;
  if (ran_executor && options_.slow_query_ms > 0 &&
      Clock::now() - job.received >= std::chrono::duration<double, std::milli>(options_.slow_query_ms)) {
    // A tree is named by its canonical text (core/query_tree.hpp CanonicalKey).
    query_text = job.request.tree != nullptr ? LoggableTerms({CanonicalKey(*job.request.tree)})
                                             : LoggableTerms(job.request.terms);
  }
  if (out.ok()) {
    ran = true;
    timing = out->timing;
    processor = out->processor;
    resp.hits = std::move(out->hits);
    resp.has_total = job.request.count;
    resp.total = out->total;
    if (split_or.has_value()) {
      resp.or_hits = std::move(split_or->hits);
      resp.has_or_hits = true;
      if (resp.has_total) resp.or_total = split_or->total;
    }
    resp.stats.processor = processor;
    if ((job.request.flags & kFlagIncludeStats) != 0) {
      resp.stats.blocks_decoded = out->stats.blocks_decoded;
      resp.stats.postings_decoded = out->stats.postings_decoded;
      resp.stats.postings_scored = out->stats.postings_scored;
    }
    if (metrics_ != nullptr) {
      node_metrics_->postings_decoded(processor).Increment(static_cast<double>(out->stats.postings_decoded));
      node_metrics_->blocks_decoded(processor).Increment(static_cast<double>(out->stats.blocks_decoded));
      node_metrics_->postings_scored(processor).Increment(static_cast<double>(out->stats.postings_scored));
    }
  } else {
    resp.status = out.status();
  }
  const Clock::time_point end = Clock::now();
  if ((job.request.flags & kFlagIncludeStats) != 0) {
    resp.stats.queue_micros = MicrosBetween(job.received, start);
    resp.stats.run_micros = MicrosBetween(start, end);
  }
  if (metrics_ != nullptr) {
    node_metrics_->queue_seconds(processor).Observe(SecondsBetween(job.received, start));
    if (ran) node_metrics_->execution_seconds(processor).Observe(SecondsBetween(start, end));
    metrics_->requests(job.request.mode, ToRequestStatus(resp.status.code())).Increment();
    if (resp.status.code() == StatusCode::kDeadlineExceeded) metrics_->deadline_exceeded().Increment();
  }
  if (resp.status.code() == StatusCode::kCorruption) {
    impl_->corruptions.fetch_add(1);
    std::lock_guard lock(impl_->corruption_mu);
    impl_->last_corruption = resp.status.message().substr(0, 200);
  }
  if (!resp.status.ok()) {
    resp.hits.clear();
    resp.or_hits.clear();
    resp.has_or_hits = false;
    resp.has_total = false;
    resp.total = resp.or_total = 0;
  }
  std::string payload;  // empty: nothing could be encoded; the reply is dropped
  try {
    payload = EncodeSearchResponse(resp);
  } catch (const std::exception& e) {
    try {
      resp.hits.clear();
      resp.or_hits.clear();
      resp.has_or_hits = false;
      resp.has_total = false;
      resp.status = Status::Internal(std::string("cannot encode the response: ") + e.what());
      payload = EncodeSearchResponse(resp);
    } catch (...) {
      payload.clear();
    }
  }
  Reply r;
  r.peer = std::move(job.peer);
  r.payload = std::move(payload);
  r.mode = job.request.mode;
  r.received = job.received;
  if (options_.slow_query_ms > 0) {
    r.started = start;
    r.finished = end;
    r.request_id = job.request.request_id;
    r.k = job.request.k;
    r.terms = terms;
    r.status = resp.status.code();
    r.processor = processor;
    r.timing = timing;
    r.query = std::move(query_text);
  }
  impl_->QueueReply(std::move(r));
}

}  // namespace search
