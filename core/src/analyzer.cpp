#include "core/analyzer.hpp"

#include <libstemmer.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace search {

namespace {

// One language's stemmer for one thread (libstemmer instances are not thread-safe), with a
// direct-mapped cache of recent stems: text repeats its words (Zipf), and a cache hit costs a hash
// and a compare where libstemmer costs ~100 ns a word. Stemming is a pure function of the token,
// so the cache never changes a term.
class ThreadStemmer {
 public:
  explicit ThreadStemmer(const std::string& lang) : stemmer_(sb_stemmer_new(lang.c_str(), "UTF_8")) {}
  ~ThreadStemmer() {
    if (stemmer_ != nullptr) sb_stemmer_delete(stemmer_);
  }
  ThreadStemmer(const ThreadStemmer&) = delete;
  ThreadStemmer& operator=(const ThreadStemmer&) = delete;

  // The stem of `token` into *out. False when libstemmer failed (out of memory): keep the token.
  bool Stem(std::string_view token, std::string* out) {
    if (stemmer_ == nullptr) return false;
    Slot* slot = nullptr;
    if (token.size() <= kSlotBytes) {
      if (cache_ == nullptr) cache_ = std::make_unique<Slot[]>(kSlots);
      slot = &cache_[std::hash<std::string_view>{}(token) & (kSlots - 1)];
      if (slot->token_len == token.size() && std::memcmp(slot->token, token.data(), token.size()) == 0 &&
          slot->stem_len != kEmpty) {
        out->assign(slot->stem, slot->stem_len);
        return true;
      }
    }
    const sb_symbol* s = sb_stemmer_stem(stemmer_, reinterpret_cast<const sb_symbol*>(token.data()),
                                         static_cast<int>(token.size()));
    if (s == nullptr) return false;
    out->assign(reinterpret_cast<const char*>(s), static_cast<size_t>(sb_stemmer_length(stemmer_)));
    if (slot != nullptr) {
      if (out->size() <= kSlotBytes) {
        slot->token_len = static_cast<uint8_t>(token.size());
        std::memcpy(slot->token, token.data(), token.size());
        slot->stem_len = static_cast<uint8_t>(out->size());
        std::memcpy(slot->stem, out->data(), out->size());
      } else {
        slot->stem_len = kEmpty;
      }
    }
    return true;
  }

 private:
  // A slot is one cache line: a token and its stem of up to kSlotBytes each (longer ones, rare,
  // are stemmed every time). 4096 slots, 256 KiB per thread and language, hold the frequent part
  // of a language's running text (bench/core/highlight_bench, BM_Analyze with stemming).
  static constexpr size_t kSlots = 4096;  // a power of two
  static constexpr size_t kSlotBytes = 31;
  static constexpr uint8_t kEmpty = 0xFF;
  struct Slot {
    uint8_t token_len = 0;
    uint8_t stem_len = kEmpty;
    char token[kSlotBytes];
    char stem[kSlotBytes];
  };
  static_assert(sizeof(Slot) == 64);
  sb_stemmer* stemmer_;
  std::unique_ptr<Slot[]> cache_;  // allocated on first use
};

// This thread's stemmer for each language it has used.
class ThreadStemmers {
 public:
  ThreadStemmer* Get(const std::string& lang) {
    auto it = stemmers_.find(lang);
    if (it != stemmers_.end()) return it->second.get();
    return stemmers_.emplace(lang, std::make_unique<ThreadStemmer>(lang)).first->second.get();
  }

 private:
  std::unordered_map<std::string, std::unique_ptr<ThreadStemmer>> stemmers_;
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
// IsTokenByte as a table: the tokenizer's inner loop.
const std::array<bool, 256> kTokenBytes = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = IsTokenByte(static_cast<unsigned char>(c));
  return t;
}();

template <class Fn>
void ForEachTerm(const std::unordered_set<std::string>& stopwords, const std::string& stem_language,
                 std::string_view text, Fn&& fn) {
  ThreadStemmer* stemmer = stem_language.empty() ? nullptr : t_stemmers.Get(stem_language);
  std::string token;
  std::string stem;  // per call, so that fn may analyze again on this thread
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && !kTokenBytes[static_cast<unsigned char>(text[i])]) ++i;
    if (i >= n) break;
    const size_t begin = i;
    while (i < n && kTokenBytes[static_cast<unsigned char>(text[i])]) ++i;
    token.assign(text.data() + begin, i - begin);
    for (char& ch : token) {
      const auto c = static_cast<unsigned char>(ch);
      if (c >= 'A' && c <= 'Z') ch = static_cast<char>(c + 32);
    }
    if (!stopwords.empty() && stopwords.count(token) != 0) continue;
    if (stemmer != nullptr && stemmer->Stem(token, &stem)) {
      fn(std::string_view(stem), begin, i);
    } else {
      fn(std::string_view(token), begin, i);
    }
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
