#!/usr/bin/env bash
# The whole test suite: format check, a warnings-as-errors build, every CTest test, the checks
# on the suite itself (every doctest case runs; no bare Approx), the digital twin end to end on
# this machine's CPU (scripts/twin-check.sh), and the mutation score
# (scripts/mutate.sh: a third of the planted bugs of tests/mutations.txt, the third the commit id
# picks, at least 90% caught, none of the list stale; one shard per core, run side by side;
# CTWIN_CI_MUTATIONS=all runs every one).
# Between them, the sanitizer stage (docs/reliability.md): clang 14 builds everything in build-fuzz
# with ASan, UBSan and libFuzzer coverage (-Werror, so the clang build stays green beside GCC's),
# every fuzz target runs CTWIN_CI_FUZZ_SECONDS (default 10) from its seeds, and the test modules
# run under the sanitizers. CTWIN_CI_SANITIZE=0 skips the stage (a quick local run).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed last (also when a stage fails), so CI's tail shows where the
# time went.
stages=()
stage_begin=$SECONDS
stage_name=""
stage() {
  if [ -n "$stage_name" ]; then stages+=("$(printf '%6ds  %s' $((SECONDS - stage_begin)) "$stage_name")"); fi
  stage_name=$1
  stage_begin=$SECONDS
}
report_stages() {
  stage ""
  echo "--- test.sh stages (wall seconds)"
  printf '%s\n' "${stages[@]}"
  printf '%6ds  total\n' "$SECONDS"
  if command -v ccache >/dev/null; then
    echo "--- ccache: $(ccache --print-stats 2>/dev/null | awk '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss|cleanups_performed|cache_size_kibibyte)$/ {printf "%s=%s ", $1, $2}')"
  fi
}
trap report_stages EXIT
# ccache's default 5 GB fills with the mutation run's mutant objects and evicts the sanitizer
# build's (used once a run), which then recompiles from scratch: about 950 s of CI's 45 minutes.
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
stage "format check"
scripts/check-format.sh
stage "build (GCC, -Werror)"
scripts/build.sh -DCTWIN_WERROR=ON
stage "ctest"
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
scripts/check-tests.sh build
# The digital twin end to end on two CPU ranks (realrun, calibrate, validate --profile), while
# nothing else runs: its timings are real.
stage "twin-check"
scripts/twin-check.sh build
if [ "${CTWIN_CI_SANITIZE:-1}" != 0 ]; then
  stage "sanitizer build (clang 14, ASan+UBSan+libFuzzer)"
  scripts/fuzz.sh --build
  stage "fuzz targets"
  for target in scenario hf_config cluster_json profile trace_binary chrome_trace request_trace mooncake_trace measurements; do
    scripts/fuzz.sh "$target" "${CTWIN_CI_FUZZ_SECONDS:-10}"
  done
  stage "ctest under the sanitizers"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-fuzz --output-on-failure --parallel "$(nproc)" ${CTWIN_CI_SANITIZE_TESTS:+-R "$CTWIN_CI_SANITIZE_TESTS"}
fi
stage "mutation score"
# Every mutation must still apply (a stale one fails here, whichever part runs).
scripts/mutate.sh --list >/dev/null
# The mutation run rebuilds and tests one mutant at a time, mostly on one core: as many shards
# as cores run side by side (each its own scratch tree; ccache shares their first build). A
# mutant costs a recompile of its file (3 s on average, more after a header change), so the whole
# list no longer fits CI's 45 minutes beside the two full builds: CI runs every third mutation
# from the one the commit id picks, so successive commits cover all three parts (every mutation was
# killed when it was added; docs/testing.md). Half the list (364 of 728) took 1,932 s after a
# header change, and CI 3,160 s in all.
shards=${CTWIN_CI_MUTATION_SHARDS:-$(nproc)}
if [ "${CTWIN_CI_MUTATIONS:-part}" = all ]; then
  parts=1 part=0
else
  parts=3
  commit=$(git rev-parse HEAD 2>/dev/null || echo 0)
  part=$((16#${commit:0:7} % parts))
  echo "mutation score: part $((part + 1)) of $parts of tests/mutations.txt (every third mutation; commit ${commit:0:12}; CTWIN_CI_MUTATIONS=all for every one)"
fi
logs=$(mktemp -d)
pids=()
for k in $(seq 1 "$shards"); do
  # Shard (part + 1 + parts x (k - 1)) of parts x shards: mutations numbered part mod parts.
  scripts/mutate.sh --min-score 0.90 --shard "$((part + 1 + parts * (k - 1)))/$((parts * shards))" --jobs 1 \
    >"$logs/mutate-$k.out" 2>&1 &
  pids+=($!)
done
status=0
for k in $(seq 1 "$shards"); do
  wait "${pids[k - 1]}" || status=1
  echo "--- mutation shard $k/$shards"
  cat "$logs/mutate-$k.out"
done
rm -rf "$logs"
exit "$status"
