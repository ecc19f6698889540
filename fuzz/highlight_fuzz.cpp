// Fuzz target: the highlighter (core/highlight.hpp HighlightFragments), which runs on every fetched
// document's text. The input is: one byte of fragment_chars, one byte choosing max_fragments (1..4),
// then a query (the syntax, ParseQuerySyntax; a bag of words when it does not parse) up to the first
// newline, and the document text after it. With the default analyzer and an English stemmer with
// stopwords, the fragments must be: at most max_fragments, best first, non-overlapping; each one's
// html only escaped text and flat, non-empty <em> marks, which unescaped and unmarked is exactly the
// text's bytes [begin, end), cutting no token; each mark starting and ending on a query token; and
// a text holding a query term gives at least one fragment.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/analyzer.hpp"
#include "core/highlight.hpp"
#include "core/query_parser.hpp"
#include "fuzz_analyzer.hpp"
#include "fuzz_check.hpp"
#include "highlight_html.hpp"

namespace {

using search::Analyzer;

using search_fuzz::EnglishAnalyzer;

void CheckOne(std::string_view query_text, std::string_view text, const Analyzer& analyzer,
              const search::HighlightOptions& options) {
  search::HighlightTerms query;
  auto tree = search::ParseQuerySyntax(query_text, analyzer);
  if (tree.ok()) {
    query = search::HighlightTermsOf(*tree);
  } else {
    query = search::HighlightTermsOf(analyzer.AnalyzeQuery(query_text));
  }
  std::set<std::string> tokens(query.terms.begin(), query.terms.end());
  for (const auto& p : query.phrases) tokens.insert(p.begin(), p.end());

  const auto fragments = search::HighlightFragments(text, analyzer, query, options);
  FUZZ_CHECK(fragments.size() <= options.max_fragments);
  if (fragments.empty()) {
    for (const std::string& t : analyzer.Analyze(text)) {
      FUZZ_CHECK_MSG(!std::binary_search(query.terms.begin(), query.terms.end(), t), t);
    }
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t k = 0; k < fragments.size(); ++k) {
    const search::HighlightFragment& f = fragments[k];
    FUZZ_CHECK(f.begin < f.end && f.end <= text.size());
    FUZZ_CHECK(f.distinct >= 1);
    if (k > 0) FUZZ_CHECK(fragments[k - 1].distinct >= f.distinct);
    FUZZ_CHECK(f.begin == 0 || !search::IsTokenByte(text[f.begin - 1]) || !search::IsTokenByte(text[f.begin]));
    FUZZ_CHECK(f.end == text.size() || !search::IsTokenByte(text[f.end - 1]) || !search::IsTokenByte(text[f.end]));
    std::string plain;
    std::vector<std::pair<size_t, size_t>> marks;
    FUZZ_CHECK_MSG(search::testing::ParseHighlightHtml(f.html, &plain, &marks), f.html);
    FUZZ_CHECK_MSG(plain == text.substr(f.begin, f.end - f.begin), f.html);
    FUZZ_CHECK(!marks.empty());
    for (const auto& [b, e] : marks) {
      const std::vector<std::string> terms = analyzer.Analyze(std::string_view(plain).substr(b, e - b));
      FUZZ_CHECK(!terms.empty());
      FUZZ_CHECK_MSG(tokens.count(terms.front()) == 1, terms.front());
      FUZZ_CHECK_MSG(tokens.count(terms.back()) == 1, terms.back());
    }
    ranges.emplace_back(f.begin, f.end);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k) FUZZ_CHECK(ranges[k - 1].second <= ranges[k].first);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const search::HighlightOptions options{data[0], 1u + data[1] % 4u};
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t newline = rest.find('\n');
  const std::string_view query = rest.substr(0, newline);
  const std::string_view text = newline == std::string_view::npos ? rest : rest.substr(newline + 1);
  CheckOne(query, text, Analyzer(), options);
  CheckOne(query, text, EnglishAnalyzer(), options);
  return 0;
}
