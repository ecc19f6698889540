# Sourced by the benchmark and load scripts (bench_gpu.sh, bench_hybrid.sh, bench_scale.sh,
# serving_cost.sh, soak.sh): progress lines with the seconds since start, a field of searchctl's
# one-line JSON answers, the background processes (appended to pids) killed when the script
# exits, and a process's CPU time (cpu_ns).
bench_t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - bench_t0 ))s] $*"; }
field() { echo "$1" | grep -o "\"$2\":[^,}]*" | head -1 | cut -d: -f2 | tr -d '"'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
# CPU time of each thread of PID in ns (/proc/PID/task/TID/schedstat: time on a CPU; clock ticks,
# 10 ms, are too coarse for short rounds): "TID NAME NS" (NAME with spaces as _).
thread_ns() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s %s\n' "${t##*/}" "$(tr ' ' _ <"$t/comm" 2>/dev/null)" "$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null)"
  done | awk 'NF == 3'
}
# A long-lived process's CPU time in ns: its threads' sum (a thread that exits takes its time along),
# less its CPU homes' pollers (threads named cpu-home-poll: idle-priority spinning, core/cpu_home.hpp),
# which take only time no other thread wants; thread_cpu.sh lists them. Each thread's own counter: a
# process total less its pollers read a moment later would lose what they spun in between.
cpu_ns() { thread_ns "$1" | awk '$2 != "cpu-home-poll" { t += $3 } END { printf "%.0f\n", t }'; }
# The GPU host's first line of a log: cores, their model (hosts of one kind differ, and a GPU / CPU
# ratio moves with the CPU engine's host), GPU, UTC time.
gpu_machine() {
  step "machine: $(nproc) cores ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%Y-%m-%dT%H:%MZ)"
}
# The synthetic shard of DOCS documents (seed 1, one shard) in DIR, generated with the caller's
# `ctl` (its searchctl) unless DIR already holds one: synthetic_shard DOCS DIR
synthetic_shard() {
  [ -f "$2/manifest.json" ] && return 0
  step "generate --docs $1"
  rm -rf "$2"
  ctl generate --docs "$1" --out "$2" --shards 1 --seed 1 --threads "$(nproc)" --quiet
}
# The GOV2-shaped log's --min-df for a shard of DOCS documents (4 in 100,000, at least 1): gov2_min_df DOCS
gov2_min_df() { local m=$(( ($1 * 4 + 99999) / 100000 )); [ "$m" -ge 1 ] || m=1; echo "$m"; }
# gen-queries' flags for the query-log shapes of issue 52 (gpu_shapes.sh, gpu_latency.sh): log_shape LOG DOCS
log_shape() {
  case $1 in
    gov2) echo "--lengths 0,27,33,40 --four-share 0.6 --df-exponent 0.62 --min-df $(gov2_min_df "$2")" ;;
    default) echo "" ;;
    single) echo "--lengths 50,20,15,15" ;;
    long) echo "--lengths 0,0,0,100 --four-share 0" ;;
    one) echo "--lengths 100,0,0,0" ;;
    two) echo "--lengths 0,100,0,0" ;;
    df1) echo "--df-exponent 1.0" ;;
    *) echo "unknown log $1" >&2; return 1 ;;
  esac
}
# A GPU benchmark's start (gpu_shapes.sh, gpu_latency.sh): the machine line, then the synthetic shard
# of DOCS documents in WORK/synthetic-DOCS, whose path it sets in idx: gpu_synthetic_start DOCS WORK
gpu_synthetic_start() { gpu_machine; mkdir -p "$2"; idx=$2/synthetic-$1; synthetic_shard "$1" "$idx"; }
