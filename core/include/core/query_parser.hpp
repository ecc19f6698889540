// The query language's two front ends: the syntax (a subset of Lucene's classic query parser) and
// a subset of Elasticsearch's query DSL. Both analyze their text with the index's Analyzer and
// return a validated canonical tree (core/query_tree.hpp); docs/SCORING.md "Query language" says
// how a tree matches and scores.
// Thread-safety: pure functions (the Analyzer is immutable).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/analyzer.hpp"
#include "core/query_tree.hpp"
#include "core/status.hpp"

namespace search {

// The syntax:  query := clause*   clause := [+|-] ( word | "phrase" | ( query ) )
//   - A clause without a sign is Occur::kDefault ('+' kMust, '-' kMustNot). A sign is an operator
//     only at the start of a clause: `wi-fi` is one word, `+-a` is '+' and the word `-a`.
//     Whitespace may follow a sign, as in Lucene's classic parser: `a - b` is `a -b`.
//   - A word is a maximal run of bytes other than whitespace (space, \t, \n, \v, \f, \r) and
//     `" ( )`. A phrase is the bytes between two double quotes. Both are analyzed with
//     analyzer.Analyze (stemming and stopwords apply, other punctuation separates tokens): no token
//     drops the clause, one token is a term, several are a phrase of them (text order, repeats
//     kept). A group whose clauses were all dropped is dropped.
//   - So a bag of words `a b c` is three kDefault terms: MakeQuery gives the flat Query of
//     Analyzer::AnalyzeQuery under the request's mode, as before the query language.
// Errors (InvalidArgument; N is a 0-based byte position in `text`): "unclosed quote at position N"
// (the opening quote), "unclosed parenthesis at position N", "unmatched ')' at position N",
// "'+' at position N has nothing after it" (only whitespace, then ')' or the end), parentheses
// nested deeper than kMaxTreeDepth, more than kMaxTreeClauses clauses, a phrase of more than
// kMaxPhraseTokens tokens, and "the query has no searchable terms" when no clause is left.
// Returns a canonical tree (Canonicalize) that passes ValidateTree; its root is kBool.
Result<QueryNode> ParseQuerySyntax(std::string_view text, const Analyzer& analyzer);

// A search request body in Elasticsearch's query DSL (POST /search, /_search, /_count).
struct SearchBody {
  QueryNode tree;                        // validated, canonical; no Occur::kDefault anywhere
  std::optional<uint32_t> size;          // "size": 0..kMaxK (0: no hits, the count only)
  std::optional<bool> track_total_hits;  // "track_total_hits": true or false
  std::optional<bool> source;            // "_source": true or false (hits carry their stored source)
  bool highlight = false;                // "highlight": {"fields": {"contents": {}}} was given
};

// The DSL subset, field `contents` only:
//   {"query": Q, "size": n, "track_total_hits": true|false, "_source": true|false,
//    "highlight": {"fields": {"contents": {}}}}                  "query" is required
//   Q := {"bool": {"must"|"should"|"must_not"|"filter": Q or [Q, ...], ...}}
//      | {"match": {"contents": "text"}} | {"match": {"contents": {"query": "text", "operator": "or"|"and"}}}
//      | {"match_phrase": {"contents": "text"}} | {"match_phrase": {"contents": {"query": "text"}}}
//      | {"term": {"contents": "value"}} | {"term": {"contents": {"value": "value"}}}
// As in Elasticsearch: a bool with must or filter clauses needs none of its should clauses; one
// without needs at least one; filter matches without scoring; must_not excludes. `match` analyzes
// its text into a boolean of its terms, each kShould (operator or, the default) or kMust (and),
// never a phrase; `match_phrase` analyzes into a phrase (one token: a term). `term` is not
// analyzed, as in Elasticsearch, except that its value is lowercased by the tokenizer
// (Analyzer::Tokenize: no stemming, no stopwords) and must be exactly one token.
// Differences from Elasticsearch: a match or match_phrase whose text analyzes to no token is
// dropped (as in the syntax) rather than matching nothing; a bool of must_not clauses only (which
// Elasticsearch answers as "everything but") and an empty bool are refused, as match_all is.
// Errors (InvalidArgument) name the JSON path of the unsupported or bad part, e.g.
// "query.bool.must[1]: unsupported query type 'range'": invalid JSON, a repeated key, a wrong JSON
// type, any other key, query type or field, an integer track_total_hits, size outside 0..kMaxK,
// the limits of query_tree.hpp, and a query that has no searchable terms.
Result<SearchBody> ParseSearchDsl(std::string_view json, const Analyzer& analyzer);

// A "highlight" value of the DSL, as JSON text: {"fields": {"contents": {}}} is the only form (the
// field contents, no options); true when valid. InvalidArgument naming the path otherwise, e.g.
// "highlight.fields.title: only the field 'contents' can be highlighted".
Result<bool> ParseHighlightDsl(std::string_view json);

}  // namespace search
