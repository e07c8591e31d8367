#!/usr/bin/env bash
# Copies the shared libraries wgnn links that the GPU machine lacks into
# .payload/lib (git-ignored), to copy beside build/ to that machine.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .payload/lib
for lib in libonnx.so.1 libonnx_proto.so.1 libprotobuf.so.32 libstb.so.0 libfmt.so.9 \
           libwebp.so.7 libtiff.so.6 libexif.so.12 libLerc.so.4 libjbig.so.0 libjpeg.so.62 libdeflate.so.0 \
           libpng16.so.16 libbrotlicommon.so.1 libbrotlidec.so.1 libbrotlienc.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .payload/lib/
done
