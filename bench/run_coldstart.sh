#!/usr/bin/env bash
# Cold start per model: `wgnn bench --json` in a fresh process three ways,
# with an empty pipeline cache (cold), again with the cache the first one
# wrote (warm), and with the cache off, each in its own process; prints a
# table of load + first run against one steady run, and the first run's
# breakdown (docs/ARCHITECTURE.md, gpu/: creation_stats).
#
#   bash bench/run_coldstart.sh MODEL.onnx [MODEL.onnx ...]
#
# Variables: WGNN (default build/wgnn), BENCH_ARGS (extra arguments for
# every bench, e.g. "--fp16"), RUNS (10), OUT (where the JSON lines go,
# default /tmp/out), NO_DRIVER_CACHE=1 (also turn the NVIDIA driver's own
# shader disk cache off, __GL_SHADER_DISK_CACHE=0, and Mesa's,
# MESA_SHADER_CACHE_DISABLE=true: the pipeline cache alone).
# On the GPU machine, source bench/gpu_env.sh first.
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build/wgnn}
RUNS=${RUNS:-10}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ "${NO_DRIVER_CACHE:-0}" = 1 ]; then
  export __GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true
fi
cache=$(mktemp -d "${TMPDIR:-/tmp}/wgnn-coldstart-XXXXXX")
trap 'rm -rf "$cache"' EXIT
lines="$OUT/coldstart.jsonl"
: > "$lines"
status=0
for model in "$@"; do
  rm -rf "$cache"/*
  for mode in cold warm off; do
    env=(WGNN_CACHE_DIR="$cache")
    [ "$mode" = off ] && env+=(WGNN_PIPELINE_CACHE=0)
    # shellcheck disable=SC2086
    if out=$(env "${env[@]}" "$WGNN" bench "$model" --runs "$RUNS" --warmup 1 --json ${BENCH_ARGS:-} 2> "$OUT/err.txt"); then
      python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["mode"]=sys.argv[2]; print(json.dumps(j))' \
        "$(printf '%s\n' "$out" | tail -1)" "$mode" >> "$lines"
    else
      echo "run_coldstart: $model ($mode) failed: $(tail -3 "$OUT/err.txt")" >&2
      status=1
    fi
  done
done
python3 - "$lines" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| model | precision | cache | load ms | first run ms | of it: pipelines ms (compiled / from disk) | "
      "shader modules ms | wait ms | steady ms | (load + first) / (load + steady) |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    f = r["first_run"]
    ratio = (r["load_ms"] + r["first_run_ms"]) / (r["load_ms"] + r["median_ms"])
    print(f"| {r['model']} | {r['precision']} | {r['mode']} | {r['load_ms']:.0f} | {r['first_run_ms']:.0f} | "
          f"{f['pipeline_ms']:.0f} ({f['pipelines_created']} / {f['pipelines_from_disk']}) | "
          f"{f['shader_module_ms']:.0f} | {f['wait_ms']:.0f} | {r['median_ms']:.2f} | {ratio:.1f} |")
EOF
exit $status
