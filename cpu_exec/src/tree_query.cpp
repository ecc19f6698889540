#include "tree_query.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "block_cursor.hpp"
#include "core/score_slack.hpp"
#include "query_engine.hpp"

namespace search::cpu_internal {

namespace {

// A node of the evaluated tree. Advance(target) answers the first matching document >= target
// (kEndDoc: none left) and leaves the node on it; targets over a node's life never decrease, so
// a node already at or past the target stays put. Score() is the current document's score.
class Node {
 public:
  virtual ~Node() = default;
  uint32_t Advance(uint32_t target) {
    if (started_ && doc_ >= target) return doc_;
    started_ = true;
    doc_ = target == kEndDoc ? kEndDoc : NextGeq(target);
    return doc_;
  }
  uint32_t doc() const { return doc_; }
  // REQUIRES: doc() is a match (not kEndDoc).
  virtual float Score() = 0;
  // An estimate of how many documents the node matches at most (leapfrog order only).
  virtual uint64_t Cost() const = 0;
  // An upper bound of Score() over the matches in [d, *end], from block metadata only (nothing is
  // decoded); lowers *end to the last docID the bound covers. REQUIRES: d at least every target
  // the node has seen (block positions only move forward).
  virtual float Bound(uint32_t d, uint32_t* end) = 0;
  // For a top k without a count, where this node's score is the whole document score: documents
  // whose score bound times `slack` cannot beat *threshold may be passed over as non-matches.
  virtual void SetThreshold(const float* /*threshold*/, float /*slack*/) {}

 protected:
  // The first match >= target; target < kEndDoc and > the current document.
  virtual uint32_t NextGeq(uint32_t target) = 0;

 private:
  uint32_t doc_ = 0;
  bool started_ = false;
};

// A term absent here, a phrase with such a token, a boolean of kMustNot clauses only.
class NeverNode final : public Node {
 public:
  float Score() override { return 0.0f; }
  uint64_t Cost() const override { return 0; }
  float Bound(uint32_t, uint32_t*) override { return 0.0f; }

 protected:
  uint32_t NextGeq(uint32_t) override { return kEndDoc; }
};

class TermNode final : public Node {
 public:
  TermNode(const ListView* list, float idf, const CursorEnv* env) { cursor_.reset(list, idf, 0, env); }
  float Score() override { return cursor_.score(); }
  uint64_t Cost() const override { return cursor_.size(); }
  float Bound(uint32_t d, uint32_t* end) override {
    cursor_.shallow_seek(d);
    if (cursor_.blocks_exhausted()) return 0.0f;  // no match left
    *end = std::min(*end, cursor_.block_last_doc());
    return cursor_.block_max_score();
  }

 protected:
  uint32_t NextGeq(uint32_t target) override {
    cursor_.next_geq(target);
    return cursor_.doc();
  }

 private:
  BlockCursor cursor_;
};

// One distinct token of a phrase: its cursor and its positions, decoded a block at a time.
struct PhraseToken {
  BlockCursor cursor;
  const PositionsView* positions = nullptr;
  uint32_t decoded_block = kEndDoc;  // the block `offsets` / `pos` hold
  std::vector<uint32_t> offsets, pos;
};

class PhraseNode final : public Node {
 public:
  static constexpr float kPhraseBoundMargin = 1.0f + 1e-5f;

  // `slots[i]` is the index in `tokens` of the phrase's i-th token (text order).
  PhraseNode(std::vector<std::unique_ptr<PhraseToken>> tokens, std::vector<uint32_t> slots, float idf,
             const CursorEnv* env)
      : tokens_(std::move(tokens)), slots_(std::move(slots)), idf_(idf), env_(env) {
    for (auto& t : tokens_) order_.push_back(t.get());
    std::sort(order_.begin(), order_.end(),
              [](const PhraseToken* a, const PhraseToken* b) { return a->cursor.size() < b->cursor.size(); });
    lists_.resize(slots_.size());
  }
  float Score() override { return Bm25TermScore(idf_, tf_, env_->norms[doc() - env_->doc_begin], env_->k1); }
  uint64_t Cost() const override { return order_.front()->cursor.size(); }
  // The phrase's tf is at most each token's tf, and BM25 grows with tf, so for every token t the
  // phrase scores at most idf_p / idf_t times t's score there: its block maximum, scaled. The
  // factor kPhraseBoundMargin covers the float rounding of the scaling and of the two scores.
  void SetThreshold(const float* threshold, float slack) override {
    threshold_ = threshold;
    slack_ = slack;
  }
  float Bound(uint32_t d, uint32_t* end) override {
    float bound = std::numeric_limits<float>::infinity();
    for (PhraseToken* t : order_) {
      BlockCursor& c = t->cursor;
      c.shallow_seek(d);
      if (c.blocks_exhausted()) return 0.0f;  // no match left
      *end = std::min(*end, c.block_last_doc());
      const float idf_t = c.idf();
      if (idf_t > 0.0f) bound = std::min(bound, c.block_max_score() * (idf_ / idf_t) * kPhraseBoundMargin);
    }
    return bound;
  }

 protected:
  uint32_t NextGeq(uint32_t target) override {
    uint32_t d = target;
    for (;;) {
      // Leapfrog: every distinct token's cursor on one document.
      const size_t m = order_.size();
      size_t agreed = 0;
      for (size_t i = 0; agreed < m; i = (i + 1) % m) {
        BlockCursor& c = order_[i]->cursor;
        c.next_geq(d);
        const uint32_t x = c.doc();
        if (x == kEndDoc) return kEndDoc;
        if (x != d) {
          d = x;
          agreed = 1;
        } else {
          ++agreed;
        }
      }
      if (threshold_ != nullptr && !Competitive()) {
        if (d + 1 == kEndDoc) return kEndDoc;
        ++d;
        continue;
      }
      const uint32_t tf = CountAt();
      if (!env_->error->ok()) return kEndDoc;
      if (tf > 0) {
        tf_ = tf;
        return d;
      }
      if (d + 1 == kEndDoc) return kEndDoc;
      ++d;
    }
  }

 private:
  // Whether the document every cursor is on may beat the threshold: the phrase's score there is at
  // most each token's exact score scaled as in Bound (checked before any positions are decoded).
  bool Competitive() {
    const float thr = *threshold_;
    if (thr == -std::numeric_limits<float>::infinity()) return true;
    float bound = std::numeric_limits<float>::infinity();
    for (PhraseToken* t : order_) {
      BlockCursor& c = t->cursor;
      if (c.idf() > 0.0f) bound = std::min(bound, c.score() * (idf_ / c.idf()) * kPhraseBoundMargin);
    }
    return !(bound * slack_ <= thr);
  }

  // The positions of token t at its cursor's document, in lists_-ready form; false on Corruption.
  bool PositionsOf(PhraseToken& t, const uint32_t** begin, const uint32_t** end) {
    BlockCursor& c = t.cursor;
    const uint32_t j = c.block();
    if (t.decoded_block != j) {
      Status st = t.positions->DecodeBlock(j, &t.offsets, &t.pos);
      if (st.ok() && t.offsets.size() != c.block_count() + 1)
        st = Status::Corruption("positions block " + std::to_string(j) + " holds " +
                                std::to_string(t.offsets.size() - 1) + " postings, the list's block " +
                                std::to_string(c.block_count()));
      if (!st.ok()) {
        if (env_->error->ok()) *env_->error = st;
        return false;
      }
      t.decoded_block = j;
    }
    const uint32_t p = c.pos();
    const uint32_t from = t.offsets[p], to = t.offsets[p + 1];
    if (from > to || to > t.pos.size() || to - from != c.freq()) {
      if (env_->error->ok())
        *env_->error =
            Status::Corruption("positions of docID " + std::to_string(c.doc()) + " disagree with its term frequency");
      return false;
    }
    *begin = t.pos.data() + from;
    *end = t.pos.data() + to;
    return true;
  }

  // The number of start positions p where token i of the phrase occurs at p + i for every i;
  // 0 on Corruption (recorded).
  uint32_t CountAt() {
    const size_t n = slots_.size();
    for (size_t i = 0; i < n; ++i) {
      if (!PositionsOf(*tokens_[slots_[i]], &lists_[i].first, &lists_[i].second)) return 0;
    }
    uint32_t tf = 0;
    auto& cur = cur_;  // per token: the first position not yet below the candidate
    cur.assign(lists_.begin(), lists_.end());
    for (const uint32_t* s = cur[0].first; s != cur[0].second; ++s) {
      const uint64_t p = *s;
      bool all = true;
      for (size_t i = 1; i < n && all; ++i) {
        const uint64_t want = p + i;
        const uint32_t*& q = cur[i].first;
        while (q != cur[i].second && *q < want) ++q;
        if (q == cur[i].second) return tf;  // no later start can complete either
        all = *q == want;
      }
      if (all) ++tf;
    }
    return tf;
  }

  std::vector<std::unique_ptr<PhraseToken>> tokens_;
  std::vector<PhraseToken*> order_;  // by list size, shortest first
  std::vector<uint32_t> slots_;
  std::vector<std::pair<const uint32_t*, const uint32_t*>> lists_;  // per phrase slot
  std::vector<std::pair<const uint32_t*, const uint32_t*>> cur_;    // CountAt's walk, reused
  float idf_;
  const CursorEnv* env_;
  uint32_t tf_ = 0;
  const float* threshold_ = nullptr;  // SetThreshold
  float slack_ = 1.0f;
};

class BoolNode final : public Node {
 public:
  struct Child {
    Occur occur;
    std::unique_ptr<Node> node;
  };
  explicit BoolNode(std::vector<Child> clauses) : clauses_(std::move(clauses)) {
    for (Child& c : clauses_) {
      switch (c.occur) {
        case Occur::kMust:
        case Occur::kFilter:
          required_.push_back(c.node.get());
          break;
        case Occur::kShould:
          should_.push_back(c.node.get());
          break;
        case Occur::kMustNot:
          must_not_.push_back(c.node.get());
          break;
        case Occur::kDefault:
          break;  // refused before construction
      }
    }
    std::sort(required_.begin(), required_.end(), [](const Node* a, const Node* b) { return a->Cost() < b->Cost(); });
  }

  float Score() override {
    const uint32_t d = doc();
    float s = 0.0f;
    for (Child& c : clauses_) {
      if (c.occur == Occur::kMust) {
        s += c.node->Score();
      } else if (c.occur == Occur::kShould && c.node->Advance(d) == d) {
        s += c.node->Score();
      }
    }
    return s;
  }

  // The sum of the must and should clauses' bounds (filter and must_not clauses add nothing).
  float Bound(uint32_t d, uint32_t* end) override {
    float sum = 0.0f;
    for (Child& c : clauses_)
      if (c.occur == Occur::kMust || c.occur == Occur::kShould) sum += c.node->Bound(d, end);
    return sum;
  }

  // The only kMust or kShould clause's node, which then scores the boolean alone; else nullptr.
  Node* SoleScoringChild() const {
    Node* only = nullptr;
    for (const Child& c : clauses_) {
      if (c.occur != Occur::kMust && c.occur != Occur::kShould) continue;
      if (only != nullptr) return nullptr;
      only = c.node.get();
    }
    return only;
  }

  uint64_t Cost() const override {
    if (!required_.empty()) return required_.front()->Cost();
    uint64_t sum = 0;
    for (const Node* n : should_) sum += n->Cost();
    return sum;
  }

 protected:
  uint32_t NextGeq(uint32_t target) override {
    if (required_.empty() && should_.empty()) return kEndDoc;  // kMustNot clauses only
    uint32_t d = target;
    for (;;) {
      if (!required_.empty()) {
        const size_t m = required_.size();
        size_t agreed = 0;
        for (size_t i = 0; agreed < m; i = (i + 1) % m) {
          const uint32_t x = required_[i]->Advance(d);
          if (x == kEndDoc) return kEndDoc;
          if (x != d) {
            d = x;
            agreed = 1;
          } else {
            ++agreed;
          }
        }
      } else {
        uint32_t best = kEndDoc;
        for (Node* n : should_) best = std::min(best, n->Advance(d));
        if (best == kEndDoc) return kEndDoc;
        d = best;
      }
      bool excluded = false;
      for (Node* n : must_not_) {
        if (n->Advance(d) == d) {
          excluded = true;
          break;
        }
      }
      if (!excluded) return d;
      if (d + 1 == kEndDoc) return kEndDoc;
      ++d;
    }
  }

 private:
  std::vector<Child> clauses_;  // canonical order: the order scores are added in
  std::vector<Node*> required_, should_, must_not_;
};

// Builds the evaluated tree; tokens are looked up in the sorted `terms`.
class Builder {
 public:
  Builder(std::span<const std::string> terms, std::span<const TreeTermInput> inputs, const CursorEnv* env)
      : terms_(terms), inputs_(inputs), env_(env) {}

  // The input of `token`; InvalidArgument when `terms` lacks it.
  Result<const TreeTermInput*> Find(const std::string& token) const {
    auto it = std::lower_bound(terms_.begin(), terms_.end(), token);
    if (it == terms_.end() || *it != token)
      return Status::InvalidArgument("query token '" + token + "' is not among the query's terms");
    return &inputs_[static_cast<size_t>(it - terms_.begin())];
  }

  // Terms and phrases built so far: the score is a float sum of at most that many contributions.
  size_t leaves() const { return leaves_; }

  Result<std::unique_ptr<Node>> Build(const QueryNode& node) {
    switch (node.kind) {
      case QueryNode::Kind::kTerm: {
        if (node.tokens.size() != 1) return Status::InvalidArgument("a term node must hold one token");
        SEARCH_ASSIGN_OR_RETURN(const TreeTermInput* in, Find(node.tokens[0]));
        ++leaves_;
        if (in->list == nullptr) return std::unique_ptr<Node>(new NeverNode());
        return std::unique_ptr<Node>(new TermNode(in->list, in->idf, env_));
      }
      case QueryNode::Kind::kPhrase:
        return BuildPhrase(node);
      case QueryNode::Kind::kBool: {
        std::vector<BoolNode::Child> children;
        children.reserve(node.clauses.size());
        for (const QueryNode::Clause& c : node.clauses) {
          if (c.occur == Occur::kDefault)
            return Status::InvalidArgument("the tree has a bare clause left: resolve the mode first");
          if (c.occur > Occur::kFilter) return Status::InvalidArgument("unknown clause occurrence");
          SEARCH_ASSIGN_OR_RETURN(std::unique_ptr<Node> child, Build(c.node));
          children.push_back({c.occur, std::move(child)});
        }
        return std::unique_ptr<Node>(new BoolNode(std::move(children)));
      }
    }
    return Status::InvalidArgument("unknown query node kind");
  }

 private:
  Result<std::unique_ptr<Node>> BuildPhrase(const QueryNode& node) {
    if (node.tokens.size() < 2) return Status::InvalidArgument("a phrase must hold at least two tokens");
    ++leaves_;
    float idf = 0.0f;
    bool absent = false;
    std::vector<const TreeTermInput*> distinct;
    std::vector<uint32_t> slots;
    for (const std::string& token : node.tokens) {
      SEARCH_ASSIGN_OR_RETURN(const TreeTermInput* in, Find(token));
      idf += in->idf;  // text order, repeats counted
      if (in->list == nullptr) absent = true;
      auto it = std::find(distinct.begin(), distinct.end(), in);
      slots.push_back(static_cast<uint32_t>(it - distinct.begin()));
      if (it == distinct.end()) distinct.push_back(in);
    }
    if (absent) return std::unique_ptr<Node>(new NeverNode());
    std::vector<std::unique_ptr<PhraseToken>> tokens;
    for (const TreeTermInput* in : distinct) {
      if (in->positions == nullptr) return Status::InvalidArgument("a phrase needs positions, which this shard lacks");
      if (in->positions->count() != in->list->count() || in->positions->num_blocks() != in->list->num_blocks())
        return Status::Corruption("positions of " + std::to_string(in->positions->count()) +
                                  " postings for a list of " + std::to_string(in->list->count()));
      auto t = std::make_unique<PhraseToken>();
      t->cursor.reset(in->list, in->idf, 0, env_);
      t->positions = in->positions;
      tokens.push_back(std::move(t));
    }
    return std::unique_ptr<Node>(new PhraseNode(std::move(tokens), std::move(slots), idf, env_));
  }

  std::span<const std::string> terms_;
  std::span<const TreeTermInput> inputs_;
  const CursorEnv* env_;
  size_t leaves_ = 0;
};

}  // namespace

Status CheckListRange(const ListView* list, uint32_t doc_begin, uint64_t num_docs) {
  if (list == nullptr) return Status::Ok();
  if (list->count() == 0 || list->num_blocks() == 0) return Status::Corruption("empty posting list");
  const uint32_t last = list->block(list->num_blocks() - 1).last_doc;
  if (last == kEndDoc || static_cast<uint64_t>(last) >= doc_begin + num_docs)
    return Status::Corruption("posting list docID " + std::to_string(last) + " outside the shard's documents [" +
                              std::to_string(doc_begin) + ", " + std::to_string(doc_begin + num_docs) + ")");
  return Status::Ok();
}

QueryNode FlatTree(std::span<const std::string> terms, QueryMode mode) {
  QueryNode root;
  root.kind = QueryNode::Kind::kBool;
  for (const std::string& t : terms) {
    QueryNode::Clause c;
    c.occur = mode == QueryMode::kAnd ? Occur::kMust : Occur::kShould;
    c.node.kind = QueryNode::Kind::kTerm;
    c.node.tokens = {t};
    root.clauses.push_back(std::move(c));
  }
  return root;
}

Result<SearchResult> ExecuteTree(const QueryNode& tree, std::span<const std::string> terms,
                                 std::span<const TreeTermInput> inputs, std::span<const float> norms,
                                 uint32_t doc_begin, uint32_t k, bool count, const Bm25Params& params) {
  const auto t0 = std::chrono::steady_clock::now();
  if (k > kMaxK || (k == 0 && !count)) SEARCH_RETURN_IF_ERROR(ValidateK(k));
  if (terms.size() != inputs.size()) return Status::InvalidArgument("one input per query term is needed");
  if (tree.kind != QueryNode::Kind::kBool) return Status::InvalidArgument("the root of a query tree is a boolean");
  SearchResult result;
  result.has_total = count;
  for (const TreeTermInput& in : inputs) {
    SEARCH_RETURN_IF_ERROR(CheckListRange(in.list, doc_begin, norms.size()));
    if (in.list != nullptr) ++result.stats.lists;
  }
  Status error;
  CursorEnv env{
      .norms = norms.data(), .doc_begin = doc_begin, .k1 = params.k1, .stats = &result.stats, .error = &error};
  Builder builder(terms, inputs, &env);
  SEARCH_ASSIGN_OR_RETURN(std::unique_ptr<Node> root, builder.Build(tree));
  uint64_t total = 0;
  const QueryNode::Clause* only = tree.clauses.size() == 1 ? &tree.clauses[0] : nullptr;
  if (k == 0 && only != nullptr && only->node.kind == QueryNode::Kind::kTerm && only->occur != Occur::kMustNot) {
    // One term: its list's length.
    SEARCH_ASSIGN_OR_RETURN(const TreeTermInput* in, builder.Find(only->node.tokens[0]));
    total = in->list != nullptr ? in->list->count() : 0;
  } else if (k == 0) {
    for (uint32_t d = root->Advance(0); d != kEndDoc; d = d + 1 == kEndDoc ? kEndDoc : root->Advance(d + 1)) ++total;
  } else if (count) {
    // Every match is counted; one is scored only when the block bound at it can beat the k-th.
    TopKHeap topk(k);
    const float slack = ScoreSlack(builder.leaves());
    float bound = 0.0f;
    uint32_t bound_end = 0;  // bound holds for matches in [.., bound_end]; 0: none computed
    for (uint32_t d = root->Advance(0); d != kEndDoc; d = d + 1 == kEndDoc ? kEndDoc : root->Advance(d + 1)) {
      ++total;
      if (topk.full()) {
        if (bound_end == 0 || d > bound_end) {
          bound_end = kEndDoc;
          bound = root->Bound(d, &bound_end);
        }
        if (bound * slack <= topk.Threshold()) continue;
      }
      topk.Push(d, root->Score());
      ++result.stats.postings_scored;
    }
    result.hits = topk.TakeSorted();
  } else {
    // Top k only: once the heap is full, a docID range whose block bound cannot beat the k-th is
    // skipped without visiting its documents (block-max, as the flat and-query does).
    TopKHeap topk(k);
    const float slack = ScoreSlack(builder.leaves());
    float threshold = -std::numeric_limits<float>::infinity();
    if (Node* only = static_cast<BoolNode*>(root.get())->SoleScoringChild()) only->SetThreshold(&threshold, slack);
    uint32_t d = 0;
    while (d != kEndDoc) {
      if (topk.full()) {
        uint32_t end = kEndDoc;
        const float bound = root->Bound(d, &end);
        if (bound * slack <= topk.Threshold()) {
          if (end == kEndDoc) break;  // nothing from d on can enter
          d = end + 1;
          continue;
        }
      }
      d = root->Advance(d);
      if (d == kEndDoc) break;
      topk.Push(d, root->Score());
      threshold = topk.Threshold();
      ++result.stats.postings_scored;
      ++d;  // d < kEndDoc before: at most kEndDoc
    }
    result.hits = topk.TakeSorted();
  }
  if (!error.ok()) return error;
  result.total = count ? total : 0;
  result.stats.micros = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  return result;
}

}  // namespace search::cpu_internal
