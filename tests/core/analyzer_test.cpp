#include "core/analyzer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <random>
#include <tuple>
#include <thread>

namespace search {
namespace {

TEST(AnalyzerTest, DefaultTokenizesAsciiAlnumLowercased) {
  Analyzer a;
  EXPECT_EQ(a.Analyze("Hello, World! 42abc x-ray"),
            (std::vector<std::string>{"hello", "world", "42abc", "x", "ray"}));
}

TEST(AnalyzerTest, HighBytesStayInsideTokens) {
  Analyzer a;
  // "Café Ärger": UTF-8 bytes >= 0x80 are token bytes and are not case-folded.
  EXPECT_EQ(a.Analyze("Caf\xC3\xA9 \xC3\x84rger"), (std::vector<std::string>{"caf\xC3\xA9", "\xC3\x84rger"}));
}

TEST(AnalyzerTest, EmptyAndPunctuationOnly) {
  Analyzer a;
  EXPECT_TRUE(a.Analyze("").empty());
  EXPECT_TRUE(a.Analyze("  ,.;!?-- \t\n").empty());
}

TEST(AnalyzerTest, QueryTermsAreUniqueAndSorted) {
  Analyzer a;
  EXPECT_EQ(a.AnalyzeQuery("the cat THE dog cat"), (std::vector<std::string>{"cat", "dog", "the"}));
}

TEST(AnalyzerTest, EnglishStemmingAndStopwords) {
  AnalyzerConfig c;
  c.stem_language = "english";
  c.stopwords = {"the", "of"};
  auto a = Analyzer::Create(c);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->Analyze("The running of the Dogs"), (std::vector<std::string>{"run", "dog"}));
}

TEST(AnalyzerTest, UnknownLanguageRejected) {
  AnalyzerConfig c;
  c.stem_language = "klingon";
  auto a = Analyzer::Create(c);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
}

TEST(AnalyzerTest, ConfigJsonRoundTrip) {
  AnalyzerConfig c;
  c.stem_language = "english";
  c.stopwords = {"a", "an"};
  auto back = AnalyzerConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, c);
  auto none = AnalyzerConfig::FromJson(AnalyzerConfig{}.ToJson());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->stem_language.empty());
}

TEST(AnalyzerTest, BadConfigJsonRejected) {
  for (const char* bad : {"", "[", "[]", "{\"stem\": 5}", "{\"stopwords\": \"x\"}", "{\"stopwords\": [1]}",
                          "{\"tokenizer\": \"whitespace\"}"}) {
    auto r = AnalyzerConfig::FromJson(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(AnalyzerTest, ConcurrentStemmingIsSafe) {
  AnalyzerConfig c;
  c.stem_language = "english";
  auto a = Analyzer::Create(c);
  ASSERT_TRUE(a.ok());
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i)
        if (a->Analyze("connections connected connecting") != std::vector<std::string>{"connect", "connect", "connect"})
          ++bad;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// AnalyzeWithOffsets against an independent reading: the terms are Analyze's, in order; each range
// is one whole token of the text (token bytes inside, separators or the text's ends around it), the
// ranges increase, and the token in a range analyzes alone to its term. Random texts mixing ASCII
// words, stopwords, stemmable forms, punctuation and high bytes, under four analyzer configurations.
TEST(AnalyzerTest, OffsetsAgreeWithAnalyzeOnRandomTexts) {
  std::vector<Analyzer> analyzers;
  analyzers.emplace_back();
  for (int cfg = 1; cfg < 4; ++cfg) {
    AnalyzerConfig c;
    if (cfg & 1) c.stem_language = "english";
    if (cfg & 2) c.stopwords = {"the", "of", "a", "running"};
    auto a = Analyzer::Create(c);
    ASSERT_TRUE(a.ok());
    analyzers.push_back(*a);
  }
  const std::vector<std::string> pieces = {"The", "running", "runs", "Dogs", "of", "a", "A", "x", "42", "ß",
                                           "Caf\xC3\xA9", "\xE2\x82\xAC", "\xFF", " ", "  ", ",", "-", ".\n",
                                           "<&>", "\"", "'", "\t", "ponies", "relational"};
  std::mt19937 rng(51);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      if (rng() % 8 == 0) {
        text.push_back(static_cast<char>(rng() % 256));
      } else {
        text += pieces[rng() % pieces.size()];
      }
    }
    for (const Analyzer& a : analyzers) {
      std::vector<std::string> terms;
      size_t last_end = 0;
      a.AnalyzeWithOffsets(text, [&](std::string_view term, size_t begin, size_t end) {
        terms.emplace_back(term);
        ASSERT_LT(begin, end);
        ASSERT_LE(end, text.size());
        ASSERT_LE(last_end, begin);
        last_end = end;
        EXPECT_TRUE(begin == 0 || !IsTokenByte(static_cast<unsigned char>(text[begin - 1])));
        EXPECT_TRUE(end == text.size() || !IsTokenByte(static_cast<unsigned char>(text[end])));
        for (size_t i = begin; i < end; ++i) EXPECT_TRUE(IsTokenByte(static_cast<unsigned char>(text[i])));
        EXPECT_EQ(a.Analyze(text.substr(begin, end - begin)), (std::vector<std::string>{std::string(term)}));
      });
      EXPECT_EQ(terms, a.Analyze(text)) << "text: " << text;
    }
    std::vector<std::string> tokens;  // the default analyzer is the bare tokenizer
    Analyzer::Tokenize(text, [&](std::string_view t) { tokens.emplace_back(t); });
    EXPECT_EQ(tokens, analyzers[0].Analyze(text));
  }
}

TEST(AnalyzerTest, OffsetsPointAtTheSurfaceForms) {
  AnalyzerConfig c;
  c.stem_language = "english";
  c.stopwords = {"the"};
  auto a = Analyzer::Create(c);
  ASSERT_TRUE(a.ok());
  std::vector<std::tuple<std::string, size_t, size_t>> got;
  a->AnalyzeWithOffsets("The Running, caf\xC3\xA9!", [&](std::string_view t, size_t b, size_t e) {
    got.emplace_back(std::string(t), b, e);
  });
  EXPECT_EQ(got, (std::vector<std::tuple<std::string, size_t, size_t>>{{"run", 4, 11}, {"caf\xC3\xA9", 13, 18}}));
}

// The per-thread stem cache (slots by hash, overwritten on collision) never changes a stem: 20,000
// made-up words, more than the cache holds, stemmed cold on a fresh thread, then again in other
// orders on the same thread (hits, evictions, collisions), always the same terms; a few known stems
// interleaved; tokens longer than a slot.
TEST(AnalyzerTest, StemCacheNeverChangesAStem) {
  AnalyzerConfig c;
  c.stem_language = "english";
  auto a = Analyzer::Create(c);
  ASSERT_TRUE(a.ok());
  std::mt19937 rng(7);
  const char* suffixes[] = {"", "s", "ing", "ed", "ly", "ness", "ational", "ies", "y"};
  std::vector<std::string> words;
  for (int i = 0; i < 20000; ++i) {
    std::string w;
    for (int k = 2 + static_cast<int>(rng() % 8); k > 0; --k) w.push_back(static_cast<char>('a' + rng() % 26));
    words.push_back(w + suffixes[rng() % std::size(suffixes)]);
  }
  words.push_back(std::string(40, 'x') + "ing");  // longer than a slot
  std::vector<std::string> cold;
  std::thread([&] {
    for (const auto& w : words) {
      auto t = a->Analyze(w);
      ASSERT_EQ(t.size(), 1u);
      cold.push_back(t[0]);
    }
  }).join();
  ASSERT_EQ(cold.size(), words.size());
  std::vector<size_t> order(words.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (int round = 0; round < 3; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    std::string text;
    for (size_t i : order) text += words[i] + " running ponies ";
    std::vector<std::string> got = a->Analyze(text);
    ASSERT_EQ(got.size(), 3 * words.size());
    for (size_t k = 0; k < order.size(); ++k) {
      ASSERT_EQ(got[3 * k], cold[order[k]]) << words[order[k]];
      ASSERT_EQ(got[3 * k + 1], "run");
      ASSERT_EQ(got[3 * k + 2], "poni");
    }
  }
}

}  // namespace
}  // namespace search
