#!/usr/bin/env bash
# The GPU engine against the CPU engine on every query-log shape of issue 52, in-process
# `searchctl bench` on one synthetic GOV2-sized shard: per log and mode (and, or), the CPU engine on
# NODE_CPUS with one thread per core and the GPU engine at its default batch, which checks the first
# VERIFY queries against the CPU engine (verify_mismatches). The logs, 10,000 queries each, seed 1:
#   gov2     --lengths 0,27,33,40 --four-share 0.6 --df-exponent 0.62 --min-df <docs/25,000>
#            (as bench_gpu.sh and defaults_check.sh make it)
#   default  gen-queries' defaults (1-term queries included, df^0.8)
#   single   half 1-term queries: --lengths 50,20,15,15
#   long     5-6 terms: --lengths 0,0,0,100 --four-share 0
#   df1      --df-exponent 1.0
#   one      1-term queries only: --lengths 100,0,0,0 (not in the default LOGS: issue 52's family is the
#            five above; one-list queries are the GPU's single-round top blocks)
#   two      2-term queries only: --lengths 0,100,0,0 (not in the default LOGS either: where `or` trails
#            most, BENCHMARKS.md)
#
# usage: BUNDLE=DIR bench/scripts/gpu_shapes.sh [DOCS] [WORK_DIR]
#   BUNDLE  bin/ and lib/ as scripts/bundle.sh makes them;  DOCS default 25200000;  WORK_DIR default
#   /dev/shm/gpu-bench (the index is generated there unless it exists).
#   env: SECS (3), NODE_CPUS (0-15), LOGS ("gov2 default single long df1"), MODES ("and or"), VERIFY (500)
# Prints one markdown row per log and mode: CPU q/s, GPU q/s, GPU / CPU, mismatches.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
b=${BUNDLE:?BUNDLE=bundle of this build}
secs=${SECS:-3}
node_cpus=${NODE_CPUS:-0-15}
ctl() { LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" "$@"; }

gpu_synthetic_start "$docs" "$work" || exit 1
rows=()
for log in ${LOGS:-gov2 default single long df1}; do
  q=$work/shape-$log.txt
  # shellcheck disable=SC2046
  [ -f "$q" ] || ctl gen-queries --index "$idx" --count 10000 --out "$q" --seed 1 $(log_shape "$log" "$docs") 2>/dev/null || exit 1
  for mode in ${MODES:-and or}; do
    step "$log $mode"
    cpu=$(taskset -c "$node_cpus" timeout 300 env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" \
      --queries "$q" --k 10 --seconds "$secs" --warmup 1 --mode "$mode" --engine cpu 2>/dev/null)
    gpu=$(taskset -c "$node_cpus" timeout 300 env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" \
      --queries "$q" --k 10 --seconds "$secs" --warmup 1 --mode "$mode" --engine gpu --verify "${VERIFY:-500}" 2>/dev/null)
    echo "cpu $cpu"; echo "gpu $gpu"
    c=$(field "$cpu" qps); g=$(field "$gpu" qps)
    rows+=("$(awk -v l="$log" -v m="$mode" -v c="$c" -v g="$g" -v x="$(field "$gpu" verify_mismatches)" \
      'BEGIN { printf "| %s | %s | %d | %d | %.1fx | %s |", l, m, c, g, (c > 0 ? g / c : 0), x }')")
    echo "ROW ${rows[-1]}"
  done
done
step "summary (docs=$docs, CPU engine on $node_cpus)"
echo "| log | mode | CPU q/s | GPU q/s | GPU / CPU | mismatches |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
