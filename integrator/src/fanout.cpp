#include "integrator/fanout.hpp"

#include <poll.h>
#include <zmq.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <random>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <zmq.hpp>

#include "core/cpu_home.hpp"
#include "core/cpus.hpp"
#include "core/thread_name.hpp"
#include "core/wake_fd.hpp"

namespace search {

using Clock = std::chrono::steady_clock;

struct Fanout::Call {
  uint64_t id = 0;
  std::string frame;  // the encoded SearchRequest
  // A fetch: the encoded FetchRequest of each shard (endpoint order); empty: the shard is not asked.
  bool fetch = false;
  std::vector<std::string> shard_frames;
  std::vector<size_t> shard_docs;  // the docs each shard's FetchRequest asks for
  const std::string& FrameFor(size_t shard) const { return fetch ? shard_frames[shard] : frame; }
  bool needs_trees = false;  // the request has a tree or a count: a reply from a minor-0 node ignored them
  Clock::time_point deadline;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;                     // GUARDED_BY(mu)
  bool abandoned = false;                // GUARDED_BY(mu): the caller gave up (I/O thread stuck)
  std::vector<ShardCallResult> results;  // GUARDED_BY(mu); written once, when done
  Fanout::SearchCallback on_done;        // SearchAsync's: called instead of the condition variable
};

struct Fanout::Impl {
  // One search in flight. Per shard: its result, the replicas tried (in order), how many of them
  // still owe a reply, when each was sent to.
  struct ShardCall {
    std::vector<size_t> tried;                          // replica indices
    std::vector<Clock::time_point> sent;                // parallel to tried
    std::vector<bool> open;                             // parallel to tried: reply still owed
    size_t outstanding = 0;
  };
  struct Pending {
    std::shared_ptr<Call> call;
    std::vector<ShardCallResult> shards;
    std::vector<ShardCall> calls;
    size_t remaining = 0;
    Clock::time_point sent_at;
  };
  struct ShardLive {  // per replica
    bool connected = false;  // ZMTP handshake done and not disconnected since
    bool seen = false;       // a pong or reply ever arrived
    bool up = false;
    Clock::time_point last_seen;
    std::optional<ShardHealthMsg> health;
    std::string last_error;
    uint16_t minor = kProtocolMinor;  // the wire minor of its last pong or reply (until one: ours)
  };
  // Per replica, I/O thread only: outstanding requests and recent reply latencies.
  struct ReplicaLoad {
    uint32_t outstanding = 0;
    // Its last reply came in a minor >= kMinorOneFrame: messages go to it as one frame, without
    // the empty delimiter (one CURVE box a message, not two). Cleared on each (re)connection,
    // until its first reply says again (a node restarted with an older build reads [empty][frame]).
    bool one_frame = false;
    std::array<float, 64> lat_us{};
    size_t lat_n = 0, lat_pos = 0;
    void Add(double us) {
      lat_us[lat_pos] = static_cast<float>(us);
      lat_pos = (lat_pos + 1) % lat_us.size();
      lat_n = std::min(lat_n + 1, lat_us.size());
    }
    // The q-quantile of the recent latencies, or `fallback` with fewer than 8 samples.
    double Quantile(double q, double fallback) const {
      if (lat_n < 8) return fallback;
      std::array<float, 64> v = lat_us;
      const size_t k = std::min(lat_n - 1, static_cast<size_t>(q * static_cast<double>(lat_n)));
      std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.begin() + static_cast<long>(lat_n));
      return v[k];
    }
  };

  explicit Impl(const FanoutOptions& o, FanoutListener* l) : opt(o), listener(l) {}

  const FanoutOptions& opt;
  FanoutListener* listener;
  zmq::context_t ctx{1};
  // Submissions wake the I/O thread only when it may be blocked in poll (wake_fd.hpp); a wake-up
  // per search (it was a message on an inproc socket) was a syscall or two on each side.
  WakeFd waker;
  std::vector<zmq::socket_t> dealers, monitors;  // per replica
  bool have_monitors = true;
  std::vector<std::string> replica_ep;           // per replica
  std::vector<size_t> shard_of;                  // replica -> shard index
  std::vector<std::vector<size_t>> replicas_of;  // shard index -> replicas

  std::mutex submit_mu;
  std::deque<std::shared_ptr<Call>> queue;  // GUARDED_BY(submit_mu)

  bool Queued() {
    std::lock_guard lock(submit_mu);
    return !queue.empty();
  }

  // I/O thread only.
  std::unordered_map<uint64_t, Pending> pending;
  std::set<std::pair<Clock::time_point, uint64_t>> by_deadline;
  std::set<std::tuple<Clock::time_point, uint64_t, size_t>> hedges;  // (when, request, shard)
  std::vector<ReplicaLoad> load;
  std::vector<char> ping_owed;  // per replica: handshake done, its first ping not yet taken (SendPing)
  // Per replica: sent on since its last drain to EAGAIN. Run polls the dealers by their ZMQ_FD,
  // which a send may reset (libzmq processes the socket's commands then, a reply's among them), so
  // a dealer sent on is drained once more before the wait.
  std::vector<char> unread;
  static constexpr std::chrono::milliseconds kOwedPingRetry{5};
  std::atomic<uint64_t> retries{0}, hedged{0};
  std::unique_ptr<CpuHome> home;  // with FanoutOptions::home_cpu

  mutable std::mutex health_mu;
  std::vector<ShardLive> live;       // GUARDED_BY(health_mu), per replica
  std::vector<bool> shard_up;        // GUARDED_BY(health_mu), per shard: any replica up
  std::atomic<bool> all_up{false};   // every shard_up, for AllUp() without the lock

  size_t num_shards() const { return replicas_of.size(); }

  uint32_t ShardId(size_t s) const {  // REQUIRES: health_mu held. The id its replicas report.
    for (size_t r : replicas_of[s])
      if (live[r].health) return live[r].health->shard_id;
    return static_cast<uint32_t>(s);
  }
  uint32_t ShardIdLocked(size_t s) const {
    std::lock_guard lock(health_mu);
    return ShardId(s);
  }

  // [empty][frame], or [frame] alone when `one_frame` (the node speaks kMinorOneFrame).
  static bool SendFrame(zmq::socket_t& s, const std::string& frame, bool one_frame) {
    try {
      zmq::message_t body(frame.data(), frame.size());
      if (one_frame) return s.send(body, zmq::send_flags::dontwait).has_value();
      zmq::message_t empty;
      if (!s.send(empty, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
      // Once the first part is accepted the rest of the multipart message is too.
      return s.send(body, zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t&) {
      return false;
    }
  }

  std::vector<ShardCallResult> AllFailed(ShardCallState state, const std::string& reason) const {
    std::vector<ShardCallResult> out(num_shards());
    std::lock_guard lock(health_mu);
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].state = state;
      out[i].shard = ShardId(i);
      out[i].reason = reason;
    }
    return out;
  }

  static void Finish(const std::shared_ptr<Call>& call, std::vector<ShardCallResult> results) {
    if (call->on_done) {  // SearchAsync: completed exactly once, here
      Fanout::SearchCallback done = std::move(call->on_done);
      call->on_done = nullptr;
      done(std::move(results));
      return;
    }
    {
      std::lock_guard lock(call->mu);
      call->results = std::move(results);
      call->done = true;
    }
    call->cv.notify_one();
  }

  void Complete(std::unordered_map<uint64_t, Pending>::iterator it) {
    Pending& p = it->second;
    for (ShardCall& c : p.calls)  // replies still owed will come back late
      for (size_t t = 0; t < c.tried.size(); ++t)
        if (c.open[t]) {
          c.open[t] = false;
          if (load[c.tried[t]].outstanding > 0) --load[c.tried[t]].outstanding;
        }
    by_deadline.erase({p.call->deadline, it->first});
    Finish(p.call, std::move(p.shards));
    pending.erase(it);
  }

  void MarkSeen(size_t r) {
    std::lock_guard lock(health_mu);
    live[r].seen = true;
    live[r].last_seen = Clock::now();
  }

  void UpdateStates(Clock::time_point now) {
    std::vector<std::pair<size_t, bool>> changes;
    {
      std::lock_guard lock(health_mu);
      const auto window = opt.ping_interval * opt.missed_pongs_down + opt.ping_interval / 2;
      for (size_t r = 0; r < live.size(); ++r) {
        ShardLive& s = live[r];
        const bool up = s.connected && s.seen && now - s.last_seen <= window;
        if (up != s.up) {
          s.up = up;
          if (!up && s.connected && s.last_error.empty()) s.last_error = "missed pongs";
        }
      }
      bool all = true;
      for (size_t sh = 0; sh < replicas_of.size(); ++sh) {
        bool any = false;
        for (size_t r : replicas_of[sh]) any = any || live[r].up;
        if (any != shard_up[sh]) {
          shard_up[sh] = any;
          changes.emplace_back(sh, any);
        }
        all = all && any;
      }
      all_up.store(all, std::memory_order_relaxed);
    }
    if (listener)
      for (auto [sh, up] : changes) listener->OnShardUp(sh, up);
  }

  // A ping the socket refused (IMMEDIATE: the pipe of a handshake just done may reach the socket
  // after the monitor's event) is owed, and Run retries it within milliseconds rather than leaving
  // the replica unknown until the next tick, a whole ping interval away.
  bool SendPing(size_t r, std::atomic<uint64_t>& next_id) {
    unread[r] = 1;
    return SendFrame(dealers[r], EncodePing(PingMsg{next_id.fetch_add(1, std::memory_order_relaxed)}),
                     load[r].one_frame);
  }

  // Sends the call to the best replica of shard `sh` not tried yet: up before merely connected,
  // then fewest outstanding requests, then lowest median latency. False when none took it.
  bool SendToReplica(uint64_t id, Pending& p, size_t sh, Clock::time_point now) {
    ShardCall& c = p.calls[sh];
    std::vector<std::pair<std::tuple<int, uint32_t, double>, size_t>> order;
    {
      std::lock_guard lock(health_mu);
      for (size_t r : replicas_of[sh]) {
        if (std::find(c.tried.begin(), c.tried.end(), r) != c.tried.end()) continue;
        if (p.call->fetch && live[r].minor < kMinorFetch) continue;  // it could not read the request
        const int rank = live[r].up ? 0 : live[r].connected ? 1 : 2;
        order.push_back({{rank, load[r].outstanding, load[r].Quantile(0.5, 0.0)}, r});
      }
    }
    std::sort(order.begin(), order.end());
    for (const auto& [key, r] : order) {
      c.tried.push_back(r);
      c.sent.push_back(now);
      unread[r] = 1;
      if (!SendFrame(dealers[r], p.call->FrameFor(sh), load[r].one_frame)) {  // IMMEDIATE: not connected
        c.open.push_back(false);
        continue;
      }
      c.open.push_back(true);
      ++c.outstanding;
      ++load[r].outstanding;
      // Hedge after this replica's p95 if another replica could still take it.
      if (opt.hedge && c.tried.size() < replicas_of[sh].size()) {
        const double p95 = load[r].Quantile(0.95, static_cast<double>(opt.hedge_default.count()));
        const auto after = std::max<Clock::duration>(opt.hedge_min, std::chrono::microseconds(static_cast<int64_t>(p95)));
        if (now + after < p.call->deadline) hedges.emplace(now + after, id, sh);
      }
      return true;
    }
    return false;
  }

  void DrainSubmissions(bool stopping) {
    std::deque<std::shared_ptr<Call>> calls;
    {
      std::lock_guard lock(submit_mu);
      calls.swap(queue);
    }
    const auto now = Clock::now();
    for (auto& call : calls) {
      if (stopping) {
        Finish(call, AllFailed(ShardCallState::kFailed, "integrator shutting down"));
        continue;
      }
      Pending p;
      p.call = call;
      p.sent_at = now;
      p.shards.resize(num_shards());
      p.calls.resize(num_shards());
      {
        std::lock_guard lock(health_mu);
        for (size_t i = 0; i < num_shards(); ++i) p.shards[i].shard = ShardId(i);
      }
      for (size_t i = 0; i < num_shards(); ++i) {
        ShardCallResult& r = p.shards[i];
        if (call->fetch && call->shard_frames[i].empty()) {
          r.state = ShardCallState::kOk;  // not asked
        } else if (now >= call->deadline) {
          r.state = ShardCallState::kTimedOut;
          r.reason = "deadline passed before the request was sent";
        } else if (!SendToReplica(call->id, p, i, now)) {
          r.state = ShardCallState::kFailed;
          r.reason = call->fetch ? NoFetchReason(i) : "";
          if (r.reason.empty()) r.reason = "shard not connected (" + opt.endpoints[i] + ")";
          if (listener) listener->OnShardReply(i, r.state, 0.0);
        } else {
          ++p.remaining;
        }
      }
      if (p.remaining == 0) {
        Finish(call, std::move(p.shards));
        continue;
      }
      by_deadline.emplace(call->deadline, call->id);
      pending.emplace(call->id, std::move(p));
    }
  }

  // Why shard sh cannot take a fetch when none of its replicas speaks the fetch phase (wire minor 2;
  // an older node would drop the request and leave the search waiting for its deadline); "" when
  // one does.
  std::string NoFetchReason(size_t sh) const {
    std::lock_guard lock(health_mu);
    uint16_t minor = kMinorFetch;
    for (size_t r : replicas_of[sh]) {
      if (live[r].minor >= kMinorFetch) return "";
      minor = live[r].minor;
    }
    return "shard " + std::to_string(ShardId(sh)) + " (" + opt.endpoints[sh] + ") speaks protocol " +
           std::to_string(kProtocolMajor) + "." + std::to_string(minor) +
           ", which has no fetch phase: upgrade the node";
  }

  // Shard i of the call is settled (its state and result filled in): its latency since the call was
  // sent, the listener told, one shard fewer to wait for.
  void SettleShard(Pending& p, size_t i) {
    ShardCallResult& r = p.shards[i];
    r.sent_at = p.sent_at;
    r.settled_at = Clock::now();
    r.latency_us =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(r.settled_at - p.sent_at).count());
    if (listener) listener->OnShardReply(i, r.state, static_cast<double>(r.latency_us) * 1e-6);
    --p.remaining;
  }

  void FailShard(Pending& p, size_t i, ShardCallState state, std::string reason) {
    p.shards[i].state = state;
    p.shards[i].reason = std::move(reason);
    SettleShard(p, i);
  }

  // Replica r owes shard sh's reply no more; true if it did (its send time in *sent).
  bool CloseReplica(ShardCall& c, size_t r, Clock::time_point* sent) {
    for (size_t t = 0; t < c.tried.size(); ++t)
      if (c.tried[t] == r && c.open[t]) {
        c.open[t] = false;
        --c.outstanding;
        if (load[r].outstanding > 0) --load[r].outstanding;
        if (sent != nullptr) *sent = c.sent[t];
        return true;
      }
    return false;
  }

  // Replica r of shard sh failed this call: retry on another replica within the deadline, else
  // (no other replica owes a reply) the shard fails.
  void ReplicaFailed(std::unordered_map<uint64_t, Pending>::iterator it, size_t sh, ShardCallState state,
                     const std::string& reason) {
    Pending& p = it->second;
    ShardCall& c = p.calls[sh];
    const auto now = Clock::now();
    if (state == ShardCallState::kFailed && now < p.call->deadline && SendToReplica(it->first, p, sh, now)) {
      retries.fetch_add(1, std::memory_order_relaxed);
      if (listener) listener->OnRetry(sh);
      return;
    }
    if (c.outstanding > 0) return;  // a hedged request may still answer
    FailShard(p, sh, state, reason);
    if (p.remaining == 0) Complete(it);
  }

  // The pending call that replica r's reply to `request_id` answers, the replica's debt closed and
  // its latency noted; pending.end() (reported as late) when the call is over or the replica owed
  // it nothing.
  std::unordered_map<uint64_t, Pending>::iterator OwedReply(size_t r, uint64_t request_id) {
    MarkSeen(r);
    const size_t sh = shard_of[r];
    auto it = pending.find(request_id);
    if (it == pending.end()) {
      if (listener) listener->OnLateReply(sh);
      return pending.end();
    }
    Pending& p = it->second;
    Clock::time_point sent;
    const bool owed = CloseReplica(p.calls[sh], r, &sent);
    if (owed) {
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent).count();
      load[r].Add(static_cast<double>(us));
    }
    if (!owed || p.shards[sh].state != ShardCallState::kPending) {
      if (listener) listener->OnLateReply(sh);
      return pending.end();
    }
    return it;
  }

  void HandleResponse(size_t r, SearchResponseMsg&& resp, uint16_t minor) {
    const size_t sh = shard_of[r];
    const auto it = OwedReply(r, resp.request_id);
    if (it == pending.end()) return;
    Pending& p = it->second;
    ShardCallResult& res = p.shards[sh];
    res.shard = resp.shard_id;
    if (p.call->fetch) {
      ReplicaFailed(it, sh, ShardCallState::kFailed,
                    "shard " + std::to_string(resp.shard_id) + " (" + replica_ep[r] +
                        ") answered a fetch with a search response: " + resp.status.ToString());
      return;
    }
    if (resp.status.ok() && p.call->needs_trees && minor < kMinorQueryTrees) {
      // A node of wire 1.0 answered the bag of words and no count: wrong for this request.
      ReplicaFailed(it, sh, ShardCallState::kFailed,
                    "shard " + std::to_string(resp.shard_id) + " (" + replica_ep[r] + ") speaks protocol " +
                        std::to_string(kProtocolMajor) + "." + std::to_string(minor) +
                        ", which has no query trees or counts: upgrade the node");
      return;
    }
    if (resp.status.code() == StatusCode::kInvalidArgument && !resp.status.message().starts_with("unsupported protocol") &&
        !resp.status.message().starts_with("malformed message")) {
      // The request's own fault (a phrase on an index without positions, ...): every replica would
      // say the same, so none is tried. (A node of another protocol version, or one that could not
      // read the frame, is the replica's problem: the next replica is tried.)
      res.node_status = resp.status;
      FailShard(p, sh, ShardCallState::kFailed,
                "shard " + std::to_string(resp.shard_id) + " (" + replica_ep[r] + ") answered " +
                    resp.status.ToString());
      if (p.remaining == 0) Complete(it);
      return;
    }
    if (resp.status.ok()) {
      res.state = ShardCallState::kOk;
      res.doc_begin = resp.doc_begin;
      res.doc_end = resp.doc_end;
      res.hits.reserve(resp.hits.size());
      for (auto& h : resp.hits) res.hits.push_back(MergedHit{h.doc, h.score, resp.shard_id, std::move(h.external_id)});
      res.has_or_hits = resp.has_or_hits;
      res.has_total = resp.has_total;
      res.total = resp.total;
      res.or_total = resp.or_total;
      res.node_queue_us = resp.stats.queue_micros;
      res.node_run_us = resp.stats.run_micros;
      res.or_hits.reserve(resp.or_hits.size());
      for (auto& h : resp.or_hits)
        res.or_hits.push_back(MergedHit{h.doc, h.score, resp.shard_id, std::move(h.external_id)});
      SettleShard(p, sh);
      if (p.remaining == 0) Complete(it);
    } else {
      const bool late = resp.status.code() == StatusCode::kDeadlineExceeded;
      ReplicaFailed(it, sh, late ? ShardCallState::kTimedOut : ShardCallState::kFailed,
                    "shard " + std::to_string(resp.shard_id) + " (" + replica_ep[r] + ") answered " +
                        resp.status.ToString());
    }
  }

  void HandleFetchResponse(size_t r, FetchResponseMsg&& resp) {
    const size_t sh = shard_of[r];
    const auto it = OwedReply(r, resp.request_id);
    if (it == pending.end()) return;
    Pending& p = it->second;
    ShardCallResult& res = p.shards[sh];
    res.shard = resp.shard_id;
    const std::string who = "shard " + std::to_string(resp.shard_id) + " (" + replica_ep[r] + ")";
    if (!p.call->fetch) {
      ReplicaFailed(it, sh, ShardCallState::kFailed, who + " answered a search with a fetch response");
      return;
    }
    if (resp.status.ok() && resp.docs.size() != p.call->shard_docs[sh]) {
      ReplicaFailed(it, sh, ShardCallState::kFailed, who + " answered a fetch with " +
                                                         std::to_string(resp.docs.size()) + " docs, not as asked");
      return;
    }
    if (!resp.status.ok()) {
      const bool late = resp.status.code() == StatusCode::kDeadlineExceeded;
      ReplicaFailed(it, sh, late ? ShardCallState::kTimedOut : ShardCallState::kFailed,
                    who + " answered the fetch " + resp.status.ToString());
      return;
    }
    res.state = ShardCallState::kOk;
    res.docs = std::move(resp.docs);
    SettleShard(p, sh);
    if (p.remaining == 0) Complete(it);
  }

  void HandlePong(size_t r, PongMsg&& pong) {
    if (!pong.status.ok()) {
      std::lock_guard lock(health_mu);
      live[r].last_error = "ping answered " + pong.status.ToString();
      return;
    }
    {
      std::lock_guard lock(health_mu);
      live[r].seen = true;
      live[r].last_seen = Clock::now();
      live[r].health = pong.health;
      live[r].last_error.clear();
    }
    if (listener) listener->OnHealth(shard_of[r], pong.health);
    UpdateStates(Clock::now());
  }

  void DrainReplies(size_t r) {
    const size_t sh = shard_of[r];
    unread[r] = 0;
    while (true) {
      std::vector<zmq::message_t> parts;
      try {
        zmq::message_t m;
        if (!dealers[r].recv(m, zmq::recv_flags::dontwait)) return;
        bool more = m.more();
        parts.push_back(std::move(m));
        while (more) {
          zmq::message_t next;
          if (!dealers[r].recv(next, zmq::recv_flags::dontwait)) break;
          more = next.more();
          if (parts.size() < 4) parts.push_back(std::move(next));
        }
      } catch (const zmq::error_t&) {
        return;
      }
      // A reply takes its request's shape: [empty][frame], or [frame] alone.
      if (parts.size() > 2 || (parts.size() == 2 && parts[0].size() != 0)) {
        if (listener)
          listener->OnMalformedReply(sh, Status::InvalidArgument("expected [empty][frame] or [frame] from the node"));
        continue;
      }
      RecoveredHeader rec;
      const zmq::message_t& frame = parts.back();
      auto env = DecodeEnvelope(std::string_view(static_cast<const char*>(frame.data()), frame.size()), &rec);
      if (env.ok()) {
        load[r].one_frame = env->minor >= kMinorOneFrame;
        std::lock_guard lock(health_mu);
        live[r].minor = env->minor;
      }
      if (!env.ok()) {
        if (listener) listener->OnMalformedReply(sh, env.status());
        if (rec.request_id) {
          auto it = pending.find(*rec.request_id);
          if (it != pending.end() && CloseReplica(it->second.calls[sh], r, nullptr) &&
              it->second.shards[sh].state == ShardCallState::kPending) {
            ReplicaFailed(it, sh, ShardCallState::kFailed, "malformed reply: " + env.status().message());
          }
        }
        continue;
      }
      if (auto* resp = std::get_if<SearchResponseMsg>(&env->body)) {
        HandleResponse(r, std::move(*resp), env->minor);
      } else if (auto* fetched = std::get_if<FetchResponseMsg>(&env->body)) {
        HandleFetchResponse(r, std::move(*fetched));
      } else if (auto* pong = std::get_if<PongMsg>(&env->body)) {
        HandlePong(r, std::move(*pong));
      } else if (listener) {
        listener->OnMalformedReply(
            sh, Status::InvalidArgument("unexpected " + std::string(MessageKindName(env->kind())) + " from a node"));
      }
    }
  }

  void DrainMonitor(size_t r, std::atomic<uint64_t>& next_id) {
    const size_t sh = shard_of[r];
    while (true) {
      zmq::message_t ev, addr;
      try {
        if (!monitors[r].recv(ev, zmq::recv_flags::dontwait)) return;
        if (ev.more()) (void)monitors[r].recv(addr, zmq::recv_flags::dontwait);
      } catch (const zmq::error_t&) {
        return;
      }
      if (ev.size() < 6) continue;
      uint16_t event = 0;
      std::memcpy(&event, ev.data(), sizeof(event));
      if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        {
          std::lock_guard lock(health_mu);
          live[r].connected = true;
        }
        load[r].one_frame = false;  // a node restarted may be of an older build: its pong says
        ping_owed[r] = !SendPing(r, next_id);  // learn its health now rather than at the next tick
      } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                 event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
        // Never connected: a CURVE node refused this integrator's key, or the keys do not match
        // (plain against CURVE, a wrong server key). The health report says why it stays down.
        uint32_t value = 0;
        std::memcpy(&value, static_cast<const char*>(ev.data()) + 2, sizeof(value));
        std::lock_guard lock(health_mu);
        live[r].last_error = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                                 ? "handshake refused by the node (CURVE client key not in its --curve-clients?)"
                             : value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                                 ? "handshake failed: one side uses CURVE, the other plain ZeroMQ"
                             : value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC
                                 ? "handshake failed: CURVE keys do not match (wrong server key in --curve-servers?)"
                                 : "handshake failed";
      } else if (event == ZMQ_EVENT_DISCONNECTED) {
        ping_owed[r] = false;
        load[r].one_frame = false;
        uint32_t shard;
        {
          std::lock_guard lock(health_mu);
          // A failed handshake is followed by its disconnection: keep the handshake's reason.
          if (live[r].connected || !live[r].last_error.starts_with("handshake")) live[r].last_error = "disconnected";
          live[r].connected = false;
          shard = ShardId(sh);
        }
        // Replies cannot come back over a dropped connection: retry or fail what it owed.
        const std::string reason = "connection to shard " + std::to_string(shard) + " (" + replica_ep[r] + ") lost";
        for (auto it = pending.begin(); it != pending.end();) {
          auto cur = it++;
          if (cur->second.shards[sh].state != ShardCallState::kPending) continue;
          if (!CloseReplica(cur->second.calls[sh], r, nullptr)) continue;
          ReplicaFailed(cur, sh, ShardCallState::kFailed, reason);
        }
        UpdateStates(Clock::now());
      }
    }
  }

  void FireHedges(Clock::time_point now) {
    while (!hedges.empty() && std::get<0>(*hedges.begin()) <= now) {
      const auto [when, id, sh] = *hedges.begin();
      hedges.erase(hedges.begin());
      auto it = pending.find(id);
      if (it == pending.end() || it->second.shards[sh].state != ShardCallState::kPending) continue;
      if (SendToReplica(id, it->second, sh, now)) {
        hedged.fetch_add(1, std::memory_order_relaxed);
        if (listener) listener->OnHedge(sh);
      }
    }
  }

  void ExpireDeadlines(Clock::time_point now) {
    while (!by_deadline.empty() && by_deadline.begin()->first <= now) {
      auto it = pending.find(by_deadline.begin()->second);
      if (it == pending.end()) {
        by_deadline.erase(by_deadline.begin());
        continue;
      }
      Pending& p = it->second;
      for (size_t i = 0; i < p.shards.size(); ++i)
        if (p.shards[i].state == ShardCallState::kPending)
          FailShard(p, i, ShardCallState::kTimedOut,
                    "shard " + std::to_string(p.shards[i].shard) + " did not answer before the deadline");
      Complete(it);
    }
  }

  void Run(const std::atomic<bool>& stopped, std::atomic<uint64_t>& next_id) {
    const size_t n = dealers.size();
    // Every socket by its ZMQ_FD, in one poll(2): zmq_poll would ask each socket item for
    // ZMQ_EVENTS before and after it waits, two system calls each (libzmq's fork check, getpid,
    // and a poll of its mailbox), and poll twice. A descriptor turns readable when the socket's
    // mailbox gets a command while asleep, which it is once the socket was read to EAGAIN with no
    // send since (unread): so every dealer sent on is drained before the wait, and a monitor (only
    // ever read, by DrainMonitor, to EAGAIN) needs nothing more.
    std::vector<pollfd> fds;
    fds.push_back({waker.fd(), POLLIN, 0});
    for (auto& d : dealers) fds.push_back({d.get(zmq::sockopt::fd), POLLIN, 0});
    if (have_monitors)
      for (auto& m : monitors) fds.push_back({m.get(zmq::sockopt::fd), POLLIN, 0});
    unread.assign(n, 1);
    if (have_monitors)
      for (size_t i = 0; i < n; ++i) DrainMonitor(i, next_id);  // any event from before
    auto next_ping = Clock::now();
    while (!stopped.load(std::memory_order_acquire)) {
      auto now = Clock::now();
      if (now >= next_ping) {
        for (size_t i = 0; i < n; ++i) SendPing(i, next_id);
        UpdateStates(now);
        next_ping = now + opt.ping_interval;
      }
      bool owed = false;
      for (size_t i = 0; i < n; ++i)
        if (ping_owed[i]) {
          ping_owed[i] = !SendPing(i, next_id);
          owed = owed || ping_owed[i];
        }
      // Read what the sends may have hidden; a reply read may send again (a retry on another
      // replica), so until no dealer is left unread.
      for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < n; ++i)
          if (unread[i]) {
            DrainReplies(i);
            again = true;
          }
      }
      now = Clock::now();
      auto wake = next_ping;
      if (owed) wake = std::min(wake, now + kOwedPingRetry);
      if (!by_deadline.empty()) wake = std::min(wake, by_deadline.begin()->first);
      if (!hedges.empty()) wake = std::min(wake, std::get<0>(*hedges.begin()));
      auto wait_us = std::chrono::duration_cast<std::chrono::microseconds>(wake - now).count();
      int timeout_ms = wait_us <= 0 ? 0 : static_cast<int>(std::min<int64_t>((wait_us + 999) / 1000, 1 << 30));
      // Idle before the last look at the queue (wake_fd.hpp).
      waker.SetIdle(true);
      if (Queued()) timeout_ms = 0;
      const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
      waker.SetIdle(false);
      if (ready < 0) {
        if (errno != EINTR) break;
        continue;
      }
      if (fds[0].revents & POLLIN) waker.Drain();
      DrainSubmissions(false);
      for (size_t i = 0; i < n; ++i)
        if (fds[1 + i].revents & POLLIN) DrainReplies(i);
      if (have_monitors)
        for (size_t i = 0; i < n; ++i)
          if (fds[1 + n + i].revents & POLLIN) DrainMonitor(i, next_id);
      now = Clock::now();
      FireHedges(now);
      ExpireDeadlines(now);
      if (home) home->Tick(now);
    }
    // Shutting down: nothing stays outstanding.
    for (auto it = pending.begin(); it != pending.end();) {
      auto cur = it++;
      for (size_t i = 0; i < cur->second.shards.size(); ++i)
        if (cur->second.shards[i].state == ShardCallState::kPending)
          FailShard(cur->second, i, ShardCallState::kFailed, "integrator shutting down");
      Complete(cur);
    }
    DrainSubmissions(true);
  }
};

Fanout::Fanout(FanoutOptions options, FanoutListener* listener)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(options_, listener)) {
  std::random_device rd;
  // A random start makes request ids unique across integrator restarts too.
  next_id_ = (uint64_t{rd()} << 32 | rd()) & ((uint64_t{1} << 62) - 1);
}

Result<std::unique_ptr<Fanout>> Fanout::Start(FanoutOptions options, FanoutListener* listener) {
  if (options.endpoints.empty()) return Status::InvalidArgument("no shard endpoints given");
  if (options.ping_interval.count() <= 0 || options.missed_pongs_down < 1)
    return Status::InvalidArgument("ping interval and missed pongs must be positive");
  std::unique_ptr<Fanout> f(new Fanout(std::move(options), listener));
  Impl& im = *f->impl_;
  const auto tag = std::to_string(reinterpret_cast<uintptr_t>(f.get()));
  if (!im.waker.Open())
    return Status::Internal(std::string("cannot create the submission eventfd: ") + std::strerror(errno));
  const FanoutOptions& o = f->options_;
  for (size_t sh = 0; sh < o.endpoints.size(); ++sh) {
    im.replicas_of.emplace_back();
    std::string rest = o.endpoints[sh];
    for (size_t bar; !rest.empty();) {
      bar = rest.find('|');
      std::string ep = rest.substr(0, bar);
      rest = bar == std::string::npos ? "" : rest.substr(bar + 1);
      if (ep.empty()) return Status::InvalidArgument("empty replica endpoint in '" + o.endpoints[sh] + "'");
      im.replicas_of.back().push_back(im.replica_ep.size());
      im.replica_ep.push_back(ep);
      im.shard_of.push_back(sh);
    }
    if (im.replicas_of.back().empty()) return Status::InvalidArgument("shard " + std::to_string(sh) + " has no endpoint");
  }
  if (o.home_cpu >= 0) {
    im.home = std::make_unique<CpuHome>(o.home_cpu, AllowedCpus());
    zmq_ctx_set(im.ctx.handle(), ZMQ_THREAD_NAME_PREFIX, im.home->AddZmqIoThread());
  }
  im.live.resize(im.replica_ep.size());
  im.load.resize(im.replica_ep.size());
  im.ping_owed.assign(im.replica_ep.size(), 0);
  im.shard_up.assign(o.endpoints.size(), false);
  for (size_t i = 0; i < im.replica_ep.size(); ++i) {
    const std::string& ep = im.replica_ep[i];
    std::string server_key;
    if (o.curve.has_value()) {
      auto k = o.curve->servers.For(ep);
      if (!k.ok()) return Status::InvalidArgument(k.status().message());
      server_key = std::move(k).value();
    }
    try {
      zmq::socket_t d(im.ctx, zmq::socket_type::dealer);
      if (o.curve.has_value()) {
        d.set(zmq::sockopt::curve_serverkey, server_key);
        d.set(zmq::sockopt::curve_publickey, o.curve->client.public_key);
        d.set(zmq::sockopt::curve_secretkey, o.curve->client.secret_key);
      }
      d.set(zmq::sockopt::linger, 0);
      d.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxFrameBytes + 64));
      d.set(zmq::sockopt::sndhwm, o.send_hwm);
      d.set(zmq::sockopt::rcvhwm, o.recv_hwm);
      d.set(zmq::sockopt::immediate, true);
      d.set(zmq::sockopt::reconnect_ivl, o.reconnect_ivl_ms);
      d.set(zmq::sockopt::reconnect_ivl_max, o.reconnect_ivl_max_ms);
      d.set(zmq::sockopt::heartbeat_ivl, o.heartbeat_ivl_ms);
      d.set(zmq::sockopt::heartbeat_timeout, o.heartbeat_timeout_ms);
      d.set(zmq::sockopt::heartbeat_ttl, o.heartbeat_timeout_ms);
      constexpr int kMonitorEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
                                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
      const std::string mon = "inproc://fanout-monitor-" + tag + "-" + std::to_string(i);
      if (zmq_socket_monitor(d.handle(), mon.c_str(), kMonitorEvents) == 0) {
        zmq::socket_t m(im.ctx, zmq::socket_type::pair);
        m.set(zmq::sockopt::linger, 0);
        m.connect(mon);
        im.monitors.push_back(std::move(m));
      } else {
        im.have_monitors = false;
      }
      d.connect(ep);
      im.dealers.push_back(std::move(d));
    } catch (const zmq::error_t& e) {
      return Status::InvalidArgument("bad shard endpoint '" + ep + "': " + e.what());
    }
  }
  if (!im.have_monitors) {
    // Without connection events a shard counts as connected; pongs alone decide up/down.
    for (auto& s : im.live) s.connected = true;
  }
  f->io_thread_ = std::thread([fp = f.get()] {
    SetThreadName("fanout-io");
    if (fp->impl_->home) fp->impl_->home->AddThread(CpuHome::ThisThread());
    fp->impl_->Run(fp->stopped_, fp->next_id_);
  });
  return f;
}

Fanout::~Fanout() { Stop(); }

void Fanout::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  {
    std::lock_guard lock(impl_->submit_mu);
    if (stopped_.exchange(true)) return;
  }
  impl_->waker.Wake();
  if (io_thread_.joinable()) io_thread_.join();
  impl_->monitors.clear();
  impl_->dealers.clear();
  impl_->ctx.close();
}

void Fanout::JoinHome() {
  if (impl_->home) impl_->home->AddThread(CpuHome::ThisThread());
}

void Fanout::LeaveHome() {
  if (impl_->home) impl_->home->Leave(CpuHome::ThisThread());
}

std::optional<CpuHomeState> Fanout::HomeState() const {
  if (!impl_->home) return std::nullopt;
  return impl_->home->state();
}

void Fanout::Submit(const std::shared_ptr<Call>& call) {
  bool pushed = false, first = false;
  {
    std::lock_guard lock(impl_->submit_mu);
    if (!stopped_.load()) {
      impl_->queue.push_back(call);
      pushed = true;
      first = impl_->queue.size() == 1;
    }
  }
  if (!pushed) {
    Impl::Finish(call, impl_->AllFailed(ShardCallState::kFailed, "integrator shutting down"));
    return;
  }
  // After the push (wake_fd.hpp). A search queued behind others needs no wake-up: the first of
  // them saw to it.
  if (first) impl_->waker.WakeIfIdle();
}

std::vector<ShardCallResult> Fanout::Search(SearchRequestMsg request, Clock::time_point deadline) {
  auto call = NewCall(request, deadline);
  Submit(call);
  return Wait(call);
}

std::vector<ShardCallResult> Fanout::Fetch(std::vector<std::optional<FetchRequestMsg>> requests,
                                           Clock::time_point deadline) {
  auto call = NewFetchCall(requests, deadline);
  Submit(call);
  return Wait(call);
}

void Fanout::FetchAsync(std::vector<std::optional<FetchRequestMsg>> requests, Clock::time_point deadline,
                        SearchCallback done) {
  auto call = NewFetchCall(requests, deadline);
  call->on_done = std::move(done);
  Submit(call);
}

std::shared_ptr<Fanout::Call> Fanout::NewFetchCall(std::vector<std::optional<FetchRequestMsg>>& requests,
                                                   Clock::time_point deadline) {
  auto call = std::make_shared<Call>();
  call->id = next_id_.fetch_add(1, std::memory_order_relaxed);
  call->deadline = deadline;
  call->fetch = true;
  call->shard_frames.resize(num_shards());
  call->shard_docs.resize(num_shards());
  for (size_t i = 0; i < requests.size() && i < num_shards(); ++i)
    if (requests[i].has_value()) {
      requests[i]->request_id = call->id;
      call->shard_frames[i] = EncodeFetchRequest(*requests[i]);
      call->shard_docs[i] = requests[i]->docs.size();
    }
  return call;
}

std::vector<ShardCallResult> Fanout::Wait(const std::shared_ptr<Call>& call) {
  std::unique_lock lock(call->mu);
  if (!call->cv.wait_until(lock, call->deadline + options_.grace, [&] { return call->done; })) {
    call->abandoned = true;
    lock.unlock();
    return impl_->AllFailed(ShardCallState::kTimedOut, "integrator I/O thread did not complete the request");
  }
  return std::move(call->results);
}

void Fanout::SearchAsync(SearchRequestMsg request, Clock::time_point deadline, SearchCallback done) {
  auto call = NewCall(request, deadline);
  call->on_done = std::move(done);
  Submit(call);
}

std::shared_ptr<Fanout::Call> Fanout::NewCall(SearchRequestMsg& request, Clock::time_point deadline) {
  auto call = std::make_shared<Call>();
  call->id = request.request_id = next_id_.fetch_add(1, std::memory_order_relaxed);
  call->deadline = deadline;
  call->frame = EncodeSearchRequest(request);
  call->needs_trees = request.tree != nullptr || request.count;
  return call;
}

std::vector<ShardHealthView> Fanout::Health() const {
  const auto now = Clock::now();
  std::lock_guard lock(impl_->health_mu);
  std::vector<ShardHealthView> out;
  for (size_t sh = 0; sh < impl_->replicas_of.size(); ++sh) {
    ShardHealthView v;
    v.shard = impl_->ShardId(sh);
    v.endpoint = options_.endpoints[sh];
    v.replicas = static_cast<uint32_t>(impl_->replicas_of[sh].size());
    // The shard's view: its freshest up replica (else its freshest replica).
    const Impl::ShardLive* best = nullptr;
    for (size_t r : impl_->replicas_of[sh]) {
      const auto& s = impl_->live[r];
      v.replicas_up += s.up ? 1 : 0;
      v.replica_detail.push_back({impl_->replica_ep[r], s.up ? "up" : "down", s.health ? s.health->state : "",
                                  s.last_error});
      if (best == nullptr || (s.up && !best->up) || (s.up == best->up && s.seen && (!best->seen || s.last_seen > best->last_seen)))
        best = &s;
      if (!s.last_error.empty()) {
        if (!v.last_error.empty()) v.last_error += "; ";
        v.last_error += impl_->replica_ep[r] + ": " + s.last_error;
      }
    }
    v.state = v.replicas_up > 0 ? "up" : "down";
    v.last_seen_ms =
        best->seen ? std::chrono::duration_cast<std::chrono::milliseconds>(now - best->last_seen).count() : -1;
    if (best->health) {
      v.node_state = best->health->state;
      v.in_flight = best->health->in_flight;
      v.queued = best->health->queued;
      v.doc_begin = best->health->doc_begin;
      v.doc_end = best->health->doc_end;
      v.gpu = best->health->gpu;
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::optional<ShardHealthMsg>> Fanout::LastReportedHealth() const {
  std::lock_guard lock(impl_->health_mu);
  std::vector<std::optional<ShardHealthMsg>> out;
  for (const auto& reps : impl_->replicas_of) {
    std::optional<ShardHealthMsg> h;
    for (size_t r : reps)
      if (!h && impl_->live[r].health) h = impl_->live[r].health;
    out.push_back(h);
  }
  return out;
}

bool Fanout::AllUp() const { return impl_->all_up.load(std::memory_order_relaxed); }

uint64_t Fanout::retries() const { return impl_->retries.load(); }
uint64_t Fanout::hedges() const { return impl_->hedged.load(); }

}  // namespace search
