#include "node/gpu_executor_metrics.hpp"

#include <string>

#include "metrics/families.hpp"
#include "metrics/metrics.hpp"  // SetCounterTo

namespace search {
namespace {

// The GPU executor's metric families (names, help texts; labels in the comments). Dashboards,
// alerts and tests refer to these names.
using families::Family;
constexpr Family kFallbackCpu{"search_fallback_cpu_total", "Queries the GPU engine handed back to the CPU executor."};
// Labels: reason (GpuFallbackReason labels).
constexpr Family kGpuFallbacks{"search_gpu_fallbacks_total",
                               "Queries the GPU executor could not run and reran on the CPU, by reason."};
// Labels: reason (GpuUnsupportedReason labels).
constexpr Family kGpuUnsupported{"search_node_gpu_unsupported_total",
                                 "Queries a GPU node ran on the CPU engine because the GPU engine does not run "
                                 "their shape (phrase: a query tree with a phrase and more distinct terms and "
                                 "phrases than the GPU program's 32 slots), by reason."};
// Labels: part (GpuBatchPart labels).
constexpr Family kGpuBatchCpu{
    "search_gpu_batch_cpu_seconds_total",
    "CPU time of the GPU executor's batches on their calling threads, by part: prepare (term metadata and "
    "main-memory lists), acquire (pinning the lists in the GPU list cache, copies of those not resident), "
    "engine (planning, uploads, launches, waits that do not sleep, reading the answers back) and finish "
    "(synchronizing the stream, building the answers)."};
constexpr Family kGpuBatchWall{
    "search_gpu_batch_seconds_total",
    "Wall time of the GPU executor's batches on their calling threads, by the parts of "
    "search_gpu_batch_cpu_seconds_total; beyond their CPU time: device waits, lock waits, time off the core."};

}  // namespace

std::string_view GpuFallbackReasonLabel(GpuFallbackReason r) {
  static constexpr std::array<std::string_view, kNumGpuFallbackReasons> kNames = {"cuda_error", "out_of_memory",
                                                                                  "unsupported", "corruption", "other"};
  const auto i = static_cast<size_t>(r);
  return i < kNames.size() ? kNames[i] : "other";
}

std::string_view GpuUnsupportedReasonLabel(GpuUnsupportedReason r) {
  static constexpr std::array<std::string_view, kNumGpuUnsupportedReasons> kNames = {"phrase"};
  const auto i = static_cast<size_t>(r);
  return i < kNames.size() ? kNames[i] : "phrase";
}

std::string_view GpuBatchPartLabel(GpuBatchPart p) {
  static constexpr std::array<std::string_view, kNumGpuBatchParts> kNames = {"prepare", "acquire", "engine", "finish"};
  const auto i = static_cast<size_t>(p);
  return i < kNames.size() ? kNames[i] : "engine";
}

GpuExecutorMetrics::GpuExecutorMetrics(prometheus::Registry& r) {
  fallback_cpu_ = &CounterFamily(r, kFallbackCpu).Add({});
  auto& fallbacks = CounterFamily(r, kGpuFallbacks);
  for (size_t i = 0; i < kNumGpuFallbackReasons; ++i)
    fallbacks_[i] =
        &fallbacks.Add({{"reason", std::string(GpuFallbackReasonLabel(static_cast<GpuFallbackReason>(i)))}});
  auto& unsupported = CounterFamily(r, kGpuUnsupported);
  for (size_t i = 0; i < kNumGpuUnsupportedReasons; ++i)
    unsupported_[i] =
        &unsupported.Add({{"reason", std::string(GpuUnsupportedReasonLabel(static_cast<GpuUnsupportedReason>(i)))}});
  auto& batch_cpu = CounterFamily(r, kGpuBatchCpu);
  auto& batch_wall = CounterFamily(r, kGpuBatchWall);
  for (size_t i = 0; i < kNumGpuBatchParts; ++i) {
    const std::string part(GpuBatchPartLabel(static_cast<GpuBatchPart>(i)));
    batch_cpu_[i] = &batch_cpu.Add({{"part", part}});
    batch_wall_[i] = &batch_wall.Add({{"part", part}});
  }
}

void GpuExecutorMetrics::CountFallback(GpuFallbackReason reason) {
  fallbacks_[static_cast<size_t>(reason)]->Increment();
  fallback_cpu_->Increment();
}

void GpuExecutorMetrics::CountUnsupported(GpuUnsupportedReason reason) {
  unsupported_[static_cast<size_t>(reason)]->Increment();
}

void GpuExecutorMetrics::SetBatchTimes(const std::array<double, kNumGpuBatchParts>& cpu_seconds,
                                       const std::array<double, kNumGpuBatchParts>& wall_seconds) {
  for (size_t i = 0; i < kNumGpuBatchParts; ++i) {
    SetCounterTo(*batch_cpu_[i], cpu_seconds[i]);
    SetCounterTo(*batch_wall_[i], wall_seconds[i]);
  }
}

}  // namespace search
