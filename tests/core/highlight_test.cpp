#include "core/highlight.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/query_parser.hpp"
#include "highlight_html.hpp"

namespace search {
namespace {

Analyzer MakeAnalyzer(bool stem, std::vector<std::string> stopwords) {
  AnalyzerConfig c;
  if (stem) c.stem_language = "english";
  c.stopwords = std::move(stopwords);
  auto a = Analyzer::Create(c);
  EXPECT_TRUE(a.ok());
  return *a;
}

HighlightTerms Terms(std::vector<std::string> terms, std::vector<std::vector<std::string>> phrases = {}) {
  HighlightTerms q;
  q.terms = std::move(terms);
  q.phrases = std::move(phrases);
  return q;
}

std::vector<std::string> One(std::string_view text, const Analyzer& a, const HighlightTerms& q,
                             uint32_t fragment_chars = 150, uint32_t max_fragments = 3) {
  return Highlight(text, a, q, HighlightOptions{fragment_chars, max_fragments});
}

using Frags = std::vector<std::string>;

// ---- Terms of a query ----

TEST(HighlightTest, TermsOfATreeSkipMustNotAtAnyDepth) {
  Analyzer a;
  auto tree = ParseQuerySyntax("heart +\"of gold\" -towel (zaphod -(marvin \"deep thought\") x-ray) heart", a);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  HighlightTerms q = HighlightTermsOf(*tree);
  EXPECT_EQ(q.terms, (std::vector<std::string>{"heart", "zaphod"}));
  EXPECT_EQ(q.phrases, (std::vector<std::vector<std::string>>{{"of", "gold"}, {"x", "ray"}}));
}

TEST(HighlightTest, TermsOfABagOfWordsAreItsTermsOnce) {
  HighlightTerms q = HighlightTermsOf(std::vector<std::string>{"b", "a", "b"});
  EXPECT_EQ(q.terms, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(q.phrases.empty());
}

// ---- Marking ----

TEST(HighlightTest, MarksTermsAndEscapesTheRest) {
  Analyzer a;
  EXPECT_EQ(One("Tom & Jerry's <b>heart</b> of \"Gold\"", a, Terms({"heart", "gold"})),
            (Frags{"Tom &amp; Jerry&#39;s &lt;b&gt;<em>heart</em>&lt;/b&gt; of &quot;<em>Gold</em>&quot;"}));
}

TEST(HighlightTest, NoMatchGivesNoFragment) {
  Analyzer a;
  EXPECT_TRUE(One("nothing to see", a, Terms({"heart"})).empty());
  EXPECT_TRUE(One("", a, Terms({"heart"})).empty());
  EXPECT_TRUE(One("heart", a, Terms({})).empty());
  EXPECT_TRUE(One("heart", a, Terms({"heart"}), 150, 0).empty());
  // A phrase whose tokens occur, but not consecutively.
  EXPECT_TRUE(One("gold heart", a, Terms({}, {{"heart", "gold"}})).empty());
}

TEST(HighlightTest, TermsAtTheTextsStartAndEnd) {
  Analyzer a;
  EXPECT_EQ(One("heart", a, Terms({"heart"})), (Frags{"<em>heart</em>"}));
  EXPECT_EQ(One("Heart of gold", a, Terms({"heart", "gold"})), (Frags{"<em>Heart</em> of <em>gold</em>"}));
  EXPECT_EQ(One("  heart, of gold!  ", a, Terms({"heart", "gold"})), (Frags{"<em>heart</em>, of <em>gold</em>!"}));
}

TEST(HighlightTest, AdjacentMatchesAreSeparateMarks) {
  Analyzer a;
  EXPECT_EQ(One("a heart heart-gold b", a, Terms({"heart", "gold"})),
            (Frags{"a <em>heart</em> <em>heart</em>-<em>gold</em> b"}));
}

TEST(HighlightTest, StemmedIndexMarksSurfaceForms) {
  Analyzer a = MakeAnalyzer(true, {});
  // The query `runs` analyzes to "run": every form that stems to it is marked.
  HighlightTerms q = Terms(a.AnalyzeQuery("runs"));
  EXPECT_EQ(One("He runs, running; the Runner ran. RUN!", a, q),
            (Frags{"He <em>runs</em>, <em>running</em>; the Runner ran. <em>RUN</em>!"}));
}

TEST(HighlightTest, PhraseIsOneSpanAcrossStopwordsAndPunctuation) {
  Analyzer a = MakeAnalyzer(false, {"of", "the"});
  // With "of" a stopword, the phrase "heart of gold" is the tokens heart gold, consecutive positions.
  auto tree = ParseQuerySyntax("\"heart of gold\"", a);
  ASSERT_TRUE(tree.ok());
  HighlightTerms q = HighlightTermsOf(*tree);
  EXPECT_EQ(q.phrases, (std::vector<std::vector<std::string>>{{"heart", "gold"}}));
  EXPECT_EQ(One("The Heart -- of the... GOLD, and heart, gold; heart x gold", a, q),
            (Frags{"The <em>Heart -- of the... GOLD</em>, and <em>heart, gold</em>; heart x gold"}));
}

TEST(HighlightTest, OverlappingPhrasesAndTermsMergeIntoOneMark) {
  Analyzer a;
  // "a a" in `a a a` matches twice, overlapping: one mark. A term inside a phrase joins its mark.
  EXPECT_EQ(One("x a a a y", a, Terms({}, {{"a", "a"}})), (Frags{"x <em>a a a</em> y"}));
  EXPECT_EQ(One("x b c d e", a, Terms({"c", "e"}, {{"b", "c"}, {"c", "d"}})), (Frags{"x <em>b c d</em> <em>e</em>"}));
}

TEST(HighlightTest, PhrasesSharingAPrefix) {
  Analyzer a;
  const HighlightTerms q = Terms({}, {{"a", "b"}, {"a", "b", "c"}, {"b", "d"}, {"a", "b", "c", "e"}});
  auto frags = HighlightFragments("x a b c y a b d z a c", a, q);
  ASSERT_EQ(frags.size(), 1u);
  EXPECT_EQ(frags[0].html, "x <em>a b c</em> y <em>a b d</em> z a c");
  EXPECT_EQ(frags[0].distinct, 3u);  // "a b", "a b c", "b d"
}

TEST(HighlightTest, Utf8WordsStayWhole) {
  Analyzer a;
  // "Café" is one token (high bytes are token bytes); marks and cuts never fall inside it.
  const std::string text = "Le caf\xC3\xA9 na\xC3\xAFve, caf\xC3\xA9!";
  EXPECT_EQ(One(text, a, Terms({"caf\xC3\xA9"})),
            (Frags{"Le <em>caf\xC3\xA9</em> na\xC3\xAFve, <em>caf\xC3\xA9</em>!"}));
  // "caf" alone is not a token of this text.
  EXPECT_TRUE(One(text, a, Terms({"caf"})).empty());
}

TEST(HighlightTest, FragmentsAreBestFirstAndDoNotOverlap) {
  Analyzer a;
  std::string filler;
  for (int i = 0; i < 30; ++i) filler += " lorem ipsum";
  // Three regions: one with heart, one with heart and gold, one with gold.
  const std::string text = "heart" + filler + " heart of gold" + filler + " gold" + filler;
  auto frags = HighlightFragments(text, a, Terms({"heart", "gold"}), HighlightOptions{40, 3});
  ASSERT_EQ(frags.size(), 3u);
  EXPECT_EQ(frags[0].distinct, 2u);
  EXPECT_NE(frags[0].html.find("<em>heart</em> of <em>gold</em>"), std::string::npos) << frags[0].html;
  EXPECT_EQ(frags[1].distinct, 1u);
  EXPECT_EQ(frags[1].begin, 0u);  // ties: the earlier first
  EXPECT_EQ(frags[2].distinct, 1u);
  EXPECT_GT(frags[2].begin, frags[0].end);
  for (const auto& f : frags) EXPECT_LE(f.end - f.begin, 40u);
  // One fragment asked: the best only.
  EXPECT_EQ(One(text, a, Terms({"heart", "gold"}), 40, 1), (Frags{frags[0].html}));
}

TEST(HighlightTest, ALongPhraseIsNeverCut) {
  Analyzer a;
  const std::string text = "start one two three four five six seven end";
  auto frags = HighlightFragments(text, a, Terms({}, {{"one", "two", "three", "four", "five", "six", "seven"}}),
                                  HighlightOptions{10, 3});
  ASSERT_EQ(frags.size(), 1u);
  EXPECT_EQ(frags[0].html, "<em>one two three four five six seven</em>");
}

TEST(HighlightTest, ContextCentresTheMatchAndEndsOnWholeTokens) {
  Analyzer a;
  const std::string text = "aaaa bbbb cccc dddd eeee heart ffff gggg hhhh iiii jjjj";
  // 25 bytes: "heart" (5) plus 20 of context, 10 on each side.
  EXPECT_EQ(One(text, a, Terms({"heart"}), 25, 1), (Frags{"dddd eeee <em>heart</em> ffff gggg"}));
  // 24: "dddd" no longer fits on the left (whole tokens only); the right side takes what is left.
  EXPECT_EQ(One(text, a, Terms({"heart"}), 24, 1), (Frags{"eeee <em>heart</em> ffff gggg"}));
}

// ---- Property test against a brute-force marker ----

bool RefTokenByte(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

bool RefSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

struct RefSpan {
  size_t begin;
  size_t end;
  std::set<std::string> items;  // "T" + term, "P" + phrase tokens joined by '\x01'
};

// The reference marker: tokens by a naive byte scan, each analyzed alone (a stopword gives no term,
// stemming is per token); matches term by term and phrase by phrase over that stream; marked bytes
// in a bitmap; spans = maximal runs of marked bytes.
std::vector<RefSpan> ReferenceSpans(const std::string& text, const Analyzer& a, const HighlightTerms& q) {
  struct Tok {
    std::string term;
    size_t begin, end;
  };
  std::vector<Tok> toks;
  for (size_t i = 0; i < text.size();) {
    if (!RefTokenByte(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && RefTokenByte(text[j])) ++j;
    std::vector<std::string> t = a.Analyze(text.substr(i, j - i));
    EXPECT_LE(t.size(), 1u);
    if (!t.empty()) toks.push_back({t[0], i, j});
    i = j;
  }
  std::vector<std::string> stream;
  for (const Tok& t : toks) stream.push_back(t.term);
  EXPECT_EQ(stream, a.Analyze(text));

  struct M {
    size_t begin, end;
    std::string item;
  };
  std::vector<M> matches;
  for (const std::string& term : q.terms) {
    for (const Tok& t : toks) {
      if (t.term == term) matches.push_back({t.begin, t.end, "T" + term});
    }
  }
  for (const auto& phrase : q.phrases) {
    std::string key = "P";
    for (const auto& t : phrase) key += t + "\x01";
    for (size_t p = 0; p + phrase.size() <= toks.size(); ++p) {
      bool ok = true;
      for (size_t i = 0; i < phrase.size(); ++i) ok = ok && toks[p + i].term == phrase[i];
      if (ok) matches.push_back({toks[p].begin, toks[p + phrase.size() - 1].end, key});
    }
  }
  std::vector<char> marked(text.size(), 0);
  for (const M& m : matches) std::fill(marked.begin() + m.begin, marked.begin() + m.end, 1);
  std::vector<RefSpan> spans;
  for (size_t i = 0; i < text.size();) {
    if (!marked[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && marked[j]) ++j;
    spans.push_back({i, j, {}});
    i = j;
  }
  for (const M& m : matches) {
    for (RefSpan& s : spans) {
      if (s.begin <= m.begin && m.end <= s.end) s.items.insert(m.item);
    }
  }
  return spans;
}

size_t Distinct(const std::vector<RefSpan>& spans, size_t i, size_t j) {  // spans [i, j]
  std::set<std::string> items;
  for (size_t s = i; s <= j; ++s) items.insert(spans[s].items.begin(), spans[s].items.end());
  return items.size();
}

TEST(HighlightTest, MatchesABruteForceMarkerOnRandomDocumentsAndQueries) {
  const std::vector<Analyzer> analyzers = {MakeAnalyzer(false, {}), MakeAnalyzer(true, {}),
                                           MakeAnalyzer(false, {"the", "of", "a"}),
                                           MakeAnalyzer(true, {"the", "of", "a"})};
  const std::vector<std::string> words = {"the", "of", "a", "A", "heart", "Hearts", "gold", "GOLDEN", "run",
                                          "running", "runs", "x", "ray", "caf\xC3\xA9", "na\xC3\xAFve",
                                          "\xE6\x97\xA5\xE6\x9C\xAC", "42", "towel"};
  const std::vector<std::string> seps = {" ", " ", " ", ", ", ". ", "-", " <", "> ", " & ", "\"", "'", "\n", "...",
                                         "  "};
  const std::vector<uint32_t> fragment_chars = {0, 5, 12, 20, 40, 80, 150};
  std::mt19937 rng(51);
  auto pick = [&](const auto& v) -> const auto& { return v[rng() % v.size()]; };
  int with_fragments = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const Analyzer& a = analyzers[iter % analyzers.size()];
    std::string text;
    if (rng() % 2) text += pick(seps);
    const int n = static_cast<int>(rng() % 50);
    for (int i = 0; i < n; ++i) {
      text += pick(words);
      if (rng() % 10 == 0) text.push_back(static_cast<char>(rng() % 256));
      if (i + 1 < n || rng() % 2) text += pick(seps);
    }
    HighlightTerms q;
    for (int i = static_cast<int>(rng() % 4); i > 0; --i) {
      for (const auto& t : a.Analyze(pick(words))) q.terms.push_back(t);
    }
    const std::vector<std::string> stream = a.Analyze(text);
    for (int i = static_cast<int>(rng() % 3); i > 0; --i) {
      std::vector<std::string> phrase;
      const size_t len = 2 + rng() % 3;
      if (rng() % 2 && stream.size() >= len) {
        const size_t at = rng() % (stream.size() - len + 1);
        phrase.assign(stream.begin() + at, stream.begin() + at + len);
      } else {
        while (phrase.size() < len) {
          for (const auto& t : a.Analyze(pick(words))) phrase.push_back(t);
        }
      }
      q.phrases.push_back(phrase);
    }
    const HighlightOptions options{pick(fragment_chars), static_cast<uint32_t>(1 + rng() % 4)};
    SCOPED_TRACE("iter " + std::to_string(iter) + " text: " + text);

    const std::vector<RefSpan> spans = ReferenceSpans(text, a, q);
    const std::vector<HighlightFragment> frags = HighlightFragments(text, a, q, options);
    std::vector<std::string> htmls;
    for (const auto& f : frags) htmls.push_back(f.html);
    ASSERT_EQ(Highlight(text, a, q, options), htmls);
    ASSERT_LE(frags.size(), options.max_fragments);
    ASSERT_EQ(frags.empty(), spans.empty());
    if (!frags.empty()) ++with_fragments;

    auto inside = [&](const RefSpan& s, size_t upto) {  // inside one of the first `upto` fragments
      for (size_t p = 0; p < upto; ++p) {
        if (frags[p].begin <= s.begin && s.end <= frags[p].end) return true;
      }
      return false;
    };
    std::vector<std::pair<size_t, size_t>> ranges;
    for (size_t k = 0; k < frags.size(); ++k) {
      const HighlightFragment& f = frags[k];
      ASSERT_LT(f.begin, f.end);
      ASSERT_LE(f.end, text.size());
      // (a) the unescaped, unmarked fragment is the text's bytes [begin, end).
      std::string plain;
      std::vector<std::pair<size_t, size_t>> marks;
      ASSERT_TRUE(testing::ParseHighlightHtml(f.html, &plain, &marks)) << f.html;
      ASSERT_EQ(plain, text.substr(f.begin, f.end - f.begin));
      // Never a cut token (and so never a cut UTF-8 sequence), never white space at an edge.
      EXPECT_FALSE(f.begin > 0 && RefTokenByte(text[f.begin - 1]) && RefTokenByte(text[f.begin]));
      EXPECT_FALSE(f.end < text.size() && RefTokenByte(text[f.end - 1]) && RefTokenByte(text[f.end]));
      EXPECT_FALSE(RefSpace(text[f.begin]) || RefSpace(text[f.end - 1]));
      // (b) its marks are exactly the reference spans inside it; none straddles an edge.
      std::vector<std::pair<size_t, size_t>> expected;
      std::set<std::string> held;
      for (const RefSpan& s : spans) {
        EXPECT_FALSE(s.begin < f.begin && f.begin < s.end);
        EXPECT_FALSE(s.begin < f.end && f.end < s.end);
        if (f.begin <= s.begin && s.end <= f.end) {
          expected.emplace_back(s.begin - f.begin, s.end - f.begin);
          held.insert(s.items.begin(), s.items.end());
        }
      }
      ASSERT_EQ(marks, expected) << f.html;
      // About fragment_chars bytes: at most that, unless the fragment is one longer mark.
      if (f.end - f.begin > options.fragment_chars) {
        EXPECT_EQ(expected, (std::vector<std::pair<size_t, size_t>>{{0, f.end - f.begin}})) << f.html;
      }
      // (c) best first: no window of spans (a run of consecutive spans within fragment_chars
      // bytes, or one span) outside the fragments before this one holds more distinct terms and
      // phrases; one inside this fragment holds as many as it says; it shows at least that many.
      EXPECT_LE(f.distinct, held.size());
      size_t best_outside = 0;
      size_t best_within = 0;
      for (size_t i = 0; i < spans.size(); ++i) {
        for (size_t j = i; j < spans.size(); ++j) {
          if (j > i && spans[j].end - spans[i].begin > options.fragment_chars) break;
          if (inside(spans[j], k)) break;
          if (inside(spans[i], k)) break;
          const size_t d = Distinct(spans, i, j);
          best_outside = std::max(best_outside, d);
          if (f.begin <= spans[i].begin && spans[j].end <= f.end) best_within = std::max(best_within, d);
        }
      }
      EXPECT_EQ(f.distinct, best_outside);
      EXPECT_EQ(f.distinct, best_within);
      if (k > 0) {
        EXPECT_TRUE(frags[k - 1].distinct > f.distinct ||
                    (frags[k - 1].distinct == f.distinct && frags[k - 1].begin < f.begin));
      }
      ranges.emplace_back(f.begin, f.end);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t k = 1; k < ranges.size(); ++k) EXPECT_LE(ranges[k - 1].second, ranges[k].first);
    // Fewer fragments than allowed: every match is in one.
    if (frags.size() < options.max_fragments) {
      for (const RefSpan& s : spans) EXPECT_TRUE(inside(s, frags.size()));
    }
  }
  EXPECT_GT(with_fragments, 1000);
}

}  // namespace
}  // namespace search
