#!/bin/sh
# The "index" initContainer of every shard pod (StatefulSet shard-<i>): builds, once, the index this
# pod serves on its own volume (/data, the StatefulSet's volumeClaimTemplate), then exits 0.
#
# Every pod builds the whole collection with docker/index-build.sh (the image's search-index-build;
# searchctl generate and index are deterministic, so every replica of a shard gets the same
# documents), keeps only its shard's directory and the manifest, and writes a stamp of the build
# settings. A later start with the same settings keeps the index at once; changed settings (the
# search-index ConfigMap) or INDEX_FORCE=1 rebuild it. The node mounts /data read-only.
#
# env: SHARD (the StatefulSet's name, shard-<i>: the index directory it serves), INDEX_* (ConfigMap search-index, see
#      docker/index-build.sh), DATA_DIR (default /data). Exits non-zero on any error.
set -eu

data=${DATA_DIR:-/data}
name=${SHARD:-}
shard=${name#shard-}
shards=${INDEX_SHARDS:-2}
dir=$data/index
build=$data/index.build

say() { echo "index-init: $*"; }
die() { echo "index-init: $*" >&2; exit 1; }

case $name:$shard in shard-*:[0-9]*) ;; *) die "SHARD must be shard-<number> (got '$name')" ;; esac
case $shard in *[!0-9]*) die "SHARD must be shard-<number> (got '$name')" ;; esac
case $shards in '' | *[!0-9]* | 0) die "INDEX_SHARDS must be a positive integer (got '$shards')" ;; esac
[ "$shard" -lt "$shards" ] ||
  die "SHARD=$name but INDEX_SHARDS=$shards: raise INDEX_SHARDS in the search-index ConfigMap"

stamp="source=${INDEX_SOURCE:-generate} shards=$shards docs=${INDEX_DOCS:-200000} seed=${INDEX_SEED:-1}"
stamp="$stamp model=${INDEX_MODEL:-zipf} input=${INDEX_INPUT:-} stem=${INDEX_STEM:-}"

if [ "${INDEX_FORCE:-0}" != 1 ] && [ -d "$dir/shard-$shard" ] && [ -f "$dir/.built" ] &&
  [ "$(cat "$dir/.built")" = "$stamp" ]; then
  say "keeping $dir/shard-$shard ($stamp); INDEX_FORCE=1 rebuilds it"
  exit 0
fi

rm -rf "$build"
INDEX_DIR=$build QUERIES=$build/queries.txt INDEX_FORCE=1 search-index-build
[ -d "$build/shard-$shard" ] || die "search-index-build wrote no $build/shard-$shard"
for d in "$build"/shard-*; do
  [ "$d" = "$build/shard-$shard" ] || rm -rf "$d"
done
printf '%s\n' "$stamp" >"$build/.built"
rm -rf "$dir.old"
if [ -e "$dir" ]; then mv "$dir" "$dir.old"; fi
mv "$build" "$dir"
rm -rf "$dir.old"
say "ready: $dir/shard-$shard ($stamp)"
