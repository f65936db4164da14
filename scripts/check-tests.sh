#!/usr/bin/env bash
# Checks on the suite itself:
# - every doctest case is exactly one CTest test (a case lost or split by registration would
#   otherwise run nothing and still count as passed);
# - no test compares through a bare doctest::Approx, whose default scale makes a stated
#   relative tolerance absolute below 1 (tests/support/tolerance.hpp has the helpers).
set -euo pipefail
cd "$(dirname "$0")/.."
if bare=$(grep -rn --include='*.cpp' --include='*.hpp' -E '(^|[^_[:alnum:]])Approx\(' tests | grep -v '^tests/support/tolerance.hpp:'); then
  echo "check-tests: bare Approx (use rel_approx or abs_approx from tests/support/tolerance.hpp):" >&2
  echo "$bare" >&2
  exit 1
fi
build=${1:-build}
doctest_cases=0
for exe in "$build"/tests/test_*; do
  [[ -x $exe && -f $exe ]] || continue
  n=$("$exe" --count --no-version | sed -n 's/.*passing the current filters: \([0-9]\+\).*/\1/p')
  doctest_cases=$((doctest_cases + n))
done
ctest_tests=$(ctest --test-dir "$build" -N | sed -n 's/^Total Tests: \([0-9]\+\)$/\1/p')
if [[ $doctest_cases -ne $ctest_tests ]]; then
  echo "check-tests: doctest lists $doctest_cases cases but CTest registers $ctest_tests tests" >&2
  exit 1
fi
echo "check-tests: $doctest_cases doctest cases, $ctest_tests CTest tests"
