// SyntheticCorpus: the model behind `searchctl generate`, a collection given directly by its
// posting lists, calibrated so that N = 25.2M documents looks like TREC GOV2 (README.md here has
// the derivation).
//
//  * Terms are named "t<rank>", rank = 1 .. V. Term r has df(r) = round(N/2 * ((1 + q) / (r + q))^a)
//    (Zipf-Mandelbrot, a = 1.5, q = 217): df(1) = N/2, and the ranks kept are those with df >= 1, so
//    V = floor((1 + q) * N^(1/a) - q) (18.7M terms at N = 25.2M). The total number of postings is
//    ~ N/2 * (1 + q) / (a - 1) = 218 N (5.48e9 at 25.2M, within the 5 to 6 billion of GOV2).
//  * DocIDs (model):
//      uniform   - each list is a uniformly random df-subset of [0, N) (Anh & Moffat's Uniform);
//      clustered - Anh & Moffat's Clustered model (recursive halving at a random cut, each half
//                  uniform or clustered again), as in Mallia et al. 2019 §4;
//      zipf      - the default: documents differ in size. Doc d belongs to class d % 8, and class c
//                  attracts postings with weight 2^c (sizes spread over two orders of magnitude,
//                  a 1/x density: long documents hold the frequent terms); within a class, the
//                  docIDs are a uniform subset.
//  * tf = 1 + G with G geometric of mean 0.25 + 2.75 * sqrt(df / N) (frequent terms repeat more),
//    and with probability 1/128 a heavy-tail draw instead: tf = floor(4 / U^(1/1.2)), capped at 4096.
//  * Document length = the sum of its tfs (computed by generating every list once).
// Every list is a pure function of (seed, rank): any thread may generate any list, in any order.
// Thread-safety: immutable after Create; Generate is safe from many threads (scratch per call).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search {

// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and the same stream on every platform.
class SplitMixRng {
 public:
  explicit SplitMixRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }               // [0, 1)
  double UniformPositive() { return static_cast<double>((Next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]
  // In [0, n) (multiply-shift; the bias is below 2^-32 for the n used here). REQUIRES: n > 0.
  uint64_t Below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64); }

 private:
  uint64_t state_;
};

enum class SyntheticModel { kZipf, kUniform, kClustered };

Result<SyntheticModel> ParseSyntheticModel(std::string_view name);
std::string_view SyntheticModelName(SyntheticModel model);

struct SyntheticOptions {
  uint64_t docs = 0;
  SyntheticModel model = SyntheticModel::kZipf;
  uint64_t seed = 1;
};

// Scratch buffers for Generate, reused between calls on one thread.
struct SyntheticScratch {
  std::vector<std::vector<uint32_t>> classes;
  std::vector<uint64_t> bitmap;  // all zero between calls
};

class SyntheticCorpus {
 public:
  static constexpr double kAlpha = 1.5;
  static constexpr double kShift = 217.0;  // q
  static constexpr uint32_t kClasses = 8;
  static constexpr uint32_t kMaxTf = 4096;

  // InvalidArgument for 0 documents or more than 2^31.
  static Result<SyntheticCorpus> Create(const SyntheticOptions& options);

  uint64_t num_docs() const { return options_.docs; }
  const SyntheticOptions& options() const { return options_; }
  uint32_t num_terms() const { return num_terms_; }  // V
  uint32_t PlannedDf(uint32_t rank) const;           // REQUIRES: 1 <= rank <= V
  uint64_t PlannedPostings() const;                  // sum of PlannedDf (computed on call)
  static std::string TermName(uint32_t rank) { return std::string("t").append(std::to_string(rank)); }
  // The rank of the i-th term in ascending byte order of the names (0 <= i < V).
  uint32_t RankAt(uint32_t i) const { return lex_order_[i]; }

  // Term `rank`'s postings: exactly PlannedDf(rank) ascending docIDs in [0, N) and their tfs.
  void Generate(uint32_t rank, std::vector<uint32_t>* docs, std::vector<uint32_t>* tfs,
                SyntheticScratch* scratch) const;

 private:
  SyntheticOptions options_;
  uint32_t num_terms_ = 0;
  std::vector<uint32_t> lex_order_;
};

// Appends k distinct values of [0, n), ascending, to out: a uniformly random k-subset
// (Bernoulli sampling at rate k/n - per-candidate draws when dense, geometric skips when sparse -
// then a uniformly random fix-up of the count; the complement when k > n/2). Exposed for tests.
// REQUIRES: k <= n.
void SampleSortedSubset(SplitMixRng& rng, uint32_t k, uint32_t n, std::vector<uint32_t>* out);

}  // namespace search
