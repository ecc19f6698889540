// A synthetic query log drawn from an index's own terms, shaped like a web log: the number of
// terms per query follows given weights for 1, 2, 3 and 4+ terms (4+ = 4 to 6, uniformly), and
// terms are drawn with probability proportional to df^exponent (frequent terms more often),
// among terms with global df >= min_df, never twice in one query. Deterministic per seed (the
// generator is std::mt19937_64 with hand-written distributions, identical on every platform).
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search {

class ShardReader;

struct TermDf {
  std::string term;
  uint32_t df = 0;  // global document frequency
};

// Every term of the given shards with global df >= min_df, ascending and each once.
Result<std::vector<TermDf>> CollectTerms(const std::vector<const ShardReader*>& shards, uint32_t min_df);

struct QueryLogOptions {
  uint64_t count = 1000;
  uint64_t seed = 1;
  std::array<double, 4> length_weights{25, 30, 25, 20};  // 1, 2, 3 and 4..6 terms
  // < 0: a 4+ query has 4, 5 or 6 terms alike; otherwise it has 4 terms with this probability
  // and else 5 or 6 (Liu 2018 Fig. 11: 24% four-term, 16% longer is 0,27,33,40 with 0.6).
  double four_share = -1;
  double df_exponent = 0.8;
};

struct QueryLogStats {
  std::array<uint64_t, 7> by_length{};  // queries with 1..6 terms at [1..6]
  double mean_df = 0;                   // over all drawn terms
  double mean_postings = 0;             // per query: the sum of its terms' df
};

// "25,30,25,20" -> weights; InvalidArgument unless 4 finite non-negative numbers with a positive sum.
Result<std::array<double, 4>> ParseLengthWeights(std::string_view text);

// The queries, terms separated by single spaces. A query never has more terms than there are
// candidates. InvalidArgument when `terms` is empty.
Result<std::vector<std::string>> GenerateQueryLog(const std::vector<TermDf>& terms, const QueryLogOptions& options,
                                                  QueryLogStats* stats);

}  // namespace search
