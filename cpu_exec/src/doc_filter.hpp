// FilterDocs: candidate docIDs filtered through one list's cursor, docIDs only (no frequency
// decoded), for counting and for finding a conjunction's documents a block at a time.
// Thread-safety: pure functions over caller-owned cursors and buffers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "and_query.hpp"
#include "block_cursor.hpp"

namespace search::cpu_internal {

// Keeps the candidates (strictly ascending) that c holds (kPresent) or lacks (!kPresent), in
// order, at the front of cand; returns how many. cand has room for n + 8 values (the eight lanes
// past n are read, never used). c moves forward only: to each candidate's block by metadata
// (next_geq), then through the decoded block by a merge, eight docIDs against eight with AVX2
// (a candidate chunk is done when its largest valid value is at most the block chunk's largest;
// the block's kPad trailing kEndDoc values let every load take eight), else branch-free.
template <bool kPresent>
inline uint32_t FilterDocs(BlockCursor& c, uint32_t* cand, uint32_t n) {
  uint32_t i = 0, out = 0;
  while (i < n) {
    c.next_geq(cand[i]);
    if (c.doc() == kEndDoc) {  // the list holds none of the rest (or failed: the caller checks)
      if constexpr (!kPresent) {
        std::memmove(cand + out, cand + i, (n - i) * sizeof(uint32_t));
        out += n - i;
      }
      return out;
    }
    const uint32_t* b = c.block_docs();
    const uint32_t nb = c.block_count();
    const uint32_t last = b[nb - 1];
    uint32_t j = c.pos();
#if defined(__AVX2__)
    // The candidates up to the block's last docID: cand[i, m).
    const uint32_t m = static_cast<uint32_t>(std::upper_bound(cand + i, cand + n, last) - cand);
    unsigned acc = 0;  // lanes of the current candidate chunk found in the block so far
    while (i < m) {
      const uint32_t valid = std::min(8u, m - i);
      const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cand + i));
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j));
      acc |= MatchLanes(va, vb);
      const uint32_t la = cand[i + valid - 1], lb = b[j + 7];
      if (lb <= la) j += 8;  // j stays <= nb: a chunk holding padding has lb == kEndDoc > la
      if (la <= lb) {
        unsigned keep = (kPresent ? acc : ~acc) & ((1u << valid) - 1);
        for (; keep != 0; keep &= keep - 1) cand[out++] = cand[i + static_cast<uint32_t>(__builtin_ctz(keep))];
        i += valid;
        acc = 0;
      }
    }
#else
    // cand[i] <= last keeps j < nb: j moves past b[j] only when b[j] <= cand[i] <= last, and the
    // step that consumes last (b[j] == cand[i] == last) also ends the loop (candidates ascend).
    while (i < n && cand[i] <= last) {
      const uint32_t x = cand[i], y = b[j];
      cand[out] = x;
      out += kPresent ? static_cast<uint32_t>(x == y) : static_cast<uint32_t>(x < y);
      i += static_cast<uint32_t>(x <= y);
      j += static_cast<uint32_t>(y <= x);
    }
#endif
    c.set_pos(std::min(j, nb - 1));
  }
  return out;
}

}  // namespace search::cpu_internal
