#!/usr/bin/env bash
# On the GPU machine: the seed-op benchmark, wgnn and PyTorch in one run,
# plus the copy yardstick and the test suite on the real GPU.
# Needs build/, .deps/dawn and .gl (docs/BENCHMARKS.md).
set -uo pipefail
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
build/wgnn info | tee "$OUT/info.txt"
build/wgnn bench-copy --mib 1024 --iters 20 --reps 7 --json | tee "$OUT/copy.jsonl"
python3 bench/torch_copy.py 1024 | tee -a "$OUT/copy.jsonl"
# One process per op family: in one long-lived process that had already
# allocated and freed ~1.5 GB, 256 MiB buffers copied at 1.7 TB/s instead of
# 4.2 TB/s (docs/BENCHMARKS.md, "Allocation state").
: > "$OUT/seed_wgnn.jsonl"
for op in layer_norm batch_norm relu sigmoid; do
  build/bench/wgnn_bench_ops --f16 --only $op | tee -a "$OUT/seed_wgnn.jsonl"
done
python3 bench/torch_seed_ops.py --f16 | tee "$OUT/seed_torch.jsonl"
python3 bench/seed_ops_report.py "$OUT/seed_wgnn.jsonl" "$OUT/seed_torch.jsonl" | tee "$OUT/seed_ops.md"
build/tests/wgnn_tests 2>&1 | grep -E "^\[  (PASSED|FAILED) |tests ran|SKIPPED \] [0-9]+ tests"
# Allocation-state probe: relu after the layer_norm cases in one process.
build/bench/wgnn_bench_ops --only layer_norm,relu | grep '"relu"' | tee "$OUT/alloc_probe.jsonl"
