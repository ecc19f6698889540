// GpuExecutorMetrics: the GPU executor's metric families: the queries it handed to the CPU (in
// all, and by GpuFallbackReason), the queries a GPU node ran on the CPU engine because the GPU
// engine does not run their shape (by GpuUnsupportedReason), and its batches' CPU and wall time by
// GpuBatchPart, registered with their help texts on the registry it is given.
// Contract: registering on a registry that already has these families shares their series;
// SetBatchTimes takes running totals and never lowers a counter.
// Thread-safety: every member may be called from any thread (prometheus-cpp series are
// thread-safe; SetBatchTimes from one thread at a time, as a scrape hook is).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace search {

// Why the GPU executor handed a query to the CPU (search_gpu_fallbacks_total{reason}).
enum class GpuFallbackReason : uint8_t {
  kCudaError = 0,  // a CUDA runtime error (Unavailable)
  kOutOfMemory,    // device memory: the list cache or the engine's scratch (ResourceExhausted)
  kUnsupported,    // the engine does not run this query (too many terms, ...)
  kCorruption,     // the engine reported a corrupt block (the CPU rechecks)
  kOther,
};
inline constexpr size_t kNumGpuFallbackReasons = 5;
// "cuda_error", "out_of_memory", "unsupported", "corruption", "other".
std::string_view GpuFallbackReasonLabel(GpuFallbackReason r);

// Why a GPU node ran a query on the CPU engine from the start (search_node_gpu_unsupported_total
// {reason}): the GPU engine runs trees of terms and phrases and counts, within its program's slots.
enum class GpuUnsupportedReason : uint8_t {
  kPhrase = 0,  // its tree holds a phrase, and more term leaves and phrases than kGpuTreeSlots
};
inline constexpr size_t kNumGpuUnsupportedReasons = 1;
std::string_view GpuUnsupportedReasonLabel(GpuUnsupportedReason r);  // "phrase"

// The parts of a GPU executor batch's time (search_gpu_batch_{cpu_,}seconds_total{part}).
enum class GpuBatchPart : uint8_t { kPrepare, kAcquire, kEngine, kFinish };
inline constexpr size_t kNumGpuBatchParts = 4;
std::string_view GpuBatchPartLabel(GpuBatchPart p);  // "prepare", "acquire", "engine", "finish"

class GpuExecutorMetrics {
 public:
  explicit GpuExecutorMetrics(prometheus::Registry& registry);

  // One query handed to the CPU: search_gpu_fallbacks_total{reason} and search_fallback_cpu_total.
  void CountFallback(GpuFallbackReason reason);
  // One query a GPU node ran on the CPU engine: search_node_gpu_unsupported_total{reason}.
  void CountUnsupported(GpuUnsupportedReason reason);
  // Sets search_gpu_batch_cpu_seconds_total{part} and search_gpu_batch_seconds_total{part} (wall)
  // to these running totals.
  void SetBatchTimes(const std::array<double, kNumGpuBatchParts>& cpu_seconds,
                     const std::array<double, kNumGpuBatchParts>& wall_seconds);

 private:
  prometheus::Counter* fallback_cpu_ = nullptr;
  std::array<prometheus::Counter*, kNumGpuFallbackReasons> fallbacks_{};
  std::array<prometheus::Counter*, kNumGpuUnsupportedReasons> unsupported_{};
  std::array<prometheus::Counter*, kNumGpuBatchParts> batch_cpu_{}, batch_wall_{};
};

}  // namespace search
