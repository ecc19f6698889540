// What the HTTP front (http_loops.hpp) says: content types, the listen backlog, and the reasons of
// its error answers.
#pragma once

#include <cstddef>
#include <string>

namespace search {

inline constexpr const char* kJsonType = "application/json";
inline constexpr const char* kHtmlType = "text/html; charset=utf-8";
inline constexpr int kHttpListenBacklog = 1024;
inline constexpr const char* kPostQueryStringReason =
    "POST /search, /_search, /count and /_count take their parameters in the JSON body, not the query string";

inline constexpr const char* kUriTooLongReason = "request URI too long: send long queries with POST /search";

inline std::string BodyTooLongReason(size_t max_bytes) {
  return "request body larger than " + std::to_string(max_bytes) + " bytes";
}

inline std::string NoRouteReason(const std::string& method, const std::string& path) {
  return "no route for " + method.substr(0, 16) + " " + path.substr(0, 128) +
         " (GET/POST /search, /_search, /count, /_count, GET /health, GET /stats, GET /)";
}

// The error type of an HTTP-level error (the request could not be read, or no route took it).
inline std::string ErrorTypeForStatus(int status) {
  switch (status) {
    case 404: return "not_found";
    case 408: return "request_timeout";
    case 413: return "content_too_long";
    case 414: return "uri_too_long";
    case 431: return "request_header_fields_too_large";
    case 501: return "not_implemented";
    case 505: return "http_version_not_supported";
    default: return status == 400 ? "bad_request" : "http_error";
  }
}

}  // namespace search
