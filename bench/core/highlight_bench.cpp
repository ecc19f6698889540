// Highlight speed per document (core/highlight.hpp), as the node runs it for each of the k hits:
//   BM_Highlight/<bytes>/<analyzer>    Highlight with 2 terms and a phrase, default 3 x 150 fragments
//   BM_Analyze/<bytes>/<analyzer>      Analyzer::Analyze alone on the same text: the floor
// analyzer: 0 default, 1 english stemming, 2 english stemming + stopwords (the, of, a, and, to, in).
// Texts: 5,000 English-like words under Zipf's law, with punctuation (MakeText); the query's
// terms and phrase occur a few times per 10 KB.
// Example: highlight_bench --benchmark_filter='/10240/' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "core/highlight.hpp"

namespace search {
namespace {

// English-like text, one of many: 5,000 made-up words (syllables plus an English suffix) drawn with Zipf's law
// (rank r with probability ~ 1/r), a few common words and the query's words among them, and
// punctuation between.
std::string MakeText(size_t bytes, uint32_t seed) {
  static const char* kConsonants[] = {"b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "st", "tr"};
  static const char* kVowels[] = {"a", "e", "i", "o", "u", "ea", "ou"};
  static const char* kSuffixes[] = {"", "", "", "s", "ing", "ed", "ly", "ness", "ation", "er"};
  static const std::vector<std::string> kSeps = {" ", " ", " ", " ", " ", ", ", ". ", "; ", " (", ") ", "\n"};
  std::mt19937 rng(42);  // the same vocabulary and ranks for every text
  std::vector<std::string> words = {"the", "of", "and", "a", "to", "in", "is", "was", "harmless", "dolphins",
                                    "heart", "gold"};
  while (words.size() < 5000) {
    std::string w;
    for (int s = 1 + static_cast<int>(rng() % 3); s > 0; --s) {
      w += kConsonants[rng() % std::size(kConsonants)];
      w += kVowels[rng() % std::size(kVowels)];
    }
    w += kConsonants[rng() % std::size(kConsonants)];
    w += kSuffixes[rng() % std::size(kSuffixes)];
    words.push_back(std::move(w));
  }
  std::shuffle(words.begin() + 8, words.end(), rng);  // the common words keep the top ranks
  rng.seed(seed);
  std::string text;
  while (text.size() < bytes) {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const size_t rank = static_cast<size_t>(std::pow(static_cast<double>(words.size()), u)) - 1;
    text += words[std::min(rank, words.size() - 1)];
    if (rng() % 200 == 0) text += " heart of gold";
    text += kSeps[rng() % kSeps.size()];
  }
  text.resize(bytes);
  return text;
}

Analyzer MakeAnalyzer(int kind) {
  AnalyzerConfig c;
  if (kind >= 1) c.stem_language = "english";
  if (kind >= 2) c.stopwords = {"the", "of", "a", "and", "to", "in"};
  auto a = Analyzer::Create(c);
  return a.ok() ? *a : Analyzer();
}

// Texts of one size with one vocabulary, visited in turn as a node visits its hits' documents (the
// analyzer's per-thread stem cache sees a corpus, not one text again and again).
std::vector<std::string> MakeTexts(size_t bytes) {
  std::vector<std::string> texts;
  for (uint32_t seed = 1; seed <= 64; ++seed) texts.push_back(MakeText(bytes, seed));
  return texts;
}

void BM_Highlight(benchmark::State& state) {
  const std::vector<std::string> texts = MakeTexts(static_cast<size_t>(state.range(0)));
  const Analyzer analyzer = MakeAnalyzer(static_cast<int>(state.range(1)));
  HighlightTerms q;
  for (const char* w : {"harmless", "dolphins"}) {
    for (const auto& t : analyzer.Analyze(w)) q.terms.push_back(t);
  }
  q.phrases.push_back(analyzer.Analyze("heart of gold"));
  size_t matched = 0;
  for (const std::string& text : texts) matched += !Highlight(text, analyzer, q).empty();
  state.counters["matched_texts"] = static_cast<double>(matched) / static_cast<double>(texts.size());
  size_t next = 0;
  for (auto _ : state) {
    auto fragments = Highlight(texts[next], analyzer, q);
    next = (next + 1) % texts.size();
    benchmark::DoNotOptimize(fragments);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * texts[0].size()));
}

void BM_Analyze(benchmark::State& state) {
  const std::vector<std::string> texts = MakeTexts(static_cast<size_t>(state.range(0)));
  const Analyzer analyzer = MakeAnalyzer(static_cast<int>(state.range(1)));
  std::vector<std::string> terms;
  size_t next = 0;
  for (auto _ : state) {
    terms.clear();
    analyzer.Analyze(texts[next], &terms);
    next = (next + 1) % texts.size();
    benchmark::DoNotOptimize(terms);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * texts[0].size()));
}

BENCHMARK(BM_Highlight)->ArgsProduct({{1024, 10240, 102400}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Analyze)->ArgsProduct({{1024, 10240, 102400}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace search

BENCHMARK_MAIN();
