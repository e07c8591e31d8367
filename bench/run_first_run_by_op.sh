#!/usr/bin/env bash
# A warm first run's recording by ONNX op type: for each model and
# precision, `wgnn bench` twice in a fresh pipeline cache folder (the first
# fills it), the second's first-run breakdown printed.
#
#   [WGNN=build/wgnn] bash bench/run_first_run_by_op.sh MODEL.onnx [...]
#
# On the GPU machine, source bench/gpu_env.sh first (and set
# WGNN_ALLOW_UNSAFE_APIS=1 for float16 on the tensor cores).
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build/wgnn}
for m in "$@"; do
  for p in --fp16 ""; do
    cache=$(mktemp -d "${TMPDIR:-/tmp}/wgnn-by-op-XXXXXX")
    WGNN_CACHE_DIR=$cache "$WGNN" bench "$m" $p --runs 5 --warmup 1 > /dev/null 2>&1
    echo "== $(basename "$m") ${p:-fp32} warm"
    WGNN_CACHE_DIR=$cache "$WGNN" bench "$m" $p --runs 5 --warmup 1 2>&1 | grep -A6 "^first run" | grep -v "disk cache"
    rm -rf "$cache"
  done
done
