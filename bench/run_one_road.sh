#!/usr/bin/env bash
# On the GPU machine: the build before and after a change of the road from
# file to dispatch (fusions moved from the ONNX graph into IR passes),
# side by side in one run:
#   1. the eight zoo models, exported here (scripts/models/export.py, opset
#      17), A and B alternating model by model (bench/run_ab.sh);
#   2. ExecuTorch programs (.pte) beside their ONNX twins through each build
#      (bench/run_pte_models.sh), where PTE names a folder bench/pte_prepare.py
#      filled on the set-up machine.
#
#   A=wgnn-before B=wgnn-after [PTE=DIR] [PRECISIONS=fp32] [ROUNDS=2] [OUT=DIR] \
#     bash bench/run_one_road.sh [PTE_MODEL ...]
set -uo pipefail
cd "$(dirname "$0")/.."
A=${A:?A=FILE: the wgnn binary before}
B=${B:?B=FILE: the wgnn binary after}
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/one_road}
mkdir -p "$OUT" "$WORK"
# shellcheck source=bench/export_zoo.sh
source bench/export_zoo.sh
ZOO="modnet resnet50 mobilenetv2 convnext_tiny deit_tiny davit_base whisper_base_encoder bart_base_decoder"
# shellcheck disable=SC2086
export_zoo "$WORK" "$OUT/logs" $ZOO
models=()
for m in $ZOO; do
  if [ -f "$WORK/onnx/${m}_opset17.onnx" ]; then
    models+=("$WORK/onnx/${m}_opset17.onnx")
  else
    echo "$m: export failed (see $OUT/logs/export_$m.log)"
  fi
done
A=$A B=$B OUT=$OUT PRECISIONS=${PRECISIONS:-fp32} ROUNDS=${ROUNDS:-2} bash bench/run_ab.sh "${models[@]}"
if [ -n "${PTE:-}" ] && [ $# -gt 0 ]; then
  for v in A B; do
    bin=$A
    [ $v = B ] && bin=$B
    echo "== .pte and .onnx through $v ($bin)"
    WGNN=$bin bash bench/run_pte_models.sh "$PTE" "$@"
  done
fi
