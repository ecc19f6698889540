#include "core/analyzer.hpp"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace search
