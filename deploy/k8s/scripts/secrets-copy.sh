#!/bin/sh
# The "secrets" initContainer of the shard pods and the integrator: copies the files of a mounted
# Secret (SRC, read-only, group-readable because of the pod's fsGroup) into an in-memory emptyDir
# (DST) as files of mode 0600 owned by the pod's user, since search-node and search-integrator
# refuse a CURVE secret key that its group or others may read.
#
# usage: secrets-copy.sh SRC DST [NAME]
#   NAME given (a shard pod: its pod name): copies SRC/NAME.key to DST/curve.key and
#   SRC/curve-clients; fails when the Secret has no key for this pod (scaled up without running
#   deploy/k8s/make-secrets.sh again). Without NAME (the integrator): copies every file.
set -eu
umask 077

src=${1:?usage: secrets-copy.sh SRC DST [NAME]}
dst=${2:?usage: secrets-copy.sh SRC DST [NAME]}
name=${3:-}

die() { echo "secrets-copy: $*" >&2; exit 1; }

# FILE in SRC to NAME in DST, written beside and renamed.
copy() {
  [ -f "$src/$1" ] || die "the Secret mounted on $src has no $1${3:+ ($3)}"
  cat "$src/$1" >"$dst/.$2.tmp"
  chmod 0600 "$dst/.$2.tmp"
  mv "$dst/.$2.tmp" "$dst/$2"
}

if [ -n "$name" ]; then
  copy "$name.key" curve.key "run deploy/k8s/make-secrets.sh after changing shards or replicas"
  copy curve-clients curve-clients
else
  n=0
  for f in "$src"/*; do
    [ -f "$f" ] || continue
    copy "${f##*/}" "${f##*/}"
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || die "the Secret mounted on $src is empty"
fi
echo "secrets-copy: $src -> $dst ($(ls "$dst" | tr '\n' ' '))"
