#!/usr/bin/env bash
# On the GPU machine: one wgnn build under several settings (environment
# variables), model by model, in one run: `wgnn bench --json` for every
# (round, model, setting), each its own process, and with PROFILE=1 a
# `wgnn profile --trace` of each model under each setting, whose dispatches
# bench/trace_compare.py then sets side by side.
#
#   WGNN=FILE [WORK=/tmp/wc] [OUT=/tmp/out] [PRECISION=fp16|fp32] [ROUNDS=2]
#   [RUNS=20] [WARMUP=5] [PROFILE=0|1] \
#     bash bench/run_settings.sh "MODEL ..." "SETTING" "SETTING" ...
#
# A setting is `K=V [K=V ...]` (e.g. "WGNN_SUBGROUP_DEEP=64x64x64:2x2:1@0");
# "default" runs with none. Models are zoo names (scripts/models/zoo.py),
# exported to WORK first. Writes OUT/settings.jsonl (one line per process:
# round, model, setting and `wgnn bench --json`'s median_ms, gpu_ms,
# dispatches), a table of each setting's medians, and with PROFILE=1
# OUT/trace_INDEX_MODEL.json (INDEX: the setting's position from 0) and
# OUT/by_dispatch.md from bench/trace_compare.py.
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:?WGNN=FILE: a wgnn binary}
WORK=${WORK:-/tmp/wc}
OUT=${OUT:-/tmp/out}
PRECISION=${PRECISION:-fp16}
ROUNDS=${ROUNDS:-2}
RUNS=${RUNS:-20}
WARMUP=${WARMUP:-5}
PROFILE=${PROFILE:-0}
[ $# -ge 2 ] || { echo "usage: WGNN=FILE bash bench/run_settings.sh \"MODEL ...\" SETTING [SETTING ...]" >&2; exit 2; }
read -r -a MODELS <<< "$1"
shift
SETTINGS=("$@")
FLAG=""
[ "$PRECISION" = fp16 ] && FLAG="--fp16"
# shellcheck source=bench/export_zoo.sh
source bench/export_zoo.sh
export_zoo "$WORK" "$OUT" "${MODELS[@]}"
env_of() { [ "$1" = default ] && echo "" || echo "$1"; }
: > "$OUT/settings.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  for m in "${MODELS[@]}"; do
    for s in "${SETTINGS[@]}"; do
      # shellcheck disable=SC2046
      env $(env_of "$s") timeout 120 "$WGNN" bench "$WORK/onnx/${m}_opset17.onnx" $FLAG --runs "$RUNS" \
        --warmup "$WARMUP" --json > "$OUT/bench.txt" 2>&1
      python3 - "$OUT/bench.txt" "$round" "$m" "$s" >> "$OUT/settings.jsonl" <<'PY'
import json, sys
path, rnd, model, setting = sys.argv[1:5]
lines = open(path).read().strip().splitlines()
row = {"round": int(rnd), "model": model, "setting": setting}
try:
    d = json.loads(lines[-1])
    row.update({k: d[k] for k in ("median_ms", "gpu_ms", "dispatches")})
except (IndexError, ValueError, KeyError):
    row["error"] = (lines[-1] if lines else "no output")[:300]
print(json.dumps(row))
PY
    done
  done
done
python3 - "$OUT/settings.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
models = list(dict.fromkeys(r["model"] for r in rows))
settings = list(dict.fromkeys(r["setting"] for r in rows))
print("| model | " + " | ".join(settings) + " |")
print("|---" * (len(settings) + 1) + "|")
for m in models:
    cells = []
    for s in settings:
        got = [r for r in rows if r["model"] == m and r["setting"] == s and "median_ms" in r]
        cells.append(f'{statistics.median(r["median_ms"] for r in got):.3f} ({statistics.median(r["gpu_ms"] for r in got):.3f})'
                     if got else "error")
    print(f"| {m} | " + " | ".join(cells) + " |")
PY
if [ "$PROFILE" = 1 ]; then
  traces=()
  for i in "${!SETTINGS[@]}"; do
    for m in "${MODELS[@]}"; do
      # shellcheck disable=SC2046
      env $(env_of "${SETTINGS[$i]}") timeout 120 "$WGNN" profile "$WORK/onnx/${m}_opset17.onnx" $FLAG --runs 5 \
        --trace "$OUT/trace_${i}_$m.json" > "$OUT/profile_${i}_$m.txt" 2>&1
    done
  done
  for m in "${MODELS[@]}"; do
    args=()
    for i in "${!SETTINGS[@]}"; do args+=(--trace "${SETTINGS[$i]}" "$OUT/trace_${i}_$m.json"); done
    python3 bench/trace_compare.py --title "$m" "${args[@]}"
  done > "$OUT/by_dispatch.md"
fi
