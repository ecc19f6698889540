#!/usr/bin/env bash
# Sustained load and overload on a local cluster (issue 8): a synthetic 2-shard index, two
# search-nodes and a search-integrator (result cache off, so every query reaches the nodes), and
# `searchctl loadgen` sending open-loop Poisson load through HTTP.
#   1. capacity: the rate climbs x1.4 from START_RATE until more than 1% of queries miss the
#      deadline; capacity is the highest rate with at most 1% misses.
#   2. soak: LOAD (0.8) x capacity for SOAK_SECONDS (600), in WINDOW-second windows; per window
#      p50/p99, errors and the RSS of the integrator and of each node (from /proc).
#   3. overload: OVERLOAD (1.5) x capacity for OVERLOAD_SECONDS (30): answers by HTTP status, the
#      latency of the shed requests (429 from --max-inflight, 503) and of the answered ones.
# Passes (exit 0) when the soak had zero errors and zero partial answers, every window's p99 is
# within P99_SPREAD (3) x the windows' median p99, RSS grew by at most RSS_GROWTH (10%) + 16 MiB
# from the second window to the last, and under overload some requests were shed with a median
# shed latency under 50 ms while the answered p99 stayed under the deadline.
#
# usage: scripts/soak.sh [WORK_DIR]       (default /tmp/soak; results in WORK_DIR/soak.md)
# env: BUILD (build dir, default build), DOCS (200000), START_RATE (200), DEADLINE_MS (500),
#      MAX_INFLIGHT (256), CONNECTIONS (512; more than MAX_INFLIGHT, so the integrator, not loadgen, holds the queue), SOAK_SECONDS, WINDOW (30), LOAD, OVERLOAD,
#      OVERLOAD_SECONDS, MODE (and)
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/scripts/bench_lib.sh

work=${1:-/tmp/soak}
build=${BUILD:-build}
docs=${DOCS:-200000}
deadline=${DEADLINE_MS:-500}
conns=${CONNECTIONS:-512}
mode=${MODE:-and}
ctl=$build/tools/searchctl/searchctl
mkdir -p "$work"
out=$work/soak.md

step "machine: $(nproc) cores, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), build $(git rev-parse --short HEAD 2>/dev/null)"
idx=$work/index-$docs
if [ ! -f "$idx/manifest.json" ]; then
  rm -rf "$idx"
  "$ctl" generate --docs "$docs" --out "$idx" --shards 2 --seed 3 --quiet || exit 1
fi
qlog=$work/queries.txt
[ -f "$qlog" ] || "$ctl" gen-queries --index "$idx" --count 5000 --out "$qlog" --seed 3 >/dev/null || exit 1

base=${BASE_PORT:-9600}
shards=()
node_pids=()
for i in 0 1; do
  port=$((base + 10 + i))
  "$build/node/search-node" --index "$idx/shard-$i" --listen "tcp://127.0.0.1:$port" --log-level warn \
    >"$work/node-$i.out" 2>"$work/node-$i.err" &
  pids+=($!)
  node_pids+=($!)
  shards+=("tcp://127.0.0.1:$port")
done
for i in 0 1; do
  for _ in $(seq 300); do grep -q '"ready"' "$work/node-$i.out" 2>/dev/null && break; sleep 0.1; done
  grep -q '"ready"' "$work/node-$i.out" || { echo "node $i did not start"; cat "$work/node-$i.err"; exit 1; }
done
"$build/integrator/search-integrator" --shards "$(IFS=,; echo "${shards[*]}")" --http "127.0.0.1:$base" \
  --cache-mb 0 --timeout-ms "$deadline" --max-inflight "${MAX_INFLIGHT:-256}" --log-level warn \
  >"$work/integrator.out" 2>"$work/integrator.err" &
int_pid=$!
pids+=("$int_pid")
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$base/health" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf "http://127.0.0.1:$base/health" >/dev/null || { echo "integrator not healthy"; cat "$work/integrator.err"; exit 1; }

load() {  # load RATE SECONDS WARMUP -> one JSON line
  "$ctl" loadgen --url "http://127.0.0.1:$base" --queries "$qlog" --mode "$mode" --rate "$1" --seconds "$2" \
    --warmup "$3" --deadline-ms "$deadline" --connections "$conns" --seed "$RANDOM"
}
rss() { awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$1/status" 2>/dev/null || echo 0; }

step "capacity"
rate=${START_RATE:-200}
capacity=0
for _ in $(seq 16); do
  line=$(load "$rate" 5 1)
  miss=$(field "$line" miss_ratio)
  echo "rate $rate: achieved $(field "$line" achieved_qps) q/s, p99 $(field "$line" p99_us) us, misses $miss, http $(echo "$line" | grep -o '"http":{[^}]*}')"
  awk -v m="$miss" 'BEGIN { exit !(m <= 0.01) }' || break
  capacity=$rate
  rate=$(awk -v r="$rate" 'BEGIN { printf "%d", r * 1.4 + 0.5 }')
done
[ "$capacity" -gt 0 ] || { echo "no rate met the deadline"; exit 1; }
soak_rate=$(awk -v c="$capacity" -v l="${LOAD:-0.8}" 'BEGIN { printf "%d", c * l + 0.5 }')
over_rate=$(awk -v c="$capacity" -v l="${OVERLOAD:-1.5}" 'BEGIN { printf "%d", c * l + 0.5 }')
step "capacity $capacity q/s; soak at $soak_rate q/s for ${SOAK_SECONDS:-600} s"

{
  echo "Soak: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, build $(git rev-parse --short HEAD 2>/dev/null), $docs docs in 2 shards,"
  echo "$mode queries, deadline $deadline ms, integrator --max-inflight ${MAX_INFLIGHT:-256}; capacity $capacity q/s; soak at $soak_rate q/s."
  echo
  echo "| window | end s | queries | achieved q/s | p50 ms | p99 ms | errors | partial | misses | integrator RSS MiB | node 0 RSS MiB | node 1 RSS MiB |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$out"
window=${WINDOW:-30}
windows=$(( (${SOAK_SECONDS:-600} + window - 1) / window ))
p99s=() rss_int=() rss_n0=() rss_n1=()
errors=0 partial=0 total=0
for w in $(seq "$windows"); do
  line=$(load "$soak_rate" "$window" 0)
  q=$(field "$line" queries); e=$(field "$line" errors); p=$(field "$line" partial)
  total=$((total + q)); errors=$((errors + e)); partial=$((partial + p))
  p99=$(awk -v u="$(field "$line" p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')
  p50=$(awk -v u="$(field "$line" p50_us)" 'BEGIN { printf "%.2f", u / 1000 }')
  p99s+=("$p99"); rss_int+=("$(rss "$int_pid")"); rss_n0+=("$(rss "${node_pids[0]}")"); rss_n1+=("$(rss "${node_pids[1]}")")
  printf '| %d | %d | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$w" $((w * window)) "$q" \
    "$(field "$line" achieved_qps)" "$p50" "$p99" "$e" "$p" "$(field "$line" deadline_misses)" \
    "${rss_int[-1]}" "${rss_n0[-1]}" "${rss_n1[-1]}" | tee -a "$out"
done

step "overload at $over_rate q/s"
line=$(load "$over_rate" "${OVERLOAD_SECONDS:-30}" 0)
echo "$line"
over_http=$(echo "$line" | grep -o '"http":{[^}]*}')
rejected=$(field "$line" rejected)
rej_p50=$(awk -v u="$(field "$line" rejected_p50_us)" 'BEGIN { printf "%.2f", u / 1000 }')
rej_p99=$(awk -v u="$(field "$line" rejected_p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')
ans_p99=$(awk -v u="$(field "$line" answered_p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')

# Verdicts.
median_p99=$(printf '%s\n' "${p99s[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
max_p99=$(printf '%s\n' "${p99s[@]}" | sort -g | tail -1)
grow() {  # grow FIRST LAST -> 1 when LAST > FIRST * (1 + RSS_GROWTH) + 16
  awk -v a="$1" -v b="$2" -v g="${RSS_GROWTH:-0.10}" 'BEGIN { print (b > a * (1 + g) + 16) ? 1 : 0 }'
}
second=$(( windows > 1 ? 1 : 0 ))
fail=0
verdict() { echo "- $1: $2" | tee -a "$out"; [ "$2" = ok ] || [ "${2#ok }" != "$2" ] || fail=1; }
{
  echo
  echo "Overload: $over_rate q/s for ${OVERLOAD_SECONDS:-30} s: answers by HTTP status $over_http; shed $rejected, shed latency"
  echo "p50 $rej_p50 ms / p99 $rej_p99 ms; answered p99 $ans_p99 ms."
  echo
} >>"$out"
verdict "soak errors" "$([ "$errors" -eq 0 ] && echo "ok (0 of $total)" || echo "FAIL ($errors of $total)")"
verdict "soak partial answers" "$([ "$partial" -eq 0 ] && echo "ok (0)" || echo "FAIL ($partial)")"
verdict "p99 steady" "$(awk -v m="$median_p99" -v x="$max_p99" -v s="${P99_SPREAD:-3}" \
  'BEGIN { if (x <= m * s) printf "ok (max %.2f ms, median %.2f ms)", x, m; else printf "FAIL (max %.2f ms > %s x median %.2f ms)", x, s, m }')"
for who in int n0 n1; do
  eval "first=\${rss_$who[$second]}; last=\${rss_$who[-1]}"
  verdict "RSS $who" "$([ "$(grow "$first" "$last")" = 0 ] && echo "ok ($first -> $last MiB)" || echo "FAIL ($first -> $last MiB)")"
done
verdict "overload shed" "$(awk -v r="${rejected:-0}" -v p="$rej_p50" -v a="$ans_p99" -v d="$deadline" \
  'BEGIN { if (r > 0 && p < 50 && a < d) printf "ok (%d shed, p50 %.2f ms; answered p99 %.2f ms)", r, p, a; else printf "FAIL (%d shed, p50 %.2f ms, answered p99 %.2f ms)", r, p, a }')"
step "done: $out"
exit $fail
