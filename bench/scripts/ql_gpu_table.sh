#!/usr/bin/env bash
# The query language on a GPU host: the GPU engine against the CPU engine, in-process `searchctl
# bench`, per search-benchmark-game category the GPU runs (term, intersection, union,
# intersection_union, negated: phrases need positions, which `searchctl generate` does not make)
# x command (top, topcount, count), on one synthetic GOV2-sized shard. The CPU engine runs on
# NODE_CPUS with one thread per core; the GPU engine batches 64 queries and checks the first 500
# of each file against the CPU engine (hits and counts: verify_mismatches).
# The category logs come from one gen-queries log (its default shape): its 1-term queries are the
# term log, its first two terms a and b make +a +b, a b, +a b and +a -b.
#
# usage: BUNDLE=DIR bench/scripts/ql_gpu_table.sh [DOCS] [WORK_DIR]
#   BUNDLE  bin/ and lib/ as scripts/bundle.sh makes them;  DOCS default 25200000;  WORK_DIR default
#   /dev/shm/gpu-bench.  env: SECS (4), NODE_CPUS (0-15), COMMANDS ("top topcount count"),
#   CATEGORIES (all five)
# Prints one markdown row per cell: category, command, CPU q/s, GPU q/s, GPU / CPU, mismatches.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
b=${BUNDLE:?BUNDLE=bundle of this build}
secs=${SECS:-4}
node_cpus=${NODE_CPUS:-0-15}
ctl() { LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" "$@"; }

gpu_machine
mkdir -p "$work"
idx=$work/synthetic-$docs
synthetic_shard "$docs" "$idx" || exit 1
qdir=$work/ql-$docs
if [ ! -s "$qdir/negated.txt" ]; then
  mkdir -p "$qdir"
  ctl gen-queries --index "$idx" --count 20000 --out "$qdir/log.txt" --seed 1 || exit 1
  awk 'NF == 1' "$qdir/log.txt" | head -2000 > "$qdir/term.txt"
  awk 'NF >= 2 && $1 != $2' "$qdir/log.txt" | head -2000 > "$qdir/pairs.txt"
  awk '{ print "+" $1 " +" $2 }' "$qdir/pairs.txt" > "$qdir/intersection.txt"
  awk '{ print $1 " " $2 }' "$qdir/pairs.txt" > "$qdir/union.txt"
  awk '{ print "+" $1 " " $2 }' "$qdir/pairs.txt" > "$qdir/intersection_union.txt"
  awk '{ print "+" $1 " -" $2 }' "$qdir/pairs.txt" > "$qdir/negated.txt"
fi
ncpu=$(taskset -c "$node_cpus" nproc)
echo "| category | command | CPU q/s ($ncpu threads) | GPU q/s (batch 64) | GPU / CPU | mismatches |"
echo "|---|---|---:|---:|---:|---:|"
for cat in ${CATEGORIES:-term intersection union intersection_union negated}; do
  for cmd in ${COMMANDS:-top topcount count}; do
    cpu=$(taskset -c "$node_cpus" env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" \
      --queries "$qdir/$cat.txt" --mode or --k 10 --command "$cmd" --seconds "$secs" --warmup 1 \
      --threads "$ncpu" 2>"$work/cpu.err")
    gpu=$(taskset -c "$node_cpus" env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" \
      --queries "$qdir/$cat.txt" --mode or --k 10 --command "$cmd" --seconds "$secs" --warmup 1 \
      --engine gpu --verify 500 2>"$work/gpu.err")
    [ -n "$cpu" ] || { echo "cpu $cat $cmd failed: $(tail -2 "$work/cpu.err")"; continue; }
    [ -n "$gpu" ] || { echo "gpu $cat $cmd failed: $(tail -2 "$work/gpu.err")"; continue; }
    python3 - "$cat" "$cmd" "$cpu" "$gpu" <<'EOF'
import json, sys
cat, cmd, c, g = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
print(f"| {cat} | {cmd} | {c['qps']:,.0f} | {g['qps']:,.0f} | {g['qps'] / c['qps']:.1f}x | {g.get('verify_mismatches', '-')} |")
EOF
  done
done
