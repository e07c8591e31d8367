#!/usr/bin/env bash
# On the GPU machine: what the binding-limit splits and the run-time checks
# cost, on the BART-base-sized decoder stand-in (scripts/models/zoo.py
# bart_base_standin: a 154 MB token embedding and a 154 MB output head,
# exported here with the machine's PyTorch). `wgnn bench` with the adapter's
# limits and with WGNN_LIMITS=default (128 MiB bindings: the Gather and the
# head's MatMul split), then checked and --unchecked, alternating, two rounds.
#
#   bash bench/run_limits_checks.sh
#
# Needs build/wgnn, .deps/dawn, .gl, .payload/lib (bench/make_payload.sh).
# Writes $OUT/bart_base_standin_limits.jsonl and $OUT/checked_cost.jsonl
# (docs/results/any_adapter_h200.md).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=${TMPDIR:-/tmp}/bart_standin; mkdir -p "$W"
python3 scripts/models/export.py --model bart_base_standin --opset 17 --out "$W" | tail -1
M=$W/bart_base_standin_opset17.onnx
bench() { build/wgnn bench "$M" --int-range 0:50265 --json "$@" | tail -1; }
for L in adapter default; do
  WGNN_LIMITS=$L bench --runs 30 --warmup 10 | tee -a "$OUT/bart_base_standin_limits.jsonl"
done
for round in 1 2; do
  for c in "" --unchecked; do bench --runs 50 --warmup 10 $c | tee -a "$OUT/checked_cost.jsonl"; done
done
