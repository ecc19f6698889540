#!/usr/bin/env bash
# Builds the CPU image from source, the full multi-stage way (docker/Dockerfile, target
# runtime-cpu: Debian 12 build dependencies, a CMake Release build of search-node,
# search-integrator and searchctl, the runtime stage), then checks that the image runs: its three
# binaries start, and searchctl inside it generates a small index, verifies it and answers a query
# with hits. The image is what docker/docker-compose.cpu.yml uses by default (gpu-search:cpu).
#
# usage: docker/build-check.sh [--local-base]
#   --local-base   make the Debian base image locally first (docker/base-image.sh: debootstrap from
#                  this host's Debian mirror), for hosts that cannot pull debian:bookworm
# env:   ENGINE   podman (default when installed) or docker
#        IMAGE    the tag to build (default gpu-search:cpu)
#        CONTAINERS_CONF  podman only; default docker/podman/containers.conf (runc, ulimits)
# The build compiles everything with the container's cores (a while on a small machine); the
# elapsed time is printed. Exits non-zero on any failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
local_base=0
for arg in "$@"; do
  case $arg in
    --local-base) local_base=1 ;;
    *) echo "build-check: unknown option $arg (usage: docker/build-check.sh [--local-base])" >&2; exit 2 ;;
  esac
done
engine=${ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then engine=podman; elif command -v docker >/dev/null; then engine=docker; fi
fi
case $engine in podman | docker) ;; *) echo "build-check: no podman or docker (ENGINE=$engine)" >&2; exit 1 ;; esac
image=${IMAGE:-gpu-search:cpu}
extra=()
if [ "$engine" = podman ]; then
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/podman/containers.conf}
  extra=(--ignorefile "$here/Dockerfile.dockerignore")
fi

say() { echo "build-check: $*"; }
die() { echo "build-check: $*" >&2; exit 1; }

[ $local_base -eq 0 ] || ENGINE=$engine "$here/base-image.sh"

start=$(date +%s)
say "$engine build --target runtime-cpu -t $image (full build from source)"
"$engine" build -f "$here/Dockerfile" --target runtime-cpu -t "$image" "${extra[@]}" "$root" ||
  die "the image build failed"
say "built $image in $(($(date +%s) - start)) s"

for b in search-node search-integrator searchctl; do
  "$engine" run --rm "$image" "$b" --help >/dev/null || die "$b --help failed in $image"
done
out=$("$engine" run --rm "$image" sh -c \
  'searchctl generate --docs 2000 --shards 2 --out /tmp/index --quiet >/dev/null 2>&1 &&
   searchctl verify --index /tmp/index >/dev/null &&
   searchctl query --index /tmp/index --mode or --k 5 --query "t1 t2"') ||
  die "searchctl generate/verify/query failed in $image"
case $out in
  *'"hits": [{"id": "doc'* | *'"hits":[{"id":"doc'*) ;;
  *) die "the query in $image gave no hits: $out" ;;
esac
say "ok: $image runs search-node, search-integrator and searchctl (generate, verify, a query with hits)"
