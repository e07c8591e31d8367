#!/usr/bin/env bash
# On the GPU machine: wgnn built against npm `webgpu`'s Dawn (the default
# build, build/, with .deps/dawn-node/): the adapter's features with and
# without unsafe APIs, the test suite on the real GPU with subgroup matrices
# (the tensor-core tests run there), and the zoo timed by wgnn in float32 and
# float16 (tensor cores) in one run; beside it the npm Dawn's build in
# float32 when NPM_BUILD (default build-npm: WGNN_DAWN=npm scripts/setup)
# is there, and PyTorch compiled (torch.compile, reduce-overhead) fp32 and
# fp16 with TORCH=1.
#   BUILD (build), NPM_BUILD (build-npm), TESTS=0 (no test suite),
#   GTEST_FILTER (a part of it), MODELS (all, or NAME,NAME), TORCH=1 or fp16
# Needs .gl and .payload/lib (bench/make_payload.sh) beside the builds.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BUILD=${BUILD:-build}
NPM_BUILD=${NPM_BUILD:-build-npm}
(
  export LD_LIBRARY_PATH="$PWD/.deps/dawn-node:$LD_LIBRARY_PATH"
  WGNN_ALLOW_UNSAFE_APIS=0 "$BUILD/wgnn" info 2>&1 | tee "$OUT/info_dawn_node.txt"
  "$BUILD/wgnn" info 2>&1 | tee -a "$OUT/info_dawn_node.txt"
  if [ "${TESTS:-1}" = 1 ]; then
    start=$(date +%s)
    timeout "${TEST_TIMEOUT:-300}" "$BUILD/tests/wgnn_tests" --gtest_brief=1 --gtest_filter="${GTEST_FILTER:-*}" \
      > "$OUT/tests_dawn_node.log" 2>&1
    echo "wgnn_tests: exit $? in $(( $(date +%s) - start )) s"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|FAILED" "$OUT/tests_dawn_node.log" | head -40
  fi
)
wgnn_only=torch-fp32,torch-fp16,torch-compile-fp32,torch-compile-fp16,ort-webgpu,ort-webgpu-fp16,ort-cpu
MODELS=${MODELS:-all}
if [ -x "$NPM_BUILD/wgnn" ]; then
  SKIP=$wgnn_only NAME=zoo_npm_fp32 WGNN="$NPM_BUILD/wgnn" ISNET=none bash bench/run_compare.sh "$MODELS"
fi
# TORCH=1: PyTorch compiled fp32 and fp16; TORCH=fp16: compiled fp16 only.
case "${TORCH:-0}" in
  1) skip=torch-fp32,torch-fp16,ort-webgpu,ort-webgpu-fp16,ort-cpu ;;
  fp16) skip=torch-fp32,torch-fp16,torch-compile-fp32,ort-webgpu,ort-webgpu-fp16,ort-cpu ;;
  *) skip=$wgnn_only ;;
esac
SKIP=$skip NAME=zoo_dawn_node FP16=1 WGNN="$BUILD/wgnn" ISNET=none bash bench/run_compare.sh "$MODELS"
