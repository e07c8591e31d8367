"""Attention with grouped K/V heads (q_num_heads a multiple of
kv_num_heads) against ONNX Runtime's CPU provider, in every layout the
one-dispatch kernel takes without repeating K and V: decoding (one query
position), no mask, a key padding mask, a mask per head and position; and
one it does not (a causal prefill, whose bias steps differently per head
and position), which repeats them. Without the repeat the graph has no more
dispatches than the same attention with K and V repeated by the caller."""
import re

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import wgnn
from conftest import has_f16, vi

B, HQ, HKV, D, S = 2, 8, 2, 32, 45
G = HQ // HKV


def model(hkv, L, three_d, mask, causal):
    """Attention of Q [B, HQ, L, D] (3-D: [B, L, HQ * D]) over hkv K/V heads
    of S keys; mask: None, "pad" (bool [B, 1, 1, S]), "padL" (the same as
    [B, 1, L, S], which ONNX Runtime wants) or "full" (float [B, HQ, L, S])."""
    ins = ["q", "k", "v"] + (["m"] if mask else [])
    attrs = {"is_causal": int(causal)}
    if three_d:
        attrs.update(q_num_heads=HQ, kv_num_heads=hkv)
        inputs = [vi("q", [B, L, HQ * D]), vi("k", [B, S, hkv * D]), vi("v", [B, S, hkv * D])]
    else:
        inputs = [vi("q", [B, HQ, L, D]), vi("k", [B, hkv, S, D]), vi("v", [B, hkv, S, D])]
    if mask == "pad":
        inputs.append(vi("m", [B, 1, 1, S], TensorProto.BOOL))
    elif mask == "padL":
        inputs.append(vi("m", [B, 1, L, S], TensorProto.BOOL))
    elif mask == "full":
        inputs.append(vi("m", [B, HQ, L, S]))
    g = helper.make_graph([helper.make_node("Attention", ins, ["y"], **attrs)], "t", inputs, [vi("y", None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)], ir_version=10).SerializeToString()


def feed(rng, L, three_d, mask):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    if three_d:
        out = {"q": f(B, L, HQ * D), "k": f(B, S, HKV * D), "v": f(B, S, HKV * D)}
    else:
        out = {"q": f(B, HQ, L, D), "k": f(B, HKV, S, D), "v": f(B, HKV, S, D)}
    if mask == "pad":
        out["m"] = (np.arange(S)[None, :] < np.array([[S], [19]]))[:, None, None, :]
    elif mask == "full":
        out["m"] = np.where(rng.random((B, HQ, L, S)) < 0.3, -1e4, 0.5 * f(B, HQ, L, S)).astype(np.float32)
    return out


def repeated(x, three_d):
    """K or V with each head repeated for its G query heads."""
    if three_d:
        return np.repeat(x.reshape(B, S, HKV, D), G, axis=2).reshape(B, S, HQ * D)
    return np.repeat(x, G, axis=1)


def dispatches(session):
    return int(re.search(r"(\d+) dispatches", session.summary()).group(1))


CASES = {  # id: (L, three_d, mask, causal, the repeat avoided)
    "decode-4d-causal": (1, False, None, True, True),
    "decode-3d": (1, True, None, False, True),
    "decode-3d-full-mask": (1, True, "full", False, True),
    "prefill-3d-no-mask": (6, True, None, False, True),
    "prefill-4d-pad-mask": (6, False, "pad", False, True),
    "prefill-4d-full-mask": (6, False, "full", False, True),
    "prefill-4d-causal": (6, False, None, True, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_grouped_heads_match_onnxruntime(case):
    L, three_d, mask, causal, merged = CASES[case]
    m = model(HKV, L, three_d, mask, causal)
    x = feed(np.random.default_rng(len(case)), L, three_d, mask)
    xr = dict(x, m=np.broadcast_to(x["m"], (B, 1, L, S)).copy()) if mask == "pad" else x
    mr = model(HKV, L, three_d, "padL", causal) if mask == "pad" else m
    ref = onnxruntime.InferenceSession(mr, providers=["CPUExecutionProvider"]).run(None, xr)[0]
    s = wgnn.InferenceSession(m)
    np.testing.assert_allclose(s.run(None, x)[0], ref, rtol=1e-4, atol=1e-4)

    # The same attention with K and V repeated by the caller: as many
    # dispatches (one more where a 3-D result of several positions is
    # permuted into place), where the grouped heads avoid the repeat.
    flat = model(HQ, L, three_d, mask, causal)
    xf = dict(x, k=repeated(x["k"], three_d), v=repeated(x["v"], three_d))
    sf = wgnn.InferenceSession(flat)
    np.testing.assert_allclose(sf.run(None, xf)[0], ref, rtol=1e-4, atol=1e-4)
    extra = 1 if three_d and L > 1 else 0
    if merged:
        assert dispatches(s) <= dispatches(sf) + extra
    else:
        assert dispatches(s) > dispatches(sf)

    if has_f16():
        o = wgnn.SessionOptions()
        o.fp16 = True
        got = wgnn.InferenceSession(m, sess_options=o).run(None, x)[0]
        np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)
