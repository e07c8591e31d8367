#!/usr/bin/env bash
# ISNet at 1024 host to host in float16 mode (the remove-bg model), on the
# GPU machine: `wgnn bench` with the matte alone read back (--outputs
# output, as remove-bg reads it) and with every output, each with large
# inputs through the graph's kept upload buffers (default) and through
# queue writes (WGNN_UPLOAD_STAGING=0), alternating, twice; then ONNX
# Runtime WebGPU on the same file in the same run (ORT_PEER). One JSON line
# per wgnn bench in $OUT/isnet_host.jsonl (with "staging" and "outputs"
# added) and a summary table on stdout.
#
#   ISNET=isnet.onnx WGNN=build-source/wgnn [ORT_PEER=ortpeer] bash bench/run_isnet_host.sh
#
# WGNN_ALLOW_UNSAFE_APIS=1 in the environment puts float16 on the tensor
# cores (the Dawn from source).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WGNN=${WGNN:-build/wgnn}
ISNET=${ISNET:-.deps/models/isnet.onnx}
RUNS=${RUNS:-30}
lines="$OUT/isnet_host.jsonl"
: > "$lines"
for i in 1 2; do
  for staging in 1 0; do
    for outputs in output all; do
      args=(); [ "$outputs" = output ] && args=(--outputs output)
      WGNN_UPLOAD_STAGING=$staging "$WGNN" bench "$ISNET" --fp16 "${args[@]}" --runs "$RUNS" --warmup 5 --json 2> "$OUT/err.txt" | tail -1 |
        python3 -c 'import json,sys; j=json.load(sys.stdin); j["staging"]=int(sys.argv[1]); j["outputs"]=sys.argv[2]; print(json.dumps(j))' \
          "$staging" "$outputs" >> "$lines" || echo "run_isnet_host: wgnn bench failed: $(tail -3 "$OUT/err.txt")" >&2
    done
  done
done
if [ -n "${ORT_PEER:-}" ]; then
  "$ORT_PEER/node" "$ORT_PEER/bench.js" "$ISNET" --ep webgpu --runs 10 --warmup 2 | tail -1 > "$OUT/isnet_host_ort.json"
fi
python3 - "$lines" "$OUT/isnet_host_ort.json" <<'PY'
import json, os, sys
print("| outputs read back | large inputs | median ms | min ms | GPU ms | upload µs | encode µs | readback µs | two in flight, ms per run |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for l in open(sys.argv[1]):
    j = json.loads(l)
    print(f"| {'the matte' if j['outputs'] == 'output' else 'all 12'} | {'upload buffers' if j['staging'] else 'queue writes'} | "
          f"{j['median_ms']:.2f} | {j['min_ms']:.2f} | {j['gpu_ms']:.2f} | {j['upload_us']:.0f} | {j['encode_us']:.0f} | "
          f"{j['readback_us']:.0f} | {j['queued_ms']:.2f} |")
if os.path.exists(sys.argv[2]) and os.path.getsize(sys.argv[2]):
    o = json.load(open(sys.argv[2]))
    print(f"\nONNX Runtime {o['ort_version']} WebGPU, every output: median {o['median_ms']:.1f} ms (min {o['min_ms']:.1f})")
PY
