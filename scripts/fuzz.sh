#!/usr/bin/env bash
# Fuzzes the parsers in fuzz/ with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer
# (fuzz/README.md). Configures a separate clang build (default build-fuzz, CPU only: no CUDA, no
# tests, no benchmarks), builds only the fuzz targets and the libraries they link, then runs each
# target for SECONDS with the repo's seed corpus fuzz/corpus/<target>/ plus a scratch corpus.
# Prints one summary line per target; a crash input is saved under OUT/<target>/crashes/.
#
# usage: scripts/fuzz.sh [TARGET[,TARGET...]|all] [SECONDS]
#   TARGET   a fuzz/<TARGET>_fuzz.cpp (analyzer, search_params, wire, jsonl, block_codec, ciff,
#            query_parser, query_dsl, positions_codec, http_request, http_response, highlight,
#            source_block, ...); all (default) = every one
#   SECONDS  per target (default 600); 0 only builds
# env: BUILD_DIR (default build-fuzz), JOBS (build jobs, default nproc), FUZZ_PARALLEL (targets
#      fuzzed at once, default 1), OUT (default BUILD_DIR/fuzz-out), BUILD_LOCK (a file to flock
#      around the build, e.g. /tmp/build.lock on a shared machine), FUZZ_ARGS (extra libFuzzer flags)
# exit: 0 when no target crashed, 1 when one did, 2 on a usage or setup error.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every fuzz/<name>_fuzz.cpp is a target (fuzz/CMakeLists.txt declares each), so the list cannot drift.
all_targets=()
for f in fuzz/*_fuzz.cpp; do all_targets+=("$(basename "$f" _fuzz.cpp)"); done
which=${1:-all}
seconds=${2:-600}
build=${BUILD_DIR:-build-fuzz}
jobs=${JOBS:-$(nproc)}
parallel=${FUZZ_PARALLEL:-1}
out=${OUT:-$build/fuzz-out}

if [ "$which" = all ]; then
  targets=("${all_targets[@]}")
else
  IFS=, read -r -a targets <<<"$which"
  for t in "${targets[@]}"; do
    if [[ " ${all_targets[*]} " != *" $t "* ]]; then
      echo "fuzz.sh: unknown target '$t' (one of: ${all_targets[*]} all, or a comma-separated list)" >&2
      exit 2
    fi
  done
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: SECONDS must be a whole number (got '$seconds')" >&2
  exit 2
fi
for tool in clang clang++ cmake; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found (scripts/setup.sh installs clang libclang-rt-14-dev)" >&2; exit 2; }
done

# Largest input per target: enough for several full posting-list blocks or a few CIFF lists,
# small enough to keep executions fast.
max_len() {
  case "$1" in
    wire | jsonl | block_codec) echo 8192 ;;
    *) echo 4096 ;;
  esac
}
dict_for() {
  case "$1" in
    search_params) echo fuzz/dict/search_params.dict ;;
    query_parser) echo fuzz/dict/query_parser.dict ;;
    query_dsl) echo fuzz/dict/query_dsl.dict ;;
    http_request | http_response) echo fuzz/dict/http.dict ;;
    analyzer | jsonl) echo fuzz/dict/json.dict ;;
    *) echo "" ;;
  esac
}

# Libraries: instrumented for coverage (fuzzer-no-link) and sanitizers; only the fuzz targets
# link libFuzzer itself (-fsanitize=fuzzer, fuzz/CMakeLists.txt).
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
lock=()
[ -n "${BUILD_LOCK:-}" ] && lock=(flock "$BUILD_LOCK")
"${lock[@]}" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
  -DSEARCH_CUDA=OFF -DSEARCH_BUILD_TESTS=OFF -DSEARCH_BUILD_BENCH=OFF -DSEARCH_FUZZ=ON >/dev/null
build_targets=()
for t in "${targets[@]}"; do build_targets+=("${t}_fuzz"); done
"${lock[@]}" cmake --build "$build" -j "$jobs" --target "${build_targets[@]}"
[ "$seconds" -eq 0 ] && { echo "fuzz.sh: built ${build_targets[*]} in $build"; exit 0; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run_one TARGET: fuzzes one target; writes OUT/TARGET/{log,summary}.
run_one() {
  local t=$1 dir="$out/$1" dict
  mkdir -p "$dir/corpus" "$dir/crashes"
  dict=$(dict_for "$t")
  local args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 -max_len="$(max_len "$t")"
              -artifact_prefix="$dir/crashes/" -print_final_stats=1)
  [ -n "$dict" ] && args+=(-dict="$dict")
  # shellcheck disable=SC2206
  [ -n "${FUZZ_ARGS:-}" ] && args+=($FUZZ_ARGS)
  local rc=0
  "$build/fuzz/${t}_fuzz" "${args[@]}" "$dir/corpus" "fuzz/corpus/$t" >"$dir/log" 2>&1 || rc=$?
  local execs cov ft corpus crashes eps
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$dir/log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$dir/log" | tail -1 | cut -d' ' -f2)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  crashes=$(find "$dir/crashes" -type f | wc -l)
  printf '%-14s %6ss  execs %-11s exec/s %-7s cov %-6s ft %-7s new-corpus %-5s crashes %s rc %s\n' \
    "$t" "$seconds" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$crashes" "$rc" >"$dir/summary"
}

echo "fuzz.sh: $(date -u +%FT%TZ) $(uname -m), $(nproc) cores; ${targets[*]} for ${seconds}s each, $parallel at a time; output in $out"
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

status=0
for t in "${targets[@]}"; do
  cat "$out/$t/summary"
  if [ -n "$(find "$out/$t/crashes" -type f)" ]; then
    status=1
    find "$out/$t/crashes" -type f -printf '  crash input: %p\n'
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|invariant violated|deadly signal' "$out/$t/log" | sed 's/^/  /' || true
  fi
done
exit "$status"
