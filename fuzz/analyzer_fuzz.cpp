// Fuzz target: the analyzer and query parsing (core/analyzer.hpp, core/query.hpp).
// The input is, at once: text for the default and the stemming analyzers (checked against an
// independent reference tokenizer), a query mode name, an analyzer config as recorded in an index
// or reported by a node over the wire (AnalyzerConfig::FromJson, checked to round-trip through
// ToJson), and a stopword file (AnalyzerConfig::ReadStopwordFile).
#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/analyzer.hpp"
#include "core/query.hpp"
#include "fuzz_check.hpp"

namespace {

using search::Analyzer;
using search::AnalyzerConfig;

// The docs/SCORING.md tokenizer, written independently of core/: maximal runs of [0-9A-Za-z] or bytes
// >= 0x80, ASCII letters lowercased.
std::vector<std::string> ReferenceTokens(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
    if (alnum) {
      cur.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::vector<std::string> SortedUnique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

const std::vector<std::string>& EnglishStopwords() {
  static const std::vector<std::string> words = {"a", "and", "of", "the", "to"};
  return words;
}

const Analyzer& EnglishAnalyzer() {
  static const Analyzer a = [] {
    AnalyzerConfig c;
    c.stem_language = "english";
    c.stopwords = EnglishStopwords();
    auto r = Analyzer::Create(c);
    FUZZ_CHECK_MSG(r.ok(), r.status().ToString());
    return *r;
  }();
  return a;
}

// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), the rule
// nlohmann's dump enforces.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t lo = 0x80, hi = 0xbf;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xbf)) return false;
    }
    i += n + 1;
  }
  return true;
}

bool SameConfig(const AnalyzerConfig& a, const AnalyzerConfig& b) {
  return a.stem_language == b.stem_language && a.stopwords == b.stopwords;
}

// ToJson of a config whose strings may hold any bytes. nlohmann's dump throws type_error 316 on
// strings that are not valid UTF-8; the one caller that builds configs from raw bytes (the index
// builder's --stopwords file) catches that (index_store/src/shard_format.cpp AnalyzerToJson), so
// it is tolerated here only when the config really holds invalid UTF-8. Otherwise ToJson must
// give JSON that FromJson reads back as the same config.
bool ToJsonRoundTrips(const AnalyzerConfig& c, bool may_hold_invalid_utf8) {
  std::string json;
  try {
    json = c.ToJson();
  } catch (const std::exception& e) {
    FUZZ_CHECK_MSG(may_hold_invalid_utf8, e.what());
    return false;
  }
  auto back = AnalyzerConfig::FromJson(json);
  FUZZ_CHECK_MSG(back.ok(), back.status().ToString() + " for " + json);
  FUZZ_CHECK_MSG(SameConfig(*back, c), json);
  return true;
}

void CheckTokenizer(std::string_view text) {
  const std::vector<std::string> ref = ReferenceTokens(text);
  std::vector<std::string> got;
  Analyzer::Tokenize(text, [&](std::string_view t) { got.emplace_back(t); });
  FUZZ_CHECK(got == ref);

  static const Analyzer kDefault;
  FUZZ_CHECK(kDefault.Analyze(text) == ref);
  const std::vector<std::string> query = kDefault.AnalyzeQuery(text);
  FUZZ_CHECK(query == SortedUnique(ref));

  // Stemming and stopwords: one term per token that is not a stopword, every term non-empty
  // (an empty term would be refused on the wire and fail the whole query).
  const auto& stop = EnglishStopwords();
  size_t kept = 0;
  for (const auto& t : ref) kept += std::find(stop.begin(), stop.end(), t) == stop.end();
  const std::vector<std::string> stemmed = EnglishAnalyzer().Analyze(text);
  FUZZ_CHECK(stemmed.size() == kept);
  for (const auto& t : stemmed) FUZZ_CHECK(!t.empty());
  const std::vector<std::string> stemmed_query = EnglishAnalyzer().AnalyzeQuery(text);
  FUZZ_CHECK(stemmed_query == SortedUnique(stemmed));
}

void CheckQueryModeAndK(std::string_view text) {
  auto mode = search::ParseQueryMode(text);
  if (mode.ok()) {
    FUZZ_CHECK(search::QueryModeName(*mode) == text);
  } else {
    FUZZ_CHECK(mode.status().code() == search::StatusCode::kInvalidArgument);
  }
  int64_t k = 0;
  for (size_t i = 0; i < text.size() && i < 8; ++i) k = (k << 8) | static_cast<unsigned char>(text[i]);
  const search::Status st = search::ValidateK(k);
  FUZZ_CHECK(st.ok() == (k >= 1 && k <= search::kMaxK));
}

void CheckConfigJson(std::string_view text) {
  auto config = AnalyzerConfig::FromJson(text);
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == search::StatusCode::kInvalidArgument);
    return;
  }
  // FromJson accepts only valid JSON, so its strings are valid UTF-8 and must round-trip.
  ToJsonRoundTrips(*config, /*may_hold_invalid_utf8=*/false);
  auto analyzer = Analyzer::Create(*config);
  if (!analyzer.ok()) {
    FUZZ_CHECK(analyzer.status().code() == search::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!config->stem_language.empty());
    return;
  }
  // Stopwords are matched before stemming; without stemming, the terms are exactly the reference
  // tokens minus the stopwords.
  const std::vector<std::string> terms = analyzer->Analyze(text);
  if (config->stem_language.empty()) {
    const std::unordered_set<std::string> stop(config->stopwords.begin(), config->stopwords.end());
    std::vector<std::string> want;
    for (auto& t : ReferenceTokens(text)) {
      if (stop.count(t) == 0) want.push_back(std::move(t));
    }
    FUZZ_CHECK(terms == want);
  }
}

void CheckStopwordFile(const uint8_t* data, size_t size) {
  static search_fuzz::ScratchFile file;
  file.Write(data, size);
  auto words = AnalyzerConfig::ReadStopwordFile(file.path());
  FUZZ_CHECK_MSG(words.ok(), words.status().ToString());
  FUZZ_CHECK(std::is_sorted(words->begin(), words->end()));
  FUZZ_CHECK(std::adjacent_find(words->begin(), words->end()) == words->end());
  // Every word is one reference token of the text before a '#' on its line.
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> want;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    line = line.substr(0, line.find('#'));
    for (auto& t : ReferenceTokens(line)) want.push_back(std::move(t));
    pos = nl + 1;
  }
  FUZZ_CHECK(*words == SortedUnique(want));
  AnalyzerConfig c;
  c.stopwords = *words;
  const bool all_utf8 = std::all_of(c.stopwords.begin(), c.stopwords.end(), IsValidUtf8);
  ToJsonRoundTrips(c, /*may_hold_invalid_utf8=*/!all_utf8);
  auto a = Analyzer::Create(c);
  FUZZ_CHECK(a.ok());
  for (const auto& t : a->Analyze(text)) FUZZ_CHECK(!std::binary_search(words->begin(), words->end(), t));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckTokenizer(text);
  CheckQueryModeAndK(text);
  CheckConfigJson(text);
  CheckStopwordFile(data, size);
  return 0;
}
