#include "core/query_tree.hpp"

#include <algorithm>
#include <utility>

namespace search {

namespace {

char OccurPrefix(Occur o) {
  switch (o) {
    case Occur::kMust:
      return '+';
    case Occur::kMustNot:
      return '-';
    case Occur::kShould:
      return '~';
    case Occur::kFilter:
      return '#';
    case Occur::kDefault:
      return '\0';
  }
  return '\0';
}

void AppendKey(const QueryNode& node, std::string* out) {
  switch (node.kind) {
    case QueryNode::Kind::kTerm:
      if (!node.tokens.empty()) out->append(node.tokens.front());
      return;
    case QueryNode::Kind::kPhrase:
      out->push_back('"');
      for (size_t i = 0; i < node.tokens.size(); ++i) {
        if (i > 0) out->push_back(' ');
        out->append(node.tokens[i]);
      }
      out->push_back('"');
      return;
    case QueryNode::Kind::kBool:
      out->push_back('(');
      for (size_t i = 0; i < node.clauses.size(); ++i) {
        if (i > 0) out->push_back(' ');
        const char p = OccurPrefix(node.clauses[i].occur);
        if (p != '\0') out->push_back(p);
        AppendKey(node.clauses[i].node, out);
      }
      out->push_back(')');
      return;
  }
}

void ResolveInPlace(QueryNode* node, Occur replacement) {
  for (QueryNode::Clause& c : node->clauses) {
    if (c.occur == Occur::kDefault) c.occur = replacement;
    ResolveInPlace(&c.node, replacement);
  }
}

QueryNode CanonicalizeNode(QueryNode node, bool is_root) {
  if (node.kind == QueryNode::Kind::kPhrase) {
    if (node.tokens.size() == 1) node.kind = QueryNode::Kind::kTerm;
    return node;
  }
  if (node.kind != QueryNode::Kind::kBool) return node;

  for (QueryNode::Clause& c : node.clauses) c.node = CanonicalizeNode(std::move(c.node), /*is_root=*/false);

  // Identical clauses (same occurrence, same key) count once; sort by (key, occurrence).
  struct Keyed {
    std::string key;
    QueryNode::Clause clause;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(node.clauses.size());
  for (QueryNode::Clause& c : node.clauses) {
    Keyed k;
    AppendKey(c.node, &k.key);
    k.clause = std::move(c);
    keyed.push_back(std::move(k));
  }
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    if (a.key != b.key) return a.key < b.key;
    return static_cast<uint8_t>(a.clause.occur) < static_cast<uint8_t>(b.clause.occur);
  });
  node.clauses.clear();
  for (size_t i = 0; i < keyed.size(); ++i) {
    if (i > 0 && keyed[i].key == keyed[i - 1].key && keyed[i].clause.occur == keyed[i - 1].clause.occur) continue;
    node.clauses.push_back(std::move(keyed[i].clause));
  }

  // A group of one kMust, kShould or kDefault clause is that clause's node.
  if (!is_root && node.clauses.size() == 1) {
    const Occur o = node.clauses.front().occur;
    if (o == Occur::kMust || o == Occur::kShould || o == Occur::kDefault) {
      QueryNode inner = std::move(node.clauses.front().node);
      return inner;
    }
  }
  return node;
}

struct ValidateState {
  uint32_t clauses = 0;
};

Status ValidateNode(const QueryNode& node, uint32_t depth, ValidateState* st) {
  switch (node.kind) {
    case QueryNode::Kind::kTerm:
      if (node.tokens.size() != 1) return Status::InvalidArgument("query tree: a term has exactly one token");
      if (node.tokens.front().empty()) return Status::InvalidArgument("query tree: a term's token is empty");
      if (!node.clauses.empty()) return Status::InvalidArgument("query tree: a term has no clauses");
      return Status::Ok();
    case QueryNode::Kind::kPhrase:
      if (node.tokens.size() < 2 || node.tokens.size() > kMaxPhraseTokens)
        return Status::InvalidArgument("query tree: a phrase has 2 to " + std::to_string(kMaxPhraseTokens) +
                                       " tokens (got " + std::to_string(node.tokens.size()) + ")");
      for (const std::string& t : node.tokens)
        if (t.empty()) return Status::InvalidArgument("query tree: a phrase token is empty");
      if (!node.clauses.empty()) return Status::InvalidArgument("query tree: a phrase has no clauses");
      return Status::Ok();
    case QueryNode::Kind::kBool:
      break;
    default:
      return Status::InvalidArgument("query tree: unknown node kind " + std::to_string(static_cast<int>(node.kind)));
  }
  if (depth > kMaxTreeDepth)
    return Status::InvalidArgument("query tree: nested deeper than " + std::to_string(kMaxTreeDepth) + " groups");
  if (node.clauses.empty()) return Status::InvalidArgument("query tree: a boolean has no clauses");
  if (!node.tokens.empty()) return Status::InvalidArgument("query tree: a boolean has no tokens");
  for (const QueryNode::Clause& c : node.clauses) {
    if (static_cast<uint8_t>(c.occur) > static_cast<uint8_t>(Occur::kFilter))
      return Status::InvalidArgument("query tree: unknown occurrence " + std::to_string(static_cast<int>(c.occur)));
    if (++st->clauses > kMaxTreeClauses)
      return Status::InvalidArgument("query tree: more than " + std::to_string(kMaxTreeClauses) + " clauses");
    SEARCH_RETURN_IF_ERROR(ValidateNode(c.node, depth + 1, st));
  }
  return Status::Ok();
}

void CollectTokens(const QueryNode& node, std::vector<std::string>* out) {
  for (const std::string& t : node.tokens) out->push_back(t);
  for (const QueryNode::Clause& c : node.clauses) CollectTokens(c.node, out);
}

}  // namespace

std::string CanonicalKey(const QueryNode& node) {
  std::string key;
  AppendKey(node, &key);
  return key;
}

QueryNode ResolveMode(const QueryNode& tree, QueryMode mode) {
  QueryNode out = tree;
  ResolveInPlace(&out, mode == QueryMode::kOr ? Occur::kShould : Occur::kMust);
  return out;
}

QueryNode Canonicalize(QueryNode tree) {
  return CanonicalizeNode(std::move(tree), /*is_root=*/true);
}

Status ValidateTree(const QueryNode& tree) {
  if (tree.kind != QueryNode::Kind::kBool) return Status::InvalidArgument("query tree: the root is not a boolean");
  ValidateState st;
  return ValidateNode(tree, 0, &st);
}

std::vector<std::string> TreeTerms(const QueryNode& tree) {
  std::vector<std::string> terms;
  CollectTokens(tree, &terms);
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  return terms;
}

bool TreeHasPhrase(const QueryNode& tree) {
  if (tree.kind == QueryNode::Kind::kPhrase) return true;
  for (const QueryNode::Clause& c : tree.clauses)
    if (TreeHasPhrase(c.node)) return true;
  return false;
}

bool AsFlatQuery(const QueryNode& tree, QueryMode mode, std::vector<std::string>* terms, QueryMode* flat_mode) {
  if (tree.kind != QueryNode::Kind::kBool || tree.clauses.empty()) return false;
  const Occur occur = tree.clauses.front().occur;
  if (occur != Occur::kDefault && occur != Occur::kMust && occur != Occur::kShould) return false;
  for (const QueryNode::Clause& c : tree.clauses) {
    if (c.occur != occur || c.node.kind != QueryNode::Kind::kTerm || c.node.tokens.size() != 1) return false;
  }
  std::vector<std::string> out;
  out.reserve(tree.clauses.size());
  for (const QueryNode::Clause& c : tree.clauses) out.push_back(c.node.tokens.front());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (terms != nullptr) *terms = std::move(out);
  if (flat_mode != nullptr) {
    *flat_mode = occur == Occur::kDefault ? mode : (occur == Occur::kMust ? QueryMode::kAnd : QueryMode::kOr);
  }
  return true;
}

Query MakeQuery(QueryNode tree, QueryMode mode, uint32_t k, bool count) {
  QueryNode canonical = Canonicalize(std::move(tree));
  Query q;
  q.k = k;
  q.count = count;
  if (!count) {
    std::vector<std::string> terms;
    QueryMode flat_mode = mode;
    if (AsFlatQuery(canonical, mode, &terms, &flat_mode)) {
      q.terms = std::move(terms);
      q.mode = flat_mode;
      return q;
    }
  }
  q.terms = TreeTerms(canonical);
  q.mode = mode;
  q.tree = std::make_shared<const QueryNode>(std::move(canonical));
  return q;
}

}  // namespace search
