#!/usr/bin/env bash
# The single-machine demo: installs what is missing, builds searchctl (Release, ./build), turns
# the GNU Collaborative International Dictionary of English (Debian's dict-gcide) into JSON lines,
# indexes it into 3 shards and runs a few queries in every mode.
# usage: scripts/demo.sh            (from anywhere; paths are relative to the repository root)
#        BUILD_DIR=build-x scripts/demo.sh   to build elsewhere than ./build
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/setup.sh
build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSEARCH_CUDA=AUTO >/dev/null
cmake --build "$build" -j"$(nproc)" --target searchctl
searchctl="$(cd "$build" && pwd)/tools/searchctl/searchctl"

mkdir -p data
jsonl=data/gcide.jsonl
if [[ ! -s "$jsonl" || "$jsonl" -ot scripts/gcide_to_jsonl.py ]]; then
  python3 scripts/gcide_to_jsonl.py "$jsonl"
else
  echo "demo: $jsonl is up to date"
fi

"$searchctl" index --input "$jsonl" --out data/gcide-index --shards 3 --force
"$searchctl" verify --index data/gcide-index

queries=("heart of gold" "quick brown fox" "algebra group ring")
for mode in and or andor; do
  echo
  echo "== mode $mode, top 5"
  for q in "${queries[@]}"; do
    "$searchctl" query --index data/gcide-index --mode "$mode" --k 5 --query "$q"
  done
done

echo
echo "== a generated query log, and a 3-second benchmark (or mode, k = 10)"
"$searchctl" gen-queries --index data/gcide-index --count 1000 --out data/gcide-queries.txt --seed 1
"$searchctl" bench --index data/gcide-index --queries data/gcide-queries.txt --mode or --k 10 \
  --threads "$(nproc)" --seconds 3 --warmup 1

# ------------------------------------------------------------------------------------------------
# Cluster (owner: integrator): the same 3-shard index served by one search-node per shard plus the
# search-integrator on loopback (scripts/cluster.sh), a few HTTP answers, then left running until
# `scripts/cluster.sh stop`. DEMO_PORT (default 9200) is the HTTP port; metrics on DEMO_PORT+1.
echo
echo "== the cluster: 3 shard nodes + the integrator on loopback"
cmake --build "$build" -j"$(nproc)" --target search-node search-integrator
port="${DEMO_PORT:-9200}"
scripts/cluster.sh stop >/dev/null  # a cluster left by an earlier demo serves the old index
scripts/cluster.sh start --index data/gcide-index --build "$build" --base-port "$port"
show() {  # mode k query: one compact line per answer
  curl -sS --get "http://127.0.0.1:$port/search" --data-urlencode "q=$3" -d "mode=$1" -d "k=$2" |
    python3 -c 'import json, sys
a = json.load(sys.stdin)
if "error" in a:
    print("  error:", a["error"]); sys.exit()
s = a["_shards"]
print("  %-22s took %5d us  cached=%-5s shards %d/%d  hits: %s" % (sys.argv[1], a["took_us"], a["cached"],
      s["successful"], s["total"], ", ".join("%s (%.3f)" % (h["_id"], h["_score"]) for h in a["hits"]["hits"])))' "$3"
}
for mode in and or andor; do
  echo "-- GET /search mode=$mode k=3"
  for q in "${queries[@]}"; do show "$mode" 3 "$q"; done
done
echo "-- documents: each hit's stored _source and its highlighted fragment (GET /search ... &highlight=true)"
curl -sS --get "http://127.0.0.1:$port/search" --data-urlencode "q=${queries[0]}" -d mode=or -d k=3 -d highlight=true |
  python3 -c 'import json, sys
for h in json.load(sys.stdin)["hits"]["hits"]:
    src = h.get("_source", {})
    print("  %s (%.3f): %d source bytes, %d fields" % (h["_id"], h["_score"], len(json.dumps(src)), len(src)))
    for f in h.get("highlight", {}).get("contents", [])[:1]:
        print("    " + " ".join(f.split()))'
echo "-- the same query again: answered from the result cache"
show or 3 "${queries[0]}"
echo "-- bad input is a 400 with a reason"
curl -sS "http://127.0.0.1:$port/search?q=gold&k=zero"
echo
echo "-- GET /health"
curl -sS "http://127.0.0.1:$port/health"
echo
echo
echo "cluster running: http://127.0.0.1:$port/ (search page and status), /search?q=...&k=10&mode=and|or|andor,"
echo "  /health, /stats; Prometheus metrics on http://127.0.0.1:$((port + 1))/metrics"
echo "  status: scripts/cluster.sh status    stop: scripts/cluster.sh stop"
echo "  plain HTTP on loopback; HTTPS + API keys + CURVE: scripts/cluster.sh start --secure, or docker/ (docs/RELIABILITY.md, Security)"
