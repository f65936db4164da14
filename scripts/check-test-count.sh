#!/usr/bin/env bash
# Every doctest case must be exactly one CTest test: a case lost or split by registration
# would otherwise run nothing and still count as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
doctest_cases=0
for exe in "$build"/tests/test_*; do
  [[ -x $exe && -f $exe ]] || continue
  n=$("$exe" --count --no-version | sed -n 's/.*passing the current filters: \([0-9]\+\).*/\1/p')
  doctest_cases=$((doctest_cases + n))
done
ctest_tests=$(ctest --test-dir "$build" -N | sed -n 's/^Total Tests: \([0-9]\+\)$/\1/p')
if [[ $doctest_cases -ne $ctest_tests ]]; then
  echo "check-test-count: doctest lists $doctest_cases cases but CTest registers $ctest_tests tests" >&2
  exit 1
fi
echo "check-test-count: $doctest_cases doctest cases, $ctest_tests CTest tests"
