#!/usr/bin/env bash
# On the GPU machine: remove-bg's host side, with a model that has ISNet's
# outputs but almost no GPU work (bench/isnet_like_outputs.py):
#   1. one photo run 20 times in one process (`--runs`), for this build and
#      an earlier one (BASE), alternately, against `wgnn bench` on the same
#      model: what a model run costs remove-bg beyond bench's host to host;
#   2. the folder rate of 200 1024x768 JPEGs with 8 host threads and with 1:
#      what the host side sustains.
#
#   WGNN=FILE [BASE=FILE] [N=200] bash bench/run_remove_bg_host.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WGNN=${WGNN:-build/wgnn}
N=${N:-200}
PY=${PY:-python3}
WORK=${TMPDIR:-/tmp}/remove_bg_host
rm -rf "$WORK"; mkdir -p "$WORK"
LOG="$OUT/remove_bg_host.txt"
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }
$PY bench/isnet_like_outputs.py "$WORK/model.onnx" 1024
$PY bench/make_photos.py "$WORK/photos" "$N" 1024 768
photo="$WORK/photos/photo_000.jpg"
say "== one photo, --runs 20 (steady = median of 19)"
for i in 1 2 3; do
  for b in ${BASE:+base} new; do
    bin=$([ "$b" = base ] && echo "$BASE" || echo "$WGNN")
    say "$b: $("$bin" remove-bg "$photo" -o "$WORK/one.png" --model "$WORK/model.onnx" --runs 20 --quiet)"
  done
  "$WGNN" bench "$WORK/model.onnx" --shape input=1x3x1024x1024 --runs 20 --json | \
    $PY -c "import json,sys; j=json.load(sys.stdin); print(f\"bench: median host to host {j['median_ms']:.2f} ms, GPU {j['gpu_ms']:.2f} ms, readback {j['readback_us']/1e3:.2f} ms\")" | tee -a "$LOG"
done
say "== the folder, $N photos"
for t in 8 1; do
  rm -rf "$WORK/out"
  "$WGNN" remove-bg "$WORK/photos" -o "$WORK/out" --model "$WORK/model.onnx" --threads $t 2> "$WORK/err_$t"
  say "--threads $t: $(grep -E 'the model ran' "$WORK/err_$t")"
done
