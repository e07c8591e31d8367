#!/usr/bin/env bash
# The kernels of one decode step of a decoder with past_key_values inputs
# (Optimum's layout): `wgnn profile` with one new token over a cache of LEN
# rows (default 127, a capacity of 128 as `wgnn generate` keeps it).
#
#   [WGNN=build/wgnn] bash bench/profile_decoder_step.sh DECODER.onnx [LEN] [profile options...]
#
# Needs a python with onnx (PYTHON, default python3) for the inputs' names
# and dims.
set -euo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build/wgnn}
MODEL=${1:?DECODER.onnx}
LEN=${2:-127}
shift $(( $# >= 2 ? 2 : 1 ))
mapfile -t shapes < <("${PYTHON:-python3}" - "$MODEL" "$LEN" <<'PY'
import sys
import onnx
model, n = sys.argv[1], int(sys.argv[2])
g = onnx.load(model, load_external_data=False).graph
inits = {t.name for t in g.initializer}
for i in g.input:
    if i.name in inits:
        continue
    dims = [d.dim_value if d.dim_value > 0 else -1 for d in i.type.tensor_type.shape.dim]
    if i.name == "attention_mask":
        dims = [1, n + 1]
    elif i.name.startswith("past_key_values"):
        dims = [1] + [d if d > 0 else n for d in dims[1:]]
    else:  # input_ids, position_ids: one token
        dims = [1, 1]
    print(f"--shape={i.name}=" + "x".join(str(d) for d in dims))
PY
)
[ ${#shapes[@]} -gt 0 ] || { echo "profile_decoder_step.sh: could not read the inputs of $MODEL" >&2; exit 1; }
"$WGNN" profile "$MODEL" "${shapes[@]}" --int-range 0:100 "$@"
