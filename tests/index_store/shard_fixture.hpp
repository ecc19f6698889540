// Test helpers for index_store: temporary directories, random corpora of posting lists encoded
// with the codec and scored with core/bm25.hpp, and a shard written from them with ShardWriter.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "core/bm25.hpp"
#include "index_store/shard_store.hpp"
#include "../temp_dir.hpp"

namespace search::testing {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
struct TermData {
  std::string term;
  std::vector<uint32_t> docs, tfs;
  TermInfo info;
  std::string blob;
  std::vector<uint32_t> positions;  // with positions: posting 0's tfs[0], then posting 1's, ...
  std::string pos_blob;             // EncodePositions(tfs, positions)
};

struct Corpus {
  ShardMeta meta;
  std::vector<TermData> terms;        // ascending by term
  std::vector<uint32_t> lengths;      // by doc - doc_begin
  std::vector<std::string> ext_ids;   // by doc - doc_begin
};

// A shard [doc_begin, doc_end) of a collection of `num_docs_total` documents with random terms:
// short and long lists (several blocks and a short last block), prefix-related terms and terms
// with bytes >= 0x80. Global df and N/total_tokens include made-up other shards. With `positions`,
// every posting gets random ascending positions and every term its positions blob.
inline Corpus MakeCorpus(uint32_t seed, uint32_t doc_begin, uint32_t doc_end, uint32_t num_docs_total,
                         size_t num_terms, bool positions = false) {
  std::mt19937 rng(seed);
  Corpus c;
  ShardMeta& m = c.meta;
  m.positions = positions;
  m.shard_id = 1;
  m.num_shards = 3;
  m.doc_begin = doc_begin;
  m.doc_end = doc_end;
  m.bm25 = Bm25Params{1.2f, 0.75f};
  m.analyzer.stem_language = "english";
  m.analyzer.stopwords = {"a", "the"};
  const uint32_t n = doc_end - doc_begin;

  std::map<std::string, int> names;  // sorted, unique
  const char* alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  while (names.size() < num_terms) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < len; ++i) t.push_back(alphabet[rng() % 36]);
    if (rng() % 10 == 0) t += "\xC3\xA9";  // UTF-8 e-acute
    names.emplace(t, 0);
    if (rng() % 5 == 0 && names.size() < num_terms) names.emplace(t + "s", 0);  // prefix pairs
  }
  c.lengths.assign(n, 0);
  for (const auto& [name, unused] : names) {
    TermData td;
    td.term = name;
    // Mostly short lists, some long ones (many blocks), a few single postings.
    const uint32_t r = rng() % 10;
    const double p = r == 0 ? 0.5 : r < 3 ? 0.05 : r < 9 ? 0.004 : 0.0;
    for (uint32_t d = 0; d < n; ++d) {
      if (std::uniform_real_distribution<double>(0, 1)(rng) < p) {
        td.docs.push_back(doc_begin + d);
        td.tfs.push_back(1 + rng() % (rng() % 8 == 0 ? 40 : 4));
      }
    }
    if (td.docs.empty() && n > 0) {
      td.docs.push_back(doc_begin + rng() % n);
      td.tfs.push_back(1 + rng() % 3);
    }
    if (td.docs.empty()) continue;
    for (size_t i = 0; i < td.docs.size(); ++i) c.lengths[td.docs[i] - doc_begin] += td.tfs[i];
    c.terms.push_back(std::move(td));
  }
  uint64_t shard_tokens = 0;
  for (auto& len : c.lengths) {
    len += rng() % 5;  // tokens of terms we do not index here
    shard_tokens += len;
  }
  m.stats.num_docs = num_docs_total;
  m.stats.total_tokens = shard_tokens + uint64_t{num_docs_total - n} * 7;
  const double avgdl = m.stats.avgdl();
  for (auto& td : c.terms) {
    td.info.count = static_cast<uint32_t>(td.docs.size());
    td.info.df = td.info.count + rng() % (num_docs_total - n + 1);
    uint64_t cf = 0;
    for (uint32_t tf : td.tfs) cf += tf;
    td.info.cf = cf;
    const float idf = Bm25Idf(num_docs_total, td.info.df);
    const PostingScorer scorer = [&](uint32_t doc, uint32_t tf) {
      return Bm25TermScore(idf, tf, Bm25Norm(c.lengths[doc - doc_begin], avgdl, m.bm25), m.bm25.k1);
    };
    auto blob = EncodeList(td.docs, td.tfs, doc_begin, scorer);
    if (!blob.ok()) std::abort();
    td.blob = std::move(blob).value();
    auto view = ListView::Parse(td.blob);
    if (!view.ok()) std::abort();
    td.info.max_score = view->max_score();
    td.info.list_bytes = static_cast<uint32_t>(td.blob.size());
    if (positions) {
      for (uint32_t tf : td.tfs) {
        uint32_t p = rng() % 50;
        for (uint32_t k = 0; k < tf; ++k, p += 1 + rng() % 9) td.positions.push_back(p);
      }
      auto pos = EncodePositions(td.tfs, td.positions);
      if (!pos.ok()) std::abort();
      td.pos_blob = std::move(pos).value();
    }
  }
  for (uint32_t d = 0; d < n; ++d) c.ext_ids.push_back("doc-" + std::to_string(doc_begin + d) + "-" + std::to_string(rng()));
  return c;
}

// Writes `c` as a shard at `path`; returns the first failing Status.
inline Status WriteShard(const Corpus& c, const std::string& path) {
  auto w = ShardWriter::Create(path, c.meta);
  if (!w.ok()) return w.status();
  for (const auto& td : c.terms) SEARCH_RETURN_IF_ERROR((*w)->AddTerm(td.term, td.info, td.blob, td.pos_blob));
  for (uint32_t d = c.meta.doc_begin; d < c.meta.doc_end; ++d)
    SEARCH_RETURN_IF_ERROR((*w)->AddDoc(d, c.ext_ids[d - c.meta.doc_begin], c.lengths[d - c.meta.doc_begin]));
  return (*w)->Finish();
}

inline std::vector<std::string> SstFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".sst") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

}  // namespace search::testing
