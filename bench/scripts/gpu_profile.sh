#!/usr/bin/env bash
# Where the GPU engine's time goes on a GPU host (issue 52): in-process `searchctl bench` on one synthetic
# shard with gen-queries' default log, (1) the GPU engine at 1, 4, 8, 16 and 32 client threads with the SMs'
# busy share from `nvidia-smi dmon` (does it saturate the GPU or the host?), then (2) every kernel's time
# over the first 640 queries at one thread under Nsight Compute (`ncu --clock-control none --metrics
# gpu__time_duration.sum`), summed by kernel into OUT/kernels-MODE.txt (raw CSV gzipped beside it).
# usage: BUNDLE=DIR bench/scripts/gpu_profile.sh OUT_DIR [DOCS] [WORK_DIR]
#   DOCS default 12600000, WORK_DIR /dev/shm/gpu-bench; env: MODES ("or"), NCU (/usr/local/cuda/bin/ncu)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh
out=${1:?OUT_DIR}
docs=${2:-12600000}
work=${3:-/dev/shm/gpu-bench}
b=${BUNDLE:?BUNDLE=bundle of this build}
ncu=${NCU:-/usr/local/cuda/bin/ncu}
mkdir -p "$out" "$work"
ctl() { LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" "$@"; }
gpu_machine
idx=$work/synthetic-$docs
synthetic_shard "$docs" "$idx" || exit 1
log=$work/shape-default.txt
[ -f "$log" ] || ctl gen-queries --index "$idx" --count 10000 --out "$log" --seed 1 2>/dev/null || exit 1
head -640 "$log" >"$work/first640.txt"
for mode in ${MODES:-or}; do
  for t in 1 4 8 16 32; do
    (sleep 3; nvidia-smi dmon -s u -c 3 >"$work/dmon.txt") &
    r=$(taskset -c 0-15 env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" --queries "$log" \
      --k 10 --warmup 1 --seconds 3 --mode "$mode" --engine gpu --threads "$t" 2>/dev/null)
    wait
    echo "threads $t qps $(field "$r" qps) enqueue_us_per_call $(field "$r" gpu_enqueue_us_per_call)" \
      "wait_us_per_call $(field "$r" gpu_wait_us_per_call) sm_busy_pct $(awk '$1 !~ /^#/ { printf "%s ", $2 }' "$work/dmon.txt")"
    echo "$r" >>"$out/threads-$mode.jsonl"
  done | tee "$out/threads-$mode.txt"
  "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$work/ncu-$mode.csv" \
    env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" --queries "$work/first640.txt" --k 10 \
    --warmup 0 --seconds 1 --mode "$mode" --engine gpu --threads 1 >"$out/ncu-$mode-bench.txt" 2>&1
  gzip -c "$work/ncu-$mode.csv" >"$out/ncu-$mode.csv.gz"
  python3 - "$work/ncu-$mode.csv" <<'PY' | tee "$out/kernels-$mode.txt"
import collections, csv, re, sys
hdr, agg = None, collections.defaultdict(lambda: [0, 0.0])
for r in csv.reader(open(sys.argv[1])):
    if len(r) > 5 and r[0] == 'ID':
        hdr = r
        continue
    if hdr is None or len(r) != len(hdr):
        continue
    d = dict(zip(hdr, r))
    name = re.sub(r'\(.*', '', d['Kernel Name']).replace('search::', '')[:60]
    agg[name][0] += 1
    agg[name][1] += float(d['Metric Value'].replace(',', ''))
total = sum(v[1] for v in agg.values()) or 1
print(f"kernels {sum(v[0] for v in agg.values())}, {total / 1e6:.2f} ms in all")
for k, (n, ns) in sorted(agg.items(), key=lambda x: -x[1][1]):
    print(f"{k:60s} {n:6d} launches {ns / 1e6:8.2f} ms {100 * ns / total:5.1f}%")
PY
done
