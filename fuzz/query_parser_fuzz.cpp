// Fuzz target: the query syntax (core/query_parser.hpp ParseQuerySyntax), what GET /search?q= and
// `searchctl query` hand it. The input is parsed with the default analyzer and with an English
// stemming analyzer with stopwords. An accepted query must be a valid canonical tree of kDefault,
// kMust and kMustNot clauses whose tokens the analyzer produces from the text; with the default
// analyzer its canonical key, which is itself syntax, parses back to the same tree, and a query of
// plain words is the flat Query of Analyzer::AnalyzeQuery. A refused one is an InvalidArgument with
// a bounded message whose position, when it names one, lies inside the text.
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/analyzer.hpp"
#include "core/query_parser.hpp"
#include "core/query_tree.hpp"
#include "fuzz_analyzer.hpp"
#include "fuzz_check.hpp"

namespace {

using search::Analyzer;
using search::Occur;
using search::QueryNode;

using search_fuzz::EnglishAnalyzer;

void CheckOccurrences(const QueryNode& n) {
  for (const QueryNode::Clause& c : n.clauses) {
    FUZZ_CHECK(c.occur == Occur::kDefault || c.occur == Occur::kMust || c.occur == Occur::kMustNot);
    CheckOccurrences(c.node);
  }
}

bool PlainWords(std::string_view text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (!search::IsTokenByte(c) && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f')
      return false;
  }
  return true;
}

void CheckOne(std::string_view text, const Analyzer& analyzer, bool round_trip) {
  auto r = search::ParseQuerySyntax(text, analyzer);
  if (!r.ok()) {
    const search::Status& s = r.status();
    FUZZ_CHECK(s.code() == search::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!s.message().empty());
    FUZZ_CHECK_MSG(s.message().size() <= 512, s.message().substr(0, 512));
    const size_t at = s.message().find("at position ");
    if (at != std::string::npos) {
      const unsigned long pos = std::strtoul(s.message().c_str() + at + 12, nullptr, 10);
      FUZZ_CHECK_MSG(pos < text.size(), s.message());
    }
    return;
  }
  const QueryNode& tree = *r;
  FUZZ_CHECK_MSG(search::ValidateTree(tree).ok(), search::ValidateTree(tree).ToString());
  FUZZ_CHECK(tree == search::Canonicalize(tree));
  CheckOccurrences(tree);

  // Every token of the tree is a token the analyzer makes of the text.
  const std::vector<std::string> all = analyzer.Analyze(text);
  const std::set<std::string> known(all.begin(), all.end());
  for (const std::string& t : search::TreeTerms(tree)) FUZZ_CHECK_MSG(known.count(t) == 1, t);

  if (PlainWords(text)) {
    for (const auto mode : {search::QueryMode::kAnd, search::QueryMode::kOr, search::QueryMode::kAndOr}) {
      const search::Query q = search::MakeQuery(tree, mode, 10, false);
      FUZZ_CHECK(q.tree == nullptr);
      FUZZ_CHECK(q.mode == mode);
      FUZZ_CHECK(q.terms == analyzer.AnalyzeQuery(text));
    }
  }

  if (round_trip) {
    const std::string key = search::CanonicalKey(tree);
    FUZZ_CHECK(key.size() >= 2 && key.front() == '(' && key.back() == ')');
    auto again = search::ParseQuerySyntax(std::string_view(key).substr(1, key.size() - 2), analyzer);
    FUZZ_CHECK_MSG(again.ok(), again.status().ToString() + " for " + key.substr(0, 256));
    FUZZ_CHECK_MSG(*again == tree, key.substr(0, 256));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    CheckOne(text, Analyzer(), /*round_trip=*/true);
    CheckOne(text, EnglishAnalyzer(), /*round_trip=*/false);
  } catch (const std::exception& e) {
    search_fuzz::Fail(__FILE__, __LINE__, "no exception escapes", e.what());
  }
  return 0;
}
