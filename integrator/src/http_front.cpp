// HttpFront (integrator/http_front.hpp): the HTTP API served by HttpLoops.
#include "integrator/http_front.hpp"

#include "http_loops.hpp"

namespace search {

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
