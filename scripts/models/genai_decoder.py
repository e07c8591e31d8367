"""A decoder in the layout that ONNX Runtime's generative-AI model builder
(onnxruntime-genai, builder.py) writes for Llama-like models, written
directly with onnx.helper with seeded random weights (no PyTorch):

  genai    decoder_with_past_model.onnx: input_ids int64 [batch, seq],
           attention_mask int64 [batch, total], past_key_values.N.key /
           .value float32 [batch, kv_heads, past, head] -> logits
           [batch, seq, vocab], present.N.key / .value; the prompt runs it
           with an empty cache (past 0). Inside, as the builder lays it out:
           seqlens_k = ReduceSum(attention_mask, axis 1) - 1 as int32 and
           total_sequence_length = Shape(attention_mask)[1] as int32 (a
           Shape / Gather / Cast chain); the embedding a Gather; per layer
           SimplifiedLayerNormalization (the first layer) or
           SkipSimplifiedLayerNormalization (later ones, which carry the
           residual sum), q / k / v / o and the MLP's gate / up / down as
           com.microsoft MatMulNBits (4-bit weights in blocks of 32 with
           float32 scales; symmetric without zero points in even layers,
           asymmetric with packed zero points in odd ones),
           com.microsoft GroupQueryAttention with do_rotary 1 and
           cos_cache / sin_cache initializers, SwiGLU (x * Sigmoid(x) of the
           gate, times up); a last SkipSimplifiedLayerNormalization and the
           lm_head a float MatMul.

The float weights are drawn from one seed and quantized here (round to
nearest per block); MatMulNBits has no accuracy_level, so ONNX Runtime's CPU
computes in float32. `--size mini` (vocab 211, hidden 64, 4 query heads of
16, 2 key/value heads, 2 layers, ffn 128) is small enough for a CPU Vulkan
driver (CI); `--size small` has GPT-2-small's width and depth (vocab
32,000, hidden 768, 12 query heads, 4 key/value heads, 12 layers, ffn 2,048).

    python3 genai_decoder.py --out DIR   # writes DIR/genai/decoder_with_past_model.onnx
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SIZES = {
    "mini": dict(vocab=211, d=64, heads=4, kv_heads=2, layers=2, ffn=128, positions=256, block=32),
    # GPT-2-small's width and depth, as the Llama-style decoder of
    # decoders.py (--size full), for the GPU machine's measurements.
    "small": dict(vocab=32000, d=768, heads=12, kv_heads=4, layers=12, ffn=2048, positions=2048, block=32),
}


def quantize_4bit(w, block, zero_points, name):
    """w [K, N] float (y = x @ w) -> MatMulNBits' B [N, k_blocks, block / 2]
    uint8 (two values a byte, the low nibble first), scales [N * k_blocks]
    float32 and, with zero_points, zero points [N * ceil(k_blocks / 2)]
    uint8 packed the same way. Returns the initializers and the dequantized
    [K, N] weight (what both runtimes compute with)."""
    K, N = w.shape
    kb = (K + block - 1) // block
    wt = np.zeros((N, kb * block), np.float32)
    wt[:, :K] = w.T
    blocks = wt.reshape(N, kb, block)
    if zero_points:
        lo = np.minimum(blocks.min(axis=2), 0.0)
        hi = np.maximum(blocks.max(axis=2), 0.0)
        scale = ((hi - lo) / 15.0).astype(np.float32)
        scale[scale == 0] = 1.0
        zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    else:
        scale = (np.abs(blocks).max(axis=2) / 7.0).astype(np.float32)
        scale[scale == 0] = 1.0
        zp = np.full((N, kb), 8, np.uint8)
    q = np.clip(np.round(blocks / scale[:, :, None]) + zp[:, :, None], 0, 15).astype(np.uint8)
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)  # [N, kb, block / 2]
    deq = ((q.astype(np.float32) - zp[:, :, None]) * scale[:, :, None]).reshape(N, kb * block)[:, :K].T
    inits = [numpy_helper.from_array(packed, name + ".qweight"),
             numpy_helper.from_array(scale.reshape(-1), name + ".scales")]
    if zero_points:
        zpad = np.full((N, kb + kb % 2), 8, np.uint8)
        zpad[:, :kb] = zp
        zpacked = (zpad[:, 0::2] | (zpad[:, 1::2] << 4)).astype(np.uint8)
        inits.append(numpy_helper.from_array(zpacked.reshape(-1), name + ".qzeros"))
    return inits, np.ascontiguousarray(deq)


def build(size="mini", seed=0):
    cfg = SIZES[size]
    V, d, H, Hkv, L, F, block = (cfg[k] for k in ("vocab", "d", "heads", "kv_heads", "layers", "ffn", "block"))
    D = d // H
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, outs, name, domain="", **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=name, domain=domain or None, **attrs))
        return outs[0]

    def norm_weight(name):
        return const(name, (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32))

    def nbits(x, k, n, name, zero_points):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        qi, _ = quantize_4bit(w, block, zero_points, name)
        inits.extend(qi)
        return node("MatMulNBits", [x] + [t.name for t in qi], [name + "/output_0"], name, "com.microsoft",
                    K=k, N=n, bits=4, block_size=block)

    # seqlens_k and total_sequence_length from the attention mask.
    node("ReduceSum", ["attention_mask", const("/model/attn_mask_reformat/axes", np.array([1], np.int64))],
         ["/model/attn_mask_reformat/ReduceSum/output_0"], "/model/attn_mask_reformat/ReduceSum", keepdims=0)
    node("Sub", ["/model/attn_mask_reformat/ReduceSum/output_0", const("/model/constants/one", np.array(1, np.int64))],
         ["/model/attn_mask_reformat/Sub/output_0"], "/model/attn_mask_reformat/Sub")
    seqlens_k = node("Cast", ["/model/attn_mask_reformat/Sub/output_0"], ["/model/attn_mask_reformat/seqlens_k"],
                     "/model/attn_mask_reformat/Cast_seqlens", to=TensorProto.INT32)
    node("Shape", ["attention_mask"], ["/model/attn_mask_reformat/Shape/output_0"], "/model/attn_mask_reformat/Shape")
    node("Gather", ["/model/attn_mask_reformat/Shape/output_0", const("/model/constants/one_index", np.array(1, np.int64))],
         ["/model/attn_mask_reformat/Gather/output_0"], "/model/attn_mask_reformat/Gather", axis=0)
    total_len = node("Cast", ["/model/attn_mask_reformat/Gather/output_0"],
                     ["/model/attn_mask_reformat/total_seq_len"], "/model/attn_mask_reformat/Cast_total", to=TensorProto.INT32)

    # Rotary caches [positions, head / 2].
    inv = 1.0 / (10000.0 ** (np.arange(0, D, 2, dtype=np.float64) / D))
    ang = np.outer(np.arange(cfg["positions"], dtype=np.float64), inv)
    cos = const("cos_cache", np.cos(ang).astype(np.float32))
    sin = const("sin_cache", np.sin(ang).astype(np.float32))

    embed = const("model.embed_tokens.weight", rng.standard_normal((V, d)).astype(np.float32))
    x = node("Gather", [embed, "input_ids"], ["/model/embed_tokens/Gather/output_0"], "/model/embed_tokens/Gather")
    residual = None
    for i in range(L):
        p = f"/model/layers.{i}"
        zps = i % 2 == 1
        w_in = norm_weight(f"model.layers.{i}.input_layernorm.weight")
        if residual is None:
            h = node("SimplifiedLayerNormalization", [x, w_in], [f"{p}/input_layernorm/output_0"],
                     f"{p}/input_layernorm/LayerNorm", axis=-1, epsilon=1e-6, stash_type=1)
            residual = x
        else:
            h = node("SkipSimplifiedLayerNormalization", [x, residual, w_in],
                     [f"{p}/input_layernorm/output_0", "", "", f"{p}/input_layernorm/output_3"],
                     f"{p}/input_layernorm/SkipLayerNorm", "com.microsoft", epsilon=1e-6)
            residual = f"{p}/input_layernorm/output_3"
        q = nbits(h, d, H * D, f"{p}/attn/q_proj/MatMul", zps)
        k = nbits(h, d, Hkv * D, f"{p}/attn/k_proj/MatMul", zps)
        v = nbits(h, d, Hkv * D, f"{p}/attn/v_proj/MatMul", zps)
        a = node("GroupQueryAttention",
                 [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k, total_len, cos, sin],
                 [f"{p}/attn/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
                 f"{p}/attn/GroupQueryAttention", "com.microsoft", num_heads=H, kv_num_heads=Hkv,
                 scale=float(1.0 / np.sqrt(D)), local_window_size=-1, do_rotary=1, rotary_interleaved=0,
                 softcap=0.0)
        o = nbits(a, H * D, d, f"{p}/attn/o_proj/MatMul", zps)
        w_post = norm_weight(f"model.layers.{i}.post_attention_layernorm.weight")
        h = node("SkipSimplifiedLayerNormalization", [o, residual, w_post],
                 [f"{p}/post_attention_layernorm/output_0", "", "", f"{p}/post_attention_layernorm/output_3"],
                 f"{p}/post_attention_layernorm/SkipLayerNorm", "com.microsoft", epsilon=1e-6)
        residual = f"{p}/post_attention_layernorm/output_3"
        gate = nbits(h, d, F, f"{p}/mlp/gate_proj/MatMul", zps)
        up = nbits(h, d, F, f"{p}/mlp/up_proj/MatMul", zps)
        sig = node("Sigmoid", [gate], [f"{p}/mlp/act_fn/Sigmoid/output_0"], f"{p}/mlp/act_fn/Sigmoid")
        act = node("Mul", [gate, sig], [f"{p}/mlp/act_fn/Mul/output_0"], f"{p}/mlp/act_fn/Mul")
        m = node("Mul", [act, up], [f"{p}/mlp/Mul/output_0"], f"{p}/mlp/Mul")
        x = nbits(m, F, d, f"{p}/mlp/down_proj/MatMul", zps)
    w_final = norm_weight("model.norm.weight")
    h = node("SkipSimplifiedLayerNormalization", [x, residual, w_final], ["/model/norm/output_0"],
             "/model/norm/SkipLayerNorm", "com.microsoft", epsilon=1e-6)
    lm = const("lm_head.weight", (rng.standard_normal((d, V)) / np.sqrt(d)).astype(np.float32))
    node("MatMul", [h, lm], ["logits"], "/lm_head/MatMul")

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", V])]
    for i in range(L):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", TensorProto.FLOAT,
                                                        ["batch_size", Hkv, "past_sequence_length", D]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kv}", TensorProto.FLOAT,
                                                         ["batch_size", Hkv, "total_sequence_length", D]))
    graph = helper.make_graph(nodes, "genai_decoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="genai_decoder.py")
    model.ir_version = 8
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="mini", choices=sorted(SIZES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    folder = os.path.join(a.out, "genai")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "decoder_with_past_model.onnx")
    onnx.save(build(a.size, a.seed), path)
    print(path)


if __name__ == "__main__":
    main()
