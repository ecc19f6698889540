#!/usr/bin/env bash
# Side by side with Lucene 8 in one run (../shared/anchors/lucene): the same GCIDE corpus and the
# same query file, one thread, k = 10, modes and + or. Prints both engines' JSON/summary lines,
# index build times and sizes (bits per posting).
# usage: bench/scripts/bench_lucene.sh [SECONDS]    env: BUILD_DIR (default build), QUERIES (default 5000)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
build=${BUILD_DIR:-build}
anchor=${LUCENE_ANCHOR:-../shared/anchors/lucene}
scripts/setup.sh --with-lucene
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target searchctl
ctl="$build/tools/searchctl/searchctl"
mkdir -p data
[ -s data/gcide.jsonl ] || python3 scripts/gcide_to_jsonl.py data/gcide.jsonl
echo "== our index build (1 shard)"
/usr/bin/time -f "searchctl index: %e s wall, %M KiB max RSS" \
  "$ctl" index --input data/gcide.jsonl --out data/gcide-1shard --shards 1 --force
postings=$(python3 -c "import json;m=json.load(open('data/gcide-1shard/manifest.json'));print(sum(s['num_postings'] for s in m['shards']))")
sst=$(find data/gcide-1shard -name '*.sst' -printf '%s\n' | awk '{s+=$1} END {print s}')
echo "ours: postings=$postings sst_bytes=$sst bits_per_posting=$(python3 -c "print(round($sst*8/$postings,2))")"
[ -s data/gcide-queries.txt ] || "$ctl" gen-queries --index data/gcide-1shard --count "${QUERIES:-5000}" --seed 1 --out data/gcide-queries.txt
for mode in and or; do
  echo "== mode $mode, 1 thread, k=10"
  "$ctl" bench --index data/gcide-1shard --queries data/gcide-queries.txt --mode $mode --k 10 --threads 1 --seconds "$secs"
  LUCENE_WORK=/tmp/lucene-anchor bash "$anchor/run.sh" data/gcide.jsonl data/gcide-queries.txt $mode 10 1
done
lsize=$(du -sb /tmp/lucene-anchor/index.* | sort -n | tail -1 | awk '{print $1}')
echo "lucene: index_bytes=$lsize bits_per_posting=$(python3 -c "print(round($lsize*8/$postings,2))") (whole index dir, includes stored ids and norms)"
