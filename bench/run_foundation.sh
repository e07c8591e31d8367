#!/usr/bin/env bash
# On the GPU machine: adapter info and the copy yardstick, wgnn beside PyTorch
# in one run. Needs build/, .deps/dawn and .gl (see docs/BENCHMARKS.md).
set -uo pipefail
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
build/wgnn info | tee "$OUT/info.txt"
build/wgnn info --json > "$OUT/info.json"
for mib in 256 1024; do
  build/wgnn bench-copy --mib $mib --iters 20 --reps 7 --json | tee -a "$OUT/copy.jsonl"
  python3 bench/torch_copy.py $mib | tee -a "$OUT/copy.jsonl"
done
build/wgnn bench-copy --mib 1024 --iters 20 --reps 7
build/tests/wgnn_tests 2>&1 | tail -3
