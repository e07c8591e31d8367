"""Resize with antialias=1 (opset 18) at an image pipeline's sizes (a photo
shrunk to a model's input, torchvision's antialiased resize) and
half_pixel_symmetric, against ONNX Runtime's CPU provider: the backend
suite's cases are 4x4 images."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import wgnn


def resize_model(mode, coord, sizes):
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, antialias=1,
                            coordinate_transformation_mode=coord)
    g = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[helper.make_tensor("sizes", TensorProto.INT64, [4], sizes)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    return m.SerializeToString()


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coord", ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel"])
def test_antialiased_shrink_matches_onnxruntime(mode, coord):
    rng = np.random.default_rng(3)
    x = rng.random((1, 3, 480, 640), dtype=np.float32)
    model = resize_model(mode, coord, [1, 3, 224, 213])
    (y,) = wgnn.InferenceSession(model).run(None, {"x": x})
    (want,) = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert y.shape == (1, 3, 224, 213)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
