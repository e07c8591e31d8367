#!/usr/bin/env bash
# On the GPU machine: the build before and after a change of the road from
# file to dispatch (fusions moved from the ONNX graph into IR passes),
# side by side in one run:
#   1. the eight zoo models, exported here (scripts/models/export.py, opset
#      17), A and B alternating model by model (bench/run_ab.sh);
#   2. ExecuTorch programs (.pte) beside their ONNX twins through each build
#      (bench/run_pte_models.sh), where PTE names a folder bench/pte_prepare.py
#      filled on the set-up machine;
#   3. the Llama-style decoder of scripts/models/decoders.py at GPT-2-small's
#      size (torch.onnx.export, Optimum's layout): 64 new tokens after a
#      16-token prompt, three runs in one process, through each build: the
#      third run's ms per token and dispatches per step, and the tokens.
#
#   A=wgnn-before B=wgnn-after [PTE=DIR] [ZOO="MODEL ..."] [LLAMA=0] [PRECISIONS=fp32] [ROUNDS=2] [OUT=DIR] \
#     bash bench/run_one_road.sh [PTE_MODEL ...]
set -uo pipefail
cd "$(dirname "$0")/.."
A=${A:?A=FILE: the wgnn binary before}
B=${B:?B=FILE: the wgnn binary after}
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/one_road}
mkdir -p "$OUT/logs" "$WORK"
# shellcheck source=bench/export_zoo.sh
source bench/export_zoo.sh
# ZOO="" leaves the zoo out.
ZOO=${ZOO-modnet resnet50 mobilenetv2 convnext_tiny deit_tiny davit_base whisper_base_encoder bart_base_decoder}
if [ -n "$ZOO" ]; then
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
fi
if [ -n "${PTE:-}" ] && [ $# -gt 0 ]; then
  for v in A B; do
    bin=$A
    [ $v = B ] && bin=$B
    echo "== .pte and .onnx through $v ($bin)"
    WGNN=$bin bash bench/run_pte_models.sh "$PTE" "$@"
  done
fi
P16=5,17,42,99,3,8,150,77,23,61,12,190,4,33,88,120
if [ "${LLAMA:-1}" = 0 ]; then
  :  # LLAMA=0 leaves the decoder out
elif [ -f "$WORK/llama/decoder_with_past_model.onnx" ] ||
   python3 scripts/models/decoders.py --model llama --size full --out "$WORK" > "$OUT/logs/export_llama.log" 2>&1; then
  for v in A B; do
    bin=$A
    [ $v = B ] && bin=$B
    "$bin" generate "$WORK/llama/decoder_with_past_model.onnx" --prompt "$P16" --max-new-tokens 64 --repeat 3 --json \
      > "$OUT/generate_$v.json" 2> "$OUT/generate_$v.err"
    python3 - "$v" "$OUT/generate_$v.json" <<'EOF'
import json, sys
v, path = sys.argv[1], sys.argv[2]
try:
    j = json.loads(open(path).read().strip().splitlines()[-1])
    r = j["last_run"]
    print(f"llama decoder, {v}: {r['ms_per_token']:.3f} ms/token, {r['step_host']['dispatches']} dispatches a step, "
          f"tokens {j['tokens'][0][:12]}...")
except Exception as e:  # noqa: BLE001
    print(f"llama decoder, {v}: no result ({e})")
EOF
  done
  tokens() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["tokens"])' "$1"; }
  if [ "$(tokens "$OUT/generate_A.json")" = "$(tokens "$OUT/generate_B.json")" ]; then
    echo "llama decoder: A and B give the same tokens"
  else
    echo "llama decoder: the tokens differ"
  fi
else
  echo "llama decoder: export failed (see $OUT/logs/export_llama.log)"
fi
