// Highlighting (issue 51): the fragments of a document's text where a query matched, with every
// match wrapped in <em>...</em> and everything else HTML-escaped, as Elasticsearch's `highlight`
// returns them. Matches are found through the analyzer's byte offsets in the original text
// (Analyzer::AnalyzeWithOffsets), so a stemmed index marks every surface form that stems to a query
// term ("running" for the query `runs`), and a phrase is marked where its tokens occur consecutively
// in the analyzed token stream (the phrase semantics of docs/SCORING.md).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/analyzer.hpp"
#include "core/query_tree.hpp"

namespace search {

// What a hit may contain of its query, as analyzed tokens.
struct HighlightTerms {
  std::vector<std::string> terms;                 // marked wherever they occur
  std::vector<std::vector<std::string>> phrases;  // marked (whole span, one <em>) where consecutive
  bool empty() const { return terms.empty() && phrases.empty(); }
};

// Every term and phrase of the tree that is not under a must_not clause (at any depth).
HighlightTerms HighlightTermsOf(const QueryNode& tree);
// A bag of words: its terms.
HighlightTerms HighlightTermsOf(const std::vector<std::string>& terms);

struct HighlightOptions {
  uint32_t fragment_chars = 150;  // about this many bytes of text per fragment
  uint32_t max_fragments = 3;
};

// Up to max_fragments fragments of `text`, each about fragment_chars bytes, never cutting a token
// or a UTF-8 sequence, HTML-escaped (& < > " ') with each match wrapped in <em>...</em>. Fragments
// are chosen by the number of distinct query terms and phrases they hold (more first, then earlier),
// never overlap, and are returned best first. A text with no match gives no fragment.
std::vector<std::string> Highlight(std::string_view text, const Analyzer& analyzer, const HighlightTerms& query,
                                   const HighlightOptions& options = {});

}  // namespace search
