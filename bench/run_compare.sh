#!/usr/bin/env bash
# On the GPU machine: whole models timed by wgnn, PyTorch eager fp32 and fp16
# (CUDA) and ONNX Runtime WebGPU and CPU in one run (bench/compare_models.py).
# ONNX Runtime WebGPU also times each zoo model exported in float16 (the tool
# ort-webgpu-fp16: scripts/models/export.py --half, model.half() traced on
# CUDA; the column "ORT WebGPU fp16", beside wgnn fp16 with FP16=1): ONNX
# Runtime at the precision of `wgnn bench --fp16`. Not for ISNet, whose file
# is already a float16 graph. SKIP=ort-webgpu-fp16 leaves it out.
#
#   bash bench/run_compare.sh [all | NAME,NAME,...]     (default: all)
#
# Needs build/wgnn (a Release build), .deps/dawn, .gl and .payload (lib/ from
# bench/make_payload.sh, ortpeer.tar.xz from bench/make_ort_peer.sh), about
# 61 MB, copied to the GPU machine. The model zoo (scripts/models) exports the models
# here, with the machine's PyTorch. ISNet is timed when .deps/models/isnet.onnx
# is there, or ISNET=FILE, or .payload/isnet.onnx.part-* (the model split to
# travel where transfers are size-limited, joined here).
# Writes $OUT/models_h200.{md,png,jsonl}; a command has a time limit, so
# larger sets can run in several calls (NAME=... per call) and be merged with
#   python3 bench/compare_models.py --report-only A.jsonl B.jsonl --out docs/results
# Variables: RUNS (50), WARMUP (10), CPU_RUNS (5), OPSET (17), DYNAMO=1,
# TIMEOUT (seconds per step, 240), NAME (models_h200), ISNET, SKIP (tools, comma-
# separated: wgnn, torch-fp32, torch-fp16, ort-webgpu, ort-webgpu-fp16, ort-cpu),
# FP16=1 (also wgnn in float16 mode: compare_models.py --wgnn-fp16),
# WGNN (the wgnn binary, default build/wgnn; with build-source/wgnn the
# Dawn built from source is used; the default build has npm `webgpu`'s
# Dawn: either has float16 on NVIDIA and subgroup matrices (tensor cores)).
# The ONNX Runtime peer is needed only when SKIP leaves an ort-* tool in.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
work=${TMPDIR:-/tmp}/wgnn_compare
mkdir -p "$work"
need_ort=1
case ",${SKIP:-}," in *,ort-webgpu,*) case ",${SKIP:-}," in *,ort-webgpu-fp16,*) case ",${SKIP:-}," in *,ort-cpu,*) need_ort=0 ;; esac ;; esac ;; esac
if [ "$need_ort" = 1 ] && [ ! -x "$work/ortpeer/node" ]; then
  if [ ! -f .payload/ortpeer.tar.xz ]; then
    echo "run_compare: .payload/ortpeer.tar.xz is missing: run bench/make_ort_peer.sh and copy .payload here" >&2
    exit 1
  fi
  tar -C "$work" -xJf .payload/ortpeer.tar.xz
fi
isnet=${ISNET:-auto}
if [ "$isnet" = auto ] && [ ! -f .deps/models/isnet.onnx ] && ls .payload/isnet.onnx.part-* > /dev/null 2>&1; then
  cat .payload/isnet.onnx.part-* > "$work/isnet.onnx"
  isnet=$work/isnet.onnx
fi
WGNN=${WGNN:-build/wgnn}
case "$WGNN" in
  build-source/*)
    export LD_LIBRARY_PATH="$(ls -d "$PWD"/.deps/dawn-source-*/lib | head -1):$LD_LIBRARY_PATH"
    export WGNN_ALLOW_UNSAFE_APIS=1 ;;
  *)
    # The default build (dawn-node) loads its Dawn through its rpath; where
    # the tree moved, from .deps/dawn-node.
    if [ -d .deps/dawn-node ]; then export LD_LIBRARY_PATH="$PWD/.deps/dawn-node:$LD_LIBRARY_PATH"; fi ;;
esac
"$WGNN" info | tee "$OUT/info.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>/dev/null | tee -a "$OUT/info.txt"
python3 bench/compare_models.py --wgnn "$WGNN" --ort-peer "$work/ortpeer" --out "$OUT" \
  --name "${NAME:-models_h200}" --models "${1:-all}" --runs "${RUNS:-50}" --warmup "${WARMUP:-10}" \
  --cpu-runs "${CPU_RUNS:-5}" --opset "${OPSET:-17}" ${DYNAMO:+--dynamo} --timeout "${TIMEOUT:-240}" \
  --isnet "$isnet" --work "$work" --reuse --skip "${SKIP:-}" --device cuda $([ "${FP16:-0}" = 1 ] && echo --wgnn-fp16)
