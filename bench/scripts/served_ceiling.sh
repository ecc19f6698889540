#!/usr/bin/env bash
# Issue 52, goal 2, on one GPU host in one call: what the serving path delivers of what the engines
# can do. First the ceilings, in-process `searchctl bench` on the GOV2-shaped `and` log: the GPU
# engine on the node's CPUs, and the CPU engine on the CPUs that hybrid gives its CPU workers (5/8
# of the node's). Then the served sweeps through a real integrator (bench_hybrid.sh: Poisson
# arrivals, 512 connections, result cache off), gpu and then hybrid, each up to the first step whose
# p99 is above 10 ms. Prints each ceiling, each scheduler's highest rate with p99 <= 10 ms and no
# deadline miss, and the ratios: gpu / GPU ceiling, hybrid / (GPU ceiling + CPU ceiling). A sweep
# whose last step still held reports its rate as ">=": raise its start or MAX_STEPS.
#
# usage: BUNDLE=DIR bench/scripts/served_ceiling.sh [DOCS] [WORK_DIR]
#   BUNDLE  bin/ and lib/ as scripts/bundle.sh makes them (searchctl, search-node, search-integrator,
#           host_jitter);  DOCS default 25200000;  WORK_DIR default /dev/shm/gpu-bench (the index is
#           generated there unless it exists; each sweep's files go to WORK_DIR/served-SCHEDULER).
#   env: NODE_CPUS (0-15), CLIENT_CPUS (16-31), LOADGEN_CPUS (28-31): a 2 x H200 host's 32 CPUs, the
#        node apart from its clients; CPU_CEILING_CPUS (0-9, the node's CPUs that hybrid's CPU
#        workers get); GPU_START (36000), HYBRID_START (48000), or START_FRACTION (unset; e.g. 0.6:
#        each sweep starts at that share of its ceiling: gpu's, and gpu's plus cpu's), FACTOR (1.1),
#        MAX_STEPS (8), SECS (8 measured seconds a step), P99_MS (10); a sweep whose first step is
#        over P99_MS sweeps again from half its start, by RETRY_FACTOR (1.15) for RETRY_STEPS (5);
#        WITHIN (1; 0 skips the GPU engine's rate within the p99 target, below); CEILINGS_ONLY=1
#        stops after the ceilings; CEILINGS ("GPU_QPS GPU_P99_US CPU_QPS", as an earlier run's
#        CEILINGS= line printed them: taken as measured, nothing re-measured); SCHEDULERS ("gpu
#        hybrid": the sweeps to run; one left out reads "-" in the summary).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
b=${BUNDLE:?BUNDLE=bundle of this build}
node_cpus=${NODE_CPUS:-0-15}
p99_ms=${P99_MS:-10}
ctl() { LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" "$@"; }
count_cpus() { taskset -c "$1" nproc; }

gpu_synthetic_start "$docs" "$work" || exit 1
q=$work/queries-$docs.txt  # bench_hybrid.sh's log, made the same way
# shellcheck disable=SC2046
[ -f "$q" ] || ctl gen-queries --index "$idx" --count 10000 --out "$q" --seed 1 $(log_shape gov2 "$docs") >/dev/null || exit 1

inproc() {  # CPUS ENGINE [flags...]: the engine's in-process q/s on CPUS, one client thread a CPU
  local cpus=$1 engine=$2 r
  shift 2
  r=$(taskset -c "$cpus" timeout 300 env LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" bench --index "$idx" --queries "$q" \
    --k 10 --seconds 4 --warmup 1 --mode and --engine "$engine" --threads "$(count_cpus "$cpus")" "$@" 2>"$work/inproc.err")
  echo "inproc cpus=$cpus engine=$engine $r" >&2
  [ -n "$r" ] || { echo "inproc: searchctl bench printed no result:" >&2; tail -5 "$work/inproc.err" >&2; }
  [ "$engine" = gpu ] && [ -n "$(field "$r" verify_mismatches)" ] && [ "$(field "$r" verify_mismatches)" != 0 ] && { echo "GPU verify mismatches: $(field "$r" verify_mismatches)" >&2; }
  echo "$(field "$r" qps) $(field "$r" p99_us)"
}
step "ceilings"
if [ -n "${CEILINGS:-}" ]; then
  read -r gpu_ceiling gpu_ceiling_p99 cpu_ceiling <<<"$CEILINGS"
  [ -n "$cpu_ceiling" ] || { echo "CEILINGS needs three numbers: GPU_QPS GPU_P99_US CPU_QPS" >&2; exit 2; }
else
  read -r gpu_ceiling gpu_ceiling_p99 < <(inproc "$node_cpus" gpu --verify 300)
  read -r cpu_ceiling _ < <(inproc "${CPU_CEILING_CPUS:-0-9}" cpu)
fi
echo "ceiling gpu $gpu_ceiling q/s (cpus $node_cpus, a batch's p99 $gpu_ceiling_p99 us), cpu $cpu_ceiling q/s (cpus ${CPU_CEILING_CPUS:-0-9})"
echo "CEILINGS=\"$gpu_ceiling $gpu_ceiling_p99 $cpu_ceiling\""  # for a later run on this host
# The GPU ceiling's own batches can take longer than the served target: one client thread a CPU,
# each with a batch of 64 in flight. The GPU engine's rate within the target too: fewer client
# threads (the first CPUs of NODE_CPUS), two fewer each time, until a batch's p99 is within P99_MS.
ms_us=$((p99_ms * 1000)) within="" within_threads=$(count_cpus "$node_cpus")
if [ "${WITHIN:-1}" = 0 ] || [ -n "${CEILINGS:-}" ]; then
  within_threads=-
elif awk -v p="$gpu_ceiling_p99" -v l="$ms_us" 'BEGIN { exit !(p > l) }'; then
  first=${node_cpus%%[-,]*}
  while [ "$within_threads" -gt 1 ]; do
    within_threads=$((within_threads > 2 ? within_threads - 2 : 1))
    read -r wq wp < <(inproc "$first-$((first + within_threads - 1))" gpu)
    echo "gpu engine, $within_threads client threads: $wq q/s, a batch's p99 $wp us"
    if awk -v p="$wp" -v l="$ms_us" 'BEGIN { exit !(p != "" && p <= l) }'; then within=$wq; break; fi
  done
else
  within=$gpu_ceiling
fi
echo "gpu engine within p99 <= $p99_ms ms: ${within:--} q/s ($within_threads client threads)"
[ "${CEILINGS_ONLY:-0}" = 1 ] && exit 0

served() {  # SCHEDULER START: the sweep, then its highest rate with p99 <= P99_MS and no miss ("" if none)
  local out=$work/served-$1
  rm -rf "$out"
  step "served $1 from $2 q/s" >&2
  MODES=$1 BUNDLE=$b START_RATE=$2 FACTOR=${FACTOR:-1.1} MAX_STEPS=${MAX_STEPS:-8} SECONDS_PER_RATE=${SECS:-8} WARMUP=2 \
    CONNECTIONS=512 STOP_P99_MS=$p99_ms NODE_CPUS=$node_cpus CLIENT_CPUS=${CLIENT_CPUS:-16-31} \
    LOADGEN_CPUS=${LOADGEN_CPUS:-28-31} OUT_DIR=$out KEEP=1 bench/scripts/bench_hybrid.sh "$docs" "$work" >"$out.log" 2>&1
  # By name from fig7.csv: the step's latencies, then where a knee comes from: the integrator's CPU a
  # query, the GPU batch size, the load generator's wait for a free connection (an integrator or a
  # connection pool at its limit), the node's CPUs busy, and the node's and the integrator's time a
  # request.
  awk -F, -v want="scheduler,rate,achieved_qps,mean_ms,p50_ms,p95_ms,p99_ms,miss_ratio,queries,integrator_cpu_us_per_q,gpu_jobs_per_batch,loadgen_send_wait_p99_ms,node_cpus_busy_pct,node_request_ms,integrator_request_ms" '
    NR == 1 { n = split(want, w, ","); for (i = 1; i <= NF; i++) col[$i] = i }
    { line = ""; for (j = 1; j <= n; j++) line = line (j > 1 ? "," : "") (w[j] in col ? $col[w[j]] : "-"); print line }' "$out/fig7.csv" >&2
  # The held rate; ">=" when the sweep's last step held too (its knee lies beyond the sweep).
  awk -F, -v l="$p99_ms" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { last_ok = ($col["p99_ms"] <= l && $col["miss_ratio"] == 0); if (last_ok) best = $col["achieved_qps"] }
    END { if (best != "") printf "%s%d\n", (last_ok ? ">=" : ""), best }' "$out/fig7.csv"
}
share() { awk -v c="$1" -v f="$2" 'BEGIN { printf "%d", c * f }'; }
both=$(awk -v g="$gpu_ceiling" -v c="$cpu_ceiling" 'BEGIN { printf "%.0f", g + c }')
gpu_start=${GPU_START:-36000} hybrid_start=${HYBRID_START:-48000}
if [ -n "${START_FRACTION:-}" ]; then
  gpu_start=$(share "$gpu_ceiling" "$START_FRACTION") hybrid_start=$(share "$both" "$START_FRACTION")
fi
# A sweep whose first step already broke sweeps again from half its start, by RETRY_FACTOR.
served_or_lower() {  # SCHEDULER START
  local r
  r=$(served "$1" "$2")
  [ -n "$r" ] && { echo "$r"; return; }
  FACTOR=${RETRY_FACTOR:-1.15} MAX_STEPS=${RETRY_STEPS:-5} served "$1" "$(share "$2" 0.5)"
}
scheds=" ${SCHEDULERS:-gpu hybrid} " gpu_served="" hybrid_served=""
[[ $scheds == *" gpu "* ]] && gpu_served=$(served_or_lower gpu "$gpu_start")
[[ $scheds == *" hybrid "* ]] && hybrid_served=$(served_or_lower hybrid "$hybrid_start")
ratio() { awk -v s="${1#>=}" -v c="$2" -v ge="${1%%[0-9]*}" 'BEGIN { if (s == "" || c <= 0) print "-"; else printf "%s%.1f%%", ge, 100 * s / c }'; }
step "summary (docs=$docs, GOV2-shaped and, p99 <= $p99_ms ms)"
echo "| scheduler | served q/s | ceiling q/s | served / ceiling |"
echo "|---|---|---|---|"
echo "| gpu | ${gpu_served:--} | $(printf '%.0f' "$gpu_ceiling") (GPU engine) | $(ratio "$gpu_served" "$gpu_ceiling") |"
[ -n "$within" ] && echo "| gpu | ${gpu_served:--} | $(printf '%.0f' "$within") (GPU engine, its batches' p99 <= $p99_ms ms) | $(ratio "$gpu_served" "$within") |"
echo "| hybrid | ${hybrid_served:--} | $both (GPU engine + CPU engine on ${CPU_CEILING_CPUS:-0-9}) | $(ratio "$hybrid_served" "$both") |"
