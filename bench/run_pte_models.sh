#!/usr/bin/env bash
# ExecuTorch programs (.pte, lowered with WebGPUPartitioner) beside the same
# architectures as ONNX, both through wgnn, in one run on one GPU:
#   1. each .pte's outputs against eager PyTorch's (bench/pte_prepare.py);
#   2. `wgnn bench` of the .pte and of the ONNX export (the steady median
#      host to host, first run).
# Prepare on the set-up machine (the GPU machine reaches no registry):
#   .venv-executorch/bin/python bench/pte_prepare.py .payload/pte modnet resnet50 mobilenetv2 convnext_tiny
#   .venv-executorch/bin/python bench/pte_prepare.py .payload/pte --mini davit_standin ...  (NAME_mini)
#   python3 scripts/models/export.py --model NAME --opset 17 [--mini] --out .payload/pte   (each NAME)
# then on the GPU machine: bash bench/run_pte_models.sh .payload/pte NAME...
set -euo pipefail
DIR=$1; shift
WGNN=${WGNN:-build/wgnn}
for m in "$@"; do
  ins=()
  for f in "$DIR/$m".input_*.npy; do
    i=${f##*.input_}; i=${i%.npy}
    ins+=(--input "input_$i=$f")
  done
  rm -rf "$DIR/out_$m"
  "$WGNN" run "$DIR/$m.pte" "${ins[@]}" --output-dir "$DIR/out_$m" >/dev/null
  "${PYTHON:-python3}" - "$DIR" "$m" <<'PY'
import glob, sys
import numpy as np
d, m = sys.argv[1], sys.argv[2]
worst = 0.0
for f in sorted(glob.glob(f"{d}/{m}.output_*.npy")):
    k = f.rsplit("_", 1)[1][:-4]
    want = np.load(f).astype(np.float64)
    got = np.load(f"{d}/out_{m}/output_{k}.npy").astype(np.float64)
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-12)
    worst = max(worst, err)
print(f"{m}: .pte outputs against eager PyTorch: max |diff| / max |ref| = {worst:.2e}")
PY
  pte=$("$WGNN" bench "$DIR/$m.pte" "${ins[@]}" --runs 50 --json)
  oins=()
  for f in "$DIR/${m}_opset17_inputs"/*.npy; do
    [ -f "$f" ] && oins+=(--input "$(basename "$f" .npy)=$f")
  done
  onnx=$("$WGNN" bench "$DIR/${m}_opset17.onnx" "${oins[@]}" --runs 50 --json)
  "${PYTHON:-python3}" - "$m" "$pte" "$onnx" <<'PY'
import json, sys
m, a, b = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
def line(j):
    f = lambda v, p: "n/a" if v is None else f"{v:.{p}f}"
    return (f"median {f(j.get('median_ms'), 3)} ms, GPU {f(j.get('gpu_ms'), 3)} ms, {j.get('dispatches')} dispatches, "
            f"first run {f(j.get('first_run_ms'), 1)} ms")
print(f"{m}: .pte  {line(a)}")
print(f"{m}: .onnx {line(b)}")
PY
done
