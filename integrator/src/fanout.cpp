#include "integrator/fanout.hpp"

#include <zmq.h>

#include <condition_variable>
#include <cstring>
#include <random>
#include <set>
#include <unordered_map>
#include <utility>
#include <zmq.hpp>

namespace search {

using Clock = std::chrono::steady_clock;

struct Fanout::Call {
  uint64_t id = 0;
  std::string frame;  // the encoded SearchRequest
  Clock::time_point deadline;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;                     // GUARDED_BY(mu)
  bool abandoned = false;                // GUARDED_BY(mu): the caller gave up (I/O thread stuck)
  std::vector<ShardCallResult> results;  // GUARDED_BY(mu); written once, when done
};

struct Fanout::Impl {
  struct Pending {
    std::shared_ptr<Call> call;
    std::vector<ShardCallResult> shards;
    size_t remaining = 0;
    Clock::time_point sent_at;
  };
  struct ShardLive {
    bool connected = false;  // ZMTP handshake done and not disconnected since
    bool seen = false;       // a pong or reply ever arrived
    bool up = false;
    Clock::time_point last_seen;
    std::optional<ShardHealthMsg> health;
    std::string last_error;
  };

  explicit Impl(const FanoutOptions& o, FanoutListener* l) : opt(o), listener(l) {}

  const FanoutOptions& opt;
  FanoutListener* listener;
  zmq::context_t ctx{1};
  zmq::socket_t submit_pull, submit_push;  // push: GUARDED_BY(submit_mu)
  std::vector<zmq::socket_t> dealers, monitors;
  bool have_monitors = true;

  std::mutex submit_mu;
  std::deque<std::shared_ptr<Call>> queue;  // GUARDED_BY(submit_mu)

  // I/O thread only.
  std::unordered_map<uint64_t, Pending> pending;
  std::set<std::pair<Clock::time_point, uint64_t>> by_deadline;

  mutable std::mutex health_mu;
  std::vector<ShardLive> live;  // GUARDED_BY(health_mu)

  uint32_t ShardId(size_t i) const {  // REQUIRES: health_mu held
    return live[i].health ? live[i].health->shard_id : static_cast<uint32_t>(i);
  }
  uint32_t ShardIdLocked(size_t i) const {
    std::lock_guard lock(health_mu);
    return ShardId(i);
  }

  static bool SendFrame(zmq::socket_t& s, const std::string& frame) {
    try {
      zmq::message_t empty;
      if (!s.send(empty, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
      // Once the first part is accepted the rest of the multipart message is too.
      zmq::message_t body(frame.data(), frame.size());
      return s.send(body, zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t&) {
      return false;
    }
  }

  std::vector<ShardCallResult> AllFailed(ShardCallState state, const std::string& reason) const {
    std::vector<ShardCallResult> out(opt.endpoints.size());
    std::lock_guard lock(health_mu);
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].state = state;
      out[i].shard = ShardId(i);
      out[i].reason = reason;
    }
    return out;
  }

  static void Finish(const std::shared_ptr<Call>& call, std::vector<ShardCallResult> results) {
    {
      std::lock_guard lock(call->mu);
      call->results = std::move(results);
      call->done = true;
    }
    call->cv.notify_one();
  }

  void Complete(std::unordered_map<uint64_t, Pending>::iterator it) {
    by_deadline.erase({it->second.call->deadline, it->first});
    Finish(it->second.call, std::move(it->second.shards));
    pending.erase(it);
  }

  void MarkSeen(size_t i) {
    std::lock_guard lock(health_mu);
    live[i].seen = true;
    live[i].last_seen = Clock::now();
  }

  void UpdateStates(Clock::time_point now) {
    std::vector<std::pair<size_t, bool>> changes;
    {
      std::lock_guard lock(health_mu);
      const auto window = opt.ping_interval * opt.missed_pongs_down + opt.ping_interval / 2;
      for (size_t i = 0; i < live.size(); ++i) {
        ShardLive& s = live[i];
        const bool up = s.connected && s.seen && now - s.last_seen <= window;
        if (up != s.up) {
          s.up = up;
          if (!up && s.connected && s.last_error.empty()) s.last_error = "missed pongs";
          changes.emplace_back(i, up);
        }
      }
    }
    if (listener)
      for (auto [i, up] : changes) listener->OnShardUp(i, up);
  }

  void SendPing(size_t i, std::atomic<uint64_t>& next_id) {
    SendFrame(dealers[i], EncodePing(PingMsg{next_id.fetch_add(1, std::memory_order_relaxed)}));
  }

  void DrainSubmissions(bool stopping) {
    zmq::message_t m;
    while (true) {
      try {
        if (!submit_pull.recv(m, zmq::recv_flags::dontwait)) break;
      } catch (const zmq::error_t&) {
        break;
      }
    }
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
      p.shards.resize(dealers.size());
      {
        std::lock_guard lock(health_mu);
        for (size_t i = 0; i < dealers.size(); ++i) p.shards[i].shard = ShardId(i);
      }
      for (size_t i = 0; i < dealers.size(); ++i) {
        ShardCallResult& r = p.shards[i];
        if (now >= call->deadline) {
          r.state = ShardCallState::kTimedOut;
          r.reason = "deadline passed before the request was sent";
        } else if (!SendFrame(dealers[i], call->frame)) {
          r.state = ShardCallState::kFailed;
          r.reason = "shard not connected (" + opt.endpoints[i] + ")";
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

  void FailShard(Pending& p, size_t i, ShardCallState state, std::string reason) {
    ShardCallResult& r = p.shards[i];
    r.state = state;
    r.reason = std::move(reason);
    r.latency_us = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - p.sent_at).count());
    if (listener) listener->OnShardReply(i, state, static_cast<double>(r.latency_us) * 1e-6);
    --p.remaining;
  }

  void HandleResponse(size_t i, SearchResponseMsg&& resp) {
    MarkSeen(i);
    auto it = pending.find(resp.request_id);
    if (it == pending.end() || it->second.shards[i].state != ShardCallState::kPending) {
      if (listener) listener->OnLateReply(i);
      return;
    }
    Pending& p = it->second;
    ShardCallResult& r = p.shards[i];
    r.shard = resp.shard_id;
    if (resp.status.ok()) {
      r.state = ShardCallState::kOk;
      r.hits.reserve(resp.hits.size());
      for (auto& h : resp.hits) r.hits.push_back(MergedHit{h.doc, h.score, resp.shard_id, std::move(h.external_id)});
      r.has_or_hits = resp.has_or_hits;
      r.or_hits.reserve(resp.or_hits.size());
      for (auto& h : resp.or_hits)
        r.or_hits.push_back(MergedHit{h.doc, h.score, resp.shard_id, std::move(h.external_id)});
      r.latency_us = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - p.sent_at).count());
      if (listener) listener->OnShardReply(i, r.state, static_cast<double>(r.latency_us) * 1e-6);
      --p.remaining;
    } else {
      const bool late = resp.status.code() == StatusCode::kDeadlineExceeded;
      FailShard(p, i, late ? ShardCallState::kTimedOut : ShardCallState::kFailed,
                "shard " + std::to_string(resp.shard_id) + " answered " + resp.status.ToString());
    }
    if (p.remaining == 0) Complete(it);
  }

  void HandlePong(size_t i, PongMsg&& pong) {
    if (!pong.status.ok()) {
      std::lock_guard lock(health_mu);
      live[i].last_error = "ping answered " + pong.status.ToString();
      return;
    }
    {
      std::lock_guard lock(health_mu);
      live[i].seen = true;
      live[i].last_seen = Clock::now();
      live[i].health = pong.health;
      live[i].last_error.clear();
    }
    if (listener) listener->OnHealth(i, pong.health);
    UpdateStates(Clock::now());
  }

  void DrainReplies(size_t i) {
    while (true) {
      std::vector<zmq::message_t> parts;
      try {
        zmq::message_t m;
        if (!dealers[i].recv(m, zmq::recv_flags::dontwait)) return;
        bool more = m.more();
        parts.push_back(std::move(m));
        while (more) {
          zmq::message_t next;
          if (!dealers[i].recv(next, zmq::recv_flags::dontwait)) break;
          more = next.more();
          if (parts.size() < 4) parts.push_back(std::move(next));
        }
      } catch (const zmq::error_t&) {
        return;
      }
      if (parts.size() != 2 || parts[0].size() != 0) {
        if (listener) listener->OnMalformedReply(i, Status::InvalidArgument("expected [empty][frame] from the node"));
        continue;
      }
      RecoveredHeader rec;
      auto env = DecodeEnvelope(std::string_view(static_cast<const char*>(parts[1].data()), parts[1].size()), &rec);
      if (!env.ok()) {
        if (listener) listener->OnMalformedReply(i, env.status());
        if (rec.request_id) {
          auto it = pending.find(*rec.request_id);
          if (it != pending.end() && it->second.shards[i].state == ShardCallState::kPending) {
            FailShard(it->second, i, ShardCallState::kFailed, "malformed reply: " + env.status().message());
            if (it->second.remaining == 0) Complete(it);
          }
        }
        continue;
      }
      if (auto* resp = std::get_if<SearchResponseMsg>(&env->body)) {
        HandleResponse(i, std::move(*resp));
      } else if (auto* pong = std::get_if<PongMsg>(&env->body)) {
        HandlePong(i, std::move(*pong));
      } else if (listener) {
        listener->OnMalformedReply(
            i, Status::InvalidArgument("unexpected " + std::string(MessageKindName(env->kind())) + " from a node"));
      }
    }
  }

  void DrainMonitor(size_t i, std::atomic<uint64_t>& next_id) {
    while (true) {
      zmq::message_t ev, addr;
      try {
        if (!monitors[i].recv(ev, zmq::recv_flags::dontwait)) return;
        if (ev.more()) (void)monitors[i].recv(addr, zmq::recv_flags::dontwait);
      } catch (const zmq::error_t&) {
        return;
      }
      if (ev.size() < 6) continue;
      uint16_t event = 0;
      std::memcpy(&event, ev.data(), sizeof(event));
      if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        {
          std::lock_guard lock(health_mu);
          live[i].connected = true;
        }
        SendPing(i, next_id);  // learn its health now rather than at the next tick
      } else if (event == ZMQ_EVENT_DISCONNECTED) {
        uint32_t shard;
        {
          std::lock_guard lock(health_mu);
          live[i].connected = false;
          live[i].last_error = "disconnected";
          shard = ShardId(i);
        }
        // Replies cannot come back over a dropped connection: fail this shard's outstanding work.
        const std::string reason =
            "connection to shard " + std::to_string(shard) + " (" + opt.endpoints[i] + ") lost";
        for (auto it = pending.begin(); it != pending.end();) {
          auto cur = it++;
          if (cur->second.shards[i].state != ShardCallState::kPending) continue;
          FailShard(cur->second, i, ShardCallState::kFailed, reason);
          if (cur->second.remaining == 0) Complete(cur);
        }
        UpdateStates(Clock::now());
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
    std::vector<zmq::pollitem_t> items;
    items.push_back({submit_pull.handle(), 0, ZMQ_POLLIN, 0});
    for (auto& d : dealers) items.push_back({d.handle(), 0, ZMQ_POLLIN, 0});
    if (have_monitors)
      for (auto& m : monitors) items.push_back({m.handle(), 0, ZMQ_POLLIN, 0});
    auto next_ping = Clock::now();
    while (!stopped.load(std::memory_order_acquire)) {
      auto now = Clock::now();
      if (now >= next_ping) {
        for (size_t i = 0; i < n; ++i) SendPing(i, next_id);
        UpdateStates(now);
        next_ping = now + opt.ping_interval;
      }
      auto wake = next_ping;
      if (!by_deadline.empty()) wake = std::min(wake, by_deadline.begin()->first);
      auto wait_us = std::chrono::duration_cast<std::chrono::microseconds>(wake - now).count();
      long timeout_ms = wait_us <= 0 ? 0 : static_cast<long>((wait_us + 999) / 1000);
      try {
        zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout_ms));
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) break;
        continue;
      }
      if (items[0].revents & ZMQ_POLLIN) DrainSubmissions(false);
      for (size_t i = 0; i < n; ++i)
        if (items[1 + i].revents & ZMQ_POLLIN) DrainReplies(i);
      if (have_monitors)
        for (size_t i = 0; i < n; ++i)
          if (items[1 + n + i].revents & ZMQ_POLLIN) DrainMonitor(i, next_id);
      ExpireDeadlines(Clock::now());
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
  try {
    im.submit_pull = zmq::socket_t(im.ctx, zmq::socket_type::pull);
    im.submit_pull.set(zmq::sockopt::linger, 0);
    im.submit_pull.bind("inproc://fanout-submit-" + tag);
    im.submit_push = zmq::socket_t(im.ctx, zmq::socket_type::push);
    im.submit_push.set(zmq::sockopt::linger, 0);
    im.submit_push.connect("inproc://fanout-submit-" + tag);
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("cannot create the submission socket: ") + e.what());
  }
  const FanoutOptions& o = f->options_;
  im.live.resize(o.endpoints.size());
  for (size_t i = 0; i < o.endpoints.size(); ++i) {
    const std::string& ep = o.endpoints[i];
    try {
      zmq::socket_t d(im.ctx, zmq::socket_type::dealer);
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
      const std::string mon = "inproc://fanout-monitor-" + tag + "-" + std::to_string(i);
      if (zmq_socket_monitor(d.handle(), mon.c_str(), ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) == 0) {
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
  f->io_thread_ = std::thread([fp = f.get()] { fp->impl_->Run(fp->stopped_, fp->next_id_); });
  return f;
}

Fanout::~Fanout() { Stop(); }

void Fanout::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  {
    std::lock_guard lock(impl_->submit_mu);
    if (stopped_.exchange(true)) return;
    zmq::message_t wake(1);
    try {
      (void)impl_->submit_push.send(wake, zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
    }
  }
  if (io_thread_.joinable()) io_thread_.join();
  impl_->monitors.clear();
  impl_->dealers.clear();
  impl_->submit_push.close();
  impl_->submit_pull.close();
  impl_->ctx.close();
}

void Fanout::Submit(const std::shared_ptr<Call>& call) {
  {
    std::lock_guard lock(impl_->submit_mu);
    if (!stopped_.load()) {
      impl_->queue.push_back(call);
      zmq::message_t wake(1);
      try {
        // A full pipe means a wake-up is already pending; the queue holds the call either way.
        (void)impl_->submit_push.send(wake, zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
      }
      return;
    }
  }
  Impl::Finish(call, impl_->AllFailed(ShardCallState::kFailed, "integrator shutting down"));
}

std::vector<ShardCallResult> Fanout::Search(SearchRequestMsg request, Clock::time_point deadline) {
  auto call = std::make_shared<Call>();
  call->id = request.request_id = next_id_.fetch_add(1, std::memory_order_relaxed);
  call->deadline = deadline;
  call->frame = EncodeSearchRequest(request);
  Submit(call);
  std::unique_lock lock(call->mu);
  if (!call->cv.wait_until(lock, deadline + options_.grace, [&] { return call->done; })) {
    call->abandoned = true;
    lock.unlock();
    return impl_->AllFailed(ShardCallState::kTimedOut, "integrator I/O thread did not complete the request");
  }
  return std::move(call->results);
}

std::vector<ShardHealthView> Fanout::Health() const {
  const auto now = Clock::now();
  std::lock_guard lock(impl_->health_mu);
  std::vector<ShardHealthView> out;
  for (size_t i = 0; i < impl_->live.size(); ++i) {
    const auto& s = impl_->live[i];
    ShardHealthView v;
    v.shard = impl_->ShardId(i);
    v.endpoint = options_.endpoints[i];
    v.state = s.up ? "up" : "down";
    v.last_seen_ms = s.seen ? std::chrono::duration_cast<std::chrono::milliseconds>(now - s.last_seen).count() : -1;
    if (s.health) {
      v.node_state = s.health->state;
      v.in_flight = s.health->in_flight;
      v.queued = s.health->queued;
      v.doc_begin = s.health->doc_begin;
      v.doc_end = s.health->doc_end;
      v.gpu = s.health->gpu;
    }
    v.last_error = s.last_error;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::optional<ShardHealthMsg>> Fanout::LastReportedHealth() const {
  std::lock_guard lock(impl_->health_mu);
  std::vector<std::optional<ShardHealthMsg>> out;
  for (const auto& s : impl_->live) out.push_back(s.health);
  return out;
}

}  // namespace search
