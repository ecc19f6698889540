// FakeNode: a scriptable stand-in for search-node in tests: a ROUTER socket on a free loopback
// port served by its own thread, answering Pings with a configurable ShardHealth,
// SearchRequests through a handler (which may delay, drop or garble the reply) and FetchRequests
// through a fetch handler (by default every doc "not stored", as a shard without sources).
// It takes [empty][message] and, at minor >= kMinorOneFrame, [message] alone, and answers in the
// request's shape, as search-node does.
// Thread-safety: setters are atomic or mutex-guarded; the handler runs on the node's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/analyzer.hpp"
#include "proto/wire.hpp"

namespace search::testing {

class FakeNode {
 public:
  // Returns the response to send, or nullopt to stay silent.
  using Handler = std::function<std::optional<SearchResponseMsg>(const SearchRequestMsg&)>;
  using FetchHandler = std::function<std::optional<FetchResponseMsg>(const FetchRequestMsg&)>;

  explicit FakeNode(uint32_t shard_id, Handler handler, uint32_t num_shards = 1)
      : handler_(std::move(handler)), sock_(ctx_, zmq::socket_type::router) {
    health_.shard_id = shard_id;
    health_.num_shards = num_shards;
    health_.num_docs_global = 1000;
    health_.state = "serving";
    health_.analyzer_json = AnalyzerConfig{}.ToJson();
    health_.index_format_version = 1;
    health_.has_sources = true;  // asked for fetches (its answers say "not stored" unless set_fetch_handler)
    sock_.set(zmq::sockopt::linger, 0);
    sock_.bind("tcp://127.0.0.1:*");
    endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeNode() {
    stop_ = true;
    thread_.join();
  }

  const std::string& endpoint() const { return endpoint_; }
  void set_delay(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }
  // Sends every reply still held back by the delay now (a test sets a delay far past any
  // deadline, so that the deadline and not the reply ends a wait, then lets the late reply go).
  void ReleaseHeld() { release_ = true; }
  void set_answer_pings(bool on) { answer_pings_ = on; }
  void set_garble(bool on) { garble_ = on; }
  // The minor protocol version of its replies' and pongs' envelopes (a node of an older version).
  void set_minor(uint16_t minor) { minor_ = minor; }
  void set_health(const ShardHealthMsg& h) {
    std::lock_guard lock(mu_);
    health_ = h;
  }
  ShardHealthMsg health() const {
    std::lock_guard lock(mu_);
    return health_;
  }
  std::vector<SearchRequestMsg> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  int pings() const { return pings_; }
  // Messages that came as one frame, without the empty delimiter.
  int one_frame_messages() const { return one_frame_; }
  // Messages that came [empty][message].
  int delimited_messages() const { return delimited_; }
  void set_fetch_handler(FetchHandler h) {
    std::lock_guard lock(mu_);
    fetch_handler_ = std::move(h);
  }
  std::vector<FetchRequestMsg> fetches() const {
    std::lock_guard lock(mu_);
    return fetches_;
  }

 private:
  struct Due {
    std::chrono::steady_clock::time_point at;
    std::string identity, frame;
    bool delimited = true;
  };

  void Send(const std::string& identity, const std::string& frame, bool delimited) {
    zmq::message_t id(identity.data(), identity.size()), empty, body(frame.data(), frame.size());
    try {
      sock_.send(id, zmq::send_flags::sndmore);
      if (delimited) sock_.send(empty, zmq::send_flags::sndmore);
      sock_.send(body, zmq::send_flags::none);
    } catch (const zmq::error_t&) {
    }
  }

  void Run() {
    std::vector<Due> due;
    while (!stop_) {
      zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(5));
      const auto now = std::chrono::steady_clock::now();
      const bool release = release_.exchange(false);
      for (auto it = due.begin(); it != due.end();) {
        if (release || it->at <= now) {
          Send(it->identity, it->frame, it->delimited);
          it = due.erase(it);
        } else {
          ++it;
        }
      }
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      while (true) {
        zmq::message_t m;
        if (!sock_.recv(m, zmq::recv_flags::dontwait)) break;
        const bool more = m.more();
        parts.push_back(std::move(m));
        if (!more) break;
      }
      const bool delimited = parts.size() == 3 && parts[1].size() == 0;
      if (!delimited && parts.size() != 2) continue;
      ++(delimited ? delimited_ : one_frame_);
      if (!delimited && minor_.load() < kMinorOneFrame) continue;  // an older node reads no such message
      const std::string identity(static_cast<const char*>(parts[0].data()), parts[0].size());
      auto env = DecodeEnvelope(std::string_view(static_cast<const char*>(parts.back().data()), parts.back().size()));
      if (!env.ok()) continue;
      if (auto* ping = std::get_if<PingMsg>(&env->body)) {
        ++pings_;
        if (!answer_pings_) continue;
        PongMsg pong;
        pong.request_id = ping->request_id;
        pong.health = health();
        Send(identity, EncodeEnvelope(EnvelopeMsg{kProtocolMajor, minor_.load(), pong}), delimited);
      } else if (auto* req = std::get_if<SearchRequestMsg>(&env->body)) {
        {
          std::lock_guard lock(mu_);
          requests_.push_back(*req);
        }
        auto resp = handler_(*req);
        if (!resp) continue;
        resp->request_id = req->request_id;
        std::string frame = EncodeEnvelope(EnvelopeMsg{kProtocolMajor, minor_.load(), *resp});
        if (garble_) frame = std::string(24, '\x5a');
        due.push_back({now + std::chrono::milliseconds(delay_ms_.load()), identity, std::move(frame), delimited});
      } else if (auto* fetch = std::get_if<FetchRequestMsg>(&env->body)) {
        std::optional<FetchResponseMsg> resp;
        {
          std::lock_guard lock(mu_);
          fetches_.push_back(*fetch);
          if (fetch_handler_) {
            resp = fetch_handler_(*fetch);
          } else {
            resp.emplace();
            for (uint32_t d : fetch->docs) resp->docs.push_back(FetchedDocMsg{d, false, "", {}});
          }
        }
        if (!resp) continue;
        resp->request_id = fetch->request_id;
        resp->shard_id = health().shard_id;
        due.push_back(
            {now + std::chrono::milliseconds(delay_ms_.load()), identity, EncodeFetchResponse(*resp), delimited});
      }
    }
  }

  Handler handler_;
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
  std::string endpoint_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, answer_pings_{true}, garble_{false}, release_{false};
  std::atomic<int> delay_ms_{0}, pings_{0}, one_frame_{0}, delimited_{0};
  std::atomic<uint16_t> minor_{kProtocolMinor};
  mutable std::mutex mu_;
  ShardHealthMsg health_;
  std::vector<SearchRequestMsg> requests_;
  FetchHandler fetch_handler_;            // GUARDED_BY(mu_)
  std::vector<FetchRequestMsg> fetches_;  // GUARDED_BY(mu_)
};

// A handler answering every request with `hits` (ok status) from shard `shard`.
inline FakeNode::Handler AnswerWith(uint32_t shard, std::vector<HitMsg> hits) {
  return [shard, hits](const SearchRequestMsg& req) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg r;
    r.shard_id = shard;
    r.hits = hits;
    if (r.hits.size() > req.k) r.hits.resize(req.k);
    return r;
  };
}

// The same with exact totals when the request counts (`or_total`: an andor split's OR total, sent
// with `or_hits` when the AND hits are fewer than k).
inline FakeNode::Handler AnswerCounting(uint32_t shard, std::vector<HitMsg> hits, uint64_t total,
                                        std::vector<HitMsg> or_hits = {}, uint64_t or_total = 0) {
  return [=](const SearchRequestMsg& req) -> std::optional<SearchResponseMsg> {
    SearchResponseMsg r;
    r.shard_id = shard;
    r.hits = hits;
    if (r.hits.size() > req.k) r.hits.resize(req.k);
    r.has_total = req.count;
    r.total = req.count ? total : 0;
    if ((req.flags & kFlagAndOrSplit) != 0 && r.hits.size() < req.k) {
      r.has_or_hits = true;
      r.or_hits = or_hits;
      if (r.or_hits.size() > req.k) r.or_hits.resize(req.k);
      r.or_total = req.count ? or_total : 0;
    }
    return r;
  };
}

}  // namespace search::testing
