// Test support for the CPU executor: random corpora (Zipf vocabulary, empty documents, huge tf),
// in-memory shards encoded with EncodeList, and two plain references written without any pruning:
//   * a double-precision brute-force BM25 straight from docs/SCORING.md's formula, and
//   * a float twin that uses core/bm25.hpp's operations summed in canonical order, which the
//     engine must reproduce bit for bit.
// Thread-safety: none needed (single-threaded tests).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "core/bm25.hpp"
#include "core/query.hpp"
#include "core/topk.hpp"
#include "cpu_exec/cpu_executor.hpp"

namespace search::testing {

struct CorpusOptions {
  uint32_t num_docs = 3000;
  uint32_t vocab = 1500;
  double zipf_s = 1.0;
  uint32_t max_len = 120;       // document lengths uniform in [0, max_len] unless fixed_len
  int fixed_len = -1;           // >= 0: every document has this length (mostly-tied scores)
  double empty_fraction = 0.03; // documents of length 0
  double heavy_fraction = 0.01; // documents that get one term repeated 100..1000 times
  uint64_t seed = 1;
};

struct Posting {
  uint32_t doc, tf;
};

struct Corpus {
  uint32_t num_docs = 0;
  uint64_t total_tokens = 0;
  std::vector<uint32_t> doc_len;
  std::vector<std::vector<Posting>> postings;  // by term id, ascending docs
  std::vector<std::string> names;              // by term id
  double avgdl() const { return num_docs == 0 ? 0.0 : static_cast<double>(total_tokens) / num_docs; }
  uint32_t df(uint32_t t) const { return static_cast<uint32_t>(postings[t].size()); }
};

inline std::string TermName(uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "t%05u", id);
  return buf;
}

inline Corpus MakeCorpus(const CorpusOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::vector<double> cdf(o.vocab);
  double acc = 0;
  for (uint32_t i = 0; i < o.vocab; ++i) cdf[i] = acc += 1.0 / std::pow(i + 1.0, o.zipf_s);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto draw = [&] {
    return static_cast<uint32_t>(std::lower_bound(cdf.begin(), cdf.end(), u01(rng) * acc) - cdf.begin());
  };
  Corpus c;
  c.num_docs = o.num_docs;
  c.doc_len.resize(o.num_docs);
  c.postings.resize(o.vocab);
  for (uint32_t i = 0; i < o.vocab; ++i) c.names.push_back(TermName(i));
  std::map<uint32_t, uint32_t> tf;
  for (uint32_t d = 0; d < o.num_docs; ++d) {
    tf.clear();
    uint32_t len = o.fixed_len >= 0 ? static_cast<uint32_t>(o.fixed_len)
                                    : static_cast<uint32_t>(rng() % (o.max_len + 1));
    if (o.fixed_len < 0 && u01(rng) < o.empty_fraction) len = 0;
    for (uint32_t i = 0; i < len; ++i) ++tf[std::min(draw(), o.vocab - 1)];
    if (len > 0 && o.fixed_len < 0 && u01(rng) < o.heavy_fraction) {
      const uint32_t extra = 100 + static_cast<uint32_t>(rng() % 901);
      tf[static_cast<uint32_t>(rng() % std::min<uint32_t>(o.vocab, 40))] += extra;
      len += extra;
    }
    c.doc_len[d] = len;
    c.total_tokens += len;
    for (const auto& [t, f] : tf) c.postings[t].push_back({d, f});
  }
  return c;
}

// One shard of the corpus, [doc_begin, doc_end), its lists encoded exactly as an index would:
// global idf, per-document norms, block maxima from the same float formula.
struct MemShard {
  uint32_t doc_begin = 0, doc_end = 0;
  std::vector<float> norms;
  std::vector<std::vector<uint32_t>> storage;  // 4-byte aligned blob copies, by term id
  std::vector<uint32_t> sizes;
  std::vector<std::optional<ListView>> views;  // by term id; nullopt: no postings here
  const ListView* view(uint32_t t) const {
    return t < views.size() && views[t].has_value() ? &*views[t] : nullptr;
  }
};

inline std::vector<float> GlobalIdf(const Corpus& c) {
  std::vector<float> idf(c.postings.size());
  for (uint32_t t = 0; t < idf.size(); ++t) idf[t] = Bm25Idf(c.num_docs, c.df(t));
  return idf;
}

inline MemShard BuildShard(const Corpus& c, uint32_t begin, uint32_t end, const Bm25Params& p = {}) {
  MemShard s;
  s.doc_begin = begin;
  s.doc_end = end;
  const double avgdl = c.avgdl();
  for (uint32_t d = begin; d < end; ++d) s.norms.push_back(Bm25Norm(c.doc_len[d], avgdl, p));
  const std::vector<float> idf = GlobalIdf(c);
  s.storage.resize(c.postings.size());
  s.sizes.resize(c.postings.size());
  s.views.resize(c.postings.size());
  std::vector<uint32_t> docs, tfs;
  for (uint32_t t = 0; t < c.postings.size(); ++t) {
    docs.clear();
    tfs.clear();
    for (const Posting& q : c.postings[t])
      if (q.doc >= begin && q.doc < end) {
        docs.push_back(q.doc);
        tfs.push_back(q.tf);
      }
    if (docs.empty()) continue;
    const float w = idf[t];
    auto blob = EncodeList(docs, tfs, begin, [&](uint32_t doc, uint32_t f) {
      return Bm25TermScore(w, f, s.norms[doc - begin], p.k1);
    });
    EXPECT_TRUE(blob.ok()) << blob.status().ToString();
    if (!blob.ok()) continue;
    s.storage[t].assign((blob->size() + 3) / 4, 0u);
    std::memcpy(s.storage[t].data(), blob->data(), blob->size());
    s.sizes[t] = static_cast<uint32_t>(blob->size());
    auto v = ListView::Parse(std::string_view(reinterpret_cast<const char*>(s.storage[t].data()), blob->size()));
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    if (v.ok()) s.views[t] = *v;
  }
  return s;
}


// A query as the engine sees it: canonical (sorted by name, unique) term ids; ids >= vocab are
// terms absent from the index.
struct TestQuery {
  std::vector<uint32_t> terms;
};

inline std::string QueryTermName(const Corpus& c, uint32_t id) {
  if (id < c.postings.size()) return c.names[id];
  std::string name = std::to_string(id);
  name.insert(name.begin(), 'u');
  return name;
}

// Random 1..8 terms, popular and rare, some unknown, some repeated; returned canonical.
inline TestQuery RandomQuery(const Corpus& c, std::mt19937_64& rng) {
  const uint32_t vocab = static_cast<uint32_t>(c.postings.size());
  std::vector<uint32_t> raw;
  const int n = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) {
    const uint32_t r = static_cast<uint32_t>(rng() % 100);
    if (r < 5) raw.push_back(vocab + static_cast<uint32_t>(rng() % 50));                // unknown
    else if (r < 45) raw.push_back(static_cast<uint32_t>(rng() % std::min(vocab, 30u)));  // frequent
    else if (r < 55 && !raw.empty()) raw.push_back(raw[rng() % raw.size()]);             // repeat
    else raw.push_back(static_cast<uint32_t>(rng() % vocab));
  }
  std::sort(raw.begin(), raw.end(), [&](uint32_t a, uint32_t b) { return QueryTermName(c, a) < QueryTermName(c, b); });
  raw.erase(std::unique(raw.begin(), raw.end()), raw.end());
  return TestQuery{raw};
}

inline std::vector<TermInput> Inputs(const Corpus& c, const MemShard& s, const TestQuery& q) {
  const std::vector<float> idf = GlobalIdf(c);
  std::vector<TermInput> in;
  for (uint32_t t : q.terms) in.push_back(TermInput{s.view(t), t < idf.size() ? idf[t] : 0.0f});
  return in;
}

struct RefHit {
  uint32_t doc;
  double score;
};

// The double-precision brute force: every matching document, best first (score desc, doc asc).
// `terms` are taken as given (a repeated id counts twice).
inline std::vector<RefHit> ReferenceAll(const Corpus& c, const std::vector<uint32_t>& terms, bool conjunctive,
                                        const Bm25Params& p = {}) {
  // docs/SCORING.md's defaults as exact decimals; other parameters as given.
  const bool defaults = p.k1 == 0.9f && p.b == 0.4f;
  const double k1 = defaults ? 0.9 : p.k1, b = defaults ? 0.4 : p.b;
  const double n = c.num_docs, avgdl = c.avgdl();
  std::vector<double> score(c.num_docs, 0.0);
  std::vector<uint32_t> matched(c.num_docs, 0);
  for (uint32_t t : terms) {
    if (t >= c.postings.size()) continue;
    const double df = static_cast<double>(c.df(t));
    const double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
    for (const Posting& q : c.postings[t]) {
      const double tf = q.tf, dl = c.doc_len[q.doc];
      score[q.doc] += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl));
      ++matched[q.doc];
    }
  }
  std::vector<RefHit> out;
  for (uint32_t d = 0; d < c.num_docs; ++d) {
    if (matched[d] == 0 || (conjunctive && matched[d] != terms.size())) continue;
    out.push_back({d, score[d]});
  }
  std::sort(out.begin(), out.end(), [](const RefHit& a, const RefHit& b2) {
    return a.score != b2.score ? a.score > b2.score : a.doc < b2.doc;
  });
  return out;
}

// The float twin: core/bm25.hpp's operations, per-term contributions summed in `terms` order.
inline std::vector<ScoredDoc> FloatReferenceAll(const Corpus& c, const std::vector<uint32_t>& terms, bool conjunctive,
                                                const Bm25Params& p = {}) {
  const std::vector<float> idf = GlobalIdf(c);
  const double avgdl = c.avgdl();
  std::vector<float> score(c.num_docs, 0.0f);
  std::vector<uint32_t> matched(c.num_docs, 0);
  for (uint32_t t : terms) {
    if (t >= c.postings.size()) continue;
    for (const Posting& q : c.postings[t]) {
      score[q.doc] += Bm25TermScore(idf[t], q.tf, Bm25Norm(c.doc_len[q.doc], avgdl, p), p.k1);
      ++matched[q.doc];
    }
  }
  std::vector<ScoredDoc> out;
  for (uint32_t d = 0; d < c.num_docs; ++d) {
    if (matched[d] == 0 || (conjunctive && matched[d] != terms.size())) continue;
    out.push_back({d, score[d]});
  }
  std::sort(out.begin(), out.end(), RanksBefore);
  return out;
}

inline bool CloseRel(double a, double b, double rel = 1e-5) {
  return std::fabs(a - b) <= rel * std::max({std::fabs(a), std::fabs(b), 1e-30});
}

// Reference score by docID; NaN where the document does not match.
inline std::vector<double> RefByDoc(const std::vector<RefHit>& ref_all, uint32_t num_docs) {
  std::vector<double> by_doc(num_docs, std::nan(""));
  for (const RefHit& h : ref_all) by_doc[h.doc] = h.score;
  return by_doc;
}

// The comparison the brief fixes: same length; per rank the scores agree within 1e-5 relative;
// where the documents differ the reference holds a genuine tie; every returned document's
// reference score matches its engine score.
inline void ExpectMatchesReference(const std::vector<ScoredDoc>& got, const std::vector<RefHit>& ref_all,
                                   const std::vector<double>& by_doc, uint32_t k, const std::string& what) {
  const size_t want = std::min<size_t>(k, ref_all.size());
  ASSERT_EQ(got.size(), want) << what;
  for (size_t i = 0; i < want; ++i) {
    const RefHit& r = ref_all[i];
    EXPECT_TRUE(CloseRel(got[i].score, r.score)) << what << " rank " << i << ": engine " << got[i].score
                                                 << " reference " << r.score;
    ASSERT_LT(got[i].doc, by_doc.size()) << what;
    const double mine = by_doc[got[i].doc];
    ASSERT_FALSE(std::isnan(mine)) << what << " rank " << i << ": doc " << got[i].doc << " does not match the query";
    EXPECT_TRUE(CloseRel(got[i].score, mine)) << what << " doc " << got[i].doc << ": engine " << got[i].score
                                              << " reference " << mine;
    if (got[i].doc != r.doc) {
      EXPECT_TRUE(CloseRel(mine, r.score)) << what << " rank " << i << ": doc " << got[i].doc << " vs " << r.doc
                                           << " is not a tie";
    }
    if (i > 0) {
      EXPECT_TRUE(RanksBefore(got[i - 1], got[i])) << what << " rank " << i << " out of order";
    }
  }
}

inline std::vector<ScoredDoc> Prefix(const std::vector<ScoredDoc>& all, uint32_t k) {
  return std::vector<ScoredDoc>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(k, all.size())));
}

}  // namespace search::testing
