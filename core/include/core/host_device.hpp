// SEARCH_HD: marks a core/ function callable from host C++ and, when the including translation
// unit is compiled by nvcc, from CUDA device code too (__host__ __device__). Empty elsewhere, so
// the header stays plain C++ for the CPU-only build.
// Thread-safety: a macro; nothing to share.
#pragma once

#if defined(__CUDACC__)
#define SEARCH_HD __host__ __device__
#else
#define SEARCH_HD
#endif
