"""DeformConv (opset 19) at a feature map's sizes (16 channels, 20x20,
two groups and two offset groups, offsets of several pixels, a mask and a
bias) against ONNX Runtime's CPU provider and a plain numpy loop; the
backend suite's cases are one or two channels of 3x3."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import wgnn


def reference(x, w, off, b, mask, stride, pad, dil, group, og):
    """The definition, one output at a time: bilinear sampling with zeros
    outside the image."""
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    _, _, oh, ow = off.shape
    off = off.reshape(n, og, kh, kw, 2, oh, ow)
    mask = mask.reshape(n, og, kh, kw, oh, ow)

    def sample(img, y, xx):
        y0, x0 = int(np.floor(y)), int(np.floor(xx))
        v = 0.0
        for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
            for xq, wx in ((x0, 1 - (xx - x0)), (x0 + 1, xx - x0)):
                if 0 <= yy < h and 0 <= xq < wd:
                    v += wy * wx * img[yy, xq]
        return v

    cols = np.zeros((n, c, kh, kw, oh, ow))
    for bi in range(n):
        for ci in range(c):
            g = ci // (c // og)
            for ki in range(kh):
                for kj in range(kw):
                    for i in range(oh):
                        for j in range(ow):
                            y = i * stride - pad + ki * dil + off[bi, g, ki, kj, 0, i, j]
                            xx = j * stride - pad + kj * dil + off[bi, g, ki, kj, 1, i, j]
                            cols[bi, ci, ki, kj, i, j] = sample(x[bi, ci], y, xx) * mask[bi, g, ki, kj, i, j]
    cols = cols.reshape(n, group, cg * kh * kw, oh * ow)
    y = np.einsum("gok,ngkp->ngop", w.reshape(group, oc // group, cg * kh * kw), cols)
    return y.reshape(n, oc, oh, ow) + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("stride,pad,dil", [(1, 1, 1), (2, 2, 2)])
def test_deform_conv_matches_onnxruntime_and_the_definition(stride, pad, dil):
    rng = np.random.default_rng(stride)
    N, C, H, W, OC, k, group, og = 2, 16, 20, 20, 24, 3, 2, 2
    OH = (H + 2 * pad - ((k - 1) * dil + 1)) // stride + 1
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((OC, C // group, k, k)).astype(np.float32) * 0.2
    off = rng.uniform(-3, 3, (N, og * k * k * 2, OH, OH)).astype(np.float32)
    b = rng.standard_normal(OC).astype(np.float32)
    mask = rng.uniform(0, 1, (N, og * k * k, OH, OH)).astype(np.float32)
    node = helper.make_node("DeformConv", ["x", "w", "off", "b", "mask"], ["y"], group=group, offset_group=og,
                            strides=[stride] * 2, pads=[pad] * 4, dilations=[dil] * 2, kernel_shape=[k, k])
    names = ["x", "w", "off", "b", "mask"]
    g = helper.make_graph([node], "d", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9).SerializeToString()
    feed = dict(zip(names, [x, w, off, b, mask]))
    (y,) = wgnn.InferenceSession(m).run(None, feed)
    assert y.shape == (N, OC, OH, OH)
    np.testing.assert_allclose(y, reference(x, w, off, b, mask, stride, pad, dil, group, og), rtol=1e-4, atol=1e-4)
    (want,) = onnxruntime.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feed)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
