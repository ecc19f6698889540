#!/usr/bin/env bash
# The CPU engine at GOV2 scale (issue 4), in one command: generate a synthetic collection as one
# shard (default 25.2M documents, ~5.5e9 postings: tools/searchctl/scale/README.md), a query log
# shaped like GOV2's (27% two-term, 33% three, 24% four, 16% longer queries, ~3.74M postings per
# query at 25.2M documents), the index size (bits per docID and per frequency), then
# `searchctl bench` in and/or/andor with all threads and with 1 thread. Every step prints its time;
# the last lines summarise. Nothing is downloaded.
#
# usage: bench/scripts/bench_scale.sh [DOCS] [WORK_DIR]
#   DOCS      documents (default 25200000)
#   WORK_DIR  where the index and the query log go (default ./data/scale; put it on a local disk:
#             ~10.5 GB at 25.2M documents)
# env: SEARCHCTL  the binary (default: $BUNDLE/bin/searchctl when BUNDLE is set, with
#                 LD_LIBRARY_PATH=$BUNDLE/lib (scripts/bundle.sh); else build/tools/searchctl/searchctl)
#      THREADS    threads for generate and the multi-threaded bench (default: nproc)
#      SECONDS_PER_RUN (default 20), WARMUP (default 3), QUERIES (default 10000), K (default 10),
#      MODEL (zipf), SEED (1), SHARDS (1), KEEP=1 keeps the index afterwards (default: removed).
# Budget: on 16 cores at 25.2M documents, generation takes ~1-2 minutes and the six bench runs
# 6 x (SECONDS_PER_RUN + WARMUP + open); the whole script stays under 9 minutes with the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/scripts/bench_lib.sh

docs=${1:-25200000}
work=${2:-data/scale}
threads=${THREADS:-$(nproc)}
secs=${SECONDS_PER_RUN:-20}
warmup=${WARMUP:-3}
queries=${QUERIES:-10000}
k=${K:-10}
model=${MODEL:-zipf}
seed=${SEED:-1}
shards=${SHARDS:-1}
if [ -n "${SEARCHCTL:-}" ]; then
  ctl=$SEARCHCTL
elif [ -n "${BUNDLE:-}" ]; then
  ctl=$BUNDLE/bin/searchctl
  export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  ctl=build/tools/searchctl/searchctl
fi
[ -x "$ctl" ] || { echo "bench_scale: no searchctl at $ctl (set SEARCHCTL or BUNDLE)" >&2; exit 2; }

mkdir -p "$work"
idx=$work/synthetic-$docs
qlog=$work/queries-$docs.txt
# Candidate query terms: df >= 4e-5 * N (1009 at 25.2M), weight df^0.62: mean postings per query
# = 0.148 N, GOV2's 3.74M at 25.2M (Ding et al. 2009 section 6.3); the df law is scale-free, so
# the same holds at any N.
min_df=$(gov2_min_df "$docs")


step "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%dT%H:%MZ)"
step "generate --docs $docs --shards $shards --model $model --seed $seed --threads $threads -> $idx"
rm -rf "$idx"
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -f "generate: %e s wall, %U s user, %M KiB max RSS")
"${timer[@]}" "$ctl" generate --docs "$docs" --out "$idx" --shards "$shards" --model "$model" --seed "$seed" \
  --threads "$threads" --quiet

step "stats"
stats=$("$ctl" stats --index "$idx")
echo "$stats"

step "gen-queries --count $queries (lengths 0,27,33,40, four-share 0.6, min-df $min_df, df-exponent 0.62)"
"$ctl" gen-queries --index "$idx" --count "$queries" --out "$qlog" --seed "$seed" \
  --lengths 0,27,33,40 --four-share 0.6 --min-df "$min_df" --df-exponent 0.62

results=()
for t in "$threads" 1; do
  for mode in and or andor; do
    step "bench --mode $mode --threads $t --k $k --seconds $secs --warmup $warmup"
    line=$("$ctl" bench --index "$idx" --queries "$qlog" --mode "$mode" --k "$k" --threads "$t" \
      --seconds "$secs" --warmup "$warmup")
    echo "$line"
    results+=("$line")
  done
done

step "summary (docs=$docs, model=$model, shards=$shards)"
printf '%-6s %7s %10s %10s %10s %10s %10s %14s %14s\n' mode threads qps mean_us p50_us p95_us p99_us postings/query bytes/query
for line in "${results[@]}"; do
  printf '%-6s %7s %10.1f %10.0f %10.0f %10.0f %10.0f %14.0f %14.0f\n' "$(field "$line" mode)" \
    "$(field "$line" threads)" "$(field "$line" qps)" "$(field "$line" mean_us)" "$(field "$line" p50_us)" \
    "$(field "$line" p95_us)" "$(field "$line" p99_us)" "$(field "$line" postings_decoded_per_query)" \
    "$(field "$line" bytes_touched_per_query)"
done
printf 'index: %s postings, %s bits/docID, %s bits/freq (GPU-BP128 on Gov2: 6.66 and 4.27), %s bytes on disk\n' \
  "$(field "$stats" postings)" "$(field "$stats" bits_per_docid)" "$(field "$stats" bits_per_freq)" \
  "$(field "$stats" disk_bytes)"
if [ "${KEEP:-0}" != 1 ]; then rm -rf "$idx"; fi
step "done"
