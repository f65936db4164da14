#!/usr/bin/env bash
# Configures and builds ClusterTwin in ./build (Release). Extra arguments go to CMake.
# CTWIN_BUILD_DIR picks another folder, e.g. a clang build beside GCC's:
#   CXX=clang++-14 CTWIN_BUILD_DIR=build-clang scripts/build.sh -DCTWIN_WERROR=ON
# With ccache installed, compiles go through it (paths relative to the tree, so a scratch copy
# such as scripts/mutate.sh's reuses the same cache).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
            -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "${CTWIN_BUILD_DIR:-build}" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"
cmake --build "${CTWIN_BUILD_DIR:-build}" --parallel "$(nproc)"
