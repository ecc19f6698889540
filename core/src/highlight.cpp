#include "core/highlight.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace search {

namespace {

void CollectTerms(const QueryNode& node, HighlightTerms* out) {
  switch (node.kind) {
    case QueryNode::Kind::kTerm:
      if (!node.tokens.empty()) out->terms.push_back(node.tokens[0]);
      break;
    case QueryNode::Kind::kPhrase:
      if (node.tokens.size() == 1) {
        out->terms.push_back(node.tokens[0]);
      } else if (!node.tokens.empty()) {
        out->phrases.push_back(node.tokens);
      }
      break;
    case QueryNode::Kind::kBool:
      for (const QueryNode::Clause& c : node.clauses) {
        if (c.occur != Occur::kMustNot) CollectTerms(c.node, out);
      }
      break;
  }
}

template <class T>
void SortUnique(std::vector<T>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

bool IsTok(std::string_view text, size_t i) { return IsTokenByte(static_cast<unsigned char>(text[i])); }

// A separator byte that is not white space.
bool IsPunctuation(std::string_view text, size_t i) {
  if (i >= text.size()) return false;
  const char c = text[i];
  return !IsTok(text, i) && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v';
}

// The first byte of the first token starting at or after x (text.size() when none).
size_t NextTokenBegin(std::string_view text, size_t x) {
  const size_t n = text.size();
  if (x > 0 && x < n && IsTok(text, x - 1)) {
    while (x < n && IsTok(text, x)) ++x;
  }
  while (x < n && !IsTok(text, x)) ++x;
  return x;
}

// The end of the last token ending at or before y (0 when none).
size_t PrevTokenEnd(std::string_view text, size_t y) {
  if (y > 0 && y < text.size() && IsTok(text, y)) {
    while (y > 0 && IsTok(text, y - 1)) --y;
  }
  while (y > 0 && !IsTok(text, y - 1)) --y;
  return y;
}

void AppendEscaped(std::string_view s, std::string* out) {
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char* rep = nullptr;
    switch (s[i]) {
      case '&': rep = "&amp;"; break;
      case '<': rep = "&lt;"; break;
      case '>': rep = "&gt;"; break;
      case '"': rep = "&quot;"; break;
      case '\'': rep = "&#39;"; break;
      default: continue;
    }
    out->append(s.data() + run, i - run);
    out->append(rep);
    run = i + 1;
  }
  out->append(s.data() + run, s.size() - run);
}

struct Match {
  size_t begin;
  size_t end;
  uint32_t item;  // index of the distinct term or phrase
};

struct Span {
  size_t begin;
  size_t end;
  uint32_t match_lo;  // its matches: [match_lo, match_hi) of the sorted matches
  uint32_t match_hi;
};

struct Core {
  uint32_t first;  // spans [first, last)
  uint32_t last;
  uint32_t distinct;
};

}  // namespace

HighlightTerms HighlightTermsOf(const QueryNode& tree) {
  HighlightTerms out;
  CollectTerms(tree, &out);
  SortUnique(&out.terms);
  SortUnique(&out.phrases);
  return out;
}

HighlightTerms HighlightTermsOf(const std::vector<std::string>& terms) {
  HighlightTerms out;
  out.terms = terms;
  SortUnique(&out.terms);
  return out;
}

std::vector<HighlightFragment> HighlightFragments(std::string_view text, const Analyzer& analyzer,
                                                  const HighlightTerms& query, const HighlightOptions& options) {
  std::vector<HighlightFragment> result;
  if (query.empty() || options.max_fragments == 0 || text.empty()) return result;

  // Items: the distinct terms (0 .. T-1), then the distinct phrases. Query tokens get ids; a token's
  // item is the term it is, if any; the phrases form a trie over token ids, so that matching at a
  // position costs at most the longest phrase's length in steps, however many phrases share a prefix.
  std::vector<std::string_view> terms(query.terms.begin(), query.terms.end());
  SortUnique(&terms);
  std::vector<const std::vector<std::string>*> phrases;
  for (const auto& p : query.phrases) {
    if (!p.empty()) phrases.push_back(&p);
  }
  std::sort(phrases.begin(), phrases.end(), [](auto* a, auto* b) { return *a < *b; });
  phrases.erase(std::unique(phrases.begin(), phrases.end(), [](auto* a, auto* b) { return *a == *b; }),
                phrases.end());
  const uint32_t num_items = static_cast<uint32_t>(terms.size() + phrases.size());

  std::unordered_map<std::string_view, uint32_t> token_ids;
  std::vector<int32_t> token_item;  // by token id: the term item, or -1
  auto token_id = [&](std::string_view t) {
    auto [it, inserted] = token_ids.emplace(t, static_cast<uint32_t>(token_item.size()));
    if (inserted) token_item.push_back(-1);
    return it->second;
  };
  for (size_t i = 0; i < terms.size(); ++i) token_item[token_id(terms[i])] = static_cast<int32_t>(i);
  std::vector<int32_t> trie_item = {-1};              // by trie node (0 the root): the phrase ending there
  std::unordered_map<uint64_t, uint32_t> trie_edges;  // (node << 32 | token id) -> child node
  for (size_t p = 0; p < phrases.size(); ++p) {
    uint32_t node = 0;
    for (const std::string& t : *phrases[p]) {
      auto [it, inserted] = trie_edges.emplace(uint64_t{node} << 32 | token_id(t), trie_item.size());
      if (inserted) trie_item.push_back(-1);
      node = it->second;
    }
    trie_item[node] = static_cast<int32_t>(terms.size() + p);
  }

  // The analyzed stream's occurrences of query tokens, with their positions.
  struct Occurrence {
    uint32_t pos;
    uint32_t tid;
    size_t begin;
    size_t end;
  };
  std::vector<Occurrence> occ;
  // A filter on (length, first byte, last byte) of the query tokens: most terms skip the hash.
  std::array<uint64_t, 16> filter{};
  auto filter_bit = [](std::string_view t) {
    return (t.size() * 131 + static_cast<unsigned char>(t.front()) * 31 + static_cast<unsigned char>(t.back())) & 1023;
  };
  for (const auto& [t, id] : token_ids) {
    if (!t.empty()) filter[filter_bit(t) >> 6] |= uint64_t{1} << (filter_bit(t) & 63);
  }
  uint32_t pos = 0;
  analyzer.AnalyzeWithOffsets(text, [&](std::string_view term, size_t begin, size_t end) {
    const size_t bit = filter_bit(term);  // a term is never empty
    if ((filter[bit >> 6] >> (bit & 63)) & 1) {
      auto it = token_ids.find(term);
      if (it != token_ids.end()) occ.push_back({pos, it->second, begin, end});
    }
    ++pos;
  });
  if (occ.empty()) return result;

  // Matches in (begin, end) order: at each occurrence its term, then the phrases starting there,
  // shortest first.
  std::vector<Match> matches;
  for (size_t k = 0; k < occ.size(); ++k) {
    const int32_t item = token_item[occ[k].tid];
    if (item >= 0) matches.push_back({occ[k].begin, occ[k].end, static_cast<uint32_t>(item)});
    if (trie_edges.empty()) continue;
    uint32_t node = 0;
    for (size_t i = 0; k + i < occ.size() && occ[k + i].pos == occ[k].pos + i; ++i) {
      auto it = trie_edges.find(uint64_t{node} << 32 | occ[k + i].tid);
      if (it == trie_edges.end()) break;
      node = it->second;
      if (trie_item[node] >= 0) matches.push_back({occ[k].begin, occ[k + i].end, static_cast<uint32_t>(trie_item[node])});
    }
  }
  if (matches.empty()) return result;

  // Marked spans: overlapping matches merged.
  std::vector<Span> spans;
  for (uint32_t m = 0; m < matches.size(); ++m) {
    if (!spans.empty() && matches[m].begin < spans.back().end) {
      spans.back().end = std::max(spans.back().end, matches[m].end);
      spans.back().match_hi = m + 1;
    } else {
      spans.push_back({matches[m].begin, matches[m].end, m, m + 1});
    }
  }

  // Cores, greedily: each round a sliding window over each run of untaken spans.
  const size_t fc = options.fragment_chars;
  const uint32_t num_spans = static_cast<uint32_t>(spans.size());
  std::vector<uint8_t> taken(num_spans, 0);
  std::vector<uint32_t> count(num_items, 0);
  std::vector<Core> cores;
  while (cores.size() < options.max_fragments) {
    Core best{0, 0, 0};
    uint32_t seg = 0;
    while (seg < num_spans) {
      if (taken[seg]) {
        ++seg;
        continue;
      }
      uint32_t seg_end = seg;
      while (seg_end < num_spans && !taken[seg_end]) ++seg_end;
      uint32_t j = seg;
      uint32_t distinct = 0;
      for (uint32_t i = seg; i < seg_end; ++i) {
        while (j < seg_end && (j == i || spans[j].end - spans[i].begin <= fc)) {
          for (uint32_t m = spans[j].match_lo; m < spans[j].match_hi; ++m) distinct += count[matches[m].item]++ == 0;
          ++j;
        }
        if (distinct > best.distinct) best = {i, j, distinct};
        for (uint32_t m = spans[i].match_lo; m < spans[i].match_hi; ++m) distinct -= --count[matches[m].item] == 0;
      }
      seg = seg_end;
    }
    if (best.distinct == 0) break;
    for (uint32_t s = best.first; s < best.last; ++s) taken[s] = 1;
    cores.push_back(best);
  }

  // Fragments: each core grown with context, in text order so that neighbours never overlap.
  std::vector<uint32_t> order(cores.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return cores[a].first < cores[b].first; });
  auto span_around = [&](size_t x) -> const Span* {  // the span with begin < x < end, if any
    auto it = std::upper_bound(spans.begin(), spans.end(), x, [](size_t v, const Span& s) { return v < s.begin; });
    if (it == spans.begin()) return nullptr;
    --it;
    return (it->begin < x && x < it->end) ? &*it : nullptr;
  };
  auto grow_left = [&](size_t core_begin, size_t limit, size_t budget) {
    const size_t x = std::max(limit, core_begin - std::min(budget, core_begin));
    size_t b = NextTokenBegin(text, x);
    if (const Span* s = span_around(b)) b = NextTokenBegin(text, s->end);
    return b;
  };
  auto grow_right = [&](size_t core_end, size_t limit, size_t budget) {
    const size_t y = std::min(limit, core_end + budget);
    size_t e = PrevTokenEnd(text, y);
    if (const Span* s = span_around(e)) e = PrevTokenEnd(text, s->begin);
    return e;
  };
  result.resize(cores.size());
  size_t prev_end = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const Core& core = cores[order[k]];
    const size_t cb = spans[core.first].begin;
    const size_t ce = spans[core.last - 1].end;
    // Up to halfway to the next core: the gap's context is shared.
    const size_t right_limit =
        k + 1 < order.size() ? ce + (spans[cores[order[k + 1]].first].begin - ce) / 2 : text.size();
    const size_t extra = fc > ce - cb ? fc - (ce - cb) : 0;
    size_t b = grow_left(cb, prev_end, extra / 2);
    size_t e = grow_right(ce, right_limit, extra - (cb - b));
    const size_t used = (cb - b) + (e - ce);
    if (used < extra && b > prev_end) b = grow_left(cb, prev_end, extra - (e - ce));
    // Punctuation attached to the edge tokens ("(gold.)") comes along while the fragment has room.
    const size_t cap = std::max(fc, ce - cb);
    while (e < right_limit && IsPunctuation(text, e) && e - b < cap) ++e;
    while (b > prev_end && IsPunctuation(text, b - 1) && e - b < cap) --b;
    prev_end = e;

    HighlightFragment& f = result[order[k]];
    f.begin = b;
    f.end = e;
    f.distinct = core.distinct;
    f.html.reserve((e - b) + 32);
    size_t at = b;
    auto s = std::lower_bound(spans.begin(), spans.end(), b, [](const Span& sp, size_t v) { return sp.begin < v; });
    for (; s != spans.end() && s->end <= e; ++s) {
      AppendEscaped(text.substr(at, s->begin - at), &f.html);
      f.html.append("<em>");
      AppendEscaped(text.substr(s->begin, s->end - s->begin), &f.html);
      f.html.append("</em>");
      at = s->end;
    }
    AppendEscaped(text.substr(at, e - at), &f.html);
  }
  return result;
}

std::vector<std::string> Highlight(std::string_view text, const Analyzer& analyzer, const HighlightTerms& query,
                                   const HighlightOptions& options) {
  std::vector<HighlightFragment> fragments = HighlightFragments(text, analyzer, query, options);
  std::vector<std::string> out;
  out.reserve(fragments.size());
  for (HighlightFragment& f : fragments) out.push_back(std::move(f.html));
  return out;
}

}  // namespace search
