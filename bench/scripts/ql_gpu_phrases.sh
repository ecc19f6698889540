#!/usr/bin/env bash
# Phrase queries on a GPU host: the GPU engine against the CPU engine, in-process `searchctl bench`
# over an index WITH positions built from a JSON-lines corpus, per command (top, topcount, count).
# The CPU engine runs on NODE_CPUS with one thread per core; the GPU engine batches 64 queries and
# checks the first VERIFY queries against the CPU engine (hits, float scores and counts:
# verify_mismatches).
# usage: BUNDLE=DIR bench/scripts/ql_gpu_phrases.sh CORPUS.jsonl QUERIES.txt [WORK_DIR]
#   BUNDLE  bin/ and lib/ as scripts/bundle.sh makes them; QUERIES one query a line (e.g.
#   gen_ql_queries.py's phrase.txt); WORK_DIR default /dev/shm/gpu-phrases.
#   env: SECS (3), NODE_CPUS (0-15), COMMANDS ("top topcount count"), VERIFY (500)
# Prints one markdown row per command: CPU q/s, GPU q/s, GPU / CPU, mismatches.
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/bench_lib.sh

corpus=${1:?CORPUS.jsonl}
queries=${2:?QUERIES.txt}
work=${3:-/dev/shm/gpu-phrases}
b=${BUNDLE:?BUNDLE=bundle of this build}
secs=${SECS:-3}
node_cpus=${NODE_CPUS:-0-15}
ctl() { LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" "$@"; }

gpu_machine
mkdir -p "$work"
idx=$work/index
if [ ! -f "$idx/manifest.json" ]; then
  step "index $corpus"
  ctl index --input "$corpus" --out "$idx" --shards 1 --force || exit 1
fi
ncpu=$(taskset -c "$node_cpus" nproc)
echo "| command | CPU q/s ($ncpu threads) | GPU q/s (batch 64) | GPU / CPU | mismatches | matches per query |"
echo "|---|---:|---:|---:|---:|---:|"
for cmd in ${COMMANDS:-top topcount count}; do
  cpu=$(taskset -c "$node_cpus" env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" \
    --queries "$queries" --mode or --k 10 --command "$cmd" --seconds "$secs" --warmup 1 \
    --threads "$ncpu" 2>"$work/cpu.err")
  gpu=$(taskset -c "$node_cpus" env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" \
    --queries "$queries" --mode or --k 10 --command "$cmd" --seconds "$secs" --warmup 1 \
    --engine gpu --verify "${VERIFY:-500}" 2>"$work/gpu.err")
  [ -n "$cpu" ] || { echo "cpu $cmd failed: $(tail -2 "$work/cpu.err")"; continue; }
  [ -n "$gpu" ] || { echo "gpu $cmd failed: $(tail -2 "$work/gpu.err")"; continue; }
  echo "$cpu" >>"$work/raw.jsonl"
  echo "$gpu" >>"$work/raw.jsonl"
  python3 - "$cmd" "$cpu" "$gpu" <<'PY'
import json, sys
cmd, c, g = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
total = c.get("total_per_query")
print(f"| {cmd} | {c['qps']:,.0f} | {g['qps']:,.0f} | {g['qps'] / c['qps']:.1f}x | {g.get('verify_mismatches', '-')} |"
      f" {'' if total is None else f'{total:,.0f}'} |")
PY
done
