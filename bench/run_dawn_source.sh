#!/usr/bin/env bash
# On the GPU machine: wgnn built against the Dawn from source (build-source/,
# scripts/build-dawn): adapter info with subgroup matrices, the test suite on
# the real GPU (the tensor-core test included), and the seed ops in float32
# and float16 beside PyTorch. Needs build-source, .deps/dawn-source-*, .gl.
set -uo pipefail
source bench/gpu_env.sh
LIB=$(ls -d "$PWD"/.deps/dawn-source-*/lib | head -1)
export LD_LIBRARY_PATH="$LIB:$LD_LIBRARY_PATH"
export WGNN_ALLOW_UNSAFE_APIS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
build-source/wgnn info | tee "$OUT/info_source.txt"
build-source/wgnn bench-copy --mib 1024 --iters 20 --reps 7 --json | tee "$OUT/copy_source.jsonl"
: > "$OUT/seed_wgnn_source.jsonl"
# One process per op family and dtype (see docs/BENCHMARKS.md, "Allocation state").
for op in layer_norm batch_norm relu sigmoid; do
  build-source/bench/wgnn_bench_ops --only $op | tee -a "$OUT/seed_wgnn_source.jsonl"
  build-source/bench/wgnn_bench_ops --f16 --f16-only --only $op | tee -a "$OUT/seed_wgnn_source.jsonl"
done
python3 bench/torch_seed_ops.py --f16 > "$OUT/seed_torch.jsonl"
python3 bench/seed_ops_report.py "$OUT/seed_wgnn_source.jsonl" "$OUT/seed_torch.jsonl" | tee "$OUT/seed_ops_source.md"
build-source/tests/wgnn_tests 2>&1 | tee "$OUT/tests_source.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran"
grep -E "SubgroupMatrix" "$OUT/tests_source.log" | head -5
# Allocation-state probe: the relu case three times, then batch_norm and relu, in one process.
build-source/bench/wgnn_bench_ops --only relu --rounds 3 | cut -c1-160 | tee "$OUT/alloc_probe.txt"
build-source/bench/wgnn_bench_ops --only batch_norm,relu --rounds 2 | cut -c1-160 | tee -a "$OUT/alloc_probe.txt"
