// Fuzz target: the source block decoder (index_store/source_block.hpp, index_store/FORMAT.md
// "Sources") on arbitrary bytes, as ShardReader::GetSources meets a stored block. The input's
// first byte says whether the shard has a dictionary (bit 0; a fixed one, trained once from
// synthetic sources) and whether to repair the block's CRC (bit 1) so that mutations reach the
// header, the zstd frame and the offsets instead of dying on the CRC; the rest is the block.
// Checked: errors are Corruption and leave nothing decoded; a decoded block has count() documents
// whose views tile its text; re-encoding them (with and without the dictionary) decodes to the
// same documents.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codec/block_codec.hpp"
#include "fuzz_check.hpp"
#include "index_store/source_block.hpp"

namespace {

using namespace search;  // NOLINT: a fuzz target over one API

const SourceDict* FuzzDict() {
  static const std::shared_ptr<const SourceDict> kDict = [] {
    std::vector<std::string> samples;
    uint32_t x = 12345;
    for (int i = 0; i < 2000; ++i) {
      std::string s = "{\"id\": \"" + std::to_string(i) + "\", \"contents\": \"";
      for (int k = 0; k < 60; ++k) {
        x = x * 1103515245u + 12345u;
        static const char* const kWords[] = {"heart", "of", "gold", "stream", "\\u00e9", "buoy", "virgin", "\\n"};
        s += kWords[(x >> 16) % 8];
        s += ' ';
      }
      samples.push_back(s + "\"}");
    }
    const std::vector<std::string_view> views(samples.begin(), samples.end());
    auto d = SourceDict::Make(SourceDict::Train(views, 8 << 10), 1);
    if (!d.ok()) std::abort();
    return std::move(d).value();
  }();
  return kDict.get();
}

void Check(std::string_view value, const SourceDict* dict) {
  DecodedSourceBlock block;
  const Status st = DecodeSourceBlock(value, dict, &block);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == StatusCode::kCorruption);
    FUZZ_CHECK(block.count() == 0 && block.text.empty());
    return;
  }
  FUZZ_CHECK(block.count() >= 1);
  FUZZ_CHECK(block.count() == PeekSourceBlockCount(value));
  std::vector<std::string_view> docs;
  size_t total = 0;
  for (uint32_t i = 0; i < block.count(); ++i) {
    docs.push_back(block.doc(i));
    FUZZ_CHECK(docs.back().data() == block.text.data() + total);
    total += docs.back().size();
  }
  FUZZ_CHECK(total == block.text.size());
  SourceBlockEncoder encoder(1);
  for (const SourceDict* d : {static_cast<const SourceDict*>(nullptr), FuzzDict()}) {
    std::string again;
    FUZZ_CHECK(encoder.Encode(docs, d, &again).ok());
    DecodedSourceBlock back;
    FUZZ_CHECK(DecodeSourceBlock(again, d, &back).ok());
    FUZZ_CHECK(back.text == block.text && back.ends == block.ends);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const SourceDict* dict = (flags & 1) != 0 ? FuzzDict() : nullptr;
  std::string value(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((flags & 2) != 0 && value.size() >= kSourceBlockHeaderBytes) {
    const uint32_t crc = Crc32c(value.data() + 4, value.size() - 4);
    for (int i = 0; i < 4; ++i) value[i] = static_cast<char>(crc >> (8 * i));
  }
  Check(value, dict);
  return 0;
}
