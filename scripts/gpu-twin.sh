#!/usr/bin/env bash
# The digital twin on a real GPU node: the GPU-only test cases of realrun's CUDA backend, then
# ctwin-realrun on the H200 twin scenarios. SET training (the default): the BF16 fit, the BF16
# and FP8 held-out (about 5 minutes); SET serving: the serving twin's prefill, decode and mixed
# iterations and the fit without sweeps (about 3 minutes). Writes the measurements files and one
# log into OUT_DIR (default ./gpu-out); calibrate and validate then run anywhere
# (docs/realrun-cuda.md, "Measured on an H200").
#
#   scripts/gpu-twin.sh BIN_DIR [OUT_DIR [SET]]     BIN_DIR holds ctwin-realrun and test_realrun
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: scripts/gpu-twin.sh BIN_DIR [OUT_DIR]}
out=${2:-gpu-out}
set_name=${3:-training}
mkdir -p "$out"
log=$out/run.log  # every log in one file: a device run returns few files
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv | tee "$log"
# cuBLASLt and NCCL where this image keeps them (a CUDA install or the Python wheels).
dirs=""
for lib in libcudart.so.13 libcublasLt.so.13 libnccl.so.2; do
  if ! ldconfig -p | grep -q "$lib"; then
    f=$(find /usr/local/cuda*/ /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    [[ -n $f ]] && dirs="$dirs$(dirname "$f"):"
  fi
done
export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:-}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
ldd "$bin/ctwin-realrun" | grep -E "not found|cublas|nccl|cudart"
timeout 120 "$bin/test_realrun" -tc='GPU*' -s >"$out/gpu-tests.txt" 2>&1
echo "gpu tests: exit $?"; grep -E "skipped|ERROR|FAILED|test cases|assertions" "$out/gpu-tests.txt" | head -20
# The prefill kernels are checked against a host reference there; should the mma.sync one (the
# default) be wrong on this GPU, the WMMA one runs instead; should that be wrong too, the scalar
# kernel, on fewer repeats (it is far slower).
extra=()
if grep -Eq 'kernel := "?mma' "$out/gpu-tests.txt"; then
  if grep -Eq 'kernel := "?wmma' "$out/gpu-tests.txt"; then
    export CTWIN_REALRUN_ATTENTION=simple
    extra=(--repeats 3 --warmup 1)
    echo "the mma.sync and WMMA attention kernels failed their checks: CTWIN_REALRUN_ATTENTION=simple" | tee -a "$log"
  else
    export CTWIN_REALRUN_ATTENTION=wmma
    echo "the mma.sync attention kernel failed its check: CTWIN_REALRUN_ATTENTION=wmma" | tee -a "$log"
  fi
fi
cat "$out/gpu-tests.txt" >>"$log" && rm "$out/gpu-tests.txt"
run() {
  local name=$1; shift
  local t0=$SECONDS
  timeout 200 "$bin/ctwin-realrun" "$@" "${extra[@]}" -o "$out/$name.json" --force >"$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s"; tr '\r' '\n' <"$out/$name.log" | grep -v "%$" | tail -6
  { echo "=== $name"; tr '\r' '\n' <"$out/$name.log"; } >>"$log" && rm "$out/$name.log"
}
if [[ $set_name == serving ]]; then
  run h200-serving scenarios/twin/h200-serving.json
  run h200-fit scenarios/twin/h200-fit.json --set /realrun/sweep=false
else
  run h200-fit scenarios/twin/h200-fit.json --cluster-out "$out/h200-cluster.json"
  run h200-heldout scenarios/twin/h200-heldout.json
  run h200-heldout-fp8 scenarios/twin/h200-heldout.json --set /training/precision/compute=fp8
fi
ls -la "$out"
