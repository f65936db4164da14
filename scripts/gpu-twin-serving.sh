#!/usr/bin/env bash
# The GPU tests, then ctwin-realrun on the H200 serving twin (prefill, decode and mixed
# iterations of Llama-3-8B) and the training fit scenario, into OUT_DIR; a short run for a
# device lease with little time left (scripts/gpu-twin.sh is the full one).
#
#   scripts/gpu-twin-serving.sh BIN_DIR [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: scripts/gpu-twin-serving.sh BIN_DIR [OUT_DIR]}
out=${2:-gpu-out}
mkdir -p "$out"
log=$out/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$log"
timeout 60 "$bin/test_realrun" -tc='GPU*' >>"$log" 2>&1
echo "gpu tests: exit $?"; grep -E "ERROR|test cases|MESSAGE" "$log" | head -12
extra=()
if grep -q "tensor-core" "$log" && grep -q "ERROR" "$log"; then
  export CTWIN_REALRUN_ATTENTION=simple
  extra=(--repeats 3 --warmup 1)
  echo "tensor-core attention failed its check: CTWIN_REALRUN_ATTENTION=simple" | tee -a "$log"
fi
run() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$bin/ctwin-realrun" "$@" "${extra[@]}" -o "$out/$name.json" --force --quiet >>"$log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s"
}
run h200-serving 110 scenarios/twin/h200-serving.json
run h200-fit-tc2 70 scenarios/twin/h200-fit.json --set /realrun/sweep=false
ls -la "$out"
