#!/usr/bin/env bash
# Installs the Debian packages this project builds, tests and demos with. Idempotent: packages
# already present are skipped, and nothing runs apt-get when everything is there.
# usage: scripts/setup.sh [--with-lucene] [--with-cluster-tools]
set -euo pipefail

pkgs=(build-essential cmake pkg-config ninja-build python3 zlib1g-dev
      librocksdb-dev libzstd-dev libzmq3-dev cppzmq-dev capnproto libcapnp-dev prometheus-cpp-dev
      libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev nlohmann-json3-dev
      libcli11-dev libstemmer-dev dict-gcide curl libssl-dev openssl
      prometheus docker-compose chromium iproute2 nftables python3-yaml clang libclang-rt-14-dev
      protobuf-compiler libprotobuf-dev)
# Containers (tests/deploy/container_test.py, docker/base-image.sh): podman with runc, buildah,
# podman-compose, debootstrap for the base image, and the CNI plugin that resolves service names
# on a compose network (without it, containers do not find each other by name).
pkgs+=(podman buildah runc podman-compose uidmap debootstrap golang-github-containernetworking-plugin-dnsname)
# Node.js and npm validate the Kubernetes manifests (deploy/k8s/validate). NodeSource's nodejs
# package bundles npm and conflicts with Debian's npm package: npm is added only when missing.
pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
for arg in "$@"; do
  case "$arg" in
    --with-lucene) pkgs+=(default-jdk-headless liblucene8-java) ;;
    --with-cluster-tools) ;;  # now always installed (the deployment tests use them)
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
