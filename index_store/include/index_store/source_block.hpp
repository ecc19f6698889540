// Source blocks: the stored JSON sources of a run of consecutive documents, as one value of a
// shard's `source` column family (index_store/FORMAT.md "Sources" is the byte layout). A block is
// a 16-byte header (CRC-32C, version, codec, document count, raw size) and a payload: the raw
// bytes (each document's end offset, then the texts) stored as is or as one zstd frame, with or
// without the shard's trained dictionary (SourceDict). Decoding checks the CRC, the header, the
// frame's size and every offset, so damaged bytes are a Corruption error, never wrong text.
// No RocksDB here: the shard writer and reader use it, and so does the fuzz target.
// Thread-safety: SourceDict is immutable and shareable; SourceBlockEncoder is single-threaded;
// DecodeSourceBlock is reentrant (one zstd context per thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace search {

inline constexpr uint8_t kSourceBlockVersion = 1;
inline constexpr size_t kSourceBlockHeaderBytes = 16;
// The largest single source a shard stores (ShardWriter::AddDoc refuses a larger one; the indexer
// reports such a line as a bad line).
inline constexpr size_t kMaxSourceBytes = size_t{64} << 20;
// A block is closed once its texts reach this many bytes or it holds kSourceBlockMaxDocs
// documents (the writer's rule; the decoder accepts any block within the limits below).
inline constexpr size_t kSourceBlockTargetBytes = size_t{16} << 10;
inline constexpr uint32_t kSourceBlockMaxDocs = 128;
// Whether a block being filled, holding `docs` documents of `text_bytes` bytes, is closed.
inline bool SourceBlockFull(size_t text_bytes, size_t docs) {
  return text_bytes >= kSourceBlockTargetBytes || docs >= kSourceBlockMaxDocs;
}
// The writers' settings (FORMAT.md "Sources" has the measurements): zstd level of the blocks,
// the dictionary's size bound, and how many bytes of sources it is trained on.
inline constexpr int kSourceZstdLevel = 1;
inline constexpr size_t kSourceDictBytes = size_t{64} << 10;
inline constexpr size_t kSourceTrainBytes = size_t{1} << 20;
// The dictionary rule: a shard of `docs` documents keeps a dictionary of `dict_bytes` when what it
// saves per document on the training sample, scaled to them, exceeds its stored size.
inline bool SourceDictPays(double saved_per_doc, uint64_t docs, size_t dict_bytes) {
  return saved_per_doc * static_cast<double>(docs) > static_cast<double>(dict_bytes + 4);
}
// The decoder's bound on a block's raw size (a target-sized block plus one maximal source, and
// the offsets): larger claims are Corruption, never an allocation.
inline constexpr size_t kMaxSourceBlockRawBytes = kSourceBlockTargetBytes + kMaxSourceBytes + 4 * kSourceBlockMaxDocs;

enum class SourceCodec : uint8_t {
  kRaw = 0,       // payload = the raw bytes
  kZstd = 1,      // payload = one zstd frame of the raw bytes
  kZstdDict = 2,  // the same, compressed with the shard's dictionary
};

// A zstd dictionary, digested once for compression (at `level`) and decompression.
class SourceDict {
 public:
  // Trains a dictionary of at most `max_bytes` from `samples` (zstd's fastCover). An empty
  // string when training fails (too few or too uniform samples): the shard then has no dictionary.
  static std::string Train(std::span<const std::string_view> samples, size_t max_bytes);
  // Digests `bytes` for decompression, and for compression at `level` unless it is 0: Corruption
  // when they are not a zstd dictionary.
  static Result<std::shared_ptr<const SourceDict>> Make(std::string_view bytes, int level);
  ~SourceDict();
  SourceDict(const SourceDict&) = delete;
  SourceDict& operator=(const SourceDict&) = delete;

  std::string_view bytes() const { return bytes_; }
  const void* cdict() const { return cdict_; }  // ZSTD_CDict*
  const void* ddict() const { return ddict_; }  // ZSTD_DDict*

 private:
  SourceDict() = default;
  std::string bytes_;
  void* cdict_ = nullptr;
  void* ddict_ = nullptr;
};

// Encodes blocks with one reusable zstd context.
class SourceBlockEncoder {
 public:
  explicit SourceBlockEncoder(int level);
  ~SourceBlockEncoder();
  SourceBlockEncoder(const SourceBlockEncoder&) = delete;
  SourceBlockEncoder& operator=(const SourceBlockEncoder&) = delete;

  // Writes the block of `docs` into *out: zstd with `dict` when given (and made for
  // compression), without otherwise, raw
  // when compression does not make it smaller. REQUIRES: 1 <= docs.size(), every doc at most
  // kMaxSourceBytes, the raw size at most kMaxSourceBlockRawBytes (InvalidArgument otherwise).
  Status Encode(std::span<const std::string_view> docs, const SourceDict* dict, std::string* out);

 private:
  int level_;
  void* cctx_ = nullptr;  // ZSTD_CCtx*
  std::string raw_;
};

// A decoded block: the texts, back to back, and each document's end offset into them.
struct DecodedSourceBlock {
  std::string text;
  std::vector<uint32_t> ends;
  uint32_t count() const { return static_cast<uint32_t>(ends.size()); }
  // REQUIRES: i < count().
  std::string_view doc(uint32_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(text).substr(begin, ends[i] - begin);
  }
  size_t bytes() const { return text.size() + 4 * ends.size(); }
};

// The header's document count, for a value whose size allows a header (0 otherwise); nothing
// is verified.
uint32_t PeekSourceBlockCount(std::string_view value);

// Decodes `value` into *out. Corruption when the CRC, the header, the payload or an offset is
// wrong, or when the block needs a dictionary and `dict` is null.
Status DecodeSourceBlock(std::string_view value, const SourceDict* dict, DecodedSourceBlock* out);

}  // namespace search
