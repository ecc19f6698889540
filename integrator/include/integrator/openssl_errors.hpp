// OpenSslErrors: the calling thread's OpenSSL error queue, drained into one line for a message
// ("; " between entries; empty when the queue was empty). Shared by the integrator's TLS context
// and searchctl's TLS client; both link OpenSSL.
// Thread-safety: OpenSSL's error queue is per thread.
#pragma once

#include <openssl/err.h>

#include <string>

namespace search {

inline std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

}  // namespace search
