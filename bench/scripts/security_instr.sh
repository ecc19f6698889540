#!/usr/bin/env bash
# What security costs the integrator, counted rather than timed (issue 49): instructions, system
# calls and context switches per answered query of a plain and a --secure (HTTPS + API key +
# CurveZMQ) local cluster (scripts/cluster.sh: one search-node per shard, result cache off), one
# after the other, each driven by `searchctl loadgen` at RATE q/s over CONNECTIONS kept-alive
# connections. Where CPU times on a loaded 2-core box vary by 30% from run to run, these counts do
# not. Two passes per variant:
#  - counts: system calls and context switches a query by integrator thread (perf stat's
#    raw_syscalls:sys_enter and context-switches, MEASURE_S seconds), then system calls by name
#    (strace -c -f, another MEASURE_S seconds: strace slows it, so these are names, not totals);
#  - instructions: the integrator under callgrind (--separate-threads), instrumentation on for
#    MEASURE_S seconds only (after the connections' handshakes), instructions by thread name and
#    the callgrind files kept for callgrind_annotate (WORK_DIR/cg-VARIANT.*), and the part of them
#    that TLS handshakes took (connections opened in the span).
# Queries are counted by the integrator itself (its search_shard_requests_total over the span, /
# shards). Prints a line a variant and measure, then secure - plain.
#
# usage: bench/scripts/security_instr.sh [BUILD_DIR]   (a build dir or a scripts/bundle.sh bundle)
# env: DOCS (200000), SHARDS (3), RATE (100), CONNECTIONS (4: all opened before the span), WARM_S (5), MEASURE_S (10),
#      VARIANTS (plain secure), PASSES (counts instr), LOADGEN_ARGS (--keep-idle), BASE_PORT (8400),
#      CALLGRIND_ARGS (extra callgrind flags, e.g. "--cache-sim=yes --LL=2097152,16,64": D1 and LL misses a thread),
#      WORK_DIR (/tmp/security-instr)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh
build=${1:-build}
docs=${DOCS:-200000}
shards=${SHARDS:-3}
rate=${RATE:-100}
conns=${CONNECTIONS:-4}
warm_s=${WARM_S:-5}
measure_s=${MEASURE_S:-10}
base=${BASE_PORT:-8400}
work=${WORK_DIR:-/tmp/security-instr}
read -ra variants <<<"${VARIANTS:-plain secure}"
read -ra passes <<<"${PASSES:-counts instr}"
read -ra lg_args <<<"${LOADGEN_ARGS---keep-idle}"  # loadgen's extra flags (set empty: none)
mkdir -p "$work"
build=$(cd "$build" && pwd) || exit 1
# A layout of build-dir paths for cluster.sh; the integrator a wrapper that runs the real one under
# $WRAP (empty: plain exec), so that cluster.sh's pid file is the measured process.
real_int=$build/integrator/search-integrator
if [ -x "$build/bin/searchctl" ]; then
  export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  real_int=$build/bin/search-integrator
fi
lay=$work/layout
mkdir -p "$lay/node" "$lay/integrator" "$lay/tools/searchctl"
for b in node/search-node tools/searchctl/searchctl; do
  src=$build/$b
  [ -x "$src" ] || src=$build/bin/$(basename "$b")
  [ -x "$src" ] || { echo "security_instr: no $(basename "$b") in $build" >&2; exit 2; }
  ln -sfn "$src" "$lay/$b"
done
cat >"$lay/integrator/search-integrator" <<EOF
#!/bin/sh
exec \${WRAP:-} "$real_int" "\$@"
EOF
chmod +x "$lay/integrator/search-integrator"
ctl=$lay/tools/searchctl/searchctl
index=$work/idx-$docs-$shards
if [ ! -f "$index/manifest.json" ]; then
  step "generate --docs $docs --shards $shards"
  "$ctl" generate --docs "$docs" --out "$index" --shards "$shards" --seed 1 --threads "$(nproc)" --force --quiet || exit 1
fi
queries=$work/queries.txt
[ -s "$queries" ] || "$ctl" gen-queries --index "$index" --count 2000 --out "$queries" --seed 1 >/dev/null || exit 1
step "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $docs documents in $shards shards, $rate q/s, $conns connections, ${measure_s}s measured"

run=$work/run
trap 'scripts/cluster.sh stop --run-dir "$run" >/dev/null 2>&1' EXIT
# queries_done: the integrator's shard requests so far / shards (no hedges or retries on loopback).
queries_done() {
  curl -s "http://127.0.0.1:$((base + 1))/metrics" |
    awk -v s="$shards" '/^search_shard_requests_total/ { n += $NF } END { printf "%d\n", n / s }'
}
loadgen() {  # VARIANT SECONDS
  local args=(--url "http://127.0.0.1:$base")
  [ "$1" = secure ] && args=(--url "https://localhost:$base" --cacert "$run/secrets/ca.pem" --api-key "$(cat "$run/api-key")")
  "$ctl" loadgen "${args[@]}" --queries "$queries" --mode and --k 10 --rate "$rate" --seconds "$2" --warmup 0 \
    --deadline-ms 5000 --connections "$conns" --no-source "${lg_args[@]}" >/dev/null 2>&1
}
start() {  # VARIANT WRAP
  rm -rf "$run"
  local extra=()
  [ "$1" = secure ] && extra=(--secure)
  WRAP=$2 scripts/cluster.sh start "${extra[@]}" --index "$index" --build "$lay" --base-port "$base" --run-dir "$run" \
    --cache-mb 0 --integrator-args "--log-level warn" --node-args "--log-level warn" >"$work/cluster-$1.log" 2>&1 ||
    { cat "$work/cluster-$1.log" >&2; exit 1; }
  pid=$(cat "$run/integrator.pid")
}

for v in "${variants[@]}"; do
  for p in "${passes[@]}"; do
    if [ "$p" = counts ]; then
      start "$v" ""
      loadgen "$v" "$warm_s"
      loadgen "$v" $((2 * measure_s + 4)) &
      lg=$!
      sleep 2
      # System calls and context switches by thread (perf's tracepoint count, no slower), then
      # system calls by name under strace (which slows the integrator: names, not totals).
      q0=$(queries_done)
      perf stat --per-thread -x, -e raw_syscalls:sys_enter,context-switches -p "$pid" -o "$work/perf-$v.txt" -- sleep "$measure_s"
      q1=$(queries_done)
      q=$((q1 - q0))
      awk -F, -v v="$v" -v q="$q" '$1 ~ /-[0-9]+$/ && $2 ~ /^[0-9]+$/ { n = $1; sub(/-[0-9]+$/, "", n); c[$4 " " n] += $2; t[$4] += $2 }
        END { printf "%-7s counts   queries %d  syscalls/q %.2f  ctx-switches/q %.2f |", v, q, t["raw_syscalls:sys_enter"] / q, t["context-switches"] / q
              for (k in c) if (k ~ /^raw/ && c[k] / q >= 0.05) { split(k, a, " "); printf " %s %.2f", a[2], c[k] / q }; print "" }' \
        "$work/perf-$v.txt" | tee -a "$work/results.txt"
      q0=$(queries_done)
      timeout -s INT "$measure_s" strace -c -f -q -p "$pid" -o "$work/strace-$v.txt"
      q1=$(queries_done)
      wait "$lg"
      q=$((q1 - q0))
      # strace -c: calls in column 4 (errors in 5 when present); name last.
      awk -v v="$v" -v q="$q" '
        $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" { c[$NF] = $4; t += $4 }
        END { printf "%-7s strace   queries %d  syscalls/q %.2f |", v, q, t / q
              for (k in c) if (c[k] / q >= 0.05) printf " %s %.2f", k, c[k] / q
              print "" }' "$work/strace-$v.txt" | tee -a "$work/results.txt"
    else
      start "$v" "valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes ${CALLGRIND_ARGS:-} --callgrind-out-file=$work/cg-$v.%p"
      rm -f "$work/cg-$v".*
      loadgen "$v" "$warm_s"
      loadgen "$v" $((measure_s + 14)) &
      lg=$!
      sleep 10  # the connections' handshakes are slow under callgrind: none in the span
      q0=$(queries_done)
      callgrind_control -i on "$pid" >/dev/null 2>&1
      sleep "$measure_s"
      callgrind_control -i off "$pid" >/dev/null 2>&1
      q1=$(queries_done)
      callgrind_control -d "$pid" >/dev/null 2>&1
      wait "$lg"
      sleep 1
      q=$((q1 - q0))
      # A file a thread (PREFIX[.N]-TT), named here by what it runs: the HTTP loops, the fan-out,
      # ZeroMQ's I/O thread; instructions summed over the dumps.
      for f in "$work/cg-$v".*-*; do
        [ -f "$f" ] || continue
        n=other
        grep -q 'CpuHome::PollLoop' "$f" && continue  # the home's idle-priority poller: not the queries' work
        if grep -q 'HttpLoops::Loop::Run' "$f"; then n=http-loop
        elif grep -q 'Fanout::Impl::Run' "$f"; then n=fanout
        elif grep -q 'libzmq' "$f"; then n=zmq-io; fi  # libzmq has no symbols here
        echo "$n $(awk '/^totals:/ { print $2; exit }' "$f")"
      done | awk -v v="$v" -v q="$q" '{ s += $2; t[$1] += $2 } END {
        printf "%-7s instr    queries %d  instructions/q %d |", v, q, s / q
        for (n in t) if (t[n] / q >= 100) printf " %s %d", n, t[n] / q; printf " |" }' | tee -a "$work/results.txt"
      # Of those, TLS handshakes (connections opened in the span: none when all were kept alive).
      for f in "$work/cg-$v".*-*; do
        [ -f "$f" ] && callgrind_annotate --inclusive=yes "$f" 2>/dev/null | grep 'HttpLoops::Loop::Handshake(' | awk '{ gsub(",", "", $1); print $1 }'
      done | awk -v q="$q" '{ s += $1 } END { printf " handshakes %d\n", s / q }' | tee -a "$work/results.txt"
    fi
    scripts/cluster.sh stop --run-dir "$run" >/dev/null 2>&1
  done
done
