#!/usr/bin/env bash
# Copies binaries and the shared libraries they need (from ldd) into a folder that travels to a
# machine without this one's packages (the GPU host). glibc's own libraries and libstdc++/libgcc_s
# are left out: the host's newer copies must be used.
# usage: scripts/bundle.sh OUT_DIR BINARY...   then run there with LD_LIBRARY_PATH=OUT_DIR/lib
set -euo pipefail
out=$1; shift
mkdir -p "$out/bin" "$out/lib"
skip='^(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
for bin in "$@"; do
  cp -f "$bin" "$out/bin/"
  ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    base=$(basename "$lib")
    [[ "$base" =~ $skip ]] && continue
    [ -f "$out/lib/$base" ] || cp -L "$lib" "$out/lib/$base"
  done
done
du -sh "$out" | awk '{print "bundle: " $1 " in " $2}'
