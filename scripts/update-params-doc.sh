#!/usr/bin/env bash
# Rewrites the part of docs/scenarios.md between its markers with `ctwin params --markdown`
# (the test "docs/scenarios.md carries `ctwin params --markdown`..." checks they agree).
# usage: scripts/update-params-doc.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
gen=$(mktemp)
out=$(mktemp docs/.scenarios.md.XXXXXX)  # beside it: the rename at the end replaces it whole
trap 'rm -f "$gen" "$out"' EXIT
"$build/ctwin" params --markdown >"$gen"
# Keep the begin marker's line and everything from the end marker on; the table goes between.
awk -v gen="$gen" '
  /^<!-- BEGIN ctwin params --markdown -->$/ { print; while ((getline line < gen) > 0) print line; skip = 1; next }
  /^<!-- END ctwin params --markdown -->/ { skip = 0 }
  !skip { print }
' docs/scenarios.md >"$out"
chmod 644 "$out"
mv "$out" docs/scenarios.md
