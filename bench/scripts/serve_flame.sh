#!/usr/bin/env bash
# Where the host time of the serving path goes (issue 52 goal 2): one node and one integrator of
# BUNDLE on a GPU host, loaded at RATE (Poisson, CONNECTIONS kept-alive connections) with the
# GOV2-shaped `and` log, while `perf record -a -g` samples every CPU for PERF_SECS. Then, for the
# node and the integrator each, a flame graph and the functions with the most samples, also as CPU
# microseconds per query (samples / FREQ / queries answered in the window).
#
# usage: BUNDLE=DIR bench/scripts/serve_flame.sh OUT_DIR [DOCS] [WORK_DIR]
#   the index WORK_DIR/synthetic-DOCS and log WORK_DIR/queries-DOCS.txt (defaults_check.sh makes
#   both); DOCS default 25200000, WORK_DIR /dev/shm/gpu-bench.
#   env: SCHED (gpu), RATE (40000), SECS (12: the load's length), PERF_SECS (4), FREQ (999),
#        NODE_CPUS (0-7), CLIENT_CPUS (8-15), CONNECTIONS (512), PERF (perf)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh
out=${1:?OUT_DIR}
docs=${2:-25200000}
work=${3:-/dev/shm/gpu-bench}
b=${BUNDLE:?BUNDLE=bundle of this build}
sched=${SCHED:-gpu} rate=${RATE:-40000} secs=${SECS:-12} psecs=${PERF_SECS:-4} freq=${FREQ:-999}
node_cpus=${NODE_CPUS:-0-7} client_cpus=${CLIENT_CPUS:-8-15} conns=${CONNECTIONS:-512} perf=${PERF:-perf}
mkdir -p "$out"
export LD_LIBRARY_PATH="$b/lib"
gpu_machine
taskset -c "$node_cpus" "$b/bin/search-node" --index "$work/synthetic-$docs/shard-0" --listen tcp://127.0.0.1:5791 \
  --metrics 127.0.0.1:9791 --scheduler "$sched" >"$out/node.out" 2>"$out/node.err" &
node=$!
for _ in $(seq 3000); do grep -q '"ready"' "$out/node.out" 2>/dev/null && break; kill -0 $node 2>/dev/null || break; sleep 0.1; done
taskset -c "$client_cpus" "$b/bin/search-integrator" --shards tcp://127.0.0.1:5791 --http 127.0.0.1:9792 \
  --metrics 127.0.0.1:9793 --cache-mb 0 --log-level warn >"$out/int.out" 2>"$out/int.err" &
integ=$!
for _ in $(seq 300); do curl -sf http://127.0.0.1:9792/health >/dev/null 2>&1 && break; sleep 0.1; done
load() { taskset -c "$client_cpus" "$b/bin/searchctl" loadgen --url http://127.0.0.1:9792 --queries "$work/queries-$docs.txt" \
  --mode and --deadline-ms 500 --connections "$conns" --rate "$1" --seconds "$2" --warmup 1 2>/dev/null; }
load 20000 2 >/dev/null
step "load $rate q/s for $secs s, perf for $psecs s in the middle"
load "$rate" "$secs" >"$out/load.json" &
lp=$!
sleep $(( (secs - psecs) / 2 + 1 ))
"$perf" record -F "$freq" -a -g -o "$out/perf.data" -- sleep "$psecs" 2>&1 | tail -1
wait $lp
cat "$out/load.json"
qps=$(field "$(cat "$out/load.json")" achieved_qps)
queries=$(awk -v q="$qps" -v s="$psecs" 'BEGIN { print q * s }')
for who in node:$node integrator:$integ; do
  step "${who%%:*}: pid ${who#*:}, $queries queries in the window"
  "$perf" script -i "$out/perf.data" --pid "${who#*:}" 2>/dev/null |
    python3 bench/scripts/flame.py "$out/${who%%:*}" --title "${who%%:*} ($sched, $rate q/s)" --per "$queries" --sample-us "$(awk -v f="$freq" 'BEGIN { print 1e6 / f }')" --top 30
done
kill $node $integ 2>/dev/null; wait 2>/dev/null
rm -f "$out/perf.data"
step "done"
