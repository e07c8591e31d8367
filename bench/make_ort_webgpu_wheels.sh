#!/usr/bin/env bash
# Downloads the wheels of bench/ort_webgpu_requirements.txt (ONNX Runtime
# WebGPU for Python, hashes checked) into .payload/wheels/ (git-ignored), for
# the Python of the GPU machine, which reaches no package index: copy
# .payload/wheels there (about 26 MB).
#
#   bench/make_ort_webgpu_wheels.sh [PYTHON_VERSION]    (default 3.11)
set -euo pipefail
cd "$(dirname "$0")/.."
PYV=${1:-3.11}
rm -rf .payload/wheels
mkdir -p .payload/wheels
python3 -m pip download --quiet --no-deps --require-hashes --only-binary :all: --python-version "$PYV" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 -d .payload/wheels -r bench/ort_webgpu_requirements.txt
ls -l .payload/wheels
du -sh .payload/wheels
