// What the integrator's tests against FakeNodes share: options for a fast test cluster (short
// timeout, ping interval and reconnect), waiting for a green health, and search parameters.
// Thread-safety: pure functions; WaitReady only reads the integrator's health.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "integrator/integrator.hpp"

namespace search::testing {

// An integrator over `shards` (endpoints) with a 1 s default timeout, 50 ms pings and 20 ms
// reconnects.
inline IntegratorOptions Options(std::vector<std::string> shards) {
  using namespace std::chrono_literals;
  IntegratorOptions o;
  o.shards = std::move(shards);
  o.default_timeout_ms = 1000;
  o.fanout.ping_interval = 50ms;
  o.fanout.reconnect_ivl_ms = 20;
  return o;
}

// True once the integrator's health is green, false when it is not within `limit`.
inline bool WaitReady(const Integrator& in, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (nlohmann::json::parse(in.HealthJson())["status"] == "green") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

inline SearchParams Params(std::string q, QueryMode mode = QueryMode::kOr, uint32_t k = 10) {
  SearchParams p;
  p.q = std::move(q);
  p.mode = mode;
  p.k = k;
  return p;
}

}  // namespace search::testing
