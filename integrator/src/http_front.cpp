#include "integrator/http_front.hpp"

#include <httplib.h>

namespace search {
namespace {

constexpr const char* kJson = "application/json";

void Reply(httplib::Response& res, const HttpReply& r) {
  res.status = r.status;
  res.set_content(r.body, kJson);
}

}  // namespace

struct HttpFront::Impl {
  Impl(Integrator* in, HttpFrontOptions o) : integrator(in), options(std::move(o)) {}
  Integrator* integrator;
  HttpFrontOptions options;
  httplib::Server server;
};

HttpFront::HttpFront(Integrator* integrator, HttpFrontOptions options)
    : impl_(std::make_unique<Impl>(integrator, std::move(options))) {
  auto& s = impl_->server;
  Integrator* in = integrator;
  const int threads = impl_->options.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(kMaxBodyBytes);
  s.set_keep_alive_timeout(impl_->options.keep_alive_seconds);
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);

  s.Get("/search", [in](const httplib::Request& req, httplib::Response& res) {
    Reply(res, in->HandleSearch(ParseSearchQuery(req.params)));
  });
  s.Post("/search", [in](const httplib::Request& req, httplib::Response& res) {
    // Query-string parameters on a POST would be ambiguous next to the body: refuse them. (Not
    // req.params: httplib also fills it from form-encoded bodies, which is what curl -d sends.)
    if (req.target.find('?') != std::string::npos) {
      ParsedSearch bad;
      bad.error = RequestError{400, "illegal_argument_exception",
                               "POST /search takes its parameters in the JSON body, not the query string"};
      Reply(res, in->HandleSearch(bad));
      return;
    }
    Reply(res, in->HandleSearch(ParseSearchBody(req.body)));
  });
  s.Get("/health", [in](const httplib::Request&, httplib::Response& res) {
    res.set_content(in->HealthJson(), kJson);
  });
  s.Get("/stats", [in](const httplib::Request&, httplib::Response& res) {
    res.set_content(in->StatsJson(), kJson);
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(StatusPageHtml(), "text/html; charset=utf-8");
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already answered (400, 429, 503)
    std::string type = "http_error", reason = "HTTP " + std::to_string(res.status);
    if (res.status == 404) {
      type = "not_found";
      reason = "no route for " + req.method + " " + req.path.substr(0, 128) +
               " (GET/POST /search, GET /health, GET /stats, GET /)";
    } else if (res.status == 413) {
      type = "content_too_long";
      reason = "request body larger than " + std::to_string(kMaxBodyBytes) + " bytes";
    } else if (res.status == 414) {
      type = "uri_too_long";
      reason = "request URI too long: send long queries with POST /search";
    }
    res.set_content(ErrorJson(RequestError{res.status, type, reason}), kJson);
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
    res.set_content(ErrorJson(RequestError{500, "internal_error", what}), kJson);
  });
}

HttpFront::~HttpFront() { Stop(); }

Status HttpFront::Bind() {
  auto& o = impl_->options;
  if (o.port == 0) {
    bound_port_ = impl_->server.bind_to_any_port(o.host.c_str());
    if (bound_port_ <= 0) return Status::IOError("cannot bind HTTP on " + o.host + ":0");
  } else {
    if (!impl_->server.bind_to_port(o.host.c_str(), o.port))
      return Status::IOError("cannot bind HTTP on " + o.host + ":" + std::to_string(o.port));
    bound_port_ = o.port;
  }
  return Status::Ok();
}

void HttpFront::Listen() { impl_->server.listen_after_bind(); }

void HttpFront::Stop() {
  if (impl_->server.is_running()) impl_->server.stop();
}

}  // namespace search
