#include "cpu_exec/cpu_executor.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "block_cursor.hpp"
#include "core/score_slack.hpp"
#include "index_store/shard_store.hpp"
#include "and_query.hpp"
#include "or_query.hpp"
#include "query_engine.hpp"
#include "tree_phrase.hpp"
#include "tree_prune.hpp"
#include "tree_query.hpp"

namespace search {

QueryStats& QueryStats::operator+=(const QueryStats& o) {
  lists += o.lists;
  blocks_decoded += o.blocks_decoded;
  freq_blocks_decoded += o.freq_blocks_decoded;
  postings_decoded += o.postings_decoded;
  postings_scored += o.postings_scored;
  bytes_touched += o.bytes_touched;
  micros += o.micros;
  return *this;
}

namespace {

using cpu_internal::BlockCursor;
using cpu_internal::CursorEnv;
using cpu_internal::kEndDoc;
using cpu_internal::ScoreSheet;

uint64_t MicrosSince(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
}

// Per-thread buffers reused across queries, so a query allocates nothing but its result.
struct Scratch {
  std::vector<BlockCursor> cursors;
  std::vector<BlockCursor*> order;
  std::vector<float> sheet, a, b;
  std::vector<float> acc = std::vector<float>(cpu_internal::kWindow, 0.0f);        // all 0 between queries
  std::vector<uint64_t> bits = std::vector<uint64_t>(cpu_internal::kWindow / 64, 0);  // all 0 between queries
  void Reserve(size_t n) {
    if (cursors.size() < n) cursors.resize(n);
    if (order.size() < n) order.resize(n);
    if (sheet.size() < n) sheet.assign(n, 0.0f);
    if (a.size() < n + 1) a.resize(n + 1);
    if (b.size() < n + 1) b.resize(n + 1);
  }
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The cursors of the present terms (slot = canonical position) in the thread's scratch, their
// stats and errors routed to `local` / `error`, and a zeroed score sheet. Returns how many.
size_t SetUpCursors(std::span<const TermInput> terms, const CursorEnv& env_in, CursorEnv* env, QueryStats* local,
                    Status* error) {
  const size_t n = terms.size();
  Scratch& s = ThreadScratch();
  s.Reserve(n);
  *env = env_in;
  env->stats = local;
  env->error = error;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (terms[i].list == nullptr) continue;
    s.cursors[m].reset(terms[i].list, terms[i].idf, static_cast<uint32_t>(i), env);
    s.order[m] = &s.cursors[m];
    ++m;
  }
  std::fill(s.sheet.begin(), s.sheet.begin() + static_cast<std::ptrdiff_t>(n), 0.0f);
  return m;
}

void SortBySize(BlockCursor** cur, size_t m) {
  std::sort(cur, cur + m, [](const BlockCursor* x, const BlockCursor* y) {
    return x->size() != y->size() ? x->size() < y->size() : x->slot() < y->slot();
  });
}

// The and-part over candidates only: each candidate is followed into every list, shortest first
// (next_geq moves forward only: candidates ascend), and scored by slot when all hold it.
Result<std::vector<ScoredDoc>> RunCandidates(std::span<const TermInput> terms, const CursorEnv& env_in,
                                             std::span<const uint32_t> candidates, uint32_t k, QueryStats* stats) {
  const size_t n = terms.size();
  size_t present = 0;
  for (const TermInput& t : terms) present += t.list != nullptr ? 1 : 0;
  stats->lists += present;
  if (present == 0 || present < n) return std::vector<ScoredDoc>{};
  Status error;
  QueryStats local;
  CursorEnv env;
  const size_t m = SetUpCursors(terms, env_in, &env, &local, &error);
  Scratch& s = ThreadScratch();
  BlockCursor** cur = s.order.data();
  SortBySize(cur, m);
  ScoreSheet sheet(s.sheet.data(), n);
  cpu_internal::TopKHeap topk(k);
  uint32_t prev = 0;
  for (size_t c = 0; c < candidates.size() && error.ok(); ++c) {
    const uint32_t d = candidates[c];
    if (d == kEndDoc || (c > 0 && d <= prev)) return Status::InvalidArgument("candidates must be strictly ascending");
    prev = d;
    size_t j = 0;
    for (; j < m; ++j) {
      cur[j]->next_geq(d);
      if (cur[j]->doc() != d) break;
      sheet.set(cur[j]->slot(), cur[j]->score());
    }
    if (j < m) {
      sheet.clear();
      if (cur[j]->doc() == kEndDoc) break;  // a list ran out: no later candidate matches
      continue;
    }
    topk.Push(d, sheet.sum_and_clear());
    ++local.postings_scored;
  }
  *stats += local;
  if (!error.ok()) return error;
  return topk.TakeSorted();
}

// One mode (and / or) over the given terms. Appends its stats; returns the hits best first.
Result<std::vector<ScoredDoc>> RunMode(std::span<const TermInput> terms, const CursorEnv& env_in, bool conjunctive,
                                       uint32_t k, QueryStats* stats) {
  const size_t n = terms.size();
  size_t present = 0;
  for (const TermInput& t : terms) present += t.list != nullptr ? 1 : 0;
  stats->lists += present;
  if (present == 0 || (conjunctive && present < n)) return std::vector<ScoredDoc>{};

  Scratch& s = ThreadScratch();
  Status error;
  QueryStats local;
  CursorEnv env;
  const size_t m = SetUpCursors(terms, env_in, &env, &local, &error);
  BlockCursor** cur = s.order.data();
  ScoreSheet sheet(s.sheet.data(), n);
  cpu_internal::TopKHeap topk(k);
  const float slack = ScoreSlack(n);
  if (conjunctive && m > 1) {  // one list: its and is its or, and the or skips blocks faster
    SortBySize(cur, m);
    cpu_internal::RunAnd(cur, m, sheet, topk, slack, s.a.data(), local);
  } else {
    std::sort(cur, cur + m, [](const BlockCursor* x, const BlockCursor* y) {
      return x->max_score() != y->max_score() ? x->max_score() < y->max_score() : x->slot() < y->slot();
    });
    cpu_internal::OrQuery<BlockCursor> query(cur, m, sheet, topk, slack,
                                             {s.a.data(), s.b.data(), s.acc.data(), s.bits.data()}, local);
    query.Run();
  }
  *stats += local;
  if (!error.ok()) return error;
  return topk.TakeSorted();
}

// Checks in O(1) per list that scoring never reads outside the norms: a list's docIDs are at most
// its last block's last_doc (ListView::Parse and DecodeDocs vouch for that), which must lie below
// doc_begin + num_docs; the lower end (>= doc_begin) is checked as each block is decoded.
Status CheckLists(std::span<const TermInput> terms, uint32_t doc_begin, uint64_t num_docs) {
  for (const TermInput& t : terms) SEARCH_RETURN_IF_ERROR(cpu_internal::CheckListRange(t.list, doc_begin, num_docs));
  return Status::Ok();
}

// With `candidates`, the and-part runs over them only (ExecuteQueryFromCandidates).
Result<SearchResult> Execute(std::span<const TermInput> terms, const float* norms, uint32_t doc_begin,
                             uint64_t num_docs, QueryMode mode, uint32_t k, const Bm25Params& params,
                             const std::span<const uint32_t>* candidates = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  SEARCH_RETURN_IF_ERROR(ValidateK(k));
  SEARCH_RETURN_IF_ERROR(CheckLists(terms, doc_begin, num_docs));
  SearchResult result;
  if (terms.empty()) return result;
  CursorEnv env;
  env.norms = norms;
  env.doc_begin = doc_begin;
  env.k1 = params.k1;
  if (candidates != nullptr) {
    if (mode == QueryMode::kOr) return Status::InvalidArgument("an or-query has no candidate set");
    for (uint32_t d : *candidates)
      if (d < doc_begin || static_cast<uint64_t>(d) >= doc_begin + num_docs)
        return Status::Corruption("candidate docID " + std::to_string(d) + " outside the shard's documents");
  }
  if (mode == QueryMode::kOr) {
    SEARCH_ASSIGN_OR_RETURN(result.hits, RunMode(terms, env, false, k, &result.stats));
  } else {
    if (candidates != nullptr) {
      SEARCH_ASSIGN_OR_RETURN(result.hits, RunCandidates(terms, env, *candidates, k, &result.stats));
    } else {
      SEARCH_ASSIGN_OR_RETURN(result.hits, RunMode(terms, env, true, k, &result.stats));
    }
    if (mode == QueryMode::kAndOr && result.hits.size() < k) {
      SEARCH_ASSIGN_OR_RETURN(result.hits, RunMode(terms, env, false, k, &result.stats));
    }
  }
  result.stats.micros = MicrosSince(t0);
  return result;
}

}  // namespace

Result<SearchResult> ExecuteQuery(std::span<const TermInput> terms, const float* norms, uint32_t doc_begin,
                                  QueryMode mode, uint32_t k, const Bm25Params& params) {
  return Execute(terms, norms, doc_begin, uint64_t{kEndDoc} - doc_begin, mode, k, params);
}

Result<SearchResult> ExecuteQuery(std::span<const TermInput> terms, std::span<const float> norms, uint32_t doc_begin,
                                  QueryMode mode, uint32_t k, const Bm25Params& params) {
  return Execute(terms, norms.data(), doc_begin, norms.size(), mode, k, params);
}

Result<SearchResult> ExecuteQueryFromCandidates(std::span<const TermInput> terms, std::span<const float> norms,
                                                uint32_t doc_begin, std::span<const uint32_t> candidates,
                                                QueryMode mode, uint32_t k, const Bm25Params& params) {
  return Execute(terms, norms.data(), doc_begin, norms.size(), mode, k, params, &candidates);
}

CpuExecutor::CpuExecutor(const ShardReader* shard) : shard_(shard) {}

struct CpuExecutor::Lookup {
  std::vector<std::shared_ptr<const CachedList>> held;
  std::vector<TermInput> inputs;
  bool empty = false;  // an and-query with a term absent here: matches nothing here
};

Result<PreparedTerm> LookUpTerm(const ShardReader& shard, const std::string& term, const PreparedTerm* prepared) {
  PreparedTerm t;
  if (prepared != nullptr) {
    t = *prepared;
  } else {
    auto info = shard.GetTermInfo(term);  // the reader remembers entries
    if (!info.ok()) return info.status().WithContext("term '" + term + "'");
    if (!info->has_value()) return t;
    t.present = true;
    t.df = (*info)->df;
  }
  if (!t.present) return t;
  const uint64_t n = shard.meta().stats.num_docs;
  if (t.df > n)
    return Status::Corruption("term '" + term + "': df " + std::to_string(t.df) + " exceeds N " + std::to_string(n));
  if (prepared == nullptr) {
    auto list = shard.GetList(term);
    if (list.ok()) {
      t.list = std::move(list).value();
    } else if (list.status().code() != StatusCode::kNotFound) {
      return list.status().WithContext("term '" + term + "'");
    }
  }
  return t;
}

Result<CpuExecutor::Lookup> CpuExecutor::LookUp(const Query& query, const std::vector<PreparedTerm>* prepared) const {
  const ShardMeta& meta = shard_->meta();
  const size_t n = query.terms.size();
  if (prepared != nullptr && prepared->size() != n)
    return Status::InvalidArgument("prepared terms: " + std::to_string(prepared->size()) + " for " +
                                   std::to_string(n) + " query terms");
  Lookup l;
  l.held.reserve(n);
  l.inputs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    SEARCH_ASSIGN_OR_RETURN(PreparedTerm t,
                            LookUpTerm(*shard_, query.terms[i], prepared != nullptr ? &(*prepared)[i] : nullptr));
    if (!t.present) {
      if (query.mode == QueryMode::kAnd) {
        l.empty = true;
        return l;
      }
      continue;
    }
    if (t.list == nullptr) continue;  // no postings here
    l.held.push_back(std::move(t.list));
    l.inputs[i].list = &l.held.back()->view;
    l.inputs[i].idf = Bm25Idf(meta.stats.num_docs, t.df);
  }
  return l;
}

Result<SearchResult> CpuExecutor::Search(const Query& query, const std::vector<PreparedTerm>* prepared) const {
  return Run(query, nullptr, prepared);
}

Result<SearchResult> CpuExecutor::SearchFromCandidates(const Query& query, std::span<const uint32_t> candidates) const {
  return Run(query, &candidates, nullptr);
}

Result<SearchResult> CpuExecutor::Run(const Query& query, const std::span<const uint32_t>* candidates,
                                      const std::vector<PreparedTerm>* prepared) const {
  const auto t0 = std::chrono::steady_clock::now();
  if (query.tree != nullptr || query.count) {
    if (candidates != nullptr) return Status::InvalidArgument("a query tree or a count has no candidate set");
    return RunTree(query, prepared);
  }
  SEARCH_RETURN_IF_ERROR(ValidateK(query.k));
  SEARCH_ASSIGN_OR_RETURN(Lookup l, LookUp(query, prepared));
  const ShardMeta& meta = shard_->meta();
  SearchResult result;
  if (l.empty) {
    result.stats.lists = l.held.size();
  } else {
    const std::span<const float> norms(shard_->norms(), meta.doc_end - meta.doc_begin);
    SEARCH_ASSIGN_OR_RETURN(result, candidates == nullptr
                                        ? ExecuteQuery(l.inputs, norms, meta.doc_begin, query.mode, query.k, meta.bm25)
                                        : ExecuteQueryFromCandidates(l.inputs, norms, meta.doc_begin, *candidates,
                                                                     query.mode, query.k, meta.bm25));
  }
  result.stats.micros = MicrosSince(t0);
  return result;
}

namespace {

// Every token that some phrase of the tree holds (positions are looked up for those only).
void PhraseTokens(const QueryNode& node, std::vector<std::string>* out) {
  if (node.kind == QueryNode::Kind::kPhrase) out->insert(out->end(), node.tokens.begin(), node.tokens.end());
  for (const QueryNode::Clause& c : node.clauses) PhraseTokens(c.node, out);
}

}  // namespace

Result<SearchResult> CpuExecutor::RunTree(const Query& query, const std::vector<PreparedTerm>* prepared) const {
  const auto t0 = std::chrono::steady_clock::now();
  if (!(query.count && query.k == 0)) SEARCH_RETURN_IF_ERROR(ValidateK(query.k));
  const size_t n = query.terms.size();
  if (prepared != nullptr && prepared->size() != n)
    return Status::InvalidArgument("prepared terms: " + std::to_string(prepared->size()) + " for " +
                                   std::to_string(n) + " query terms");
  for (size_t i = 1; i < n; ++i)
    if (!(query.terms[i - 1] < query.terms[i])) return Status::InvalidArgument("query terms must be sorted and distinct");
  std::vector<std::string> phrase_tokens;
  if (query.tree != nullptr) PhraseTokens(*query.tree, &phrase_tokens);
  std::sort(phrase_tokens.begin(), phrase_tokens.end());
  // A phrase on a shard without positions: the reader's InvalidArgument, whether or not its tokens
  // occur here.
  if (!phrase_tokens.empty() && !shard_->has_positions()) {
    auto none = shard_->GetPositions(phrase_tokens[0]);
    return none.ok() ? Status::Internal("the shard has no positions but answered for '" + phrase_tokens[0] + "'")
                     : none.status();
  }
  const ShardMeta& meta = shard_->meta();
  std::vector<std::shared_ptr<const CachedList>> held;
  std::vector<std::shared_ptr<const CachedPositions>> held_positions;
  held.reserve(n);
  std::vector<cpu_internal::TreeTermInput> inputs(n);
  for (size_t i = 0; i < n; ++i) {
    SEARCH_ASSIGN_OR_RETURN(PreparedTerm t,
                            LookUpTerm(*shard_, query.terms[i], prepared != nullptr ? &(*prepared)[i] : nullptr));
    if (!t.present || t.list == nullptr) continue;  // matches nothing here
    held.push_back(std::move(t.list));
    inputs[i].list = &held.back()->view;
    inputs[i].idf = Bm25Idf(meta.stats.num_docs, t.df);
    if (std::binary_search(phrase_tokens.begin(), phrase_tokens.end(), query.terms[i])) {
      auto positions = shard_->GetPositions(query.terms[i]);
      if (!positions.ok()) return positions.status().WithContext("positions of '" + query.terms[i] + "'");
      held_positions.push_back(std::move(positions).value());
      inputs[i].positions = &held_positions.back()->view;
    }
  }
  const std::span<const float> norms(shard_->norms(), meta.doc_end - meta.doc_begin);
  // A bag of words with a count (flat, or a tree whose canonical form is one): the count by the
  // tree evaluator without scoring, the top k by the block-max paths; otherwise the tree evaluator.
  QueryMode mode = query.mode;
  bool flat = query.tree == nullptr;
  if (!flat) {
    std::vector<std::string> flat_terms;
    flat = AsFlatQuery(*query.tree, query.mode, &flat_terms, &mode) && flat_terms == query.terms;
    if (!flat) mode = query.mode;
  }
  auto run = [&](QueryMode m) -> Result<SearchResult> {
    // A boolean of terms: the count without scoring, the top k pruned (tree_prune.hpp); a sole
    // phrase (tree_phrase.hpp).
    const QueryNode resolved = flat ? cpu_internal::FlatTree(query.terms, m) : ResolveMode(*query.tree, m);
    SEARCH_ASSIGN_OR_RETURN(std::optional<SearchResult> fast,
                            cpu_internal::ExecuteTermBoolean(resolved, query.terms, inputs, norms, meta.doc_begin,
                                                             query.k, query.count, meta.bm25));
    if (fast.has_value()) return std::move(*fast);
    SEARCH_ASSIGN_OR_RETURN(fast, cpu_internal::ExecuteSolePhrase(resolved, query.terms, inputs, norms, meta.doc_begin,
                                                                  query.k, query.count, meta.bm25));
    if (fast.has_value()) return std::move(*fast);
    if (!flat) {
      return cpu_internal::ExecuteTree(ResolveMode(*query.tree, m), query.terms, inputs, norms, meta.doc_begin,
                                       query.k, query.count, meta.bm25);
    }
    SEARCH_ASSIGN_OR_RETURN(SearchResult r,
                            cpu_internal::ExecuteTree(cpu_internal::FlatTree(query.terms, m), query.terms, inputs,
                                                      norms, meta.doc_begin, 0, true, meta.bm25));
    if (query.k > 0) {
      std::vector<TermInput> in(n);
      for (size_t i = 0; i < n; ++i) in[i] = TermInput{inputs[i].list, inputs[i].idf};
      SEARCH_ASSIGN_OR_RETURN(SearchResult top, ExecuteQuery(in, norms, meta.doc_begin, m, query.k, meta.bm25));
      r.hits = std::move(top.hits);
      r.stats += top.stats;
    }
    return r;
  };
  SearchResult result;
  if (mode == QueryMode::kAndOr) {
    SEARCH_ASSIGN_OR_RETURN(result, run(QueryMode::kAnd));
    if (result.hits.size() < query.k) {
      SEARCH_ASSIGN_OR_RETURN(SearchResult o, run(QueryMode::kOr));
      o.stats += result.stats;
      result = std::move(o);
    }
  } else {
    SEARCH_ASSIGN_OR_RETURN(result, run(mode));
  }
  result.stats.micros = MicrosSince(t0);
  return result;
}

}  // namespace search
