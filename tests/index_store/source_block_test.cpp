// Source blocks (index_store/source_block.hpp) against the plain reference: the documents given.
// Random texts of every codec (raw, zstd, zstd with a trained dictionary) decode byte for byte;
// every damaged byte, a truncation and a missing dictionary are Corruption, never other text.
#include "index_store/source_block.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace search {
namespace {

// A JSON-ish object with escapes, UTF-8 of 1 to 4 bytes and \u sequences, of about `size` bytes.
std::string RandomSource(std::mt19937& rng, size_t size) {
  static const char* const kPieces[] = {"\\\"",           "\\\\",     "\\n",          "\\u00e9",
                                        "\\ud83d\\ude00", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                        " the ",          "word",     "\t",           "\\/"};
  std::string s = "{\"id\": \"" + std::to_string(rng()) + "\", \"contents\": \"";
  while (s.size() < size) {
    if (rng() % 3 == 0) {
      s += kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
    } else {
      s.push_back(static_cast<char>('a' + rng() % 26));
    }
  }
  return s + "\"}";
}

std::vector<std::string_view> Views(const std::vector<std::string>& docs) {
  return {docs.begin(), docs.end()};
}

void ExpectDecodes(const std::string& value, const SourceDict* dict, const std::vector<std::string>& docs) {
  DecodedSourceBlock out;
  Status st = DecodeSourceBlock(value, dict, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(out.count(), docs.size());
  for (uint32_t i = 0; i < out.count(); ++i) EXPECT_EQ(out.doc(i), docs[i]) << i;
  EXPECT_EQ(PeekSourceBlockCount(value), docs.size());
}

TEST(SourceBlockTest, RoundTripEveryCodec) {
  std::mt19937 rng(1);
  std::vector<std::string> sample;
  for (int i = 0; i < 2000; ++i) sample.push_back(RandomSource(rng, 50 + rng() % 400));
  const std::string trained = SourceDict::Train(Views(sample), 16 << 10);
  ASSERT_FALSE(trained.empty());
  auto dict = SourceDict::Make(trained, 3);
  ASSERT_TRUE(dict.ok()) << dict.status().ToString();
  SourceBlockEncoder enc(3);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::string> docs;
    const size_t n = 1 + rng() % 100;
    for (size_t i = 0; i < n; ++i) docs.push_back(rng() % 10 == 0 ? std::string() : RandomSource(rng, rng() % 800));
    std::string value;
    ASSERT_TRUE(enc.Encode(Views(docs), nullptr, &value).ok());
    ExpectDecodes(value, nullptr, docs);
    ASSERT_TRUE(enc.Encode(Views(docs), dict->get(), &value).ok());
    ExpectDecodes(value, dict->get(), docs);
  }
}

TEST(SourceBlockTest, IncompressibleBlockIsStoredRaw) {
  std::mt19937 rng(2);
  std::string noise(3000, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  const std::vector<std::string> docs = {noise, "", "{}"};
  SourceBlockEncoder enc(3);
  std::string value;
  ASSERT_TRUE(enc.Encode(Views(docs), nullptr, &value).ok());
  EXPECT_EQ(static_cast<uint8_t>(value[5]), static_cast<uint8_t>(SourceCodec::kRaw));
  ExpectDecodes(value, nullptr, docs);
}

TEST(SourceBlockTest, LargeDocumentRoundTrips) {
  std::mt19937 rng(3);
  const std::vector<std::string> docs = {RandomSource(rng, 3 << 20), "{\"id\":\"x\"}"};
  SourceBlockEncoder enc(3);
  std::string value;
  ASSERT_TRUE(enc.Encode(Views(docs), nullptr, &value).ok());
  ExpectDecodes(value, nullptr, docs);
}

TEST(SourceBlockTest, EncoderRefusesWhatTheDecoderWouldNot) {
  SourceBlockEncoder enc(3);
  std::string value;
  EXPECT_EQ(enc.Encode({}, nullptr, &value).code(), StatusCode::kInvalidArgument);
  const std::string huge(kMaxSourceBytes + 1, 'x');
  const std::vector<std::string_view> docs = {huge};
  EXPECT_EQ(enc.Encode(docs, nullptr, &value).code(), StatusCode::kInvalidArgument);
}

TEST(SourceBlockTest, EveryDamagedByteIsCorruption) {
  std::mt19937 rng(4);
  std::vector<std::string> docs;
  for (int i = 0; i < 20; ++i) docs.push_back(RandomSource(rng, 40 + rng() % 100));
  SourceBlockEncoder enc(3);
  for (bool compressed : {true, false}) {
    std::string value;
    if (compressed) {
      ASSERT_TRUE(enc.Encode(Views(docs), nullptr, &value).ok());
      ASSERT_EQ(static_cast<uint8_t>(value[5]), static_cast<uint8_t>(SourceCodec::kZstd));
    } else {
      ASSERT_TRUE(enc.Encode(Views({std::string(1, '\x01')}), nullptr, &value).ok());
      ASSERT_EQ(static_cast<uint8_t>(value[5]), static_cast<uint8_t>(SourceCodec::kRaw));
    }
    for (size_t i = 0; i < value.size(); ++i) {
      for (uint8_t flip : {0x01, 0x80, 0xff}) {
        std::string bad = value;
        bad[i] = static_cast<char>(bad[i] ^ flip);
        DecodedSourceBlock out;
        Status st = DecodeSourceBlock(bad, nullptr, &out);
        EXPECT_EQ(st.code(), StatusCode::kCorruption) << "byte " << i;
        EXPECT_EQ(out.count(), 0u);
      }
    }
    for (size_t len = 0; len < value.size(); ++len) {
      DecodedSourceBlock out;
      EXPECT_EQ(DecodeSourceBlock(value.substr(0, len), nullptr, &out).code(), StatusCode::kCorruption) << len;
    }
  }
}

TEST(SourceBlockTest, MissingOrWrongDictionaryIsCorruption) {
  std::mt19937 rng(5);
  std::vector<std::string> sample;
  for (int i = 0; i < 2000; ++i) sample.push_back(RandomSource(rng, 50 + rng() % 400));
  auto dict = SourceDict::Make(SourceDict::Train(Views(sample), 16 << 10), 3);
  ASSERT_TRUE(dict.ok());
  std::vector<std::string> other_sample;
  for (int i = 0; i < 2000; ++i)
    other_sample.push_back("<p>" + std::to_string(rng()) + "</p>" + RandomSource(rng, 100));
  auto other = SourceDict::Make(SourceDict::Train(Views(other_sample), 8 << 10), 3);
  ASSERT_TRUE(other.ok());
  const std::vector<std::string> docs = {sample[0], sample[1], sample[2]};
  SourceBlockEncoder enc(3);
  std::string value;
  ASSERT_TRUE(enc.Encode(Views(docs), dict->get(), &value).ok());
  ASSERT_EQ(static_cast<uint8_t>(value[5]), static_cast<uint8_t>(SourceCodec::kZstdDict));
  DecodedSourceBlock out;
  EXPECT_EQ(DecodeSourceBlock(value, nullptr, &out).code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeSourceBlock(value, other->get(), &out).code(), StatusCode::kCorruption);
  ExpectDecodes(value, dict->get(), docs);
}

TEST(SourceBlockTest, DictionaryBytesAreChecked) {
  EXPECT_EQ(SourceDict::Make("", 3).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(SourceDict::Make("not a dictionary at all", 3).status().code(), StatusCode::kCorruption);
  // Too little to train on: no dictionary, not an error.
  const std::vector<std::string_view> few = {"a", "b"};
  EXPECT_TRUE(SourceDict::Train(few, 16 << 10).empty());
}

}  // namespace
}  // namespace search
