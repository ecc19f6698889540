#!/usr/bin/env bash
# What security costs the integrator (issue 49, goal: at most 15% more CPU a query on kept-alive
# connections): in one run on one machine, the same local cluster (scripts/cluster.sh, one
# search-node per shard of INDEX, the integrator's result cache off) started twice, plain and
# --secure (HTTPS with an API key in front, CurveZMQ to the nodes), both up at once and driven at
# the same time by two `searchctl loadgen` at the same Poisson rate over the same number of
# kept-alive connections, so that whatever else the machine runs falls on both alike. Each round's
# loadgen opens its connections (and their TLS handshakes) in ROUND_WARMUP unmeasured seconds first:
# the measured span is CPU a query on kept-alive connections (ROUND_WARMUP=0 counts the set-up
# too). Prints, per round, each integrator's CPU (user + system from /proc/PID/stat over the
# measured span) per answered query in microseconds of one core, p50/p99, misses and errors; then the medians of
# REPEATS rounds and the secure/plain ratio of CPU a query. VARIANTS="plain apikey curve secure"
# adds the parts alone (keys from one run of docker/secrets-init.sh): apikey (plain HTTP with
# --api-keys, /health left open for cluster.sh) and curve (CurveZMQ, plain HTTP), so that
# secure - apikey - curve is what TLS costs; every variant runs at once at RATE. A variant written
# VARIANT@DIR runs the binaries of build DIR (e.g. VARIANTS="plain secure plain@build-old
# secure@build-old": two builds side by side); its ratio is to plain@DIR when that runs too.
#
# usage: bench/scripts/security_cost.sh [BUILD_DIR]      (default build)
# env: INDEX (data/gcide-index; without it: a `searchctl generate` index of DOCS documents in
#      OUT_DIR), QUERIES (data/gcide-queries.txt; without it: gen-queries from INDEX), DOCS (200000),
#      RATE (400), SECONDS_PER_RUN (20), WARMUP_SECONDS (3), ROUND_WARMUP (2), CONNECTIONS (16),
#      MODE (and), K (10),
#      REPEATS (5), VARIANTS (plain secure), BASE_PORT (7900; variant i's cluster at
#      BASE_PORT+100i), OUT_DIR (/tmp/security-cost:
#      run dirs, keys, logs), LOADGEN_ARGS (extra searchctl loadgen flags).
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/bench_lib.sh
build=${1:-build}
rate=${RATE:-400}
secs=${SECONDS_PER_RUN:-20}
warm=${WARMUP_SECONDS:-3}
round_warm=${ROUND_WARMUP:-2}
conns=${CONNECTIONS:-16}
mode=${MODE:-and}
k=${K:-10}
repeats=${REPEATS:-5}
base=${BASE_PORT:-7900}
out=${OUT_DIR:-/tmp/security-cost}
ctl=$build/tools/searchctl/searchctl
[ -x "$ctl" ] || { echo "security_cost: $ctl not built" >&2; exit 2; }
variants=(${VARIANTS:-plain secure})
declare -A bdir  # variant -> its build dir
for v in "${variants[@]}"; do
  bdir[$v]=$build
  [[ $v == *@* ]] && bdir[$v]=${v#*@}
  for b in "${bdir[$v]}/tools/searchctl/searchctl" "${bdir[$v]}/node/search-node" \
           "${bdir[$v]}/integrator/search-integrator"; do
    [ -x "$b" ] || { echo "security_cost: $b not built" >&2; exit 2; }
  done
done
mkdir -p "$out"
index=${INDEX:-data/gcide-index}
if [ ! -f "$index/manifest.json" ]; then
  index=$out/idx-${DOCS:-200000}
  if [ ! -f "$index/manifest.json" ]; then
    step "generate --docs ${DOCS:-200000} --shards 2"
    "$ctl" generate --docs "${DOCS:-200000}" --out "$index" --shards 2 --seed 1 --threads "$(nproc)" --force --quiet || exit 1
  fi
fi
queries=${QUERIES:-}
if [ -z "$queries" ]; then
  queries=data/gcide-queries.txt
  if [ "$index" != data/gcide-index ] || [ ! -f "$queries" ]; then
    queries=$out/queries.txt
    "$ctl" gen-queries --index "$index" --count 2000 --out "$queries" --seed 1 >/dev/null || exit 1
  fi
fi
step "index $index ($(python3 -c "import json; print(len(json.load(open('$index/manifest.json'))['shards']))") shards), queries $queries"

sec=$out/secrets  # keys for the apikey and curve variants (secure makes its own in its run dir)
declare -A port pid run name
# start I VARIANT: starts that cluster in OUT_DIR/run-NAME (NAME: VARIANT with @ and / as -) on
# BASE_PORT+100I; its log OUT_DIR/cluster-NAME.log, each round's loadgen line OUT_DIR/NAME.json.
start() {
  local i=$1 v=$2 p=$((base + 100 * $1)) extra=() iargs="--log-level warn" nargs="--log-level warn"
  port[$v]=$p
  name[$v]=$(echo "$v" | tr '@/' '--')
  run[$v]=$out/run-${name[$v]}
  case ${v%@*} in
    plain) ;;
    secure) extra=(--secure) ;;
    apikey) iargs+=" --api-keys $sec/integrator/api-keys --open-health" ;;
    curve)  # one key pair for every node, and one line with its key for every endpoint
      grep -v '^#' "$sec/node-0/curve.pub" >"$out/curve-servers-all"
      nargs+=" --curve-key $sec/node-0/curve.key --curve-clients $sec/node-0/curve-clients"
      iargs+=" --curve-key $sec/integrator/curve.key --curve-servers $out/curve-servers-all" ;;
    *) echo "security_cost: unknown variant $v (plain, apikey, curve, secure)" >&2; exit 2 ;;
  esac
  scripts/cluster.sh start "${extra[@]}" --index "$index" --build "${bdir[$v]}" --base-port "$p" \
    --run-dir "${run[$v]}" --cache-mb 0 --integrator-args "$iargs" --node-args "$nargs" \
    >"$out/cluster-${name[$v]}.log" 2>&1 || { cat "$out/cluster-${name[$v]}.log" >&2; exit 1; }
  pid[$v]=$(cat "${run[$v]}/integrator.pid")
}
trap 'for v in "${!run[@]}"; do scripts/cluster.sh stop --run-dir "${run[$v]}" >/dev/null 2>&1; done' EXIT
if [[ " ${variants[*]} " =~ \ (curve|apikey)[\ @] ]]; then
  SECRETS_DIR=$sec SEARCHCTL=$ctl SECRETS_NODES=node-0 SECRETS_HOSTS=localhost sh docker/secrets-init.sh >"$out/secrets.log" 2>&1 ||
    { cat "$out/secrets.log" >&2; exit 1; }
  key=$(sed -n 's/^api-key //p' "$out/secrets.log")
  [ -z "$key" ] || (umask 077 && echo "$key" >"$sec/client-api-key")
fi
for i in "${!variants[@]}"; do start "$i" "${variants[$i]}"; done

loadgen() {  # VARIANT SECONDS [WARMUP]
  local v=$1 args=(--url "http://127.0.0.1:${port[$1]}")
  case ${v%@*} in
    secure) args=(--url "https://localhost:${port[$v]}" --cacert "${run[$v]}/secrets/ca.pem"
                  --api-key "$(cat "${run[$v]}/api-key")") ;;
    apikey) args+=(--api-key "$(cat "$sec/client-api-key")") ;;
  esac
  "$ctl" loadgen "${args[@]}" --queries "$queries" --mode "$mode" --k "$k" --rate "$rate" \
    --seconds "$2" --warmup "${3:-0}" --deadline-ms 1000 --connections "$conns" --no-source ${LOADGEN_ARGS:-}
}

hz=$(getconf CLK_TCK)
results=$out/results.txt
: >"$results"
step "warm-up: $warm s at $rate q/s on each of ${variants[*]}"
lg=()
for v in "${variants[@]}"; do loadgen "$v" "$warm" >/dev/null & lg+=($!); done
for l in "${lg[@]}"; do wait "$l" || { echo "security_cost: a warm-up failed" >&2; exit 1; }; done
declare -A t0 t1
for ((r = 1; r <= repeats; r++)); do
  step "round $r of $repeats: $secs s at $rate q/s on each (after $round_warm s unmeasured), $conns connections each"
  lg=()
  for v in "${variants[@]}"; do loadgen "$v" "$secs" "$round_warm" >"$out/${name[$v]}.json" & lg+=($!); done
  sleep "$round_warm"  # the loadgens' own clocks start a little later: the span holds all they measure
  for v in "${variants[@]}"; do t0[$v]=$(ticks "${pid[$v]}"); done
  failed=0
  for l in "${lg[@]}"; do wait "$l" || failed=1; done
  for v in "${variants[@]}"; do t1[$v]=$(ticks "${pid[$v]}"); done
  [ $failed -eq 0 ] || { echo "security_cost: a loadgen failed" >&2; for v in "${variants[@]}"; do cat "$out/${name[$v]}.json"; done >&2; exit 1; }
  for v in "${variants[@]}"; do
    line=$(cat "$out/${name[$v]}.json")
    ok=$(field "$line" ok)
    [ "${ok:-0}" -gt 0 ] || { echo "security_cost: no query answered on $v: $line" >&2; exit 1; }
    awk -v v="$v" -v r="$r" -v t=$((t1[$v] - t0[$v])) -v hz="$hz" -v ok="$ok" -v q="$(field "$line" queries)" \
      -v p50="$(field "$line" p50_us)" -v p99="$(field "$line" p99_us)" -v miss="$(field "$line" deadline_misses)" \
      -v err="$(field "$line" errors)" -v qps="$(field "$line" achieved_qps)" 'BEGIN {
      printf "%s %d cpu_us_per_query %.1f p50_us %.0f p99_us %.0f queries %d ok %d misses %d errors %d qps %.1f\n",
        v, r, t / hz * 1e6 / ok, p50, p99, q, ok, miss, err, qps }' | tee -a "$results"
  done
done
python3 - "$results" "$rate" "$conns" "${variants[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = {}
for v in sys.argv[4:]:
    rs = [dict(zip(r[2::2], map(float, r[3::2]))) for r in rows if r[0] == v]
    med[v] = {key: statistics.median(x[key] for x in rs) for key in ("cpu_us_per_query", "p50_us", "p99_us")}
    print(f"{v:6s} median of {len(rs)}: integrator CPU {med[v]['cpu_us_per_query']:.1f} us/query, "
          f"p50 {med[v]['p50_us'] / 1000:.2f} ms, p99 {med[v]['p99_us'] / 1000:.2f} ms")
# Per round (the variants ran side by side, so a round's ratio cancels what the machine did then).
cpu = {(r[0], r[1]): float(r[3]) for r in rows}
for v in sys.argv[4:]:
    at = v[v.index("@"):] if "@" in v else ""
    plain = "plain" + at if "plain" + at in med else "plain"
    if v != plain and plain in med:
        ratio = med[v]["cpu_us_per_query"] / med[plain]["cpu_us_per_query"]
        rounds = sorted(cpu[(v, n)] / cpu[(plain, n)] for (w, n) in cpu if w == v and (plain, n) in cpu)
        print(f"{v}/{plain} integrator CPU a query at {sys.argv[2]} q/s over {sys.argv[3]} kept-alive connections: "
              f"{ratio:.3f} ({(ratio - 1) * 100:+.1f}%) of the medians; per round {', '.join(f'{x:.3f}' for x in rounds)}, "
              f"median {statistics.median(rounds):.3f} (goal for secure <= 1.15)")
PY
