#!/usr/bin/env bash
# Instructions per answered query of the serving path, two builds side by side, under callgrind:
# a deterministic count where a loaded 2-core box gives CPU times that differ by 30% from run to
# run. For each build: a one-node cluster (search-node --gpu off --scheduler cpu over the build's
# own synthetic shard, a search-integrator with its result cache off) driven by the NEW build's
# `searchctl loadgen` over a small query log; the node's (then the integrator's) instructions are
# counted over MEASURE_S seconds at RATE q/s after a warm pass of WARM_S seconds that answers every
# query of the log at least once (warm: memos and list cache filled), and, for the node, also cold
# (a fresh node, a log it has not seen). Prints one line a measurement: build, process, warm|cold,
# answered queries, instructions per query. The GPU path is not exercised (no GPU here).
#
# usage: OLD=DIR NEW=DIR bench/scripts/served_instr_ab.sh
#   OLD, NEW  build directories (node/search-node, integrator/search-integrator,
#             tools/searchctl/searchctl) or bundles (bin/, lib/)
# env: DOCS (1000000), WORK_DIR (/tmp/served-instr-ab), RATE (100), WARM_S (12), MEASURE_S (10),
#      BASE_PORT (7900)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. bench/scripts/bench_lib.sh
# shellcheck disable=SC2034  # old and new are read as ${!b}
old=${OLD:?OLD=build dir or bundle of the earlier build}
new=${NEW:?NEW=build dir or bundle of this build}
docs=${DOCS:-1000000}
work=${WORK_DIR:-/tmp/served-instr-ab}
rate=${RATE:-100}
warm_s=${WARM_S:-12}
measure_s=${MEASURE_S:-10}
base=${BASE_PORT:-7900}
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  echo "needs valgrind (callgrind)"
  exit 1
fi
mkdir -p "$work"

bin() {  # dir name: the binary in a build dir or a bundle
  local p
  for p in "$1/bin/$2" "$1/node/$2" "$1/integrator/$2" "$1/tools/searchctl/$2"; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  echo "no $2 under $1" >&2
  return 1
}

for b in old new; do
  d=${!b}
  [ -f "$work/idx-$b/manifest.json" ] && continue
  step "generate --docs $docs ($b build)"
  env LD_LIBRARY_PATH="$d/lib" "$(bin "$d" searchctl)" generate --docs "$docs" --out "$work/idx-$b" --shards 1 --seed 1 --quiet || exit 1
done
# Single terms and pairs of rank 20,000 to 60,000 (df ~100-600 at 1M documents): the engine's share
# is small, so the serving path's own cost shows. A log of 500 to warm, and one of 1,000 that the
# node has not seen.
awk 'BEGIN { srand(1); for (i = 0; i < 1500; ++i) { n = rand() < 0.67 ? 1 : 2; q = "";
       for (j = 0; j < n; ++j) q = q (j ? " " : "") "t" int(20000 + rand() * 40000); print q } }' >"$work/all.txt"
head -500 "$work/all.txt" >"$work/warm.txt"
tail -1000 "$work/all.txt" >"$work/cold.txt"
loadgen() {  # port log rate seconds
  env LD_LIBRARY_PATH="$new/lib" "$(bin "$new" searchctl)" loadgen --url "http://127.0.0.1:$1" --queries "$2" --mode and \
    --deadline-ms 5000 --connections 16 --rate "$3" --seconds "$4" --warmup 0 2>/dev/null
}

# measure BUILD WHO(node|integrator): prints the warm line (and the node's cold line).
measure() {
  local b=$1 who=$2 d=${!1} np ip http=$base port=$((base + 1)) out="$work/cg-$1-$2" vg
  rm -f "$out".*
  vg=(valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out.cg")
  local node_cmd=("$(bin "$d" search-node)" --index "$work/idx-$b/shard-0" --listen "tcp://127.0.0.1:$port"
                  --gpu off --scheduler cpu --log-level warn)
  local int_cmd=("$(bin "$d" search-integrator)" --shards "tcp://127.0.0.1:$port" --http "127.0.0.1:$http"
                 --metrics "" --cache-mb 0 --log-level warn)
  if [ "$who" = node ]; then node_cmd=("${vg[@]}" "${node_cmd[@]}"); else int_cmd=("${vg[@]}" "${int_cmd[@]}"); fi
  # env, not a shell function: $! is the process itself (callgrind_control and kill need it).
  env LD_LIBRARY_PATH="$d/lib" "${node_cmd[@]}" >"$out.node.out" 2>"$out.node.err" &
  np=$!
  for _ in $(seq 600); do grep -q '"ready"' "$out.node.out" 2>/dev/null && break; kill -0 "$np" 2>/dev/null || break; sleep 0.2; done
  grep -q '"ready"' "$out.node.out" || { echo "$b node did not start: $(grep -m1 ERROR "$out.node.err")"; kill "$np" 2>/dev/null; return 1; }
  env LD_LIBRARY_PATH="$d/lib" "${int_cmd[@]}" >"$out.int.out" 2>"$out.int.err" &
  ip=$!
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$http/health" >/dev/null 2>&1 && break; sleep 0.2; done
  kill -0 "$ip" 2>/dev/null || { echo "$b integrator did not start: $(grep -m1 ERROR "$out.int.err")"; kill "$np"; return 1; }
  local target=$np
  [ "$who" = integrator ] && target=$ip
  one() {  # label log: count over one measured run
    rm -f "$out".cg.*
    callgrind_control -i on "$target" >/dev/null 2>&1
    local line ok ir
    line=$(loadgen "$http" "$2" "$rate" "$measure_s")
    callgrind_control -i off "$target" >/dev/null 2>&1
    callgrind_control -d "$target" >/dev/null 2>&1
    sleep 1
    ok=$(field "$line" ok)
    ir=$(cat "$out".cg.* 2>/dev/null | awk '/^(summary|totals):/ { s += $2 } END { print s + 0 }')
    printf '%-4s %-10s %-4s %6s %10s\n' "$b" "$who" "$1" "$ok" "$(( ${ok:-0} > 0 ? ir / ok : 0 ))"
  }
  [ "$who" = node ] && one cold "$work/cold.txt"
  loadgen "$http" "$work/warm.txt" "$rate" "$warm_s" >/dev/null
  one warm "$work/warm.txt"
  kill "$ip" "$np" 2>/dev/null
  wait "$ip" "$np" 2>/dev/null
}

step "instructions per answered query (RATE $rate, ${measure_s}s; warm after ${warm_s}s of the same log)"
printf '%-4s %-10s %-4s %6s %10s\n' build process run ok instr/q
for who in node integrator; do
  for b in old new; do measure "$b" "$who"; done
done
step "done"
