// BlockCursor (cpu_exec/src/block_cursor.hpp) against the raw posting list: next/next_geq land on
// std::lower_bound's answer, shallow_seek reads only metadata, frequencies decode lazily and every
// decode is counted.
#include "block_cursor.hpp"
#include "query_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "exec_fixture.hpp"

namespace search::testing {
namespace {

using cpu_internal::BlockCursor;
using cpu_internal::CursorEnv;
using cpu_internal::kEndDoc;

struct Env {
  QueryStats stats;
  Status error;
  CursorEnv env;
  explicit Env(const MemShard& s) {
    env.norms = s.norms.data();
    env.doc_begin = s.doc_begin;
    env.stats = &stats;
    env.error = &error;
  }
};

class BlockCursorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CorpusOptions o;
    o.num_docs = 8000;
    o.vocab = 500;
    o.seed = 9;
    corpus_ = new Corpus(MakeCorpus(o));
    shard_ = new MemShard(BuildShard(*corpus_, 0, corpus_->num_docs));
  }
  static void TearDownTestSuite() {
    delete shard_;
    delete corpus_;
  }
  static Corpus* corpus_;
  static MemShard* shard_;
};
Corpus* BlockCursorTest::corpus_ = nullptr;
MemShard* BlockCursorTest::shard_ = nullptr;

TEST_F(BlockCursorTest, NextVisitsEveryPostingWithItsFrequency) {
  const std::vector<float> idf = GlobalIdf(*corpus_);
  for (uint32_t t : {0u, 1u, 17u, 200u, 499u}) {
    const ListView* v = shard_->view(t);
    if (v == nullptr) continue;
    Env e(*shard_);
    BlockCursor cur;
    cur.reset(v, idf[t], 3, &e.env);
    EXPECT_EQ(cur.slot(), 3u);
    EXPECT_EQ(cur.size(), corpus_->df(t));
    cur.next_geq(0);
    for (const Posting& p : corpus_->postings[t]) {
      ASSERT_EQ(cur.doc(), p.doc);
      ASSERT_EQ(cur.freq(), p.tf);
      const float want = Bm25TermScore(idf[t], p.tf, shard_->norms[p.doc], 0.9f);
      ASSERT_EQ(cur.score(), want);
      ASSERT_LE(cur.score(), cur.block_max_score());
      ASSERT_LE(cur.block_max_score(), cur.max_score());
      cur.next();
    }
    EXPECT_EQ(cur.doc(), kEndDoc);
    EXPECT_TRUE(e.error.ok());
    EXPECT_EQ(e.stats.blocks_decoded, v->num_blocks());
    EXPECT_EQ(e.stats.freq_blocks_decoded, v->num_blocks());
    EXPECT_EQ(e.stats.postings_decoded, v->count());
    uint64_t bytes = 0;
    for (uint32_t j = 0; j < v->num_blocks(); ++j)
      bytes += PackedBytes(v->block(j).count, v->block(j).doc_bits) + PackedBytes(v->block(j).count, v->block(j).freq_bits);
    EXPECT_EQ(e.stats.bytes_touched, bytes);
  }
}

TEST_F(BlockCursorTest, NextGeqMatchesLowerBoundAndNeverMovesBack) {
  std::mt19937_64 rng(5);
  for (uint32_t t : {0u, 2u, 30u, 150u}) {
    const ListView* v = shard_->view(t);
    ASSERT_NE(v, nullptr);
    std::vector<uint32_t> docs;
    for (const Posting& p : corpus_->postings[t]) docs.push_back(p.doc);
    for (int trial = 0; trial < 50; ++trial) {
      Env e(*shard_);
      BlockCursor cur;
      cur.reset(v, 1.0f, 0, &e.env);
      uint32_t target = 0, last = 0;
      const uint32_t max_step = 1 + static_cast<uint32_t>(rng() % 3000);
      while (true) {
        // Sometimes a smaller target than before: a no-op.
        const uint32_t asked = rng() % 5 == 0 && target > 3 ? target - 3 : target;
        if (rng() % 3 == 0) cur.shallow_seek(asked);
        cur.next_geq(asked);
        auto it = std::lower_bound(docs.begin(), docs.end(), target);
        const uint32_t want = it == docs.end() ? kEndDoc : *it;
        if (asked == target) {
          ASSERT_EQ(cur.doc(), want) << "target " << target;
        }
        ASSERT_GE(cur.doc(), last);
        last = cur.doc();
        if (cur.doc() == kEndDoc) break;
        if (asked == target) target = cur.doc() + 1 + static_cast<uint32_t>(rng() % max_step);
      }
      EXPECT_TRUE(e.error.ok());
      EXPECT_LE(e.stats.blocks_decoded, v->num_blocks());
    }
  }
}

TEST_F(BlockCursorTest, ShallowSeekDecodesNothing) {
  const ListView* v = shard_->view(0);
  ASSERT_NE(v, nullptr);
  ASSERT_GT(v->num_blocks(), 8u);
  Env e(*shard_);
  BlockCursor cur;
  cur.reset(v, 1.0f, 0, &e.env);
  for (uint32_t j = 0; j < v->num_blocks(); ++j) {
    const uint32_t target = v->block_base(j) + (j % 2);
    cur.shallow_seek(target);
    ASSERT_FALSE(cur.blocks_exhausted());
    // The first block whose last_doc >= target.
    uint32_t want = 0;
    while (v->block(want).last_doc < target) ++want;
    EXPECT_EQ(cur.block_last_doc(), v->block(want).last_doc);
    EXPECT_EQ(cur.block_max_score(), v->block(want).max_score);
  }
  // Range bounds: the max over the blocks the range touches (a short range), never below it.
  BlockCursor ranged;
  ranged.reset(v, 1.0f, 0, &e.env);
  for (uint32_t j = 0; j + 1 < v->num_blocks(); j += 3) {
    ranged.shallow_seek(v->block_base(j));
    for (uint32_t span : {0u, 1u, 5u, 40u}) {
      const uint32_t last = std::min(j + span, v->num_blocks() - 1);
      float want = 0.0f;
      for (uint32_t b = j; b <= last; ++b) want = std::max(want, v->block(b).max_score);
      const float got = ranged.block_max_score_through(v->block(last).last_doc);
      if (span <= 5) {
        EXPECT_EQ(got, want) << j << "+" << span;
      }
      EXPECT_GE(got, want) << j << "+" << span;
      EXPECT_LE(got, v->max_score());
    }
  }
  cur.shallow_seek(v->block(v->num_blocks() - 1).last_doc + 1);
  EXPECT_TRUE(cur.blocks_exhausted());
  EXPECT_EQ(cur.block_last_doc(), kEndDoc);
  EXPECT_EQ(cur.block_max_score(), 0.0f);
  EXPECT_EQ(e.stats.blocks_decoded, 0u);
  EXPECT_EQ(e.stats.bytes_touched, 0u);
  // Deep positioning after a shallow move decodes exactly the block holding the answer.
  BlockCursor deep;
  deep.reset(v, 1.0f, 0, &e.env);
  const uint32_t mid = v->block(v->num_blocks() / 2).last_doc;
  deep.shallow_seek(mid);
  deep.next_geq(mid);
  EXPECT_EQ(deep.doc(), mid);
  EXPECT_EQ(e.stats.blocks_decoded, 1u);
  EXPECT_EQ(e.stats.freq_blocks_decoded, 0u);
  (void)deep.freq();
  (void)deep.freq();
  EXPECT_EQ(e.stats.freq_blocks_decoded, 1u);
}

// skip_blocks_at_most lands on the first block, from the block position on, whose maximum times
// slack beats the threshold (eight at a time where it can, one by one at the end; whole groups of
// ListView::kBlocksPerGroup where the view has their maxima), decodes nothing, and leaves doc()
// at that block's base. A list of 157 blocks (three groups), with and without group maxima.
TEST(BlockCursorSkip, LandsOnTheFirstBlockThatCanBeatTheThreshold) {
  std::mt19937_64 rng(5);
  std::vector<uint32_t> docs, tfs;
  for (uint32_t d = 0; docs.size() < 20000; d += 1 + static_cast<uint32_t>(rng() % 3)) {
    docs.push_back(d);
    tfs.push_back(1 + static_cast<uint32_t>(rng() % 4));
  }
  // Scores that rise and fall along the list, so that block and group maxima differ.
  auto blob = EncodeList(docs, tfs, 0, [](uint32_t doc, uint32_t f) {
    return static_cast<float>(f) * (1.0f + static_cast<float>((doc / 5000) % 7)) *
           (1.0f + 0.01f * static_cast<float>((doc / 900) % 13));
  });
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  std::vector<uint32_t> storage((blob->size() + 3) / 4);
  std::memcpy(storage.data(), blob->data(), blob->size());
  auto parsed = ListView::Parse(std::string_view(reinterpret_cast<const char*>(storage.data()), blob->size()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const uint32_t nb = parsed->num_blocks();
  ASSERT_EQ(nb, 157u);
  std::vector<float> maxima;
  for (uint32_t b = 0; b < nb; ++b) maxima.push_back(parsed->block(b).max_score);
  const std::vector<float> groups = parsed->ComputeGroupMaxima();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0], *std::max_element(maxima.begin(), maxima.begin() + 64));
  EXPECT_EQ(groups[2], *std::max_element(maxima.begin() + 128, maxima.end()));
  EXPECT_LT(groups[0], groups[1]);  // group maxima that differ, so that whole groups can be skipped
  std::vector<float> thresholds = maxima;
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  thresholds.insert(thresholds.begin(), -1.0f);
  thresholds.push_back(thresholds.back() * 2.0f);
  QueryStats stats;
  Status error;
  const std::vector<float> norms(docs.back() + 1, 1.0f);
  CursorEnv env{.norms = norms.data(), .doc_begin = 0, .k1 = 0.9f, .stats = &stats, .error = &error};
  int landed_past_a_group = 0;
  for (const bool with_groups : {false, true}) {
    ListView v = *parsed;
    v.set_group_maxima(with_groups ? groups.data() : nullptr);
    for (uint32_t start : {0u, 1u, 7u, 8u, 63u, 64u, 100u, nb - 9, nb - 1}) {
      for (const float thr : thresholds) {
        for (const float slack : {1.0f, 0.97f}) {
          uint32_t want = start;
          while (want < nb && maxima[want] * slack <= thr) ++want;
          BlockCursor cur;
          cur.reset(&v, 1.0f, 0, &env);
          cur.shallow_seek(v.block_base(start));
          ASSERT_EQ(cur.block(), start);
          cur.skip_blocks_at_most(thr, slack);
          const std::string what = std::string(with_groups ? "groups, " : "") + "from " + std::to_string(start) +
                                   " thr " + std::to_string(thr) + " slack " + std::to_string(slack);
          ASSERT_EQ(cur.block(), want) << what;
          if (want < nb) {
            EXPECT_EQ(cur.block_max_score(), maxima[want]) << what;
            if (want > start) {
              EXPECT_EQ(cur.doc(), v.block_base(want)) << what;
            }
            cur.next_geq(v.block_base(want));  // then positions in that block
            EXPECT_GE(cur.doc(), v.block_base(want)) << what;
            EXPECT_LE(cur.doc(), v.block(want).last_doc) << what;
          } else {
            EXPECT_TRUE(cur.blocks_exhausted()) << what;
            EXPECT_EQ(cur.doc(), kEndDoc) << what;
          }
          landed_past_a_group += want / ListView::kBlocksPerGroup > start / ListView::kBlocksPerGroup ? 1 : 0;
        }
      }
    }
  }
  EXPECT_GT(landed_past_a_group, 0);  // whole groups were skipped
  EXPECT_TRUE(error.ok());
}

TEST_F(BlockCursorTest, CorruptBlockEndsTheCursorWithCorruption) {
  const uint32_t t = 0;
  std::vector<uint32_t> copy = shard_->storage[t];
  auto v0 = ListView::Parse(std::string_view(reinterpret_cast<const char*>(copy.data()), shard_->sizes[t]));
  ASSERT_TRUE(v0.ok());
  // Give block 2's docID gaps one more bit of width in every value: they then overshoot last_doc.
  const BlockMeta& b2 = v0->block(2);
  ASSERT_GT(b2.doc_bits, 0u);
  auto* payload = const_cast<uint8_t*>(v0->payload()) + b2.offset;
  for (uint32_t i = 0; i < PackedBytes(b2.count, b2.doc_bits); ++i) payload[i] = 0xff;
  auto v = ListView::Parse(std::string_view(reinterpret_cast<const char*>(copy.data()), shard_->sizes[t]), false);
  ASSERT_TRUE(v.ok());
  Env e(*shard_);
  BlockCursor cur;
  cur.reset(&*v, 1.0f, 0, &e.env);
  cur.next_geq(0);
  uint32_t seen = 0;
  while (cur.doc() != kEndDoc) {
    ++seen;
    cur.next();
  }
  EXPECT_EQ(seen, 2 * kBlockSize);
  EXPECT_EQ(e.error.code(), StatusCode::kCorruption);
}

// The engine's inlined heap keeps exactly what core's TopK keeps, threshold by threshold.
TEST(TopKHeap, MatchesCoreTopK) {
  std::mt19937_64 rng(77);
  for (uint32_t k : {1u, 2u, 3u, 10u, 100u, 1000u}) {
    for (int round = 0; round < 4; ++round) {
      TopK want(k);
      cpu_internal::TopKHeap got(k);
      const uint32_t distinct_scores = round == 0 ? 3 : 1000;  // round 0: nearly all ties
      const bool ascending = round % 2 == 0;                  // the engine's order; or any order
      std::vector<uint32_t> docs(5000);
      for (uint32_t i = 0; i < docs.size(); ++i) docs[i] = i * 3;
      if (!ascending) std::shuffle(docs.begin(), docs.end(), rng);
      for (uint32_t doc : docs) {
        const float score = static_cast<float>(rng() % distinct_scores) * 0.25f;
        want.Push(doc, score);
        got.Push(doc, score);
        ASSERT_EQ(got.full(), want.full());
        ASSERT_EQ(got.Threshold(), want.Threshold());
      }
      EXPECT_EQ(got.TakeSorted(), want.TakeSorted()) << "k=" << k << " round " << round;
    }
  }
}

}  // namespace
}  // namespace search::testing
