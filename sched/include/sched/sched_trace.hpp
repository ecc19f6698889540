// SchedTrace: the scheduler's decisions, job by job, to a CSV file (search-node --tuning trace=FILE):
// for every every-th finished job its features, the cost model's predictions, the queue the policy
// chose and why (cheap, moved by the balance rule), where it ran, how long it waited and ran, and
// the time the model learned from it. The offline tools (bench/scripts/hybrid_split.py, bench/sched's
// sched_sim) say how many queries the CPU could take; this says which ones the node gave it and
// how far its predictions were off. Columns (Header): t_us since the trace opened, id
// (the scheduler's job id: unique among the jobs in flight, not over the run), the query's mode
// and features, pred_cpu_us and pred_gpu_us (the predictions the policy placed it by), queue
// (cpu|gpu|flexible, its last), cheap, balanced, stolen, migrated, retried (0|1), ran_on, wait_us,
// run_us, model_us (what the model learned from it; -1: nothing), gpu_batch (jobs in its last GPU
// batch), ok (0|1).
// Thread-safe: Record may be called from any thread at once; lines are whole.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.hpp"
#include "sched/sched_policy.hpp"

namespace search {

struct SchedTask;

class SchedTrace {
 public:
  // The CSV header (Record's columns).
  static const char* Header();
  // Creates (truncates) `path` and writes the header. every >= 1: one job in `every` is recorded;
  // max_lines: none past that many (a bound on the file, about 150 bytes a line).
  static Result<std::unique_ptr<SchedTrace>> Open(const std::string& path, uint64_t every = 1,
                                                  uint64_t max_lines = 2000000);
  ~SchedTrace();  // flushes and closes
  SchedTrace(const SchedTrace&) = delete;
  SchedTrace& operator=(const SchedTrace&) = delete;

  // The finished task (before it is answered): ran_on, its run time and model_us, the sample the
  // model learned from it (< 0: none).
  void Record(const SchedTask& task, Unit ran_on, double model_us);
  uint64_t recorded() const;

 private:
  SchedTrace(std::FILE* f, uint64_t every, uint64_t max_lines);
  mutable std::mutex mu_;
  std::FILE* f_;                 // GUARDED_BY(mu_)
  const uint64_t every_, max_lines_;
  std::atomic<uint64_t> seen_{0};  // finished jobs offered; only every every_-th takes the lock
  uint64_t recorded_ = 0;        // GUARDED_BY(mu_)
  const SchedTime opened_;
};

}  // namespace search
