#!/usr/bin/env bash
# Makes the Debian 12 base image docker/Dockerfile builds on, for hosts that cannot pull from a
# registry: a minimal Debian bookworm root file system made by debootstrap from the Debian mirror
# this host's apt already uses, imported as localhost/debian:12 and tagged with the names the
# Dockerfile's FROM lines use (debian:bookworm, debian:bookworm-slim). Cached: when the image is
# there, only the tags are checked; REBUILD=1 makes it again.
#
# usage: docker/base-image.sh        (root, or sudo: debootstrap needs it)
# env:   ENGINE          podman (default when installed) or docker
#        DEBIAN_MIRROR   the mirror URI; default: the first URIs of the bookworm entry of
#                        /etc/apt/sources.list.d/debian.sources, else of /etc/apt/sources.list
#        CONTAINERS_CONF podman only; default docker/podman/containers.conf (runc, ulimits)
#        REBUILD=1       make the image again even if it exists
# With a registry at hand none of this is needed: the FROM names are Docker Hub's official images.
# Exits non-zero on any error.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
engine=${ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then engine=podman; elif command -v docker >/dev/null; then engine=docker; fi
fi
case $engine in podman | docker) ;; *) echo "base-image: no podman or docker (ENGINE=$engine)" >&2; exit 1 ;; esac
[ "$engine" != podman ] || export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/podman/containers.conf}

image=localhost/debian:12
tags=(debian:bookworm debian:bookworm-slim)

say() { echo "base-image: $*"; }
die() { echo "base-image: $*" >&2; exit 1; }

have_image() { "$engine" image inspect "$1" >/dev/null 2>&1; }

tag_all() {
  for t in "${tags[@]}"; do
    "$engine" tag "$image" "$t" || die "$engine tag $image $t failed"
  done
  say "$image tagged ${tags[*]}"
}

if [ "${REBUILD:-0}" != 1 ] && have_image "$image"; then
  say "$image exists (REBUILD=1 makes it again)"
  tag_all
  exit 0
fi

# The mirror: the URIs field of the deb822 stanza whose Suites name bookworm (not -security), or
# the first "deb URI bookworm" line of sources.list. Read here, never stored in the repository.
mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ] && [ -r /etc/apt/sources.list.d/debian.sources ]; then
  mirror=$(awk '
    /^[[:space:]]*$/ { if (uri != "" && suite) { print uri; exit } uri = ""; suite = 0; next }
    /^URIs:/ { uri = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") suite = 1 }
    END { if (uri != "" && suite) print uri }' /etc/apt/sources.list.d/debian.sources | head -n 1)
fi
if [ -z "$mirror" ] && [ -r /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list: set DEBIAN_MIRROR"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"

rootfs=$(mktemp -d /var/tmp/search-base-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
say "debootstrap --variant=minbase bookworm from $mirror (about a minute)"
start=$(date +%s)
log=$rootfs.log
if ! debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  rm -f "$log"
  die "debootstrap failed"
fi
rm -f "$log"
# Smaller image: no downloaded packages, no package lists (every RUN apt-get update's anyway).
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | "$engine" import - "$image" >/dev/null || die "$engine import failed"
say "imported $image in $(($(date +%s) - start)) s"
tag_all
