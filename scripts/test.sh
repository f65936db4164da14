#!/usr/bin/env bash
# The whole test suite: format check, a warnings-as-errors build, every CTest test, the checks
# on the suite itself (every doctest case runs; no bare Approx), and the mutation score
# (scripts/mutate.sh: every planted bug of tests/mutations.txt, at least 90% caught, none stale).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check-format.sh
scripts/build.sh -DCTWIN_WERROR=ON
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
scripts/check-tests.sh build
scripts/mutate.sh --min-score 0.90
