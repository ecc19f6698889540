#!/usr/bin/env bash
# Lucene 8's stored fields holding each document's whole JSON line, on a JSON-lines corpus: prints
# one JSON line per codec mode (speed = LZ4, compression = DEFLATE) with the .fdt/.fdx/.fdm bytes
# and bytes per document (LuceneStored.java says what is measured).
# usage: bench/lucene_stored/run.sh [CORPUS.jsonl] [speed|compression|both]
#   default corpus data/gcide.jsonl (scripts/gcide_to_jsonl.py makes it), default both modes;
#   work files in $LUCENE_STORED_WORK (default /tmp/lucene-stored).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
corpus=${1:-data/gcide.jsonl} modes=${2:-both}
[ "$modes" = both ] && modes="speed compression"
[ -s "$corpus" ] || { echo "run.sh: $corpus not found (python3 scripts/gcide_to_jsonl.py $corpus)" >&2; exit 1; }
command -v javac >/dev/null && ls /usr/share/java/lucene-core-8*.jar >/dev/null 2>&1 || scripts/setup.sh --with-lucene
work=${LUCENE_STORED_WORK:-/tmp/lucene-stored}
mkdir -p "$work/classes"
cp=$(ls /usr/share/java/lucene-core-8*.jar | head -1):$(ls /usr/share/java/lucene-analyzers-common-8*.jar | head -1)
[ "$work/classes/LuceneStored.class" -nt "$here/LuceneStored.java" ] ||
  javac -cp "$cp" -d "$work/classes" "$here/LuceneStored.java"
prepared="$work/corpus.$(stat -c %Y-%s "$corpus").tsv"
[ -s "$prepared" ] || { python3 "$here/prepare.py" "$corpus" "$prepared.tmp" && mv "$prepared.tmp" "$prepared"; }
for mode in $modes; do
  rm -rf "$work/index-$mode"
  java -Xmx2g -cp "$cp:$work/classes" LuceneStored "$prepared" "$work/index-$mode" "$mode"
done
