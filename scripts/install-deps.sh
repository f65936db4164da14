#!/usr/bin/env bash
# Installs the Debian 12 packages ClusterTwin builds and tests with. Idempotent: packages
# already present are skipped. Run as root (or through sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git clang-format
  ccache mold  # mold: CMakeLists.txt links with it when present (the mutation run relinks a lot)
  clang-14 libfuzzer-14-dev llvm-14  # the sanitizer and fuzz build (scripts/fuzz.sh, docs/reliability.md)
  libboost-graph-dev nlohmann-json3-dev libeigen3-dev doctest-dev
  libopenmpi-dev openmpi-bin  # realrun under mpirun/srun: the CPU backend's ranks as processes, ctwin-realrun's GPUs
  libimgui-dev libglfw3-dev libgl-dev libstb-dev
  xvfb xauth libgl1-mesa-dri
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root, e.g. sudo $0" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
