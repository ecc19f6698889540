#!/usr/bin/env bash
# Issue 47's no-regression check in one GPU-host call: both builds' shards (generated from the same seed by
# each build's own searchctl), the in-process table (2 runs a row, order flipping), then gpu and hybrid served
# through a real integrator at two rates each (2 runs a rate, rotating order). OLD and NEW are bundle folders
# (bin/ and lib/, from scripts/bundle.sh); output goes to $OUT (or ./defaults-out).
# usage: bench/scripts/defaults_one_call.sh OLD_BUNDLE NEW_BUNDLE [DOCS]   (DOCS default 12600000)
set -uo pipefail
old=$(cd "$1" && pwd); new=$(cd "$2" && pwd); docs=${3:-12600000}
out=${OUT:-./defaults-out}; mkdir -p "$out"
work=/dev/shm/gpu-bench
here=$(cd "$(dirname "$0")" && pwd)
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader; nproc; uptime; date -u
PARTS=none OLD=$old NEW=$new bash "$here/defaults_check.sh" "$docs" $work 2>&1 | tee "$out/generate.txt"
SECS=3 REPEATS=2 PARTS=inproc NODE_CPUS=0-15 OLD=$old NEW=$new \
  bash "$here/defaults_check.sh" "$docs" $work 2>&1 | tee "$out/inproc.txt"
SECS=3 REPEATS=2 RATES="24000 36000" SCHEDULERS=gpu PARTS=serve NODE_CPUS=0-7 CLIENT_CPUS=8-15 OLD=$old NEW=$new \
  bash "$here/defaults_check.sh" "$docs" $work 2>&1 | tee "$out/serve-gpu.txt"
SECS=3 REPEATS=2 RATES="32000 44000" SCHEDULERS=hybrid PARTS=serve NODE_CPUS=0-7 CLIENT_CPUS=8-15 OLD=$old NEW=$new \
  bash "$here/defaults_check.sh" "$docs" $work 2>&1 | tee "$out/serve-hybrid.txt"
grep -h -E '^(bench|gpu|hybrid) ' "$out/inproc.txt" "$out"/serve-*.txt | grep -E 'new/old|/ old'
uptime; date -u
