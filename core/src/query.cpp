#include "core/query.hpp"

namespace search {

std::string_view QueryModeName(QueryMode mode) {
  switch (mode) {
    case QueryMode::kAnd: return "and";
    case QueryMode::kOr: return "or";
    case QueryMode::kAndOr: return "andor";
  }
  return "unknown";
}

std::string_view ProcessorName(Processor p) {
  switch (p) {
    case Processor::kCpu: return "cpu";
    case Processor::kGpu: return "gpu";
    case Processor::kHybrid: return "hybrid";
  }
  return "cpu";
}

Result<QueryMode> ParseQueryMode(std::string_view name) {
  if (name == "and") return QueryMode::kAnd;
  if (name == "or") return QueryMode::kOr;
  if (name == "andor") return QueryMode::kAndOr;
  return Status::InvalidArgument("mode must be one of and, or, andor (got '" + std::string(name) + "')");
}

Status ValidateK(int64_t k) {
  if (k < 1 || k > kMaxK)
    return Status::InvalidArgument("k must be between 1 and " + std::to_string(kMaxK) + " (got " + std::to_string(k) + ")");
  return Status::Ok();
}

}  // namespace search
