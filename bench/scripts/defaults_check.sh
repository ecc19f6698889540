#!/usr/bin/env bash
# Defaults and no-regression check, in one command on a GPU host with 32 or more cores: on one
# synthetic GOV2-shaped shard and query log, (1) `searchctl bench` in-process, the CPU and the GPU
# engine, `and` and `or`: an earlier build with the hand-tuned flags against this build with none;
# (2) through a real integrator, the gpu and hybrid schedulers on a ladder of Poisson rates: the
# earlier build with the flags of its best runs against this build's plain `search-node`, both up
# at once and run in turn at each rate, to the highest rate each holds at p99 <= P99_MS.
# The node and the in-process benchmark run on NODE_CPUS, the integrator and the load generator on
# CLIENT_CPUS, so the two builds meet the same machine.
#
# usage: OLD=DIR NEW=DIR bench/scripts/defaults_check.sh [DOCS] [WORK_DIR]
#   OLD, NEW  bundles (bin/ and lib/, as scripts/bundle.sh makes them) of the two builds
#   DOCS      documents (default 25200000);  WORK_DIR  default /dev/shm/gpu-bench
# env: SECS (5: measured seconds a row), RATES (the ladder, "20000 30000 40000 48000 56000 64000"),
#      P99_MS (10), REPEATS (1: runs of each build, in alternating order, of each in-process row and at
#      each rung; a rung is held where their mean p99 is within P99_MS), SCHEDULERS ("gpu hybrid"),
#      NODE_CPUS (0-15), CLIENT_CPUS (16-31), CONNECTIONS (512), PARTS ("inproc serve"),
#      VARIANTS ("name:node flags;..." more nodes of the new build served beside the two, at most 3)
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
idx_new=$work/synthetic-$docs      # each build reads its own index format: the same corpus, generated
idx_old=$work/synthetic-$docs-old  # by each build's searchctl from the same seed (checked below)
qlog=$work/queries-$docs.txt
min_df=$(gov2_min_df "$docs")
ctl() { local b=$1; shift; LD_LIBRARY_PATH="$b/lib:$new/lib" "$b/bin/searchctl" "$@"; }
gen_pids=()
for b in new old; do  # both at once: generate's phases leave cores idle
  i=idx_$b d=${!b}
  [ -f "${!i}/manifest.json" ] && continue
  step "generate --docs $docs ($b build)"
  rm -rf "${!i}"
  ctl "$d" generate --docs "$docs" --out "${!i}" --shards 1 --seed 1 --threads "$(nproc)" --quiet \
    >"$work/generate-$b.txt" 2>&1 &
  gen_pids+=($!)
done
for p in "${gen_pids[@]}"; do wait "$p" || { cat "$work"/generate-*.txt; exit 1; }; done
cat "$work"/generate-*.txt 2>/dev/null | grep -E 'docs=' | head -2
step "generated"
# The two indexes must hold the same corpus: generate's counts (docs, terms, postings, tokens) agree.
counts() { grep -o 'docs=[0-9]* terms=[0-9]* postings=[0-9]* tokens=[0-9]*' "$work/generate-$1.txt" 2>/dev/null; }
if [ -n "$(counts new)" ] && [ -n "$(counts old)" ] && [ "$(counts new)" != "$(counts old)" ]; then
  echo "the two builds generated different corpora: $(counts new) vs $(counts old)"; exit 1
fi
idx_of() { if [ "$1" = "$old" ]; then echo "$idx_old"; else echo "$idx_new"; fi; }
[ -f "$qlog" ] || ctl "$new" gen-queries --index "$idx_new" --count 10000 --out "$qlog" --seed 1 \
  --lengths 0,27,33,40 --four-share 0.6 --min-df "$min_df" --df-exponent 0.62 || exit 1

rows=()
means=()
row() { rows+=("$(printf '%-7s %-9s %-7s %-7s %10s %8s' "$@")"); echo "ROW ${rows[-1]}"; }

inproc() {  # label bundle mode engine [flags...]
  local label=$1 b=$2 mode=$3 engine=$4; shift 4
  step "bench $label $mode $engine $*"
  local line
  line=$(taskset -c "$node_cpus" timeout 400 env LD_LIBRARY_PATH="$b/lib:$new/lib" "$b/bin/searchctl" bench --index "$(idx_of "$b")" \
    --queries "$qlog" --k 10 --seconds "$secs" --warmup 1 --mode "$mode" --engine "$engine" "$@" 2>"$work/bench.err")
  [ -n "$line" ] || { tail -3 "$work/bench.err"; row bench "$label" "$mode" "$engine" failed -; return; }
  echo "$line"
  row bench "$label" "$mode" "$engine" "$(field "$line" qps | cut -d. -f1)" \
    "$(awk -v u="$(field "$line" p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')"
}

# One build's node and integrator, kept up for the whole ladder: start_build LABEL BUNDLE SCHED SLOT
# INTEGRATOR_FLAGS -- NODE_FLAGS...; sets url_LABEL. Both builds are up at once (the idle one
# sleeps), so each rung runs old and new back to back on the same machine state.
start_build() {
  local label=$1 b=$2 sched=$3 slot=$4 int_flags=$5; shift 5
  local port=$((5701 + slot)) mport=$((9711 + 2 * slot)) hport=$((9720 + 2 * slot)) import=$((9721 + 2 * slot))
  step "start $label $sched: node $*"
  taskset -c "$node_cpus" env LD_LIBRARY_PATH="$b/lib:$new/lib" "$b/bin/search-node" --index "$(idx_of "$b")/shard-0" \
    --listen "tcp://127.0.0.1:$port" --metrics "127.0.0.1:$mport" --scheduler "$sched" "$@" \
    >"$work/node-$label.out" 2>"$work/node-$label.err" &
  local node_pid=$!
  pids+=("$node_pid")
  for _ in $(seq 3000); do grep -q '"ready"' "$work/node-$label.out" 2>/dev/null && break; kill -0 "$node_pid" 2>/dev/null || break; sleep 0.1; done
  grep -q '"ready"' "$work/node-$label.out" || { echo "node did not start"; tail -5 "$work/node-$label.err"; return 1; }
  grep -E 'cache|preload' "$work/node-$label.err" | head -4
  # shellcheck disable=SC2086
  taskset -c "$client_cpus" env LD_LIBRARY_PATH="$b/lib:$new/lib" "$b/bin/search-integrator" --shards "tcp://127.0.0.1:$port" \
    --http "127.0.0.1:$hport" --metrics "127.0.0.1:$import" --cache-mb 0 --log-level warn $int_flags \
    >"$work/int-$label.out" 2>"$work/int-$label.err" &
  pids+=($!)
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$hport/health" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:$hport/health" >/dev/null 2>&1 || { echo "integrator not healthy"; tail -5 "$work/int-$label.err"; }
  printf -v "url_${label//-/_}" '%s' "http://127.0.0.1:$hport"
}

loadgen() {  # url rate seconds warmup
  taskset -c "$client_cpus" timeout $(( $3 + 70 )) env LD_LIBRARY_PATH="$new/lib" "$new/bin/searchctl" loadgen \
    --url "$1" --queries "$qlog" --mode and --deadline-ms 500 --connections "$conns" --rate "$2" --seconds "$3" --warmup "$4" 2>/dev/null
}

# The serving ladder of one scheduler: every build up at once (old-tuned, new-plain, and the
# VARIANTS of the new build), then at each rate of RATES each build in turn, REPEATS times (the
# order rotating from run to run), until all miss p99 <= P99_MS or drop queries. Per rate and
# build: the mean over the runs of p50, mean and p99, and new / old.
serve() {  # scheduler
  local sched=$1 n=0 rate line label u p99 ok slot=2 v
  local labels=(old-tuned new-plain)
  local -A held=() out=() flags=()
  pids_before=${#pids[@]}
  start_build old-tuned "$old" "$sched" 0 "--http-threads $conns --http-keep-alive-requests 100" \
    --cache-mb 16384 --gpu-preload-mb 8192 --gpu-sync block || return
  start_build new-plain "$new" "$sched" 1 "" || return
  IFS=';' read -ra vs <<<"${VARIANTS:-}"
  for v in "${vs[@]}"; do  # name:node flags
    [ -n "$v" ] || continue
    # shellcheck disable=SC2086
    start_build "new-${v%%:*}" "$new" "$sched" "$slot" "" ${v#*:} || return
    labels+=("new-${v%%:*}"); slot=$((slot + 1))
  done
  for label in "${labels[@]}"; do held[$label]=0; out[$label]=0; u=url_${label//-/_}; loadgen "${!u}" 20000 1 0 >/dev/null; done
  for rate in ${RATES:-20000 30000 40000 48000 56000 64000}; do
    local -A sum=() s50=() smean=() bad=()
    for label in "${labels[@]}"; do sum[$label]=0; s50[$label]=0; smean[$label]=0; bad[$label]=0; done
    for _ in $(seq "${REPEATS:-1}"); do
      local order=("${labels[@]:n % ${#labels[@]}}" "${labels[@]:0:n % ${#labels[@]}}")
      n=$((n + 1))
      for label in "${order[@]}"; do
        [ "${out[$label]}" -eq 1 ] && continue
        u=url_${label//-/_}
        line=$(loadgen "${!u}" "$rate" "$secs" 2)
        p99=$(awk -v u="$(field "$line" p99_us)" 'BEGIN { printf "%.2f", u / 1000 }')
        ok=$(awk -v p="$p99" -v e="$(field "$line" errors)" -v d="$(field "$line" deadline_misses)" \
               -v a="$(field "$line" achieved_qps)" -v r="$rate" \
               'BEGIN { print (p + 0 > 0 && e + 0 == 0 && d + 0 == 0 && a + 0 >= 0.95 * r) ? 1 : 0 }')
        echo "$line" | cut -c1-300
        row serve "$label" "$sched" "$rate" "$(field "$line" achieved_qps | cut -d. -f1)" "$p99"
        sum[$label]=$(awk -v s="${sum[$label]}" -v p="$p99" 'BEGIN { print s + p }')
        s50[$label]=$(awk -v s="${s50[$label]}" -v p="$(field "$line" p50_us)" 'BEGIN { print s + p / 1000 }')
        smean[$label]=$(awk -v s="${smean[$label]}" -v p="$(field "$line" mean_us)" 'BEGIN { print s + p / 1000 }')
        [ "$ok" -eq 1 ] || bad[$label]=1
      done
    done
    local k=${REPEATS:-1}
    for label in "${labels[@]}"; do  # a rung is held where the runs' mean p99 is within P99_MS
      [ "${out[$label]}" -eq 1 ] && continue
      means+=("$(awk -v l="$label" -v s="$sched" -v r="$rate" -v k="$k" -v a="${s50[$label]}" -v m="${smean[$label]}" \
        -v p="${sum[$label]}" -v a0="${s50[old-tuned]}" -v m0="${smean[old-tuned]}" -v p0="${sum[old-tuned]}" \
        'BEGIN { printf "%-7s %-11s %6d  p50 %6.2f  mean %6.2f  p99 %6.2f   / old: %5.2f %5.2f %5.2f", s, l, r, a/k, m/k, p/k, (a0>0?a/a0:0), (m0>0?m/m0:0), (p0>0?p/p0:0) }')")
      echo "MEAN ${means[-1]}"
      if [ "${bad[$label]}" -eq 0 ] && awk -v s="${sum[$label]}" -v k="$k" -v m="${P99_MS:-10}" \
           'BEGIN { exit !(s / k <= m) }'; then
        held[$label]=$rate
      else
        out[$label]=1
      fi
    done
    local all_out=1
    for label in "${labels[@]}"; do [ "${out[$label]}" -eq 1 ] || all_out=0; done
    [ "$all_out" -eq 1 ] && break
  done
  for label in "${labels[@]}"; do row held "$label" "$sched" "p99<=${P99_MS:-10}" "${held[$label]}" -; done
  for p in "${pids[@]:$pids_before}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}

for part in ${PARTS:-inproc serve}; do
  case $part in
    inproc)
      declare -A qsum=()
      for r in $(seq "${REPEATS:-1}"); do  # each pair in turn, the order flipping every round
        for mode in and or; do
          for engine in cpu gpu; do
            order=(old-tuned new-plain)
            [ $((r % 2)) -eq 0 ] && order=(new-plain old-tuned)
            for label in "${order[@]}"; do
              if [ "$label" = old-tuned ] && [ "$engine" = cpu ]; then
                inproc old-tuned "$old" "$mode" cpu --threads "$ncpu" --prewarm --list-cache-mib 16384
              elif [ "$label" = old-tuned ]; then
                inproc old-tuned "$old" "$mode" gpu --threads "$ncpu" --batch 64 --list-cache-mib 16384
              else
                inproc new-plain "$new" "$mode" "$engine"
              fi
              q=$(awk '{print $5}' <<<"${rows[-1]}")
              [[ "$q" =~ ^[0-9]+$ ]] && qsum[$label-$mode-$engine]=$(( ${qsum[$label-$mode-$engine]:-0} + q ))
            done
          done
        done
      done
      n=${REPEATS:-1}
      for mode in and or; do
        for engine in cpu gpu; do
          o=${qsum[old-tuned-$mode-$engine]:-0} w=${qsum[new-plain-$mode-$engine]:-0}
          means+=("$(awk -v m="$mode" -v e="$engine" -v o="$o" -v w="$w" -v n="$n" 'BEGIN {
            printf "bench   %-4s %-4s old-tuned %8.0f q/s  new-plain %8.0f q/s  new/old %.3f", m, e, o / n, w / n, (o > 0 ? w / o : 0) }')")
          echo "MEAN ${means[-1]}"
        done
      done ;;
    serve)
      for sched in ${SCHEDULERS:-gpu hybrid}; do serve "$sched"; done ;;
  esac
done

step "summary (docs=$docs, node CPUs $node_cpus, clients $client_cpus)"
printf '%-7s %-9s %-7s %-7s %10s %8s\n' part build mode eng/rate q/s p99_ms
printf '%s\n' "${rows[@]}"
[ ${#means[@]} -eq 0 ] || { echo "means of the runs (in-process: q/s; served: ms at each rate, and the ratio to old-tuned, p50 mean p99):"; printf '%s\n' "${means[@]}"; }
step "done"
