#!/usr/bin/env bash
# Builds the ONNX Runtime peer for bench/compare_models.py: OUT_DIR/ortpeer.tar.xz
# holding ortpeer/ with a node binary (this machine's), onnxruntime-node as
# scripts/setup installed it in .deps/ort (linux x64 binaries only: the CPU
# and WebGPU execution providers) bench/ort_bench.js as bench.js and bench/ort_generate.js as generate.js.
# On the GPU machine: tar xJf ortpeer.tar.xz, then
#   python3 bench/compare_models.py --ort-peer ortpeer ...
# (bench/run_compare.sh unpacks it itself).
# Usage: bench/make_ort_peer.sh [OUT_DIR]   (default .payload, git-ignored)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/.payload}
ort=$root/.deps/ort/node_modules
if [ ! -f "$ort/onnxruntime-node/package.json" ]; then
  echo "make_ort_peer: $ort/onnxruntime-node is missing; run scripts/setup first" >&2
  exit 1
fi
node_bin=$(command -v node || true)
if [ -z "$node_bin" ]; then
  echo "make_ort_peer: no node on PATH (Debian: apt-get install nodejs)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ortpeer" "$out"
cp -r "$ort" "$work/ortpeer/node_modules"
# Only linux/x64 of onnxruntime-node's prebuilt binaries.
bin=$work/ortpeer/node_modules/onnxruntime-node/bin
find "$bin" -mindepth 2 -maxdepth 2 -type d ! -name linux -exec rm -rf {} +
find "$bin" -mindepth 3 -maxdepth 3 -type d -path '*/linux/*' ! -name x64 -exec rm -rf {} +
cp -L "$node_bin" "$work/ortpeer/node"
strip "$work/ortpeer/node" 2>/dev/null || true  # its symbols: a tenth of its size
cp "$root/bench/ort_bench.js" "$work/ortpeer/bench.js"
cp "$root/bench/ort_generate.js" "$work/ortpeer/generate.js"
version=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$ort/onnxruntime-node/package.json" | head -1)
echo "onnxruntime-node $version, node $("$node_bin" --version)" > "$work/ortpeer/VERSION"
tar -C "$work" -cf - ortpeer | xz -T2 -9e > "$out/ortpeer.tar.xz"
echo "make_ort_peer: $out/ortpeer.tar.xz ($(du -h "$out/ortpeer.tar.xz" | cut -f1); $(cat "$work/ortpeer/VERSION"))"
