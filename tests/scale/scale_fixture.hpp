// Shared helpers for the scale tests: temporary directories, a random text corpus with its
// reference inverted index computed straight from the text (Analyzer only, independent of every
// index builder), JSON-lines and CIFF writers for it, and index comparisons.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "cpu_exec/local_index.hpp"
#include "indexer/index_builder.hpp"
#include "scale/ciff_format.hpp"
#include "scale/import_ciff.hpp"
#include "../temp_dir.hpp"

namespace search::scaletest {

namespace fs = std::filesystem;

using ::search::testing::TempDir;

// `searchctl index` options for a JSON-lines file without positions or sources, on 2 threads: the
// index a CIFF import or a PostingsIngest build is compared with (their lists carry neither).
inline IndexBuildOptions PlainJsonlOptions(const std::string& input, const std::string& out, uint32_t shards) {
  IndexBuildOptions o;
  o.input = input;
  o.output = out;
  o.shards = shards;
  o.threads = 2;
  o.positions = false;
  o.sources = false;
  return o;
}

// ImportCiff of `file` into `out`, on 2 threads.
inline Result<CiffImportSummary> ImportCiffFile(const std::string& file, const std::string& out, uint32_t shards) {
  CiffImportOptions o;
  o.input = file;
  o.output = out;
  o.shards = shards;
  o.threads = 2;
  return ImportCiff(o);
}

struct TextDoc {
  std::string id, text;
};

// n documents over a Zipf-like vocabulary "w0".."w<vocab-1>" plus mixed case and punctuation;
// some documents are empty.
inline std::vector<TextDoc> RandomTexts(size_t n, size_t vocab, size_t max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights(vocab);
  for (size_t i = 0; i < vocab; ++i) weights[i] = 1.0 / static_cast<double>(i + 1);
  std::discrete_distribution<size_t> word(weights.begin(), weights.end());
  std::vector<TextDoc> docs;
  for (size_t d = 0; d < n; ++d) {
    std::string text;
    const size_t len = rng() % (max_len + 1);
    for (size_t i = 0; i < len; ++i) {
      if (!text.empty()) text += (rng() % 5 == 0) ? ", " : " ";
      text += (rng() % 4 == 0) ? "W" : "w";
      text += std::to_string(word(rng));
    }
    docs.push_back({std::string("d") + std::to_string(d) + std::string("-") + std::to_string(rng() % 100), text});
  }
  return docs;
}

// The inverted index of `docs` under the default analyzer: term -> (doc -> tf), and lengths.
struct Inverted {
  std::map<std::string, std::map<uint32_t, uint32_t>> postings;
  std::vector<uint32_t> lengths;
};

inline Inverted Invert(const std::vector<TextDoc>& docs) {
  Inverted inv;
  Analyzer analyzer;
  for (uint32_t d = 0; d < docs.size(); ++d) {
    const auto terms = analyzer.Analyze(docs[d].text);
    inv.lengths.push_back(static_cast<uint32_t>(terms.size()));
    for (const auto& t : terms) ++inv.postings[t][d];
  }
  return inv;
}

inline void WriteJsonl(const std::string& path, const std::vector<TextDoc>& docs) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const auto& d : docs) out << nlohmann::json{{"id", d.id}, {"contents", d.text}}.dump() << "\n";
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A CIFF of the corpus; lists and doc records in a shuffled order when `shuffle_seed` != 0.
inline std::string MakeCiff(const std::vector<TextDoc>& docs, const Inverted& inv, uint64_t shuffle_seed) {
  std::vector<const std::pair<const std::string, std::map<uint32_t, uint32_t>>*> lists;
  for (const auto& entry : inv.postings) lists.push_back(&entry);
  std::vector<uint32_t> order(docs.size());
  for (uint32_t d = 0; d < docs.size(); ++d) order[d] = d;
  if (shuffle_seed != 0) {
    std::mt19937_64 rng(shuffle_seed);
    std::shuffle(lists.begin(), lists.end(), rng);
    std::shuffle(order.begin(), order.end(), rng);
  }
  CiffHeader h;
  h.num_postings_lists = static_cast<int64_t>(lists.size());
  h.num_docs = static_cast<int64_t>(docs.size());
  h.total_postings_lists = h.num_postings_lists;
  h.total_docs = h.num_docs;
  for (uint32_t len : inv.lengths) h.total_terms_in_collection += len;
  h.average_doclength = static_cast<double>(h.total_terms_in_collection) / static_cast<double>(docs.size());
  h.description = "scale test corpus";
  std::string out;
  AppendCiffHeader(&out, h);
  for (const auto* entry : lists) {
    std::vector<uint32_t> ds, tfs;
    for (const auto& [d, tf] : entry->second) {
      ds.push_back(d);
      tfs.push_back(tf);
    }
    AppendCiffPostingsList(&out, entry->first, ds, tfs);
  }
  for (uint32_t d : order) AppendCiffDocRecord(&out, d, docs[d].id, inv.lengths[d]);
  return out;
}

// Both indexes answer every query exactly alike (documents, order, external ids, scores).
inline void ExpectSameAnswers(const std::string& a_dir, const std::string& b_dir, const std::vector<std::string>& queries) {
  auto a = LocalIndex::Open(a_dir);
  auto b = LocalIndex::Open(b_dir);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  size_t nonempty = 0;
  for (const auto& q : queries) {
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
      auto ra = (*a)->Search(q, mode, 10);
      auto rb = (*b)->Search(q, mode, 10);
      ASSERT_TRUE(ra.ok()) << ra.status().ToString();
      ASSERT_TRUE(rb.ok()) << rb.status().ToString();
      ASSERT_EQ(ra->hits.size(), rb->hits.size()) << q;
      for (size_t i = 0; i < ra->hits.size(); ++i) {
        EXPECT_EQ(ra->hits[i].doc, rb->hits[i].doc) << q << " hit " << i;
        EXPECT_EQ(ra->hits[i].score, rb->hits[i].score) << q << " hit " << i;
      }
      auto ia = (*a)->Resolve(ra->hits);
      auto ib = (*b)->Resolve(rb->hits);
      ASSERT_TRUE(ia.ok() && ib.ok());
      for (size_t i = 0; i < ia->size(); ++i) EXPECT_EQ((*ia)[i].id, (*ib)[i].id);
      nonempty += ra->hits.empty() ? 0 : 1;
    }
  }
  EXPECT_GT(nonempty, queries.size());  // the comparison is not vacuous
}

// Random queries of 1..4 words from the corpus vocabulary (some absent words too).
inline std::vector<std::string> RandomQueries(size_t n, size_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string q;
    const size_t len = 1 + rng() % 4;
    for (size_t j = 0; j < len; ++j) q.append("w").append(std::to_string(rng() % (vocab + 5))).append(" ");
    out.push_back(q);
  }
  return out;
}

// No entry of `parent` starts with `prefix` (no index, no leftover temporary directory).
inline bool NothingNamed(const std::string& parent, const std::string& prefix) {
  for (const auto& e : fs::directory_iterator(parent)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) return false;
  }
  return true;
}

}  // namespace search::scaletest
