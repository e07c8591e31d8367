#!/usr/bin/env bash
# Cold start per model: `wgnn bench --json` in a fresh process per mode,
# with an empty pipeline cache (cold), again with the cache the first one
# wrote (warm), and with the cache off, each in its own process; with
# ORT_PEER, ONNX Runtime WebGPU's load + first run on the same file in the
# same run. Prints a table of load + first run against one steady run, the
# first run's breakdown (docs/ARCHITECTURE.md, gpu/: creation_stats), and
# per model the two checks of a cold start: a cold process's load + first
# run against ONNX Runtime's, and a warm one's against load + one steady run.
#
#   bash bench/run_coldstart.sh MODEL.onnx|zoo:NAME [...]
#
# zoo:NAME exports the zoo's model NAME (scripts/models/export.py, opset
# 17, with the PYTHON that has torch: default python3) into
# $TMPDIR/wgnn_coldstart_models first, e.g. zoo:resnet50 zoo:bart_base_decoder.
#
# Variables: WGNN (default build/wgnn), PRECISIONS ("fp32"; "fp32 fp16" adds
# `wgnn bench --fp16`), MODES ("cold warm off"; "tiered" adds a cold process
# with WGNN_TIERED=1, "untiered" one with WGNN_TIERED=0: a first run that
# waits for the tensor-core kernels; SessionOptions::tiered is on by
# default, so "cold" is tiered where the GPU has them; "warm-noprefetch" a
# warm process with WGNN_PREFETCH_PIPELINES=0: the pipelines asked for as
# recording reaches them, not at load; "warm-noreadback" one with
# WGNN_PREFETCH_READBACK=0: the first run's readback buffers made by the run,
# not at load on a thread of their own), BENCH_ARGS (extra arguments
# for every bench), RUNS (10), OUT (where the JSON lines go, default
# /tmp/out), ORT_PEER (an unpacked ortpeer/ of bench/make_ort_peer.sh),
# NO_DRIVER_CACHE=1 (also turn the NVIDIA driver's own shader disk cache
# off, __GL_SHADER_DISK_CACHE=0, and Mesa's, MESA_SHADER_CACHE_DISABLE=true:
# the pipeline cache alone).
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
models=()
for m in "$@"; do
  if [ "${m#zoo:}" != "$m" ]; then
    dir=${TMPDIR:-/tmp}/wgnn_coldstart_models
    f="$dir/${m#zoo:}_opset17.onnx"
    if [ ! -f "$f" ] && ! ${PYTHON:-python3} scripts/models/export.py --model "${m#zoo:}" --opset 17 --out "$dir" > "$OUT/export.txt" 2>&1; then
      echo "run_coldstart: exporting ${m#zoo:} failed: $(tail -3 "$OUT/export.txt")" >&2
      status=1
      continue
    fi
    models+=("$f")
  else
    models+=("$m")
  fi
done
for model in "${models[@]}"; do
  for precision in ${PRECISIONS:-fp32}; do
    rm -rf "$cache"/*
    args=(); [ "$precision" = fp16 ] && args=(--fp16)
    for mode in ${MODES:-cold warm off}; do
      env=(WGNN_CACHE_DIR="$cache")
      [ "$mode" = off ] && env+=(WGNN_PIPELINE_CACHE=0)
      [ "$mode" = warm-noprefetch ] && env+=(WGNN_PREFETCH_PIPELINES=0)
      [ "$mode" = warm-noreadback ] && env+=(WGNN_PREFETCH_READBACK=0)
      # tiered: cold again (an empty cache), the first run on the regular
      # kernels while the tensor-core ones compile (SessionOptions::tiered).
      if [ "$mode" = tiered ]; then rm -rf "$cache"/*; env+=(WGNN_TIERED=1); fi
      if [ "$mode" = untiered ]; then rm -rf "$cache"/*; env+=(WGNN_TIERED=0); fi
      # shellcheck disable=SC2086
      if out=$(env "${env[@]}" "$WGNN" bench "$model" --runs "$RUNS" --warmup 1 --json "${args[@]}" ${BENCH_ARGS:-} 2> "$OUT/err.txt"); then
        python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["mode"]=sys.argv[2]; j["tool"]="wgnn"; print(json.dumps(j))' \
          "$(printf '%s\n' "$out" | tail -1)" "$mode" >> "$lines"
      else
        echo "run_coldstart: $model ($precision, $mode) failed: $(tail -3 "$OUT/err.txt")" >&2
        status=1
      fi
    done
  done
  if [ -n "${ORT_PEER:-}" ]; then
    if out=$("$ORT_PEER/node" "$ORT_PEER/bench.js" "$model" --ep webgpu --runs "$RUNS" --warmup 1 2> "$OUT/err.txt"); then
      python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j.update(tool="ORT WebGPU", precision="fp32", mode="cold"); print(json.dumps(j))' \
        "$(printf '%s\n' "$out" | tail -1)" >> "$lines"
    else
      echo "run_coldstart: ONNX Runtime on $model failed: $(tail -3 "$OUT/err.txt")" >&2
      status=1
    fi
  fi
done
python3 - "$lines" <<'EOF'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
name = lambda r: os.path.basename(r.get("model", "?"))
print("| model | precision | tool | cache | load ms | first run ms | of it: pipelines ms (compiled / from disk) | "
      "shader modules ms | uploads ms | rest of the build ms | steady ms | (load + first) / (load + steady) |")
print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    ratio = (r["load_ms"] + r["first_run_ms"]) / (r["load_ms"] + r["median_ms"])
    f = r.get("first_run")
    if f:
        detail = (f"{f['pipeline_ms']:.0f} ({f['pipelines_created']} / {f['pipelines_from_disk']}) | "
                  f"{f['shader_module_ms']:.0f} | {f['write_ms']:.0f} | {f.get('build_rest_ms', 0):.0f}")
    else:
        detail = " |  |  | "
    print(f"| {name(r)} | {r['precision']} | {r['tool']} | {r['mode']} | {r['load_ms']:.0f} | {r['first_run_ms']:.0f} | "
          f"{detail} | {r['median_ms']:.2f} | {ratio:.2f} |")
ort = {name(r): r for r in rows if r["tool"] != "wgnn"}
wg = {(name(r), r["precision"], r["mode"]): r for r in rows if r["tool"] == "wgnn"}
precisions = sorted({k[1] for k in wg})
extra = [(p, m) for m in ("tiered", "untiered") for p in precisions if (p, m) in {k[1:] for k in wg}]
print()
print("| model | ORT WebGPU load + first ms | " + " | ".join(
    f"wgnn {p} cold load + first ms | wgnn {p} warm: (load + first) / (load + steady)" for p in precisions) +
    "".join(f" | wgnn {p} {m} cold load + first ms" for p, m in extra) + " |")
print("|---|---:|" + "---:|---:|" * len(precisions) + "---:|" * len(extra))
for m in dict.fromkeys(name(r) for r in rows):
    o = ort.get(m)
    cells = [f"{o['load_ms'] + o['first_run_ms']:.0f}" if o else "not run"]
    for p in precisions:
        c, w = wg.get((m, p, "cold")), wg.get((m, p, "warm"))
        if c:
            t = c["load_ms"] + c["first_run_ms"]
            mark = "" if not o else (" (below)" if t < o["load_ms"] + o["first_run_ms"] else " (above)")
            cells.append(f"{t:.0f}{mark}" + (" (tiered)" if c.get("tiered_plans") else ""))
        else:
            cells.append("")
        if w:
            q = (w["load_ms"] + w["first_run_ms"]) / (w["load_ms"] + w["median_ms"])
            cells.append(f"{q:.2f}x" + (" (within 2x)" if q <= 2 else ""))
        else:
            cells.append("")
    for p, mode in extra:
        t = wg.get((m, p, mode))
        if t:
            v = t["load_ms"] + t["first_run_ms"]
            mark = "" if not o else (" (below)" if v < o["load_ms"] + o["first_run_ms"] else " (above)")
            cells.append(f"{v:.0f}{mark}" + (" (not tiered)" if mode == "tiered" and not t.get("tiered_plans") else ""))
        else:
            cells.append("")
    print(f"| {m} | " + " | ".join(cells) + " |")
EOF
exit $status
