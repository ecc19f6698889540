// WakeFd: a non-blocking eventfd that one thread polls (zmq::poll with the fd, or poll(2)) and
// other threads write to wake it, only when it may be blocked.
//
// The polling thread calls SetIdle(true) just before it looks at its queue for the last time
// before it may block in poll, and SetIdle(false) once back from poll (then Drain() if poll
// reported the fd readable). A thread that makes the queue non-empty calls WakeIfIdle() after its
// push. Both flag accesses are seq_cst and the queue is under its own lock, so an item pushed after
// the poller's last look finds it idle and writes the fd, and one pushed before it is seen by that
// look (poll then must not block). An item pushed while the poller is awake needs no write: it
// looks again before it blocks; one pushed behind others needs none either (the first of them woke
// it or found it awake). Under load the poller is mostly awake, so this saves a write per item (a
// syscall that wakes nobody, or one that wakes the thread). Stop paths call Wake() unconditionally.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace search {

class WakeFd {
 public:
  WakeFd() = default;
  ~WakeFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;

  // Creates the eventfd; false (errno set) when it cannot.
  bool Open() {
    fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd_ >= 0;
  }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  void SetIdle(bool idle) { idle_.store(idle); }
  void WakeIfIdle() const {
    if (idle_.load()) Wake();
  }
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
  std::atomic<bool> idle_{false};
};

}  // namespace search
