"""Shared pieces of the Python package's tests (run by scripts/test in the
.venv that scripts/setup makes, with the package installed there)."""
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_dir():
    return os.environ.get("WGNN_BUILD_DIR", os.path.join(ROOT, "build"))


def cli():
    """The CLI that scripts/setup built (build/wgnn)."""
    path = os.path.join(build_dir(), "wgnn")
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is missing: run scripts/setup")
    return path


def isnet_any_size():
    for d in (os.path.join(build_dir(), "models"), os.path.join(ROOT, ".deps", "models")):
        p = os.path.join(d, "isnet_any_size.onnx")
        if os.path.exists(p):
            return p
    pytest.skip("isnet_any_size.onnx is missing: run scripts/setup")


def astronaut():
    """The photo scripts/demo cuts out (Debian's python3-imageio ships it)."""
    p = "/usr/lib/python3/dist-packages/imageio/resources/images/astronaut.png"
    if not os.path.exists(p):
        pytest.skip(f"{p} is missing (Debian's python3-imageio)")
    return p


def model(nodes, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def vi(name, shape, t=TensorProto.FLOAT):
    """A graph input or output's value info (shape None: unknown)."""
    return helper.make_tensor_value_info(name, t, shape)


def has_f16():
    """Whether the adapter runs wgnn's float16 mode (shader-f16)."""
    import wgnn
    return wgnn.get_device_info()["features"]["shader-f16"]


def wgnn_and_ort(model, feed, fp16=False):
    """The model's outputs from wgnn (float16 mode with fp16) and from
    ONNX Runtime's CPU provider, on the same feed."""
    import onnxruntime
    import wgnn
    o = wgnn.SessionOptions()
    o.fp16 = fp16
    ours = wgnn.InferenceSession(model, sess_options=o).run(None, feed)
    ref = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    return ours, ref


@pytest.fixture
def small_model():
    """y = (a + b) * 2 @ W, with a symbolic batch dim: a small model for
    overhead and leak tests."""
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Mul", ["s", "two"], ["m"]),
        helper.make_node("MatMul", ["m", "W"], ["y"]),
    ]
    return model(
        nodes,
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
         helper.make_tensor("W", TensorProto.FLOAT, [4, 3], w.flatten())],
    )


@pytest.fixture
def workdir(tmp_path):
    yield str(tmp_path)
    shutil.rmtree(str(tmp_path), ignore_errors=True)
