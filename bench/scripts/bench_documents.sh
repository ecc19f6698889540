#!/usr/bin/env bash
# What documents in the answers cost, on GCIDE (scripts/gcide_to_jsonl.py):
#  1. bytes per document of the stored sources: the index's `source` column family and the whole
#     index with sources against --no-source (1 shard, bench/scripts/cf_sizes.py), and Lucene 8's
#     stored fields holding the same JSON lines (bench/lucene_stored/run.sh, both codec modes);
#     the index build time with and without sources comes with it;
#  2. the end-to-end latency of GET /search with _source against _source=false on a local 3-shard
#     cluster (scripts/cluster.sh, bench/scripts/source_latency.py: one client, distinct queries).
# usage: bench/scripts/bench_documents.sh    env: BUILD_DIR (default build), PORT (default 9280),
#        QUERIES (default 2000), MODE (default or), K (default 10)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build} port=${PORT:-9280} nq=${QUERIES:-2000} mode=${MODE:-or} k=${K:-10}
cmake --build "$build" -j "$(nproc)" --target searchctl search-node search-integrator >/dev/null
ctl="$build/tools/searchctl/searchctl"
mkdir -p data
[ -s data/gcide.jsonl ] || python3 scripts/gcide_to_jsonl.py data/gcide.jsonl
work=${DOCS_BENCH_WORK:-/tmp/bench-documents}
mkdir -p "$work"

echo "== 1. bytes per document (1 shard)"
for v in source no-source; do
  flag=""; [ "$v" = no-source ] && flag=--no-source
  /usr/bin/time -f "searchctl index ($v): %e s wall, %U s user, %S s sys, %M KiB max RSS" \
    "$ctl" index --input data/gcide.jsonl --out "$work/gcide-$v" --shards 1 --force --quiet $flag
  echo "ours ($v): $(python3 bench/scripts/cf_sizes.py "$work/gcide-$v")" \
    "disk_bytes=$(du -sb "$work/gcide-$v" | cut -f1)"
done
bench/lucene_stored/run.sh data/gcide.jsonl both

echo "== 2. end-to-end latency, _source vs _source=false, 3 shards, mode $mode, k $k"
"$ctl" index --input data/gcide.jsonl --out "$work/gcide-3" --shards 3 --force --quiet
"$ctl" gen-queries --index "$work/gcide-3" --count "$nq" --seed 7 --out "$work/queries.txt"
run_dir="$work/cluster"
trap 'scripts/cluster.sh stop --run-dir "$run_dir" >/dev/null' EXIT
scripts/cluster.sh start --index "$work/gcide-3" --base-port "$port" --build "$build" --run-dir "$run_dir"
python3 bench/scripts/source_latency.py --url "http://127.0.0.1:$port" --queries "$work/queries.txt" \
  --mode "$mode" --k "$k" --count "$nq"
