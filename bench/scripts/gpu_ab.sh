#!/usr/bin/env bash
# Two builds of the GPU engine on one shard and the same logs, in turn: the same-shard A/B that an
# engine change needs before it lands (BENCHMARKS.md: "Land only if faster on two hosts"; run it on
# two fresh hosts, one call each, and report each host apart). Per mode and log, ROUNDS rounds of
# `searchctl bench --engine gpu --verify VERIFY` on NODE_CPUS, A's searchctl then B's, so drift
# over the call falls on both. The shard and the logs are gpu_shapes.sh's (seed 1), made with A's.
#
# usage: BUNDLE_A=DIR BUNDLE_B=DIR bench/scripts/gpu_ab.sh [DOCS] [WORK_DIR]
#   bundles as scripts/bundle.sh makes them (only bin/searchctl and lib/ are used);
#   DOCS default 25200000; WORK_DIR default /dev/shm/gpu-bench.
#   env: SECS (2), ROUNDS (2), NODE_CPUS (0-15), LOGS ("single df1 default gov2 long"),
#        MODES ("or and"), VERIFY (300)
# Prints every run ("RUN mode log A|B q/s mismatches postings-a-query"), then one markdown row per
# mode and log: A's and B's mean q/s, B / A - 1, and the mismatches of all runs.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
a=${BUNDLE_A:?BUNDLE_A=bundle of the old build}
bb=${BUNDLE_B:?BUNDLE_B=bundle of the new build}
secs=${SECS:-2}
rounds=${ROUNDS:-2}
node_cpus=${NODE_CPUS:-0-15}
ctl() { LD_LIBRARY_PATH="$a/lib" "$a/bin/searchctl" "$@"; }

gpu_synthetic_start "$docs" "$work" || exit 1
rows=()
for mode in ${MODES:-or and}; do
  for log in ${LOGS:-single df1 default gov2 long}; do
    q=$work/shape-$log.txt
    # shellcheck disable=SC2046
    [ -f "$q" ] || ctl gen-queries --index "$idx" --count 10000 --out "$q" --seed 1 $(log_shape "$log" "$docs") 2>/dev/null || exit 1
    step "$mode $log"
    sum_a=0 sum_b=0 mism=0
    for ((r = 0; r < rounds; ++r)); do
      for arm in A B; do
        dir=$a; [ "$arm" = B ] && dir=$bb
        out=$(taskset -c "$node_cpus" timeout 300 env LD_LIBRARY_PATH="$dir/lib" "$dir/bin/searchctl" bench --index "$idx" \
          --queries "$q" --k 10 --seconds "$secs" --warmup 1 --mode "$mode" --engine gpu --verify "${VERIFY:-300}" 2>/dev/null | tail -1)
        qps=$(field "$out" qps); x=$(field "$out" verify_mismatches)
        echo "RUN $mode $log $arm ${qps%.*} ${x:-missing} $(field "$out" postings_decoded_per_query | cut -d. -f1)"
        [ -n "$qps" ] || { echo "no answer from $arm's searchctl: $out" >&2; exit 1; }
        mism=$((mism + ${x:-1}))
        if [ "$arm" = A ]; then sum_a=$(awk -v s="$sum_a" -v v="$qps" 'BEGIN { print s + v }'); else sum_b=$(awk -v s="$sum_b" -v v="$qps" 'BEGIN { print s + v }'); fi
      done
    done
    rows+=("$(awk -v m="$mode" -v l="$log" -v a="$sum_a" -v b="$sum_b" -v n="$rounds" -v x="$mism" \
      'BEGIN { printf "| %s | %s | %d | %d | %+.1f%% | %d |", m, l, a / n, b / n, (a > 0 ? 100 * (b / a - 1) : 0), x }')")
    echo "ROW ${rows[-1]}"
  done
done
step "summary (docs=$docs, GPU engine, $rounds rounds of ${secs} s, on $node_cpus)"
echo "| mode | log | A q/s | B q/s | B / A - 1 | mismatches |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
