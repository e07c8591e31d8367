#!/usr/bin/env bash
# Generation on the GPU machine, in one run per model: per-token latency at
# batch 1 (the median of the 63 steps after the prompt step, 16 prompt
# tokens, 64 new ones, the third of three runs in one process) of wgnn
# (float32 and float16, each with and without run-time checks), ONNX Runtime WebGPU
# (bench/ort_generate.js, the cache kept on the GPU) and PyTorch eager
# (bench/torch_generate.py, float32 and float16), on the decoders of
# scripts/models/decoders.py at full size; and wgnn's 64 greedy tokens
# against ONNX Runtime CPU's on the same files.
#
#   WGNN=build-source/wgnn ORT_PEER=ortpeer bash bench/run_generate.sh [gpt bart whisper]
#
# Variables: WGNN (default build/wgnn), ORT_PEER (an unpacked ortpeer/ of
# bench/make_ort_peer.sh), OUT (/tmp/out), WORK (/tmp/gen: the exported
# models), PYTHON (python3: torch with CUDA), SIZE (full; mini for a try on a CPU),
# TOOLS ("wgnn ort torch": which to run).
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build/wgnn}
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/gen}
PY=${PYTHON:-python3}
PROMPT=5,17,42,99,3,8,150,77,23,61,12,190,4,33,88,120
mkdir -p "$OUT" "$WORK"
lines="$OUT/generate.jsonl"
status=0
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(gpt bart whisper)
record() {  # MODEL TOOL JSON
  "$PY" -c 'import json,sys; j=json.loads(sys.argv[3]); j["model"]=sys.argv[1]; j["tool"]=sys.argv[2]; print(json.dumps(j))' \
    "$1" "$2" "$3" >> "$lines"
}
for m in "${models[@]}"; do
  dir="$WORK/$m"
  if [ ! -f "$dir/decoder_with_past_model.onnx" ]; then
    t0=$(date +%s)
    "$PY" scripts/models/decoders.py --model "$m" --size "${SIZE:-full}" --out "$WORK" > "$OUT/export_$m.txt" 2>&1 ||
      { echo "run_generate: export of $m failed: $(tail -5 "$OUT/export_$m.txt")" >&2; status=1; continue; }
    echo "run_generate: $m exported in $(( $(date +%s) - t0 )) s" >&2
  fi
  wargs=("$dir/decoder_with_past_model.onnx" --prompt "$PROMPT" --max-new-tokens 64 --repeat 3 --json)
  [ -f "$dir/decoder_model.onnx" ] && wargs+=(--first "$dir/decoder_model.onnx")
  [ -f "$dir/encoder_model.onnx" ] && wargs+=(--encoder "$dir/encoder_model.onnx" --encoder-input "$dir/encoder_input.npy")
  TOOLS=${TOOLS:-wgnn ort torch}
  for variant in "fp32" "fp32 --unchecked" "fp16" "fp16 --unchecked"; do
    case " $TOOLS " in *" wgnn "*) ;; *) continue;; esac
    extra=()
    case "$variant" in *fp16*) extra+=(--fp16);; esac
    case "$variant" in *unchecked*) extra+=(--unchecked);; esac
    if j=$("$WGNN" generate "${wargs[@]}" "${extra[@]}" 2> "$OUT/err.txt"); then
      record "$m" "wgnn $variant" "$(printf '%s\n' "$j" | tail -1)"
    else
      echo "run_generate: wgnn $variant on $m failed: $(tail -3 "$OUT/err.txt")" >&2; status=1
    fi
  done
  for ep in cpu webgpu; do
    case " $TOOLS " in *" ort "*) ;; *) continue;; esac
    if j=$("$ORT_PEER/node" "$ORT_PEER/generate.js" "$dir" --prompt "$PROMPT" --new 64 --ep $ep --repeat $([ $ep = cpu ] && echo 1 || echo 3) 2> "$OUT/err.txt"); then
      record "$m" "ORT $ep" "$(printf '%s\n' "$j" | tail -1)"
    else
      echo "run_generate: ORT $ep on $m failed: $(tail -3 "$OUT/err.txt")" >&2; status=1
    fi
  done
  for dt in fp32 fp16; do
    case " $TOOLS " in *" torch "*) ;; *) continue;; esac
    if j=$("$PY" bench/torch_generate.py --model "$m" --size "${SIZE:-full}" --dtype $dt --repeat 3 2> "$OUT/err.txt"); then
      record "$m" "PyTorch eager $dt" "$(printf '%s\n' "$j" | tail -1)"
    else
      echo "run_generate: PyTorch $dt on $m failed: $(tail -3 "$OUT/err.txt")" >&2; status=1
    fi
  done
done
"$PY" - "$lines" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
names = {"gpt": "GPT-2-small-sized decoder", "bart": "BART-base decoder", "whisper": "Whisper-base decoder"}
print("| model | tool | ms per token (steps 2-64) | median step ms | host us per step (encode, of it submit) | prompt step ms | tokens as ORT CPU's |")
print("|---|---|---:|---:|---:|---:|---|")
for m in dict.fromkeys(r["model"] for r in rows):
    ref = next((r.get("tokens") for r in rows if r["model"] == m and r["tool"] == "ORT cpu"), None)
    for r in rows:
        if r["model"] != m:
            continue
        last = r.get("last_run", r)
        toks = r.get("tokens")
        toks = toks[0] if toks and isinstance(toks[0], list) else toks
        same = "-" if ref is None or toks is None else ("yes" if toks == ref else
               f"no (from token {next((i for i, (a, b) in enumerate(zip(toks, ref)) if a != b), min(len(toks), len(ref)))})")
        per = last.get("ms_per_token")
        note = " (cache via host memory)" if r["tool"] == "ORT webgpu" and not r.get("cache_on_gpu") else ""
        sh = last.get("step_host")
        host = f"{last['median_step_host_us']:.0f} ({sh['encode_us']:.0f}, {sh['submit_us']:.0f})" if sh else "-"
        print(f"| {names.get(m, m)} | {r['tool']}{note} | {per:.3f} | {last.get('median_step_ms', 0):.3f} | {host} | "
              f"{last.get('prompt_ms', 0):.2f} | {same} |" if per is not None
              else f"| {names.get(m, m)} | {r['tool']} | failed: {r.get('why', '')} | | | | |")
PY
exit $status
