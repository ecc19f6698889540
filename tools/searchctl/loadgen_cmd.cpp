// searchctl loadgen: open-loop load on the integrator's HTTP API, Poisson arrivals at --rate per
// second (Ding et al. 2009 §9, Fig. 7). Arrival times are drawn up front; a dispatcher releases
// each query at its time whether or not earlier ones have finished, and --connections workers
// send them (GET /search?q=..&mode=..&k=..&timeout_ms=deadline). A query's latency runs from its
// scheduled arrival to its answer, so time spent waiting for a free connection counts (no
// coordinated omission). A query misses its deadline when it is answered after it, with an
// error, or partially (_shards.failed > 0 or timed_out). The first --warmup seconds of arrivals
// are sent but not measured. One JSON line summarises.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "args.hpp"
#include "common.hpp"

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
  bool ok = false, partial = false, error = false;
  int http = 0;  // the HTTP status; 0: no answer (connection error or read timeout)
};

std::string UrlEncode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// "http://HOST:PORT" -> host, port.
Status ParseUrl(const std::string& url, std::string* host, int* port) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return Status::InvalidArgument("--url must start with http://: " + url);
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

}  // namespace

CLI::App* AddLoadgenCommand(CLI::App& app, LoadgenArgs* a) {
  CLI::App* cmd = app.add_subcommand("loadgen", "Open-loop Poisson load on the integrator's HTTP API");
  cmd->footer(
      "Prints one JSON line: target rate, measured queries, achieved rate, ok/partial/errors, deadline\n"
      "misses (late, failed or partial answers) and latency mean/p50/p95/p99/max in microseconds from\n"
      "each query's scheduled arrival; send_wait_mean_us and send_wait_p99_us: how long arrivals waited for a\n"
      "free connection (the load generator's own queue, when every connection is busy).");
  cmd->add_option("--url", a->url, "the integrator, http://HOST:PORT")->capture_default_str();
  cmd->add_option("--queries", a->queries, "file of queries, one per line")->required();
  cmd->add_option("--mode", a->mode, "and | or | andor")->capture_default_str();
  cmd->add_option("--k", a->k, "hits per query (1..10000)")->capture_default_str();
  cmd->add_option("--rate", a->rate, "mean arrivals per second")->capture_default_str()->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--seconds", a->seconds, "measured arrivals span")->capture_default_str()->check(CLI::Range(0.0, 1e5));
  cmd->add_option("--warmup", a->warmup, "unmeasured arrivals before")->capture_default_str()->check(CLI::Range(0.0, 1e5));
  cmd->add_option("--deadline-ms", a->deadline_ms, "per-query deadline (sent as timeout_ms)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600000}));
  cmd->add_option("--connections", a->connections, "concurrent HTTP connections")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  cmd->add_option("--seed", a->seed, "arrival times and query order")->capture_default_str();
  cmd->add_option("--trace", a->trace,
                  "also write every query to this CSV: arrival_s (its scheduled arrival, in seconds from the "
                  "run's start), latency_ms, http (0: no answer), ok, measured, query (its number among the "
                  "query file's non-blank lines, from 1)");
  return cmd;
}

int RunLoadgen(const LoadgenArgs& a) {
  auto mode = CheckModeAndK(a.mode, a.k);
  if (!mode.ok()) return ReportError("loadgen", mode.status(), kExitUsage);
  std::string host;
  int port = 0;
  if (Status st = ParseUrl(a.url, &host, &port); !st.ok()) return ReportError("loadgen", st, kExitUsage);
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
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(50);
  size_t next_query = rng() % queries->size();
  for (double t = gap(rng); t < a.warmup + a.seconds; t += gap(rng)) {
    Arrival x;
    x.query = next_query;
    next_query = (next_query + 1) % queries->size();
    x.at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
    x.measured = t >= a.warmup;
    arrivals.push_back(x);
  }

  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> ready;  // GUARDED_BY(mu): arrivals released, not yet taken
  bool done = false;         // GUARDED_BY(mu)
  std::vector<Sample> samples(arrivals.size());
  std::atomic<bool> connect_failed{false};
  std::atomic<uint64_t> stale_retries{0};
  const std::string base = std::string("/search?mode=") + std::string(QueryModeName(*mode)) +
                           "&k=" + std::to_string(a.k) + "&timeout_ms=" + std::to_string(a.deadline_ms) + "&q=";
  const auto deadline = std::chrono::milliseconds(a.deadline_ms);

  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < a.connections; ++w) {
    workers.emplace_back([&] {
      httplib::Client client(host, port);
      client.set_keep_alive(true);
      // A load generator's own sends must not wait on Nagle (a request written in pieces, or a
      // resend, would sit behind the server's delayed ACK and count as the server's latency).
      client.set_tcp_nodelay(true);
      client.set_connection_timeout(std::chrono::seconds(5));
      client.set_read_timeout(std::chrono::milliseconds(a.deadline_ms * 4 + 5000));
      for (;;) {
        size_t i = 0;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done || !ready.empty(); });
          if (ready.empty()) return;
          i = ready.front();
          ready.pop_front();
        }
        Sample& s = samples[i];
        const std::string path = base + UrlEncode((*queries)[arrivals[i].query]);
        const auto sent = Clock::now();
        s.send_wait_us = std::max(0.0, std::chrono::duration<double, std::micro>(sent - arrivals[i].at).count());
        auto res = client.Get(path);
        // A kept-alive connection the server has just closed (its idle timeout) fails at once;
        // like any HTTP client, resend the (idempotent) GET once on a fresh connection.
        if (!res && Clock::now() - sent < std::chrono::milliseconds(100)) {
          stale_retries.fetch_add(1);
          res = client.Get(path);
        }
        const auto end = Clock::now();
        s.latency_us = std::chrono::duration<double, std::micro>(end - arrivals[i].at).count();
        if (res) s.http = res->status;
        if (!res) {
          s.error = true;
          if (res.error() == httplib::Error::Connection) connect_failed = true;
          continue;
        }
        if (res->status != 200) {
          s.error = true;
          continue;
        }
        const auto body = nlohmann::json::parse(res->body, nullptr, false);
        if (body.is_discarded()) {
          s.error = true;
          continue;
        }
        const auto shards = body.find("_shards");
        s.partial = body.value("timed_out", false) ||
                    (shards != body.end() && shards->is_object() && shards->value("failed", 0) > 0);
        s.ok = !s.partial && end - arrivals[i].at <= deadline;
      }
    });
  }
  for (size_t i = 0; i < arrivals.size(); ++i) {
    std::this_thread::sleep_until(arrivals[i].at);
    {
      std::lock_guard<std::mutex> lock(mu);
      ready.push_back(i);
    }
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& t : workers) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> lat, answered_lat, rejected_lat, send_wait;
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
  }
  std::sort(lat.begin(), lat.end());
  std::sort(send_wait.begin(), send_wait.end());
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
  out["stale_connection_retries"] = stale_retries.load();
  out["answered_p99_us"] = Percentile(answered_lat, 0.99);
  out["rejected"] = rejected_lat.size();
  out["rejected_p50_us"] = Percentile(rejected_lat, 0.50);
  out["rejected_p99_us"] = Percentile(rejected_lat, 0.99);
  // The load generator's own queue: arrivals that found every connection busy waited here, and
  // that wait is part of their latency (a real client would have queued too, but elsewhere).
  out["send_wait_mean_us"] = send_wait.empty() ? 0.0 : send_wait_sum / static_cast<double>(send_wait.size());
  out["send_wait_p99_us"] = Percentile(send_wait, 0.99);
  std::cout << out.dump() << std::endl;
  // The trace after the summary: a trace that cannot be written fails the command without losing
  // the summary.
  if (trace.is_open()) {
    trace << "arrival_s,latency_ms,http,ok,measured,query\n";
    trace.setf(std::ios::fixed);
    for (size_t i = 0; i < arrivals.size(); ++i) {
      const Sample& s = samples[i];
      trace.precision(6);
      trace << std::chrono::duration<double>(arrivals[i].at - start).count() << ',';
      trace.precision(3);
      trace << s.latency_us / 1e3 << ',' << s.http << ',' << (s.ok ? 1 : 0) << ',' << (arrivals[i].measured ? 1 : 0)
            << ',' << arrivals[i].query + 1 << '\n';
    }
    trace.flush();
    if (!trace) {
      return ReportError("loadgen", Status::IOError("cannot write the trace to " + a.trace), kExitFailure);
    }
  }
  if (connect_failed && ok == 0) {
    return ReportError("loadgen", Status::Unavailable("cannot connect to " + a.url), kExitFailure);
  }
  return kExitOk;
}

}  // namespace search::cli
