"""The transformer operators of ONNX opsets 23 and 24 (Attention,
RMSNormalization, RotaryEmbedding, TensorScatter) at a model's sizes,
against ONNX Runtime's CPU provider: the backend suite's cases are a few
elements wide; these run a decoder layer's shapes (64-wide heads, grouped
K/V heads, a KV cache), in float32 and in wgnn's float16 mode."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import wgnn
from conftest import has_f16, vi, wgnn_and_ort

B, HQ, HKV, D, MAXLEN = 2, 8, 2, 64, 96


def make(nodes, inputs, outputs, opset=24):
    g = helper.make_graph(nodes, "t", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    return m.SerializeToString()


def decoder_step_model():
    """A decoder layer's attention: RMSNorm'd 3-D Q, K, V with rotary
    positions, grouped K/V heads, a causal mask over a past cache, and the
    present cache out."""
    nodes = [
        helper.make_node("RMSNormalization", ["q", "qs"], ["qn"], axis=-1, epsilon=1e-6),
        helper.make_node("Reshape", ["qn", "q4s"], ["q4"]),
        helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("RotaryEmbedding", ["qt", "cos", "sin", "pos"], ["qr"]),
        helper.make_node("Attention", ["qr", "k", "v", "", "past_k", "past_v"], ["y", "present_k", "present_v"],
                         is_causal=1),
    ]
    inits = [helper.make_tensor("q4s", TensorProto.INT64, [4], [B, -1, HQ, D])]
    g = helper.make_graph(
        nodes, "t",
        [vi("q", [B, "L", HQ * D]), vi("qs", [HQ * D]), vi("cos", [MAXLEN, D // 2]), vi("sin", [MAXLEN, D // 2]),
         vi("pos", [B, "L"], TensorProto.INT64), vi("k", [B, HKV, "L", D]), vi("v", [B, HKV, "L", D]),
         vi("past_k", [B, HKV, "P", D]), vi("past_v", [B, HKV, "P", D])],
        [vi("y", None), vi("present_k", None), vi("present_v", None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)], ir_version=10).SerializeToString()


def decoder_feed(rng, past, length):
    theta = np.arange(MAXLEN)[:, None] / (10000.0 ** (np.arange(D // 2)[None, :] * 2.0 / D))
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    return {
        "q": f(B, length, HQ * D), "qs": (1 + 0.1 * f(HQ * D)), "cos": np.cos(theta).astype(np.float32),
        "sin": np.sin(theta).astype(np.float32),
        "pos": np.tile(np.arange(past, past + length, dtype=np.int64), (B, 1)),
        "k": f(B, HKV, length, D), "v": f(B, HKV, length, D), "past_k": f(B, HKV, past, D), "past_v": f(B, HKV, past, D),
    }


@pytest.mark.parametrize("past,length", [(0, 29), (37, 1), (40, 7)], ids=["prefill", "decode", "chunk"])
def test_decoder_attention_step_matches_onnxruntime(past, length):
    model = decoder_step_model()
    feed = decoder_feed(np.random.default_rng(past + length), past, length)
    ours, ref = wgnn_and_ort(model, feed)
    assert ours[0].shape == (B, HQ, length, D)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(ours[1], ref[1])
    np.testing.assert_array_equal(ours[2], ref[2])
    if has_f16():
        ours16, _ = wgnn_and_ort(model, feed, fp16=True)
        np.testing.assert_allclose(ours16[0], ref[0], rtol=2e-2, atol=2e-2)


def test_padded_batch_attention_with_a_bool_mask_matches_onnxruntime():
    """4-D multi-head attention over 300 keys, each batch row's padding
    masked (bool [B, 1, L, S]: ONNX Runtime wants the mask's L)."""
    S, L, H = 300, 16, 4
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Attention", ["q", "k", "v", "m"], ["y0"]),
             helper.make_node("Add", ["y0", "zero"], ["y"])]
    model = make(nodes, [vi("q", [B, H, L, D]), vi("k", [B, H, S, D]), vi("v", [B, H, S, D]),
                         vi("m", [B, 1, L, S], TensorProto.BOOL), vi("zero", [1])], [vi("y", None)], opset=23)
    keep = np.arange(S)[None, :] < np.array([[S], [171]])
    feed = {"q": rng.standard_normal((B, H, L, D)).astype(np.float32),
            "k": rng.standard_normal((B, H, S, D)).astype(np.float32),
            "v": rng.standard_normal((B, H, S, D)).astype(np.float32),
            "m": np.broadcast_to(keep[:, None, None, :], (B, 1, L, S)).copy(), "zero": np.zeros(1, np.float32)}
    ours, ref = wgnn_and_ort(model, feed)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-4, atol=1e-5)
    # Every key masked for the second batch: zeros (ONNX's rule), not NaN.
    feed["m"] = np.broadcast_to(np.stack([keep[0], np.zeros(S, bool)])[:, None, None, :], (B, 1, L, S)).copy()
    ours, _ = wgnn_and_ort(model, feed)
    assert np.all(ours[0][1] == 0) and np.all(np.isfinite(ours[0]))


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_cache_update_matches_onnxruntime(mode):
    rng = np.random.default_rng(7)
    model = make([helper.make_node("TensorScatter", ["cache", "upd", "wi"], ["out"], mode=mode)],
                 [vi("cache", [B, HKV, MAXLEN, D]), vi("upd", [B, HKV, 3, D]), vi("wi", [B], TensorProto.INT64)],
                 [vi("out", None)])
    feed = {"cache": rng.standard_normal((B, HKV, MAXLEN, D)).astype(np.float32),
            "upd": rng.standard_normal((B, HKV, 3, D)).astype(np.float32),
            "wi": np.array([5, MAXLEN - 3 if mode == "linear" else MAXLEN - 1], np.int64)}
    ours, ref = wgnn_and_ort(model, feed)
    np.testing.assert_array_equal(ours[0], ref[0])
    if mode == "linear":
        # A write past the cache's end is an error, not a silent drop.
        feed["wi"] = np.array([0, MAXLEN - 2], np.int64)
        with pytest.raises(wgnn.Error, match="out of range"):
            wgnn.InferenceSession(model).run(None, feed)
