#!/usr/bin/env bash
# Several bench/scripts/bench_hybrid.sh sweeps on one host, one after another over the same index, each
# with its own schedulers, node flags and settings, merged into one CSV, table and plot: the
# variants of a Fig. 7 run compared on the same machine (issue 6). One command on the GPU host.
#
# usage: bench/scripts/bench_hybrid_runs.sh RUNS_FILE [DOCS] [WORK_DIR]
#   RUNS_FILE  one run a line: LABEL|MODES|NODE FLAGS|SETTINGS, e.g.
#                d4|gpu hybrid||START_RATE=3000 MAX_STEPS=26
#                shared|gpu hybrid|--tuning sched_cpu_cores=0|
#                old|gpu||NODE_BIN=.bundle/bin/search-node-old
#              LABEL names the run's series (MODE-LABEL), NODE FLAGS go after the common NODE_ARGS,
#              SETTINGS are VAR=value words for bench_hybrid.sh (they win over the common ones);
#              blank lines and lines starting with # are skipped. A LABEL given again (e.g. g, h,
#              g, h, g, h: interleaved, so that a noisy minute of the host does not fall on one
#              series only) reads its series again: plot_fig7.py pools a rate's readings into their
#              median p99. REPEATS=N does the same for the whole file: its runs in order, N times.
#   DOCS, WORK_DIR as for bench_hybrid.sh (the index is generated once and kept).
# env: everything bench_hybrid.sh reads applies to every run (NODE_ARGS is the common part);
#      OUT_DIR (default WORK_DIR/runs: run N's files in OUT_DIR/rN, the merged fig7.csv, fig7.md and
#      fig7.png in OUT_DIR), PIN=halves (NODE_CPUS and CLIENT_CPUS, unless set, to the first and the
#      second half of the host's cores, whole cores together: the node apart from its clients) or
#      PIN=node:N (the node on the first whole cores that make N CPUs, as a host of N CPUs would
#      give it, and its clients on all the others),
#      LOADGEN_PIN=N (with PIN: the clients' last N CPUs to the load generator and host_jitter
#      alone, bench_hybrid.sh's LOADGEN_CPUS, and the rest to the integrator),
#      BUDGET_S (no run starts past this many seconds, and a run is stopped at it; default none),
#      MAX_STEAL_PCT (bench_hybrid.sh's: a noisy step ends its run and every later one),
#      REPEATS (default 1: the runs file's runs this many times over, interleaved),
#      BENCH (default bench/scripts/bench_hybrid.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
runs=${1:?usage: bench/scripts/bench_hybrid_runs.sh RUNS_FILE [DOCS] [WORK_DIR]}
docs=${2:-25200000}
work=${3:-/dev/shm/gpu-bench}
out=${OUT_DIR:-$work/runs}
bench=${BENCH:-bench/scripts/bench_hybrid.sh}
[ -r "$runs" ] || { echo "bench_hybrid_runs: cannot read $runs" >&2; exit 2; }
repeats=${REPEATS:-1}
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "bench_hybrid_runs: REPEATS is a count of 1 or more, not '$repeats'" >&2; exit 2; }
mkdir -p "$out"

# The host's cores in two halves of whole cores (thread siblings kept together), or N CPUs of
# whole cores for the node and the rest for its clients.
if [ -n "${PIN:-}" ] && [ -z "${NODE_CPUS:-}" ]; then
  if [ "$PIN" = halves ]; then
    node_n=0
  elif [[ $PIN =~ ^node:[1-9][0-9]*$ ]]; then
    node_n=${PIN#node:}
  else
    echo "bench_hybrid_runs: PIN is halves or node:N (N CPUs for the node), not '$PIN'" >&2
    exit 2
  fi
  read -r NODE_CPUS CLIENT_CPUS < <(NODE_N=$node_n python3 - <<'EOF'
import glob, os
groups = set()
for f in glob.glob('/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list'):
    cpus = []
    for part in open(f).read().strip().split(','):
        a, _, b = part.partition('-')
        cpus += range(int(a), int(b or a) + 1)
    groups.add(tuple(sorted(cpus)))
groups = sorted(groups)
half, want = max(1, len(groups) // 2), int(os.environ['NODE_N'])
if want > 0:  # the first whole cores that hold want CPUs, at least one core left to the clients
    half, n = 0, 0
    while half < len(groups) - 1 and n < want:
        n += len(groups[half])
        half += 1
    half = max(1, half)  # one core only: the node and its clients share it, as with halves
fmt = lambda gs: ','.join(str(c) for g in gs for c in g)
print(fmt(groups[:half]), fmt(groups[half:]) or fmt(groups[:half]))
EOF
  )
  export NODE_CPUS CLIENT_CPUS
  echo "bench_hybrid_runs: node on CPUs $NODE_CPUS, clients on $CLIENT_CPUS"
fi
if [ -n "${LOADGEN_PIN:-}" ] && [ -z "${LOADGEN_CPUS:-}" ]; then
  IFS=, read -r -a client_list <<<"${CLIENT_CPUS:-}"
  if ! [[ $LOADGEN_PIN =~ ^[1-9][0-9]*$ ]] || [ "$LOADGEN_PIN" -ge "${#client_list[@]}" ]; then
    echo "bench_hybrid_runs: LOADGEN_PIN must be a count below the clients' ${#client_list[@]} CPUs (set PIN), not '$LOADGEN_PIN'" >&2
    exit 2
  fi
  LOADGEN_CPUS=$(IFS=,; echo "${client_list[*]: -$LOADGEN_PIN}")
  export LOADGEN_CPUS
  echo "bench_hybrid_runs: load generator on CPUs $LOADGEN_CPUS"
fi

export KEEP=1
n=0
csvs=()
while IFS='|' read -r label modes flags settings || [ -n "$label" ]; do
  case "$label" in '' | '#'*) continue ;; esac
  n=$((n + 1))
  limit=()
  if [ -n "${BUDGET_S:-}" ]; then
    left=$((BUDGET_S - SECONDS))
    [ "$left" -gt 30 ] || { echo "bench_hybrid_runs: no time left for run $n ($label)"; break; }
    limit=(timeout "$left")
  fi
  dir=$out/r$n
  rm -rf "$dir"  # an earlier call's run N (its noisy mark above all) is not this one's
  mkdir -p "$dir"
  echo "bench_hybrid_runs: run $n, $label: ${modes:-default schedulers}; node flags: ${flags:-none}; ${settings:-}"
  # shellcheck disable=SC2086  # SETTINGS are words
  env OUT_DIR="$dir" LABEL="$label" MODES="${modes:-${MODES:-cpu gpu hybrid griffin}}" \
    NODE_ARGS="${NODE_ARGS:-} $flags" $settings "${limit[@]}" "$bench" "$docs" "$work" >"$dir/log.txt" 2>&1
  echo "bench_hybrid_runs: run $n ended with status $? at $SECONDS s"
  [ -f "$dir/fig7.csv" ] && csvs+=("$dir/fig7.csv")
  if [ -f "$dir/noisy" ]; then  # bench_hybrid.sh's MAX_STEAL_PCT: no later run on this host
    echo "bench_hybrid_runs: $(cat "$dir/noisy"); no later run"
    break
  fi
done < <(for _ in $(seq "$repeats"); do cat "$runs"; echo; done)
[ ${#csvs[@]} -gt 0 ] || { echo "bench_hybrid_runs: no run wrote a CSV" >&2; exit 1; }
{ head -1 "${csvs[0]}"; for f in "${csvs[@]}"; do tail -n +2 "$f"; done; } >"$out/fig7.csv"
python3 bench/scripts/plot_fig7.py "$out/fig7.csv" "$out/fig7.png" | tee "$out/fig7.md"
