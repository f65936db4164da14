#!/usr/bin/env bash
# Rewrites the part of docs/scenarios.md between its markers with `ctwin params --markdown`
# (the test "docs/scenarios.md carries `ctwin params --markdown`..." checks they agree).
# usage: scripts/update-params-doc.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
gen=$(mktemp)
trap 'rm -f "$gen"' EXIT
"$build/ctwin" params --markdown >"$gen"
python3 - "$gen" <<'PY'
import sys
doc_path = "docs/scenarios.md"
doc = open(doc_path).read()
begin, end = "<!-- BEGIN ctwin params --markdown -->\n", "<!-- END ctwin params --markdown -->"
b, e = doc.index(begin), doc.index(end)
open(doc_path, "w").write(doc[:b + len(begin)] + open(sys.argv[1]).read() + doc[e:])
PY
