// ZapHandler (see curve/zap_handler.hpp): ZAP requests and handshake-failure events, one thread.
#include "curve/zap_handler.hpp"

#include <array>
#include <chrono>
#include <cstring>

#include "core/log.hpp"
#include "core/thread_name.hpp"
#include "curve/curve_keys.hpp"

namespace search::curve {
namespace {

const Logger& Log() {
  static const Logger kLog("curve");
  return kLog;
}

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr int kHandshakeFailures =
    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

std::string Frame(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* RefusalReasonName(RefusalReason reason) {
  switch (reason) {
    case RefusalReason::kUnknownKey:
      return "unknown_key";
    case RefusalReason::kNoCurve:
      return "no_curve";
    case RefusalReason::kBadHandshake:
      return "bad_handshake";
  }
  return "bad_handshake";
}

Result<std::unique_ptr<ZapHandler>> ZapHandler::Start(zmq::context_t& ctx, zmq::socket_t& watched,
                                                      const std::vector<std::string>& allowed, RefusalFn on_refusal) {
  std::set<std::string> keys;
  for (const std::string& k : allowed) {
    if (!IsZ85Key(k)) {
      std::string msg = "'";  // built by appends: GCC 12's -Wrestrict misfires on "'" + substr
      msg += k.substr(0, 48);
      msg += "' is not a Z85 CURVE public key";
      return Status::InvalidArgument(msg);
    }
    std::array<uint8_t, 32> bin{};
    zmq_z85_decode(bin.data(), k.c_str());
    keys.emplace(reinterpret_cast<const char*>(bin.data()), bin.size());
  }
  try {
    zmq::socket_t zap(ctx, zmq::socket_type::rep);
    zap.set(zmq::sockopt::linger, 0);
    zap.bind(kZapEndpoint);
    const std::string mon = "inproc://curve-monitor-" + std::to_string(reinterpret_cast<uintptr_t>(watched.handle()));
    if (zmq_socket_monitor(watched.handle(), mon.c_str(), kHandshakeFailures) != 0)
      return Status::Internal(std::string("zmq_socket_monitor: ") + zmq_strerror(zmq_errno()));
    zmq::socket_t monitor(ctx, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(mon);
    std::unique_ptr<ZapHandler> h(
        new ZapHandler(std::move(zap), std::move(monitor), std::move(keys), std::move(on_refusal)));
    h->thread_ = std::thread([p = h.get()] {
      SetThreadName("curve-zap");
      p->Run();
    });
    return h;
  } catch (const zmq::error_t& e) {
    return Status::IOError(std::string("cannot start the ZAP handler on ") + kZapEndpoint + ": " + e.what());
  }
}

ZapHandler::ZapHandler(zmq::socket_t zap, zmq::socket_t monitor, std::set<std::string> allowed, RefusalFn on_refusal)
    : zap_(std::move(zap)),
      monitor_(std::move(monitor)),
      allowed_(std::move(allowed)),
      on_refusal_(std::move(on_refusal)) {}

ZapHandler::~ZapHandler() {
  Stop();
}

void ZapHandler::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ZapHandler::Run() {
  std::array<zmq::pollitem_t, 2> items = {zmq::pollitem_t{zap_.handle(), 0, ZMQ_POLLIN, 0},
                                          zmq::pollitem_t{monitor_.handle(), 0, ZMQ_POLLIN, 0}};
  while (!stop_.load()) {
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
      if ((items[0].revents & ZMQ_POLLIN) != 0) Answer();
      if ((items[1].revents & ZMQ_POLLIN) != 0) DrainMonitor();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      if (e.num() != EINTR) Log().Error() << "ZAP handler: " << e.what();
    }
  }
  zap_.close();
  monitor_.close();
}

// RFC 27: [version "1.0"][request id][domain][address][identity][mechanism][credentials...];
// the reply: [version][request id][status code][status text][user id][metadata].
void ZapHandler::Answer() {
  std::vector<zmq::message_t> parts;
  for (bool more = true; more;) {
    zmq::message_t m;
    if (!zap_.recv(m, zmq::recv_flags::dontwait)) break;
    more = m.more();
    if (parts.size() < 16) parts.push_back(std::move(m));
  }
  if (parts.empty()) return;  // nothing received: a REP socket must not reply
  std::string request_id = parts.size() > 1 ? Frame(parts[1]) : std::string();
  const std::string address = parts.size() > 3 ? Frame(parts[3]) : std::string("?");
  const std::string mechanism = parts.size() > 5 ? Frame(parts[5]) : std::string();
  std::string code = "400", text = "unknown client key";
  if (parts.size() < 6 || Frame(parts[0]) != "1.0") {
    code = "500";
    text = "malformed ZAP request";
  } else if (mechanism == "CURVE" && parts.size() == 7 && parts[6].size() == 32 &&
             allowed_.count(Frame(parts[6])) > 0) {
    code = "200";
    text = "OK";
  }
  const std::array<std::string, 6> reply = {"1.0", request_id, code, text, "", ""};
  for (size_t i = 0; i < reply.size(); ++i)
    zap_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  if (code == "200") {
    accepted_.fetch_add(1);
    Log().Debug() << "accepted a CURVE peer from " << address;
  } else if (mechanism != "CURVE") {
    Refuse(RefusalReason::kNoCurve, "a " + mechanism + " peer from " + address);
  } else {
    Refuse(RefusalReason::kUnknownKey, "a CURVE peer from " + address + " with an unknown client key");
  }
}

void ZapHandler::DrainMonitor() {
  for (;;) {
    zmq::message_t ev, addr;
    if (!monitor_.recv(ev, zmq::recv_flags::dontwait)) return;
    if (ev.more()) (void)monitor_.recv(addr, zmq::recv_flags::dontwait);
    if (ev.size() < 6) continue;
    uint16_t event = 0;
    uint32_t value = 0;
    std::memcpy(&event, ev.data(), sizeof(event));
    std::memcpy(&value, static_cast<const char*>(ev.data()) + 2, sizeof(value));
    const std::string where = addr.size() > 0 ? " on " + Frame(addr) : std::string();
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) continue;  // the ZAP refusal, counted in Answer()
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
      Refuse(RefusalReason::kNoCurve, "a peer without CURVE" + where);
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      char code[16];
      std::snprintf(code, sizeof(code), "0x%08x", value);
      Refuse(RefusalReason::kBadHandshake,
             std::string("a failed handshake (") +
                 (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "protocol error " : "errno ") + code + ")" + where);
    }
  }
}

void ZapHandler::Refuse(RefusalReason reason, std::string_view why) {
  refused_.fetch_add(1);
  if (on_refusal_) on_refusal_(reason);
  const int64_t now = NowMs();
  if (last_warn_ms_ >= 0 && now - last_warn_ms_ < 1000) {
    ++unlogged_;
    return;
  }
  Log().Warn() << "refused " << why << " (" << RefusalReasonName(reason) << ")"
               << (unlogged_ > 0 ? " and " + std::to_string(unlogged_) + " more since the last line" : std::string());
  last_warn_ms_ = now;
  unlogged_ = 0;
}

}  // namespace search::curve
