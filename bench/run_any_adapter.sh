#!/usr/bin/env bash
# On the GPU machine: ISNet, remove-bg's default model, with the default
# (npm) build, whose Dawn offers no shader-f16 on NVIDIA (float16 values
# stored as float32), and with build-source/ (Dawn from source, float16
# storage) when it is there: bench/any_adapter_isnet.py checks each alpha
# against ONNX Runtime CPU and the two against each other, and times them.
#
#   bash bench/run_any_adapter.sh
#
# Needs build/wgnn, .deps/dawn, .gl, .payload/lib (bench/make_payload.sh),
# the photo at .payload/astronaut.png, and ISNet as .deps/models/isnet.onnx
# (or ISNET=FILE) or .payload/isnet.onnx.part-* (split to travel where
# transfers are size-limited; joined here). Writes $OUT/any_adapter_isnet.{md,json} and
# the masks.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
model=${ISNET:-.deps/models/isnet.onnx}
if [ ! -f "$model" ]; then
  model=${TMPDIR:-/tmp}/isnet.onnx
  cat .payload/isnet.onnx.part-* > "$model" || { echo "run_any_adapter: no ISNet parts in .payload" >&2; exit 1; }
fi
builds=(--wgnn "npm=$PWD/build/wgnn")
if [ -x build-source/wgnn ]; then
  LIB=$(ls -d "$PWD"/.deps/dawn-source-*/lib | head -1)
  # The source build finds its Dawn through this wrapper's library path.
  cat > "${TMPDIR:-/tmp}/wgnn-source" <<SH
#!/bin/sh
WGNN_ALLOW_UNSAFE_APIS=1 LD_LIBRARY_PATH="$LIB:\$LD_LIBRARY_PATH" exec "$PWD/build-source/wgnn" "\$@"
SH
  chmod +x "${TMPDIR:-/tmp}/wgnn-source"
  builds+=(--wgnn "source=${TMPDIR:-/tmp}/wgnn-source")
fi
build/wgnn info | tee "$OUT/info_npm.txt"
python3 bench/any_adapter_isnet.py --model "$model" --photo .payload/astronaut.png --out "$OUT" "${builds[@]}"
