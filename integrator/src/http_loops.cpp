#include "http_loops.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/thread_name.hpp"
#include "core/wake_fd.hpp"
#include "http_routes.hpp"
#include "integrator/api_keys.hpp"
#include "integrator/http_request_parser.hpp"
#include "core/log.hpp"

namespace search {
namespace {

using Clock = std::chrono::steady_clock;

const Logger& Log() {
  static const Logger kLog("http");
  return kLog;
}

constexpr size_t kReadChunk = 16 << 10;
constexpr int kMaxEvents = 128;
constexpr auto kIoTimeout = std::chrono::seconds(5);  // a request left incomplete, an answer left unsent
// A request's line and headers must all have come this long after its first byte, however the
// bytes trickle in (slowloris); then the connection is closed without an answer.
constexpr auto kHeaderTimeout = std::chrono::seconds(10);
constexpr auto kSweepEvery = std::chrono::milliseconds(200);
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after accept failed for want of resources
constexpr auto kDrainFor = std::chrono::seconds(5);  // Stop: how long searches in progress may finish
// A search whose answer never came (the fan-out's I/O thread stuck): answered anyway after its
// longest deadline and the fan-out's grace.
constexpr auto kSearchGiveUp = std::chrono::milliseconds(kMaxTimeoutMs) + std::chrono::seconds(5);

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// What an HTTPS connection's socket BIO (SocketBioMethod) reads and sets: its descriptor, whether
// the last read took less than OpenSSL asked for (the socket held no more at that moment), and
// whether a read saw the peer's end of stream.
struct SocketBioState {
  int fd = -1;
  bool drained = false;
  bool eof = false;
};

// The BIO an HTTPS connection's OpenSSL reads and writes through: recv and send(MSG_NOSIGNAL) on
// SocketBioState::fd, nothing else (its data, owned by the connection). It stands for OpenSSL's
// socket BIO with a callback that noted `drained`, which ran around each of the BIO_ctrl calls
// OpenSSL makes for every record (some 14 a request and its answer). Retry flags as the socket BIO
// sets them (EAGAIN: retry; a read of 0: end of stream, BIO_eof true); flush succeeds, other
// controls answer 0. Its method is made once and is immutable after; a BIO is used by one thread.
int SocketBioRead(BIO* b, char* buf, size_t len, size_t* done) {
  auto* st = static_cast<SocketBioState*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  ssize_t n;
  do n = ::recv(st->fd, buf, len, 0);
  while (n < 0 && errno == EINTR);
  st->drained = n <= 0 || static_cast<size_t>(n) < len;
  *done = n > 0 ? static_cast<size_t>(n) : 0;
  if (n > 0) return 1;
  if (n == 0) {
    st->eof = true;
    return 0;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
  return -1;
}
int SocketBioWrite(BIO* b, const char* buf, size_t len, size_t* done) {
  auto* st = static_cast<SocketBioState*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  ssize_t n;
  do n = ::send(st->fd, buf, len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  *done = n > 0 ? static_cast<size_t>(n) : 0;
  if (n >= 0) return 1;
  if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
  return -1;
}
long SocketBioCtrl(BIO* b, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_EOF: return static_cast<SocketBioState*>(BIO_get_data(b))->eof ? 1 : 0;
    default: return 0;
  }
}
const BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "search http socket");
    if (m != nullptr &&
        (BIO_meth_set_read_ex(m, SocketBioRead) != 1 || BIO_meth_set_write_ex(m, SocketBioWrite) != 1 ||
         BIO_meth_set_ctrl(m, SocketBioCtrl) != 1)) {
      BIO_meth_free(m);
      m = nullptr;
    }
    return m;
  }();
  return method;
}

const char* StatusText(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace

class HttpLoops::Loop {
 public:
  Loop(HttpLoops* server, size_t index) : server_(server), index_(index), mailbox_(std::make_shared<Mailbox>()) {}
  ~Loop() {
    for (auto& [fd, c] : conns_) ::close(fd);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }

  Status Open(int listen_fd) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return Status::IOError(std::string("epoll_create1: ") + std::strerror(errno));
    if (!mailbox_->wake.Open()) return Status::IOError(std::string("eventfd: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = mailbox_->wake.fd();
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, mailbox_->wake.fd(), &ev) != 0)
      return Status::IOError(std::string("epoll_ctl: ") + std::strerror(errno));
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;  // a new connection wakes one loop, not all
    ev.data.fd = listen_fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd, &ev) != 0)
      return Status::IOError(std::string("epoll_ctl: ") + std::strerror(errno));
    listen_fd_ = listen_fd;
    return Status::Ok();
  }

  void Wake() { mailbox_->wake.Wake(); }
  // Takes a connection another loop accepted (on this loop's thread, through its mailbox); false
  // when this loop has returned (the caller closes it).
  bool Give(int fd) {
    return mailbox_->Post([this, fd] { Adopt(fd); });
  }

  void Run();

 private:
  // Work handed to this loop by other threads (the fan-out's results): run on the loop's thread.
  struct Mailbox {
    std::mutex mu;
    std::vector<std::function<void()>> items;  // GUARDED_BY(mu)
    bool closed = false;                       // GUARDED_BY(mu): the loop has returned
    WakeFd wake;
    // False when the loop has returned: `fn` is dropped (a search's state goes with it).
    bool Post(std::function<void()> fn) {
      bool first;
      {
        std::lock_guard lock(mu);
        if (closed) return false;
        items.push_back(std::move(fn));
        first = items.size() == 1;
      }
      if (first) wake.WakeIfIdle();
      return true;
    }
  };

  struct Conn {
    int fd = -1;
    uint64_t gen = 0;          // tells a reply for this connection from one for an earlier one on the fd
    std::string in;            // bytes read, not yet parsed
    std::string out;           // answer bytes not yet written
    size_t out_off = 0;
    bool busy = false;         // a request is being answered
    bool close_after = false;  // close once `out` is written
    bool peer_closed = false;  // the client shut its side: answer what it sent, then close
    bool read_blocked = false; // stopped reading while busy with a full buffer (edge-triggered: retry later)
    bool in_process = false;   // Process() is running for it (an answer given at once must not recurse)
    bool lingering = false;    // answered and half-closed: reading what still comes until EOF, then closed
    bool head = false;         // the request in progress is a HEAD
    bool keep_alive = true;    // the request in progress asked for (or allowed) keep-alive
    int version_minor = 1;
    size_t requests = 0;
    bool awaiting_headers = false;  // bytes of a request came, its header section not all yet
    Clock::time_point request_since;  // awaiting_headers: when the request's first byte was seen
    Clock::time_point last_io;
    Clock::time_point busy_since;
    // HTTPS only (null on plain HTTP): the connection's TLS state over its socket. Until the
    // handshake completes every event drives SSL_do_handshake; after it, reads and writes go
    // through SSL_read_ex / SSL_write_ex. The epoll interest set stays both edges (EPOLLIN |
    // EPOLLOUT, edge-triggered): what OpenSSL waits for (WANT_READ, WANT_WRITE) says which edge
    // resumes what, and a read that must first write (a TLS 1.3 key update's answer) or a write
    // that must first read is resumed by the other edge.
    std::unique_ptr<SSL, SslFree> ssl;
    bool handshaking = false;      // HTTPS: the handshake has not completed (last_io: the accept)
    bool read_wants_write = false;  // HTTPS: the last SSL_read stopped for want of writing
    bool write_wants_read = false;  // HTTPS: the last SSL_write stopped for want of reading
    // HTTPS: what the connection's BIO reads and notes (SocketBioState). ReadAll clears `drained`
    // first and stops once a read of its own drained the socket and OpenSSL holds nothing.
    SocketBioState socket;
    // API keys: the last Authorization value that passed on this connection (ApiKeys::CheckOnConnection).
    std::string verified_auth;
  };

  void Accept();
  void Adopt(int fd);
  void OnEvent(Conn& c, uint32_t events);
  void Handshake(Conn& c);
  ssize_t TlsRecv(Conn& c, char* buf, size_t len);
  ssize_t TlsSend(Conn& c, const char* buf, size_t len);
  void ReadAll(Conn& c);
  void Process(Conn& c);
  void ProcessRequests(Conn& c);
  void Dispatch(Conn& c, HttpRequest& req);
  // `extra_headers`: more header lines, each ending in CRLF (e.g. WWW-Authenticate).
  void Answer(uint64_t gen, int fd, int status, std::string body, const char* type,
              const char* extra_headers = nullptr);
  // An Authorization header missing or wrong (ApiKeys::Check's status): answered 401 or 403, counted.
  void RefuseAuth(Conn& c, int status);
  void CountRefused(const char* reason);
  void Flush(Conn& c);
  void Close(int fd);
  void CloseWhenWritten(Conn& c);
  void Sweep(Clock::time_point now);
  void RunMailbox();
  bool Drained() const;

  HttpLoops* server_;
  size_t index_;
  std::shared_ptr<Mailbox> mailbox_;
  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  bool listening_ = true;
  std::optional<Clock::time_point> accept_paused_until_;  // the listening socket is out of the epoll set
  uint64_t next_gen_ = 1;  // per request: an answer finds its request by (fd, gen)
  std::unordered_map<int, Conn> conns_;
  HttpRequestLimits limits_;
  // ReadAll's: what one read takes from a socket (or OpenSSL) before it is appended to Conn::in.
  std::unique_ptr<char[]> read_buf_ = std::make_unique_for_overwrite<char[]>(kReadChunk);
};

void HttpLoops::Loop::Accept() {
  for (int i = 0; i < 64; ++i) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ...): the pending connection stays
        // in the backlog and the level-triggered socket would wake this loop at once, again and
        // again. Stop watching it for kAcceptPause (one warning a pause); the connections open
        // now are served meanwhile and free descriptors as they close.
        Log().Warn() << "accept: " << std::strerror(errno) << "; not accepting for "
                     << kAcceptPause.count() << " ms (" << server_->open_connections() << " connections open)";
        if (::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr) == 0) accept_paused_until_ = Clock::now() + kAcceptPause;
      }
      return;
    }
    // The connection counts as open from here (another loop may adopt it later). Over the
    // connection limit it is closed at once (the client sees its connection closed or reset), so a
    // flood of idle or slow connections cannot take every descriptor.
    const size_t was_open = server_->open_.fetch_add(1, std::memory_order_relaxed);
    if (server_->options_.max_connections != 0 && was_open >= server_->options_.max_connections) {
      server_->open_.fetch_sub(1, std::memory_order_relaxed);
      ::close(fd);
      CountRefused("max_connections");
      continue;
    }
    int one = 1;
    // Answers go out in one write; without TCP_NODELAY a small one may still wait for the
    // client's delayed ACK of the previous.
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // The loops take new connections in turn: the loop that happens to wake for a burst of them
    // (EPOLLEXCLUSIVE wakes one) would otherwise keep them all.
    const size_t n = server_->loops_.size();
    const size_t to = n == 1 ? index_ : server_->next_loop_.fetch_add(1, std::memory_order_relaxed) % n;
    if (to == index_) {
      Adopt(fd);
    } else if (!server_->loops_[to]->Give(fd)) {
      ::close(fd);
      server_->open_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
}

void HttpLoops::Loop::Adopt(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    server_->open_.fetch_sub(1, std::memory_order_relaxed);  // counted when accepted
    return;
  }
  Conn& c = conns_[fd];
  c = Conn{};
  c.fd = fd;
  c.gen = next_gen_++;
  c.last_io = Clock::now();
  if (server_->options_.tls) {
    c.socket.fd = fd;
    c.ssl.reset(SSL_new(server_->options_.tls->get()));
    BIO* socket = c.ssl && SocketBioMethod() != nullptr ? BIO_new(SocketBioMethod()) : nullptr;
    if (socket == nullptr) {
      Log().Warn() << "SSL_new: out of memory; connection closed";
      ERR_clear_error();
      Close(fd);
      return;
    }
    BIO_set_data(socket, &c.socket);  // c stays put in conns_, and outlives its SSL (and so the BIO)
    BIO_set_init(socket, 1);
    SSL_set_bio(c.ssl.get(), socket, socket);  // the SSL owns it
    SSL_set_accept_state(c.ssl.get());
    c.handshaking = true;  // the first event (already pending, or the ClientHello's) starts it
  }
}

void HttpLoops::Loop::Close(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (it->second.handshaking && !server_->stopping_.load(std::memory_order_relaxed)) {
    server_->tls_handshake_failures_.fetch_add(1, std::memory_order_relaxed);
    if (IntegratorObserver* o = server_->integrator_->observer()) o->OnTlsHandshakeFailure();
  } else if (it->second.ssl) {
    // Keep its session resumable: OpenSSL drops the session of a connection freed without a
    // close_notify, and HTTP clients mostly close without one.
    SSL_set_shutdown(it->second.ssl.get(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  }
  ::close(fd);  // also takes it out of the epoll set (the SSL object goes with the entry)
  OPENSSL_cleanse(it->second.verified_auth.data(), it->second.verified_auth.size());
  conns_.erase(it);
  server_->open_.fetch_sub(1, std::memory_order_relaxed);
}

void HttpLoops::Loop::CloseWhenWritten(Conn& c) {
  // The client shut its side after its last request: an answer still being written goes out first
  // (a client may half-close once it has sent everything and still read the answers).
  if (c.out_off < c.out.size())
    c.close_after = true;  // Flush closes it
  else
    Close(c.fd);
}

void HttpLoops::Loop::OnEvent(Conn& c, uint32_t events) {
  const int fd = c.fd;
  if (events & (EPOLLERR | EPOLLHUP)) {
    // Nothing more can be read or written (EPOLLHUP: both directions shut).
    Close(fd);
    return;
  }
  if (c.ssl) {
    if (c.handshaking) return Handshake(c);
    if (c.read_wants_write && (events & EPOLLOUT)) events |= EPOLLIN;
    if (c.write_wants_read && (events & EPOLLIN)) events |= EPOLLOUT;
  }
  if (events & EPOLLOUT) {
    Flush(c);
    if (conns_.find(fd) == conns_.end()) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP)) {
    ReadAll(c);
    if (conns_.find(fd) == conns_.end()) return;
    Process(c);
  }
}

void HttpLoops::Loop::Handshake(Conn& c) {
  const int fd = c.fd;
  ERR_clear_error();  // SSL_get_error reads this thread's queue: no other connection's leftovers
  const int rc = SSL_do_handshake(c.ssl.get());
  if (rc == 1) {
    ERR_clear_error();  // an empty queue for the connection's reads and writes (TlsRecv)
    c.handshaking = false;
    c.last_io = Clock::now();
    // The request may have come with the handshake's last flight (and be read ahead already):
    // no new edge would say so.
    ReadAll(c);
    if (conns_.find(fd) == conns_.end()) return;
    Process(c);
    return;
  }
  const int err = SSL_get_error(c.ssl.get(), rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return;  // the next edge resumes it
  if (Log().Enabled(LogLevel::kDebug)) {
    const unsigned long e = ERR_peek_error();
    Log().Debug() << "TLS handshake failed: " << (e ? ERR_reason_error_string(e) : "connection closed");
  }
  ERR_clear_error();
  Close(fd);  // counted there
}

// SSL_read_ex as recv would answer: > 0 bytes, 0 at the end (close_notify, or the client's EOF:
// SSL_OP_IGNORE_UNEXPECTED_EOF), or -1 with errno EAGAIN (more must come, or a write must happen
// first) or ECONNRESET (a TLS error: nothing more to read).
// SSL_get_error needs this thread's error queue empty before the call; it is kept so rather than
// cleared before each call (ERR_clear_error is a thread-local look-up and a sweep of its slots):
// every OpenSSL call on a loop thread that can fail clears the queue when it does (here, TlsSend,
// Handshake, Adopt, Flush's SSL_shutdown, ApiKeys' hash), and a completed handshake clears it.
ssize_t HttpLoops::Loop::TlsRecv(Conn& c, char* buf, size_t len) {
  size_t n = 0;
  c.read_wants_write = false;
  if (SSL_read_ex(c.ssl.get(), buf, len, &n) == 1) return static_cast<ssize_t>(n);
  switch (SSL_get_error(c.ssl.get(), 0)) {
    case SSL_ERROR_ZERO_RETURN: return 0;
    case SSL_ERROR_WANT_WRITE: c.read_wants_write = true; [[fallthrough]];
    case SSL_ERROR_WANT_READ: errno = EAGAIN; return -1;
    default:
      ERR_clear_error();
      errno = ECONNRESET;
      return -1;
  }
}

// SSL_write_ex as send would answer: > 0 bytes written (at least one record's worth), or -1 with
// errno EAGAIN (the socket is full, or a read must happen first) or EPIPE (a TLS or socket error).
// The error queue as in TlsRecv.
ssize_t HttpLoops::Loop::TlsSend(Conn& c, const char* buf, size_t len) {
  size_t n = 0;
  c.write_wants_read = false;
  if (SSL_write_ex(c.ssl.get(), buf, len, &n) == 1) return static_cast<ssize_t>(n);
  switch (SSL_get_error(c.ssl.get(), 0)) {
    case SSL_ERROR_WANT_READ: c.write_wants_read = true; [[fallthrough]];
    case SSL_ERROR_WANT_WRITE: errno = EAGAIN; return -1;
    default:
      ERR_clear_error();
      errno = EPIPE;
      return -1;
  }
}

void HttpLoops::Loop::ReadAll(Conn& c) {
  if (c.lingering) {  // after the last answer: discard until the client closes
    char sink[4096];
    while (true) {
      const ssize_t n = ::recv(c.fd, sink, sizeof(sink), 0);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) Close(c.fd);
      return;
    }
  }
  // Bounded while a request is in progress: a client pipelining without end is read again once
  // its answers went out.
  const size_t cap = limits_.max_header_bytes + limits_.max_body_bytes + kReadChunk;
  c.socket.drained = false;
  while (true) {
    if (c.busy && c.in.size() >= cap) {
      c.read_blocked = true;
      return;
    }
    // Into the loop's buffer, then appended: growing `in` by a chunk first would zero-fill it.
    char* const buf = read_buf_.get();
    const ssize_t n = c.ssl ? TlsRecv(c, buf, kReadChunk) : ::recv(c.fd, buf, kReadChunk, 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      c.last_io = Clock::now();
      // Drained: edge-triggered, more data is a new event. Over TLS a read returns at most one
      // record: drained when a socket read since this call began took less than asked (bytes that
      // came after it raise a new edge) and OpenSSL holds no more bytes, read or decrypted.
      if (c.ssl ? c.socket.drained && SSL_has_pending(c.ssl.get()) == 0 : static_cast<size_t>(n) < kReadChunk)
        return;
      continue;
    }
    if (n == 0) {
      c.peer_closed = true;
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.peer_closed = true;  // reset: nothing to answer
    return;
  }
}

void HttpLoops::Loop::Process(Conn& c) {
  const int fd = c.fd;
  c.in_process = true;
  ProcessRequests(c);
  if (auto it = conns_.find(fd); it != conns_.end()) it->second.in_process = false;  // (no accept in between)
}

void HttpLoops::Loop::ProcessRequests(Conn& c) {
  const int fd = c.fd;
  while (!c.busy && !c.close_after && !c.lingering) {
    if (c.in.empty()) {
      if (c.peer_closed) CloseWhenWritten(c);
      return;
    }
    HttpRequest req;
    const HttpParseResult r = ParseHttpRequest(c.in, limits_, &req);
    if (r.state == HttpParseState::kIncomplete) {
      // The header timeout runs from the first byte of the request until its header section is in.
      if (r.headers_complete) {
        c.awaiting_headers = false;
      } else if (!c.awaiting_headers) {
        c.awaiting_headers = true;
        c.request_since = Clock::now();
      }
      if (c.peer_closed) CloseWhenWritten(c);  // the rest will not come
      return;
    }
    c.awaiting_headers = false;
    c.busy = true;
    c.busy_since = Clock::now();
    c.gen = next_gen_++;
    ++c.requests;
    if (r.state == HttpParseState::kError) {
      c.keep_alive = false;
      c.head = false;
      c.version_minor = 1;
      c.in.clear();
      std::string reason = r.reason;
      if (r.status == 413) reason = BodyTooLongReason(kMaxBodyBytes);
      if (r.status == 414) reason = kUriTooLongReason;
      Answer(c.gen, fd, r.status, ErrorJson(RequestError{r.status, ErrorTypeForStatus(r.status), reason}),
             kJsonType);
      return;  // closes after the answer
    }
    c.in.erase(0, r.consumed);
    c.keep_alive = req.keep_alive && !c.peer_closed;
    c.head = req.method == "HEAD";
    c.version_minor = req.version_minor;
    Dispatch(c, req);
    // Dispatch may have answered at once (and even closed the connection).
    if (conns_.find(fd) == conns_.end()) return;
  }
}

void HttpLoops::Loop::Dispatch(Conn& c, HttpRequest& req) {
  const int fd = c.fd;
  const uint64_t gen = c.gen;
  Integrator* in = server_->integrator_;
  try {
    const std::string& m = req.method;
    const bool get = m == "GET" || m == "HEAD";
    if (const ApiKeys* keys = server_->options_.api_keys.get()) {
      // Every route needs a key (404s too: no route is revealed without one) but the status page,
      // which holds no data, and /health when left open for load balancers.
      if (!OpenWithoutApiKey(m, req.path, server_->options_.open_health)) {
        if (const int refused = keys->CheckOnConnection(req.Header("authorization"), &c.verified_auth); refused != 0)
          return RefuseAuth(c, refused);
      }
    }
    const bool search = req.path == "/search" || req.path == "/_search";
    const bool count = req.path == "/count" || req.path == "/_count";
    if ((search || count) && (get || m == "POST")) {
      ParsedSearch parsed;
      if (m == "POST") {
        // Query-string parameters on a POST would be ambiguous next to the body: refuse them.
        if (req.target.find('?') != std::string::npos)
          parsed.error = RequestError{400, "illegal_argument_exception", kPostQueryStringReason};
        else
          parsed = search ? ParseSearchBody(req.body) : ParseCountBody(req.body);
      } else {
        parsed = search ? ParseSearchQuery(req.params) : ParseCountQuery(req.params);
      }
      if (IntegratorObserver* o = in->observer())
        o->OnPhase(RequestPhase::kParse, std::chrono::duration<double>(Clock::now() - c.last_io).count());
      std::shared_ptr<Mailbox> box = mailbox_;
      Integrator::Post post = [box](std::function<void()> fn) { box->Post(std::move(fn)); };
      // `done` runs on this loop's thread (at once, or from the mailbox).
      in->HandleSearchAsync(parsed, 0, post, [this, gen, fd](HttpReply reply) {
        Answer(gen, fd, reply.status, std::move(reply.body), kJsonType);
      });
      return;
    }
    if (req.path == "/health" && get) {
      std::string status;
      std::string body = in->HealthJson(&status);
      const auto wait = req.params.find("wait_for_status");
      const int code = wait == req.params.end() ? 200 : HealthHttpStatus(status, wait->second);
      if (code == 400)
        return Answer(gen, fd, 400,
                      ErrorJson(RequestError{400, "illegal_argument_exception",
                                             "wait_for_status must be green, yellow or red, not '" + wait->second + "'"}),
                      kJsonType);
      return Answer(gen, fd, code, std::move(body), kJsonType);
    }
    if (req.path == "/stats" && get) return Answer(gen, fd, 200, in->StatsJson(), kJsonType);
    if (req.path == "/" && get) return Answer(gen, fd, 200, StatusPageHtml(), kHtmlType);
    Answer(gen, fd, 404, ErrorJson(RequestError{404, "not_found", NoRouteReason(m, req.path)}), kJsonType);
  } catch (const std::exception& e) {
    Answer(gen, fd, 500, ErrorJson(RequestError{500, "internal_error", e.what()}), kJsonType);
  }
}

void HttpLoops::Loop::RefuseAuth(Conn& c, int status) {
  server_->auth_failures_[status == 401 ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
  if (IntegratorObserver* o = server_->integrator_->observer()) o->OnHttpAuthFailure(status);
  if (status == 401)
    Answer(c.gen, c.fd, 401,
           ErrorJson(RequestError{401, "security_exception",
                                  "missing authentication credentials: send Authorization: ApiKey base64(id:key)"}),
           kJsonType, "WWW-Authenticate: ApiKey\r\n");
  else
    Answer(c.gen, c.fd, 403,
           ErrorJson(RequestError{403, "security_exception", "unable to authenticate with the API key given"}),
           kJsonType);
}

void HttpLoops::Loop::CountRefused(const char* reason) {
  server_->connections_refused_.fetch_add(1, std::memory_order_relaxed);
  if (IntegratorObserver* o = server_->integrator_->observer()) o->OnHttpConnectionRefused(reason);
}

void HttpLoops::Loop::Answer(uint64_t gen, int fd, int status, std::string body, const char* type,
                             const char* extra_headers) {
  auto it = conns_.find(fd);
  if (it == conns_.end() || it->second.gen != gen || !it->second.busy) return;  // closed, or given up on
  Conn& c = it->second;
  c.busy = false;
  const bool last = !c.keep_alive || c.requests >= server_->options_.keep_alive_max_requests ||
                    server_->stopping_.load(std::memory_order_relaxed);
  std::string head;
  head.reserve(160);
  head += c.version_minor == 0 ? "HTTP/1.0 " : "HTTP/1.1 ";
  head += std::to_string(status);
  head += ' ';
  head += StatusText(status);
  head += "\r\nContent-Type: ";
  head += type;
  head += "\r\nContent-Length: ";
  head += std::to_string(body.size());
  if (extra_headers != nullptr) {
    head += "\r\n";
    head += extra_headers;
    head.resize(head.size() - 2);  // its last CRLF: the line below starts with one
  }
  if (last)
    head += "\r\nConnection: close";
  else if (c.version_minor == 0)
    head += "\r\nConnection: keep-alive";
  head += "\r\n\r\n";
  if (c.out_off == c.out.size()) {
    c.out.clear();
    c.out_off = 0;
  }
  c.out += head;
  if (!c.head) c.out += body;
  c.close_after = last;
  c.last_io = Clock::now();
  Flush(c);
  if (conns_.find(fd) == conns_.end()) return;
  // The next pipelined request, or what was left unread while this one ran (an answer given while
  // Process runs leaves that to its loop).
  if (c.in_process) return;
  if (c.read_blocked) {
    c.read_blocked = false;
    ReadAll(c);
    if (conns_.find(fd) == conns_.end()) return;
  }
  Process(c);
}

void HttpLoops::Loop::Flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = c.ssl ? TlsSend(c, c.out.data() + c.out_off, c.out.size() - c.out_off)
                            : ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
      c.last_io = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT (edge) says when
    Close(c.fd);  // the client went away
    return;
  }
  c.out.clear();
  c.out_off = 0;
  if (c.close_after && !c.lingering) {
    // Half-close, and read until the client closes (or for kIoTimeout): closing with its bytes
    // still unread would reset the connection, and the client might lose the answer. Over TLS a
    // close_notify goes first (best effort); what comes after it is read raw and dropped.
    if (c.ssl) {
      ERR_clear_error();
      (void)SSL_shutdown(c.ssl.get());
      ERR_clear_error();
    }
    ::shutdown(c.fd, SHUT_WR);
    c.lingering = true;
    c.in.clear();
    c.last_io = Clock::now();
    ReadAll(c);
  }
}

void HttpLoops::Loop::Sweep(Clock::time_point now) {
  const auto idle_limit = std::chrono::seconds(server_->options_.keep_alive_seconds);
  const bool stopping = server_->stopping_.load(std::memory_order_relaxed);
  std::vector<int> close;
  std::vector<std::pair<uint64_t, int>> give_up;
  std::vector<int> header_timeouts;
  for (auto& [fd, c] : conns_) {
    if (c.handshaking) {  // HTTPS: kIoTimeout from the accept, however its bytes trickle in
      if (stopping || now - c.last_io > kIoTimeout) close.push_back(fd);
      continue;
    }
    if (c.busy) {
      if (now - c.busy_since > kSearchGiveUp) give_up.emplace_back(c.gen, fd);
      continue;
    }
    if (c.lingering) {
      if (stopping || now - c.last_io > kIoTimeout) close.push_back(fd);
    } else if (c.out_off < c.out.size()) {
      if (now - c.last_io > kIoTimeout) close.push_back(fd);  // the client stopped reading
    } else if (c.in.empty()) {
      if (stopping || now - c.last_io > idle_limit) close.push_back(fd);  // idle keep-alive
    } else if (c.awaiting_headers && now - c.request_since > kHeaderTimeout) {
      header_timeouts.push_back(fd);  // headers trickling in (slowloris)
    } else if (now - c.last_io > kIoTimeout) {
      close.push_back(fd);  // a request left incomplete
    }
  }
  for (int fd : close) Close(fd);
  for (int fd : header_timeouts) {
    Close(fd);
    CountRefused("header_timeout");
  }
  for (auto [gen, fd] : give_up)
    Answer(gen, fd, 500,
           ErrorJson(RequestError{500, "internal_error", "the search's fan-out did not complete"}), kJsonType);
}

void HttpLoops::Loop::RunMailbox() {
  std::vector<std::function<void()>> items;
  {
    std::lock_guard lock(mailbox_->mu);
    items.swap(mailbox_->items);
  }
  for (auto& fn : items) fn();
}

bool HttpLoops::Loop::Drained() const {
  for (const auto& [fd, c] : conns_)
    if (c.busy || c.out_off < c.out.size()) return false;
  return true;
}

void HttpLoops::Loop::Run() {
  SetThreadName(index_ == 0 ? "http-loop" : ("http-loop-" + std::to_string(index_)).c_str());
  server_->integrator_->JoinLane(index_);
  epoll_event events[kMaxEvents];
  auto next_sweep = Clock::now() + kSweepEvery;
  std::optional<Clock::time_point> drain_until;
  while (true) {
    if (server_->stopping_.load(std::memory_order_relaxed)) {
      if (listening_) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        listening_ = false;
        drain_until = Clock::now() + kDrainFor;
        Sweep(Clock::now());  // closes the idle connections
      }
      RunMailbox();
      if (Drained() || Clock::now() >= *drain_until) break;
    }
    // Idle only after the mailbox's last look (wake_fd.hpp).
    mailbox_->wake.SetIdle(true);
    bool pending;
    {
      std::lock_guard lock(mailbox_->mu);
      pending = !mailbox_->items.empty();
    }
    const int timeout_ms = pending ? 0 : static_cast<int>((accept_paused_until_ ? kAcceptPause : kSweepEvery).count());
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    mailbox_->wake.SetIdle(false);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == mailbox_->wake.fd()) {
        mailbox_->wake.Drain();
      } else if (fd == listen_fd_) {
        if (listening_) Accept();
      } else {
        auto it = conns_.find(fd);
        if (it != conns_.end()) OnEvent(it->second, events[i].events);
      }
    }
    RunMailbox();
    const auto now = Clock::now();
    if (now >= next_sweep) {
      Sweep(now);
      next_sweep = now + kSweepEvery;
    }
    if (accept_paused_until_ && now >= *accept_paused_until_ && listening_) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLEXCLUSIVE;
      ev.data.fd = listen_fd_;
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) == 0) accept_paused_until_.reset();
      else accept_paused_until_ = now + kAcceptPause;
    }
  }
  {
    std::lock_guard lock(mailbox_->mu);
    mailbox_->closed = true;  // later posts are dropped
  }
  RunMailbox();  // what came before: connections handed over (closed below) and answers
  for (auto& [fd, c] : conns_) ::close(fd);
  server_->open_.fetch_sub(conns_.size(), std::memory_order_relaxed);
  conns_.clear();
  server_->integrator_->LeaveLane();
}

HttpLoops::HttpLoops(Integrator* integrator, const HttpFrontOptions& options)
    : integrator_(integrator), options_(options) {}

HttpLoops::~HttpLoops() {
  Stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Status HttpLoops::Bind() {
  // A client gone away must be an error return, not SIGPIPE: OpenSSL's writes go through
  // SocketBioWrite's send(MSG_NOSIGNAL), and SIGPIPE is ignored too for any other write to a
  // socket (search-integrator ignores it already: core/signals.hpp).
  if (options_.tls) std::signal(SIGPIPE, SIG_IGN);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  const std::string service = std::to_string(options_.port);
  if (const int rc = ::getaddrinfo(options_.host.c_str(), service.c_str(), &hints, &res); rc != 0)
    return Status::IOError("cannot bind HTTP on " + where + ": " + ::gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR only: SO_REUSEPORT would let a second integrator bind the same port and
    // silently share its traffic.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, kHttpListenBacklog) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
    break;
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) return Status::IOError("cannot bind HTTP on " + where + ": " + why);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
    port_ = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  const size_t n = static_cast<size_t>(std::max(1, options_.loops));
  for (size_t i = 0; i < n; ++i) {
    auto loop = std::make_unique<Loop>(this, i);
    SEARCH_RETURN_IF_ERROR(loop->Open(listen_fd_));
    loops_.push_back(std::move(loop));
  }
  return Status::Ok();
}

void HttpLoops::Listen() {
  if (loops_.empty()) return;
  std::vector<std::thread> threads;
  for (size_t i = 1; i < loops_.size(); ++i) threads.emplace_back([this, i] { loops_[i]->Run(); });
  loops_[0]->Run();
  for (auto& t : threads) t.join();
}

void HttpLoops::Stop() {
  if (stopping_.exchange(true)) return;
  for (auto& l : loops_) l->Wake();
}

}  // namespace search
