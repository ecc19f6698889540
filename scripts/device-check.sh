#!/usr/bin/env bash
# The GPU suite on a GPU machine, with compute-sanitizer: build, bundle, run.
#
# usage: scripts/device-check.sh [prepare|run|all]
#   prepare  (a machine with nvcc and the dev packages, GPU or not) configures $BUILD_DIR with
#            SEARCH_CUDA=ON in Release, builds the GPU test and benchmark binaries and bundles them
#            with their shared libraries (scripts/bundle.sh) into $BUNDLE (default .bundle).
#   run      (the GPU machine; needs only the bundle and the driver) runs every GPU test binary,
#            then each again under compute-sanitizer --tool memcheck and --tool racecheck; prints
#            PASS/FAIL per step and exits non-zero on any failure.
#   all      prepare then run (a machine with both nvcc and a GPU). Default: all when nvidia-smi
#            sees a GPU, else prepare.
# env: BUNDLE (default .bundle), BUILD_DIR (prepare's build tree, default build-gpu), JOBS (build jobs, default nproc), SANITIZE=0 skips the sanitizer
#      passes, LOG_DIR (keeps each step's whole output there), STEP_TIMEOUT (seconds per step, default 300: a step past it is a FAIL, not a hang).
#      The sanitizers slow kernels 10-100x, so their passes run with SEARCH_TEST_QUICK=1
#      (memcheck: every test, over 1/4 of the random batches and corpora) and =2 (racecheck, the
#      slowest: 1/16) and leave out the few tests whose corpora are
#      large (long lists, large random sets; the plain pass runs them): MEMCHECK_FILTER and
#      RACECHECK_FILTER (default $heavy).
set -uo pipefail
cd "$(dirname "$0")/.."

bundle=${BUNDLE:-.bundle}
mode=${1:-}
if [ -z "$mode" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then mode=all; else mode=prepare; fi
fi

heavy='-*LongList*:*LargeRandom*:*Ratios*'
gpu_tests=(tests/gpu_exec/decode_test tests/gpu_exec/intersect_test tests/gpu_exec/engine_test tests/gpu_exec/gpu_tree_test
           tests/gpu_cache/gpu_list_cache_test tests/node/gpu_executor_adapter_test tests/cpu_exec/tree_query_test)
gpu_benches=(bench/gpu_exec/gpu_decode_bench bench/gpu_exec/gpu_intersect_bench)

prepare() {
  set -e
  scripts/setup.sh
  local bd=${BUILD_DIR:-build-gpu}
  cmake -S . -B "$bd" -DCMAKE_BUILD_TYPE=Release -DSEARCH_CUDA=ON >/dev/null
  local targets=()
  for t in "${gpu_tests[@]}" "${gpu_benches[@]}"; do targets+=("$(basename "$t")"); done
  targets+=(searchctl search-node search-integrator host_jitter)
  cmake --build "$bd" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"
  local bins=()
  for t in "${gpu_tests[@]}" "${gpu_benches[@]}"; do [ -x "$bd/$t" ] && bins+=("$bd/$t"); done
  bins+=("$bd/tools/searchctl/searchctl" "$bd/node/search-node" "$bd/integrator/search-integrator"
         "$bd/bench/host/host_jitter")
  scripts/bundle.sh "$bundle" "${bins[@]}"
  set +e
}

run() {
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi -L 2>/dev/null || echo "device-check: nvidia-smi sees no GPU"
  local failed=0 ran=0
  step() {  # step NAME CMD...
    local name=$1; shift
    local t0=$SECONDS out
    out=$(timeout "${STEP_TIMEOUT:-300}" "$@" 2>&1); local rc=$?
    [ $rc -eq 124 ] && out="$out
TIMEOUT after ${STEP_TIMEOUT:-300} s"
    [ -n "${LOG_DIR:-}" ] && mkdir -p "$LOG_DIR" && printf '%s\n' "$out" >"$LOG_DIR/${name// /-}.log"
    ran=$((ran + 1))
    if [ $rc -eq 0 ]; then
      echo "PASS  $name ($((SECONDS - t0)) s): $(echo "$out" | grep -E '^\[  (PASSED|SKIPPED) ' | tr '\n' ' ')"
    else
      failed=$((failed + 1))
      echo "FAIL  $name ($((SECONDS - t0)) s, rc $rc)"
      echo "$out" | grep -E 'FAILED|Failure|error|ERROR|Expected|Which is|actual|=========|TIMEOUT' | head -60
    fi
  }
  for t in "${gpu_tests[@]}"; do
    local bin="$bundle/bin/$(basename "$t")"
    [ -x "$bin" ] || { echo "SKIP  $(basename "$t") (not built)"; continue; }
    step "$(basename "$t")" "$bin"
  done
  if [ "${SANITIZE:-1}" != 0 ]; then
    if command -v compute-sanitizer >/dev/null 2>&1; then
      for t in "${gpu_tests[@]}"; do
        local bin="$bundle/bin/$(basename "$t")"
        [ -x "$bin" ] || continue
        step "memcheck $(basename "$t")" env SEARCH_TEST_QUICK=1 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 "$bin" \
          "--gtest_filter=${MEMCHECK_FILTER:-$heavy}"
        step "racecheck $(basename "$t")" env SEARCH_TEST_QUICK=2 compute-sanitizer --tool racecheck --error-exitcode 99 "$bin" \
          "--gtest_filter=${RACECHECK_FILTER:-$heavy}"
      done
    else
      echo "device-check: compute-sanitizer not found; sanitizer passes skipped"
      failed=$((failed + 1))
    fi
  fi
  echo "device-check: $ran steps, $failed failed ($(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
  [ $failed -eq 0 ]
}

case "$mode" in
  prepare) prepare ;;
  run) run ;;
  all) prepare && run ;;
  *) echo "usage: $0 [prepare|run|all]" >&2; exit 2 ;;
esac
