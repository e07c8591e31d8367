#!/usr/bin/env bash
# On the GPU machine: models as exporters write them, against ONNX Runtime's
# CPU provider (Python's onnxruntime there), in one run:
#   1. Llama- and Qwen2-style decoders at GPT-2-small's size
#      (scripts/models/decoders.py --size full, torch.onnx.export): 64 greedy
#      tokens of wgnn generate with views on (the default), with
#      WGNN_NO_VIEWS=1 and with --fp16, each against bench/ort_greedy.py, and
#      each one's ms per token;
#   2. the published uint8 ISNet on the 21 inputs of
#      tests/python/test_isnet_quint8.py at 320 and 1024
#      (bench/isnet_quint8_check.py);
#   3. the GoogleTest cases of views, the plan's aliasing check and Resize.
#
#   bash bench/run_exporter_checks.sh
#
# Variables: WGNN (build/wgnn), TESTS (build/tests/wgnn_tests), ISNET_QUINT8
# (.deps/models/isnet_quint8.onnx), OUT (/tmp/out), WORK (/tmp/exporter),
# PYTHON (python3: torch, onnx, onnxruntime). Prints one line per check and
# exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build/wgnn}
TESTS=${TESTS:-build/tests/wgnn_tests}
ISNET_QUINT8=${ISNET_QUINT8:-.deps/models/isnet_quint8.onnx}
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/exporter}
PY=${PYTHON:-python3}
PROMPT=5,17,42,99,3,8,150,77,23,61,12,190,4,33,88,120
mkdir -p "$OUT" "$WORK"
status=0
for m in llama qwen2; do
  if ! "$PY" scripts/models/decoders.py --model $m --size full --out "$WORK" > "$OUT/export_$m.txt" 2>&1; then
    echo "exporter_checks: export of $m failed: $(tail -3 "$OUT/export_$m.txt")"; status=1; continue
  fi
  ref=$("$PY" bench/ort_greedy.py "$WORK/$m" --prompt $PROMPT --new 64 | tail -1)
  echo "$ref" > "$OUT/${m}_ort.json"
  for variant in "views" "no-views" "fp16"; do
    envs=(); extra=()
    [ $variant = no-views ] && envs=(WGNN_NO_VIEWS=1)
    [ $variant = fp16 ] && extra=(--fp16)
    if ! j=$(env "${envs[@]}" "$WGNN" generate "$WORK/$m/decoder_with_past_model.onnx" --prompt $PROMPT \
             --max-new-tokens 64 --repeat 2 --json "${extra[@]}" 2> "$OUT/err.txt" | tail -1); then
      echo "exporter_checks: $m $variant failed: $(tail -3 "$OUT/err.txt")"; status=1; continue
    fi
    echo "$j" > "$OUT/${m}_${variant}.json"
    "$PY" - "$m" "$variant" "$ref" "$j" <<'PY' || status=1
import json, sys
m, v, ref, got = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])["tokens"], json.loads(sys.argv[4])
toks = got["tokens"][0]
first = next((i for i, (a, b) in enumerate(zip(toks, ref)) if a != b), None)
same = toks == ref
print(f"exporter_checks: {m} {v}: {'tokens as ORT CPU' if same else f'tokens differ from token {first}'} "
      f"({len(set(ref))} distinct), {got['last_run']['ms_per_token']:.3f} ms/token, "
      f"{got['last_run']['step_host']['dispatches']} dispatches a step, first run {got['first_run']['total_ms']:.0f} ms")
# float16 may drift from float32's greedy path; float32 must not.
sys.exit(0 if same or v == "fp16" else 1)
PY
  done
done
for size in 320 1024; do
  if "$PY" bench/isnet_quint8_check.py "$WGNN" "$ISNET_QUINT8" "$WORK/isnet_$size" --size $size > "$OUT/isnet_quint8_$size.jsonl" 2>&1; then
    echo "exporter_checks: $(tail -1 "$OUT/isnet_quint8_$size.jsonl") (size $size)"
  else
    echo "exporter_checks: uint8 ISNet at $size FAILED: $(tail -3 "$OUT/isnet_quint8_$size.jsonl")"; status=1
  fi
done
if "$TESTS" --gtest_filter='Views.*:Graph.*:*esize*:*Upsample*' > "$OUT/gtest.txt" 2>&1; then
  echo "exporter_checks: GoogleTest views, graph, resize: $(grep -c '^\[       OK' "$OUT/gtest.txt") passed"
else
  echo "exporter_checks: GoogleTest FAILED: $(grep FAILED "$OUT/gtest.txt" | head -5)"; status=1
fi
exit $status
