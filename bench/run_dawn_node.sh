#!/usr/bin/env bash
# On the GPU machine: wgnn built against npm `webgpu`'s Dawn
# (WGNN_DAWN=dawn-node scripts/setup: build-dawn-node/, .deps/dawn-node/):
# the adapter's features with and without unsafe APIs, the test suite on the
# real GPU with subgroup matrices (the tensor-core tests run there), and the
# zoo timed by wgnn: the npm build (build/wgnn) in float32 beside the
# dawn-node build in float32 and float16, one run. TORCH=1 adds PyTorch
# compiled (torch.compile, reduce-overhead) fp32 and fp16 to the second table.
# Needs build/, build-dawn-node/, .deps/dawn, .deps/dawn-node, .gl, .payload/lib.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
(
  export LD_LIBRARY_PATH="$PWD/.deps/dawn-node:$LD_LIBRARY_PATH"
  build-dawn-node/wgnn info 2>&1 | tee "$OUT/info_dawn_node.txt"
  WGNN_ALLOW_UNSAFE_APIS=1 build-dawn-node/wgnn info 2>&1 | tee -a "$OUT/info_dawn_node.txt"
  if [ "${TESTS:-1}" = 1 ]; then
    start=$(date +%s)
    WGNN_ALLOW_UNSAFE_APIS=1 timeout "${TEST_TIMEOUT:-300}" build-dawn-node/tests/wgnn_tests --gtest_brief=1 \
      > "$OUT/tests_dawn_node.log" 2>&1
    echo "wgnn_tests: exit $? in $(( $(date +%s) - start )) s"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|FAILED" "$OUT/tests_dawn_node.log" | head -40
  fi
)
wgnn_only=torch-fp32,torch-fp16,torch-compile-fp32,torch-compile-fp16,ort-webgpu,ort-webgpu-fp16,ort-cpu
MODELS=${MODELS:-all}
SKIP=$wgnn_only NAME=zoo_npm_fp32 WGNN=build/wgnn ISNET=none bash bench/run_compare.sh "$MODELS"
if [ "${TORCH:-0}" = 1 ]; then skip=torch-fp32,torch-fp16,ort-webgpu,ort-webgpu-fp16,ort-cpu; else skip=$wgnn_only; fi
SKIP=$skip NAME=zoo_dawn_node FP16=1 WGNN=build-dawn-node/wgnn ISNET=none bash bench/run_compare.sh "$MODELS"
