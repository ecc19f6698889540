// WakeFd: a non-blocking eventfd one thread polls (zmq::poll with the fd, or poll(2)) and others
// write to wake it. Wake() may be called from any thread; Drain() by the polling thread once poll
// reports the fd readable (it resets the count). Move-only; the fd closes with the object.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

namespace search {

class WakeFd {
 public:
  WakeFd() = default;
  ~WakeFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  WakeFd(WakeFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  WakeFd& operator=(WakeFd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }

  // Creates the eventfd; false (errno set) when it cannot.
  bool Open() {
    fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd_ >= 0;
  }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  void Wake() const {
    const uint64_t one = 1;
    ssize_t ignored = ::write(fd_, &one, sizeof(one));
    (void)ignored;
  }
  void Drain() const {
    uint64_t v;
    ssize_t ignored = ::read(fd_, &v, sizeof(v));
    (void)ignored;
  }

 private:
  int fd_ = -1;
};

}  // namespace search
