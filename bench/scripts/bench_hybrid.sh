#!/usr/bin/env bash
# Ding et al. 2009 Fig. 7 on one node (issue 6): mean and p99 latency against Poisson arrival rate
# for the node's schedulers (cpu, gpu, hybrid, griffin), with a deadline per query, driven by
# `searchctl loadgen` through a real integrator (result cache off) and a real search-node over a
# synthetic GOV2-shaped shard (as bench/scripts/bench_scale.sh makes it). Per scheduler the rate climbs
# geometrically from START_RATE until more than MISS_LIMIT of the queries miss their deadline;
# the sustained rate is the highest with at most 1% misses. Writes a CSV, a markdown table and,
# with matplotlib, the plot (bench/scripts/plot_fig7.py). One command on the GPU host; nothing is
# downloaded.
#
# usage: bench/scripts/bench_hybrid.sh [DOCS] [WORK_DIR]
#   DOCS      documents (default 25200000); WORK_DIR (default /dev/shm/gpu-bench: shares the index
#             bench/scripts/bench_gpu.sh leaves there with KEEP=1)
# The node's /metrics after each scheduler's run goes to OUT_DIR/node-metrics-MODE.txt.
# env: BUNDLE (default .bundle: searchctl, search-node, search-integrator, host_jitter and their
#      libraries),
#      MODES ("cpu gpu hybrid griffin"), QMODE (and), START_RATE (300), FACTOR (1.6),
#      MAX_STEPS (8), SECONDS_PER_RATE (5), WARMUP (1), DEADLINE_MS (500), MISS_LIMIT (0.05),
#      STOP_P99_MS (unset: off; e.g. 10: a scheduler's sweep also ends after the first step whose p99 is above it),
#      RAMP (1: each step's warm-up arrivals come at a rate rising from 0 to the step's, loadgen
#      --ramp-up, so a step does not open with the rate's worth of new connections at once, a
#      start-up backlog that near a knee could outlast the warm-up; 0: the full rate from the start),
#      CONNECTIONS (256), OUT_DIR (where fig7.csv / fig7.md / fig7.png go; default WORK_DIR),
#      PRELOAD_MB (8192: --gpu-preload-mb for the schedulers that use the GPU, so the curves compare
#      processors with the lists resident rather than the first minutes' PCIe copies; 0 = none),
#      NODE_ARGS (extra search-node flags), INTEGRATOR_ARGS (extra search-integrator flags),
#      HTTP_LOOPS (search-integrator --http-loops; default its own),
#      KEEPALIVE_REQUESTS (100: the integrator's --http-keep-alive-requests),
#      NODE_BIN (the search-node to run; default BUNDLE/bin/search-node) and LABEL (appended to the
#      scheduler's name in the CSV, e.g. to compare two builds on one host: gpu-old, gpu-new),
#      WARM_PASS (1: one unrecorded pass over the query log at START_RATE before each sweep; 0: none),
#      JITTER (1: run bench/host/host_jitter, BUNDLE/bin/host_jitter, beside the sweep and record
#      each step's host stalls, host_stall_max_ms and host_stall_sum_ms; 0 or no binary: "-"),
#      MAX_STEAL_PCT (unset: off; e.g. 1.5: a step whose host_steal_pct, the hypervisor's share of the
#      host's CPU time, exceeds it ends the whole call: the step is recorded, no later step or
#      scheduler runs, and OUT_DIR/noisy says why, so a noisy host costs one step, not a sweep),
#      TRACE=1 (each step's per-query loadgen --trace to OUT_DIR/trace-SCHEDULER-RATE.csv; the
#      node's slow-query lines, with NODE_ARGS="--slow-query-ms MS", go to OUT_DIR/slow-SCHEDULER.log),
#      THREAD_CPU=1 (each step's cores by thread name of the node and the integrator, from
#      bench/scripts/thread_cpu.sh, to OUT_DIR/threads-SCHEDULER-RATE.txt),
#      STEP_HOOK (a command run beside each step after its warm-up: HOOK NODE_PID SERIES RATE
#      SECONDS OUT_DIR, e.g. a profiler),
#      NODE_CPUS and CLIENT_CPUS (taskset CPU lists, e.g. 0-15 and 16-31 on a 32-core host: the node
#      on the first, the integrator, the load generator and host_jitter on the second, so the node's
#      processors are measured apart from the serving path's clients, as on separate machines; the
#      node sizes its workers and judges idle cores by its own CPUs, and each step records how busy
#      those CPUs were, node_cpus_busy_pct; default: unpinned),
#      LOADGEN_CPUS (a taskset CPU list for the load generator and host_jitter alone, the
#      integrator keeping CLIENT_CPUS less these: the measuring instrument apart from the serving
#      path it measures, whose threads would otherwise delay the load generator's event loops and
#      show up as send wait; default: with the integrator),
#      LOADGEN_THREADS (searchctl loadgen --threads; default its own),
#      LOADGEN_PIN_LOOPS (1: searchctl loadgen --pin-loops, each event loop on one CPU of its own;
#      default 1 with LOADGEN_CPUS, else 0),
#      THP (always|madvise|never: the host's transparent huge pages, /sys/kernel/mm/transparent_hugepage/
#      enabled, for this sweep, set before the node starts and put back when the script exits; needs
#      root; default: left as it is. The node's norms and list cache are arrays of hundreds of MiB
#      read at random, a 4 KiB page's TLB miss a scored document; a step line says what was set),
#      BASE_PORT (7700: the integrator's HTTP port; the node, the node's and the integrator's metrics the next three),
#      KEEP=1 keeps the index.
# Each step also records the GPU dispatchers' CPU time per GPU job, inside the GPU executor's
# batches and the scheduler's own (dispatch_batch_cpu_us_per_gpu_job, dispatch_sched_cpu_us_per_gpu_job),
# and the batches' CPU and wall time per GPU job by part (batch_{prepare,acquire,engine,finish}_cpu_us
# and _wall_us: search_gpu_batch_cpu_seconds_total, search_gpu_batch_seconds_total; Griffin's
# steps are outside them), the cheap bound at the step's end (cheap_threshold_us), and a CPU
# worker's wall time a CPU job in the engine and after it (cpu_run_us_per_cpu_job, then
# cpu_account_us_per_cpu_job, cpu_answer_us_per_cpu_job and cpu_lock_us_per_cpu_job:
# search_sched_cpu_worker_seconds_total; older CSVs have their sum as cpu_finish_us_per_cpu_job),
# and the cost model's bias on each processor's jobs of the step (cpu_model_ratio, gpu_model_ratio:
# what they took over what the model had predicted, search_sched_model_{observed,predicted}_seconds_total;
# "-" where it learned from none).
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
bundle=${BUNDLE:-.bundle}
modes=${MODES:-cpu gpu hybrid griffin}
qmode=${QMODE:-and}
thp_file=/sys/kernel/mm/transparent_hugepage/enabled
thp_was=
if [ -n "${THP:-}" ]; then
  thp_was=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$thp_file" 2>/dev/null)
  if [ -n "$thp_was" ] && echo "$THP" 2>/dev/null >"$thp_file"; then
    trap 'echo "$thp_was" >"$thp_file" 2>/dev/null; cleanup' EXIT
    step "transparent huge pages: $(cat "$thp_file") (were $thp_was)"
  else
    echo "bench_hybrid: cannot set THP=$THP in $thp_file (root? a kernel with THP?)" >&2
    exit 2
  fi
fi
start_rate=${START_RATE:-300}
factor=${FACTOR:-1.6}
max_steps=${MAX_STEPS:-8}
secs=${SECONDS_PER_RATE:-5}
warmup=${WARMUP:-1}
deadline=${DEADLINE_MS:-500}
miss_limit=${MISS_LIMIT:-0.05}
conns=${CONNECTIONS:-256}
out_dir=${OUT_DIR:-$work}
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ctl=$bundle/bin/searchctl
mkdir -p "$work" "$out_dir"
idx=$work/synthetic-$docs
qlog=$work/queries-$docs.txt

step "machine: $(nproc) cores, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%Y-%m-%dT%H:%MZ)"
if [ ! -f "$idx/manifest.json" ]; then
  step "generate --docs $docs"
  rm -rf "$idx"
  "$ctl" generate --docs "$docs" --out "$idx" --shards 1 --seed 1 --threads "$(nproc)" --quiet || exit 1
fi
# shellcheck disable=SC2046
[ -f "$qlog" ] || "$ctl" gen-queries --index "$idx" --count 10000 --out "$qlog" --seed 1 $(log_shape gov2 "$docs") \
  >/dev/null || exit 1

node_pin=() client_pin=() loadgen_pin=() integrator_cpus=${CLIENT_CPUS:-any}
[ -n "${NODE_CPUS:-}" ] && node_pin=(taskset -c "$NODE_CPUS")
[ -n "${CLIENT_CPUS:-}" ] && client_pin=(taskset -c "$CLIENT_CPUS")
if [ -n "${LOADGEN_CPUS:-}" ]; then
  loadgen_pin=(taskset -c "$LOADGEN_CPUS")
  if [ -n "${CLIENT_CPUS:-}" ]; then  # the integrator on CLIENT_CPUS less the load generator's
    rest=$(python3 -c 'import sys
def cpus(spec):
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out
lg = set(cpus(sys.argv[2]))
print(",".join(str(c) for c in cpus(sys.argv[1]) if c not in lg))' "$CLIENT_CPUS" "$LOADGEN_CPUS") ||
      { echo "bench_hybrid: bad CLIENT_CPUS or LOADGEN_CPUS" >&2; exit 2; }
    [ -n "$rest" ] || { echo "bench_hybrid: LOADGEN_CPUS leaves the integrator none of CLIENT_CPUS" >&2; exit 2; }
    integrator_cpus=$rest
    client_pin=(taskset -c "$integrator_cpus")
  fi
else
  loadgen_pin=("${client_pin[@]}")
fi
lg_threads=()
[ -n "${LOADGEN_THREADS:-}" ] && lg_threads=(--threads "$LOADGEN_THREADS")
http_engine=()
[ -n "${HTTP_LOOPS:-}" ] && http_engine+=(--http-loops "$HTTP_LOOPS")
# With CPUs of its own, each of the load generator's loops takes one of them (BENCHMARKS.md, Fig. 7;
# 2026-11-28 09:20Z: unpinned, its loops lagged their schedule by up to 8 ms at hybrid's rates).
[ "${LOADGEN_PIN_LOOPS:-$([ -n "${LOADGEN_CPUS:-}" ] && echo 1 || echo 0)}" = 1 ] && lg_threads+=(--pin-loops true)
ramp=()
[ "${RAMP:-1}" = 1 ] && ramp=(--ramp-up)
[ ${#node_pin[@]} -gt 0 ] || [ ${#client_pin[@]} -gt 0 ] && step "pinned: node ${NODE_CPUS:-any}, clients ${CLIENT_CPUS:-any}"
[ -n "${LOADGEN_CPUS:-}" ] && step "load generator and host_jitter on ${LOADGEN_CPUS}, the integrator on $integrator_cpus"
base_port=${BASE_PORT:-7700}
http_port=$base_port node_port=$((base_port + 1)) metrics_port=$((base_port + 2)) int_metrics_port=$((base_port + 3))
csv=$out_dir/fig7.csv
echo "scheduler,rate,achieved_qps,mean_ms,p50_ms,p95_ms,p99_ms,miss_ratio,queries,node_cpu_us_per_q,integrator_cpu_us_per_q,loadgen_cpu_us_per_q,host_busy_pct,host_steal_pct,host_stall_max_ms,host_stall_sum_ms,node_p99_ms_le,integrator_p99_ms_le,node_exec_ms,sched_wait_ms,sched_run_ms,host_features_ms,host_submit_ms,host_return_ms,host_resolve_ms,gpu_jobs,cpu_jobs,gpu_jobs_per_batch,cheap_jobs,loadgen_send_wait_p99_ms,node_cpus_busy_pct,dispatch_batch_cpu_us_per_gpu_job,dispatch_sched_cpu_us_per_gpu_job,batch_prepare_cpu_us,batch_acquire_cpu_us,batch_engine_cpu_us,batch_finish_cpu_us,batch_prepare_wall_us,batch_acquire_wall_us,batch_engine_wall_us,batch_finish_wall_us,cheap_threshold_us,node_queue_ms,node_request_ms,integrator_request_ms,integrator_shard_ms,cpu_run_us_per_cpu_job,cpu_account_us_per_cpu_job,cpu_answer_us_per_cpu_job,cpu_lock_us_per_cpu_job,loadgen_release_lag_p99_ms,cpu_model_ratio,gpu_model_ratio" >"$csv"
# The host's aggregate CPU counters: total, idle (idle + iowait) and steal ticks. Busy and steal
# shares per step show a host whose other tenants or hypervisor took cores (steal) or whose cores
# ran out (busy near 100%), which the per-process columns alone cannot tell apart.
host_ticks() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; ++i) t += $i; print t, $5 + $6, $9; exit }' /proc/stat; }
# With NODE_CPUS, the node's own CPUs' total and idle ticks (their cpuN lines): how busy the cores
# the node may use were, apart from the clients' (node_cpus_busy_pct; "-" unpinned).
node_cpu_list=
[ -n "${NODE_CPUS:-}" ] && node_cpu_list=$(echo "$NODE_CPUS" | tr ',' '\n' |
  awk -F- 'NF == 2 { for (c = $1; c <= $2; ++c) print c; next } { print $1 }' | tr '\n' ' ')
node_cpu_ticks() {
  awk -v list="$node_cpu_list" 'BEGIN { n = split(list, a, " "); for (i = 1; i <= n; ++i) want["cpu" a[i]] = 1 }
    ($1 in want) { for (i = 2; i <= NF; ++i) t += $i; idle += $5 + $6 } END { print t + 0, idle + 0 }' /proc/stat
}
# The p99 of a request-duration histogram between two /metrics scrapes, as the upper bound (ms) of
# the bucket it falls in (buckets double from 50 us): where the time went, the node's own handling
# or the path around it (integrator, HTTP, the load generator, the host's scheduling).
hist_p99() {  # before after component
  awk -v comp="$3" -v mode="$qmode" '
    index($0, "search_request_duration_seconds_bucket{") == 1 && index($0, "component=\"" comp "\"") &&
    index($0, "mode=\"" mode "\"") {
      match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
      if (FNR == NR) before[le] = $NF; else { after[le] = $NF; if (le != "+Inf") key[le + 0] = le }
    }
    END {
      total = after["+Inf"] - before["+Inf"]; if (total <= 0) { print "-"; exit }
      n = 0; for (b in key) v[++n] = b + 0
      for (i = 2; i <= n; ++i) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; --j) v[j + 1] = v[j]; v[j + 1] = x }
      for (i = 1; i <= n; ++i)
        if (after[key[v[i]]] - before[key[v[i]]] >= 0.99 * total) { printf "%g", v[i] * 1000; exit }
      print "inf"
    }' "$1" "$2"
}
# The mean (ms) of a histogram between two scrapes, over its series whose labels contain `match`
# (all of them with ""): the node's time per query by phase.
hist_mean() {  # before after name match
  awk -v name="$3" -v match_="$4" '
    (index($0, name "_sum") == 1 || index($0, name "_count") == 1) && index($0, match_) {
      kind = index($0, name "_sum") == 1 ? "s" : "c"
      v[kind] += (FNR == NR ? -1 : 1) * $NF
    }
    END { if (v["c"] > 0) printf "%.3f", 1000 * v["s"] / v["c"]; else printf "-" }' "$1" "$2"
}
# A counter's increase between two scrapes (the series whose line starts with `series`), printed
# with `format` (default %d).
counter_delta() {  # before after series [format]
  awk -v series="$3" -v fmt="${4:-%d}" 'index($0, series " ") == 1 { v += (FNR == NR ? -1 : 1) * $NF }
    END { printf fmt, v }' "$1" "$2"
}
# CPU microseconds per GPU job between two scrapes, for one part of a family: by default
# search_sched_gpu_dispatch_cpu_seconds_total, the GPU dispatchers' (batch: inside the GPU
# executor; scheduler).
dispatch_us() {  # before after part gpu_jobs [family]
  awk -v s="$(counter_delta "$1" "$2" "${5:-search_sched_gpu_dispatch_cpu_seconds_total}{part=\"$3\"}" %.9f)" -v jobs="$4" \
    'BEGIN { if (jobs > 0) printf "%.1f", 1e6 * s / jobs; else printf "-" }'
}
# Both processes' /metrics, to $work/node-mN.txt and $work/int-mN.txt (N: 0 before a step, 1 after).
scrape() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" >"$work/node-m$1.txt" 2>/dev/null
  curl -s "http://127.0.0.1:$int_metrics_port/metrics" >"$work/int-m$1.txt" 2>/dev/null
}
# host_jitter (bench/host): two threads that each sleep 1 ms at a time and log every wake-up more
# than 4 ms late, so a step's tail latency can be set against the host's own stalls (hypervisor,
# kernel, other tenants) over the same seconds. JITTER=0, or no binary: the columns read "-".
jitter_log=$work/host-stalls.txt
jitter_pid=
if [ "${JITTER:-1}" = 1 ] && [ -x "$bundle/bin/host_jitter" ]; then
  "${loadgen_pin[@]}" "$bundle/bin/host_jitter" --threads 2 --threshold-ms 4 --out "$jitter_log" &
  jitter_pid=$!
  pids+=("$jitter_pid")
fi
host_stalls() {  # uptime_from uptime_to -> "latest_ms,sum_ms"
  [ -n "$jitter_pid" ] || { printf -- "-,-"; return; }
  awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b { if ($3 > m) m = $3; s += $3 } END { printf "%.1f,%.1f", m, s }' "$jitter_log"
}
node_bin=${NODE_BIN:-$bundle/bin/search-node}
label=${LABEL:+-$LABEL}

for mode in $modes; do
  step "scheduler $mode: starting node + integrator"
  preload=()
  [ "$mode" != cpu ] && preload=(--gpu-preload-mb "${PRELOAD_MB:-8192}")
  "${node_pin[@]}" "$node_bin" --index "$idx/shard-0" --listen "tcp://127.0.0.1:$node_port" --scheduler "$mode" \
    "${preload[@]}" --cache-mb 16384 --metrics "127.0.0.1:$metrics_port" --log-level info ${NODE_ARGS:-} >"$work/node-$mode.out" 2>"$work/node-$mode.err" &
  node_pid=$!
  pids+=("$node_pid")
  for _ in $(seq 1800); do grep -q '"ready"' "$work/node-$mode.out" 2>/dev/null && break; kill -0 "$node_pid" 2>/dev/null || break; sleep 0.1; done
  if ! grep -q '"ready"' "$work/node-$mode.out"; then
    echo "node ($mode) did not start:"; tail -5 "$work/node-$mode.err"; kill "$node_pid" 2>/dev/null; continue
  fi
  "${client_pin[@]}" "$bundle/bin/search-integrator" --shards "tcp://127.0.0.1:$node_port" --http "127.0.0.1:$http_port" \
    --cache-mb 0 --timeout-ms "$deadline" --http-keep-alive-requests "${KEEPALIVE_REQUESTS:-100}" \
    --metrics "127.0.0.1:$int_metrics_port" --log-level warn "${http_engine[@]}" ${INTEGRATOR_ARGS:-} \
    >"$work/integrator-$mode.out" 2>"$work/integrator-$mode.err" &
  int_pid=$!
  pids+=("$int_pid")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http_port/health" >/dev/null 2>&1 && break; sleep 0.1; done
  # One unrecorded pass over the whole query log first, so that every scheduler's sweep starts
  # with the node's main-memory list cache warm (the GPU schedulers' preload fills it; the cpu
  # scheduler's first step would otherwise pay for every list's first RocksDB read).
  if [ "${WARM_PASS:-1}" = 1 ]; then
    nq=$(wc -l <"$qlog")
    warm_secs=$(( (nq + start_rate - 1) / start_rate + 1 ))
    "${loadgen_pin[@]}" timeout $((warm_secs + 60)) "$ctl" loadgen --url "http://127.0.0.1:$http_port" --queries "$qlog" --mode "$qmode" \
      --rate "$start_rate" --seconds "$warm_secs" --warmup 0 --deadline-ms "$deadline" --connections "$conns" "${lg_threads[@]}" >/dev/null 2>&1
  fi
  rate=$start_rate
  for _ in $(seq "$max_steps"); do
    # Host CPU per answered query, by process (warm-up included in both the time and the count):
    # on one host the node's CPU engine, its GPU dispatch, the integrator and the load generator
    # share the cores.
    n0=$(cpu_ns "$node_pid") i0=$(cpu_ns "$int_pid"); read -r h0 hi0 hs0 < <(host_ticks); read -r c0 ci0 < <(node_cpu_ticks); u0=$(cut -d' ' -f1 /proc/uptime)
    scrape 0
    trace=()
    [ "${TRACE:-0}" = 1 ] && trace=(--trace "$out_dir/trace-$mode$label-$rate.csv")
    # THREAD_CPU=1: where the node's and the integrator's cores go in the step's measured seconds,
    # by thread name (bench/scripts/thread_cpu.sh), in threads-MODE-RATE.txt.
    if [ "${THREAD_CPU:-0}" = 1 ]; then
      ( sleep "$warmup"; bench/scripts/thread_cpu.sh "$secs" "$node_pid" "$int_pid" >"$out_dir/threads-$mode$label-$rate.txt" 2>&1 ) &
    fi
    # STEP_HOOK: a command run beside each step once its warm-up is over, with the node's pid, the
    # series name, the rate, the measured seconds and the output directory (e.g. a profiler, or
    # bench/scripts/step_net_hook.sh: the host's TCP counters and the integrator's metrics, for net_delta.py).
    if [ -n "${STEP_HOOK:-}" ]; then
      ( sleep "$warmup"; $STEP_HOOK "$node_pid" "$mode$label" "$rate" "$secs" "$out_dir" >/dev/null 2>&1 ) &
    fi
    line=$( { TIMEFORMAT='loadgen-cpu-seconds %U %S'; time "${loadgen_pin[@]}" timeout $((secs + warmup + 60)) "$ctl" loadgen --url "http://127.0.0.1:$http_port" --queries "$qlog" \
      --mode "$qmode" --rate "$rate" --seconds "$secs" --warmup "$warmup" --deadline-ms "$deadline" \
      --connections "$conns" "${lg_threads[@]}" "${ramp[@]}" "${trace[@]}"; } 2>"$work/loadgen.err"; )
    [ -n "$line" ] || { echo "loadgen failed at rate $rate"; break; }
    n1=$(cpu_ns "$node_pid") i1=$(cpu_ns "$int_pid"); read -r h1 hi1 hs1 < <(host_ticks); read -r c1 ci1 < <(node_cpu_ticks); u1=$(cut -d' ' -f1 /proc/uptime)
    scrape 1
    lg=$(awk '/^loadgen-cpu-seconds/ { print $2 + $3 }' "$work/loadgen.err" | tail -1)
    # Per query sent (rate x (warm-up + measured seconds)), in microseconds of one core.
    # The node's and the integrator's CPU in ns (cpu_ns: their threads less the pollers), the load
    # generator's in seconds (time's user + system).
    per_q() { awk -v t="$1" -v r="$rate" -v s=$((secs + warmup)) 'BEGIN { printf "%.1f", t / 1e3 / (r * s) }'; }
    diag_cols="$(per_q $((n1 - n0))),$(per_q $((i1 - i0))),$(per_q "$(awk -v x="${lg:-0}" 'BEGIN { printf "%.0f", x * 1e9 }')")"
    # The host's busy and steal shares (steal_pct also decides MAX_STEAL_PCT below).
    steal_pct=$(awk -v t=$((h1 - h0)) -v st=$((hs1 - hs0)) 'BEGIN { if (t <= 0) t = 1; printf "%.2f", 100 * st / t }')
    diag_cols="$diag_cols,$(awk -v t=$((h1 - h0)) -v i=$((hi1 - hi0)) 'BEGIN { if (t <= 0) t = 1; printf "%.1f", 100 * (t - i) / t }'),$steal_pct"
    # The host's own stalls in this step (host_jitter's late wake-ups): the latest, and their sum.
    diag_cols="$diag_cols,$(host_stalls "$u0" "$u1")"
    diag_cols="$diag_cols,$(hist_p99 "$work/node-m0.txt" "$work/node-m1.txt" node),$(hist_p99 "$work/int-m0.txt" "$work/int-m1.txt" integrator)"
    # Where the node's time per query went (means): its whole handling, the scheduler's queue
    # wait and run, and the host phases around the scheduler (search_sched_host_seconds).
    m0=$work/node-m0.txt m1=$work/node-m1.txt
    diag_cols="$diag_cols,$(hist_mean "$m0" "$m1" search_node_execution_seconds ""),$(hist_mean "$m0" "$m1" search_sched_wait_seconds ""),$(hist_mean "$m0" "$m1" search_sched_run_seconds "")"
    for ph in features submit return resolve; do
      diag_cols="$diag_cols,$(hist_mean "$m0" "$m1" search_sched_host_seconds "phase=\"$ph\"")"
    done
    gj=$(counter_delta "$m0" "$m1" 'search_sched_jobs_total{processor="gpu"}')
    cj=$(counter_delta "$m0" "$m1" 'search_sched_jobs_total{processor="cpu"}')
    gb=$(counter_delta "$m0" "$m1" search_sched_gpu_batches_total)
    diag_cols="$diag_cols,$gj,$cj,$(awk -v j="$gj" -v b="$gb" 'BEGIN { if (b > 0) printf "%.1f", j / b; else printf "-" }'),$(counter_delta "$m0" "$m1" search_sched_cheap_total)"
    # The load generator's own queue: how long the step's arrivals waited for a free connection.
    diag_cols="$diag_cols,$(awk -v u="$(field "$line" send_wait_p99_us)" 'BEGIN { if (u == "") print "-"; else printf "%.3f", u / 1000 }')"
    diag_cols="$diag_cols,$(awk -v t=$((c1 - c0)) -v i=$((ci1 - ci0)) -v pinned="$node_cpu_list" \
      'BEGIN { if (pinned == "" || t <= 0) print "-"; else printf "%.1f", 100 * (t - i) / t }')"
    diag_cols="$diag_cols,$(dispatch_us "$m0" "$m1" batch "$gj"),$(dispatch_us "$m0" "$m1" scheduler "$gj")"
    for fam in search_gpu_batch_cpu_seconds_total search_gpu_batch_seconds_total; do  # the batch part's own parts
      for part in prepare acquire engine finish; do diag_cols="$diag_cols,$(dispatch_us "$m0" "$m1" "$part" "$gj" $fam)"; done
    done
    # The cheap bound at the step's end (a gauge; hybrid's cheap jobs).
    diag_cols="$diag_cols,$(awk 'index($0, "search_sched_cheap_threshold_seconds ") == 1 { v = $NF } END { if (v == "") print "-"; else printf "%.1f", 1e6 * v }' "$m1")"
    # Means around the node's execution: its queue (received to a worker's start), its whole
    # handling (received to the reply's send) and the integrator's (HTTP request to answer).
    diag_cols="$diag_cols,$(hist_mean "$m0" "$m1" search_node_queue_seconds ""),$(hist_mean "$m0" "$m1" search_request_duration_seconds "")"
    diag_cols="$diag_cols,$(hist_mean "$work/int-m0.txt" "$work/int-m1.txt" search_request_duration_seconds "")"
    # The integrator's round trip to the node (its fan-out sends the request to the reply's
    # arrival): less node_request_ms, the wire and both sides' I/O threads; integrator_request_ms
    # less it, the HTTP side and the hand-offs to and from the fan-out's I/O thread.
    diag_cols="$diag_cols,$(hist_mean "$work/int-m0.txt" "$work/int-m1.txt" search_shard_request_duration_seconds "")"
    # A CPU worker's wall time a CPU job: the engine's run, and after it, taking no other job, the
    # job's accounting, its answer (the reply) and the wait for the scheduler's lock.
    for part in run account answer lock; do diag_cols="$diag_cols,$(dispatch_us "$m0" "$m1" "$part" "$cj" search_sched_cpu_worker_seconds_total)"; done
    # Of the load generator's wait, the part before its loops released the arrivals at all: where
    # it is most of loadgen_send_wait_p99_ms, the load generator fell behind its own schedule.
    diag_cols="$diag_cols,$(awk -v u="$(field "$line" release_lag_p99_us)" 'BEGIN { if (u == "") print "-"; else printf "%.3f", u / 1000 }')"
    for unit in cpu gpu; do
      diag_cols="$diag_cols,$(awk -v o="$(counter_delta "$m0" "$m1" "search_sched_model_observed_seconds_total{processor=\"$unit\"}" %.9f)" \
        -v p="$(counter_delta "$m0" "$m1" "search_sched_model_predicted_seconds_total{processor=\"$unit\"}" %.9f)" \
        'BEGIN { if (p > 0) printf "%.3f", o / p; else printf "-" }')"
    done
    miss=$(field "$line" miss_ratio)
    ms() { awk -v u="$(field "$line" "$1")" 'BEGIN { printf "%.3f", u / 1000 }'; }
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$mode$label" "$rate" "$(field "$line" achieved_qps)" "$(ms mean_us)" \
      "$(ms p50_us)" "$(ms p95_us)" "$(ms p99_us)" "$miss" "$(field "$line" queries)" | sed "s/\$/,$diag_cols/" | tee -a "$csv"
    if [ -n "${MAX_STEAL_PCT:-}" ]; then
      if awk -v s="$steal_pct" -v m="$MAX_STEAL_PCT" 'BEGIN { exit !(s > m) }'; then
        echo "host steal ${steal_pct}% at $mode$label $rate q/s is over MAX_STEAL_PCT=$MAX_STEAL_PCT: a noisy host, stopping" |
          tee "$out_dir/noisy"
        noisy=1
        break
      fi
    fi
    awk -v m="$miss" -v l="$miss_limit" 'BEGIN { exit !(m > l) }' && break
    [ -n "${STOP_P99_MS:-}" ] && awk -v p="$(ms p99_us)" -v l="$STOP_P99_MS" 'BEGIN { exit !(p > l) }' && break
    rate=$(awk -v r="$rate" -v f="$factor" 'BEGIN { printf "%d", r * f + 0.5 }')
  done
  # The node's scheduler counters for this run (jobs per processor, stolen, migrations, misses, error).
  curl -s "http://127.0.0.1:$metrics_port/metrics" >"$out_dir/node-metrics-$mode$label.txt" 2>/dev/null
  grep -E '^search_sched_(jobs|stolen|migrations|gpu_retries|deadline_misses|gpu_batches)_total|^search_sched_prediction_error_ratio_(sum|count)' \
    "$out_dir/node-metrics-$mode$label.txt" | grep -v '_bucket' | head -20
  # How much of the node's memory is on huge pages (THP): resident and huge, in kB.
  step "node memory ($mode): $(grep -E '^(Rss|AnonHugePages):' "/proc/$node_pid/smaps_rollup" 2>/dev/null | tr -s ' ' | tr '\n' ' ')"
  kill "$int_pid" "$node_pid" 2>/dev/null
  wait "$int_pid" "$node_pid" 2>/dev/null
  grep -h "scheduler\|calibrat\|preload" "$work/node-$mode.err" | tail -3
  # The node's slow-query log (NODE_ARGS="--slow-query-ms MS"), if any.
  grep -h "slow query" "$work/node-$mode.err" >"$out_dir/slow-$mode$label.log" 2>/dev/null || rm -f "$out_dir/slow-$mode$label.log"
  [ "${noisy:-0}" = 1 ] && break
done

step "summary (docs=$docs, $qmode, deadline $deadline ms)"
python3 bench/scripts/plot_fig7.py "$csv" "$out_dir/fig7.png" | tee "$out_dir/fig7.md"
[ "${KEEP:-0}" = 1 ] || rm -rf "$idx" "$qlog"
step "done"
