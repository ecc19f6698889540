// The query language's tree, analyzed: what the parsers (core/query_parser.hpp) produce, what the
// wire carries and what the engines evaluate. docs/SCORING.md "Query language" is the contract.
//
// A tree is a boolean (the root is always kBool) of clauses; a clause has an occurrence and a
// node: a term (one analyzed token), a phrase (two or more analyzed tokens in text order, repeats
// kept) or a nested boolean (a group). A bare clause of the syntax (no + or -) has Occur::kDefault:
// it is kMust under mode `and` and kShould under mode `or` (ResolveMode); `andor` evaluates the
// `and` resolution first and the `or` one when that has fewer than k matches.
//
// Matching and scoring of a resolved boolean (no kDefault left):
//   matches  when every kMust and kFilter clause matches, no kMustNot clause does, and, when it has
//            no kMust or kFilter clause, at least one kShould clause matches. A boolean of kMustNot
//            clauses only matches nothing.
//   score    the float sum, in clause order, of the scores of its matching kMust and kShould
//            clauses (kFilter clauses match without scoring).
// Canonical form (Canonicalize): identical clauses with the same occurrence count once, and the
// clauses of every boolean are sorted by CanonicalKey, which fixes the order in which every engine
// adds their scores. A canonical boolean whose clauses are all terms with one occurrence (kMust,
// kShould or kDefault) is a bag of words: the flat Query {terms, mode} with the same answers.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/query.hpp"

namespace search {

enum class Occur : uint8_t {
  kDefault = 0,  // a bare clause: kMust under mode and, kShould under mode or
  kMust = 1,     // '+', Elasticsearch's must
  kShould = 2,   // Elasticsearch's should
  kMustNot = 3,  // '-', Elasticsearch's must_not
  kFilter = 4,   // Elasticsearch's filter: must match, adds nothing to the score
};

struct QueryNode {
  enum class Kind : uint8_t { kTerm = 0, kPhrase = 1, kBool = 2 };
  struct Clause;

  Kind kind = Kind::kBool;
  std::vector<std::string> tokens;  // kTerm: exactly one; kPhrase: two or more, in text order
  std::vector<Clause> clauses;      // kBool: its clauses (may be empty only before validation)

  bool operator==(const QueryNode&) const = default;
};

struct QueryNode::Clause {
  Occur occur = Occur::kDefault;
  QueryNode node;
  bool operator==(const Clause&) const = default;
};

// Limits that keep an untrusted tree bounded (parsers and the wire decoder enforce them).
inline constexpr uint32_t kMaxTreeDepth = 8;       // nested booleans below the root
inline constexpr uint32_t kMaxTreeClauses = 1024;  // clauses in the whole tree
inline constexpr uint32_t kMaxPhraseTokens = 64;

// The canonical text of a node, which is also its sort key: a term is its bytes; a phrase is
// `"` + tokens joined by ' ' + `"`; a boolean is `(` + its clauses joined by ' ' + `)`, each clause
// prefixed by its occurrence ('+' must, '-' must_not, '~' should, '#' filter, nothing for default).
std::string CanonicalKey(const QueryNode& node);

// The tree with every kDefault replaced as `mode` says (kAnd -> kMust, kOr -> kShould).
// REQUIRES: mode is kAnd or kOr.
QueryNode ResolveMode(const QueryNode& tree, QueryMode mode);

// Canonical form, bottom-up: a phrase of one token becomes a term; a group (a non-root boolean) of
// one kMust, kShould or kDefault clause becomes that clause's node; identical clauses (same
// occurrence, same CanonicalKey) count once; clauses sorted by (CanonicalKey, occurrence).
QueryNode Canonicalize(QueryNode tree);

// InvalidArgument unless: the root is kBool; terms have one non-empty token; phrases 2 ..
// kMaxPhraseTokens non-empty tokens; booleans at least one clause; depth <= kMaxTreeDepth;
// clauses <= kMaxTreeClauses.
Status ValidateTree(const QueryNode& tree);

// Every distinct token of the tree, sorted ascending (what a node looks up).
std::vector<std::string> TreeTerms(const QueryNode& tree);

// True when the tree holds a phrase anywhere (positions needed).
bool TreeHasPhrase(const QueryNode& tree);

// When the canonical `tree` is a bag of words (every clause a term, all with the same occurrence
// among kDefault, kMust, kShould), the equivalent flat mode given the request's `mode`: kDefault
// keeps `mode`, kMust is kAnd, kShould is kOr. Otherwise false.
bool AsFlatQuery(const QueryNode& tree, QueryMode mode, std::vector<std::string>* terms, QueryMode* flat_mode);

// The Query for a parsed tree: canonicalizes it; when the canonical tree is a bag of words
// (AsFlatQuery) and no count is asked, the flat Query {terms, flat mode, k} (tree null), which
// every engine answers as before; otherwise {TreeTerms, mode, k, the canonical tree, count}.
// Does not validate: give it a validated tree (the parsers return one).
Query MakeQuery(QueryNode tree, QueryMode mode, uint32_t k, bool count);

}  // namespace search
