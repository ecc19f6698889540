// HttpFront (integrator/http_front.hpp): the HTTP API served by HttpLoops.
#include "integrator/http_front.hpp"

#include <arpa/inet.h>

#include "http_loops.hpp"

namespace search {

bool IsLoopbackHttpHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  const std::string bare =
      host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, bare.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool OpenWithoutApiKey(const std::string& method, const std::string& path, bool open_health) {
  if (method != "GET" && method != "HEAD") return false;
  return path == "/" || (open_health && path == "/health");
}

struct HttpFront::Impl {
  Impl(Integrator* in, const HttpFrontOptions& o) : loops(in, o) {}
  HttpLoops loops;
};

HttpFront::HttpFront(Integrator* integrator, HttpFrontOptions options)
    : impl_(std::make_unique<Impl>(integrator, options)) {}

HttpFront::~HttpFront() { Stop(); }

Status HttpFront::Bind() {
  SEARCH_RETURN_IF_ERROR(impl_->loops.Bind());
  bound_port_ = impl_->loops.port();
  return Status::Ok();
}

void HttpFront::Listen() { impl_->loops.Listen(); }

void HttpFront::Stop() { impl_->loops.Stop(); }

}  // namespace search
