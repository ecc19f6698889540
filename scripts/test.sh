#!/usr/bin/env bash
# Sets up (Debian packages), builds in Release and runs every test with CTest.
# usage: scripts/test.sh [extra ctest args]   env: BUILD_DIR (default build), JOBS, SEARCH_CUDA (default AUTO),
#   SEARCH_BUILD_BENCH (default ON), BUILD_TARGET (default: everything; unit_tests builds only what the
#   tests labelled unit need, for `scripts/test.sh -L unit`)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSEARCH_CUDA="${SEARCH_CUDA:-AUTO}" \
      -DSEARCH_BUILD_BENCH="${SEARCH_BUILD_BENCH:-ON}" >/dev/null
cmake --build "$build" -j "$jobs" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 600 "$@"
