// The analyzer the query-language and highlighter fuzz targets try besides the default one: an
// English stemmer with a few stopwords (a, and, of, the, to). Thread-safety: built once, on first
// use (a function-local static); const afterwards.
#pragma once

#include "core/analyzer.hpp"
#include "fuzz_check.hpp"

namespace search_fuzz {

inline const search::Analyzer& EnglishAnalyzer() {
  static const search::Analyzer a = [] {
    search::AnalyzerConfig c;
    c.stem_language = "english";
    c.stopwords = {"a", "and", "of", "the", "to"};
    auto r = search::Analyzer::Create(c);
    FUZZ_CHECK_MSG(r.ok(), r.status().ToString());
    return *r;
  }();
  return a;
}

}  // namespace search_fuzz
