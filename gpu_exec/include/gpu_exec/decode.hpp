// GPU decoding of codec posting lists (codec/FORMAT.md) from device memory: a whole list into a
// contiguous array of absolute docIDs (and optionally tfs), or a chosen subset of its blocks into
// 128-entry slots (only the blocks a query needs). Ding 2009 §6.1, Mallia 2019 §3.1.
//
// Kernel shape: one warp per 128-posting block, lane l owning values 4l .. 4l+3. In the 8-lane
// vertical layout these four values sit in four adjacent lane columns of one slot, so a lane reads
// them with one 16-byte load (plus one more when the slot straddles a 32-bit word), shifts them out
// with one common shift, turns gaps into docIDs with a 5-step 32-bit warp scan, and writes them
// with one 16-byte store: a warp writes its block's 512 output bytes in four 128-byte lines. Blocks
// are independent (each restarts at block_base), so a CTA of W warps decodes W * blocks_per_warp
// blocks, each warp issuing the metadata and payload loads of all its blocks before decoding.
//
// Corruption: a block whose reconstruction wraps past 2^32 - 1 or does not end on meta.last_doc, or
// (subset variant) a block index >= num_blocks, ORs a bit into the caller's device word `d_error`
// (kDecodeErrorCorrupt / kDecodeErrorBadBlock). The kernels never read or write out of bounds for
// a blob that passed ListView::Parse (the host view must describe the device bytes). Call
// CheckDecodeError after the launch (it synchronizes the stream) to turn the word into a Status.
//
// Thread-safety: stateless functions; concurrent calls on different streams/outputs are safe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "codec/block_codec.hpp"
#include "core/status.hpp"

namespace search::gpu {

// Launch shape of the decode kernels (swept by bench/gpu_exec/gpu_decode_bench). Supported values:
// threads_per_cta in {64, 128, 256, 512}; blocks_per_warp in {1, 2, 4} (batched: a warp loads the
// payloads of its blocks together, then decodes them) or {8, 16} (pipelined grid-stride loop: a warp
// decodes one block while the next block's payload and the metadata of the one after are in flight).
// Anything else is InvalidArgument. A CTA decodes threads_per_cta / 32 * blocks_per_warp blocks.
// The default is the fastest shape of gpu_decode_bench's sweep for long lists.
struct DecodeTuning {
  uint32_t threads_per_cta = 128;
  uint32_t blocks_per_warp = 1;
  std::string ToString() const;
};

// Bits of the device error word.
inline constexpr uint32_t kDecodeErrorCorrupt = 1u;   // a block's docIDs disagree with its metadata
inline constexpr uint32_t kDecodeErrorBadBlock = 2u;  // a block index >= num_blocks (subset variant)

// Decodes every block of the list whose encoded bytes (exactly host_view.bytes(), copied to the
// device) start at d_blob: d_docs[0 .. count) = absolute docIDs, and if d_tfs is not null
// d_tfs[0 .. count) = term frequencies (>= 1). Asynchronous on `stream`; a corrupt block sets bits
// in *d_error (which this call does not clear; zero it once before a batch of decodes).
// REQUIRES: d_blob 4-byte aligned (16-byte aligned for the fast vector path; cudaMalloc is);
// d_docs / d_tfs hold count() entries; d_error points to a device uint32.
// InvalidArgument for null pointers, a misaligned blob, or an unsupported tuning.
Status DecodeListGpu(const uint8_t* d_blob, const ListView& host_view, uint32_t* d_docs, uint32_t* d_tfs,
                     uint32_t* d_error, cudaStream_t stream, const DecodeTuning& tuning = {});

// Decodes the blocks d_block_ids[0 .. num_ids) (device array of block indices, any order, repeats
// allowed) of the list at d_blob into slots: slot s gets block d_block_ids[s]'s docIDs at
// d_docs[128 * s .. 128 * s + meta.count) (and tfs likewise); entries past meta.count are not
// written. An index >= num_blocks sets kDecodeErrorBadBlock and leaves its slot unwritten.
// REQUIRES: d_docs / d_tfs hold 128 * num_ids entries.
Status DecodeBlocksGpu(const uint8_t* d_blob, const ListView& host_view, const uint32_t* d_block_ids, uint32_t num_ids,
                       uint32_t* d_docs, uint32_t* d_tfs, uint32_t* d_error, cudaStream_t stream,
                       const DecodeTuning& tuning = {});

// Synchronizes `stream` and reads *d_error: OK when 0, Corruption when kDecodeErrorCorrupt is set,
// InvalidArgument when only kDecodeErrorBadBlock is set. Unavailable on a CUDA error.
Status CheckDecodeError(const uint32_t* d_error, cudaStream_t stream);

}  // namespace search::gpu
