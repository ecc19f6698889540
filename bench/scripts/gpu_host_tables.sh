#!/usr/bin/env bash
# Issue 52's four tables for one GPU host, in one device call (under 10 minutes on a 1 x H200 host
# of 16 cores): goal 1 (gpu_shapes.sh: the GPU engine against the CPU engine on 16 cores, five
# query-log shapes, `and` and `or`), goal 3 (gpu_latency.sh: batch 1, warm), goal 2
# (served_ceiling.sh: served rate at p99 <= 10 ms under gpu and hybrid against the engines'
# in-process ceilings) and goal 4 (path_latency.sh: GCIDE as one shard, served p50 against
# in-process p50 from 100 q/s up). Goals 1-3 share one synthetic 25.2M-document shard (seed 1);
# GCIDE is converted and indexed beside its generation. Each goal's log goes to OUT_DIR/goalN.log as
# it runs (and nothing else does), so a call cut short still returns what ran; the summary tables
# end the output. Goal 1's query-language part (COUNT and TOP_10_COUNT per category,
# ql_gpu_table.sh) is the goal `ql`, a second call (`GOALS=ql`, about 300 s with the shard's
# generation): with the other four it would run past a device call's 10 minutes. Goal `floor` (for
# that second call: `GOALS="ql floor"`, about 40 s) is goal 4's transport floor: bench/host/
# transport_floor (BUNDLE/bin/transport_floor) alone, both processes on CPU FLOOR_CPU (2), and on
# that CPU beside an idle-priority spinner as the CPU homes' poller (--idle-spinner).
# Goal `ab` (a call of its own: `GOALS=ab`, about 8 minutes with the shard's generation) is goal 2's
# A/B of node settings on one host: the ceilings once, then served_ceiling.sh's sweeps (SCHEDULERS,
# default gpu) for each set of search-node flags in NODE_VARIANTS, separated by ';' (an empty set:
# the defaults), one after another.
#
# On a host of 16 CPUs goal 2 puts the node on 0-9 (the GPU engine's ceiling is measured there too,
# and the CPU engine's on 0-5, the 6 of 10 CPUs that hybrid gives its CPU workers) and the integrator
# and load generator on 10-15 (the load generator on 13-15). Each sweep starts at START_FRACTION of
# its ceiling and climbs by FACTOR for MAX_STEPS steps, up to the first step whose p99 is over 10 ms.
#
# usage: BUNDLE=DIR bench/scripts/gpu_host_tables.sh [DOCS] [WORK_DIR]
#   BUNDLE  bin/ and lib/ as scripts/bundle.sh makes them (a CUDA build: searchctl, search-node,
#           search-integrator, host_jitter; transport_floor for goal floor);  DOCS default 25200000;  WORK_DIR default /dev/shm/gpu-bench.
#   env: DICT_DIR (gcide.index and gcide.dict.dz, default /usr/share/dictd; or JSONL, a converted
#        file), CHECK_CMD (a command run beside the shard's generation), OUT_DIR (default
#        WORK_DIR/tables), GOALS ("1 3 2 4", in that order), SECS (2 a row in goals 1 and 3), VERIFY
#        (300), ENGINE_CPUS (goal 1's CPU engine: 0-15); goal 2: NODE_CPUS (0-9), CLIENT_CPUS
#        (10-15), LOADGEN_CPUS (13-15), CPU_CEILING_CPUS (0-5), START_FRACTION (0.5), FACTOR (1.1),
#        MAX_STEPS (5), SERVED_SECS (4), WITHIN (0: served_ceiling.sh's GPU rate within p99 <= 10 ms
#        is left out, to keep the call under 10 minutes); goal 4: RATES ("100 1000 10000"), PATH_SECS (3); goal ql:
#        QL_COMMANDS ("topcount count"; ENGINE_CPUS and SECS as goal 1's); goal floor: FLOOR_CPU (2);
#        goal ab: NODE_VARIANTS (required), SCHEDULERS (gpu), and goal 2's CPU sets and sweep settings.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-/dev/shm/gpu-bench}
b=${BUNDLE:?BUNDLE=bundle of a CUDA build}
b=$(cd "$b" && pwd) || exit 1
out=${OUT_DIR:-$work/tables}
mkdir -p "$work" "$out"
ctl() { LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" "$@"; }
goals=${GOALS:-1 3 2 4}

gpu_machine | tee "$work/machine.txt"
# GCIDE for goal 4, converted and indexed beside the shard's generation (a few seconds of one core).
path_dir=$work/path-latency
jsonl=${JSONL:-$work/gcide.jsonl}
if [[ " $goals " == *" 4 "* ]]; then
  (
    [ -s "$jsonl" ] || python3 scripts/gcide_to_jsonl.py "$jsonl" --dict-dir "${DICT_DIR:-/usr/share/dictd}" || exit 1
    mkdir -p "$path_dir"
    [ -f "$path_dir/idx/manifest.json" ] || ctl index --input "$jsonl" --out "$path_dir/idx" --shards 1 --force --quiet
  ) >"$work/gcide.log" 2>&1 &
  gcide_pid=$!
fi
# CHECK_CMD (e.g. the GPU tests of this build) runs beside the generation too, and is waited for
# before the first goal, so nothing else shares the GPU while the goals measure.
[ -n "${CHECK_CMD:-}" ] && { bash -c "$CHECK_CMD" & check_pid=$!; }
if [[ " $goals " == *" "[123]" "* || " $goals " == *" ql "* || " $goals " == *" ab "* ]]; then
  t0=$SECONDS
  synthetic_shard "$docs" "$work/synthetic-$docs" 2>&1 | tail -2
  step "shard: $((SECONDS - t0)) s"
fi
if [ -n "${check_pid:-}" ]; then
  wait "$check_pid"
  step "CHECK_CMD exited $?"
fi

run_goal() {  # N: the goal's script, its output to OUT_DIR/goalN.log and the terminal
  local n=$1 t0=$SECONDS
  step "goal $n"
  # The GCIDE job is this shell's child: waited for here, not in the pipeline's subshell below.
  [ "$n" = 4 ] && [ -n "${gcide_pid:-}" ] && wait "$gcide_pid"
  local served_env=(NODE_CPUS="${NODE_CPUS:-0-9}" CLIENT_CPUS="${CLIENT_CPUS:-10-15}" LOADGEN_CPUS="${LOADGEN_CPUS:-13-15}"
    CPU_CEILING_CPUS="${CPU_CEILING_CPUS:-0-5}" START_FRACTION="${START_FRACTION:-0.5}" FACTOR="${FACTOR:-1.1}"
    MAX_STEPS="${MAX_STEPS:-5}" SECS="${SERVED_SECS:-4}" WITHIN="${WITHIN:-0}" BUNDLE="$b")
  case $n in
    1) NODE_CPUS=${ENGINE_CPUS:-0-15} SECS=${SECS:-2} VERIFY=${VERIFY:-300} BUNDLE=$b bench/scripts/gpu_shapes.sh "$docs" "$work" ;;
    3) SECS=${SECS:-2} VERIFY=${VERIFY:-300} BUNDLE=$b bench/scripts/gpu_latency.sh "$docs" "$work" ;;
    2) env "${served_env[@]}" bench/scripts/served_ceiling.sh "$docs" "$work" ;;
    ab)
       [ -n "${NODE_VARIANTS:-}" ] || { echo "goal ab needs NODE_VARIANTS (search-node flag sets, ';' between)"; return 1; }
       env "${served_env[@]}" CEILINGS_ONLY=1 bench/scripts/served_ceiling.sh "$docs" "$work" | tee "$out/ceilings.log"
       ceilings=$(sed -n 's/^CEILINGS="\(.*\)"$/\1/p' "$out/ceilings.log")
       [ "$(wc -w <<<"$ceilings")" = 3 ] || { echo "no ceilings measured"; return 1; }
       IFS=';' read -ra variants <<<"$NODE_VARIANTS"
       for v in "${variants[@]}"; do
         echo "== node flags: ${v:-(defaults)}"
         env "${served_env[@]}" CEILINGS="$ceilings" SCHEDULERS="${SCHEDULERS:-gpu}" NODE_ARGS="${NODE_ARGS:-} $v" \
           bench/scripts/served_ceiling.sh "$docs" "$work"
       done ;;
    4) [ -f "$path_dir/idx/manifest.json" ] || { echo "GCIDE index missing:"; cat "$work/gcide.log"; return 1; }
       JSONL=$jsonl OUT_DIR=$path_dir RATES=${RATES:-100 1000 10000} SECS=${PATH_SECS:-3} bench/scripts/path_latency.sh "$b" ;;
    ql) NODE_CPUS=${ENGINE_CPUS:-0-15} SECS=${SECS:-2} COMMANDS=${QL_COMMANDS:-topcount count} BUNDLE=$b \
          bench/scripts/ql_gpu_table.sh "$docs" "$work" ;;
    floor) [ -x "$b/bin/transport_floor" ] || { echo "no $b/bin/transport_floor in the bundle"; return 1; }
       fc=${FLOOR_CPU:-2}
       for how in "alone" "one CPU:taskset -c $fc" "one CPU + idle spinner:taskset -c $fc::--idle-spinner"; do
         IFS=: read -r name pin _ extra <<<"$how"
         echo "== floor: $name"
         LD_LIBRARY_PATH="$b/lib" $pin "$b/bin/transport_floor" --modes zmq-tcp,tcp --seconds 2 $extra
       done ;;
    *) echo "unknown goal $n" >&2; return 2 ;;
  esac 2>&1 | tee "$out/goal$n.log"
  step "goal $n: $((SECONDS - t0)) s"
}
for g in $goals; do run_goal "$g"; done

step "tables ($(cut -d' ' -f3- "$work/machine.txt"))"
for g in $goals; do
  echo "### goal $g"
  case $g in
    1|3|2) sed -n '/== \[[0-9]*s\] summary/,$p' "$out/goal$g.log" ;;
    4) grep -E '^(== .*in-process|mode |and |or )' "$out/goal$g.log" ;;
    ql) grep '^|' "$out/goal$g.log" ;;
    floor) grep -E '^(== floor|mode |zmq-tcp |tcp )' "$out/goal$g.log" ;;
    ab) grep -E '^(ceiling gpu|== node flags|\| (gpu|hybrid) )' "$out/goal$g.log" ;;
  esac
done
