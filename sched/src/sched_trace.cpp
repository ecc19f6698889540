#include "sched/sched_trace.hpp"

#include <cerrno>
#include <cstring>

#include "sched/sched_task.hpp"

namespace search {
const char* SchedTrace::Header() {
  return "t_us,id,mode,terms,shortest,second,total,nonresident_bytes,pred_cpu_us,pred_gpu_us,queue,cheap,balanced,"
         "stolen,migrated,retried,ran_on,wait_us,run_us,model_us,gpu_batch,ok";
}

Result<std::unique_ptr<SchedTrace>> SchedTrace::Open(const std::string& path, uint64_t every, uint64_t max_lines) {
  if (every == 0) return Status::InvalidArgument("sched trace: every must be at least 1");
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return Status::IOError("sched trace: cannot create " + path + ": " + std::strerror(errno));
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  std::fprintf(f, "%s\n", Header());
  return std::unique_ptr<SchedTrace>(new SchedTrace(f, every, max_lines));
}

SchedTrace::SchedTrace(std::FILE* f, uint64_t every, uint64_t max_lines)
    : f_(f), every_(every), max_lines_(max_lines), opened_(SchedClock::now()) {}

SchedTrace::~SchedTrace() {
  std::lock_guard<std::mutex> lock(mu_);
  if (f_ != nullptr) std::fclose(f_);
  f_ = nullptr;
}

void SchedTrace::Record(const SchedTask& task, Unit ran_on, double model_us) {
  if (seen_.fetch_add(1, std::memory_order_relaxed) % every_ != 0) return;  // unsampled: no lock, no clock
  const double t_us = std::chrono::duration<double, std::micro>(SchedClock::now() - opened_).count();
  std::lock_guard<std::mutex> lock(mu_);
  if (f_ == nullptr || recorded_ >= max_lines_) return;
  const SchedJob& j = task.job;
  const QueryFeatures& q = task.features;
  const std::string_view mode = QueryModeName(q.mode);
  std::fprintf(f_, "%.0f,%llu,%.*s,%u,%llu,%llu,%llu,%llu,%.1f,%.1f,%s,%d,%d,%d,%d,%d,%s,%.1f,%.1f,%.1f,%u,%d\n", t_us,
               static_cast<unsigned long long>(j.id), static_cast<int>(mode.size()), mode.data(), q.terms,
               static_cast<unsigned long long>(q.shortest), static_cast<unsigned long long>(q.second),
               static_cast<unsigned long long>(q.total), static_cast<unsigned long long>(q.nonresident_bytes),
               j.cpu_us, j.gpu_us, SchedQueueName(j.queue), j.cheap ? 1 : 0, j.balanced ? 1 : 0, task.stolen ? 1 : 0,
               task.migrated ? 1 : 0, task.retried ? 1 : 0, ran_on == Unit::kGpu ? "gpu" : "cpu", task.wait_us,
               task.run_us, model_us, task.gpu_batch, task.status.ok() ? 1 : 0);
  ++recorded_;
}

uint64_t SchedTrace::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recorded_;
}

}  // namespace search
