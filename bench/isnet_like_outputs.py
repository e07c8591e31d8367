"""Writes a matting model with ISNet's outputs but almost none of its GPU
work: the matte (mean over RGB, a sigmoid), five more 1x1xHxW side outputs
and a 1x64x(H/2)x(W/2) map, about 88 MB read back per run at 1024x1024. On
it, remove-bg's folder rate is what its host side (decode, pre-processing,
read-back, PNG writes) can sustain.

usage: isnet_like_outputs.py OUT.onnx [SIZE]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

path = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
nodes = [helper.make_node("ReduceMean", ["input"], ["mean"], axes=[1], keepdims=1),
         helper.make_node("Sigmoid", ["mean"], ["output"])]
outs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, n, n])]
for k in range(5):
    nodes.append(helper.make_node("Relu", ["mean"], [f"side{k}"]))
    outs.append(helper.make_tensor_value_info(f"side{k}", TensorProto.FLOAT, [1, 1, n, n]))
w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(64, 3, 1, 1)).astype(np.float32), "w")
nodes.append(helper.make_node("Conv", ["input", "w"], ["map"], strides=[2, 2], kernel_shape=[1, 1]))
outs.append(helper.make_tensor_value_info("map", TensorProto.FLOAT, [1, 64, n // 2, n // 2]))
g = helper.make_graph(nodes, "isnet_like_outputs",
                      [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, n, n])], outs, [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, path)
