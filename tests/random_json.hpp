// Random JSON string contents for tests of stored sources: text that a byte-for-byte store must
// keep exactly (escapes, \u sequences and surrogate pairs, raw UTF-8 of 2 to 4 bytes, whitespace).
// Thread-safety: none needed (pure functions of the generator given).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace search::testing {

// Appends to *out until it holds at least `size` bytes: lowercase letters and, one time in
// `one_in`, a piece of JSON string text (each piece valid inside a JSON string literal).
inline void AppendRandomJsonText(std::mt19937& rng, std::string* out, size_t size, uint32_t one_in) {
  static const char* const kPieces[] = {"\\\"",
                                        "\\\\",
                                        "\\n",
                                        "\\u00e9",
                                        "\\ud83d\\ude00",
                                        "\xC3\xA9",
                                        "\xE2\x82\xAC",
                                        "\xF0\x9F\x98\x80",
                                        " heart of gold ",
                                        "\\/",
                                        "\\u0000",
                                        "\\u0041",
                                        "\\t",
                                        "  "};
  while (out->size() < size) {
    if (rng() % one_in == 0) {
      *out += kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
    } else {
      out->push_back(static_cast<char>('a' + rng() % 26));
    }
  }
}

}  // namespace search::testing
