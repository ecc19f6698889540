#!/usr/bin/env bash
# The query language against Lucene 8 (../shared/anchors/lucene, its classic QueryParser) in one run:
# every search-benchmark-game category (term, intersection, union, phrase, intersection_union,
# negated) x command (top = TOP_10, topcount = TOP_10_COUNT, count = COUNT), one thread, k = 10,
# default operator OR, on one corpus. First checks, per category, that both engines count the same
# number of matches for every query (Lucene's totals from its top-k output, ours from `searchctl
# query --count`); then prints one markdown table row per cell: our q/s, Lucene's q/s and the ratio.
# usage: bench/scripts/bench_query_language.sh CORPUS.jsonl [QUERIES_PER_CATEGORY] [SECONDS]
#   env: BUILD_DIR (default build), WORK (default data/ql-bench: index and query files; the queries
#        are made again when gen_ql_queries.py is newer),
#        CATEGORIES (default all six, space-separated: run only these),
#        COMMANDS (default "top topcount count": time only these)
set -euo pipefail
cd "$(dirname "$0")/../.."
corpus=$1 per_cat=${2:-500} secs=${3:-5}
build=${BUILD_DIR:-build}
anchor=${LUCENE_ANCHOR:-../shared/anchors/lucene}
name=$(basename "$corpus" .jsonl)
work=${WORK:-data/ql-bench}/$name
scripts/setup.sh --with-lucene
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target searchctl
ctl="$build/tools/searchctl/searchctl"
mkdir -p "$work"
if [[ ! -f "$work/index/manifest.json" || "$work/index/manifest.json" -ot "$corpus" ]]; then
  /usr/bin/time -f "searchctl index: %e s wall, %M KiB max RSS" \
    "$ctl" index --input "$corpus" --out "$work/index" --shards 1 --force
fi
echo "ours: index_bytes=$(du -sb "$work/index" | awk '{print $1}')"
[ "$work/queries/term.txt" -nt bench/scripts/gen_ql_queries.py ] || python3 bench/scripts/gen_ql_queries.py "$corpus" "$work/queries" "$per_cat" 1
lwork=/tmp/lucene-$name
for cat in ${CATEGORIES:-term intersection union phrase intersection_union negated}; do
  q="$work/queries/$cat.txt"
  COMMAND=count LUCENE_WORK=$lwork bash "$anchor/run.sh" "$corpus" "$q" qp-or 10 1 "$work/lucene-$cat.tsv" >/dev/null 2>&1
  "$ctl" query --index "$work/index" --mode or --k 10 --count --queries "$q" > "$work/ours-$cat.jsonl"
  python3 - "$cat" "$work/lucene-$cat.tsv" "$work/ours-$cat.jsonl" <<'EOF'
import json, sys
cat, lf, of = sys.argv[1:4]
luc = [int(line.split("\t")[1].split(":")[1]) for line in open(lf)]
ours = [json.loads(line)["total"] for line in open(of)]
bad = sum(1 for a, b in zip(luc, ours) if a != b)
if len(luc) != len(ours) or bad:
    sys.exit(f"{cat}: counts differ from Lucene's on {bad} of {len(ours)} queries ({len(luc)} Lucene lines)")
print(f"{cat}: {len(ours)} queries, counts equal to Lucene's (sum {sum(ours):,})")
EOF
done
echo "host: $(hostname) $(nproc) CPUs, $(date -u +%FT%TZ), corpus $corpus ($(wc -l < "$corpus") docs)"
echo "| category | command | ours q/s | Lucene q/s | ours / Lucene | matches per query |"
echo "|---|---|---:|---:|---:|---:|"
for cat in ${CATEGORIES:-term intersection union phrase intersection_union negated}; do
  q="$work/queries/$cat.txt"
  for cmd in ${COMMANDS:-top topcount count}; do
    ours=$("$ctl" bench --index "$work/index" --queries "$q" --mode or --k 10 --threads 1 --seconds "$secs" \
             --warmup 1 --command "$cmd" 2>/dev/null)
    luc=$(COMMAND=$cmd LUCENE_WORK=$lwork bash "$anchor/run.sh" "$corpus" "$q" qp-or 10 1 2>/dev/null | grep '^lucene command')
    python3 - "$cat" "$cmd" "$ours" "$luc" <<'EOF'
import json, re, sys
cat, cmd, ours, luc = sys.argv[1:5]
o = json.loads(ours)
l = float(re.search(r"qps=([0-9.]+)", luc).group(1))
total = o.get("total_per_query")
print(f"| {cat} | {cmd} | {o['qps']:,.0f} | {l:,.0f} | {o['qps'] / l:.1f}x | {'' if total is None else f'{total:,.0f}'} |")
EOF
  done
done
echo "lucene: index_bytes=$(du -sb "$lwork"/index.* | sort -n | tail -1 | awk '{print $1}')"
