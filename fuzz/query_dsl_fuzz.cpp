// Fuzz target: the Elasticsearch query DSL subset (core/query_parser.hpp ParseSearchDsl), what
// POST /search, /_search and /_count hand it. The input is a request body, parsed with the default
// analyzer and with an English stemming analyzer with stopwords. No exception may escape. An
// accepted body must give a valid canonical tree without kDefault occurrences and a size within
// 0..kMaxK; with the default analyzer the tree, written back as DSL (bool / term / match_phrase),
// parses to the same tree. A refused one is an InvalidArgument with a bounded message.
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/analyzer.hpp"
#include "core/query_parser.hpp"
#include "core/query_tree.hpp"
#include "fuzz_analyzer.hpp"
#include "fuzz_check.hpp"

namespace {

using search::Analyzer;
using search::Occur;
using search::QueryNode;
using json = nlohmann::json;

using search_fuzz::EnglishAnalyzer;

void CheckNoDefault(const QueryNode& n) {
  for (const QueryNode::Clause& c : n.clauses) {
    FUZZ_CHECK(c.occur != Occur::kDefault);
    CheckNoDefault(c.node);
  }
}

const char* OccurKey(Occur o) {
  switch (o) {
    case Occur::kMust:
      return "must";
    case Occur::kShould:
      return "should";
    case Occur::kMustNot:
      return "must_not";
    case Occur::kFilter:
      return "filter";
    case Occur::kDefault:
      break;
  }
  search_fuzz::Fail(__FILE__, __LINE__, "no kDefault in a DSL tree", "");
}

// The DSL query for a node: a term query, a match_phrase, or a bool of its clauses.
json ToDsl(const QueryNode& n) {
  if (n.kind == QueryNode::Kind::kTerm) return {{"term", {{"contents", n.tokens.front()}}}};
  if (n.kind == QueryNode::Kind::kPhrase) {
    std::string text;
    for (const std::string& t : n.tokens) text += (text.empty() ? "" : " ") + t;
    return {{"match_phrase", {{"contents", text}}}};
  }
  json b = json::object();
  for (const QueryNode::Clause& c : n.clauses) {
    json& list = b[OccurKey(c.occur)];
    if (list.is_null()) list = json::array();
    list.push_back(ToDsl(c.node));
  }
  return {{"bool", b}};
}

void CheckOne(std::string_view body, const Analyzer& analyzer, bool round_trip) {
  auto r = search::ParseSearchDsl(body, analyzer);
  if (!r.ok()) {
    const search::Status& s = r.status();
    FUZZ_CHECK(s.code() == search::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!s.message().empty());
    FUZZ_CHECK_MSG(s.message().size() <= 512, s.message().substr(0, 512));
    return;
  }
  const QueryNode& tree = r->tree;
  FUZZ_CHECK_MSG(search::ValidateTree(tree).ok(), search::ValidateTree(tree).ToString());
  FUZZ_CHECK(tree == search::Canonicalize(tree));
  CheckNoDefault(tree);
  FUZZ_CHECK(!r->size || *r->size <= search::kMaxK);

  if (round_trip) {
    json again_body = {{"query", ToDsl(tree)}};
    if (r->size) again_body["size"] = *r->size;
    if (r->track_total_hits) again_body["track_total_hits"] = *r->track_total_hits;
    const std::string text = again_body.dump();
    auto again = search::ParseSearchDsl(text, analyzer);
    FUZZ_CHECK_MSG(again.ok(), again.status().ToString() + " for " + text.substr(0, 256));
    FUZZ_CHECK_MSG(again->tree == tree, text.substr(0, 256));
    FUZZ_CHECK(again->size == r->size && again->track_total_hits == r->track_total_hits);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    CheckOne(body, Analyzer(), /*round_trip=*/true);
    CheckOne(body, EnglishAnalyzer(), /*round_trip=*/false);
  } catch (const std::exception& e) {
    search_fuzz::Fail(__FILE__, __LINE__, "no exception escapes", e.what());
  }
  return 0;
}
