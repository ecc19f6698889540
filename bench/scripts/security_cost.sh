#!/usr/bin/env bash
# What security costs the integrator (issue 49, goal: at most 15% more CPU a query on kept-alive
# connections): in one run on one machine, the same local cluster (scripts/cluster.sh, one
# search-node per shard of INDEX, the integrator's result cache off) started twice, plain and
# --secure (HTTPS with an API key in front, CurveZMQ to the nodes), both up at once and driven by
# two `searchctl loadgen` at the same Poisson rate over the same number of kept-alive connections.
# SCHEDULE=together (the default) drives them at the same time, so that whatever else the machine
# runs falls on both alike; SCHEDULE=alternate drives one at a time, in turn (the order flips every
# round), for a quiet machine. Each round also reads how much of a CPU the host's CPU-home pollers
# (any process's, core/cpu_home.hpp) spun over its span (host_poll_pct): a polled home CPU never
# halts, which makes every hand-off on it cheaper. Each round's loadgen opens its connections (and their TLS
# handshakes) in ROUND_WARMUP unmeasured seconds first: the measured span is CPU a query on
# kept-alive connections (ROUND_WARMUP=0 counts the set-up too; --keep-idle: a connection once
# opened stays open, none is closed idle and reopened, with its handshake, in the span). Prints, per round, each
# integrator's CPU (its threads' time on a CPU, /proc/PID/task/*/schedstat, in ns, over the measured span) per answered query in
# microseconds of one core, p50/p99, misses and errors; then the medians of REPEATS rounds, the
# secure/plain ratio of CPU a query (of the medians, and per round: a round is a pair), and each
# integrator thread's (by name, /proc/PID/task) median CPU a query. VARIANTS="plain apikey curve
# secure" adds the parts alone (keys from one run of docker/secrets-init.sh): apikey (plain HTTP
# with --api-keys, /health left open for cluster.sh) and curve (CurveZMQ, plain HTTP), so that
# secure - apikey - curve is what TLS costs. A variant written VARIANT@DIR runs the binaries of
# build DIR (e.g. VARIANTS="plain secure plain@build-old secure@build-old": two builds side by
# side); its ratio is to plain@DIR when that runs too.
# Pinning (PIN=auto: when the machine has 2 + 6 x variants CPUs, 8 under SCHEDULE=alternate, where
# every variant takes variant 0's CPUs): variant i's integrator on CPUs
# 2+6i and 3+6i (started there, so its HTTP loops and fan-out lanes are sized for 2 CPUs as on a
# 2-core machine), its loadgen on the next two, its nodes on the two after; CPUs 0-1 for the rest.
# A build dir may be a bundle (scripts/bundle.sh: DIR/bin, DIR/lib, run with LD_LIBRARY_PATH).
# Without an `openssl` command (a host with no packages), CERTS=DIR gives a CA and the
# integrator's certificate made elsewhere by docker/secrets-init.sh (DIR/ca.pem, DIR/ca/ca.key,
# DIR/integrator/tls.crt, tls.key, for the name localhost): they are copied in, and the CURVE keys
# and API keys are made here by searchctl.
#
# usage: bench/scripts/security_cost.sh [BUILD_DIR]      (default build)
# env: INDEX (data/gcide-index; without it: a `searchctl generate` index of DOCS documents in
#      OUT_DIR, SHARDS shards), QUERIES (data/gcide-queries.txt; without it: gen-queries from INDEX),
#      DOCS (200000), SHARDS (2),
#      RATE (400), SECONDS_PER_RUN (20), WARMUP_SECONDS (3), ROUND_WARMUP (2), CONNECTIONS (16),
#      MODE (and), K (10), REPEATS (5), VARIANTS (plain secure), SCHEDULE (together), PIN (auto,
#      1, 0), CERTS, BASE_PORT (7900; variant i's cluster at BASE_PORT+100i), OUT_DIR
#      (/tmp/security-cost: run dirs, keys, logs), LOADGEN_ARGS (extra searchctl loadgen flags),
#      PERF (unset; a perf command, e.g. perf: each integrator's threads' instructions and cycles a
#      query over each round's span, from hardware counters, `perf stat --per-thread`, medians printed).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
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
schedule=${SCHEDULE:-together}
[[ $schedule == together || $schedule == alternate ]] || { echo "security_cost: SCHEDULE is together or alternate" >&2; exit 2; }
read -ra variants <<<"${VARIANTS:-plain secure}"
read -ra lg_extra <<<"${LOADGEN_ARGS:-}"
# as_build DIR: DIR, or for a bundle (DIR/bin/searchctl) a folder in OUT_DIR laid out as a build
# dir (links to DIR/bin), DIR/lib put on LD_LIBRARY_PATH by the caller.
as_build() {
  if [ -x "$1/bin/searchctl" ]; then
    local d l
    d=$(cd "$1" && pwd)
    l=$out/layout$(echo "$d" | tr '/' '-')
    mkdir -p "$l/node" "$l/integrator" "$l/tools/searchctl"
    ln -sfn "$d/bin/search-node" "$l/node/search-node"
    ln -sfn "$d/bin/search-integrator" "$l/integrator/search-integrator"
    ln -sfn "$d/bin/searchctl" "$l/tools/searchctl/searchctl"
    echo "$l"
  else
    echo "$1"
  fi
}
for d in "$build" "${variants[@]}"; do
  [[ $d == *@* ]] && d=${d#*@}
  if [ -x "$d/bin/searchctl" ]; then
    mkdir -p "$out"
    LD_LIBRARY_PATH=$(cd "$d" && pwd)/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
  fi
done
build=$(as_build "$build")
ctl=$build/tools/searchctl/searchctl
[ -x "$ctl" ] || { echo "security_cost: $ctl not built" >&2; exit 2; }
declare -A bdir idx  # variant -> its build dir, its place in VARIANTS
for i in "${!variants[@]}"; do
  v=${variants[$i]}
  idx[$v]=$i
  bdir[$v]=$build
  [[ $v == *@* ]] && bdir[$v]=$(as_build "${v#*@}")
  for b in "${bdir[$v]}/tools/searchctl/searchctl" "${bdir[$v]}/node/search-node" \
           "${bdir[$v]}/integrator/search-integrator"; do
    [ -x "$b" ] || { echo "security_cost: $b not built" >&2; exit 2; }
  done
done
mkdir -p "$out"
ncpu=$(nproc)
# alternate runs one variant at a time: every variant on the same CPUs (a tighter comparison, and
# more variants than the machine has CPUs for side by side); together: each its own.
slots=${#variants[@]}; [ "$schedule" = alternate ] && slots=1
need=$((2 + 6 * slots))
pin=${PIN:-auto}
if [ "$pin" = auto ]; then if [ "$ncpu" -ge "$need" ] && command -v taskset >/dev/null; then pin=1; else pin=0; fi; fi
[ "$pin" = 0 ] || [ "$ncpu" -ge "$need" ] || { echo "security_cost: PIN=1 needs $need CPUs, $ncpu here" >&2; exit 2; }
cpus() { local c=$((2 + 6 * (slots == 1 ? 0 : idx[$1]) + 2 * $2)); echo "$c-$((c + 1))"; }  # VARIANT ROLE (0 integrator, 1 loadgen, 2 nodes)
pinned() { local v=$1 role=$2; shift 2; if [ "$pin" = 1 ]; then taskset -c "$(cpus "$v" "$role")" "$@"; else "$@"; fi; }
step "$(hostname 2>/dev/null) $ncpu CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg), pinning $([ "$pin" = 1 ] && echo on || echo off), schedule $schedule"
index=${INDEX:-data/gcide-index}
if [ ! -f "$index/manifest.json" ]; then
  index=$out/idx-${DOCS:-200000}-${SHARDS:-2}
  if [ ! -f "$index/manifest.json" ]; then
    step "generate --docs ${DOCS:-200000} --shards ${SHARDS:-2}"
    "$ctl" generate --docs "${DOCS:-200000}" --out "$index" --shards "${SHARDS:-2}" --seed 1 --threads "$ncpu" --force --quiet || exit 1
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

# certs DIR: the CA and certificate of CERTS into secrets dir DIR, unless it has its own.
certs() {
  [ -n "${CERTS:-}" ] && [ ! -s "$1/ca.pem" ] || return 0
  mkdir -p "$1/ca" "$1/integrator" && chmod 0700 "$1/ca" &&
    cp "$CERTS/ca.pem" "$1/ca.pem" && cp "$CERTS/ca/ca.key" "$1/ca/ca.key" &&
    cp "$CERTS/integrator/tls.crt" "$CERTS/integrator/tls.key" "$1/integrator/" &&
    chmod 0600 "$1/ca/ca.key" "$1/integrator/tls.key" || { echo "security_cost: cannot copy CERTS=$CERTS" >&2; exit 1; }
}
sec=$out/secrets  # keys for the apikey and curve variants (secure makes its own in its run dir)
declare -A port pid run name
# start VARIANT: starts that cluster in OUT_DIR/run-NAME (NAME: VARIANT with @ and / as -) on
# BASE_PORT+100I (I its place in VARIANTS); its log OUT_DIR/cluster-NAME.log, each round's loadgen
# line OUT_DIR/NAME.json.
start() {
  local v=$1 p=$((base + 100 * idx[$1])) extra=() iargs="--log-level warn" nargs="--log-level warn" f
  port[$v]=$p
  name[$v]=$(echo "$v" | tr '@/' '--')
  run[$v]=$out/run-${name[$v]}
  case ${v%@*} in
    plain) ;;
    secure) extra=(--secure); certs "${run[$v]}/secrets" ;;
    apikey) iargs+=" --api-keys $sec/integrator/api-keys --open-health" ;;
    curve)  # one key pair for every node, and one line with its key for every endpoint
      grep -v '^#' "$sec/node-0/curve.pub" >"$out/curve-servers-all"
      nargs+=" --curve-key $sec/node-0/curve.key --curve-clients $sec/node-0/curve-clients"
      iargs+=" --curve-key $sec/integrator/curve.key --curve-servers $out/curve-servers-all" ;;
    *) echo "security_cost: unknown variant $v (plain, apikey, curve, secure)" >&2; exit 2 ;;
  esac
  # Started on the integrator's CPUs (it sizes its threads by them); the nodes then move to theirs.
  pinned "$v" 0 scripts/cluster.sh start "${extra[@]}" --index "$index" --build "${bdir[$v]}" --base-port "$p" \
    --run-dir "${run[$v]}" --cache-mb 0 --integrator-args "$iargs" --node-args "$nargs" \
    >"$out/cluster-${name[$v]}.log" 2>&1 || { cat "$out/cluster-${name[$v]}.log" >&2; exit 1; }
  pid[$v]=$(cat "${run[$v]}/integrator.pid")
  if [ "$pin" = 1 ]; then
    for f in "${run[$v]}"/node-*.pid; do taskset -a -p -c "$(cpus "$v" 2)" "$(cat "$f")" >/dev/null || exit 1; done
  fi
}
trap 'for v in "${!run[@]}"; do scripts/cluster.sh stop --run-dir "${run[$v]}" >/dev/null 2>&1; done' EXIT
if [[ " ${variants[*]} " =~ \ (curve|apikey)[\ @] ]]; then
  certs "$sec"
  SECRETS_DIR=$sec SEARCHCTL=$ctl SECRETS_NODES=node-0 SECRETS_HOSTS=localhost sh docker/secrets-init.sh >"$out/secrets.log" 2>&1 ||
    { cat "$out/secrets.log" >&2; exit 1; }
  key=$(sed -n 's/^api-key //p' "$out/secrets.log")
  [ -z "$key" ] || (umask 077 && echo "$key" >"$sec/client-api-key")
fi
for v in "${variants[@]}"; do start "$v"; done

loadgen() {  # VARIANT SECONDS [WARMUP]
  local v=$1 args=(--url "http://127.0.0.1:${port[$1]}")
  case ${v%@*} in
    secure) args=(--url "https://localhost:${port[$v]}" --cacert "${run[$v]}/secrets/ca.pem"
                  --api-key "$(cat "${run[$v]}/api-key")") ;;
    apikey) args+=(--api-key "$(cat "$sec/client-api-key")") ;;
  esac
  pinned "$v" 1 "$ctl" loadgen "${args[@]}" --queries "$queries" --mode "$mode" --k "$k" --rate "$rate" \
    --seconds "$2" --warmup "${3:-0}" --deadline-ms 1000 --connections "$conns" --no-source --keep-idle "${lg_extra[@]}"
}
# CPU time in ns of every CPU home poller on the host (any process's): whether the CPU homes were
# kept from idling during a span (host_poll_pct in results.txt: of one CPU, over the span).
# Three processes, not one a thread: the span's start must not load the machine it measures.
host_poll_ns() {
  grep -lxs cpu-home-poll /proc/[0-9]*/task/*/comm | sed 's|/comm$|/schedstat|' | xargs -r cat 2>/dev/null |
    awk '{ t += $1 } END { printf "%.0f\n", t }'
}
results=$out/results.txt threads=$out/threads.txt counters=$out/counters.txt
: >"$results"
: >"$threads"
: >"$counters"
step "warm-up: $warm s at $rate q/s on each of ${variants[*]}"
lg=()
for v in "${variants[@]}"; do loadgen "$v" "$warm" >/dev/null & lg+=($!); done
for l in "${lg[@]}"; do wait "$l" || { echo "security_cost: a warm-up failed" >&2; exit 1; }; done
declare -A t0 t1
# measure ROUND VARIANT...: those variants' loadgens at once; a line each in results.txt and threads.txt.
measure() {
  local r=$1 v l failed=0 lg=()
  shift
  for v; do loadgen "$v" "$secs" "$round_warm" >"$out/${name[$v]}.json" & lg+=($!); done
  sleep "$round_warm"  # the loadgens' own clocks start a little later: the span holds all they measure
  for v; do t0[$v]=$(cpu_ns "${pid[$v]}"); thread_ns "${pid[$v]}" >"$out/${name[$v]}.threads0"; done
  local poll0 poll1 span0 span1
  poll0=$(host_poll_ns) span0=$(date +%s%N)
  if [ -n "${PERF:-}" ]; then  # ends with the span (the loadgens' measured seconds), not waited for
    for v; do
      "$PERF" stat --per-thread -x, -e instructions,cycles -p "${pid[$v]}" -o "$out/${name[$v]}.perf" -- sleep "$secs" &
    done
  fi
  for l in "${lg[@]}"; do wait "$l" || failed=1; done
  [ -z "${PERF:-}" ] || wait
  for v; do t1[$v]=$(cpu_ns "${pid[$v]}"); thread_ns "${pid[$v]}" >"$out/${name[$v]}.threads1"; done
  poll1=$(host_poll_ns) span1=$(date +%s%N)
  [ $failed -eq 0 ] || { echo "security_cost: a loadgen failed" >&2; for v; do cat "$out/${name[$v]}.json"; done >&2; exit 1; }
  for v; do
    line=$(cat "$out/${name[$v]}.json")
    ok=$(field "$line" ok)
    [ "${ok:-0}" -gt 0 ] || { echo "security_cost: no query answered on $v: $line" >&2; exit 1; }
    awk -v v="$v" -v r="$r" -v t=$((t1[$v] - t0[$v])) -v ok="$ok" -v q="$(field "$line" queries)" \
      -v p50="$(field "$line" p50_us)" -v p99="$(field "$line" p99_us)" -v miss="$(field "$line" deadline_misses)" \
      -v err="$(field "$line" errors)" -v qps="$(field "$line" achieved_qps)" \
      -v poll=$((poll1 - poll0)) -v span=$((span1 - span0)) 'BEGIN {
      printf "%s %d cpu_us_per_query %.1f p50_us %.0f p99_us %.0f queries %d ok %d misses %d errors %d qps %.1f host_poll_pct %.1f\n",
        v, r, t / 1e3 / ok, p50, p99, q, ok, miss, err, qps, (span > 0 ? 100 * poll / span : 0) }' | tee -a "$results"
    awk -v v="$v" -v r="$r" -v ok="$ok" 'NR == FNR { a[$1] = $3; next }
      { c[$2] += $3 - ($1 in a ? a[$1] : 0) }
      END { printf "%s %d", v, r; for (n in c) printf " %s %.1f", n, c[n] / 1e3 / ok; print "" }' \
      "$out/${name[$v]}.threads0" "$out/${name[$v]}.threads1" >>"$threads"
    # perf stat -x,: "THREAD-TID,COUNT,,EVENT,..." a thread and event; summed by thread name.
    [ -z "${PERF:-}" ] || awk -F, -v v="$v" -v r="$r" -v ok="$ok" '$1 ~ /-[0-9]+$/ && $2 ~ /^[0-9]+$/ {
        n = $1; sub(/-[0-9]+$/, "", n); e = $4; sub(/:.*/, "", e); c[n "." e] += $2 }
      END { printf "%s %d", v, r; for (k in c) printf " %s %.0f", k, c[k] / ok; print "" }' \
      "$out/${name[$v]}.perf" >>"$counters"
  done
}
for ((r = 1; r <= repeats; r++)); do
  if [ "$schedule" = together ]; then
    step "round $r of $repeats: $secs s at $rate q/s on each (after $round_warm s unmeasured), $conns connections each"
    measure "$r" "${variants[@]}"
  else
    order=("${variants[@]}")
    if [ $((r % 2)) -eq 0 ]; then order=(); for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[$i]}"); done; fi
    step "round $r of $repeats: ${order[*]} in turn, $secs s each at $rate q/s (after $round_warm s unmeasured), $conns connections"
    for v in "${order[@]}"; do measure "$r" "$v"; done
  fi
done
python3 - "$results" "$rate" "$conns" "$threads" "$counters" "${variants[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = {}
for v in sys.argv[6:]:
    rs = [dict(zip(r[2::2], map(float, r[3::2]))) for r in rows if r[0] == v]
    med[v] = {key: statistics.median(x.get(key, 0) for x in rs)
              for key in ("cpu_us_per_query", "p50_us", "p99_us", "host_poll_pct")}
    print(f"{v:6s} median of {len(rs)}: integrator CPU {med[v]['cpu_us_per_query']:.1f} us/query, "
          f"p50 {med[v]['p50_us'] / 1000:.2f} ms, p99 {med[v]['p99_us'] / 1000:.2f} ms, "
          f"host's CPU-home pollers {med[v]['host_poll_pct']:.0f}% of a CPU")
# Per round (a round's variants ran side by side or one after the other: its ratio is one pair's).
cpu = {(r[0], r[1]): float(r[3]) for r in rows}
for v in sys.argv[6:]:
    at = v[v.index("@"):] if "@" in v else ""
    plain = "plain" + at if "plain" + at in med else "plain"
    if v != plain and plain in med:
        ratio = med[v]["cpu_us_per_query"] / med[plain]["cpu_us_per_query"]
        rounds = [cpu[(v, n)] / cpu[(plain, n)] for (w, n) in cpu if w == v and (plain, n) in cpu]
        print(f"{v}/{plain} integrator CPU a query at {sys.argv[2]} q/s over {sys.argv[3]} kept-alive connections: "
              f"{ratio:.3f} ({(ratio - 1) * 100:+.1f}%) of the medians; per round {', '.join(f'{x:.3f}' for x in rounds)}, "
              f"median {statistics.median(rounds):.3f}, {sum(x <= 1.15 for x in rounds)} of {len(rounds)} <= 1.15 "
              f"(goal for secure <= 1.15)")
# Each integrator thread's median CPU a query (threads of one name summed; a round without one counts 0).
th = [l.split() for l in open(sys.argv[4]) if l.strip()]
for v in sys.argv[6:]:
    rs = [dict(zip(r[2::2], map(float, r[3::2]))) for r in th if r[0] == v]
    names = sorted({n for x in rs for n in x})
    ms = {n: statistics.median(x.get(n, 0.0) for x in rs) for n in names}
    shown = sorted((n for n in names if ms[n] > 0), key=lambda n: -ms[n])
    print(f"{v:6s} threads, median us a query: " + ", ".join(f"{n} {ms[n]:.1f}" for n in shown))
# With PERF: each thread's median instructions and cycles a query (hardware counters).
pc = [l.split() for l in open(sys.argv[5]) if l.strip()]
for v in sys.argv[6:]:
    rs = [dict(zip(r[2::2], map(float, r[3::2]))) for r in pc if r[0] == v]
    names = sorted({n for x in rs for n in x})
    if not names:  # no counts (no hardware counters here)
        print(f"{v:6s} counters: none counted")
        continue
    ms = {n: statistics.median(x.get(n, 0.0) for x in rs) for n in names}
    total = {e: sum(ms[n] for n in names if n.endswith("." + e)) for e in ("instructions", "cycles")}
    print(f"{v:6s} counters, median a query: instructions {total['instructions']:.0f}, cycles {total['cycles']:.0f}; "
          + ", ".join(f"{n} {ms[n]:.0f}" for n in sorted(names, key=lambda n: -ms[n]) if ms[n] >= 100))
PY
