#!/usr/bin/env bash
# Where reading ISNet's outputs back goes: `wgnn bench --outputs NAME` for
# each output alone, then all of them, then bench/isnet_like_outputs.py's
# model (ISNet's output sizes, almost no GPU work) with every output; one
# JSON line each (readback_us, the bytes read back), and a table of GB/s.
# Then the copies on several threads against one thread, alternating.
# WGNN_PARALLEL_COPY=0 in the environment makes the first part one
# thread's, as measured in docs/results/isnet_readback_h200.md.
#
#   ISNET=isnet.onnx [WGNN=build/wgnn] [PRECISION=fp16|fp32] bash bench/run_isnet_readback.sh
#
# On the GPU machine, source bench/gpu_env.sh first. OUT: where the lines
# go (default /tmp/out). PYTHON: one with onnx (default python3).
set -uo pipefail
cd "$(dirname "$0")/.."
WGNN=${WGNN:-build/wgnn}
OUT=${OUT:-/tmp/out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
lines="$OUT/isnet_readback.jsonl"
: > "$lines"
args=(--runs "${RUNS:-20}" --warmup 3 --json)
[ "${PRECISION:-fp16}" = fp16 ] && args+=(--fp16)
names=$("$PY" -c "import onnx,sys; print(' '.join(o.name for o in onnx.load(sys.argv[1], load_external_data=False).graph.output))" "$ISNET")
run() {  # label model [--outputs NAME]
  local label=$1; shift
  local model=$1; shift
  "$WGNN" bench "$model" "${args[@]}" "$@" 2>/dev/null | tail -1 |
    "$PY" -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$label" >> "$lines" ||
    echo "run_isnet_readback: $label failed" >&2
}
for n in $names; do run "isnet $n" "$ISNET" --outputs "$n"; done
run "isnet all" "$ISNET"
like="${TMPDIR:-/tmp}/isnet_like_outputs.onnx"
"$PY" bench/isnet_like_outputs.py "$like" 1024 && run "isnet_like all" "$like"
# The copies on several threads against one thread (WGNN_PARALLEL_COPY=0),
# alternating, every output and the matte alone.
ab="$OUT/isnet_parallel_copy.jsonl"
: > "$ab"
for outs in all output; do
  for pc in 1 0 1 0 1 0; do
    sel=(); [ "$outs" = all ] || sel=(--outputs "$outs")
    WGNN_PARALLEL_COPY=$pc "$WGNN" bench "$ISNET" "${args[@]}" "${sel[@]}" 2>/dev/null | tail -1 |
      "$PY" -c "import json,sys; d=json.loads(sys.stdin.read()); d['parallel_copy']=int(sys.argv[1]); print(json.dumps(d))" "$pc" >> "$ab"
  done
done
"$PY" - "$ab" <<'EOF'
import json, sys
print("| outputs | copy | median ms host to host | GPU ms | upload us | readback us |")
print("|---|---|---:|---:|---:|---:|")
for l in open(sys.argv[1]):
    d = json.loads(l)
    print(f"| {d['outputs']} | {'parallel' if d['parallel_copy'] else 'one thread'} | {d['median_ms']:.2f} | {d['gpu_ms'] or 0:.2f} | {d['upload_us']:.0f} | {d['readback_us']:.0f} |")
EOF
"$PY" - "$lines" <<'EOF'
import json, sys
print("| run | outputs | MB read back | readback ms | GB/s | host to host ms |")
print("|---|---:|---:|---:|---:|---:|")
for l in open(sys.argv[1]):
    d = json.loads(l)
    b = d.get("readback_bytes")
    mb = f"{b / 1e6:.1f}" if b is not None else "?"
    gbs = f"{b / d['readback_us'] / 1e3:.2f}" if b and d.get("readback_us") else "?"
    print(f"| {d['label']} | {d.get('outputs_read', '?')} | {mb} | {d['readback_us'] / 1e3:.2f} | {gbs} | {d['median_ms']:.2f} |")
EOF
