#!/usr/bin/env python3
"""Writes one ONNX model per product shape for bench/run_matmul_configs.sh:
Y = MatMul(A, B) with A [M, K] and B [K, N] as inputs (wgnn bench fills them
with seeded random values), opset 17; a shape written MxNxKb adds a bias
(Y = MatMul(A, B) + bias, bias a constant [N]: the form of a linear layer,
which wgnn runs as one product with the bias in its epilogue). Usage:
  matmul_models.py OUT_DIR MxNxK[b] [MxNxK[b] ...]
prints the written paths, one per line."""
import os
import sys

import onnx
from onnx import TensorProto, helper


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for text in sys.argv[2:]:
        bias = text.endswith("b")
        try:
            m, n, k = (int(v) for v in text.rstrip("b").split("x"))
        except ValueError:
            sys.exit(f"bad shape '{text}' (expected MxNxK or MxNxKb)")
        nodes = [helper.make_node("MatMul", ["A", "B"], ["P" if bias else "Y"])]
        inits = []
        if bias:
            nodes.append(helper.make_node("Add", ["P", "bias"], ["Y"]))
            inits.append(helper.make_tensor("bias", TensorProto.FLOAT, [n], [((i * 7919) % 1000) / 1000.0 - 0.5
                                                                              for i in range(n)]))
        graph = helper.make_graph(
            nodes, f"matmul_{text}",
            [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k]),
             helper.make_tensor_value_info("B", TensorProto.FLOAT, [k, n])],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])], initializer=inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(model)
        path = os.path.join(out, f"matmul_{text}.onnx")
        onnx.save(model, path)
        print(path)


if __name__ == "__main__":
    main()
