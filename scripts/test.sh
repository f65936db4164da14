#!/usr/bin/env bash
# The whole test suite: format check, a warnings-as-errors build, every CTest test, the check
# that CTest runs every doctest case, and the check that every entry of tests/mutations.txt
# still applies (the mutation score itself is scripts/mutate.sh, a few minutes on its own).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check-format.sh
scripts/build.sh -DCTWIN_WERROR=ON
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
scripts/check-tests.sh build
scripts/mutate.sh --list >/dev/null
