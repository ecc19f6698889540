#include "integrator/http_front.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/thread_name.hpp"
#include "http_loops.hpp"
#include "http_routes.hpp"

namespace search {
namespace {

using PoolClock = std::chrono::steady_clock;

// httplib's ThreadPool plus a count of the connections waiting for a worker, so admission control
// sees the backlog, not only the searches already running (which the pool size caps), and how long
// the oldest of them has waited.
class CountingPool : public httplib::TaskQueue {
 public:
  explicit CountingPool(size_t n) {
    for (size_t i = 0; i < n; ++i)
      threads_.emplace_back([this] {
        SetThreadName("http");
        Work();
      });
  }
  ~CountingPool() override { shutdown(); }
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      const int64_t now = PoolClock::now().time_since_epoch().count();
      jobs_.push_back({now, std::move(fn)});
      if (jobs_.size() == 1) oldest_.store(now);  // before queued_ counts it
      queued_.fetch_add(1, std::memory_order_relaxed);
    }
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      if (shutdown_) return;
      shutdown_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  size_t queued() const { return queued_.load(std::memory_order_relaxed); }
  // How long the connection longest in the queue has waited for a worker (zero with none queued).
  PoolClock::duration oldest_wait() const {
    if (queued() == 0) return PoolClock::duration::zero();
    const auto since = PoolClock::duration(oldest_.load());
    return std::max(PoolClock::duration::zero(), PoolClock::now().time_since_epoch() - since);
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
        if (shutdown_ && jobs_.empty()) return;  // drain queued connections first
        fn = std::move(jobs_.front().second);
        jobs_.pop_front();
        if (!jobs_.empty()) oldest_.store(jobs_.front().first);
        queued_.fetch_sub(1, std::memory_order_relaxed);
      }
      fn();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, std::function<void()>>> jobs_;  // GUARDED_BY(mu_): (enqueued, job)
  bool shutdown_ = false;                                       // GUARDED_BY(mu_)
  std::atomic<size_t> queued_{0};
  std::atomic<int64_t> oldest_{0};  // when the queue's front was enqueued (PoolClock ticks)
  std::vector<std::thread> threads_;
};

void Reply(httplib::Response& res, const HttpReply& r) {
  res.status = r.status;
  res.set_content(r.body, kJsonType);
}

}  // namespace

struct HttpFront::Impl {
  Impl(Integrator* in, HttpFrontOptions o) : integrator(in), options(std::move(o)) {}
  size_t waiting() const {
    CountingPool* p = pool.load(std::memory_order_acquire);
    return p ? p->queued() : 0;
  }
  PoolClock::duration oldest_wait() const {
    CountingPool* p = pool.load(std::memory_order_acquire);
    return p ? p->oldest_wait() : PoolClock::duration::zero();
  }
  Integrator* integrator;
  HttpFrontOptions options;
  httplib::Server server;
  std::unique_ptr<HttpLoops> loops;  // --http-engine loops: serves in place of `server`
  std::atomic<CountingPool*> pool{nullptr};  // owned by the server while it listens
  int listen_fd = -1;                          // the socket Bind() bound
};

HttpFront::HttpFront(Integrator* integrator, HttpFrontOptions options)
    : impl_(std::make_unique<Impl>(integrator, std::move(options))) {
  if (impl_->options.engine == HttpEngine::kLoops) {
    impl_->loops = std::make_unique<HttpLoops>(integrator, impl_->options);
    return;
  }
  auto& s = impl_->server;
  Integrator* in = integrator;
  Impl* im = impl_.get();
  const int threads = impl_->options.threads;
  s.new_task_queue = [im, threads] {
    auto* pool = new CountingPool(static_cast<size_t>(threads));
    im->pool.store(pool, std::memory_order_release);
    return pool;
  };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second integrator
  // bind the same port and silently share its traffic. The fd is kept to raise the backlog.
  s.set_socket_options([im](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    im->listen_fd = sock;
  });
  // Responses go out as header and body writes: without TCP_NODELAY, Nagle plus the client's
  // delayed ACK can hold the second write for tens of milliseconds.
  s.set_tcp_nodelay(true);
  s.set_payload_max_length(kMaxBodyBytes);
  s.set_keep_alive_timeout(impl_->options.keep_alive_seconds);
  s.set_keep_alive_max_count(impl_->options.keep_alive_max_requests);
  // While a connection waits for a worker (each open connection holds one), every answer closes
  // its connection, so the waiting ones get a worker after one request instead of after the
  // others' request count or keep-alive timeout. Only once the oldest has waited
  // close_after_wait: a connection that replaces one just closed waits a moment for that worker
  // to come back, and closing every answer's connection in that moment would make each of them
  // such a reconnect in turn (a cascade of reconnects under load, each request a new connection).
  s.set_post_routing_handler([im](const httplib::Request&, httplib::Response& res) {
    if (im->waiting() > 0 && im->oldest_wait() >= im->options.close_after_wait)
      res.set_header("Connection", "close");
  });
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);

  s.Get("/search", [in, im](const httplib::Request& req, httplib::Response& res) {
    Reply(res, in->HandleSearch(ParseSearchQuery(req.params), im->waiting()));
  });
  s.Post("/search", [in, im](const httplib::Request& req, httplib::Response& res) {
    // Query-string parameters on a POST would be ambiguous next to the body: refuse them. (Not
    // req.params: httplib also fills it from form-encoded bodies, which is what curl -d sends.)
    if (req.target.find('?') != std::string::npos) {
      ParsedSearch bad;
      bad.error = RequestError{400, "illegal_argument_exception", kPostQueryStringReason};
      Reply(res, in->HandleSearch(bad));
      return;
    }
    Reply(res, in->HandleSearch(ParseSearchBody(req.body), im->waiting()));
  });
  s.Get("/health", [in](const httplib::Request&, httplib::Response& res) {
    res.set_content(in->HealthJson(), kJsonType);
  });
  s.Get("/stats", [in](const httplib::Request&, httplib::Response& res) {
    res.set_content(in->StatsJson(), kJsonType);
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(StatusPageHtml(), kHtmlType);
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already answered (400, 429, 503)
    std::string type = ErrorTypeForStatus(res.status), reason = "HTTP " + std::to_string(res.status);
    if (res.status == 404) {
      reason = NoRouteReason(req.method, req.path);
    } else if (res.status == 413) {
      reason = BodyTooLongReason(kMaxBodyBytes);
    } else if (res.status == 414) {
      reason = kUriTooLongReason;
    }
    res.set_content(ErrorJson(RequestError{res.status, type, reason}), kJsonType);
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(ErrorJson(RequestError{500, "internal_error", what}), kJsonType);
  });
}

HttpFront::~HttpFront() { Stop(); }

Status HttpFront::Bind() {
  auto& o = impl_->options;
  if (impl_->loops) {
    SEARCH_RETURN_IF_ERROR(impl_->loops->Bind());
    bound_port_ = impl_->loops->port();
    return Status::Ok();
  }
  if (o.port == 0) {
    bound_port_ = impl_->server.bind_to_any_port(o.host.c_str());
    if (bound_port_ <= 0) return Status::IOError("cannot bind HTTP on " + o.host + ":0");
  } else {
    if (!impl_->server.bind_to_port(o.host.c_str(), o.port))
      return Status::IOError("cannot bind HTTP on " + o.host + ":" + std::to_string(o.port));
    bound_port_ = o.port;
  }
  // The compiled library listens with a backlog of 5, too short for connection bursts; listen()
  // again on a listening socket only changes its backlog.
  if (impl_->listen_fd >= 0) (void)::listen(impl_->listen_fd, kHttpListenBacklog);
  return Status::Ok();
}

void HttpFront::Listen() {
  if (impl_->loops) {
    impl_->loops->Listen();
    return;
  }
  impl_->server.listen_after_bind();
  impl_->pool.store(nullptr, std::memory_order_release);  // the server deleted it
}

void HttpFront::Stop() {
  if (impl_->loops) {
    impl_->loops->Stop();
    return;
  }
  if (impl_->server.is_running()) impl_->server.stop();
}

}  // namespace search
