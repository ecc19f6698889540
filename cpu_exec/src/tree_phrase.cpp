#include "tree_phrase.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "block_cursor.hpp"
#include "codec/positions_codec.hpp"
#include "core/score_slack.hpp"
#include "query_engine.hpp"

namespace search::cpu_internal {

namespace {

// Covers the float rounding of a token score scaled by idf_phrase / idf_token against the
// phrase's own score (a few ulps; the tree evaluator's PhraseNode uses the same margin).
constexpr float kPhraseBoundMargin = 1.0f + 1e-5f;

// One distinct token of the phrase: its cursor and its positions, decoded a block at a time.
struct Token {
  BlockCursor cursor;
  const PositionsView* positions = nullptr;
  float ratio = 0.0f;  // idf_phrase / idf_token (0 when idf_token is 0: no bound from this token)
  uint32_t decoded_block = kEndDoc;
  std::vector<uint32_t> offsets, pos;
};

class SolePhrase {
 public:
  SolePhrase(std::vector<std::unique_ptr<Token>> tokens, std::vector<uint32_t> slots, float idf, bool scored,
             const CursorEnv* env)
      : tokens_(std::move(tokens)), slots_(std::move(slots)), idf_(idf), scored_(scored), env_(env) {
    for (auto& t : tokens_) order_.push_back(t.get());
    std::sort(order_.begin(), order_.end(),
              [](const Token* a, const Token* b) { return a->cursor.size() < b->cursor.size(); });
    spans_.resize(slots_.size());
  }

  // Visits every match; k == 0: the count only.
  void Run(uint32_t k, bool count, uint64_t* total, std::vector<ScoredDoc>* hits) {
    TopKHeap topk(std::max(k, 1u));
    const float slack = ScoreSlack(order_.size());
    float thr = -std::numeric_limits<float>::infinity();
    bool full = false;  // k > 0 and the heap is full
    uint32_t bound_end = 0;  // without a count: [.., bound_end] was checked against the block bound
    uint64_t matches = 0;
    const size_t m = order_.size();
    uint32_t d = 0;
    for (;;) {
      if (full && !count && d > bound_end) {
        // Skip docID ranges whose block-max bound cannot win (metadata only).
        uint32_t end = kEndDoc;
        float bound = std::numeric_limits<float>::infinity();
        for (Token* t : order_) {
          BlockCursor& c = t->cursor;
          c.shallow_seek(d);
          if (c.blocks_exhausted()) {
            end = kEndDoc;
            bound = 0.0f;
            d = kEndDoc;
            break;
          }
          end = std::min(end, c.block_last_doc());
          if (t->ratio > 0.0f) bound = std::min(bound, c.block_max_score() * t->ratio * kPhraseBoundMargin);
        }
        if (d == kEndDoc) break;
        if (!scored_) bound = 0.0f;
        if (bound * slack <= thr) {
          if (end == kEndDoc) break;
          d = end + 1;
          continue;
        }
        bound_end = end;
      }
      // Leapfrog: every distinct token's cursor on one document >= d.
      size_t agreed = 0;
      for (size_t i = 0; agreed < m; i = i + 1 == m ? 0 : i + 1) {
        BlockCursor& c = order_[i]->cursor;
        c.next_geq(d);
        const uint32_t x = c.doc();
        if (x == kEndDoc) {
          d = kEndDoc;
          break;
        }
        if (x != d) {
          d = x;
          agreed = 1;
        } else {
          ++agreed;
        }
      }
      if (d == kEndDoc) break;
      // Whether d can enter the top k; if not, only its existence matters (with a count).
      bool competitive = k > 0 && !full;
      if (k > 0 && full && scored_) {
        float bound = std::numeric_limits<float>::infinity();
        for (Token* t : order_)
          if (t->ratio > 0.0f) bound = std::min(bound, t->cursor.score() * t->ratio * kPhraseBoundMargin);
        competitive = !(bound * slack <= thr);
      }
      if (competitive || count) {
        const uint32_t tf = Tf(!competitive);
        if (!env_->error->ok()) break;
        if (tf > 0) {
          ++matches;
          if (competitive) {
            const float s =
                scored_ ? Bm25TermScore(idf_, tf, env_->norms[d - env_->doc_begin], env_->k1) : 0.0f;
            topk.Push(d, s);
            ++env_->stats->postings_scored;
            full = topk.full();
            thr = topk.Threshold();
          }
        }
      }
      if (d + 1 == kEndDoc) break;
      ++d;
    }
    *total = matches;
    if (k > 0) *hits = topk.TakeSorted();
  }

 private:
  // The positions of token t at its cursor's document; false on Corruption (recorded).
  bool PositionsOf(Token& t, const uint32_t** begin, const uint32_t** end) {
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

  // The phrase's tf at the document every cursor is on: the starts s with slot i at s + i for
  // every i. The rarest slot's positions, shifted to starts, are filtered through every other
  // slot by a branch-free merge. `any`: stop at 1 (existence). 0 on Corruption (recorded).
  uint32_t Tf(bool any) {
    const size_t n = slots_.size();
    size_t rare = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!PositionsOf(*tokens_[slots_[i]], &spans_[i].first, &spans_[i].second)) return 0;
      if (spans_[i].second - spans_[i].first < spans_[rare].second - spans_[rare].first) rare = i;
    }
    starts_.clear();
    for (const uint32_t* q = spans_[rare].first; q != spans_[rare].second; ++q)
      if (*q >= rare) starts_.push_back(*q - static_cast<uint32_t>(rare));
    uint32_t live = static_cast<uint32_t>(starts_.size());
    uint32_t* s = starts_.data();
    for (size_t i = 0; i < n && live > 0; ++i) {
      if (i == rare) continue;
      const uint32_t* b = spans_[i].first;
      const uint32_t nb = static_cast<uint32_t>(spans_[i].second - b);
      uint32_t x = 0, y = 0, out = 0;
      while (x < live && y < nb) {
        const uint64_t want = uint64_t{s[x]} + i, have = b[y];
        s[out] = s[x];
        out += static_cast<uint32_t>(want == have);
        x += static_cast<uint32_t>(want <= have);
        y += static_cast<uint32_t>(have <= want);
      }
      live = out;
    }
    return any ? std::min(live, 1u) : live;
  }

  std::vector<std::unique_ptr<Token>> tokens_;
  std::vector<Token*> order_;  // by list size, shortest first
  std::vector<uint32_t> slots_;
  std::vector<std::pair<const uint32_t*, const uint32_t*>> spans_;  // per phrase slot
  std::vector<uint32_t> starts_;
  float idf_;
  bool scored_;
  const CursorEnv* env_;
};

}  // namespace

Result<std::optional<SearchResult>> ExecuteSolePhrase(const QueryNode& tree, std::span<const std::string> terms,
                                                      std::span<const TreeTermInput> inputs,
                                                      std::span<const float> norms, uint32_t doc_begin, uint32_t k,
                                                      bool count, const Bm25Params& params) {
  const auto t0 = std::chrono::steady_clock::now();
  if (tree.kind != QueryNode::Kind::kBool || tree.clauses.size() != 1 || terms.size() != inputs.size())
    return std::optional<SearchResult>();
  const QueryNode::Clause& clause = tree.clauses[0];
  if (clause.node.kind != QueryNode::Kind::kPhrase || clause.node.tokens.size() < 2 ||
      clause.node.tokens.size() > kMaxPhraseTokens)
    return std::optional<SearchResult>();
  if (clause.occur != Occur::kMust && clause.occur != Occur::kShould && clause.occur != Occur::kFilter)
    return std::optional<SearchResult>();
  float idf = 0.0f;
  bool absent = false;
  std::vector<const TreeTermInput*> distinct;
  std::vector<uint32_t> slots;
  for (const std::string& token : clause.node.tokens) {
    auto it = std::lower_bound(terms.begin(), terms.end(), token);
    if (it == terms.end() || *it != token) return std::optional<SearchResult>();
    const TreeTermInput* in = &inputs[static_cast<size_t>(it - terms.begin())];
    idf += in->idf;  // text order, repeats counted
    absent |= in->list == nullptr;
    auto d = std::find(distinct.begin(), distinct.end(), in);
    slots.push_back(static_cast<uint32_t>(d - distinct.begin()));
    if (d == distinct.end()) distinct.push_back(in);
  }
  if (!absent) {
    for (const TreeTermInput* in : distinct)
      if (in->positions == nullptr || in->positions->count() != in->list->count() ||
          in->positions->num_blocks() != in->list->num_blocks())
        return std::optional<SearchResult>();
  }
  SearchResult result;
  result.has_total = count;
  for (const TreeTermInput& in : inputs) {
    SEARCH_RETURN_IF_ERROR(CheckListRange(in.list, doc_begin, norms.size()));
    if (in.list != nullptr) ++result.stats.lists;
  }
  if (!absent) {
    Status error;
    CursorEnv env;
    env.norms = norms.data();
    env.doc_begin = doc_begin;
    env.k1 = params.k1;
    env.stats = &result.stats;
    env.error = &error;
    std::vector<std::unique_ptr<Token>> tokens;
    for (const TreeTermInput* in : distinct) {
      auto t = std::make_unique<Token>();
      t->cursor.reset(in->list, in->idf, 0, &env);
      t->positions = in->positions;
      t->ratio = in->idf > 0.0f ? idf / in->idf : 0.0f;
      tokens.push_back(std::move(t));
    }
    SolePhrase phrase(std::move(tokens), std::move(slots), idf, clause.occur != Occur::kFilter, &env);
    uint64_t total = 0;
    phrase.Run(k, count, &total, &result.hits);
    if (!error.ok()) return error;
    result.total = count ? total : 0;
  }
  result.stats.micros = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  return std::optional<SearchResult>(std::move(result));
}

}  // namespace search::cpu_internal
