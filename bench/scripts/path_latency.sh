#!/usr/bin/env bash
# The serving path's own latency at low load (issue 52, goal 4): one shard of a corpus, served by
# a search-node (CPU engine) behind a search-integrator with its result cache off, driven by
# `searchctl loadgen` over CONNECTIONS kept-alive connections at each of RATES (Poisson), after a
# pass over the whole query log (the node's list cache warm, as `searchctl bench`'s is). Prints,
# per mode, the in-process p50 (`searchctl bench --threads 1` on the same shard and queries),
# then per rate the served p50 / p99 and the served p50 minus the in-process p50 (goal: within
# 100 us at every rate from 100 q/s to the knee), and where a query's time went: the
# integrator's phases (search_request_phase_seconds on its /metrics, means over the step): parse
# (HTTP and search parameters), to_lane (the hand-off to a fan-out lane), then the shard's round
# trip as node_queue, engine (the node's own times, on one round in 8) and transport (the rest:
# ZeroMQ's I/O threads on both sides, TCP, the node's I/O loop), to_loop (the hand-back to the
# HTTP loop) and answer (merge, JSON, the write). What the phases leave out of the p50 is the
# load generator's side and the TCP hops between it and the integrator.
#
# usage: bench/scripts/path_latency.sh [BUILD_DIR]   (default build; a bundle dir from
#        scripts/bundle.sh works too: DIR/bin, DIR/lib)
# env: JSONL (data/gcide.jsonl; made by scripts/demo.sh's converter when missing), RATES
#      ("100 200 500 1000 2000 5000 10000"), MODES ("and or"), SECS (5 a step), CONNECTIONS (16),
#      OUT_DIR (/tmp/path-latency: the index and query log are kept there), BASE_PORT (8300),
#      NODE_ARGS, INTEGRATOR_ARGS (extra flags).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh
build=${1:-build}
if [ -x "$build/bin/searchctl" ]; then
  export LD_LIBRARY_PATH=$(cd "$build" && pwd)/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  ctl=$build/bin/searchctl node=$build/bin/search-node integ=$build/bin/search-integrator
else
  ctl=$build/tools/searchctl/searchctl node=$build/node/search-node integ=$build/integrator/search-integrator
fi
for b in "$ctl" "$node" "$integ"; do [ -x "$b" ] || { echo "path_latency: $b not built" >&2; exit 2; }; done
out=${OUT_DIR:-/tmp/path-latency}
base=${BASE_PORT:-8300}
secs=${SECS:-5}
conns=${CONNECTIONS:-16}
read -ra rates <<<"${RATES:-100 200 500 1000 2000 5000 10000}"
read -ra modes <<<"${MODES:-and or}"
jsonl=${JSONL:-data/gcide.jsonl}
mkdir -p "$out"
step "$(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ! -s "$jsonl" ]; then
  step "converting GCIDE into $jsonl"
  python3 scripts/gcide_to_jsonl.py "$jsonl" || exit 1
fi
idx=$out/idx
if [ ! -f "$idx/manifest.json" ]; then
  step "index $jsonl (1 shard)"
  "$ctl" index --input "$jsonl" --out "$idx" --shards 1 --force --quiet || exit 1
fi
qlog=$out/queries.txt
[ -s "$qlog" ] || "$ctl" gen-queries --index "$idx" --count 2000 --out "$qlog" --seed 1 >/dev/null 2>&1 || exit 1

declare -A inproc
for m in "${modes[@]}"; do
  line=$("$ctl" bench --index "$idx" --queries "$qlog" --mode "$m" --threads 1 --seconds 3 2>/dev/null | tail -1)
  inproc[$m]=$(field "$line" p50_us)
  step "in-process $m: p50 ${inproc[$m]} us, mean $(field "$line" mean_us) us (searchctl bench --threads 1)"
done

"$node" --index "$idx/shard-0" --listen "tcp://127.0.0.1:$((base + 1))" --scheduler cpu --metrics "127.0.0.1:$((base + 2))" \
  --log-level warn ${NODE_ARGS:-} >"$out/node.out" 2>"$out/node.err" &
pids+=($!)
for _ in $(seq 300); do grep -q '"ready"' "$out/node.out" 2>/dev/null && break; sleep 0.1; done
grep -q '"ready"' "$out/node.out" || { echo "path_latency: the node did not start:" >&2; cat "$out/node.err" >&2; exit 1; }
"$integ" --shards "tcp://127.0.0.1:$((base + 1))" --http "127.0.0.1:$base" --metrics "127.0.0.1:$((base + 3))" \
  --cache-mb 0 --log-level warn ${INTEGRATOR_ARGS:-} >"$out/integrator.out" 2>"$out/integrator.err" &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$base/health" >/dev/null 2>&1 && break; sleep 0.1; done

# phases: the integrator's search_request_phase_seconds sums and counts, by phase
phases() { curl -s "http://127.0.0.1:$((base + 3))/metrics" | awk '/^search_request_phase_seconds_(sum|count)\{/ {
  match($0, /phase="[^"]*"/); p = substr($0, RSTART + 7, RLENGTH - 8); kind = ($0 ~ /_sum\{/) ? "s" : "c"; print p, kind, $NF }'; }
loadgen() {  # MODE RATE SECONDS WARMUP
  "$ctl" loadgen --url "http://127.0.0.1:$base" --queries "$qlog" --mode "$1" --rate "$2" --seconds "$3" --warmup "$4" \
    --connections "$conns" --no-source --deadline-ms 500
}
for m in "${modes[@]}"; do
  # The whole log once first (2,000 q/s, from wherever loadgen starts in it: 3 s cover it): the node
  # loads a list into its cache on first use, and `searchctl bench` measures after a warm pass too.
  loadgen "$m" 2000 $(($(wc -l <"$qlog") / 2000 + 2)) 0 >/dev/null
  printf '%-5s %7s %10s %10s %10s  %s\n' mode rate p50_us p99_us minus_inproc "phases (mean us)"
  for r in "${rates[@]}"; do
    phases >"$out/ph0"
    line=$(loadgen "$m" "$r" "$secs" 1)
    phases >"$out/ph1"
    p50=$(field "$line" p50_us)
    shares=$(awk 'NR == FNR { a[$1 " " $2] = $3; next } { b[$1 " " $2] = $3; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
      END { for (i = 1; i <= n; i++) { p = order[i]; c = b[p " c"] - a[p " c"]; if (c > 0) printf "%s %.0f  ", p, 1e6 * (b[p " s"] - a[p " s"]) / c } }' \
      "$out/ph0" "$out/ph1")
    printf '%-5s %7s %10s %10s %10.0f  %s\n' "$m" "$r" "$p50" "$(field "$line" p99_us)" "$(awk -v a="$p50" -v b="${inproc[$m]}" 'BEGIN { print a - b }')" "$shares"
    [ "$(field "$line" errors)" = 0 ] || echo "   errors: $line"
  done
done
