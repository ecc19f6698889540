// Corrupted posting lists (bits flipped in a copy of a blob, parsed without the CRC check) give
// Corruption or a well-formed answer, never a crash or a hang.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "exec_fixture.hpp"

namespace search::testing {
namespace {

TEST(Corruption, FlippedBitsGiveCorruptionOrAValidAnswer) {
  CorpusOptions o;
  o.num_docs = 4000;
  o.vocab = 400;
  o.seed = 3;
  const Corpus c = MakeCorpus(o);
  const MemShard s = BuildShard(c, 0, c.num_docs);
  const std::vector<float> idf = GlobalIdf(c);
  std::mt19937_64 rng(42);
  int parsed = 0, corruption = 0, answered = 0;
  const uint32_t victims[] = {0, 1, 5, 20, 100};
  for (int iter = 0; iter < 1500; ++iter) {
    const uint32_t t = victims[iter % 5];
    const ListView* good = s.view(t);
    ASSERT_NE(good, nullptr);
    std::vector<uint32_t> copy = s.storage[t];
    const uint32_t size = s.sizes[t];
    auto* bytes = reinterpret_cast<uint8_t*>(copy.data());
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the metadata and payload; sometimes the header.
      const uint32_t at = rng() % 8 == 0 ? static_cast<uint32_t>(rng() % 32) : 32 + static_cast<uint32_t>(rng() % (size - 32));
      bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    auto view = ListView::Parse(std::string_view(reinterpret_cast<const char*>(copy.data()), size), false);
    if (!view.ok()) continue;
    ++parsed;
    const uint32_t other = (t + 7) % 50;
    std::vector<TermInput> in = {{&*view, idf[t]}, {s.view(other), idf[other]}};
    if (other < t) std::swap(in[0], in[1]);
    if (iter % 3 == 0) in = {{&*view, idf[t]}};  // the corrupted list alone
    for (QueryMode mode : {QueryMode::kAnd, QueryMode::kOr, QueryMode::kAndOr}) {
      for (uint32_t k : {1u, 10u, 1000u}) {
        auto r = ExecuteQuery(in, std::span<const float>(s.norms), 0, mode, k);
        if (!r.ok()) {
          EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
          ++corruption;
          continue;
        }
        ++answered;
        ASSERT_LE(r->hits.size(), k);
        for (size_t i = 0; i < r->hits.size(); ++i) {
          ASSERT_LT(r->hits[i].doc, c.num_docs);
          if (i > 0) {
            ASSERT_TRUE(RanksBefore(r->hits[i - 1], r->hits[i]));
          }
        }
      }
    }
  }
  RecordProperty("parsed", parsed);
  RecordProperty("corruption", corruption);
  RecordProperty("answered", answered);
  EXPECT_GT(parsed, 50);
  EXPECT_GT(corruption, 0);
  EXPECT_GT(answered, 0);
}

}  // namespace
}  // namespace search::testing
