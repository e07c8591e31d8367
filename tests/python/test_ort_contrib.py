"""ONNX Runtime's contrib operators that its model builders write
(com.microsoft GroupQueryAttention, SkipLayerNormalization,
SkipSimplifiedLayerNormalization, RotaryEmbedding; SimplifiedLayerNormalization
in the ONNX domain), against ONNX Runtime's CPU provider, which implements
them: prompts, decoding steps over a KV cache, right padding, grouped and
multi-query heads, rotary positions, local windows, and a decoder layer
composed of them, in float32 and in wgnn's float16 mode."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import wgnn
from conftest import has_f16, vi, wgnn_and_ort

MAXPOS = 32


def make(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                          ir_version=9)
    return m.SerializeToString()


def gqa_model(hq, hkv, d, past=True, packed=False, rotary=False, interleaved=0, window=-1, **attrs):
    names = ["q", "" if packed else "k", "" if packed else "v", "past_k" if past else "", "past_v" if past else "",
             "seqlens_k", "total_len"] + (["cos", "sin"] if rotary else [])
    node = helper.make_node("GroupQueryAttention", names, ["y", "present_k", "present_v"], domain="com.microsoft",
                            num_heads=hq, kv_num_heads=hkv, local_window_size=window, do_rotary=int(rotary),
                            rotary_interleaved=interleaved, **attrs)
    width = (hq + 2 * hkv) * d if packed else hq * d
    inputs = [vi("q", ["B", "S", width])]
    if not packed:
        inputs += [vi("k", ["B", "S", hkv * d]), vi("v", ["B", "S", hkv * d])]
    if past:
        inputs += [vi("past_k", ["B", hkv, "P", d]), vi("past_v", ["B", hkv, "P", d])]
    inputs += [vi("seqlens_k", ["B"], TensorProto.INT32), vi("total_len", [], TensorProto.INT32)]
    if rotary:
        inputs += [vi("cos", [MAXPOS, d // 2]), vi("sin", [MAXPOS, d // 2])]
    return make([node], inputs, [vi("y", None), vi("present_k", None), vi("present_v", None)])


def rotary_caches(d):
    theta = np.arange(MAXPOS)[:, None] / (10000.0 ** (np.arange(d // 2)[None, :] * 2.0 / d))
    return np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)


def gqa_feed(rng, b, s, p, hq, hkv, d, seqlens, total, past=True, packed=False, rotary=False):
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    feed = {"q": f(b, s, ((hq + 2 * hkv) if packed else hq) * d)}
    if not packed:
        feed.update(k=f(b, s, hkv * d), v=f(b, s, hkv * d))
    if past:
        feed.update(past_k=f(b, hkv, p, d), past_v=f(b, hkv, p, d))
    feed.update(seqlens_k=np.array(seqlens, np.int32), total_len=np.array(total, np.int32))
    if rotary:
        feed["cos"], feed["sin"] = rotary_caches(d)
    return feed


def check_gqa(model, feed, valid=None, fp16=False):
    """Output rows [b, :valid[b]] (ONNX Runtime leaves a padded prompt's
    padding rows undefined) and the whole presents."""
    ours, ref = wgnn_and_ort(model, feed, fp16)
    tol = 2e-2 if fp16 else 1e-4
    assert ours[0].shape == ref[0].shape
    for b in range(ref[0].shape[0]):
        n = ref[0].shape[1] if valid is None else valid[b]
        np.testing.assert_allclose(ours[0][b, :n], ref[0][b, :n], rtol=tol, atol=tol)
    for i in (1, 2):
        assert ours[i].shape == ref[i].shape
        np.testing.assert_allclose(ours[i], ref[i], rtol=tol, atol=tol)
    return ours, ref


# (hq, hkv): grouped and multi-query heads.
HEADS = [(4, 1), (8, 2)]


@pytest.mark.parametrize("hq,hkv", HEADS, ids=["mqa", "gqa"])
@pytest.mark.parametrize("rotary,interleaved", [(False, 0), (True, 0), (True, 1)], ids=["plain", "rotary", "interleaved"])
def test_gqa_prompt_and_decode(hq, hkv, rotary, interleaved):
    d, b = 16, 2
    rng = np.random.default_rng(hq + 3 * rotary + interleaved)
    # Prompt without a past input, and with the empty past onnxruntime-genai feeds.
    model = gqa_model(hq, hkv, d, past=False, rotary=rotary, interleaved=interleaved)
    check_gqa(model, gqa_feed(rng, b, 6, 0, hq, hkv, d, [5, 5], 6, past=False, rotary=rotary))
    model = gqa_model(hq, hkv, d, rotary=rotary, interleaved=interleaved)
    check_gqa(model, gqa_feed(rng, b, 6, 0, hq, hkv, d, [5, 5], 6, rotary=rotary))
    # Decoding steps over a past.
    for p in (6, 9):
        check_gqa(model, gqa_feed(rng, b, 1, p, hq, hkv, d, [p, p], p + 1, rotary=rotary))


@pytest.mark.parametrize("rotary", [False, True], ids=["plain", "rotary"])
def test_gqa_chunk_over_past(rotary):
    hq, hkv, d = 4, 2, 16
    rng = np.random.default_rng(7)
    model = gqa_model(hq, hkv, d, rotary=rotary)
    check_gqa(model, gqa_feed(rng, 1, 3, 5, hq, hkv, d, [7], 8, rotary=rotary))


@pytest.mark.parametrize("rotary", [False, True], ids=["plain", "rotary"])
def test_gqa_right_padding(rotary):
    """Batch 2, the second row shorter: its keys past seqlens_k are masked,
    its decoded key goes at its own length, the rest of its present is zeros."""
    hq, hkv, d = 4, 2, 16
    rng = np.random.default_rng(11)
    model = gqa_model(hq, hkv, d, rotary=rotary)
    check_gqa(model, gqa_feed(rng, 2, 6, 0, hq, hkv, d, [5, 3], 6, rotary=rotary), valid=[6, 4])
    ours, ref = check_gqa(model, gqa_feed(rng, 2, 1, 6, hq, hkv, d, [6, 4], 7, rotary=rotary))
    assert np.all(ref[1][1, :, 5:] == 0) and np.all(ours[1][1, :, 5:] == 0)


def test_gqa_max_length_past():
    """A past of a maximum length (the shared-buffer layout): the present
    keeps that length, each row's keys at its own positions, zeros after."""
    hq, hkv, d, maxlen = 4, 2, 16, 12
    rng = np.random.default_rng(17)
    model = gqa_model(hq, hkv, d, rotary=True)
    check_gqa(model, gqa_feed(rng, 2, 5, maxlen, hq, hkv, d, [4, 2], 5, rotary=True), valid=[5, 3])
    check_gqa(model, gqa_feed(rng, 2, 1, maxlen, hq, hkv, d, [5, 3], 6, rotary=True))


def test_gqa_packed_qkv_and_scale_softcap():
    hq, hkv, d = 4, 2, 16
    rng = np.random.default_rng(5)
    model = gqa_model(hq, hkv, d, packed=True, rotary=True, scale=0.2, softcap=3.0)
    check_gqa(model, gqa_feed(rng, 2, 5, 0, hq, hkv, d, [4, 4], 5, packed=True, rotary=True))
    check_gqa(model, gqa_feed(rng, 2, 1, 5, hq, hkv, d, [5, 5], 6, packed=True, rotary=True))


def test_gqa_local_window():
    hq, hkv, d = 4, 1, 16
    rng = np.random.default_rng(3)
    model = gqa_model(hq, hkv, d, rotary=True, window=3)
    check_gqa(model, gqa_feed(rng, 2, 8, 0, hq, hkv, d, [7, 7], 8, rotary=True))
    check_gqa(model, gqa_feed(rng, 2, 1, 8, hq, hkv, d, [8, 8], 9, rotary=True))
    check_gqa(model, gqa_feed(rng, 1, 3, 8, hq, hkv, d, [10], 11, rotary=True))


@pytest.mark.skipif(not has_f16(), reason="needs shader-f16")
@pytest.mark.parametrize("hq,hkv", HEADS, ids=["mqa", "gqa"])
def test_gqa_fp16(hq, hkv):
    d = 16
    rng = np.random.default_rng(13)
    model = gqa_model(hq, hkv, d, rotary=True, window=4)
    check_gqa(model, gqa_feed(rng, 2, 6, 0, hq, hkv, d, [5, 3], 6, rotary=True), valid=[6, 4], fp16=True)
    check_gqa(model, gqa_feed(rng, 2, 1, 7, hq, hkv, d, [7, 5], 8, rotary=True), fp16=True)


def test_gqa_refuses_smooth_softmax():
    model = gqa_model(4, 2, 16, smooth_softmax=1)
    feed = gqa_feed(np.random.default_rng(0), 1, 2, 0, 4, 2, 16, [1], 2)
    with pytest.raises(wgnn.Error, match="GroupQueryAttention.*smooth_softmax 1"):
        wgnn.InferenceSession(model).run(None, feed)


@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
def test_layer_norms(fp16):
    if fp16 and not has_f16():
        pytest.skip("needs shader-f16")
    h = 32
    rng = np.random.default_rng(1)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    nodes = [
        helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y0", "iv0"], axis=-1, epsilon=1e-6),
        helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "g", "bias"], ["y1", "", "iv1", "sum1"],
                         domain="com.microsoft", epsilon=1e-6),
        helper.make_node("SkipLayerNormalization", ["x", "skip", "g", "beta", "bias"], ["y2", "mean2", "iv2", "sum2"],
                         domain="com.microsoft", epsilon=1e-5),
        helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "g"], ["y3"], domain="com.microsoft"),
    ]
    outs = ["y0", "iv0", "y1", "iv1", "sum1", "y2", "mean2", "iv2", "sum2", "y3"]
    model = make(nodes, [vi("x", [2, "S", h]), vi("skip", [2, "S", h])], [vi(o, None) for o in outs],
                 inits=[helper.make_tensor(n, TensorProto.FLOAT, [h], f(h)) for n in ("g", "beta", "bias")])
    ours, ref = wgnn_and_ort(model, {"x": f(2, 5, h), "skip": f(2, 5, h)}, fp16)
    tol = 2e-2 if fp16 else 1e-5
    for name, a, r in zip(outs, ours, ref):
        assert a.shape == r.shape, name
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("layout", ["3d", "4d", "offset", "partial"])
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(layout, interleaved):
    b, s, h, d = 2, 5, 3, 16
    rng = np.random.default_rng(2)
    cos, sin = rotary_caches(d)
    attrs = dict(interleaved=interleaved)
    xshape, pshape = [b, s, h * d], [b, s]
    if layout == "4d":
        xshape = [b, h, s, d]
    if layout == "offset":
        pshape = [1]
    if layout == "partial":
        attrs.update(num_heads=h, rotary_embedding_dim=8)
        cos, sin = cos[:, :4].copy(), sin[:, :4].copy()
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain="com.microsoft", **attrs)
    model = make([node], [vi("x", xshape), vi("pos", pshape, TensorProto.INT64), vi("cos", list(cos.shape)),
                          vi("sin", list(sin.shape))], [vi("y", None)])
    pos = rng.integers(0, MAXPOS - s, pshape).astype(np.int64)
    ours, ref = wgnn_and_ort(model, {"x": rng.standard_normal(xshape).astype(np.float32), "pos": pos, "cos": cos, "sin": sin})
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5, atol=1e-5)


def decoder_layer_model(h, hq, hkv, d):
    """SimplifiedLayerNorm -> q, k, v projections -> GroupQueryAttention with
    rotary -> output projection -> SkipSimplifiedLayerNorm (the residual)."""
    rng = np.random.default_rng(0)
    w = lambda n, *s: helper.make_tensor(n, TensorProto.FLOAT, list(s), (0.2 * rng.standard_normal(s)).astype(np.float32).ravel())
    cos, sin = rotary_caches(d)
    inits = [w("ln1", h), w("ln2", h), w("wq", h, hq * d), w("wk", h, hkv * d), w("wv", h, hkv * d), w("wo", hq * d, h),
             helper.make_tensor("cos", TensorProto.FLOAT, list(cos.shape), cos.ravel()),
             helper.make_tensor("sin", TensorProto.FLOAT, list(sin.shape), sin.ravel())]
    nodes = [
        helper.make_node("SimplifiedLayerNormalization", ["x", "ln1"], ["xn"], epsilon=1e-6),
        helper.make_node("MatMul", ["xn", "wq"], ["q"]),
        helper.make_node("MatMul", ["xn", "wk"], ["k"]),
        helper.make_node("MatMul", ["xn", "wv"], ["v"]),
        helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total_len", "cos", "sin"],
                         ["a", "present_k", "present_v"], domain="com.microsoft", num_heads=hq, kv_num_heads=hkv, do_rotary=1),
        helper.make_node("MatMul", ["a", "wo"], ["o"]),
        helper.make_node("SkipSimplifiedLayerNormalization", ["o", "x", "ln2"], ["y", "", "", "residual"],
                         domain="com.microsoft", epsilon=1e-6),
    ]
    inputs = [vi("x", ["B", "S", h]), vi("past_k", ["B", hkv, "P", d]), vi("past_v", ["B", hkv, "P", d]),
              vi("seqlens_k", ["B"], TensorProto.INT32), vi("total_len", [], TensorProto.INT32)]
    outs = [vi("y", None), vi("residual", None), vi("present_k", None), vi("present_v", None)]
    return make(nodes, inputs, outs, inits)


@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
def test_decoder_layer_composes(fp16):
    """A prompt, then two decoding steps feeding each step's present back as
    the next past, both runtimes from the same inputs."""
    if fp16 and not has_f16():
        pytest.skip("needs shader-f16")
    h, hq, hkv, d, b = 64, 4, 2, 16, 2
    model = decoder_layer_model(h, hq, hkv, d)
    o = wgnn.SessionOptions()
    o.fp16 = fp16
    ours_s = wgnn.InferenceSession(model, sess_options=o)
    ref_s = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(4)
    tol = 3e-2 if fp16 else 1e-4
    past = np.zeros((b, hkv, 0, d), np.float32)
    pk = pv = past
    total = 0
    for s in (5, 1, 1):
        total += s
        feed = {"x": rng.standard_normal((b, s, h)).astype(np.float32), "past_k": pk, "past_v": pv,
                "seqlens_k": np.full(b, total - 1, np.int32), "total_len": np.array(total, np.int32)}
        ours = ours_s.run(None, feed)
        ref = ref_s.run(None, feed)
        for a, r in zip(ours, ref):
            assert a.shape == r.shape
            np.testing.assert_allclose(a, r, rtol=tol, atol=tol)
        pk, pv = ref[2], ref[3]
