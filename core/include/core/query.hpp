// The query model shared by every engine and the wire: analyzed terms, a mode and k.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search {

// and: every term; or: any term; andor: AND, and if it yields fewer than k hits, OR (Ding §8).
enum class QueryMode : uint8_t { kAnd = 0, kOr = 1, kAndOr = 2 };

inline constexpr uint32_t kMaxK = 10000;

std::string_view QueryModeName(QueryMode mode);
Result<QueryMode> ParseQueryMode(std::string_view name);

// The engine that answered a query (the wire's SearchResponse.processor, the metrics' label).
enum class Processor : uint8_t { kCpu = 0, kGpu = 1, kHybrid = 2 };
std::string_view ProcessorName(Processor p);  // "cpu", "gpu", "hybrid"

struct QueryNode;  // core/query_tree.hpp

// A query as engines and the wire take it. A bag of words has only `terms` (tree null); a query in
// the query language also has its canonical tree (core/query_tree.hpp), and then `terms` lists the
// tree's distinct tokens (TreeTerms), which is what a node looks up. `count`: also return the exact
// number of matching documents; with it, k == 0 asks for the count only.
struct Query {
  std::vector<std::string> terms;  // canonical: analyzed, unique, sorted ascending
  QueryMode mode = QueryMode::kAnd;
  uint32_t k = 10;
  std::shared_ptr<const QueryNode> tree;  // null: the bag of words `terms` under `mode`
  bool count = false;
};

// InvalidArgument unless 1 <= k <= kMaxK.
Status ValidateK(int64_t k);

}  // namespace search
