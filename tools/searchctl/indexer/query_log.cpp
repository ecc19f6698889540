// The synthetic query log (query_log.hpp).
#include "indexer/query_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "index_store/shard_store.hpp"

namespace search {

namespace {

double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Index i with probability weight[i] / total, from cumulative weights.
size_t Draw(std::mt19937_64& rng, const std::vector<double>& cumulative) {
  const double u = Uniform01(rng) * cumulative.back();
  const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
  return std::min<size_t>(static_cast<size_t>(it - cumulative.begin()), cumulative.size() - 1);
}

// Merges two ascending term lists (a term present in both keeps one entry).
std::vector<TermDf> Union(std::vector<TermDf> a, std::vector<TermDf> b) {
  std::vector<TermDf> out;
  out.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].term < b[j].term)) {
      out.push_back(std::move(a[i++]));
    } else if (i == a.size() || b[j].term < a[i].term) {
      out.push_back(std::move(b[j++]));
    } else {
      out.push_back(std::move(a[i++]));
      ++j;
    }
  }
  return out;
}

}  // namespace

Result<std::vector<TermDf>> CollectTerms(const std::vector<const ShardReader*>& shards, uint32_t min_df) {
  std::vector<TermDf> all;
  for (const ShardReader* shard : shards) {
    std::vector<TermDf> mine;
    SEARCH_RETURN_IF_ERROR(shard->ForEachTerm([&](std::string_view term, const TermInfo& info) {
      if (info.df >= min_df) mine.push_back(TermDf{std::string(term), info.df});
      return true;
    }));
    all = Union(std::move(all), std::move(mine));
  }
  return all;
}

Result<std::array<double, 4>> ParseLengthWeights(std::string_view text) {
  std::array<double, 4> w{};
  size_t n = 0;
  std::string s(text);
  size_t pos = 0;
  while (true) {
    const size_t comma = s.find(',', pos);
    const std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (n == 4) return Status::InvalidArgument("--lengths takes 4 numbers (1, 2, 3 and 4+ terms), got more");
    char* end = nullptr;
    const double v = std::strtod(part.c_str(), &end);
    if (part.empty() || end != part.c_str() + part.size() || !std::isfinite(v) || v < 0)
      return Status::InvalidArgument("--lengths: '" + part + "' is not a non-negative number");
    w[n++] = v;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (n != 4)
    return Status::InvalidArgument("--lengths takes 4 numbers (1, 2, 3 and 4+ terms), got " + std::to_string(n));
  if (w[0] + w[1] + w[2] + w[3] <= 0) return Status::InvalidArgument("--lengths: the weights must not all be 0");
  return w;
}

Result<std::vector<std::string>> GenerateQueryLog(const std::vector<TermDf>& terms, const QueryLogOptions& options,
                                                  QueryLogStats* stats) {
  if (terms.empty()) return Status::InvalidArgument("no candidate terms (the index has no term with enough documents)");
  std::vector<double> term_cum(terms.size());
  double acc = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    acc += std::pow(static_cast<double>(terms[i].df), options.df_exponent);
    term_cum[i] = acc;
  }
  std::vector<double> len_cum(4);
  acc = 0;
  for (size_t i = 0; i < 4; ++i) len_cum[i] = (acc += options.length_weights[i]);

  std::mt19937_64 rng(options.seed);
  QueryLogStats st;
  uint64_t drawn_terms = 0;
  double df_sum = 0;
  std::vector<std::string> out;
  out.reserve(options.count);
  std::vector<size_t> picked;
  for (uint64_t q = 0; q < options.count; ++q) {
    const size_t bucket = Draw(rng, len_cum);
    size_t len = bucket < 3 ? bucket + 1 : 4 + static_cast<size_t>(rng() % 3);
    if (bucket == 3 && options.four_share >= 0)
      len = Uniform01(rng) < options.four_share ? 4 : 5 + static_cast<size_t>(rng() % 2);
    len = std::min(len, terms.size());
    picked.clear();
    // Rejection keeps each term's chance proportional to its weight among those not yet picked;
    // a bounded number of tries guards a vocabulary dominated by a few terms.
    for (size_t tries = 0; picked.size() < len && tries < 1000 * len; ++tries) {
      const size_t t = Draw(rng, term_cum);
      if (std::find(picked.begin(), picked.end(), t) == picked.end()) picked.push_back(t);
    }
    for (size_t t = 0; picked.size() < len && t < terms.size(); ++t) {
      if (std::find(picked.begin(), picked.end(), t) == picked.end()) picked.push_back(t);
    }
    std::string text;
    double postings = 0;
    for (size_t t : picked) {
      if (!text.empty()) text.push_back(' ');
      text += terms[t].term;
      postings += terms[t].df;
      df_sum += terms[t].df;
    }
    drawn_terms += picked.size();
    ++st.by_length[std::min<size_t>(picked.size(), 6)];
    st.mean_postings += postings;
    out.push_back(std::move(text));
  }
  if (drawn_terms > 0) st.mean_df = df_sum / static_cast<double>(drawn_terms);
  if (options.count > 0) st.mean_postings /= static_cast<double>(options.count);
  if (stats != nullptr) *stats = st;
  return out;
}

}  // namespace search
