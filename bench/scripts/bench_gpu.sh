#!/usr/bin/env bash
# The GPU engine at GOV2 scale (issue 5), in one command on the GPU host: decode and intersection
# kernel benchmarks, then a synthetic 25.2M-document shard with its GOV2-shaped query log
# (as bench/scripts/bench_scale.sh makes them) and `searchctl bench` per mode: the CPU engine on every
# core, the GPU engine with the lists resident in GPU memory (warm cache), and with every batch
# starting from an empty GPU cache (lists copied over PCIe). Nothing is downloaded.
#
# usage: bench/scripts/bench_gpu.sh [DOCS] [WORK_DIR]
#   DOCS      documents (default 25200000)
#   WORK_DIR  where the index and the query log go (default /dev/shm/gpu-bench: RAM, ~10.5 GB)
# env: BUNDLE (binaries and libraries from scripts/device-check.sh prepare; default .bundle),
#      SECONDS_PER_RUN (5), WARMUP (2), THREADS (nproc; CPU bench threads), GPU_THREADS (16: client
#      threads, one stream each), BATCHES ("1 32": GPU batch sizes), MODES ("and or andor"),
#      BENCH_TIMEOUT (seconds per bench run, default SECONDS_PER_RUN + WARMUP + 90),
#      GPU_ARGS (extra flags for the GPU bench lines, e.g. --tuning gpu-or-pruned-divisor=2),
#      KERNELS=0 skips the kernel benchmarks, CPU=0 skips the CPU rows, KEEP=1 keeps the index,
#      VERIFY (1000: queries each warm GPU run checks against the CPU engine afterwards; 0: none).
#      Rows other than --cold answer every query once first (bench's default); the list caches are
#      bench's default size (every list where they fit in half of MemAvailable).
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
bundle=${BUNDLE:-.bundle}
secs=${SECONDS_PER_RUN:-5}
warmup=${WARMUP:-2}
threads=${THREADS:-$(nproc)}
gpu_threads=${GPU_THREADS:-16}
batches=${BATCHES:-1 32}
modes=${MODES:-and or andor}
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ctl=$bundle/bin/searchctl

step "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1), $(date -u +%Y-%m-%dT%H:%MZ)"
if [ "${KERNELS:-1}" != 0 ]; then
  step "decode_bench"
  "$bundle/bin/gpu_decode_bench" ${DECODE_ARGS:---default-only}
  step "intersect_bench"
  "$bundle/bin/gpu_intersect_bench" ${INTERSECT_ARGS:-}
fi

mkdir -p "$work"
idx=$work/synthetic-$docs
qlog=$work/queries-$docs.txt
min_df=$(gov2_min_df "$docs")
if [ ! -f "$idx/manifest.json" ]; then
  step "generate --docs $docs -> $idx"
  rm -rf "$idx"
  /usr/bin/time -f "generate: %e s wall, %U s user, %S s sys, %M KiB max RSS" \
    "$ctl" generate --docs "$docs" --out "$idx" --shards 1 --seed 1 --threads "$threads" --quiet || exit 1
fi
[ -f "$qlog" ] || "$ctl" gen-queries --index "$idx" --count 10000 --out "$qlog" --seed 1 \
  --lengths 0,27,33,40 --four-share 0.6 --min-df "$min_df" --df-exponent 0.62 || exit 1

results=()
bench() {
  step "bench $*"
  local line
  line=$(timeout "${BENCH_TIMEOUT:-$((secs + warmup + 90))}" "$ctl" bench --index "$idx" --queries "$qlog" --k 10 --seconds "$secs" --warmup "$warmup" \
    "$@")
  echo "$line"
  [ -n "$line" ] && results+=("$line")
}
for mode in $modes; do
  [ "${CPU:-1}" != 0 ] && bench --mode "$mode" --threads "$threads" --engine cpu
  for b in $batches; do
    bench --mode "$mode" --threads "$gpu_threads" --engine gpu --batch "$b" --verify "${VERIFY:-1000}" ${GPU_ARGS:-}
  done
  bench --mode "$mode" --threads "$gpu_threads" --engine gpu --batch 1 --cold ${GPU_ARGS:-}
done

step "summary (docs=$docs)"
# enq/wait: the GPU engine's host time planning and launching, and waiting for the stream, per call.
printf '%-6s %-4s %5s %5s %7s %10s %10s %10s %10s %10s %12s %8s %8s\n' mode eng batch cold threads qps mean_us p50_us p95_us p99_us postings/q enq_us wait_us
for line in "${results[@]}"; do
  printf '%-6s %-4s %5s %5s %7s %10.1f %10.0f %10.0f %10.0f %10.0f %12.0f %8.0f %8.0f\n' "$(field "$line" mode)" \
    "$(field "$line" engine)" "$(field "$line" batch)" "$(field "$line" cold)" "$(field "$line" threads)" \
    "$(field "$line" qps)" "$(field "$line" mean_us)" "$(field "$line" p50_us)" "$(field "$line" p95_us)" \
    "$(field "$line" p99_us)" "$(field "$line" postings_decoded_per_query)" \
    "$(field "$line" gpu_enqueue_us_per_call)" "$(field "$line" gpu_wait_us_per_call)"
done
[ "${KEEP:-0}" = 1 ] || rm -rf "$work"
step "done"
