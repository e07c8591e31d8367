#!/usr/bin/env bash
# Cold start with pipelines compiled asynchronously (the default) against
# one at a time (WGNN_ASYNC_PIPELINES=0), each in a fresh process with no
# pipeline cache (and no driver shader cache), beside ONNX Runtime WebGPU's
# load + first run on the same models, in the same run.
#
#   bash bench/run_async_pipelines.sh MODEL.onnx [MODEL.onnx ...]
#
# Variables: WGNN (default build/wgnn), ORT_PEER (an unpacked ortpeer/ of
# bench/make_ort_peer.sh; empty: no ONNX Runtime rows), REPS (2: each
# configuration this many times, interleaved), PRECISIONS ("fp32 fp16"),
# OUT (/tmp/out: the JSON lines). On the GPU machine, source
# bench/gpu_env.sh first.
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build/wgnn}
REPS=${REPS:-2}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export __GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true WGNN_PIPELINE_CACHE=0
lines="$OUT/async_pipelines.jsonl"
: > "$lines"
status=0
for model in "$@"; do
  for rep in $(seq "$REPS"); do
    for precision in ${PRECISIONS:-fp32 fp16}; do
      args=(); [ "$precision" = fp16 ] && args=(--fp16)
      for async in 1 0; do
        if out=$(WGNN_ASYNC_PIPELINES=$async "$WGNN" bench "$model" --runs 5 --warmup 1 --json "${args[@]}" 2> "$OUT/err.txt"); then
          python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["tool"]="wgnn async" if sys.argv[2]=="1" else "wgnn one at a time"; print(json.dumps(j))' \
            "$(printf '%s\n' "$out" | tail -1)" "$async" >> "$lines"
        else
          echo "run_async_pipelines: $model ($precision, async $async) failed: $(tail -3 "$OUT/err.txt")" >&2
          status=1
        fi
      done
    done
    if [ -n "${ORT_PEER:-}" ]; then
      if out=$("$ORT_PEER/node" "$ORT_PEER/bench.js" "$model" --ep webgpu --runs 5 --warmup 1 2> "$OUT/err.txt"); then
        python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["tool"]="ORT WebGPU"; j["precision"]="fp32"; print(json.dumps(j))' \
          "$(printf '%s\n' "$out" | tail -1)" >> "$lines"
      else
        echo "run_async_pipelines: ONNX Runtime on $model failed: $(tail -3 "$OUT/err.txt")" >&2
        status=1
      fi
    fi
  done
done
python3 - "$lines" <<'PY'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in rows:
    key = (os.path.basename(r.get("model", "?")), r.get("precision", "fp32"), r["tool"])
    groups.setdefault(key, []).append(r)
print("| model | precision | tool | load ms | first run ms | load + first ms | of it: pipelines waited ms | steady ms | runs |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for (model, precision, tool), rs in sorted(groups.items()):
    load = statistics.median(r["load_ms"] for r in rs)
    first = statistics.median(r["first_run_ms"] for r in rs)
    pipe = [r["first_run"]["pipeline_ms"] for r in rs if "first_run" in r]
    steady = statistics.median(r["median_ms"] for r in rs)
    print(f"| {model} | {precision} | {tool} | {load:.0f} | {first:.0f} | {load + first:.0f} | "
          f"{statistics.median(pipe):.0f} | {steady:.2f} | {len(rs)} |" if pipe else
          f"| {model} | {precision} | {tool} | {load:.0f} | {first:.0f} | {load + first:.0f} | | {steady:.2f} | {len(rs)} |")
PY
exit $status
