#!/usr/bin/env bash
# On the GPU machine: the subgroup-matrix (tensor-core) GEMM of wgnn built
# against the Dawn from source (build-source/) beside PyTorch fp16/fp32 on the
# same shapes, in one run, then the tile shapes on the models' product
# shapes. Needs build-source/bench/wgnn_bench_gemm, .deps/dawn-source-*/lib,
# .gl. Writes OUT (default /tmp/out): gemm.md, gemm_shapes.md and the JSON
# lines behind them.
#   bash bench/run_gemm.sh [SIZES] [CONFIGS...]
set -uo pipefail
source bench/gpu_env.sh
LIB=$(ls -d "$PWD"/.deps/dawn-source-*/lib | head -1)
export LD_LIBRARY_PATH="$LIB:$LD_LIBRARY_PATH"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SIZES=${1:-4096,8192}
shift || true
CFG=(--configs 128x128x32:2x2:1 128x128x32:2x2:1/c 128x128x32:2x2:1/t1 128x128x32:2x2:1/p1 128x128x32:2x2:1/p2)
if [ $# -gt 0 ]; then CFG=(--configs "$@"); fi
# Square products: the kernel wgnn uses for big products, the same with every
# load checked (/c, the previous kernel), with A stored transposed (/t1), and
# with 1 or 2 KB of unused workgroup memory (/p1, /p2: whether two workgroups
# still fit on a multiprocessor).
build-source/bench/wgnn_bench_gemm --sizes ${SIZES//,/ } --reps 9 "${CFG[@]}" | tee "$OUT/gemm_wgnn.jsonl"
python3 bench/torch_gemm.py "$SIZES" | tee "$OUT/gemm_torch.jsonl"
python3 bench/gemm_report.py "$OUT/gemm_wgnn.jsonl" "$OUT/gemm_torch.jsonl" | tee "$OUT/gemm.md"
# The models' product shapes (DaViT-B at 768, Whisper-base encoder, BART-base
# decoder) with float16 results, for the tile choice (pick_config).
SHAPES="36864x384x128 36864x128x128 36864x512x128 36864x128x512 9216x768x256 9216x1024x256 9216x256x1024 2304x1536x512
  2304x2048x512 2304x512x2048 576x3072x1024 576x1024x4096 1504x512x512 1504x2048x512 1504x512x2048 128x768x768
  128x3072x768 1024x1024x1024 2048x2048x2048"
build-source/bench/wgnn_bench_gemm --f16-out --shapes $SHAPES --reps 5 --warmup-ms 100 \
  --configs 128x128x32:2x2:1 64x64x32:2x2:1 64x64x32:2x2:2 128x64x32:2x1:1 64x128x32:1x2:1 > "$OUT/gemm_shapes.jsonl"
python3 bench/gemm_report.py --pivot "$OUT/gemm_shapes.jsonl" | tee "$OUT/gemm_shapes.md"
