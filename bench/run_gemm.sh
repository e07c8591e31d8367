#!/usr/bin/env bash
# On the GPU machine: the subgroup-matrix GEMM configurations (wgnn built
# against the Dawn from source, build-source/) with Dawn's robustness on and
# off, beside PyTorch fp16/fp32 on the same shapes, in one run.
# Needs build-source/bench/wgnn_bench_gemm, .deps/dawn-source-*/lib, .gl.
#   bash bench/run_gemm.sh [SIZES] [CONFIGS...]
set -uo pipefail
source bench/gpu_env.sh
LIB=$(ls -d "$PWD"/.deps/dawn-source-*/lib | head -1)
export LD_LIBRARY_PATH="$LIB:$LD_LIBRARY_PATH"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SIZES=${1:-4096,8192}
shift || true
CFG=()
if [ $# -gt 0 ]; then CFG=(--configs "$@"); fi
: > "$OUT/gemm_wgnn.jsonl"
for R in --robustness ""; do
  build-source/bench/wgnn_bench_gemm --sizes ${SIZES//,/ } $R "${CFG[@]}" | tee -a "$OUT/gemm_wgnn.jsonl"
done
python3 bench/torch_gemm.py "$SIZES" | tee "$OUT/gemm_torch.jsonl"
python3 bench/gemm_report.py "$OUT/gemm_wgnn.jsonl" "$OUT/gemm_torch.jsonl" | tee "$OUT/gemm.md"
