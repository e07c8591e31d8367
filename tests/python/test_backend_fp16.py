"""The ONNX backend suite's cases of the operators of opsets 18 to 28 that
wgnn added (attention, normalizations, rotary positions, scans, pools,
sampling, bitwise, resize's antialias, ...) in wgnn's float16 mode: each
output within 2e-2 + 2e-2 |expected| of the suite's float32 reference,
NaN where it has NaN, integers equal. backend_suite.py pins the float32
results; this keeps the float16 path of the same operators honest."""
import re
import warnings

import numpy as np
import pytest

import wgnn
import wgnn.backend

CASES = re.compile(
    r"test_(attention|rms_normalization|rotary_embedding|swish|swiglu|cumprod|tensorscatter|lppool|lpnormalization|"
    r"l1normalization|l2normalization|mish|col2im|affine_grid|center_crop_pad|roialign|basic_deform_conv|deform_conv|"
    r"resize_downsample_.*antialias|resize_.*symmetric|bitwise|bitshift|reduce_max_bool|reduce_min_bool|mod_float)")


def cases():
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = [c for c in load_model_tests(kind="node") if CASES.match(c.name) and not c.name.endswith("_expanded")]
    return sorted(found, key=lambda c: c.name)


def arrays(values):
    from onnx import numpy_helper

    return [numpy_helper.to_array(v) if hasattr(v, "dims") else np.asarray(v) for v in values]


@pytest.mark.skipif(not wgnn.get_device_info()["features"]["shader-f16"], reason="no shader-f16 on this adapter")
def test_new_operators_in_float16_mode():
    ran, unsupported, bad = 0, 0, []
    for case in cases():
        try:
            rep = wgnn.backend.prepare(case.model, "CPU", fp16=True)
            for inputs, outputs in case.data_sets:
                got = rep.run(arrays(inputs))
                for g, want in zip(got, arrays(outputs)):
                    if want.dtype.kind == "f":
                        assert np.array_equal(np.isnan(g), np.isnan(want)), "NaN where the reference has none"
                        ok = np.isfinite(want)
                        err = np.abs(g[ok].astype(np.float64) - want[ok])
                        assert np.all(err <= 2e-2 + 2e-2 * np.abs(want[ok])), f"max error {err.max():.3g}"
                    else:
                        assert np.array_equal(g, want), "values differ"
            ran += 1
        except wgnn.Unsupported:
            unsupported += 1  # the dtypes float16 mode cannot hold, as in float32 (bfloat16, ...)
        except Exception as e:  # noqa: BLE001 (each failure is listed)
            bad.append(f"{case.name}: {type(e).__name__}: {str(e)[:200]}")
    assert not bad, "\n".join(bad)
    # The operators' float32 cases pass (backend_expected.txt): most must run here too.
    assert ran >= 190, f"only {ran} cases ran ({unsupported} unsupported)"
