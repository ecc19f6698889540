// Metrics: registration of every family and the exposer (see metrics/metrics.hpp).
#include "metrics/metrics.hpp"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/text_serializer.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <thread>

#include "metrics/families.hpp"

namespace search {
namespace {

using prometheus::Labels;

constexpr std::array<QueryMode, 3> kModes = {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr};

// Opens and closes a TCP connection to host:port (IPv4 literal or "localhost"); errors ignored.
void PokeTcp(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, h.c_str(), &addr.sin_addr) != 1) return;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::close(fd);
}

}  // namespace

// The exposer's view of the registry: runs the scrape hooks, then collects.
class Metrics::HookedCollectable : public prometheus::Collectable {
 public:
  explicit HookedCollectable(Metrics* owner) : owner_(owner) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    owner_->RunScrapeHooks();
    return owner_->registry_->Collect();
  }

 private:
  Metrics* owner_;
};

RequestStatus ToRequestStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return RequestStatus::kOk;
    case StatusCode::kInvalidArgument: return RequestStatus::kInvalidArgument;
    case StatusCode::kNotFound: return RequestStatus::kNotFound;
    case StatusCode::kCorruption: return RequestStatus::kCorruption;
    case StatusCode::kIOError: return RequestStatus::kIOError;
    case StatusCode::kUnavailable: return RequestStatus::kUnavailable;
    case StatusCode::kDeadlineExceeded: return RequestStatus::kDeadlineExceeded;
    case StatusCode::kResourceExhausted: return RequestStatus::kResourceExhausted;
    case StatusCode::kAlreadyExists:
    case StatusCode::kInternal: return RequestStatus::kInternal;
  }
  return RequestStatus::kInternal;
}

std::string_view RequestStatusLabel(RequestStatus s) {
  static constexpr std::array<std::string_view, kNumRequestStatus> kNames = {
      "ok", "partial", "invalid_argument", "not_found", "corruption", "io_error",
      "unavailable", "deadline_exceeded", "resource_exhausted", "internal"};
  const auto i = static_cast<size_t>(s);
  return i < kNames.size() ? kNames[i] : "internal";
}

std::string_view BadRequestReasonLabel(BadRequestReason r) {
  static constexpr std::array<std::string_view, kNumBadRequestReasons> kNames = {
      "malformed", "unsupported_version", "invalid_argument", "bad_frames", "unexpected_message",
      "http_bad_parameter"};
  const auto i = static_cast<size_t>(r);
  return i < kNames.size() ? kNames[i] : "malformed";
}

std::string_view ModeLabel(QueryMode mode) {
  switch (mode) {
    case QueryMode::kAnd: return "and";
    case QueryMode::kOr: return "or";
    case QueryMode::kAndOr: return "andor";
  }
  return "and";
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  double v = 50e-6;
  for (int i = 0; i < 18; ++i, v *= 2) b.push_back(v);
  return b;
}


Metrics::Metrics(std::string component)
    : component_(std::move(component)), registry_(std::make_shared<prometheus::Registry>()) {
  collectable_ = std::make_shared<HookedCollectable>(this);
  auto& r = *registry_;
  const Labels comp{{"component", component_}};
  buckets_ = LatencyBuckets();
  const auto& buckets = buckets_;

  auto& requests = CounterFamily(r, families::kRequests);
  auto& duration = HistogramFamily(r, families::kRequestDuration);
  for (QueryMode m : kModes) {
    for (size_t s = 0; s < kNumRequestStatus; ++s) {
      requests_[Idx(m)][s] = &requests.Add({{"component", component_},
                                            {"mode", std::string(ModeLabel(m))},
                                            {"status", std::string(RequestStatusLabel(static_cast<RequestStatus>(s)))}});
    }
    request_duration_[Idx(m)] =
        &duration.Add({{"component", component_}, {"mode", std::string(ModeLabel(m))}}, buckets);
  }
  inflight_ = &GaugeFamily(r, families::kInflight).Add(comp);
  deadline_exceeded_ = &CounterFamily(r, families::kDeadlineExceeded).Add(comp);
  auto& bad = CounterFamily(r, families::kBadRequests);
  for (size_t i = 0; i < kNumBadRequestReasons; ++i) {
    bad_requests_[i] = &bad.Add(
        {{"component", component_}, {"reason", std::string(BadRequestReasonLabel(static_cast<BadRequestReason>(i)))}});
  }

  start_time_ = &GaugeFamily(r, families::kProcessStartTime).Add({});
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  start_time_->Set(std::chrono::duration<double>(now).count());
}

Metrics::~Metrics() { StopExposer(); }

Status Metrics::StartExposer(const std::string& host_port) {
  if (exposer_) return Status::InvalidArgument("metrics exposer already started");
  // The host to poke when stopping (StopExposer): a wildcard bind is reachable on loopback.
  exposer_host_ = host_port.substr(0, host_port.rfind(':'));
  if (exposer_host_.empty() || exposer_host_ == "0.0.0.0" || exposer_host_ == "*") exposer_host_ = "127.0.0.1";
  try {
    // One serving thread is plenty for scrapes.
    exposer_ = std::make_unique<prometheus::Exposer>(host_port, 1);
    exposer_->RegisterCollectable(collectable_, "/metrics");
  } catch (const std::exception& e) {
    exposer_.reset();
    return Status::IOError("cannot serve metrics on " + host_port + ": " + e.what());
  }
  return Status::Ok();
}

void Metrics::StopExposer() {
  if (!exposer_) return;
  // civetweb's listener polls with a 2 s timeout and checks its stop flag only between polls, so
  // a plain stop takes up to 2 s. Connecting to it while it stops wakes the poll at once.
  const int port = exposer_port();
  std::atomic<bool> done{false};
  std::thread waker;
  if (port > 0) {
    waker = std::thread([&done, port, host = exposer_host_] {
      while (!done.load()) {
        PokeTcp(host, port);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  exposer_.reset();
  done = true;
  if (waker.joinable()) waker.join();
}

int Metrics::exposer_port() const {
  if (!exposer_) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

int Metrics::AddScrapeHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(hooks_mu_);
  const int id = next_hook_id_++;
  hooks_.emplace(id, std::move(hook));
  return id;
}

void Metrics::RemoveScrapeHook(int id) {
  // Taking run_hooks_mu_ waits for a hook run in progress, so after this returns the removed hook
  // no longer runs and whatever it captured may die.
  std::lock_guard<std::mutex> run_lock(run_hooks_mu_);
  std::lock_guard<std::mutex> lock(hooks_mu_);
  hooks_.erase(id);
}

void Metrics::RunScrapeHooks() {
  std::lock_guard<std::mutex> run_lock(run_hooks_mu_);
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(hooks_mu_);
    for (auto& [id, h] : hooks_) hooks.push_back(h);
  }
  for (auto& h : hooks) h();
}

std::string Metrics::SerializeText() {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(collectable_->Collect());
}

}  // namespace search
