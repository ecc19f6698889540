// searchctl's shared helpers (common.hpp).
#include "common.hpp"

#include <algorithm>
#include <cmath>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

namespace search::cli {

int ReportError(std::string_view command, const Status& status, int code) {
  std::cerr << "searchctl " << command << ": error: " << status.message() << "\n";
  return code;
}

Result<QueryMode> CheckModeAndK(const std::string& mode, int64_t k) {
  SEARCH_ASSIGN_OR_RETURN(QueryMode m, ParseQueryMode(mode));
  SEARCH_RETURN_IF_ERROR(ValidateK(k));
  return m;
}

Result<std::vector<std::string>> ReadQueryFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open query file " + path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t\f\v") == std::string::npos) continue;
    out.push_back(line);
  }
  if (in.bad()) return Status::IOError("read error in query file " + path);
  return out;
}

std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string FormatAnswer(std::string_view query, const std::vector<ExternalHit>& hits, uint64_t took_us,
                         std::optional<uint64_t> total, const std::vector<std::string>* sources) {
  std::string out = "{\"query\": " + JsonString(query) + ", \"hits\": [";
  char score[32];
  for (size_t i = 0; i < hits.size(); ++i) {
    if (i > 0) out += ", ";
    // 9 significant digits round-trip any float.
    std::snprintf(score, sizeof(score), "%.9g", static_cast<double>(hits[i].score));
    out += "{\"id\": " + JsonString(hits[i].id) + ", \"score\": " + score;
    if (sources != nullptr) out += ", \"_source\": " + (*sources)[i];
    out += "}";
  }
  out += "]";
  if (total.has_value()) out += ", \"total\": " + std::to_string(*total);
  out += ", \"took_us\": " + std::to_string(took_us) + "}";
  return out;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

}  // namespace search::cli
