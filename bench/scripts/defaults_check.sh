#!/usr/bin/env bash
# Defaults and no-regression check, in one command on a GPU host with 32 or more cores: on one
# synthetic GOV2-shaped shard and query log, (1) `searchctl bench` in-process, the CPU and the GPU
# engine, `and` and `or`: an earlier build with the hand-tuned flags against this build with none;
# (2) through a real integrator, the gpu and hybrid schedulers at two Poisson rates: the earlier
# build with the flags of its best runs against this build's plain `search-node`.
# The node and the in-process benchmark run on NODE_CPUS, the integrator and the load generator on
# CLIENT_CPUS, so the two builds meet the same machine.
#
# usage: OLD=DIR NEW=DIR bench/scripts/defaults_check.sh [DOCS] [WORK_DIR]
#   OLD, NEW  bundles (bin/ and lib/, as scripts/bundle.sh makes them) of the two builds
#   DOCS      documents (default 25200000);  WORK_DIR  default /dev/shm/gpu-bench
# env: SECS (5: measured seconds a row), RATES ("24000 44000"), SCHEDULERS ("gpu hybrid"),
#      NODE_CPUS (0-15), CLIENT_CPUS (16-31), CONNECTIONS (512), PARTS ("inproc serve")
# Prints one table row a measurement: part, build, mode or scheduler, engine or rate, q/s, p99 ms.
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
old=${OLD:?OLD=bundle of the earlier build}
new=${NEW:?NEW=bundle of this build}
secs=${SECS:-5}
node_cpus=${NODE_CPUS:-0-15}
client_cpus=${CLIENT_CPUS:-16-31}
conns=${CONNECTIONS:-512}
ncpu=$(taskset -c "$node_cpus" nproc)

step "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) x $(nvidia-smi -L 2>/dev/null | wc -l), $(date -u +%Y-%m-%dT%H:%MZ)"
mkdir -p "$work"
idx=$work/synthetic-$docs
qlog=$work/queries-$docs.txt
min_df=$(( (docs * 4 + 99999) / 100000 ))
[ "$min_df" -ge 1 ] || min_df=1
ctl() { local b=$1; shift; LD_LIBRARY_PATH="$b/lib:$new/lib" "$b/bin/searchctl" "$@"; }
if [ ! -f "$idx/manifest.json" ]; then
  step "generate --docs $docs"
  rm -rf "$idx"
  ctl "$new" generate --docs "$docs" --out "$idx" --shards 1 --seed 1 --threads "$(nproc)" --quiet || exit 1
fi
[ -f "$qlog" ] || ctl "$new" gen-queries --index "$idx" --count 10000 --out "$qlog" --seed 1 \
  --lengths 0,27,33,40 --four-share 0.6 --min-df "$min_df" --df-exponent 0.62 || exit 1

rows=()
row() { rows+=("$(printf '%-7s %-9s %-7s %-7s %10s %8s' "$@")"); echo "ROW ${rows[-1]}"; }

inproc() {  # label bundle mode engine [flags...]
  local label=$1 b=$2 mode=$3 engine=$4; shift 4
  step "bench $label $mode $engine $*"
  local line
  line=$(taskset -c "$node_cpus" timeout 400 env LD_LIBRARY_PATH="$b/lib:$new/lib" "$b/bin/searchctl" bench --index "$idx" \
    --queries "$qlog" --k 10 --seconds "$secs" --warmup 1 --mode "$mode" --engine "$engine" "$@" 2>"$work/bench.err")
  [ -n "$line" ] || { tail -3 "$work/bench.err"; row bench "$label" "$mode" "$engine" failed -; return; }
  echo "$line"
  row bench "$label" "$mode" "$engine" "$(field "$line" qps | cut -d. -f1)" \
    "$(awk -v u="$(field "$line" p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')"
}

serve() {  # label bundle scheduler integrator_flags -- node_flags...
  local label=$1 b=$2 sched=$3 int_flags=$4; shift 4
  local port=5701 mport=9711 hport=9720 import=9721
  step "serve $label $sched: node $*"
  taskset -c "$node_cpus" env LD_LIBRARY_PATH="$b/lib:$new/lib" "$b/bin/search-node" --index "$idx/shard-0" \
    --listen "tcp://127.0.0.1:$port" --metrics "127.0.0.1:$mport" --scheduler "$sched" "$@" \
    >"$work/node.out" 2>"$work/node.err" &
  local node_pid=$!
  pids+=("$node_pid")
  for _ in $(seq 3000); do grep -q '"ready"' "$work/node.out" 2>/dev/null && break; kill -0 "$node_pid" 2>/dev/null || break; sleep 0.1; done
  grep -q '"ready"' "$work/node.out" || { echo "node did not start"; tail -5 "$work/node.err"; kill "$node_pid"; return; }
  grep -E 'cache|preload' "$work/node.err" | head -4
  # shellcheck disable=SC2086
  taskset -c "$client_cpus" env LD_LIBRARY_PATH="$b/lib:$new/lib" "$b/bin/search-integrator" --shards "tcp://127.0.0.1:$port" \
    --http "127.0.0.1:$hport" --metrics "127.0.0.1:$import" --cache-mb 0 --log-level warn $int_flags \
    >"$work/int.out" 2>"$work/int.err" &
  local int_pid=$!
  pids+=("$int_pid")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$hport/health" >/dev/null 2>&1 && break; sleep 0.1; done
  local lg=(taskset -c "$client_cpus" env LD_LIBRARY_PATH="$new/lib" "$new/bin/searchctl" loadgen
            --url "http://127.0.0.1:$hport" --queries "$qlog" --mode and --deadline-ms 500 --connections "$conns")
  timeout 120 "${lg[@]}" --rate 20000 --seconds 1 --warmup 0 >/dev/null 2>&1  # one unrecorded pass over the log
  for rate in ${RATES:-24000 44000}; do
    local line
    line=$(timeout $((secs + 70)) "${lg[@]}" --rate "$rate" --seconds "$secs" --warmup 2 2>/dev/null)
    echo "$line" | cut -c1-400
    row serve "$label" "$sched" "$rate" "$(field "$line" achieved_qps | cut -d. -f1)" \
      "$(awk -v u="$(field "$line" p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')"
  done
  kill "$int_pid" "$node_pid" 2>/dev/null
  wait "$int_pid" "$node_pid" 2>/dev/null
}

for part in ${PARTS:-inproc serve}; do
  case $part in
    inproc)
      for mode in and or; do
        inproc old-tuned "$old" "$mode" cpu --threads "$ncpu" --prewarm --list-cache-mib 16384
        inproc new-plain "$new" "$mode" cpu
        inproc old-tuned "$old" "$mode" gpu --threads "$ncpu" --batch 64 --list-cache-mib 16384
        inproc new-plain "$new" "$mode" gpu
      done ;;
    serve)
      for sched in ${SCHEDULERS:-gpu hybrid}; do
        serve old-tuned "$old" "$sched" "--http-threads $conns --http-keep-alive-requests 100" \
          --cache-mb 16384 --gpu-preload-mb 8192 --gpu-sync block
        serve new-plain "$new" "$sched" ""
      done ;;
  esac
done

step "summary (docs=$docs, node CPUs $node_cpus, clients $client_cpus)"
printf '%-7s %-9s %-7s %-7s %10s %8s\n' part build mode eng/rate q/s p99_ms
printf '%s\n' "${rows[@]}"
step "done"
