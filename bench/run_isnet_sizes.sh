#!/usr/bin/env bash
# On the GPU machine: ISNet at ten photo sizes, 320 to 1,600 px, in one
# Session (`wgnn bench-shapes`), float32 and float16: the plans built, the
# sizes they serve, the plans' buffers, build and steady times per size.
# With BASE (a wgnn binary of an earlier commit), the same runs with it in
# the same process order, for a side-by-side comparison. With CLASSES_OFF=1,
# the same binary again with --no-size-classes (every size its own
# structural choices), and, where numpy is there, each size's matte from
# the two runs compared (VALUES=1 writes them; they take about 10 MB a size).
#
#   ISNET=FILE [BASE=FILE] [CLASSES_OFF=1] [VALUES=1] [SIZES="320 448 ..."] bash bench/run_isnet_sizes.sh
#
# ISNET: isnet_any_size.onnx as scripts/isnet_any_size.py writes it (free
# height and width). Needs build/wgnn and the GPU environment
# (bench/gpu_env.sh). Writes $OUT/isnet_sizes_*.json and prints a summary.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ISNET=${ISNET:?ISNET=FILE: isnet_any_size.onnx}
WGNN=${WGNN:-build/wgnn}
SIZES=${SIZES:-320 448 576 704 832 960 1088 1216 1344 1600}
"$WGNN" info | head -3
sets=()
for s in $SIZES; do sets+=(--set "input=1x3x${s}x${s}"); done
VALUES_DIR=${VALUES_DIR:-/tmp/isnet_values}
run() {  # NAME BINARY [FLAGS...]
  local name=$1 bin=$2; shift 2
  local vals=()
  [ "${VALUES:-0}" = 1 ] && vals=(--output-dir "$VALUES_DIR/$name")
  "$bin" bench-shapes "$ISNET" "${sets[@]}" --runs 5 "$@" "${vals[@]}" --json > "$OUT/isnet_sizes_$name.json" ||
    echo "bench-shapes failed: $name"
}
for mode in fp32 fp16; do
  flags=(); [ "$mode" = fp16 ] && flags=(--fp16)
  run "${mode}" "$WGNN" "${flags[@]}"
  [ "${CLASSES_OFF:-0}" = 1 ] && run "${mode}_noclasses" "$WGNN" "${flags[@]}" --no-size-classes
  [ -n "${BASE:-}" ] && run "${mode}_base" "$BASE" "${flags[@]}"
done
if [ "${VALUES:-0}" = 1 ] && [ "${CLASSES_OFF:-0}" = 1 ]; then
  python3 - "$VALUES_DIR" <<'PY' || echo "(no numpy: values not compared)"
import os, sys
import numpy as np
root = sys.argv[1]
for mode in ("fp32", "fp16"):
    a_dir, b_dir = os.path.join(root, mode), os.path.join(root, mode + "_noclasses")
    for k in sorted(os.listdir(a_dir), key=int):
        worst = 0.0
        for f in sorted(os.listdir(os.path.join(a_dir, k))):
            if not f.endswith(".npy"):
                continue
            a = np.load(os.path.join(a_dir, k, f)).astype(np.float64)
            b = np.load(os.path.join(b_dir, k, f)).astype(np.float64)
            worst = max(worst, float(np.max(np.abs(a - b))) if a.size else 0.0)
        print(f"values {mode} set {k}: max |classes - no classes| over the outputs = {worst:.3g}")
PY
fi
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
for name in sorted(f[len("isnet_sizes_"):-5] for f in os.listdir(out) if f.startswith("isnet_sizes_") and f.endswith(".json")):
    try:
        j = json.load(open(os.path.join(out, f"isnet_sizes_{name}.json")))
    except Exception as e:
        print(f"{name}: unreadable ({e})")
        continue
    rows = j["shapes"]
    last = rows[-1]
    print(f"== {name}: {len(rows)} sizes, plans {last['plans']} (sizes kept {last.get('plan_sizes', '-')}), "
          f"evicted {last['evictions']}, plans' buffers {last.get('plan_buffer_bytes', 0) / 2**20:.0f} MiB, "
          f"constants {last['constants_bytes'] / 2**20:.1f} MiB, builds {j['total_build_ms']:.0f} ms in all")
    for r in rows:
        print(f"   {r['inputs']:<32} build {r['build_ms']:8.1f} ms  pipelines {r['pipelines_created']:3d}  "
              f"first {r['first_run_ms']:8.1f} ms  steady {r['steady_ms']:8.3f} ms  plans {r['plans']}")
PY
