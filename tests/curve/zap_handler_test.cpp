// curve/zap_handler.hpp against real sockets in one process: a ROUTER that is a CURVE server with
// the handler; DEALERs with a listed key, an unknown key, no CURVE at all, and the wrong server
// key. Only the listed one is answered; each refusal is reported once with its reason.
#include "curve/zap_handler.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <mutex>
#include <thread>

#include "curve/curve_keys.hpp"

namespace search::curve {
namespace {

using Clock = std::chrono::steady_clock;

struct Server {
  zmq::context_t ctx{1};
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::unique_ptr<ZapHandler> zap;
  std::mutex mu;
  std::array<int, kRefusalReasons> refusals{};
  std::string endpoint;
  KeyPair keys;
  std::thread echo;
  std::atomic<bool> stop{false};

  explicit Server(const std::vector<std::string>& allowed) {
    keys = *GenerateKeyPair();
    router.set(zmq::sockopt::linger, 0);
    router.set(zmq::sockopt::curve_server, true);
    router.set(zmq::sockopt::curve_secretkey, keys.secret_key);
    router.set(zmq::sockopt::zap_domain, "search");
    auto z = ZapHandler::Start(ctx, router, allowed, [this](RefusalReason r) {
      std::lock_guard lock(mu);
      ++refusals[static_cast<size_t>(r)];
    });
    EXPECT_TRUE(z.ok()) << z.status().ToString();
    zap = std::move(z).value();
    router.bind("tcp://127.0.0.1:*");
    endpoint = router.get(zmq::sockopt::last_endpoint);
    echo = std::thread([this] {  // answers [id][payload] with [id][payload]
      while (!stop.load()) {
        zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, std::chrono::milliseconds(50));
        if ((item.revents & ZMQ_POLLIN) == 0) continue;
        zmq::message_t id, body;
        (void)router.recv(id);
        (void)router.recv(body);
        router.send(id, zmq::send_flags::sndmore);
        router.send(body, zmq::send_flags::none);
      }
      router.close();
    });
  }
  ~Server() {
    stop = true;
    echo.join();
    zap->Stop();
  }
  int Refusals(RefusalReason r) {
    std::lock_guard lock(mu);
    return refusals[static_cast<size_t>(r)];
  }
  // Waits (generously) until the refusals of `reasons` together exceed `before`.
  bool WaitRefusals(std::initializer_list<RefusalReason> reasons, int before) {
    for (auto end = Clock::now() + std::chrono::seconds(20); Clock::now() < end;) {
      if (Sum(reasons) > before) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  int Sum(std::initializer_list<RefusalReason> reasons) {
    int n = 0;
    for (RefusalReason r : reasons) n += Refusals(r);
    return n;
  }
};

// A DEALER that sends "ping" and waits up to `wait` for the echo.
bool Echoed(zmq::context_t& ctx, const std::string& endpoint, const KeyPair* client, const std::string& server_key,
            std::chrono::milliseconds wait) {
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  if (client != nullptr) {
    d.set(zmq::sockopt::curve_serverkey, server_key);
    d.set(zmq::sockopt::curve_publickey, client->public_key);
    d.set(zmq::sockopt::curve_secretkey, client->secret_key);
  }
  d.connect(endpoint);
  (void)d.send(zmq::str_buffer("ping"), zmq::send_flags::dontwait);
  zmq::pollitem_t item{d.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, wait);
  if ((item.revents & ZMQ_POLLIN) == 0) return false;
  zmq::message_t m;
  return d.recv(m, zmq::recv_flags::dontwait) && m.to_string() == "ping";
}

TEST(ZapHandlerTest, ListedClientIsAnsweredOthersGetNothingAndAreCounted) {
  ASSERT_TRUE(CurveAvailable());
  const KeyPair listed = *GenerateKeyPair();
  const KeyPair unknown = *GenerateKeyPair();
  Server server({listed.public_key});
  zmq::context_t ctx{1};
  EXPECT_TRUE(Echoed(ctx, server.endpoint, &listed, server.keys.public_key, std::chrono::seconds(20)));
  EXPECT_EQ(server.zap->accepted(), 1u);
  EXPECT_EQ(server.zap->refused(), 0u);

  EXPECT_FALSE(Echoed(ctx, server.endpoint, &unknown, server.keys.public_key, std::chrono::seconds(2)));
  EXPECT_TRUE(server.WaitRefusals({RefusalReason::kUnknownKey}, 0));

  // A plain peer: no_curve when the server sees the mechanism mismatch first, bad_handshake
  // (EPIPE/ECONNRESET) when the peer saw it first and hung up.
  const int plain_before = server.Sum({RefusalReason::kNoCurve, RefusalReason::kBadHandshake});
  EXPECT_FALSE(Echoed(ctx, server.endpoint, nullptr, "", std::chrono::seconds(2)));
  EXPECT_TRUE(server.WaitRefusals({RefusalReason::kNoCurve, RefusalReason::kBadHandshake}, plain_before));

  const int wrong_before = server.Refusals(RefusalReason::kBadHandshake);
  const KeyPair other_server = *GenerateKeyPair();  // the client expects another server
  EXPECT_FALSE(Echoed(ctx, server.endpoint, &listed, other_server.public_key, std::chrono::seconds(2)));
  EXPECT_TRUE(server.WaitRefusals({RefusalReason::kBadHandshake}, wrong_before));
  EXPECT_EQ(server.Refusals(RefusalReason::kUnknownKey), 1) << "the wrong server key is not a ZAP refusal";

  // Still serving the listed client after all that.
  EXPECT_TRUE(Echoed(ctx, server.endpoint, &listed, server.keys.public_key, std::chrono::seconds(20)));
  EXPECT_GE(server.zap->accepted(), 2u);
}

TEST(ZapHandlerTest, BadAllowedKeyIsRefusedAtStart) {
  zmq::context_t ctx{1};
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  auto z = ZapHandler::Start(ctx, router, {"not-a-key"}, nullptr);
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().code(), StatusCode::kInvalidArgument);
}

TEST(ZapHandlerTest, SecondHandlerInOneContextIsRefused) {
  zmq::context_t ctx{1};
  zmq::socket_t a(ctx, zmq::socket_type::router), b(ctx, zmq::socket_type::router);
  a.set(zmq::sockopt::linger, 0);
  b.set(zmq::sockopt::linger, 0);
  const std::string key = GenerateKeyPair()->public_key;
  auto first = ZapHandler::Start(ctx, a, {key}, nullptr);
  ASSERT_TRUE(first.ok());
  auto second = ZapHandler::Start(ctx, b, {key}, nullptr);
  EXPECT_FALSE(second.ok());
  a.close();
  b.close();
  (*first)->Stop();
}

}  // namespace
}  // namespace search::curve
