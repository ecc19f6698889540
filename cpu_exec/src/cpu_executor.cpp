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
#include "index_store/shard_store.hpp"
#include "and_query.hpp"
#include "or_query.hpp"
#include "query_engine.hpp"

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

// One mode (and / or) over the given terms. Appends its stats; returns the hits best first.
Result<std::vector<ScoredDoc>> RunMode(std::span<const TermInput> terms, const CursorEnv& env_in, bool conjunctive,
                                       uint32_t k, QueryStats* stats) {
  const size_t n = terms.size();
  size_t present = 0;
  for (const TermInput& t : terms) present += t.list != nullptr ? 1 : 0;
  stats->lists += present;
  if (present == 0 || (conjunctive && present < n)) return std::vector<ScoredDoc>{};

  Scratch& s = ThreadScratch();
  s.Reserve(n);
  Status error;
  QueryStats local;
  CursorEnv env = env_in;
  env.stats = &local;
  env.error = &error;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (terms[i].list == nullptr) continue;
    s.cursors[m].reset(terms[i].list, terms[i].idf, static_cast<uint32_t>(i), &env);
    s.order[m] = &s.cursors[m];
    ++m;
  }
  BlockCursor** cur = s.order.data();
  std::fill(s.sheet.begin(), s.sheet.begin() + static_cast<std::ptrdiff_t>(n), 0.0f);
  ScoreSheet sheet(s.sheet.data(), n);
  cpu_internal::TopKHeap topk(k);
  const float slack = cpu_internal::QuerySlack(n);
  if (conjunctive) {
    std::sort(cur, cur + m, [](const BlockCursor* x, const BlockCursor* y) {
      return x->size() != y->size() ? x->size() < y->size() : x->slot() < y->slot();
    });
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
  for (const TermInput& t : terms) {
    if (t.list == nullptr) continue;
    if (t.list->count() == 0 || t.list->num_blocks() == 0) return Status::Corruption("empty posting list");
    const uint32_t last = t.list->block(t.list->num_blocks() - 1).last_doc;
    if (last == kEndDoc || static_cast<uint64_t>(last) >= doc_begin + num_docs)
      return Status::Corruption("posting list docID " + std::to_string(last) + " outside the shard's documents [" +
                                std::to_string(doc_begin) + ", " + std::to_string(doc_begin + num_docs) + ")");
  }
  return Status::Ok();
}

Result<SearchResult> Execute(std::span<const TermInput> terms, const float* norms, uint32_t doc_begin,
                             uint64_t num_docs, QueryMode mode, uint32_t k, const Bm25Params& params) {
  const auto t0 = std::chrono::steady_clock::now();
  SEARCH_RETURN_IF_ERROR(ValidateK(k));
  SEARCH_RETURN_IF_ERROR(CheckLists(terms, doc_begin, num_docs));
  SearchResult result;
  if (terms.empty()) return result;
  CursorEnv env;
  env.norms = norms;
  env.doc_begin = doc_begin;
  env.k1 = params.k1;
  if (mode == QueryMode::kOr) {
    SEARCH_ASSIGN_OR_RETURN(result.hits, RunMode(terms, env, false, k, &result.stats));
  } else {
    SEARCH_ASSIGN_OR_RETURN(result.hits, RunMode(terms, env, true, k, &result.stats));
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

// term -> TermInfo (nullopt: no postings in this shard), in 16 mutex-guarded maps. A map that
// reaches kMaxEntries is cleared: the memory stays bounded and hot terms return at once.
struct CpuExecutor::TermCache {
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxEntries = size_t{1} << 16;  // per map
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Map {
    std::mutex mu;
    std::unordered_map<std::string, std::optional<TermInfo>, Hash, std::equal_to<>> map;  // GUARDED_BY(mu)
  };
  Map maps[kShards];

  Result<std::optional<TermInfo>> Get(const ShardReader& shard, std::string_view term) {
    Map& m = maps[Hash{}(term) % kShards];
    {
      std::lock_guard<std::mutex> lock(m.mu);
      auto it = m.map.find(term);
      if (it != m.map.end()) return it->second;
    }
    auto info = shard.GetTermInfo(term);
    if (!info.ok()) return info.status();  // errors are not remembered
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.map.size() >= kMaxEntries) m.map.clear();
    m.map.emplace(std::string(term), *info);
    return *info;
  }
};

CpuExecutor::CpuExecutor(const ShardReader* shard) : shard_(shard), terms_(std::make_shared<TermCache>()) {}

Result<SearchResult> CpuExecutor::Search(const Query& query) const {
  const auto t0 = std::chrono::steady_clock::now();
  SEARCH_RETURN_IF_ERROR(ValidateK(query.k));
  const ShardMeta& meta = shard_->meta();
  const size_t n = query.terms.size();
  std::vector<std::shared_ptr<const CachedList>> held;
  held.reserve(n);
  std::vector<TermInput> inputs(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& term = query.terms[i];
    auto info = terms_->Get(*shard_, term);
    if (!info.ok()) return info.status().WithContext("term '" + term + "'");
    if (!info->has_value()) {
      if (query.mode == QueryMode::kAnd) {  // an and-query with a term absent here matches nothing here
        SearchResult empty;
        empty.stats.lists = held.size();
        empty.stats.micros = MicrosSince(t0);
        return empty;
      }
      continue;
    }
    const TermInfo& ti = **info;
    if (ti.df > meta.stats.num_docs)
      return Status::Corruption("term '" + term + "': df " + std::to_string(ti.df) + " exceeds N " +
                                std::to_string(meta.stats.num_docs));
    auto list = shard_->GetList(term);
    if (!list.ok()) {
      if (list.status().code() == StatusCode::kNotFound) continue;
      return list.status().WithContext("term '" + term + "'");
    }
    held.push_back(std::move(list).value());
    inputs[i].list = &held.back()->view;
    inputs[i].idf = Bm25Idf(meta.stats.num_docs, ti.df);
  }
  const std::span<const float> norms(shard_->norms(), meta.doc_end - meta.doc_begin);
  SEARCH_ASSIGN_OR_RETURN(SearchResult result,
                          ExecuteQuery(inputs, norms, meta.doc_begin, query.mode, query.k, meta.bm25));
  result.stats.micros = MicrosSince(t0);
  return result;
}

}  // namespace search
