#!/usr/bin/env bash
# Quantized speed: zoo models exported in float32 (scripts/models/export.py),
# quantized with ONNX Runtime's own tools, each file timed by `wgnn bench`
# and by ONNX Runtime WebGPU (bench/ort_bench.js through the ONNX Runtime
# peer) in the same run, on the same files and inputs. Variants:
#   fp32    the export itself;
#   q8dyn   onnxruntime.quantization.quantize_dynamic, uint8 weights
#           (DynamicQuantizeLinear + MatMulInteger / ConvInteger);
#   q8qdq   quantize_static in the QDQ format, int8 weights per channel,
#           uint8 activations, calibrated on the exported inputs
#           (QuantizeLinear / DequantizeLinear around float operators; a
#           DequantizeLinear + MatMul is one wgnn kernel);
#   q4      MatMulNBitsQuantizer, 4-bit weights in blocks of 32 (com.microsoft
#           MatMulNBits; needs its onnx_ir module, else the variant is skipped
#           saying so).
# Each variant's outputs are also checked against ONNX Runtime's CPU provider
# on the same inputs (the largest difference, beside the largest |output|).
#
#   bash bench/run_quantized_speed.sh [NAME,NAME,...]   (default resnet50,bart_decoder)
#
# On the GPU machine, like bench/run_compare.sh: needs build/wgnn (Release),
# .deps/dawn, .gl and .payload (lib/ from bench/make_payload.sh,
# ortpeer.tar.xz from bench/make_ort_peer.sh), and that machine's python3
# with torch, transformers, onnx and onnxruntime (export and quantization
# run there). Writes $OUT/quantized_speed.{jsonl,md}.
# Variables: RUNS (50), WARMUP (10), OPSET (17), MINI=1 (the zoo's small
# versions, for a quick check), VARIANTS ("fp32 q8dyn q8qdq q4"), PY
# (python3), WGNN (build/wgnn), ORT_PEER (an unpacked ortpeer/; default:
# .payload/ortpeer.tar.xz unpacked), OUT (/tmp/out), TIMEOUT (seconds per
# export, quantization, check or timing, 300), NO_GPU_ENV=1 (do not source
# bench/gpu_env.sh: a run on this machine's lavapipe). The exported and
# quantized files stay in ${TMPDIR:-/tmp}/wgnn_quantized and are reused,
# so a large set can run one model per call.
set -uo pipefail
cd "$(dirname "$0")/.."
[ "${NO_GPU_ENV:-0}" = 1 ] || source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}
PY=${PY:-python3}
WGNN=${WGNN:-build/wgnn}
RUNS=${RUNS:-50}
WARMUP=${WARMUP:-10}
OPSET=${OPSET:-17}
VARIANTS=${VARIANTS:-fp32 q8dyn q8qdq q4}
T=${TIMEOUT:-300}
mkdir -p "$OUT"
work=${TMPDIR:-/tmp}/wgnn_quantized
mkdir -p "$work"
peer=${ORT_PEER:-}
if [ -z "$peer" ]; then
  peer=$work/ortpeer
  if [ ! -x "$peer/node" ]; then
    if [ ! -f .payload/ortpeer.tar.xz ]; then
      echo "run_quantized_speed: .payload/ortpeer.tar.xz is missing: run bench/make_ort_peer.sh and copy .payload here" >&2
      exit 1
    fi
    tar -C "$work" -xJf .payload/ortpeer.tar.xz
  fi
fi
"$WGNN" info | tee "$OUT/quantized_info.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv 2>/dev/null | tee -a "$OUT/quantized_info.txt"
lines=$OUT/quantized_speed.jsonl
: > "$lines"
status=0
mini=(); suffix=
if [ "${MINI:-0}" = 1 ]; then mini=(--mini); suffix=_mini; fi

for name in $(echo "${1:-resnet50,bart_decoder}" | tr ',' ' '); do
  base=$work/${name}${suffix}_opset${OPSET}
  if [ ! -f "$base.onnx" ]; then
    if ! timeout "$T" "$PY" scripts/models/export.py --model "$name" "${mini[@]}" --opset "$OPSET" --out "$work" > "$OUT/export_$name.txt" 2>&1; then
      echo "run_quantized_speed: exporting $name failed: $(tail -3 "$OUT/export_$name.txt")" >&2
      status=1
      continue
    fi
  fi
  inputs=$base"_inputs"
  # The quantized files, beside the export (an existing one is reused).
  timeout "$T" "$PY" - "$base.onnx" "$inputs" $VARIANTS <<'PY' || status=1
import glob, os, sys
import numpy as np
src, inputs, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
feeds = {os.path.basename(f)[:-4]: np.load(f) for f in glob.glob(os.path.join(inputs, "*.npy"))}
stem = src[:-5]
for v in variants:
    dst = f"{stem}_{v}.onnx"
    if v == "fp32" or os.path.exists(dst):
        continue
    try:
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
        if v == "q8dyn":
            quantize_dynamic(src, dst, weight_type=QuantType.QUInt8)
        elif v == "q8qdq":
            class Reader:
                def __init__(self):
                    self.done = False
                def get_next(self):
                    if self.done:
                        return None
                    self.done = True
                    return feeds
            quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        elif v == "q4":
            import onnx
            from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
            q = MatMulNBitsQuantizer(onnx.load(src), block_size=32, is_symmetric=True)
            q.process()
            q.model.save_model_to_file(dst, use_external_data_format=False)
        else:
            print(f"quantize: unknown variant {v}", file=sys.stderr)
            sys.exit(1)
        print(f"quantize: {os.path.basename(dst)} {os.path.getsize(dst) / 1e6:.1f} MB")
    except ImportError as e:
        print(f"quantize: {v} of {os.path.basename(src)} skipped: {e}")
PY
  for v in $VARIANTS; do
    file=$base.onnx
    [ "$v" = fp32 ] || file=${base}_$v.onnx
    [ -f "$file" ] || continue
    args=()
    for f in "$inputs"/*.npy; do args+=(--input "$(basename "$f" .npy)=$f"); done
    # Outputs against ONNX Runtime's CPU provider on the same inputs.
    rm -rf "$work/out_wgnn"
    check='{"error": "wgnn run failed"}'
    if timeout "$T" "$WGNN" run "$file" "${args[@]}" --output-dir "$work/out_wgnn" > "$OUT/err.txt" 2>&1; then
      check=$(timeout "$T" "$PY" - "$file" "$inputs" "$work/out_wgnn" <<'PY'
import glob, json, os, re, sys
import numpy as np
import onnxruntime as ort
model, inputs, got = sys.argv[1:4]
feeds = {os.path.basename(f)[:-4]: np.load(f) for f in glob.glob(os.path.join(inputs, "*.npy"))}
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
err = ref = 0.0
for o, want in zip(s.get_outputs(), s.run(None, feeds)):
    g = np.load(os.path.join(got, re.sub(r"[^A-Za-z0-9_.-]", "_", o.name) + ".npy")).astype(np.float64)
    err = max(err, float(np.max(np.abs(g - want.astype(np.float64)))))
    ref = max(ref, float(np.max(np.abs(want))))
print(json.dumps({"max_abs_err_vs_ort_cpu": err, "max_abs_ref": ref}))
PY
      ) || check='{"error": "the ONNX Runtime CPU check failed"}'
    else
      echo "run_quantized_speed: wgnn run $file failed: $(tail -3 "$OUT/err.txt")" >&2
      status=1
    fi
    if out=$(timeout "$T" "$WGNN" bench "$file" "${args[@]}" --runs "$RUNS" --warmup "$WARMUP" --json 2> "$OUT/err.txt"); then
      "$PY" -c 'import json,sys; j=json.loads(sys.argv[1]); j.update(json.loads(sys.argv[4])); j.update(tool="wgnn", variant=sys.argv[2], model_name=sys.argv[3], path=sys.argv[5]); print(json.dumps(j))' \
        "$(printf '%s\n' "$out" | tail -1)" "$v" "$name" "$check" "$file" >> "$lines"
    else
      echo "run_quantized_speed: wgnn bench $file failed: $(tail -3 "$OUT/err.txt")" >&2
      status=1
    fi
    if out=$(timeout "$T" "$peer/node" "$peer/bench.js" "$file" --ep webgpu "${args[@]}" --runs "$RUNS" --warmup "$WARMUP" 2> "$OUT/err.txt"); then
      "$PY" -c 'import json,sys; j=json.loads(sys.argv[1]); j.update(tool="ORT WebGPU", variant=sys.argv[2], model_name=sys.argv[3], path=sys.argv[4]); print(json.dumps(j))' \
        "$(printf '%s\n' "$out" | tail -1)" "$v" "$name" "$file" >> "$lines"
    else
      echo "run_quantized_speed: ONNX Runtime WebGPU on $file failed: $(tail -3 "$OUT/err.txt")" >&2
      status=1
    fi
  done
done

"$PY" - "$lines" "$OUT/quantized_speed.md" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
fp32 = {(r["model_name"], r["tool"]): r["median_ms"] for r in rows if r["variant"] == "fp32"}
out = ["| model | variant | tool | file MB | load ms | first run ms | steady median ms | fp32 / this | max err vs ORT CPU (max |ref|) |",
       "|---|---|---|---:|---:|---:|---:|---:|---|"]
for r in rows:
    base = fp32.get((r["model_name"], r["tool"]))
    ratio = f"{base / r['median_ms']:.2f}" if base and r["median_ms"] else ""
    size = os.path.getsize(r["path"]) / 1e6 if os.path.exists(r.get("path", "")) else float("nan")
    err = ""
    if "max_abs_err_vs_ort_cpu" in r:
        err = f"{r['max_abs_err_vs_ort_cpu']:.2e} ({r['max_abs_ref']:.2e})"
    elif "error" in r:
        err = r["error"]
    out.append(f"| {r['model_name']} | {r['variant']} | {r['tool']} | {size:.1f} | {r['load_ms']:.0f} | "
               f"{r['first_run_ms']:.0f} | {r['median_ms']:.3f} | {ratio} | {err} |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
exit $status
