// Reading a highlight fragment's html back, for the highlighter's tests and fuzz target: the text
// it shows and where its <em> marks are. Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace search::testing {

// Appends to *plain the text the html shows (entities unescaped) and to *marks each mark as
// [begin, end) in that text; false when the html holds anything but escaped text and flat,
// non-empty <em> marks.
inline bool ParseHighlightHtml(std::string_view html, std::string* plain,
                               std::vector<std::pair<size_t, size_t>>* marks) {
  static const std::pair<std::string_view, char> kEntities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}};
  bool open = false;
  size_t open_at = 0;
  size_t i = 0;
  while (i < html.size()) {
    if (html.substr(i, 4) == "<em>") {
      if (open) return false;
      open = true;
      open_at = plain->size();
      i += 4;
    } else if (html.substr(i, 5) == "</em>") {
      if (!open || plain->size() == open_at) return false;
      open = false;
      marks->emplace_back(open_at, plain->size());
      i += 5;
    } else if (html[i] == '&') {
      bool found = false;
      for (const auto& [entity, c] : kEntities) {
        if (html.substr(i, entity.size()) == entity) {
          plain->push_back(c);
          i += entity.size();
          found = true;
          break;
        }
      }
      if (!found) return false;
    } else if (html[i] == '<' || html[i] == '>' || html[i] == '"' || html[i] == '\'') {
      return false;
    } else {
      plain->push_back(html[i++]);
    }
  }
  return !open;
}

}  // namespace search::testing
