#include "core/query_parser.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace search {

namespace {

using json = nlohmann::json;
using Clause = QueryNode::Clause;

QueryNode TermNode(std::string token) {
  QueryNode n;
  n.kind = QueryNode::Kind::kTerm;
  n.tokens.push_back(std::move(token));
  return n;
}

QueryNode BoolNode(std::vector<Clause> clauses) {
  QueryNode n;
  n.kind = QueryNode::Kind::kBool;
  n.clauses = std::move(clauses);
  return n;
}

// A term for one token, a phrase for several; nullopt for none.
std::optional<QueryNode> LeafNode(std::vector<std::string> tokens) {
  if (tokens.empty()) return std::nullopt;
  QueryNode n;
  n.kind = tokens.size() == 1 ? QueryNode::Kind::kTerm : QueryNode::Kind::kPhrase;
  n.tokens = std::move(tokens);
  return n;
}

// Bad input echoed in a message is cut to this many bytes.
std::string Echo(std::string_view s) {
  constexpr size_t kMaxEcho = 64;
  if (s.size() <= kMaxEcho) return std::string(s);
  return std::string(s.substr(0, kMaxEcho)) + "...";
}

std::string Pos(size_t p) {
  return "at position " + std::to_string(p);
}

// ---- The syntax ----

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
bool EndsWord(char c) {
  return IsSpace(c) || c == '"' || c == '(' || c == ')';
}

class SyntaxParser {
 public:
  SyntaxParser(std::string_view text, const Analyzer& analyzer) : s_(text), analyzer_(analyzer) {}

  Result<QueryNode> Parse() {
    std::vector<Clause> clauses;
    SEARCH_RETURN_IF_ERROR(ParseClauses(std::string_view::npos, 0, &clauses));
    if (clauses.empty()) return Status::InvalidArgument("the query has no searchable terms");
    QueryNode tree = Canonicalize(BoolNode(std::move(clauses)));
    SEARCH_RETURN_IF_ERROR(ValidateTree(tree));  // the checks above make this hold; kept as a guard
    return tree;
  }

 private:
  // Parses clauses up to the end of the text (open == npos) or up to the ')' that closes the
  // group opened at `open`, whose booleans are `depth` levels below the root.
  Status ParseClauses(size_t open, uint32_t depth, std::vector<Clause>* out) {
    const size_t n = s_.size();
    for (;;) {
      while (i_ < n && IsSpace(s_[i_])) ++i_;
      if (i_ >= n) {
        if (open != std::string_view::npos) return Status::InvalidArgument("unclosed parenthesis " + Pos(open));
        return Status::Ok();
      }
      if (s_[i_] == ')') {
        if (open == std::string_view::npos) return Status::InvalidArgument("unmatched ')' " + Pos(i_));
        ++i_;
        return Status::Ok();
      }
      const size_t start = i_;
      Occur occur = Occur::kDefault;
      if (s_[i_] == '+' || s_[i_] == '-') {
        occur = s_[i_] == '+' ? Occur::kMust : Occur::kMustNot;
        ++i_;
        // As in Lucene's classic parser, whitespace may follow a sign: `a - b` is `a -b`.
        while (i_ < n && IsSpace(s_[i_])) ++i_;
        if (i_ >= n || s_[i_] == ')')
          return Status::InvalidArgument(std::string("'") + s_[start] + "' " + Pos(start) + " has nothing after it");
      }
      if (s_[i_] == '"') {
        const size_t quote = i_;
        const size_t close = s_.find('"', quote + 1);
        if (close == std::string_view::npos) return Status::InvalidArgument("unclosed quote " + Pos(quote));
        i_ = close + 1;
        SEARCH_RETURN_IF_ERROR(AddLeaf(s_.substr(quote + 1, close - quote - 1), occur, start, out));
      } else if (s_[i_] == '(') {
        const size_t paren = i_;
        if (depth + 1 > kMaxTreeDepth)
          return Status::InvalidArgument("parentheses nested deeper than " + std::to_string(kMaxTreeDepth) + " " +
                                         Pos(paren));
        ++i_;
        std::vector<Clause> inner;
        SEARCH_RETURN_IF_ERROR(ParseClauses(paren, depth + 1, &inner));
        if (!inner.empty()) {
          SEARCH_RETURN_IF_ERROR(CountClause(start));
          out->push_back(Clause{occur, BoolNode(std::move(inner))});
        }
      } else {
        size_t j = i_;
        while (j < n && !EndsWord(s_[j])) ++j;
        const std::string_view word = s_.substr(i_, j - i_);
        i_ = j;
        SEARCH_RETURN_IF_ERROR(AddLeaf(word, occur, start, out));
      }
    }
  }

  Status AddLeaf(std::string_view text, Occur occur, size_t start, std::vector<Clause>* out) {
    std::vector<std::string> tokens = analyzer_.Analyze(text);
    if (tokens.size() > kMaxPhraseTokens)
      return Status::InvalidArgument("the phrase " + Pos(start) + " has " + std::to_string(tokens.size()) +
                                     " tokens, more than " + std::to_string(kMaxPhraseTokens));
    std::optional<QueryNode> leaf = LeafNode(std::move(tokens));
    if (!leaf) return Status::Ok();
    SEARCH_RETURN_IF_ERROR(CountClause(start));
    out->push_back(Clause{occur, std::move(*leaf)});
    return Status::Ok();
  }

  Status CountClause(size_t start) {
    if (++clauses_ > kMaxTreeClauses)
      return Status::InvalidArgument("the query has more than " + std::to_string(kMaxTreeClauses) + " clauses (" +
                                     Pos(start) + ")");
    return Status::Ok();
  }

  std::string_view s_;
  const Analyzer& analyzer_;
  size_t i_ = 0;
  uint32_t clauses_ = 0;
};

// ---- The Elasticsearch DSL ----

Status DslError(const std::string& path, const std::string& what) {
  return Status::InvalidArgument(path + ": " + what);
}

std::string TypeName(const json& j) {
  return j.type_name();
}

class DslWalker {
 public:
  explicit DslWalker(const Analyzer& analyzer) : analyzer_(analyzer) {}

  // The node for the query object `q`, nullopt when its text analyzed to nothing. A node is a
  // term, a phrase or a boolean, which lies `depth` booleans below the root.
  Result<std::optional<QueryNode>> Query(const json& q, const std::string& path, uint32_t depth) {
    if (!q.is_object()) return DslError(path, "a query must be an object, got " + TypeName(q));
    if (q.empty()) return DslError(path, "empty query object (match_all is not supported)");
    if (q.size() != 1)
      return DslError(path,
                      "a query object has exactly one key, the query type (got " + std::to_string(q.size()) + ")");
    const auto it = q.begin();
    const std::string& type = it.key();
    const std::string sub = path + "." + type;
    if (type == "bool") return Bool(it.value(), sub, depth);
    if (type == "match") return Match(it.value(), sub, depth);
    if (type == "match_phrase") return MatchPhrase(it.value(), sub);
    if (type == "term") return Term(it.value(), sub);
    return DslError(path, "unsupported query type '" + Echo(type) + "' (supported: bool, match, match_phrase, term)");
  }

  Status CountClause(const std::string& path) {
    if (++clauses_ > kMaxTreeClauses)
      return DslError(path, "the query has more than " + std::to_string(kMaxTreeClauses) + " clauses");
    return Status::Ok();
  }

 private:
  Status CheckDepth(const std::string& path, uint32_t depth) {
    if (depth > kMaxTreeDepth)
      return DslError(path, "nested deeper than " + std::to_string(kMaxTreeDepth) +
                                " booleans below the top (a match of several terms counts as a boolean)");
    return Status::Ok();
  }

  Result<std::optional<QueryNode>> Bool(const json& body, const std::string& path, uint32_t depth) {
    if (!body.is_object()) return DslError(path, "must be an object, got " + TypeName(body));
    SEARCH_RETURN_IF_ERROR(CheckDepth(path, depth));
    std::vector<Clause> clauses;
    size_t given = 0;
    for (auto it = body.begin(); it != body.end(); ++it) {
      const std::string& key = it.key();
      Occur occur;
      if (key == "must") {
        occur = Occur::kMust;
      } else if (key == "should") {
        occur = Occur::kShould;
      } else if (key == "must_not") {
        occur = Occur::kMustNot;
      } else if (key == "filter") {
        occur = Occur::kFilter;
      } else {
        return DslError(path,
                        "unsupported bool parameter '" + Echo(key) + "' (supported: must, should, must_not, filter)");
      }
      const std::string sub = path + "." + key;
      const json& v = it.value();
      if (v.is_object()) {
        ++given;
        SEARCH_RETURN_IF_ERROR(AddClause(v, occur, sub, depth, &clauses));
      } else if (v.is_array()) {
        for (size_t i = 0; i < v.size(); ++i) {
          ++given;
          SEARCH_RETURN_IF_ERROR(AddClause(v[i], occur, sub + "[" + std::to_string(i) + "]", depth, &clauses));
        }
      } else {
        return DslError(sub, "must be a query object or an array of query objects, got " + TypeName(v));
      }
    }
    if (given == 0) return DslError(path, "an empty bool matches every document (match_all is not supported)");
    if (clauses.empty()) return std::optional<QueryNode>();
    bool only_must_not = true;
    for (const Clause& c : clauses) only_must_not = only_must_not && c.occur == Occur::kMustNot;
    if (only_must_not)
      return DslError(path,
                      "a bool of must_not clauses only matches every other document in Elasticsearch "
                      "(match_all is not supported): add a must, filter or should clause");
    return std::optional<QueryNode>(BoolNode(std::move(clauses)));
  }

  Status AddClause(const json& q, Occur occur, const std::string& path, uint32_t depth, std::vector<Clause>* out) {
    SEARCH_ASSIGN_OR_RETURN(std::optional<QueryNode> node, Query(q, path, depth + 1));
    if (!node) return Status::Ok();
    SEARCH_RETURN_IF_ERROR(CountClause(path));
    out->push_back(Clause{occur, std::move(*node)});
    return Status::Ok();
  }

  // The field object of a match, match_phrase or term query: {"contents": value}.
  Result<const json*> FieldValue(const json& body, const std::string& path) {
    if (!body.is_object()) return DslError(path, "must be an object {\"contents\": ...}, got " + TypeName(body));
    if (body.empty()) return DslError(path, "names no field (the field is 'contents')");
    if (body.size() != 1) return DslError(path, "names more than one field (the only field is 'contents')");
    if (body.begin().key() != "contents")
      return DslError(path, "unsupported field '" + Echo(body.begin().key()) + "' (the only field is 'contents')");
    return &body.begin().value();
  }

  // The text of a field value: a string, or an object with `text_key` and the `allowed` keys.
  Result<std::string> FieldText(const json& v, const std::string& path, const char* text_key,
                                const std::vector<std::string>& allowed, std::string* op) {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_object())
      return DslError(path, std::string("must be a string or an object with \"") + text_key + "\", got " + TypeName(v));
    const json* text = nullptr;
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& key = it.key();
      if (key == text_key) {
        if (!it.value().is_string()) return DslError(path + "." + key, "must be a string, got " + TypeName(it.value()));
        text = &it.value();
      } else if (key == "operator" && op != nullptr) {
        if (!it.value().is_string())
          return DslError(path + "." + key, "must be \"and\" or \"or\", got " + TypeName(it.value()));
        std::string o = it.value().get<std::string>();
        for (char& c : o) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
        if (o != "and" && o != "or")
          return DslError(path + "." + key, "must be \"and\" or \"or\", got '" + Echo(o) + "'");
        *op = o;
      } else {
        std::string supported;
        for (const std::string& a : allowed) supported += (supported.empty() ? "" : ", ") + a;
        return DslError(path, "unsupported parameter '" + Echo(key) + "' (supported: " + supported + ")");
      }
    }
    if (text == nullptr) return DslError(path, std::string("missing \"") + text_key + "\"");
    return text->get<std::string>();
  }

  Result<std::optional<QueryNode>> Match(const json& body, const std::string& path, uint32_t depth) {
    SEARCH_ASSIGN_OR_RETURN(const json* v, FieldValue(body, path));
    const std::string sub = path + ".contents";
    std::string op = "or";
    SEARCH_ASSIGN_OR_RETURN(std::string text, FieldText(*v, sub, "query", {"query", "operator"}, &op));
    std::vector<std::string> tokens = analyzer_.Analyze(text);
    if (tokens.empty()) return std::optional<QueryNode>();
    if (tokens.size() > 1) SEARCH_RETURN_IF_ERROR(CheckDepth(path, depth));
    const Occur occur = op == "and" ? Occur::kMust : Occur::kShould;
    std::vector<Clause> clauses;
    for (std::string& t : tokens) {
      SEARCH_RETURN_IF_ERROR(CountClause(path));
      clauses.push_back(Clause{occur, TermNode(std::move(t))});
    }
    return std::optional<QueryNode>(BoolNode(std::move(clauses)));
  }

  Result<std::optional<QueryNode>> MatchPhrase(const json& body, const std::string& path) {
    SEARCH_ASSIGN_OR_RETURN(const json* v, FieldValue(body, path));
    const std::string sub = path + ".contents";
    SEARCH_ASSIGN_OR_RETURN(std::string text, FieldText(*v, sub, "query", {"query"}, nullptr));
    std::vector<std::string> tokens = analyzer_.Analyze(text);
    if (tokens.size() > kMaxPhraseTokens)
      return DslError(sub, "the phrase has " + std::to_string(tokens.size()) + " tokens, more than " +
                               std::to_string(kMaxPhraseTokens));
    return LeafNode(std::move(tokens));
  }

  Result<std::optional<QueryNode>> Term(const json& body, const std::string& path) {
    SEARCH_ASSIGN_OR_RETURN(const json* v, FieldValue(body, path));
    const std::string sub = path + ".contents";
    SEARCH_ASSIGN_OR_RETURN(std::string value, FieldText(*v, sub, "value", {"value"}, nullptr));
    std::vector<std::string> tokens;
    Analyzer::Tokenize(value, [&](std::string_view t) {
      if (tokens.size() < 2) tokens.emplace_back(t);
    });
    if (tokens.size() != 1)
      return DslError(sub, "a term query takes exactly one token, and '" + Echo(value) + "' has " +
                               (tokens.empty() ? std::string("none") : std::string("several")) +
                               " (term values are not analyzed; use match or match_phrase)");
    return std::optional<QueryNode>(TermNode(std::move(tokens.front())));
  }

  const Analyzer& analyzer_;
  uint32_t clauses_ = 0;
};

}  // namespace

namespace {

// The DSL's "highlight" value (see ParseHighlightDsl); `path` names it in errors.
Status CheckHighlight(const json& v, const std::string& path) {
  if (!v.is_object()) return DslError(path, "must be an object {\"fields\": {\"contents\": {}}}, got " + TypeName(v));
  const json* fields = nullptr;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "fields")
      return DslError(path, "unsupported key '" + Echo(it.key()) + "' (supported: fields; fragments are ~150 "
                            "characters, at most 3, marked <em>...</em>)");
    fields = &it.value();
  }
  if (fields == nullptr) return DslError(path + ".fields", "missing: name the field to highlight, {\"contents\": {}}");
  if (!fields->is_object() || fields->empty())
    return DslError(path + ".fields", "must be a non-empty object {\"contents\": {}}, got " + Echo(fields->dump()));
  for (auto it = fields->begin(); it != fields->end(); ++it) {
    const std::string sub = path + ".fields." + Echo(it.key());
    if (it.key() != "contents") return DslError(sub, "only the field 'contents' can be highlighted");
    if (!it.value().is_object() || !it.value().empty())
      return DslError(sub, "highlight options are not supported: give {} (got " + Echo(it.value().dump()) + ")");
  }
  return Status::Ok();
}

}  // namespace

Result<bool> ParseHighlightDsl(std::string_view text) {
  const json v = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return Status::InvalidArgument("not valid JSON");
  SEARCH_RETURN_IF_ERROR(CheckHighlight(v, "highlight"));
  return true;
}

Result<QueryNode> ParseQuerySyntax(std::string_view text, const Analyzer& analyzer) {
  return SyntaxParser(text, analyzer).Parse();
}

Result<SearchBody> ParseSearchDsl(std::string_view text, const Analyzer& analyzer) {
  json doc;
  std::string repeated;
  try {
    // nlohmann's DOM keeps the last value of a repeated key; Elasticsearch refuses one, and so
    // do we. One set of keys per open object, innermost last.
    std::vector<std::unordered_set<std::string>> open;
    doc = json::parse(text.begin(), text.end(), [&](int /*depth*/, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::object_start) {
        open.emplace_back();
      } else if (event == json::parse_event_t::object_end) {
        if (!open.empty()) open.pop_back();
      } else if (event == json::parse_event_t::key && !open.empty() && repeated.empty()) {
        std::string key = parsed.get<std::string>();
        if (!open.back().insert(key).second) repeated = std::move(key);
      }
      return true;
    });
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    std::string what = e.what();
    if (what.size() > 200) what = what.substr(0, 200) + "...";
    return Status::InvalidArgument("the body is not valid JSON: " + what);
  }
  if (!repeated.empty()) return Status::InvalidArgument("the key '" + Echo(repeated) + "' is repeated");
  if (!doc.is_object()) return Status::InvalidArgument("the body must be a JSON object, got " + TypeName(doc));

  SearchBody body;
  const json* query = nullptr;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "query") {
      query = &v;
    } else if (key == "size") {
      // nlohmann parses non-negative integers as unsigned, negative ones as signed.
      if (!v.is_number_unsigned() || v.get<uint64_t>() > kMaxK)
        return DslError("size", "must be an integer in 0.." + std::to_string(kMaxK) + ", got " + Echo(v.dump()));
      body.size = static_cast<uint32_t>(v.get<uint64_t>());
    } else if (key == "track_total_hits") {
      if (v.is_number())
        return DslError("track_total_hits", "only true or false is supported, not a number (" + Echo(v.dump()) + ")");
      if (!v.is_boolean()) return DslError("track_total_hits", "must be true or false, got " + TypeName(v));
      body.track_total_hits = v.get<bool>();
    } else if (key == "_source") {
      if (!v.is_boolean())
        return DslError("_source", "only true or false is supported (source filtering is not), got " + Echo(v.dump()));
      body.source = v.get<bool>();
    } else if (key == "highlight") {
      SEARCH_RETURN_IF_ERROR(CheckHighlight(v, "highlight"));
      body.highlight = true;
    } else {
      return Status::InvalidArgument("unsupported key '" + Echo(key) +
                                     "' (supported: query, size, track_total_hits, _source, highlight)");
    }
  }
  if (query == nullptr) return DslError("query", "missing: a search body needs a query");

  DslWalker walker(analyzer);
  SEARCH_ASSIGN_OR_RETURN(std::optional<QueryNode> node, walker.Query(*query, "query", 0));
  if (!node) return DslError("query", "the query has no searchable terms");
  if (node->kind != QueryNode::Kind::kBool) {  // a top-level term or phrase: the root's one clause
    SEARCH_RETURN_IF_ERROR(walker.CountClause("query"));
    node = BoolNode({Clause{Occur::kMust, std::move(*node)}});
  }
  body.tree = Canonicalize(std::move(*node));
  SEARCH_RETURN_IF_ERROR(ValidateTree(body.tree).WithContext("query"));
  return body;
}

}  // namespace search
