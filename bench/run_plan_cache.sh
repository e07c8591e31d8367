#!/usr/bin/env bash
# On the GPU machine: what a new input shape costs in one Session.
#   1. ISNet (isnet_any_size.onnx) at five photo sizes in one process
#      (`wgnn bench-shapes`): build time per size against the first, the
#      constants on the GPU (the weights once), steady time per size.
#   2. The BART-base decoder stand-in (scripts/models, bart_base_standin)
#      exported with a symbolic sequence length, at every length from 1 to
#      64 in one Session with 8 plans kept (when this machine's python can
#      export it: torch and onnx).
#   3. The steady speed against an earlier build, in the same run (BASE:
#      a wgnn binary built from the commit before the change), ISNet at
#      1024 px alternately three times each.
#
#   ISNET=FILE [BASE=FILE] bash bench/run_plan_cache.sh
#
# Needs build/wgnn, .deps/dawn, .gl and .payload/lib (bench/gpu_env.sh).
# Writes $OUT/plan_cache_*.json and prints a summary.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ISNET=${ISNET:?ISNET=FILE: isnet_any_size.onnx}
WGNN=${WGNN:-build/wgnn}
"$WGNN" info | head -3
# Each bench-shapes process starts cold: the driver's own shader cache off
# and wgnn's pipeline cache on disk in an empty folder of its own, so the
# first build compiles every pipeline (what a new machine pays).
export __GL_SHADER_DISK_CACHE=0
fresh_cache() { mktemp -d "${TMPDIR:-/tmp}/wgnn-plan-cache-XXXXXX"; }

sets=()
for s in 320 512 640 800 1024; do sets+=(--set "input=1x3x${s}x${s}"); done
WGNN_CACHE_DIR=$(fresh_cache) "$WGNN" bench-shapes "$ISNET" "${sets[@]}" --runs 5 | tee "$OUT/plan_cache_isnet.txt"
WGNN_CACHE_DIR=$(fresh_cache) "$WGNN" bench-shapes "$ISNET" "${sets[@]}" --runs 5 --json > "$OUT/plan_cache_isnet.json"

if python3 -c "import torch, onnx" 2>/dev/null; then
  python3 scripts/models/export.py --model bart_base_standin --opset 17 --out "$OUT/models" \
    --dynamic input_ids:1:seq > "$OUT/export.log" 2>&1
  M="$OUT/models/bart_base_standin_opset17_dynamic.onnx"
  if [ -f "$M" ]; then
    WGNN_CACHE_DIR=$(fresh_cache) "$WGNN" bench-shapes "$M" --dim seq=1:64 --max-plans 8 --runs 3 --int-range 0:50265 --json \
      > "$OUT/plan_cache_bart.json"
    python3 - "$OUT/plan_cache_bart.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
rows = j["shapes"]
c = [r["constants_bytes"] for r in rows]
print(f"bart_base_standin, lengths 1..64 in one session: {len(rows)} plans built in {j['total_build_ms']:.0f} ms "
      f"(first {j['first_build_ms']:.0f} ms, slowest later {100 * j['later_build_max_over_first']:.0f}% of it), "
      f"{rows[-1]['evictions']} evicted, at most {max(r['plans'] for r in rows)} kept; constants "
      f"{min(c) / 2**20:.1f}..{max(c) / 2**20:.1f} MiB; steady at 1 / 32 / 64: "
      f"{rows[0]['steady_ms']:.2f} / {rows[31]['steady_ms']:.2f} / {rows[63]['steady_ms']:.2f} ms")
PY
  else
    echo "bart_base_standin: export failed ($(tail -1 "$OUT/export.log"))"
  fi
else
  echo "bart_base_standin: skipped (this machine's python lacks torch or onnx)"
fi

if [ -n "${BASE:-}" ]; then
  for i in 1 2 3; do
    for b in base new; do
      bin=$([ $b = base ] && echo "$BASE" || echo "$WGNN")
      "$bin" bench "$ISNET" --shape input=1x3x1024x1024 --runs 30 --json | \
        python3 -c "import json,sys; j=json.load(sys.stdin); print('$b', round(j['median_ms'],3), round(j['gpu_ms'],3))"
    done
  done | tee "$OUT/plan_cache_same_run.txt"
fi
