#!/usr/bin/env bash
# Adapter selection on the GPU machine: wgnn's adapter list beside
# nvidia-smi's (the UUIDs must be CUDA's), CUDA_VISIBLE_DEVICES by index and
# by UUID, the errors for a hidden or missing GPU, the unit tests, and what
# listing the adapters costs at start-up (`wgnn info`, three runs each way).
#
#   bash bench/adapters_gpu_check.sh [build]
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d .gl ] && source bench/gpu_env.sh
B=${1:-build}
echo "== nvidia-smi -L"; nvidia-smi -L
echo "== wgnn info --adapters"; "$B/wgnn" info --adapters
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
show() { python3 -c "import json,sys; j=json.load(sys.stdin); print(j['index'], j['adapter'], 'GPU-' + j['uuid'], j['pci_bus'], '|', j['selected_by'])"; }
echo "== default";                    "$B/wgnn" info --json | show
echo "== CUDA_VISIBLE_DEVICES=0";     CUDA_VISIBLE_DEVICES=0 "$B/wgnn" info --json | show
echo "== CUDA_VISIBLE_DEVICES=$uuid"; CUDA_VISIBLE_DEVICES=$uuid "$B/wgnn" info --json | show
echo "== --adapter $uuid";            "$B/wgnn" --adapter "$uuid" info --json | show
for v in 1 "" -1 GPU-00000000; do
  echo "== CUDA_VISIBLE_DEVICES='$v' (an error is expected)"
  CUDA_VISIBLE_DEVICES=$v "$B/wgnn" info > /dev/null 2> err.txt; echo "rc=$?"; head -3 err.txt
done
wgnn_uuid=$("$B/wgnn" info --json | python3 -c "import json,sys; print('GPU-' + json.load(sys.stdin)['uuid'])")
[ "$wgnn_uuid" = "$uuid" ] && echo "UUID MATCH: wgnn $wgnn_uuid = nvidia-smi $uuid" || echo "UUID MISMATCH: wgnn $wgnn_uuid, nvidia-smi $uuid"
echo "== start-up: wgnn info, 3 runs"
for i in 1 2 3; do /usr/bin/time -f "%e s" "$B/wgnn" info > /dev/null; done
echo "== unit tests"
"$B/tests/wgnn_tests" --gtest_filter='Adapters.*:Context.*:BufferBatch.*' 2>&1 | tail -3
