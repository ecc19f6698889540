#include "core/analyzer.hpp"

#include <libstemmer.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace search {

namespace {

// One sb_stemmer per (thread, language): libstemmer instances are not thread-safe.
class ThreadStemmers {
 public:
  ~ThreadStemmers() {
    for (auto& [lang, s] : stemmers_) sb_stemmer_delete(s);
  }
  sb_stemmer* Get(const std::string& lang) {
    auto it = stemmers_.find(lang);
    if (it != stemmers_.end()) return it->second;
    sb_stemmer* s = sb_stemmer_new(lang.c_str(), "UTF_8");
    stemmers_.emplace(lang, s);
    return s;
  }

 private:
  std::unordered_map<std::string, sb_stemmer*> stemmers_;
};

thread_local ThreadStemmers t_stemmers;

}  // namespace

struct Analyzer::Impl {
  std::unordered_set<std::string> stopwords;
  std::string stem_language;
};

std::string AnalyzerConfig::ToJson() const {
  nlohmann::json j;
  j["tokenizer"] = "ascii-alnum-lower";
  j["stem"] = stem_language.empty() ? nlohmann::json(nullptr) : nlohmann::json(stem_language);
  j["stopwords"] = stopwords;
  return j.dump();
}

Result<AnalyzerConfig> AnalyzerConfig::FromJson(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("analyzer config is not a JSON object");
  AnalyzerConfig c;
  if (j.contains("tokenizer") && j["tokenizer"] != "ascii-alnum-lower")
    return Status::InvalidArgument("unknown tokenizer in analyzer config");
  if (j.contains("stem") && !j["stem"].is_null()) {
    if (!j["stem"].is_string()) return Status::InvalidArgument("analyzer 'stem' must be a string or null");
    c.stem_language = j["stem"].get<std::string>();
  }
  if (j.contains("stopwords")) {
    if (!j["stopwords"].is_array()) return Status::InvalidArgument("analyzer 'stopwords' must be an array");
    for (const auto& w : j["stopwords"]) {
      if (!w.is_string()) return Status::InvalidArgument("analyzer stopwords must be strings");
      c.stopwords.push_back(w.get<std::string>());
    }
  }
  return c;
}

Result<std::vector<std::string>> AnalyzerConfig::ReadStopwordFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot open stopword file " + path);
  std::vector<std::string> words;
  std::string line;
  while (std::getline(in, line)) {
    auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    Analyzer::Tokenize(line, [&](std::string_view t) { words.emplace_back(t); });
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

Analyzer::Analyzer() : impl_(std::make_shared<Impl>()) {}

Result<Analyzer> Analyzer::Create(AnalyzerConfig config) {
  auto impl = std::make_shared<Impl>();
  if (!config.stem_language.empty()) {
    sb_stemmer* probe = sb_stemmer_new(config.stem_language.c_str(), "UTF_8");
    if (probe == nullptr) return Status::InvalidArgument("unknown stemming language '" + config.stem_language + "'");
    sb_stemmer_delete(probe);
    impl->stem_language = config.stem_language;
  }
  impl->stopwords.insert(config.stopwords.begin(), config.stopwords.end());
  Analyzer a;
  a.config_ = std::move(config);
  a.impl_ = std::move(impl);
  return a;
}

namespace {

// The one analysis loop behind Analyze and AnalyzeWithOffsets, so the two agree by construction:
// fn(term, begin, end) for each term of `text`, [begin, end) its token's bytes. Tokens as
// Analyzer::Tokenize cuts them; stopwords dropped before stemming.
template <class Fn>
void ForEachTerm(const std::unordered_set<std::string>& stopwords, const std::string& stem_language,
                 std::string_view text, Fn&& fn) {
  sb_stemmer* stemmer = stem_language.empty() ? nullptr : t_stemmers.Get(stem_language);
  std::string token;
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && !IsTokenByte(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= n) break;
    const size_t begin = i;
    token.clear();
    while (i < n && IsTokenByte(static_cast<unsigned char>(text[i]))) {
      unsigned char c = static_cast<unsigned char>(text[i]);
      token.push_back(static_cast<char>((c >= 'A' && c <= 'Z') ? c + 32 : c));
      ++i;
    }
    if (!stopwords.empty() && stopwords.count(token) != 0) continue;
    if (stemmer == nullptr) {
      fn(std::string_view(token), begin, i);
      continue;
    }
    const sb_symbol* s = sb_stemmer_stem(stemmer, reinterpret_cast<const sb_symbol*>(token.data()),
                                         static_cast<int>(token.size()));
    if (s == nullptr) {  // out of memory inside libstemmer: keep the unstemmed token
      fn(std::string_view(token), begin, i);
      continue;
    }
    fn(std::string_view(reinterpret_cast<const char*>(s), static_cast<size_t>(sb_stemmer_length(stemmer))), begin,
       i);
  }
}

}  // namespace

void Analyzer::Analyze(std::string_view text, std::vector<std::string>* out) const {
  ForEachTerm(impl_->stopwords, impl_->stem_language, text,
              [&](std::string_view term, size_t, size_t) { out->emplace_back(term); });
}

void Analyzer::AnalyzeWithOffsets(
    std::string_view text, const std::function<void(std::string_view term, size_t begin, size_t end)>& fn) const {
  ForEachTerm(impl_->stopwords, impl_->stem_language, text, fn);
}

std::vector<std::string> Analyzer::AnalyzeQuery(std::string_view text) const {
  std::vector<std::string> terms = Analyze(text);
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  return terms;
}

}  // namespace search
