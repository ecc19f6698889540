#!/usr/bin/env bash
# The GPU engine one query at a time (issue 52, goal 3: batch 1, warm, at 25.2M documents; `and` mean
# below 1 ms, `or` below 2 ms): in-process `searchctl bench --engine gpu --batch 1 --threads 1` on
# the synthetic shard (seed 1), per log and mode, each checked against the CPU engine on its first
# VERIFY queries. Logs (10,000 queries, seed 1): gov2 (bench_gpu.sh's shape) and default
# (gen-queries' defaults). One device call a host: generating 25.2M takes 150-240 s on 16 cores.
#
# usage: BUNDLE=DIR bench/scripts/gpu_latency.sh [DOCS] [WORK_DIR]
#   BUNDLE  bin/ and lib/ as scripts/bundle.sh makes them (a CUDA build's searchctl);  DOCS default
#   25200000;  WORK_DIR default /dev/shm/gpu-bench (the index is generated there unless it exists).
#   env: SECS (4), VERIFY (300), LOGS ("gov2 default"), MODES ("and or")
# Prints one markdown row per log and mode: mean, p50, p99 (us), queries, mismatches.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
b=${BUNDLE:?BUNDLE=bundle of a CUDA build}
ctl() { LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" "$@"; }

gpu_synthetic_start "$docs" "$work" || exit 1
rows=()
for log in ${LOGS:-gov2 default}; do
  q=$work/latency-$log.txt
  shape=$(log_shape "$log" "$docs") || exit 2
  # shellcheck disable=SC2086
  [ -f "$q" ] || ctl gen-queries --index "$idx" --count 10000 --out "$q" --seed 1 $shape >/dev/null 2>&1 || exit 1
  for mode in ${MODES:-and or}; do
    step "$log $mode"
    line=$(timeout 300 env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" --queries "$q" --k 10 \
      --seconds "${SECS:-4}" --warmup 1 --mode "$mode" --engine gpu --batch 1 --threads 1 --verify "${VERIFY:-300}" \
      2>"$work/latency.err")
    [ -n "$line" ] || { echo "gpu_latency: searchctl bench failed:" >&2; tail -3 "$work/latency.err" >&2; }
    echo "$line"
    rows+=("| $log | $mode | $(field "$line" mean_us) | $(field "$line" p50_us) | $(field "$line" p99_us) | $(field "$line" queries) | $(field "$line" verify_mismatches) |")
  done
done
step "summary (docs=$docs, GPU engine, batch 1, 1 thread)"
echo "| log | mode | mean us | p50 us | p99 us | queries | mismatches |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
