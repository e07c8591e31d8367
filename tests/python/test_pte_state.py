"""An ExecuTorch program with state through the Python package: a decoder
whose key/value cache lives in mutable buffers (tests/data/pte/models/
kv_decoder.pte). The cache is not an input; each run sees the runs before
it; reset_state() starts over; the steps match the float64 PyTorch goldens
the fixture script wrote."""
import json
import os

import numpy as np

import wgnn

from conftest import ROOT

DATA = os.path.join(ROOT, "tests", "data", "pte", "models")


def _steps():
    manifest = json.load(open(os.path.join(DATA, "manifest.json")))
    out = []
    for e in manifest:
        if e["pte"] != "kv_decoder.pte":
            continue
        ins = [np.fromfile(os.path.join(DATA, i["path"]), dtype=i["dtype"]).reshape(i["shape"]) for i in e["inputs"]]
        g = e["golden"]
        want = np.fromfile(os.path.join(DATA, g["path"]), dtype=g["dtype"]).reshape(g["shape"])
        out.append((ins, want))
    return out


def test_state_carries_over_and_resets():
    s = wgnn.InferenceSession(os.path.join(DATA, "kv_decoder.pte"))
    assert [i.name for i in s.get_inputs()] == ["input_0", "input_1"]
    steps = _steps()
    assert len(steps) == 6
    first = None
    for k, (ins, want) in enumerate(steps):
        (y,) = s.run(None, {"input_0": ins[0], "input_1": ins[1]})
        np.testing.assert_allclose(y, want, atol=1e-4, rtol=1e-4, err_msg=f"step {k}")
        if k == 0:
            first = y
    # After a reset, step 1 alone attends to an empty slot 0: not its
    # golden (which saw step 0's keys); after step 0 again, it is.
    s.reset_state()
    (alone,) = s.run(None, {"input_0": steps[1][0][0], "input_1": steps[1][0][1]})
    assert not np.allclose(alone, steps[1][1], atol=1e-3)
    s.reset_state()
    (fresh,) = s.run(None, {"input_0": steps[0][0][0], "input_1": steps[0][0][1]})
    np.testing.assert_allclose(fresh, first, atol=1e-6, rtol=0)
    (y1,) = s.run(None, {"input_0": steps[1][0][0], "input_1": steps[1][0][1]})
    np.testing.assert_allclose(y1, steps[1][1], atol=1e-4, rtol=1e-4)
