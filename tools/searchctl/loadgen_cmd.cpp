// searchctl loadgen: open-loop load on the integrator's HTTP API, Poisson arrivals at --rate per
// second (Ding et al. 2009 §9, Fig. 7). Arrival times are drawn up front; each query is released
// at its time whether or not earlier ones have finished and sent on a free kept-alive connection
// (GET /search?q=..&mode=..&k=..&timeout_ms=deadline), or waits in the load generator's queue for
// one. A query's latency runs from its scheduled arrival to its answer, so time spent waiting for
// a free connection counts (no coordinated omission). A query misses its deadline when it is
// answered after it, with an error, or partially (_shards.failed > 0 or timed_out). The first
// --warmup seconds of arrivals are sent but not measured; with --ramp-up their rate rises from 0 to
// --rate over the warm-up, so a run reaches its rate with its connections and the server's queues
// grown into it, not with --rate's worth of new connections in its first milliseconds. One JSON
// line summarises.
//
// The load generator shares its host with what it measures, so it is
// event-driven: --threads loops, each an epoll over its share of the connections and a timerfd
// for its next arrival (nonblocking sockets, HTTP/1.1 written and parsed here), instead of a
// thread per connection woken for every query. Without --pin-loops the loops share the host's CPU
// home (core/cpu_home.hpp) with the node's and the integrator's chains while they keep less than a
// quarter of a CPU busy: at low load an answer then wakes a loop with a context switch, not by
// waking an idle CPU (~50-70 us on the H200 hosts), which would count in every query's latency.
//
// An https:// --url speaks TLS (tls_client.hpp): the server's certificate verified against
// --cacert, sessions resumed on every new connection after the first, the handshake driven by the
// same loop (OpenSSL's WANT_READ / WANT_WRITE set the connection's epoll interest); the summary
// then counts handshakes, resumed ones and failures. --api-key ID:KEY sends
// "Authorization: ApiKey base64(ID:KEY)" with every query.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "args.hpp"
#include "core/cpu_home.hpp"
#include "core/cpus.hpp"
#include "core/fd_table.hpp"
#include "core/url_encode.hpp"
#include "common.hpp"
#include "http_response.hpp"
#include "tls_client.hpp"

namespace search::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Arrival {
  size_t query = 0;
  Clock::time_point at;
  bool measured = false;
};

struct Sample {
  double latency_us = 0;
  double send_wait_us = 0;  // from the scheduled arrival until a connection sent it
  // The part of send_wait_us before its loop released the arrival at all: the load generator
  // running late on its own schedule (its loop busy or not on a CPU), not waiting for a connection.
  double release_lag_us = 0;
  bool ok = false, partial = false, error = false;
  int http = 0;  // the HTTP status; 0: no answer (connection error or read timeout)
};


// "http://HOST:PORT" or "https://HOST:PORT" -> host, port, tls.
Status ParseUrl(const std::string& url, std::string* host, int* port, bool* tls) {
  *tls = url.rfind("https://", 0) == 0;
  const std::string prefix = *tls ? "https://" : "http://";
  if (url.rfind(prefix, 0) != 0) return Status::InvalidArgument("--url must start with http:// or https://: " + url);
  std::string rest = url.substr(prefix.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return Status::InvalidArgument("--url needs HOST:PORT: " + url);
  *host = rest.substr(0, colon);
  try {
    size_t used = 0;
    *port = std::stoi(rest.substr(colon + 1), &used);
    if (used != rest.size() - colon - 1 || *port <= 0 || *port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    return Status::InvalidArgument("--url has a bad port: " + url);
  }
  return Status::Ok();
}

uint32_t DefaultLoops() {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<uint32_t>(hw / 4, 1, 4);
}

struct Target {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

Result<Target> ResolveTarget(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return Status::Unavailable("cannot resolve " + host + ": " + (rc != 0 ? gai_strerror(rc) : "no address"));
  Target t;
  std::memcpy(&t.addr, res->ai_addr, res->ai_addrlen);
  t.len = static_cast<socklen_t>(res->ai_addrlen);
  ::freeaddrinfo(res);
  return t;
}

// What every loop reads (and the two counters they share).
struct LoopShared {
  Target target;
  std::string host_header, path_prefix;
  std::string auth_header;    // "" or "Authorization: ApiKey ...\r\n" (--api-key)
  TlsClient* tls = nullptr;   // https: every connection through TLS
  Clock::duration read_timeout{}, deadline{};
  bool keep_idle = false;     // --keep-idle: an idle connection stays open
  const std::vector<std::string>* queries = nullptr;
  const std::vector<Arrival>* arrivals = nullptr;
  std::vector<Sample>* samples = nullptr;  // each index written by the loop that owns the arrival
  std::atomic<bool> connect_failed{false};
  std::atomic<uint64_t> stale_retries{0};
};

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// One connection's state in a loop.
struct Conn {
  int fd = -1;
  bool connecting = false;
  size_t arrival = SIZE_MAX;  // the query under way; SIZE_MAX: idle
  bool retried = false;       // resent once already (a stale kept-alive connection)
  bool reused = false;        // the connection answered before (so a failure may be a stale one)
  std::string out;
  size_t out_off = 0;
  Clock::time_point sent, last_used;
  HttpResponseParser parser;
  SslPtr ssl;                     // https only
  bool handshaking = false;       // https: the TLS handshake has not completed
  bool read_wants_write = false;  // https: SSL_read must write first (resumed by EPOLLOUT)
  bool write_wants_read = false;  // https: SSL_write must read first (resumed by EPOLLIN)
};

class Loop {
 public:
  // home: the loops' CPU home, ticked by this loop (one loop ticks it); nullptr: none, or another's.
  Loop(LoopShared& sh, const std::vector<size_t>& mine, uint32_t conns, CpuHome* home)
      : sh_(sh), mine_(mine), conns_(conns), home_(home) {}

  Status Run() {
    ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
    timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (ep_.get() < 0 || timer_.get() < 0) return Status::IOError(std::string("epoll/timerfd: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTimerTag;
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, timer_.get(), &ev) != 0)
      return Status::IOError(std::string("epoll_ctl: ") + std::strerror(errno));
    for (size_t c = 0; c < conns_.size(); ++c) idle_.push_back(c);
    std::vector<epoll_event> events(256);
    Clock::time_point armed = Clock::time_point::max();
    for (;;) {
      const auto now = Clock::now();
      if (home_ != nullptr) home_->Tick(now);
      while (next_ < mine_.size() && (*sh_.arrivals)[mine_[next_]].at <= now) Dispatch(mine_[next_++], now);
      CheckTimeouts(now);
      Pump();
      if (next_ == mine_.size() && pending_.empty() && busy_ == 0) break;
      if (next_ < mine_.size() && (*sh_.arrivals)[mine_[next_]].at != armed) {
        armed = (*sh_.arrivals)[mine_[next_]].at;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(armed.time_since_epoch()).count();
        itimerspec its{};
        its.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
        its.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
        (void)::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
      }
      // Timeouts and idle connections are checked at least every 50 ms.
      const int n = ::epoll_wait(ep_.get(), events.data(), static_cast<int>(events.size()), 50);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::IOError(std::string("epoll_wait: ") + std::strerror(errno));
      }
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kTimerTag) {
          uint64_t expirations;
          (void)!::read(timer_.get(), &expirations, sizeof expirations);
          continue;
        }
        OnEvent(static_cast<size_t>(events[i].data.u64), events[i].events);
      }
      Pump();
    }
    for (Conn& c : conns_) Close(c);
    return Status::Ok();
  }

 private:
  static constexpr uint64_t kTimerTag = ~uint64_t{0};
  static constexpr auto kIdleClose = std::chrono::seconds(1);

  void Dispatch(size_t arrival, Clock::time_point now) {
    (*sh_.samples)[arrival].release_lag_us =
        std::max(0.0, std::chrono::duration<double, std::micro>(now - (*sh_.arrivals)[arrival].at).count());
    pending_.push_back(arrival);
    Pump();
  }

  // Sends `arrival` on connection c (opening it first if closed).
  void Start(size_t c, size_t arrival, bool retry) {
    Conn& conn = conns_[c];
    conn.arrival = arrival;
    conn.retried = retry;
    ++busy_;
    Sample& s = (*sh_.samples)[arrival];
    conn.sent = Clock::now();
    if (!retry)
      s.send_wait_us =
          std::max(0.0, std::chrono::duration<double, std::micro>(conn.sent - (*sh_.arrivals)[arrival].at).count());
    conn.out = "GET " + sh_.path_prefix + UrlEncode((*sh_.queries)[(*sh_.arrivals)[arrival].query]) +
               " HTTP/1.1\r\nHost: " + sh_.host_header + "\r\nConnection: keep-alive\r\n" + sh_.auth_header + "\r\n";
    conn.out_off = 0;
    conn.parser = HttpResponseParser();
    if (conn.fd < 0 && !Open(c)) {
      sh_.connect_failed = true;
      Finish(c, /*http=*/0, nullptr);
      return;
    }
    if (!conn.connecting) Proceed(c);
  }

  // A connected socket: the TLS handshake first (https), else the query.
  void Proceed(size_t c) {
    if (conns_[c].handshaking)
      Handshake(c);
    else
      Write(c);
  }

  void Handshake(size_t c) {
    Conn& conn = conns_[c];
    ERR_clear_error();
    const int rc = SSL_do_handshake(conn.ssl.get());
    if (rc == 1) {
      conn.handshaking = false;
      sh_.tls->Handshaken(conn.ssl.get());
      if (conn.arrival != SIZE_MAX) Write(c);
      return;
    }
    const int err = SSL_get_error(conn.ssl.get(), rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      WantOut(c, err == SSL_ERROR_WANT_WRITE);
      return;
    }
    sh_.tls->Failed(conn.ssl.get());
    Broken(c);
  }

  // send / recv, or their TLS counterparts with the same answers (-1 and errno EAGAIN: wait for
  // the socket; another errno: the connection failed).
  ssize_t Send(Conn& conn, const char* buf, size_t len) {
    if (!conn.ssl) return ::send(conn.fd, buf, len, MSG_NOSIGNAL);
    ERR_clear_error();
    size_t n = 0;
    conn.write_wants_read = false;
    if (SSL_write_ex(conn.ssl.get(), buf, len, &n) == 1) return static_cast<ssize_t>(n);
    switch (SSL_get_error(conn.ssl.get(), 0)) {
      case SSL_ERROR_WANT_READ: conn.write_wants_read = true; [[fallthrough]];
      case SSL_ERROR_WANT_WRITE: errno = EAGAIN; return -1;
      default: ERR_clear_error(); errno = EPIPE; return -1;
    }
  }
  ssize_t Recv(Conn& conn, char* buf, size_t len) {
    if (!conn.ssl) return ::recv(conn.fd, buf, len, 0);
    ERR_clear_error();
    size_t n = 0;
    conn.read_wants_write = false;
    if (SSL_read_ex(conn.ssl.get(), buf, len, &n) == 1) return static_cast<ssize_t>(n);
    switch (SSL_get_error(conn.ssl.get(), 0)) {
      case SSL_ERROR_ZERO_RETURN: return 0;
      case SSL_ERROR_WANT_WRITE: conn.read_wants_write = true; [[fallthrough]];
      case SSL_ERROR_WANT_READ: errno = EAGAIN; return -1;
      default: ERR_clear_error(); errno = ECONNRESET; return -1;
    }
  }

  bool Open(size_t c) {
    Conn& conn = conns_[c];
    const int fd = ::socket(sh_.target.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    // A load generator's own sends must not wait on Nagle behind the server's delayed ACK.
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&sh_.target.addr), sh_.target.len);
    if (rc != 0 && errno != EINPROGRESS) {
      ::close(fd);
      return false;
    }
    conn.fd = fd;
    conn.connecting = rc != 0;
    conn.reused = false;
    if (sh_.tls != nullptr) {
      conn.ssl = sh_.tls->Connect(fd);
      if (!conn.ssl) {
        Close(conn);
        return false;
      }
      conn.handshaking = true;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
    ev.data.u64 = c;
    if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      conn.fd = -1;
      return false;
    }
    want_out_[c] = true;
    return true;
  }

  void Close(Conn& conn) {
    if (conn.fd >= 0) ::close(conn.fd);  // also leaves the epoll set
    conn.fd = -1;
    conn.connecting = false;
    // A connection closed without a close_notify would make OpenSSL drop its session from
    // resumption (the one the next connections offer); the server's closing a connection after
    // its last answer is no reason to.
    if (conn.ssl && !conn.handshaking) SSL_set_shutdown(conn.ssl.get(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    conn.ssl.reset();
    conn.handshaking = false;
  }

  void WantOut(size_t c, bool on) {
    if (want_out_[c] == on) return;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u);
    ev.data.u64 = c;
    (void)::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, conns_[c].fd, &ev);
    want_out_[c] = on;
  }

  void Write(size_t c) {
    Conn& conn = conns_[c];
    while (conn.out_off < conn.out.size()) {
      const ssize_t w = Send(conn, conn.out.data() + conn.out_off, conn.out.size() - conn.out_off);
      if (w > 0) {
        conn.out_off += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        WantOut(c, true);
        return;
      }
      Broken(c);
      return;
    }
    WantOut(c, false);
  }

  void OnEvent(size_t c, uint32_t events) {
    Conn& conn = conns_[c];
    if (conn.fd < 0) return;
    if (conn.connecting) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(conn.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        Close(conn);
        if (conn.arrival != SIZE_MAX) {
          sh_.connect_failed = true;
          Finish(c, 0, nullptr);
        }
        return;
      }
      conn.connecting = false;
      if (conn.arrival != SIZE_MAX) Proceed(c);
      return;
    }
    if (conn.handshaking) {
      Handshake(c);
      return;
    }
    if (conn.read_wants_write && (events & EPOLLOUT)) events |= EPOLLIN;
    if ((events & (EPOLLOUT | (conn.write_wants_read ? EPOLLIN : 0u))) && conn.arrival != SIZE_MAX &&
        conn.out_off < conn.out.size())
      Write(c);
    if (conn.fd < 0) return;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) Read(c);
  }

  void Read(size_t c) {
    Conn& conn = conns_[c];
    char buf[16384];
    for (;;) {
      const ssize_t r = Recv(conn, buf, sizeof buf);
      if (r > 0) {
        if (conn.arrival == SIZE_MAX) {  // bytes nobody asked for: the connection is out of step
          Close(conn);
          return;
        }
        if (conn.parser.Feed(std::string_view(buf, static_cast<size_t>(r))) != HttpResponseParser::State::kIncomplete) {
          Answered(c);
          if (conn.fd < 0 || conn.arrival == SIZE_MAX) return;
        }
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      // EOF or a reset.
      if (conn.arrival != SIZE_MAX && conn.parser.FeedEof() == HttpResponseParser::State::kComplete) {
        Answered(c);
        Close(conn);
        return;
      }
      Broken(c);
      return;
    }
  }

  // The connection failed while a query was under way (or idle).
  void Broken(size_t c) {
    Conn& conn = conns_[c];
    const bool stale = conn.reused && !conn.parser.started() && Clock::now() - conn.sent < std::chrono::milliseconds(100);
    Close(conn);
    if (conn.arrival == SIZE_MAX) return;
    // A kept-alive connection the server has just closed (its idle timeout or request count)
    // fails at once; like any HTTP client, resend the (idempotent) GET once on a fresh one.
    if (stale && !conn.retried) {
      sh_.stale_retries.fetch_add(1, std::memory_order_relaxed);
      const size_t arrival = conn.arrival;
      conn.arrival = SIZE_MAX;
      --busy_;
      Start(c, arrival, /*retry=*/true);
      return;
    }
    Finish(c, 0, nullptr);
  }

  void Answered(size_t c) {
    Conn& conn = conns_[c];
    if (conn.parser.state() == HttpResponseParser::State::kError) {
      Close(conn);
      Finish(c, 0, nullptr);
      return;
    }
    const bool keep = conn.parser.keep_alive();
    Finish(c, conn.parser.status(), &conn.parser.body());
    conn.reused = true;
    if (!keep) Close(conn);
  }

  // Records the query on connection c (http 0: no answer); c becomes idle.
  void Finish(size_t c, int http, const std::string* body) {
    Conn& conn = conns_[c];
    const size_t i = conn.arrival;
    const auto end = Clock::now();
    Sample& s = (*sh_.samples)[i];
    s.latency_us = std::chrono::duration<double, std::micro>(end - (*sh_.arrivals)[i].at).count();
    s.http = http;
    if (http != 200 || body == nullptr) {
      s.error = true;
    } else {
      const SearchAnswerFlags a = ReadSearchAnswer(*body);
      if (!a.valid) {
        s.error = true;
      } else {
        s.partial = a.timed_out || a.shards_failed > 0;
        s.ok = !s.partial && end - (*sh_.arrivals)[i].at <= sh_.deadline;
      }
    }
    conn.arrival = SIZE_MAX;
    conn.last_used = end;
    --busy_;
    idle_.push_back(c);
  }

  // Gives the queries waiting for a connection the idle ones, oldest first. (A start that fails at
  // once returns its connection to idle_, so this ends.)
  void Pump() {
    while (!pending_.empty() && !idle_.empty()) {
      const size_t c = idle_.back();
      idle_.pop_back();
      const size_t arrival = pending_.front();
      pending_.pop_front();
      Start(c, arrival, /*retry=*/false);
    }
  }

  // Read timeouts, and idle connections closed (at most every 50 ms).
  void CheckTimeouts(Clock::time_point now) {
    if (now - last_check_ < std::chrono::milliseconds(50)) return;
    last_check_ = now;
    for (size_t c = 0; c < conns_.size(); ++c) {
      Conn& conn = conns_[c];
      if (conn.arrival != SIZE_MAX && now - conn.sent > sh_.read_timeout) {
        Close(conn);
        Finish(c, 0, nullptr);
      } else if (!sh_.keep_idle && conn.arrival == SIZE_MAX && conn.fd >= 0 && now - conn.last_used > kIdleClose) {
        Close(conn);
      }
    }
  }

  LoopShared& sh_;
  const std::vector<size_t>& mine_;
  std::vector<Conn> conns_;
  std::vector<bool> want_out_ = std::vector<bool>(conns_.size(), false);
  // Idle connections, the most recently used last: a query takes the warmest, so as many
  // connections are open as queries are under way at once, and one left idle past kIdleClose is
  // closed (a server with a thread per kept-alive connection, httplib's, would hold a thread for it
  // until its keep-alive timeout), unless --keep-idle.
  std::vector<size_t> idle_;
  std::deque<size_t> pending_;  // released arrivals waiting for a free connection
  size_t next_ = 0;             // the next of mine_ to release
  size_t busy_ = 0;             // connections with a query under way
  Clock::time_point last_check_{};
  Fd ep_, timer_;
  CpuHome* const home_;
};

Status RunLoop(LoopShared& shared, const std::vector<size_t>& mine, uint32_t conns, CpuHome* home) {
  return Loop(shared, mine, conns, home).Run();
}

}  // namespace

CLI::App* AddLoadgenCommand(CLI::App& app, LoadgenArgs* a) {
  CLI::App* cmd = app.add_subcommand("loadgen", "Open-loop Poisson load on the integrator's HTTP API");
  cmd->footer(
      "Prints one JSON line: target rate, measured queries, achieved rate, ok/partial/errors, deadline\n"
      "misses (late, failed or partial answers) and latency mean/p50/p95/p99/max in microseconds from\n"
      "each query's scheduled arrival; send_wait_mean_us and send_wait_p99_us: how long arrivals waited to be\n"
      "sent (the load generator's own queue, when every connection is busy); release_lag_p99_us and\n"
      "release_lag_max_us: the part of that wait before a loop released the arrival at all (the load\n"
      "generator itself behind its schedule, its loops busy or off their CPUs); fd_slots: the descriptor table's\n"
      "size, grown for --connections before the loops start; pinned_loops: the loops --pin-loops pinned;\n"
      "cpu_home: without --pin-loops, the CPU the loops share with the host's node and integrator while they keep\n"
      "less than a quarter of it busy (null with fewer than 2 CPUs), and how often they moved there and out.\n"
      "https only: tls_handshakes (connections that completed one), tls_resumed (of those, sessions resumed)\n"
      "and tls_handshake_failures (the first failure's reason is the error when no query succeeded).");
  cmd->add_option("--url", a->url, "the integrator, http://HOST:PORT or https://HOST:PORT")->capture_default_str();
  cmd->add_option("--cacert", a->cacert,
                  "https: PEM file of the CA certificates to verify the integrator's certificate against (default: "
                  "the system's)");
  cmd->add_option("--api-key", a->api_key,
                  "ID:KEY as `searchctl apikey create` printed it: sent as Authorization: ApiKey base64(ID:KEY)");
  cmd->add_option("--queries", a->queries, "file of queries, one per line")->required();
  cmd->add_option("--mode", a->mode, "and | or | andor")->capture_default_str();
  cmd->add_option("--k", a->k, "hits per query (1..10000)")->capture_default_str();
  cmd->add_option("--rate", a->rate, "mean arrivals per second")->capture_default_str()->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--seconds", a->seconds, "measured arrivals span")->capture_default_str()->check(CLI::Range(0.0, 1e5));
  cmd->add_option("--warmup", a->warmup, "unmeasured arrivals before")->capture_default_str()->check(CLI::Range(0.0, 1e5));
  cmd->add_flag("--ramp-up", a->ramp_up,
                "the warm-up's arrival rate rises linearly from 0 to --rate (Poisson all the same), so a run does "
                "not start with --rate's worth of new connections and cold queues at once");
  cmd->add_option("--deadline-ms", a->deadline_ms, "per-query deadline (sent as timeout_ms)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600000}));
  cmd->add_option("--connections", a->connections, "concurrent kept-alive HTTP connections")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  cmd->add_option("--threads", a->threads,
                  "event loops (each an epoll over its share of the connections); 0: a quarter of the cores, 1 to 4")
      ->capture_default_str()
      ->check(CLI::Range(0u, 64u));
  cmd->add_flag("--no-source", a->no_source,
               "ids only (_source=false): measure the query phase without the fetch round of the documents");
  cmd->add_flag("--keep-idle", a->keep_idle,
               "keep every connection open once opened (by default one idle for 1 s is closed, so that as many "
               "are open as queries are under way): each query on a kept-alive connection, none paying a new "
               "connection's set-up (over https, a handshake)");
  cmd->add_option("--seed", a->seed, "arrival times and query order")->capture_default_str();
  cmd->add_option("--trace", a->trace,
                  "also write every query to this CSV: arrival_s (its scheduled arrival, in seconds from the "
                  "run's start), latency_ms, http (0: no answer), ok, measured, query (its number among the "
                  "query file's non-blank lines, from 1), send_wait_ms (the part of latency_ms it waited for a free "
                  "connection)");
  cmd->add_option("--pin-loops", a->pin_loops,
                  "pin each event loop to one CPU of the process's affinity mask (loop l to its l-th CPU, modulo "
                  "their count): the kernel then never runs two loops on one CPU while another of the mask is "
                  "idle, which costs an arrival up to a scheduler slice of lag (pinned_loops in the summary)")
      ->capture_default_str();
  return cmd;
}

int RunLoadgen(const LoadgenArgs& a) {
  auto mode = CheckModeAndK(a.mode, a.k);
  if (!mode.ok()) return ReportError("loadgen", mode.status(), kExitUsage);
  std::string host;
  int port = 0;
  bool https = false;
  if (Status st = ParseUrl(a.url, &host, &port, &https); !st.ok()) return ReportError("loadgen", st, kExitUsage);
  if (!https && !a.cacert.empty())
    return ReportError("loadgen", Status::InvalidArgument("--cacert needs an https:// --url"), kExitUsage);
  std::string auth_header;
  if (!a.api_key.empty()) {
    auto header = ApiKeyHeader(a.api_key);
    if (!header.ok()) return ReportError("loadgen", header.status(), kExitUsage);
    auth_header = *header;
  }
  std::unique_ptr<TlsClient> tls;
  if (https) {
    auto made = TlsClient::Make(a.cacert, host);
    if (!made.ok()) return ReportError("loadgen", made.status(), kExitUsage);
    tls = std::move(made).value();
  }
  auto queries = ReadQueryFile(a.queries);
  if (!queries.ok()) return ReportError("loadgen", queries.status(), kExitFailure);
  if (queries->empty()) return ReportError("loadgen", Status::InvalidArgument("the query file is empty"), kExitFailure);

  // The trace file is opened before the run, so a bad path costs no run.
  std::ofstream trace;
  if (!a.trace.empty()) {
    trace.open(a.trace, std::ios::trunc);
    if (!trace) return ReportError("loadgen", Status::IOError("cannot open the trace file " + a.trace), kExitFailure);
  }

  // Arrival times: exponential gaps of mean 1 / rate over warmup + seconds.
  std::mt19937_64 rng(a.seed);
  std::exponential_distribution<double> gap(a.rate);
  std::vector<Arrival> arrivals;
  // The schedule is drawn against a provisional start and moved to the real one once everything
  // before the loops is done: drawing and splitting a 10 s step at 70,000 q/s takes tens of
  // milliseconds, which would otherwise make its first arrivals late by the load generator's own
  // doing.
  const Clock::time_point drawn_start = Clock::now();
  size_t next_query = rng() % queries->size();
  auto arrive = [&](double t) {
    Arrival x;
    x.query = next_query;
    next_query = (next_query + 1) % queries->size();
    x.at = drawn_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
    x.measured = t >= a.warmup;
    arrivals.push_back(x);
  };
  double t = gap(rng);
  if (a.ramp_up && a.warmup > 0) {
    // A Poisson process of rate r * t / W over the warm-up [0, W): the points s of a unit-rate one
    // below r * W / 2 (its mean count), moved to t = sqrt(2 W s / r), where the ramp's integral is s.
    std::exponential_distribution<double> unit(1.0);
    for (double s = unit(rng); s < a.rate * a.warmup / 2; s += unit(rng)) arrive(std::sqrt(2 * a.warmup * s / a.rate));
    t = a.warmup + gap(rng);  // memoryless: the measured part starts afresh at W
  }
  for (; t < a.warmup + a.seconds; t += gap(rng)) arrive(t);

  std::vector<Sample> samples(arrivals.size());
  const uint32_t loops = std::max<uint32_t>(1, std::min(a.connections, a.threads > 0 ? a.threads : DefaultLoops()));
  auto target = ResolveTarget(host, port);
  if (!target.ok()) return ReportError("loadgen", target.status(), kExitFailure);
  LoopShared shared;
  shared.target = *target;
  shared.host_header = host + ":" + std::to_string(port);
  shared.auth_header = auth_header;
  shared.tls = tls.get();
  shared.path_prefix = std::string("/search?mode=") + std::string(QueryModeName(*mode)) + "&k=" + std::to_string(a.k) +
                       "&timeout_ms=" + std::to_string(a.deadline_ms) + (a.no_source ? "&_source=false" : "") + "&q=";
  shared.read_timeout = std::chrono::milliseconds(a.deadline_ms * 4 + 5000);
  shared.deadline = std::chrono::milliseconds(a.deadline_ms);
  shared.keep_idle = a.keep_idle;
  shared.queries = &*queries;
  shared.arrivals = &arrivals;
  shared.samples = &samples;
  // Each arrival goes to one loop at random (a random thinning of a Poisson process is Poisson);
  // the connections are split evenly.
  std::vector<std::vector<size_t>> mine(loops);
  std::mt19937_64 pick(a.seed ^ 0x9e3779b97f4a7c15ull);
  for (size_t i = 0; i < arrivals.size(); ++i) mine[loops == 1 ? 0 : pick() % loops].push_back(i);
  // The loops open connections as the load rises; each growth of the descriptor table in a process
  // with threads waits for an RCU grace period, and so does every loop opening a connection then
  // (core/fd_table.hpp). Grown here, before the loops start, it costs none.
  ReserveFdTable(static_cast<int>(a.connections) + 64);
  // The real start: the loops are started well within 20 ms.
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
  for (Arrival& x : arrivals) x.at += start - drawn_start;
  std::vector<std::thread> threads;
  std::vector<Status> loop_status(loops);
  const std::vector<int> allowed = AllowedCpus();
  const std::vector<int> cpus = a.pin_loops ? allowed : std::vector<int>{};
  std::unique_ptr<CpuHome> home;  // the loops' (without --pin-loops); loop 0 ticks it
  if (!a.pin_loops) home = std::make_unique<CpuHome>(CpuHome::PickHome(allowed), allowed);
  std::atomic<uint32_t> pinned{0};
  for (uint32_t l = 0; l < loops; ++l) {
    const uint32_t conns = a.connections / loops + (l < a.connections % loops ? 1 : 0);
    threads.emplace_back([&, l, conns] {
      if (!cpus.empty() && PinThisThread({cpus[l % cpus.size()]})) pinned.fetch_add(1);
      if (home) home->AddThread(CpuHome::ThisThread());
      loop_status[l] = RunLoop(shared, mine[l], conns, l == 0 ? home.get() : nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : loop_status)
    if (!st.ok()) return ReportError("loadgen", st, kExitFailure);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> lat, answered_lat, rejected_lat, send_wait, release_lag;
  double send_wait_sum = 0;
  std::map<std::string, uint64_t> statuses;
  uint64_t measured = 0, ok = 0, partial = 0, errors = 0, misses = 0;
  double sum = 0;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    if (!arrivals[i].measured) continue;
    const Sample& s = samples[i];
    ++measured;
    lat.push_back(s.latency_us);
    sum += s.latency_us;
    ok += s.ok;
    partial += s.partial;
    errors += s.error;
    misses += !s.ok;
    ++statuses[s.http == 0 ? std::string("none") : std::to_string(s.http)];
    if (s.http == 200) answered_lat.push_back(s.latency_us);
    if (s.http == 429 || s.http == 503) rejected_lat.push_back(s.latency_us);
    send_wait.push_back(s.send_wait_us);
    send_wait_sum += s.send_wait_us;
    release_lag.push_back(s.release_lag_us);
  }
  std::sort(lat.begin(), lat.end());
  std::sort(send_wait.begin(), send_wait.end());
  std::sort(release_lag.begin(), release_lag.end());
  std::sort(answered_lat.begin(), answered_lat.end());
  std::sort(rejected_lat.begin(), rejected_lat.end());
  nlohmann::json out;
  out["rate"] = a.rate;
  out["seconds"] = a.seconds;
  out["mode"] = std::string(QueryModeName(*mode));
  out["k"] = a.k;
  out["deadline_ms"] = a.deadline_ms;
  out["connections"] = a.connections;
  out["queries"] = measured;
  out["achieved_qps"] = a.seconds > 0 ? static_cast<double>(measured) / a.seconds : 0.0;
  out["elapsed_s"] = elapsed;
  out["ok"] = ok;
  out["partial"] = partial;
  out["errors"] = errors;
  out["deadline_misses"] = misses;
  out["miss_ratio"] = measured > 0 ? static_cast<double>(misses) / static_cast<double>(measured) : 0.0;
  out["mean_us"] = lat.empty() ? 0.0 : sum / static_cast<double>(lat.size());
  out["p50_us"] = Percentile(lat, 0.50);
  out["p95_us"] = Percentile(lat, 0.95);
  out["p99_us"] = Percentile(lat, 0.99);
  out["max_us"] = lat.empty() ? 0.0 : lat.back();
  // Overload: answers by HTTP status ("none": no answer), the latency of the 200s alone and of
  // the load shed (429 / 503) alone.
  out["http"] = statuses;
  out["stale_connection_retries"] = shared.stale_retries.load();
  out["threads"] = loops;
  // The loops' CPU home (without --pin-loops): where, whether there now, and how often they moved.
  if (home && home->active()) {
    const CpuHomeState hs = home->state();
    out["cpu_home"] = {
        {"cpu", home->home()}, {"pinned", hs.pinned}, {"moves_home", hs.moves_home}, {"moves_out", hs.moves_out}};
  } else {
    out["cpu_home"] = nullptr;
  }
  out["ramp_up"] = a.ramp_up;
  out["answered_p99_us"] = Percentile(answered_lat, 0.99);
  out["rejected"] = rejected_lat.size();
  out["rejected_p50_us"] = Percentile(rejected_lat, 0.50);
  out["rejected_p99_us"] = Percentile(rejected_lat, 0.99);
  // The load generator's own queue: arrivals that found every connection busy waited here, and
  // that wait is part of their latency (a real client would have queued too, but elsewhere).
  out["send_wait_mean_us"] = send_wait.empty() ? 0.0 : send_wait_sum / static_cast<double>(send_wait.size());
  out["send_wait_p99_us"] = Percentile(send_wait, 0.99);
  // Of that wait, the part before the load generator released the arrival at all (its own loop
  // behind its schedule): where this is most of send_wait, the instrument, not the server, fell
  // behind, and the step's tail measures the load generator's host.
  out["release_lag_p99_us"] = Percentile(release_lag, 0.99);
  out["release_lag_max_us"] = release_lag.empty() ? 0.0 : release_lag.back();
  out["fd_slots"] = FdTableSlots();  // the descriptor table, grown for --connections before the loops
  out["pinned_loops"] = pinned.load();  // --pin-loops: the loops the kernel let pin themselves
  if (tls) {  // https: full and resumed handshakes, and the ones that failed
    out["tls_handshakes"] = tls->handshakes();
    out["tls_resumed"] = tls->resumed();
    out["tls_handshake_failures"] = tls->failures();
  }
  std::cout << out.dump() << std::endl;
  // The trace after the summary: a trace that cannot be written fails the command without losing
  // the summary.
  if (trace.is_open()) {
    trace << "arrival_s,latency_ms,http,ok,measured,query,send_wait_ms,release_lag_ms\n";
    trace.setf(std::ios::fixed);
    for (size_t i = 0; i < arrivals.size(); ++i) {
      const Sample& s = samples[i];
      trace.precision(6);
      trace << std::chrono::duration<double>(arrivals[i].at - start).count() << ',';
      trace.precision(3);
      trace << s.latency_us / 1e3 << ',' << s.http << ',' << (s.ok ? 1 : 0) << ',' << (arrivals[i].measured ? 1 : 0)
            << ',' << arrivals[i].query + 1 << ',' << s.send_wait_us / 1e3 << ',' << s.release_lag_us / 1e3 << '\n';
    }
    trace.flush();
    if (!trace) {
      return ReportError("loadgen", Status::IOError("cannot write the trace to " + a.trace), kExitFailure);
    }
  }
  if (tls && tls->failures() > 0 && ok == 0) {
    return ReportError(
        "loadgen", Status::Unavailable("TLS handshake with " + a.url + " failed: " + tls->first_failure()), kExitFailure);
  }
  if (shared.connect_failed && ok == 0) {
    return ReportError("loadgen", Status::Unavailable("cannot connect to " + a.url), kExitFailure);
  }
  return kExitOk;
}

}  // namespace search::cli
