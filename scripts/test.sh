#!/usr/bin/env bash
# The whole test suite: format check, a warnings-as-errors build, every CTest test, the check
# that CTest runs every doctest case, and the mutation score (scripts/mutate.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check-format.sh
scripts/build.sh -DCTWIN_WERROR=ON
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
scripts/check-tests.sh build
