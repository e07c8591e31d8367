#!/usr/bin/env bash
# The float32 GEMM (ops/kernels/matmul.wgsl) in several configurations
# (WGNN_MATMUL_CONFIG, ops/matmul.cpp) over product shapes, each a one-MatMul
# model timed by `wgnn bench` (GPU time from timestamps, median), then over
# whole models. One JSON line per run in $OUT/matmul_configs.jsonl, and a
# table (TFLOP/s per shape and configuration) on stdout.
#   WGNN=build-source/wgnn OUT=dir [SHAPES="MxNxK ..."] [CONFIGS="default 64x64:4x4:k16:s2:w ..."]
#   [MODELS="a.onnx b.onnx"] [PYTHON=python3] bash bench/run_matmul_configs.sh
# "default" is ops/matmul.cpp's own choice per product; a configuration with
# "=" is a list of settings joined by "+" (WGNN_MATMUL_SPLITK=2+WGNN_MATMUL_LARGE=264);
# a shape MxNxKb has a bias (bench/matmul_models.py).
set -euo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build-source/wgnn}
OUT=${OUT:-/tmp/matmul_configs}
PYTHON=${PYTHON:-python3}
SHAPES=${SHAPES:-"4096x4096x4096 1500x2048x512 1500x512x2048 36864x384x128 36864x128x512 9216x768x256 2304x2048x512 576x1024x4096"}
CONFIGS=${CONFIGS:-"default 64x64:4x4:k16:s1:w 64x64:4x4:k16:s2:w 64x64:4x4:k32:s2:w 128x64:8x4:k16:s2:w 64x128:4x8:k16:s2:w 128x128:8x8:k8:s2:w 128x128:8x8:k16:s1:w 64x64:8x8:k16:s2:w"}
MODELS=${MODELS:-}
RUNS=${RUNS:-20}
WARMUP=${WARMUP:-10}
mkdir -p "$OUT"
JSONL="$OUT/matmul_configs.jsonl"
: > "$JSONL"
# shellcheck disable=SC2086
"$PYTHON" bench/matmul_models.py "$OUT/models" $SHAPES > /dev/null

one() {  # CONFIG KIND NAME MODEL [wgnn bench flags...]
  local cfg=$1 kind=$2 name=$3 model=$4
  shift 4
  local line
  if [ "$cfg" = default ]; then
    line=$(env -u WGNN_MATMUL_CONFIG "$WGNN" bench "$model" --runs "$RUNS" --warmup "$WARMUP" --json "$@" 2>/dev/null | tail -1) || line=""
  elif [[ "$cfg" == *=* ]]; then
    # shellcheck disable=SC2046
    line=$(env -u WGNN_MATMUL_CONFIG $(tr '+' ' ' <<< "$cfg") "$WGNN" bench "$model" --runs "$RUNS" --warmup "$WARMUP" --json "$@" 2>/dev/null | tail -1) || line=""
  else
    line=$(WGNN_MATMUL_CONFIG=$cfg "$WGNN" bench "$model" --runs "$RUNS" --warmup "$WARMUP" --json "$@" 2>/dev/null | tail -1) || line=""
  fi
  "$PYTHON" - "$cfg" "$kind" "$name" "$line" >> "$JSONL" <<'PY'
import json, sys
cfg, kind, name, line = sys.argv[1:5]
row = {"config": cfg, "kind": kind, "name": name}
try:
    d = json.loads(line)
    row.update({k: d.get(k) for k in ("median_ms", "gpu_ms", "dispatches")})
    if kind == "shape":
        m, n, k = (int(v) for v in name.rstrip("b").split("x"))
        row["tflops"] = 2 * m * n * k / (d["gpu_ms"] * 1e-3) / 1e12
except Exception as e:  # a failed run is a row with its error, not a gap
    row["error"] = f"no result ({e})"
print(json.dumps(row))
PY
}

for s in $SHAPES; do
  for c in $CONFIGS; do one "$c" shape "$s" "$OUT/models/matmul_$s.onnx"; done
done
for m in $MODELS; do
  for c in $CONFIGS; do one "$c" model "$(basename "$m" .onnx)" "$m"; done
done

"$PYTHON" - "$JSONL" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
configs = list(dict.fromkeys(r["config"] for r in rows))
for kind, what, key, fmt in (("shape", "TFLOP/s (GPU)", "tflops", "{:.1f}"), ("model", "GPU ms", "gpu_ms", "{:.2f}")):
    names = list(dict.fromkeys(r["name"] for r in rows if r["kind"] == kind))
    if not names:
        continue
    print(f"\n| {kind} ({what}) | " + " | ".join(configs) + " |")
    print("|---|" + "---:|" * len(configs))
    for n in names:
        cells = []
        for c in configs:
            r = next((r for r in rows if r["kind"] == kind and r["name"] == n and r["config"] == c), None)
            cells.append(fmt.format(r[key]) if r and r.get(key) is not None else "fail")
        print(f"| {n} | " + " | ".join(cells) + " |")
PY
