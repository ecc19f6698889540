// Shared helpers for the tools tests: random JSON-lines corpora, a brute-force BM25 reference
// computed straight from the corpus (independent of the builder and the executor), temp dirs,
// and running the real searchctl binary as a subprocess.
#pragma once

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "core/bm25.hpp"
#include "core/query.hpp"
#include "core/topk.hpp"
#include "../temp_dir.hpp"

namespace search::testing {

namespace fs = std::filesystem;

struct Doc {
  std::string id;
  std::string contents;
};

// A corpus of `n` documents over a Zipf-like vocabulary of `vocab` words ("w0".."w<vocab-1>"),
// 0..max_len words each (some documents are empty), plus a few English words for analyzer tests.
inline std::vector<Doc> RandomCorpus(size_t n, size_t vocab, size_t max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights(vocab);
  for (size_t i = 0; i < vocab; ++i) weights[i] = 1.0 / static_cast<double>(i + 1);
  std::discrete_distribution<size_t> word(weights.begin(), weights.end());
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::vector<Doc> docs;
  for (size_t d = 0; d < n; ++d) {
    std::string text;
    const size_t l = len(rng);
    for (size_t i = 0; i < l; ++i) {
      if (!text.empty()) text += (rng() % 7 == 0) ? ", " : " ";
      text.push_back(rng() % 3 == 0 ? 'W' : 'w');
      text += std::to_string(word(rng));
    }
    std::string id = "doc-";
    id += std::to_string(d);
    id += '-';
    id += std::to_string(rng() % 1000);
    docs.push_back({id, text});
  }
  return docs;
}

inline std::string ToJsonLine(const Doc& d) {
  return nlohmann::json{{"id", d.id}, {"contents", d.contents}}.dump();
}

inline void WriteJsonl(const std::string& path, const std::vector<Doc>& docs) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const auto& d : docs) out << ToJsonLine(d) << "\n";
}

inline void WriteJsonlGz(const std::string& path, const std::vector<Doc>& docs) {
  gzFile f = gzopen(path.c_str(), "wb");
  for (const auto& d : docs) {
    const std::string line = ToJsonLine(d) + "\n";
    gzwrite(f, line.data(), static_cast<unsigned>(line.size()));
  }
  gzclose(f);
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Brute-force BM25 over the analyzed corpus, with docs/SCORING.md's formula and order.
class Reference {
 public:
  Reference(const std::vector<Doc>& docs, const Analyzer& analyzer, Bm25Params p = {}) : params_(p) {
    for (const auto& d : docs) {
      std::map<std::string, uint32_t> tf;
      const auto terms = analyzer.Analyze(d.contents);
      for (const auto& t : terms) ++tf[t];
      for (const auto& [t, f] : tf) ++df_[t];
      lengths_.push_back(static_cast<uint32_t>(terms.size()));
      total_ += terms.size();
      tfs_.push_back(std::move(tf));
      ids_.push_back(d.id);
    }
    analyzer_ = analyzer;
  }

  std::vector<ScoredDoc> Search(const std::string& text, QueryMode mode, uint32_t k) const {
    const auto terms = analyzer_.AnalyzeQuery(text);
    if (mode == QueryMode::kAndOr) {
      auto a = Run(terms, true, k);
      return a.size() >= k ? a : Run(terms, false, k);
    }
    return Run(terms, mode == QueryMode::kAnd, k);
  }
  const std::string& id(uint32_t doc) const { return ids_[doc]; }
  size_t size() const { return ids_.size(); }
  uint32_t length(uint32_t doc) const { return lengths_[doc]; }
  uint32_t df(const std::string& t) const {
    auto it = df_.find(t);
    return it == df_.end() ? 0 : it->second;
  }

 private:
  std::vector<ScoredDoc> Run(const std::vector<std::string>& terms, bool conj, uint32_t k) const {
    const uint64_t n = ids_.size();
    const double avgdl = n == 0 ? 0.0 : static_cast<double>(total_) / static_cast<double>(n);
    std::vector<ScoredDoc> all;
    if (terms.empty()) return all;
    for (uint32_t d = 0; d < n; ++d) {
      float score = 0;
      size_t matched = 0;
      const float norm = Bm25Norm(lengths_[d], avgdl, params_);
      for (const auto& t : terms) {
        auto it = tfs_[d].find(t);
        if (it == tfs_[d].end()) continue;
        ++matched;
        score += Bm25TermScore(Bm25Idf(n, df_.at(t)), it->second, norm, params_.k1);
      }
      if (matched == 0 || (conj && matched != terms.size())) continue;
      all.push_back({d, score});
    }
    std::sort(all.begin(), all.end(), RanksBefore);
    if (all.size() > k) all.resize(k);
    return all;
  }

  Bm25Params params_;
  Analyzer analyzer_;
  std::vector<std::map<std::string, uint32_t>> tfs_;
  std::map<std::string, uint32_t> df_;
  std::vector<uint32_t> lengths_;
  std::vector<std::string> ids_;
  uint64_t total_ = 0;
};

// A fresh directory under the system temp dir, removed at destruction.
struct CommandResult {
  int exit_code = -1;  // the exit status; 128 + signal when killed by one
  std::string out, err;
};

// Runs `args` through /bin/sh with stdout and stderr captured (arguments are single-quoted).
inline CommandResult RunCommand(const std::vector<std::string>& args, const std::string& env = "") {
  static int counter = 0;
  const std::string base =
      (fs::temp_directory_path() / ("tools_cmd_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
          .string();
  std::string cmd = env.empty() ? "" : env + " ";
  for (const auto& a : args) {
    std::string q = "'";
    for (char c : a) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    cmd += q + "' ";
  }
  cmd += "> " + base + ".out 2> " + base + ".err";
  const int status = std::system(cmd.c_str());
  CommandResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = ReadText(base + ".out");
  r.err = ReadText(base + ".err");
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return r;
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace search::testing
