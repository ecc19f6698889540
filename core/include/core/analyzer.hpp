// Analyzer: turns text into index terms, exactly as docs/SCORING.md fixes it. Tokens are maximal runs of
// ASCII letters and digits, where bytes >= 0x80 also count as token bytes (so UTF-8 words stay
// whole); ASCII letters are lowercased. Optionally a Snowball stemmer (libstemmer) and a stopword
// list are applied; both are index-time options recorded in the index (AnalyzerConfig::ToJson)
// and applied to queries automatically by whoever opens the index.
// Thread-safety: an Analyzer is immutable after Create and safe to use from many threads
// (each thread lazily gets its own stemmer instance and a 256 KiB cache of recent stems per language).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/status.hpp"

namespace search {

struct AnalyzerConfig {
  std::string stem_language;           // "" = no stemming; otherwise a libstemmer name ("english")
  std::vector<std::string> stopwords;  // already lowercased; matched before stemming

  // {"tokenizer":"ascii-alnum-lower","stem":"english"|null,"stopwords":[...]}
  // Throws nlohmann::json::type_error (316) when a stopword is not valid UTF-8 (a stopword file in
  // another encoding: tokens keep their high bytes); the index builder catches it and fails with
  // "shard metadata does not serialise: ... UTF-8 ..." before anything is published.
  std::string ToJson() const;
  static Result<AnalyzerConfig> FromJson(std::string_view json);
  // Reads a stopword file: one word per line, '#' starts a comment, blank lines ignored; words are
  // lowercased with the default tokenizer (a line with several tokens adds each).
  static Result<std::vector<std::string>> ReadStopwordFile(const std::string& path);
  bool operator==(const AnalyzerConfig&) const = default;
};

class Analyzer {
 public:
  // Fails with InvalidArgument for an unknown stemming language.
  static Result<Analyzer> Create(AnalyzerConfig config);
  Analyzer();  // the default analyzer: no stemming, no stopwords

  // Appends the terms of `text` to `out` in text order (repeats kept).
  void Analyze(std::string_view text, std::vector<std::string>* out) const;
  std::vector<std::string> Analyze(std::string_view text) const {
    std::vector<std::string> out;
    Analyze(text, &out);
    return out;
  }
  // Query terms: analyzed, then deduplicated and sorted ascending (a repeated term counts once).
  // The sorted order is the canonical order in which every engine sums a document's score.
  std::vector<std::string> AnalyzeQuery(std::string_view text) const;
  // Analyze with where each term came from: fn(term, begin, end) for each term of `text` in text
  // order, [begin, end) the byte range of the token that produced it (the term as Analyze gives it:
  // lowercased, stemmed; stopwords give no call). The highlighter's offsets (core/highlight.hpp).
  void AnalyzeWithOffsets(std::string_view text,
                          const std::function<void(std::string_view term, size_t begin, size_t end)>& fn) const;

  const AnalyzerConfig& config() const { return config_; }

  // The bare tokenizer: calls fn(token) for each lowercased token of `text`.
  template <class Fn>
  static void Tokenize(std::string_view text, Fn&& fn);

 private:
  struct Impl;
  AnalyzerConfig config_;
  std::shared_ptr<const Impl> impl_;
};

inline bool IsTokenByte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

template <class Fn>
void Analyzer::Tokenize(std::string_view text, Fn&& fn) {
  std::string token;
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && !IsTokenByte(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= n) break;
    token.clear();
    while (i < n && IsTokenByte(static_cast<unsigned char>(text[i]))) {
      unsigned char c = static_cast<unsigned char>(text[i]);
      token.push_back(static_cast<char>((c >= 'A' && c <= 'Z') ? c + 32 : c));
      ++i;
    }
    fn(std::string_view(token));
  }
}

}  // namespace search
