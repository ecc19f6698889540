// SyntheticCorpus (synthetic_corpus.hpp): document frequencies, docID samplers and tfs.
#include "scale/synthetic_corpus.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace search {

namespace {

// Floyd's sampler handles tiny k; above it Bernoulli sampling plus a count fix-up is O(k).
constexpr uint32_t kFloydMax = 32;
// Per-candidate Bernoulli draws (two per 64-bit word) from this density on; geometric skips below.
constexpr double kDenseRate = 0.25;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Floyd's algorithm: k distinct values of [0, n), appended sorted. REQUIRES: k <= n, k small.
void Floyd(SplitMixRng& rng, uint32_t k, uint32_t n, std::vector<uint32_t>* out) {
  const auto start = static_cast<std::ptrdiff_t>(out->size());
  for (uint32_t j = n - k; j < n; ++j) {
    const auto t = static_cast<uint32_t>(rng.Below(uint64_t{j} + 1));
    const bool present = std::find(out->begin() + start, out->end(), t) != out->end();
    out->push_back(present ? j : t);
  }
  std::sort(out->begin() + start, out->end());
}

// Appends a uniform k-subset of [lo, hi), ascending.
void AppendUniform(SplitMixRng& rng, uint32_t k, uint32_t lo, uint32_t hi, std::vector<uint32_t>* out) {
  const size_t start = out->size();
  SampleSortedSubset(rng, k, hi - lo, out);
  for (size_t i = start; i < out->size(); ++i) (*out)[i] += lo;
}

// Anh & Moffat's Clustered model (as in Lemire's FastPFor ClusteredDataGenerator): k distinct
// values of [lo, hi), ascending. The range is cut at a random point leaving room for half of
// the values on each side; each side is uniform (one in four) or clustered again.
void AppendClustered(SplitMixRng& rng, uint32_t k, uint32_t lo, uint32_t hi, std::vector<uint32_t>* out) {
  const uint32_t range = hi - lo;
  if (k == 0) return;
  if (k == range) {
    for (uint32_t v = lo; v < hi; ++v) out->push_back(v);
    return;
  }
  if (k < 10) {  // as in FastPFor: small sets are uniform
    AppendUniform(rng, k, lo, hi, out);
    return;
  }
  const uint32_t left = k / 2, right = k - k / 2;
  const auto cut = static_cast<uint32_t>(left + rng.Below(uint64_t{range} - k + 1));
  const double p = rng.Uniform();
  if (p < 0.25) {
    AppendUniform(rng, left, lo, lo + cut, out);
    AppendClustered(rng, right, lo + cut, hi, out);
  } else if (p < 0.5) {
    AppendClustered(rng, left, lo, lo + cut, out);
    AppendUniform(rng, right, lo + cut, hi, out);
  } else {
    AppendClustered(rng, left, lo, lo + cut, out);
    AppendClustered(rng, right, lo + cut, hi, out);
  }
}

uint32_t ClassSize(uint32_t n, uint32_t c) {
  return n / SyntheticCorpus::kClasses + (c < n % SyntheticCorpus::kClasses ? 1 : 0);
}

// Splits df postings over the document classes: class c gets n_c * min(1, lambda * 2^c) in
// expectation (lambda solves sum = df), rounded systematically with a random offset so that the
// counts sum to df exactly and each is within one of its expectation.
void AllocateClasses(SplitMixRng& rng, uint32_t df, uint32_t n, uint32_t* k) {
  constexpr uint32_t kC = SyntheticCorpus::kClasses;
  double size[kC], weight[kC], expect[kC];
  double rest = df, wsum = 0;
  for (uint32_t c = 0; c < kC; ++c) {
    size[c] = ClassSize(n, c);
    weight[c] = std::ldexp(1.0, static_cast<int>(c));
    wsum += size[c] * weight[c];
  }
  uint32_t top = kC;  // classes [top, kC) are saturated (every document holds the term)
  double lambda = rest / wsum;
  while (top > 0 && lambda * weight[top - 1] > 1.0) {
    --top;
    rest -= size[top];
    wsum -= size[top] * weight[top];
    lambda = wsum > 0 ? rest / wsum : 0.0;
  }
  for (uint32_t c = 0; c < kC; ++c) expect[c] = c >= top ? size[c] : size[c] * lambda * weight[c];
  const double u = rng.Uniform();
  double cum = 0, prev = std::floor(u);
  int64_t total = 0;
  for (uint32_t c = 0; c < kC; ++c) {
    cum += expect[c];
    const double cur = std::floor(cum + u);
    const double kc = std::clamp(cur - prev, 0.0, size[c]);
    k[c] = static_cast<uint32_t>(kc);
    total += k[c];
    prev = cur;
  }
  // Float rounding may leave the total off by one: settle it on the heaviest classes with room.
  for (int64_t diff = static_cast<int64_t>(df) - total; diff != 0;) {
    for (int c = kC - 1; c >= 0 && diff != 0; --c) {
      if (diff > 0 && k[c] < size[c]) {
        ++k[c];
        --diff;
      } else if (diff < 0 && k[c] > 0) {
        --k[c];
        ++diff;
      }
    }
  }
}

// tf = 1 + G, G geometric with P(G >= g) = rho^g; a 1/128 chance of a heavy-tailed draw instead.
class TfSampler {
 public:
  TfSampler(uint32_t df, uint64_t n) {
    const double mean = 0.25 + 2.75 * std::sqrt(static_cast<double>(df) / static_cast<double>(n));
    rho_ = mean / (1.0 + mean);
    double p = 1.0;
    for (double& t : table_) t = (p *= rho_);
    log_rho_ = std::log(rho_);
  }

  uint32_t Draw(SplitMixRng& rng) const {
    const uint64_t x = rng.Next();
    if ((x & 127) == 0) {
      const double v = 4.0 / std::pow(rng.UniformPositive(), 1.0 / 1.2);
      return v >= SyntheticCorpus::kMaxTf ? SyntheticCorpus::kMaxTf : static_cast<uint32_t>(v);
    }
    const double u = static_cast<double>(x >> 11) * 0x1.0p-53;  // G = #{g >= 1 : u < rho^g}
    uint32_t g = 0;  // branch-free (the outcome is random): the table decreases
    for (uint32_t j = 0; j < kTable; ++j) g += u < table_[j] ? 1 : 0;
    if (g == kTable) {
      const double tail = u > 0 ? std::floor(std::log(u) / log_rho_) : SyntheticCorpus::kMaxTf;
      g = static_cast<uint32_t>(std::min<double>(tail, SyntheticCorpus::kMaxTf - 1));
    }
    return 1 + g;
  }

 private:
  static constexpr uint32_t kTable = 16;
  double rho_ = 0, log_rho_ = 0;
  double table_[kTable];  // rho^(g + 1)
};

}  // namespace

Result<SyntheticModel> ParseSyntheticModel(std::string_view name) {
  if (name == "zipf") return SyntheticModel::kZipf;
  if (name == "uniform") return SyntheticModel::kUniform;
  if (name == "clustered") return SyntheticModel::kClustered;
  return Status::InvalidArgument("unknown model '" + std::string(name) + "' (zipf, uniform or clustered)");
}

std::string_view SyntheticModelName(SyntheticModel model) {
  switch (model) {
    case SyntheticModel::kZipf: return "zipf";
    case SyntheticModel::kUniform: return "uniform";
    case SyntheticModel::kClustered: return "clustered";
  }
  return "?";
}

void SampleSortedSubset(SplitMixRng& rng, uint32_t k, uint32_t n, std::vector<uint32_t>* out) {
  if (k == 0) return;
  if (k >= n) {
    for (uint32_t i = 0; i < n; ++i) out->push_back(i);
    return;
  }
  if (k > n / 2) {  // the complement is the sparser sample
    std::vector<uint32_t> skip;
    SampleSortedSubset(rng, n - k, n, &skip);
    size_t s = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (s < skip.size() && skip[s] == i) {
        ++s;
      } else {
        out->push_back(i);
      }
    }
    return;
  }
  if (k <= kFloydMax) {
    Floyd(rng, k, n, out);
    return;
  }
  const size_t start = out->size();
  const double p = static_cast<double>(k) / static_cast<double>(n);
  if (p >= kDenseRate) {
    const auto threshold = static_cast<uint64_t>(p * 4294967296.0);
    uint32_t i = 0;
    for (; i + 1 < n; i += 2) {
      const uint64_t x = rng.Next();
      if ((x & 0xffffffffu) < threshold) out->push_back(i);
      if ((x >> 32) < threshold) out->push_back(i + 1);
    }
    if (i < n && (rng.Next() & 0xffffffffu) < threshold) out->push_back(i);
  } else {
    const double inv = 1.0 / std::log1p(-p);
    for (int64_t i = -1;;) {
      i += 1 + static_cast<int64_t>(std::log(rng.UniformPositive()) * inv);
      if (i >= static_cast<int64_t>(n)) break;
      out->push_back(static_cast<uint32_t>(i));
    }
  }
  // A Bernoulli sample of m values is a uniform m-subset; dropping (adding) a uniform subset of
  // it (of its complement) keeps it uniform, now with exactly k values.
  const auto m = static_cast<uint32_t>(out->size() - start);
  if (m > k) {
    std::vector<uint32_t> drop;
    SampleSortedSubset(rng, m - k, m, &drop);
    size_t w = start, d = 0;
    for (uint32_t r = 0; r < m; ++r) {
      if (d < drop.size() && drop[d] == r) {
        ++d;
      } else {
        (*out)[w++] = (*out)[start + r];
      }
    }
    out->resize(w);
  } else if (m < k) {
    std::vector<uint32_t> add;  // ranks among the values not yet taken
    SampleSortedSubset(rng, k - m, n - m, &add);
    std::vector<uint32_t> merged;
    merged.reserve(k);
    size_t e = start;
    uint32_t taken = 0;  // existing values below the candidate
    for (uint32_t c : add) {
      while (e < out->size() && (*out)[e] <= c + taken) {
        merged.push_back((*out)[e++]);
        ++taken;
      }
      merged.push_back(c + taken);
    }
    while (e < out->size()) merged.push_back((*out)[e++]);
    out->resize(start);
    out->insert(out->end(), merged.begin(), merged.end());
  }
}

Result<SyntheticCorpus> SyntheticCorpus::Create(const SyntheticOptions& options) {
  if (options.docs == 0) return Status::InvalidArgument("--docs must be at least 1");
  if (options.docs > (uint64_t{1} << 31)) return Status::InvalidArgument("--docs must be at most 2^31");
  SyntheticCorpus c;
  c.options_ = options;
  // df(r) >= 1 (rounded) iff r <= (1 + q) * N^(1/a) - q; float rounding settled by the loops.
  const double n = static_cast<double>(options.docs);
  auto v = static_cast<int64_t>(std::floor((1 + kShift) * std::pow(n, 1.0 / kAlpha) - kShift));
  v = std::max<int64_t>(v, 1);
  c.num_terms_ = static_cast<uint32_t>(v);
  while (c.num_terms_ > 1 && c.PlannedDf(c.num_terms_) < 1) --c.num_terms_;
  while (c.PlannedDf(c.num_terms_ + 1) >= 1) ++c.num_terms_;
  // Names "t<rank>" in byte order: a preorder walk of the decimal trie of 1 .. V.
  const uint64_t total = c.num_terms_;
  c.lex_order_.resize(total);
  uint64_t cur = 1;
  for (uint64_t i = 0; i < total; ++i) {
    c.lex_order_[i] = static_cast<uint32_t>(cur);
    if (cur * 10 <= total) {
      cur *= 10;
    } else {
      while (cur % 10 == 9 || cur + 1 > total) cur /= 10;
      ++cur;
    }
  }
  return c;
}

uint32_t SyntheticCorpus::PlannedDf(uint32_t rank) const {
  const double n = static_cast<double>(options_.docs);
  const double df = 0.5 * n * std::pow((1.0 + kShift) / (static_cast<double>(rank) + kShift), kAlpha);
  return static_cast<uint32_t>(std::min(n, std::floor(df + 0.5)));
}

uint64_t SyntheticCorpus::PlannedPostings() const {
  uint64_t sum = 0;
  for (uint32_t r = 1; r <= num_terms_; ++r) sum += PlannedDf(r);
  return sum;
}

void SyntheticCorpus::Generate(uint32_t rank, std::vector<uint32_t>* docs, std::vector<uint32_t>* tfs,
                               SyntheticScratch* scratch) const {
  docs->clear();
  tfs->clear();
  const uint32_t df = PlannedDf(rank);
  const auto n = static_cast<uint32_t>(options_.docs);
  SplitMixRng rng(Mix64(Mix64(options_.seed) + 0x9e3779b97f4a7c15ULL * rank));
  switch (options_.model) {
    case SyntheticModel::kUniform:
      SampleSortedSubset(rng, df, n, docs);
      break;
    case SyntheticModel::kClustered:
      AppendClustered(rng, df, 0, n, docs);
      break;
    case SyntheticModel::kZipf: {
      uint32_t k[kClasses];
      AllocateClasses(rng, df, n, k);
      scratch->classes.resize(kClasses);
      for (uint32_t c = 0; c < kClasses; ++c) {
        scratch->classes[c].clear();
        SampleSortedSubset(rng, k[c], ClassSize(n, c), &scratch->classes[c]);
      }
      // Doc = row * 8 + class. Dense lists are merged through a bitmap of all N documents
      // (left all-zero after use), sparse ones by sorting.
      docs->reserve(df);
      if (df >= n / 1024) {
        std::vector<uint64_t>& bits = scratch->bitmap;
        if (bits.size() != (n + 63) / 64) bits.assign((n + 63) / 64, 0);
        for (uint32_t c = 0; c < kClasses; ++c) {
          for (uint32_t row : scratch->classes[c]) {
            const uint32_t d = row * kClasses + c;
            bits[d >> 6] |= uint64_t{1} << (d & 63);
          }
        }
        for (size_t w = 0; w < bits.size(); ++w) {
          uint64_t x = bits[w];
          if (x == 0) continue;
          bits[w] = 0;
          for (; x != 0; x &= x - 1) docs->push_back(static_cast<uint32_t>(w * 64 + std::countr_zero(x)));
        }
      } else {
        for (uint32_t c = 0; c < kClasses; ++c) {
          for (uint32_t row : scratch->classes[c]) docs->push_back(row * kClasses + c);
        }
        std::sort(docs->begin(), docs->end());
      }
      break;
    }
  }
  const TfSampler tf(df, n);
  tfs->resize(docs->size());
  for (uint32_t& t : *tfs) t = tf.Draw(rng);
}

}  // namespace search
