"""RoiAlign at a detector's sizes (a feature map, boxes in image pixels,
spatial_scale 1/4, 7x7 bins) against ONNX Runtime's CPU provider, in both
modes and coordinate rules, adaptive and fixed sampling; the backend
suite's cases are one box on one small map."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import wgnn


def model(**attrs):
    node = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], **attrs)
    g = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                        helper.make_tensor_value_info("rois", TensorProto.FLOAT, None),
                                        helper.make_tensor_value_info("bi", TensorProto.INT64, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)], ir_version=8).SerializeToString()


def feed(rng):
    x = rng.standard_normal((2, 16, 50, 60)).astype(np.float32)
    # Boxes in a 240 x 200 image: some tiny, some past the edges.
    x1 = rng.uniform(-20, 230, 24)
    y1 = rng.uniform(-20, 190, 24)
    w = rng.uniform(0.5, 120, 24)
    h = rng.uniform(0.5, 120, 24)
    rois = np.stack([x1, y1, x1 + w, y1 + h], axis=1).astype(np.float32)
    return {"x": x, "rois": rois, "bi": rng.integers(0, 2, 24).astype(np.int64)}


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("coord", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("sampling", [0, 2])
def test_roi_align_matches_onnxruntime(mode, coord, sampling):
    m = model(mode=mode, coordinate_transformation_mode=coord, output_height=7, output_width=7,
              sampling_ratio=sampling, spatial_scale=0.25)
    f = feed(np.random.default_rng(sampling))
    (y,) = wgnn.InferenceSession(m).run(None, f)
    (want,) = onnxruntime.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, f)
    assert y.shape == (24, 16, 7, 7)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_a_batch_index_out_of_range_is_an_error():
    m = model(output_height=2, output_width=2)
    f = feed(np.random.default_rng(1))
    f["bi"][3] = 2
    with pytest.raises(wgnn.Error, match="batch index 2 is out of range"):
        wgnn.InferenceSession(m).run(None, f)
