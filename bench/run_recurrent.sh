#!/usr/bin/env bash
# wgnn.recurrent's two kernels on the same LSTM / GRU layers: one
# persistent dispatch (a workgroup per batch row looping over the steps)
# against a dispatch per step (WGNN_RECURRENT=persistent / step), 64 steps
# of a 64-feature input, hidden 32 to 1024, batch 1 and 8. The models are
# made here with onnx.helper. Prints one line per layer and kernel: the
# host-to-host median and the GPU time (`wgnn bench --json`).
#
#   bash bench/run_recurrent.sh [WGNN]      (default build/wgnn)
set -euo pipefail
cd "$(dirname "$0")/.."
WGNN=${1:-build/wgnn}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
/usr/bin/python3 - "$DIR" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(1)
for kind, gates, hidden, batch in [("LSTM", 4, 32, 1), ("LSTM", 4, 64, 1), ("LSTM", 4, 128, 1), ("LSTM", 4, 256, 1),
                                   ("LSTM", 4, 1024, 1), ("LSTM", 4, 64, 8), ("LSTM", 4, 128, 8),
                                   ("GRU", 3, 64, 1), ("GRU", 3, 256, 1)]:
    T, I = 64, 64
    w = numpy_helper.from_array(rng.normal(0, 0.1, (1, gates * hidden, I)).astype(np.float32), "W")
    r = numpy_helper.from_array(rng.normal(0, 0.1, (1, gates * hidden, hidden)).astype(np.float32), "R")
    g = helper.make_graph([helper.make_node(kind, ["x", "W", "R"], ["y", "yh"], hidden_size=hidden)], "layer",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, batch, I])],
                          [helper.make_tensor_value_info("yh", TensorProto.FLOAT, [1, batch, hidden])], [w, r])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, f"{sys.argv[1]}/{kind.lower()}_h{hidden}_b{batch}.onnx")
PY
for m in "$DIR"/*.onnx; do
  for mode in persistent step; do
    WGNN_RECURRENT=$mode "$WGNN" bench "$m" --runs 9 --warmup 2 --json |
      /usr/bin/python3 -c "import json, sys; d = json.load(sys.stdin); print(f\"$(basename "$m" .onnx) $mode: median {d['median_ms']:.2f} ms, gpu {d['gpu_ms']:.2f} ms, {d['dispatches']} dispatches\")"
  done
done
