// The stop signals of a server process, taken synchronously: BlockStopSignals() blocks SIGTERM
// and SIGINT in the calling thread (every thread started after it inherits the mask, so none is
// interrupted) and ignores SIGPIPE (a peer that closed its socket is an error return, not a
// death); the caller then waits for one with sigwait on the returned set.
#pragma once

#include <pthread.h>

#include <csignal>

namespace search {

inline sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

}  // namespace search
