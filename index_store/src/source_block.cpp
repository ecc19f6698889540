// Source blocks (source_block.hpp; index_store/FORMAT.md "Sources").
#include "index_store/source_block.hpp"

#define ZDICT_STATIC_LINKING_ONLY
#include <zdict.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "codec/block_codec.hpp"

namespace search {

namespace {

void PutLe32At(char* p, uint32_t v) {
  p[0] = static_cast<char>(v);
  p[1] = static_cast<char>(v >> 8);
  p[2] = static_cast<char>(v >> 16);
  p[3] = static_cast<char>(v >> 24);
}
uint32_t Le32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 | uint32_t{u[3]} << 24;
}

struct DctxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

ZSTD_DCtx* ThreadDctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DctxDeleter> ctx(ZSTD_createDCtx());
  return ctx.get();
}

Status Bad(const std::string& why) {
  return Status::Corruption("source block: " + why);
}

}  // namespace

std::string SourceDict::Train(std::span<const std::string_view> samples, size_t max_bytes) {
  std::string joined;
  std::vector<size_t> sizes;
  sizes.reserve(samples.size());
  for (std::string_view s : samples) {
    joined.append(s);
    sizes.push_back(s.size());
  }
  if (sizes.size() < 8 || joined.size() < 4 * max_bytes) return {};
  std::string dict(max_bytes, '\0');
  // fastCover with fixed parameters (FORMAT.md "Sources": ZDICT_trainFromBuffer's search over
  // them took 4x the time for a larger result at level 1).
  ZDICT_fastCover_params_t params{};
  params.k = 200;
  params.d = 8;
  params.f = 20;
  params.accel = 1;
  params.splitPoint = 1.0;
  params.zParams.compressionLevel = kSourceZstdLevel;
  const size_t n = ZDICT_trainFromBuffer_fastCover(dict.data(), dict.size(), joined.data(), sizes.data(),
                                                   static_cast<unsigned>(sizes.size()), params);
  if (ZDICT_isError(n)) return {};
  dict.resize(n);
  return dict;
}

Result<std::shared_ptr<const SourceDict>> SourceDict::Make(std::string_view bytes, int level) {
  if (bytes.empty() || ZDICT_getDictID(bytes.data(), bytes.size()) == 0)
    return Status::Corruption("source dictionary: not a zstd dictionary");
  std::shared_ptr<SourceDict> d(new SourceDict());
  d->bytes_.assign(bytes);
  if (level != 0) d->cdict_ = ZSTD_createCDict(d->bytes_.data(), d->bytes_.size(), level);
  d->ddict_ = ZSTD_createDDict(d->bytes_.data(), d->bytes_.size());
  if ((level != 0 && d->cdict_ == nullptr) || d->ddict_ == nullptr)
    return Status::Corruption("source dictionary: zstd rejects it");
  return std::shared_ptr<const SourceDict>(std::move(d));
}

SourceDict::~SourceDict() {
  ZSTD_freeCDict(static_cast<ZSTD_CDict*>(cdict_));
  ZSTD_freeDDict(static_cast<ZSTD_DDict*>(ddict_));
}

SourceBlockEncoder::SourceBlockEncoder(int level) : level_(level), cctx_(ZSTD_createCCtx()) {}

SourceBlockEncoder::~SourceBlockEncoder() {
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
}

Status SourceBlockEncoder::Encode(std::span<const std::string_view> docs, const SourceDict* dict, std::string* out) {
  if (docs.empty()) return Status::InvalidArgument("source block: no documents");
  size_t raw_size = 4 * docs.size();
  for (std::string_view d : docs) {
    if (d.size() > kMaxSourceBytes)
      return Status::InvalidArgument("a source of " + std::to_string(d.size()) + " bytes exceeds the limit of " +
                                     std::to_string(kMaxSourceBytes));
    raw_size += d.size();
  }
  if (raw_size > kMaxSourceBlockRawBytes) return Status::InvalidArgument("source block too large");
  raw_.resize(raw_size);
  char* p = raw_.data();
  uint32_t end = 0;
  for (std::string_view d : docs) {
    end += static_cast<uint32_t>(d.size());
    PutLe32At(p, end);
    p += 4;
  }
  for (std::string_view d : docs) {
    if (!d.empty()) std::memcpy(p, d.data(), d.size());
    p += d.size();
  }

  out->resize(kSourceBlockHeaderBytes + ZSTD_compressBound(raw_size));
  char* payload = out->data() + kSourceBlockHeaderBytes;
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
  size_t n;
  SourceCodec codec;
  if (dict != nullptr && dict->cdict() != nullptr) {
    n = ZSTD_compress_usingCDict(cctx, payload, out->size() - kSourceBlockHeaderBytes, raw_.data(), raw_size,
                                 static_cast<const ZSTD_CDict*>(dict->cdict()));
    codec = SourceCodec::kZstdDict;
  } else {
    n = ZSTD_compressCCtx(cctx, payload, out->size() - kSourceBlockHeaderBytes, raw_.data(), raw_size, level_);
    codec = SourceCodec::kZstd;
  }
  if (ZSTD_isError(n) || n >= raw_size) {
    codec = SourceCodec::kRaw;
    n = raw_size;
    out->resize(kSourceBlockHeaderBytes + raw_size);
    std::memcpy(out->data() + kSourceBlockHeaderBytes, raw_.data(), raw_size);
  }
  out->resize(kSourceBlockHeaderBytes + n);
  char* h = out->data();
  h[4] = static_cast<char>(kSourceBlockVersion);
  h[5] = static_cast<char>(codec);
  h[6] = h[7] = 0;
  PutLe32At(h + 8, static_cast<uint32_t>(docs.size()));
  PutLe32At(h + 12, static_cast<uint32_t>(raw_size));
  PutLe32At(h, Crc32c(h + 4, out->size() - 4));
  return Status::Ok();
}

uint32_t PeekSourceBlockCount(std::string_view value) {
  return value.size() < kSourceBlockHeaderBytes ? 0 : Le32(value.data() + 8);
}

Status DecodeSourceBlock(std::string_view value, const SourceDict* dict, DecodedSourceBlock* out) {
  out->text.clear();
  out->ends.clear();
  if (value.size() < kSourceBlockHeaderBytes)
    return Bad(std::to_string(value.size()) + " bytes, shorter than its header");
  const char* h = value.data();
  if (Crc32c(h + 4, value.size() - 4) != Le32(h)) return Bad("CRC mismatch");
  if (static_cast<uint8_t>(h[4]) != kSourceBlockVersion)
    return Bad("version " + std::to_string(static_cast<uint8_t>(h[4])) + ", this build reads " +
               std::to_string(kSourceBlockVersion));
  const auto codec = static_cast<uint8_t>(h[5]);
  if (codec > static_cast<uint8_t>(SourceCodec::kZstdDict)) return Bad("unknown codec " + std::to_string(codec));
  if (h[6] != 0 || h[7] != 0) return Bad("reserved bytes not zero");
  const uint32_t count = Le32(h + 8);
  const uint32_t raw_size = Le32(h + 12);
  if (count == 0) return Bad("no documents");
  if (raw_size < uint64_t{4} * count || raw_size > kMaxSourceBlockRawBytes)
    return Bad("raw size " + std::to_string(raw_size) + " impossible for " + std::to_string(count) + " documents");
  const std::string_view payload = value.substr(kSourceBlockHeaderBytes);

  // The raw bytes: offsets then texts. Decompressed into `text`, then the offsets moved out.
  std::string& raw = out->text;
  if (codec == static_cast<uint8_t>(SourceCodec::kRaw)) {
    if (payload.size() != raw_size)
      return Bad("raw payload of " + std::to_string(payload.size()) + " bytes, header says " +
                 std::to_string(raw_size));
    raw.assign(payload);
  } else {
    const unsigned long long content = ZSTD_getFrameContentSize(payload.data(), payload.size());
    if (content != raw_size) return Bad("zstd frame size disagrees with the header");
    const bool with_dict = codec == static_cast<uint8_t>(SourceCodec::kZstdDict);
    if (with_dict && dict == nullptr) return Bad("compressed with a dictionary the shard does not have");
    raw.resize(raw_size);
    ZSTD_DCtx* dctx = ThreadDctx();
    if (dctx == nullptr) return Status::ResourceExhausted("source block: no zstd context");
    const size_t n = with_dict
                         ? ZSTD_decompress_usingDDict(dctx, raw.data(), raw.size(), payload.data(), payload.size(),
                                                      static_cast<const ZSTD_DDict*>(dict->ddict()))
                         : ZSTD_decompressDCtx(dctx, raw.data(), raw.size(), payload.data(), payload.size());
    if (ZSTD_isError(n)) {
      raw.clear();
      return Bad(std::string("zstd: ") + ZSTD_getErrorName(n));
    }
    if (n != raw_size) {
      raw.clear();
      return Bad("zstd frame decompressed to the wrong size");
    }
  }
  const uint64_t text_size = raw_size - uint64_t{4} * count;
  out->ends.resize(count);
  uint32_t prev = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t e = Le32(raw.data() + 4 * i);
    if (e < prev || e > text_size) {
      raw.clear();
      out->ends.clear();
      return Bad("document offsets out of order or past the end");
    }
    out->ends[i] = prev = e;
  }
  if (prev != text_size) {
    raw.clear();
    out->ends.clear();
    return Bad("document offsets do not cover the texts");
  }
  raw.erase(0, size_t{4} * count);
  return Status::Ok();
}

}  // namespace search
