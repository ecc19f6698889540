#!/usr/bin/env bash
# One device call of the Fig. 7 work (issue 6) on a GPU host with two or more GPUs: refuse a noisy
# host, run the GPU tests on the second GPU beside the index generation, then the Fig. 7 runs
# (bench/scripts/bench_hybrid_runs.sh) on the first, and leave what should come back in OUT.
#
# usage: RUNS_TEXT='LABEL|MODES|NODE FLAGS|SETTINGS
#                   ...' OUT=DIR bench/scripts/fig7_device_call.sh
#   (the device tool: run it in the repository root with .bundle carried; OUT=$OUT)
# env: RUNS_TEXT (required: bench_hybrid_runs.sh's runs, one a line), OUT (default fig7-call),
#      SPR (seconds measured a step, default 10: near hybrid's knee 3 s steps read p99s that 6 and
#      10 s steps at the same rate did not hold, BENCHMARKS.md, Fig. 7), WU (warm-up seconds, 2),
#      BUDGET (seconds for the runs, 400), STEAL_GATE (the most VM steal, in percent, over 4 s with every CPU busy before
#      anything starts; default 1.0; FORCE=1 skips the check), MAX_STEAL_PCT (bench_hybrid.sh's, per
#      step; default 1.5), PIN (default node:16), LOADGEN_PIN (bench_hybrid_runs.sh's; default none),
#      TESTS (default "engine_test gpu_executor_adapter_test": .bundle/bin binaries run on GPU 1),
#      REPEATS (bench_hybrid_runs.sh's: RUNS_TEXT's runs N times over, interleaved; the tables
#      pool each rate's readings into their median p99).
# Writes OUT/tests.txt (each test's exit status) and its logs, OUT/runs.log, OUT/fig7.csv,
# OUT/fig7.md and OUT/r.tgz (every run's files but the traces), and OUT/diag.txt: with TRACE=1
# bench/scripts/loadgen_waits.py over every step's trace, with STEP_HOOK=bench/scripts/step_net_hook.sh
# bench/scripts/net_delta.py for each step (connections opened). Exit status 3: a noisy host.
set -u
cd "$(dirname "$0")/../.." || exit 1
: "${RUNS_TEXT:?RUNS_TEXT is required (bench_hybrid_runs.sh runs, one a line)}"
out=${OUT:-fig7-call}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# VM steal with every CPU busy: a host that steals now will steal during the sweep.
for _ in $(seq "$(nproc)"); do timeout 4 sh -c 'while :; do :; done' & done
read -r _ a1 a2 a3 a4 a5 a6 a7 a8 _ </proc/stat
sleep 4
wait
read -r _ b1 b2 b3 b4 b5 b6 b7 b8 _ </proc/stat
steal=$(awk -v t=$(((b1 + b2 + b3 + b4 + b5 + b6 + b7 + b8) - (a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8))) -v s=$((b8 - a8)) \
  'BEGIN { printf "%.2f", 100 * s / (t > 0 ? t : 1) }')
echo "host steal over 4 s: $steal%"
if [ "${FORCE:-0}" != 1 ] && awk -v g="${STEAL_GATE:-1.0}" -v s="$steal" 'BEGIN { exit !(s > g) }'; then
  echo "NOISY HOST: stopping"
  exit 3
fi
nvidia-smi -L
lscpu | grep -E "Model name|^CPU\(s\)"
date -u +%FT%TZ
: >"$out/tests.txt"
(for t in ${TESTS:-engine_test gpu_executor_adapter_test}; do
  [ -x ".bundle/bin/$t" ] || { echo "$t missing" >>"$out/tests.txt"; continue; }
  CUDA_VISIBLE_DEVICES=1 timeout 200 ".bundle/bin/$t" --gtest_brief=1 >"$out/$t.log" 2>&1
  echo "$t rc $?" >>"$out/tests.txt"
done) &
tests_pid=$!
runs=$(mktemp)
printf '%s\n' "$RUNS_TEXT" >"$runs"
work=/dev/shm/gpu-bench
# A warm host keeps the index in $work for the next call (no generation); an earlier call's runs
# would be read again into this call's fig7.csv, diag.txt and r.tgz.
rm -rf "$work/runs"
MAX_STEAL_PCT=${MAX_STEAL_PCT:-1.5} PIN=${PIN:-node:16} NODE_ARGS="${NODE_ARGS:-}" \
  SECONDS_PER_RATE=${SPR:-10} WARMUP=${WU:-2} BUDGET_S=${BUDGET:-400} OUT_DIR="$work/runs" \
  bench/scripts/bench_hybrid_runs.sh "$runs" 25200000 "$work" >"$out/runs.log" 2>&1
wait "$tests_pid"
rm -f "$runs"
cat "$out/tests.txt"
tail -40 "$out/runs.log"
cp "$work/runs/fig7.csv" "$work/runs/fig7.md" "$out/" 2>/dev/null
# TRACE=1: each step's bursts of waiting arrivals and the load generator's own lag (the traces stay
# on the device); STEP_HOOK=bench/scripts/step_net_hook.sh: each step's reconnects and retransmits.
# One file (the device returns at most 8).
{
  traces=$(find "$work/runs" -name 'trace-*.csv' 2>/dev/null | sort -V)
  [ -n "$traces" ] && python3 bench/scripts/loadgen_waits.py $traces
  for before in $(find "$work/runs" -name 'net-*.0' 2>/dev/null | sort -V); do
    echo "== ${before#"$work"/runs/}"
    python3 bench/scripts/net_delta.py "$before" "${before%.0}.1" --match 'Tcp:(ActiveOpens|RetransSegs)|ListenOverflows'
  done
} >"$out/diag.txt" 2>&1
[ -s "$out/diag.txt" ] || rm -f "$out/diag.txt"
tar czf "$out/r.tgz" --exclude='trace-*' -C "$work" runs
date -u +%FT%TZ
