#!/usr/bin/env bash
# What a phrase costs the GPU engine beyond the boolean of its tokens, per query, for the node's
# cost model (node/src/scheduled_executor.cpp kGpuPhraseUsPerPostingToken): each phrase `"a b c"`
# of QUERIES and its twin `+a +b +c` timed alone by `searchctl bench --engine gpu --per-query`
# (a batch of 64 copies, per copy, lists and positions resident) over an index WITH positions;
# the difference is the phrase producer's time (gpu_exec/src/kernel_phrase.cuh: a thread per
# posting of the rarest token, binary searches in the other tokens' docIDs and positions). Fits
# extra_us = a + b * work, work = the rarest token's postings x the phrase's tokens (repeats counted),
# by least squares, and prints the fit with the medians by work decile.
# usage: BUNDLE=DIR bench/scripts/gpu_phrase_cost.sh CORPUS.jsonl QUERIES.txt [WORK_DIR]
#   QUERIES: one quoted phrase a line (gen_ql_queries.py's phrase.txt); env: COMMANDS ("count top"), SECS (1), ENGINE (gpu; cpu for a dry run)
set -uo pipefail
cd "$(dirname "$0")/../.."

corpus=${1:?CORPUS.jsonl}
queries=${2:?QUERIES.txt}
work=${3:-/dev/shm/gpu-phrase-cost}
b=${BUNDLE:?BUNDLE=bundle of this build}
ctl() { LD_LIBRARY_PATH="$b/lib" "$b/bin/searchctl" "$@"; }

mkdir -p "$work"
idx=$work/index
if [ ! -f "$idx/manifest.json" ]; then
  ctl index --input "$corpus" --out "$idx" --shards 1 --force >"$work/index.log" 2>&1 || { tail -3 "$work/index.log"; exit 1; }
fi
grep '^"' "$queries" >"$work/phrase.txt"
sed 's/^"//; s/"$//; s/\([^ ][^ ]*\)/+\1/g' "$work/phrase.txt" >"$work/and.txt"
echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%Y-%m-%dT%H:%MZ), $(wc -l <"$work/phrase.txt") phrases"
for cmd in ${COMMANDS:-count top}; do
  for set in phrase and; do
    ctl bench --index "$idx" --queries "$work/$set.txt" --mode and --k 10 --command "$cmd" --seconds "${SECS:-1}" \
      --warmup 1 --engine "${ENGINE:-gpu}" --per-query "$work/$set-$cmd.csv" >"$work/$set-$cmd.json" 2>"$work/$set-$cmd.err" ||
      { echo "$set $cmd failed: $(tail -2 "$work/$set-$cmd.err")"; continue 2; }
  done
  python3 - "$cmd" "$work" <<'PY'
import csv, statistics, sys
cmd, work = sys.argv[1], sys.argv[2]
phr = list(csv.DictReader(open(f"{work}/phrase-{cmd}.csv")))
conj = list(csv.DictReader(open(f"{work}/and-{cmd}.csv")))
texts = [l.strip().strip('"').split() for l in open(f"{work}/phrase.txt")]
rows = []
for p, a, t in zip(phr, conj, texts):
    w = int(p["shortest"]) * len(t)
    rows.append((w, float(p["us"]) - float(a["us"]), float(p["us"]), float(a["us"])))
n = len(rows)
mx = sum(r[0] for r in rows) / n
my = sum(r[1] for r in rows) / n
sxx = sum((r[0] - mx) ** 2 for r in rows)
sxy = sum((r[0] - mx) * (r[1] - my) for r in rows)
slope = sxy / sxx if sxx else 0.0
icpt = my - slope * mx
ss = sum((r[1] - my) ** 2 for r in rows)
res = sum((r[1] - icpt - slope * r[0]) ** 2 for r in rows)
print(f"{cmd}: {n} phrases; extra_us = {icpt:.3f} + {slope:.3e} * work (R^2 {1 - res / ss if ss else 0:.2f});"
      f" mean phrase {statistics.mean(r[2] for r in rows):.2f} us, its +a +b twin {statistics.mean(r[3] for r in rows):.2f} us")
rows.sort()
for d in range(10):
    part = rows[d * n // 10:(d + 1) * n // 10]
    if part:
        print(f"  work decile {d}: work median {statistics.median(r[0] for r in part):>10,.0f}"
              f"  extra_us median {statistics.median(r[1] for r in part):8.2f}")
PY
done
