#!/usr/bin/env bash
# Runs one libFuzzer target (docs/reliability.md) for SECONDS: builds build-fuzz (clang 14,
# ASan + UBSan + libFuzzer, CTWIN_FUZZ=ON) when needed, fuzzes from the seeds of
# tests/fuzz/corpus/TARGET with tests/fuzz/ctwin.dict, keeps what it learns in
# build-fuzz/corpus/TARGET, and saves every crash, leak, timeout or OOM input to
# tests/fuzz/regressions/TARGET/ (commit it: the replay test then runs it in every build).
#
# usage: scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags]
#        scripts/fuzz.sh --build            (only build build-fuzz)
# targets: scenario hf_config cluster_json profile trace_binary chrome_trace request_trace mooncake_trace measurements
# Environment: CTWIN_FUZZ_JOBS (default 1), CXX (default clang++-14), NICE (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(scenario hf_config cluster_json profile trace_binary chrome_trace request_trace mooncake_trace measurements)

build() {
  local launcher=()
  if command -v ccache >/dev/null; then
    export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}" CCACHE_NOHASHDIR=1
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
              -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  if [ ! -f build-fuzz/CMakeCache.txt ]; then
    # -O1 keeps the sanitizer build quick to compile and still fast to run; NDEBUG as shipped.
    # No CUDA backend: its kernels cannot run under the sanitizers, and GCC's build compiles them.
    CXX="${CXX:-clang++-14}" CC="${CC:-clang-14}" cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only -DNDEBUG" -DCTWIN_FUZZ=ON -DCTWIN_WERROR=ON \
      -DCTWIN_BUILD_VIEWER=OFF -DCTWIN_BUILD_CUDA=OFF "${launcher[@]}" >/dev/null
  fi
  nice -n "${NICE:-10}" cmake --build build-fuzz --parallel "${CTWIN_BUILD_JOBS:-$(nproc)}" "$@"
}

if [ "${1:-}" = "--build" ]; then
  shift
  build "$@"
  exit 0
fi
if [ $# -lt 2 ]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
target="$1"
seconds="$2"
shift 2
if [[ ! " ${targets[*]} " =~ " ${target} " ]]; then
  echo "fuzz.sh: unknown target '$target'; one of: ${targets[*]}" >&2
  exit 2
fi
build --target "fuzz_${target}"
work="build-fuzz/corpus/${target}"
found="tests/fuzz/regressions/${target}"
mkdir -p "$work" "$found"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
jobs=()
if [ "${CTWIN_FUZZ_JOBS:-1}" -gt 1 ]; then jobs=(-jobs="$CTWIN_FUZZ_JOBS" -workers="$CTWIN_FUZZ_JOBS"); fi
status=0
nice -n "${NICE:-10}" "build-fuzz/fuzz/fuzz_${target}" "$work" "tests/fuzz/corpus/${target}" \
  -dict=tests/fuzz/ctwin.dict -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
  -max_len=65536 "${jobs[@]}" \
  -artifact_prefix="${found}/" -print_final_stats=1 "$@" || status=$?
if [ "$status" -ne 0 ]; then
  echo "fuzz.sh: $target found a problem (exit $status); the input is under $found/" >&2
fi
exit "$status"
