#!/bin/sh
# The one-shot "index" service of docker/docker-compose.yml: builds the index the shard nodes
# serve into $INDEX_DIR (on the named volume), then writes a sample query log beside it.
#
#   INDEX_SOURCE  generate (default): searchctl generate, a synthetic GOV2-like collection
#                 jsonl: searchctl index over $INDEX_INPUT, JSON lines {"id": ..., "contents": ...}
#   INDEX_SHARDS  shards (default 2): one search-node service per shard must exist
#   INDEX_DOCS    generate: documents (default 200000); INDEX_SEED (1), INDEX_MODEL (zipf)
#   INDEX_INPUT   jsonl: the corpus file inside the container (default /corpus/docs.jsonl;
#                 docker-compose.yml mounts $CORPUS_DIR on /corpus), plain or .gz
#   INDEX_STEM    jsonl: Snowball stemmer language (e.g. english), default none (no stemming)
#   INDEX_FORCE   1: rebuild even if an index is there (default: keep it, after checking it)
#   INDEX_DIR     default /data/index; QUERIES (default /data/queries.txt), QUERY_COUNT (5000)
# An existing index with the right shard count is verified (checksums) and kept, so
# `docker-compose up` after the first run starts at once. Exits non-zero on any error.
set -eu

dir=${INDEX_DIR:-/data/index}
shards=${INDEX_SHARDS:-2}
source=${INDEX_SOURCE:-generate}
queries=${QUERIES:-/data/queries.txt}

say() { echo "index-build: $*"; }
die() { echo "index-build: $*" >&2; exit 1; }

case $shards in '' | *[!0-9]* | 0) die "INDEX_SHARDS must be a positive integer (got '$shards')" ;; esac

if [ -f "$dir/manifest.json" ] && [ "${INDEX_FORCE:-0}" != 1 ]; then
  have=$(find "$dir" -mindepth 1 -maxdepth 1 -type d -name 'shard-*' | wc -l)
  [ "$have" -eq "$shards" ] ||
    die "$dir holds $have shard(s) but INDEX_SHARDS=$shards: set INDEX_FORCE=1 to rebuild it"
  say "keeping the index in $dir ($have shards); INDEX_FORCE=1 rebuilds it"
  searchctl verify --index "$dir"
else
  case $source in
    generate)
      say "generating ${INDEX_DOCS:-200000} documents into $dir ($shards shards)"
      searchctl generate --docs "${INDEX_DOCS:-200000}" --shards "$shards" --seed "${INDEX_SEED:-1}" \
        --model "${INDEX_MODEL:-zipf}" --out "$dir" --force --quiet
      ;;
    jsonl)
      input=${INDEX_INPUT:-/corpus/docs.jsonl}
      [ -f "$input" ] || die "INDEX_INPUT $input not found (mount the corpus folder with CORPUS_DIR)"
      say "indexing $input into $dir ($shards shards)"
      if [ "${INDEX_STEM:-none}" != none ]; then
        searchctl index --input "$input" --out "$dir" --shards "$shards" --stem "$INDEX_STEM" --force --quiet
      else
        searchctl index --input "$input" --out "$dir" --shards "$shards" --force --quiet
      fi
      ;;
    *) die "INDEX_SOURCE must be generate or jsonl (got '$source')" ;;
  esac
fi

# Sample queries for load tests (searchctl loadgen --queries), drawn from the index's terms.
log=$(mktemp)
searchctl gen-queries --index "$dir" --count "${QUERY_COUNT:-5000}" --out "$queries.tmp" 2>"$log" ||
  { cat "$log" >&2; die "gen-queries failed"; }
rm -f "$log"
mv "$queries.tmp" "$queries"
say "ready: $dir, sample queries in $queries"
