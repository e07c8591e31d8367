"""The tiny matting model of the remove-bg CLI tests, built with onnx.helper
(the mean over RGB, then a sigmoid), and the alpha it gives a colour after
remove-bg's ISNet pre-processing ((x - 128) / 256)."""
import math

import onnx
from onnx import TensorProto, helper


def matting_model(path, h, w):
    dims = [1, 3, h, w]
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["input"], ["mean"], axes=[1], keepdims=1),
         helper.make_node("Sigmoid", ["mean"], ["output"])],
        "matting", [helper.make_tensor_value_info("input", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, h, w])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def alpha_of(rgb, mean=128.0, std=256.0):
    x = sum((c - mean) / std for c in rgb) / 3
    return round(255 / (1 + math.exp(-x)))
