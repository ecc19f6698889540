// Raw HTTP over a socket for tests that talk to the integrator's front below any client library:
// a loopback TCP connection, and the Content-Length framed answers read off a byte stream (as the
// integrator writes them), plain or after TLS decryption.
// Thread-safety: free functions without shared state.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace search::testing {

// A blocking TCP connection to 127.0.0.1:port, or -1. A nonzero `recv_timeout` bounds each recv
// (SO_RCVTIMEO), so that a test never hangs on a silent server.
inline int ConnectLoopback(int port, std::chrono::seconds recv_timeout = std::chrono::seconds(0)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (recv_timeout.count() > 0) {
    timeval tv{static_cast<time_t>(recv_timeout.count()), 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One HTTP answer: its status and body.
struct HttpAnswer {
  int status = 0;
  std::string body;
};

// The complete answers at the front of `bytes` (Content-Length framed), taken off it; an
// incomplete one stays in `bytes`.
inline std::vector<HttpAnswer> TakeHttpAnswers(std::string& bytes) {
  std::vector<HttpAnswer> out;
  while (true) {
    const size_t end = bytes.find("\r\n\r\n");
    if (end == std::string::npos) break;
    const std::string head = bytes.substr(0, end);
    const size_t cl = head.find("Content-Length: ");
    if (head.rfind("HTTP/1.", 0) != 0 || cl == std::string::npos) break;
    const size_t len = std::stoul(head.substr(cl + 16));
    if (bytes.size() < end + 4 + len) break;
    out.push_back({std::stoi(head.substr(9, 3)), bytes.substr(end + 4, len)});
    bytes.erase(0, end + 4 + len);
  }
  return out;
}

}  // namespace search::testing
