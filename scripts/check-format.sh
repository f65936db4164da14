#!/usr/bin/env bash
# Fails if any C++ file in the tree differs from what clang-format (.clang-format) makes of it.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h')
if [ -z "$files" ]; then exit 0; fi
bad=$(for f in $files; do clang-format --style=file "$f" | cmp -s - "$f" || echo "$f"; done)
if [ -n "$bad" ]; then
  echo "check-format: these files are not formatted (run: clang-format -i FILE):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "check-format: $(echo "$files" | wc -w) files formatted"
