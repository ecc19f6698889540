// Fail-fast checks for the GPU benchmarks: a CUDA error or a non-OK Status prints where and why
// and exits 1 (a benchmark that carried on would print numbers for work it did not do).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "core/status.hpp"

#define BENCH_CHECK_CUDA(expr)                                                                    \
  do {                                                                                            \
    const cudaError_t e_ = (expr);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

#define BENCH_CHECK_OK(expr)                                                                     \
  do {                                                                                           \
    const ::search::Status s_ = (expr);                                                          \
    if (!s_.ok()) {                                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, s_.ToString().c_str()); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
