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
//
// Precisely (docs/SCORING.md "Highlighting"): a match is an occurrence of a query term, or of a
// phrase (its tokens at consecutive positions of the analyzed stream), spanning the bytes from its
// first token's begin to its last token's end. Overlapping matches merge into one marked span, one
// <em>. A fragment's core is a run of consecutive marked spans starting at one span and taking the
// following ones while the run fits in fragment_chars bytes (a single span longer than that is a
// core alone); greedily, the core holding the most distinct terms and phrases (ties: the earlier)
// is taken, spans already taken are excluded (a core stops before them), up to max_fragments times.
// Each core then grows with context on both sides to about fragment_chars bytes (halfway to a
// neighbouring core at most), never splitting a token or a marked span: it starts at a token's
// first byte and ends at a token's last, taking along punctuation (separators other than white
// space) right next to those while within fragment_chars. Every marked span inside a fragment is
// marked, core or context.
// Cost: one analysis of the text, then linear in its matches (at most kMaxPhraseTokens trie steps
// per query-token occurrence) and max_fragments passes over the marked spans.
std::vector<std::string> Highlight(std::string_view text, const Analyzer& analyzer, const HighlightTerms& query,
                                   const HighlightOptions& options = {});

// One fragment with where it came from (Highlight returns the html of these, in this order).
struct HighlightFragment {
  size_t begin = 0;       // the text's bytes [begin, end) it shows
  size_t end = 0;
  uint32_t distinct = 0;  // distinct query terms and phrases in its core, what ranked it (context may hold more)
  std::string html;
};
std::vector<HighlightFragment> HighlightFragments(std::string_view text, const Analyzer& analyzer,
                                                  const HighlightTerms& query, const HighlightOptions& options = {});

}  // namespace search
