"""4-bit weights as standard ONNX writes them for weight-only quantized
LLMs: an int4 / uint4 initializer (two values a byte) dequantized in blocks
along K (DequantizeLinear, opset 21) into a MatMul; against ONNX Runtime
and numpy. Other readers of a 4-bit initializer are refused."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import wgnn

K, N, BLOCK = 96, 40, 32


def pack(q):
    """Two 4-bit values a byte, the first in the low nibble."""
    flat = (q.astype(np.int16) & 0xF).astype(np.uint8).ravel()
    if flat.size % 2:
        flat = np.append(flat, 0)
    return (flat[0::2] | (flat[1::2] << 4)).tobytes()


def model(signed, with_zp, consumer="DequantizeLinear"):
    rng = np.random.default_rng(4)
    lo, hi = (-8, 8) if signed else (0, 16)
    q = rng.integers(lo, hi, (K, N))
    zp = rng.integers(lo, hi, (K // BLOCK, N))
    scale = rng.uniform(0.01, 0.1, (K // BLOCK, N)).astype(np.float32)
    t = TensorProto.INT4 if signed else TensorProto.UINT4
    w = helper.make_tensor("w", t, [K, N], pack(q), raw=True)
    z = helper.make_tensor("z", t, [K // BLOCK, N], pack(zp), raw=True)
    inits = [w, numpy_helper.from_array(scale, "s")] + ([z] if with_zp else [])
    if consumer == "DequantizeLinear":
        nodes = [helper.make_node("DequantizeLinear", ["w", "s"] + (["z"] if with_zp else []), ["wf"], axis=0,
                                  block_size=BLOCK),
                 helper.make_node("MatMul", ["x", "wf"], ["y"])]
    else:
        nodes = [helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
                 helper.make_node("MatMul", ["x", "wf"], ["y"])]
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    deq = (q - (np.repeat(zp, BLOCK, axis=0) if with_zp else 0)) * np.repeat(scale, BLOCK, axis=0)
    return m.SerializeToString(), deq


@pytest.mark.parametrize("signed", [True, False], ids=["int4", "uint4"])
@pytest.mark.parametrize("with_zp", [True, False], ids=["zero_point", "no_zero_point"])
def test_blocked_4bit_weights_match_onnxruntime_and_numpy(signed, with_zp):
    data, deq = model(signed, with_zp)
    x = np.random.default_rng(5).standard_normal((3, K)).astype(np.float32)
    (y,) = wgnn.InferenceSession(data).run(None, {"x": x})
    # ONNX Runtime's optimizer turns DequantizeLinear + MatMul into its
    # MatMulNBits, which quantizes the activations too (0.06 off here): its
    # plain kernels are the reference.
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    (want,) = onnxruntime.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, x.astype(np.float64) @ deq, rtol=1e-4, atol=1e-4)


def test_a_4bit_initializer_read_by_another_op_is_refused():
    data, _ = model(True, False, consumer="Cast")
    with pytest.raises(wgnn.Unsupported, match="reads the 4-bit initializer 'w'"):
        wgnn.InferenceSession(data)
