#!/usr/bin/env bash
# Host CPU per query of the serving path, process by process: a local one-node cluster (a
# search-node with the CPU scheduler over a small synthetic shard, a search-integrator with its
# result cache off) driven by `searchctl loadgen` at a Poisson rate over CONNECTIONS kept-alive
# connections. Prints the node's and the integrator's CPU (their threads' time on a CPU, less the
# CPU homes' pollers) and the load generator's (user + system) per answered query, in microseconds
# of one core, and the load generator's summary line. With
# PERF=1 it also records the integrator with `perf record -g` (OUT_DIR/perf-integrator.data; the node
# with PERF_WHO=node).
# Where a GPU host's cores go at high rates (BENCHMARKS.md, serving cost) without the GPU host.
#
# usage: bench/scripts/serving_cost.sh [BUILD_DIR]      (default build)
# env: DOCS (200000), RATE (2000), SECONDS_PER_RUN (6), CONNECTIONS (64),
#      BASE_PORT (7800: node BASE+1, its metrics BASE+2, HTTP BASE, integrator metrics BASE+3),
#      OUT_DIR (/tmp/serving-cost: the index, query log and logs are kept there between runs),
#      INTEGRATOR_ARGS (extra search-integrator flags), NODE_ARGS (extra search-node flags),
#      LOADGEN_ARGS (extra searchctl loadgen flags), PERF (0; PERF_WHO=node records the node instead).
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/bench_lib.sh
build=${1:-build}
docs=${DOCS:-200000}
rate=${RATE:-2000}
secs=${SECONDS_PER_RUN:-6}
conns=${CONNECTIONS:-64}
base=${BASE_PORT:-7800}
out=${OUT_DIR:-/tmp/serving-cost}
ctl=$build/tools/searchctl/searchctl
for b in "$ctl" "$build/node/search-node" "$build/integrator/search-integrator"; do
  [ -x "$b" ] || { echo "serving_cost: $b not built" >&2; exit 2; }
done
mkdir -p "$out"
idx=$out/idx-$docs
if [ ! -f "$idx/manifest.json" ]; then
  step "generate --docs $docs"
  rm -rf "$idx"
  "$ctl" generate --docs "$docs" --out "$idx" --shards 1 --seed 1 --threads "$(nproc)" --quiet || exit 1
fi
qlog=$out/queries-$docs.txt
[ -f "$qlog" ] || "$ctl" gen-queries --index "$idx" --count 2000 --out "$qlog" --seed 1 --lengths 0,27,33,40 \
  --four-share 0.6 --min-df 8 --df-exponent 0.62 >/dev/null || exit 1

"$build/node/search-node" --index "$idx/shard-0" --listen "tcp://127.0.0.1:$((base + 1))" --scheduler cpu \
  --cache-mb 512 ${NODE_ARGS:-} --metrics "127.0.0.1:$((base + 2))" --log-level warn >"$out/node.out" 2>"$out/node.err" &
node_pid=$!
pids+=("$node_pid")
for _ in $(seq 300); do grep -q '"ready"' "$out/node.out" 2>/dev/null && break; sleep 0.1; done
grep -q '"ready"' "$out/node.out" || { echo "serving_cost: the node did not start:" >&2; cat "$out/node.err" >&2; exit 1; }
"$build/integrator/search-integrator" --shards "tcp://127.0.0.1:$((base + 1))" --http "127.0.0.1:$base" --cache-mb 0 \
  --timeout-ms 500 --metrics "127.0.0.1:$((base + 3))" --log-level warn \
  ${INTEGRATOR_ARGS:-} >"$out/integrator.out" 2>"$out/integrator.err" &
int_pid=$!
pids+=("$int_pid")
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$base/health" >/dev/null 2>&1 && break; sleep 0.1; done

loadgen() {  # seconds
  "$ctl" loadgen --url "http://127.0.0.1:$base" --queries "$qlog" --mode and --rate "$rate" --seconds "$1" \
    --warmup 0 --deadline-ms 500 --connections "$conns" ${LOADGEN_ARGS:-}
}
step "warm-up: 2 s at $rate q/s"
loadgen 2 >/dev/null || { echo "serving_cost: the warm-up failed" >&2; exit 1; }
n0=$(cpu_ns "$node_pid") i0=$(cpu_ns "$int_pid")
perf_pid=
if [ "${PERF:-0}" = 1 ]; then
  perf_who=${PERF_WHO:-integrator}
  perf_target=$int_pid
  [ "$perf_who" = node ] && perf_target=$node_pid
  perf record -F 999 -g -p "$perf_target" -o "$out/perf-$perf_who.data" -- sleep "$secs" >/dev/null 2>&1 &
  perf_pid=$!
fi
step "measured: $secs s at $rate q/s over $conns connections"
line=$( { TIMEFORMAT='loadgen-cpu-seconds %U %S'; time loadgen "$secs"; } 2>"$out/loadgen.err")
n1=$(cpu_ns "$node_pid") i1=$(cpu_ns "$int_pid")
[ -n "$perf_pid" ] && wait "$perf_pid"
echo "$line"
queries=$(field "$line" queries)
[ "${queries:-0}" -gt 0 ] || { echo "serving_cost: no query was answered" >&2; exit 1; }
lg=$(awk '/^loadgen-cpu-seconds/ { print $2 + $3 }' "$out/loadgen.err" | tail -1)
awk -v n=$((n1 - n0)) -v i=$((i1 - i0)) -v lg="${lg:-0}" -v q="$queries" -v c="$conns" -v r="$rate" 'BEGIN {
  printf "serving cost at %d q/s, %d connections (us of CPU a query): node %.1f, integrator %.1f, loadgen %.1f\n",
    r, c, n / 1e3 / q, i / 1e3 / q, lg * 1e6 / q }'
