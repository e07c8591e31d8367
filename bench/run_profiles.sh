#!/usr/bin/env bash
# On the GPU machine: where each zoo model spends its GPU time, wgnn beside
# compiled PyTorch, in one run (docs/BENCHMARKS.md, "Float16 against
# compiled PyTorch, kernel by kernel"). Per model: the opset-17 export
# (scripts/models/export.py, kept in WORK), `wgnn profile --fp16 --top 0`
# (every op and kernel, and a Chrome trace of every dispatch) and
# bench/torch_profile.py --dtype fp16 --compile (CUDA kernels per
# inference). Exports run in parallel first; the GPU work runs one model at
# a time. Writes OUT (default /tmp/out): wgnn_MODEL.txt,
# wgnn_MODEL.trace.json, torch_MODEL.txt.
#   WGNN=build-source/wgnn [WORK=/tmp/wc] [OUT=/tmp/out] [TORCH=0] \
#     bash bench/run_profiles.sh [MODEL ...]
# (default: the eight zoo models). With the Dawn from source, set
# WGNN_ALLOW_UNSAFE_APIS=1 for the tensor cores. TORCH=0 leaves PyTorch out.
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:?WGNN=FILE: a wgnn binary}
WORK=${WORK:-/tmp/wc}
OUT=${OUT:-/tmp/out}
TORCH=${TORCH:-1}
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(modnet resnet50 mobilenetv2 convnext_tiny deit_tiny davit_base whisper_base_encoder
                                   bart_base_decoder)
# shellcheck source=bench/export_zoo.sh
source bench/export_zoo.sh
export_zoo "$WORK" "$OUT" "${MODELS[@]}"
status=0
for m in "${MODELS[@]}"; do
  model="$WORK/onnx/${m}_opset17.onnx"
  if [ ! -f "$model" ]; then
    echo "$m: no export (see $OUT/export_$m.log)" >&2
    status=1
    continue
  fi
  if ! "$WGNN" profile "$model" --fp16 --top 0 --trace "$OUT/wgnn_$m.trace.json" > "$OUT/wgnn_$m.txt" 2>&1; then
    echo "$m: wgnn profile failed (see $OUT/wgnn_$m.txt)" >&2
    status=1
  fi
  grep -E "^one pass" "$OUT/wgnn_$m.txt" | sed "s/^/$m wgnn: /"
  if [ "$TORCH" != 0 ]; then
    if ! python3 bench/torch_profile.py --model "$m" --dtype fp16 --compile --top 40 > "$OUT/torch_$m.txt" 2>&1; then
      echo "$m: torch_profile failed (see $OUT/torch_$m.txt)" >&2
      status=1
    fi
    grep -E "host to host median" "$OUT/torch_$m.txt" | sed "s/^/$m torch: /"
  fi
done
exit $status
