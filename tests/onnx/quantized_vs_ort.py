"""Quantized ONNX models built with onnx.helper, run by `wgnn run` and by
ONNX Runtime's CPU provider on the same .npy inputs
(tests/tools/ort_reference.js). Integer outputs (uint8, int8, int32) must be
equal, and so must the float outputs of the integer models (TOL below;
tests/tools/closeness.py).

- dq_cnn: a uint8 dynamically quantized CNN, the form ONNX Runtime's
  quantize_dynamic gives a Conv: DynamicQuantizeLinear of the float input,
  ConvInteger with uint8 weights, Cast, Mul by the two scales, bias, Relu;
  two layers (the second with stride 2 and asymmetric pads), then a
  DynamicQuantizeLinear + MatMulInteger head. (ONNX Runtime's CPU
  ConvInteger takes a per-tensor weight zero point only; per-channel ones
  are checked against the C++ reference in tests/ops/quantized_test.)
- blocked: opset 21's block form of QuantizeLinear and DequantizeLinear
  (blocks of 4 along a row with a last block of 2; int8 weights in blocks
  of 3), and constant weights dequantized per axis and per tensor (folded
  on the host).
- qlinear: QuantizeLinear per axis, QLinearConv with an int32 bias and
  per-channel int8 weights, QLinearMatMul (uint8 x int8, batched), and
  DequantizeLinear back to float.
- int8_arith: Add, Sub, Mul, Div, Mod and Max on uint8 and int8 over
  their whole range (wrapping around as ONNX Runtime does).
- qdq_matmul: the QDQ form of a quantized MatMul (quantize_static): Q / DQ
  of the activation, DequantizeLinear of int8 (per column) and uint8 (per
  tensor) weights read by MatMuls, which wgnn fuses into one kernel each.
- nbits_block: a 4-bit MatMulNBits transformer block (com.microsoft, the
  form transformers.js ships): LayerNormalization, q/k/v/o projections,
  4-head attention, a GELU MLP, residuals; accuracy_level absent (0: ONNX
  Runtime's float32 products). The weights are quantized here
  with numpy in MatMulNBits' layout (nbits_quantize), with and without
  zero points, blocks of 16 to 64, one K not a multiple of its block.

UNSUPPORTED lists models with variants wgnn refuses: `wgnn run` must fail
saying what is missing.

usage: quantized_vs_ort.py WGNN ORT_MODULE_DIR WORKDIR
Prints one line per model and a last line "N passed, N failed".
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WGNN, ORT_DIR, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import closeness  # noqa: E402

rng = np.random.default_rng(23)
F, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32


def model(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7 if opset < 21 else 10
    if opset <= onnx.defs.onnx_opset_version():  # Debian's onnx 1.12 checks up to opset 17
        onnx.checker.check_model(m)
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, a):
    return numpy_helper.from_array(a, name)


MODELS = []


def dq_conv(i, x, w_shape, per_channel, pads, strides):
    """DynamicQuantizeLinear + ConvInteger + rescale + bias + Relu, as
    quantize_dynamic writes it; returns nodes, initializers and the output."""
    co = w_shape[0]
    wf = rng.normal(0, 0.3, w_shape).astype(np.float32)
    if per_channel:
        lo, hi = np.minimum(wf.reshape(co, -1).min(1), 0), np.maximum(wf.reshape(co, -1).max(1), 0)
        ws = ((hi - lo) / 255).astype(np.float32)
        wz = np.clip(np.round(-lo / ws), 0, 255).astype(np.uint8)
        wq = np.clip(np.round(wf / ws[:, None, None, None]) + wz[:, None, None, None], 0, 255).astype(np.uint8)
        ws_b = ws.reshape(1, co, 1, 1)
    else:
        lo, hi = min(wf.min(), 0), max(wf.max(), 0)
        ws = np.float32((hi - lo) / 255)
        wz = np.uint8(np.clip(np.round(-lo / ws), 0, 255))
        wq = np.clip(np.round(wf / ws) + wz, 0, 255).astype(np.uint8)
        ws_b = np.array(ws, np.float32)
    p = f"l{i}_"
    nodes = [
        helper.make_node("DynamicQuantizeLinear", [x], [p + "xq", p + "xs", p + "xz"]),
        helper.make_node("ConvInteger", [p + "xq", p + "wq", p + "xz", p + "wz"], [p + "acc"], pads=pads, strides=strides),
        helper.make_node("Cast", [p + "acc"], [p + "accf"], to=F),
        helper.make_node("Mul", [p + "xs", p + "ws"], [p + "s"]),
        helper.make_node("Mul", [p + "accf", p + "s"], [p + "y"]),
        helper.make_node("Add", [p + "y", p + "b"], [p + "yb"]),
        helper.make_node("Relu", [p + "yb"], [p + "out"]),
    ]
    inits = [init(p + "wq", wq), init(p + "wz", np.asarray(wz)), init(p + "ws", ws_b),
             init(p + "b", rng.normal(0, 0.1, (1, co, 1, 1)).astype(np.float32))]
    return nodes, inits, p + "out"


n1, i1, o1 = dq_conv(1, "x", (8, 3, 3, 3), False, [1, 1, 1, 1], [1, 1])
n2, i2, o2 = dq_conv(2, o1, (6, 8, 3, 3), False, [0, 1, 1, 0], [2, 2])
head_w = rng.integers(0, 256, (6 * 8 * 8, 10), dtype=np.uint8)
head = [
    helper.make_node("Reshape", [o2, "flat_shape"], ["flat"]),
    helper.make_node("DynamicQuantizeLinear", ["flat"], ["hq", "hs", "hz"]),
    helper.make_node("MatMulInteger", ["hq", "hw", "hz", "hwz"], ["logits_int"]),
]
MODELS.append((model("dq_cnn", n1 + n2 + head, [vi("x", F, [2, 3, 16, 16])],
                     [vi(o2, F, [2, 6, 8, 8]), vi("l1_xq", U8, [2, 3, 16, 16]), vi("l2_acc", I32, [2, 6, 8, 8]),
                      vi("logits_int", I32, [2, 10])],
                     i1 + i2 + [init("flat_shape", np.array([2, -1], np.int64)), init("hw", head_w),
                                init("hwz", np.array(128, np.uint8))]),
               {"x": rng.normal(0, 1, (2, 3, 16, 16)).astype(np.float32)}))

# QLinear model: QuantizeLinear per axis, QLinearConv, QLinearMatMul, DequantizeLinear.
cw = rng.integers(-127, 128, (4, 3, 3, 3), dtype=np.int8)
MODELS.append((model("qlinear", [
    helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
    helper.make_node("QuantizeLinear", ["x", "xs_axis", "xz_axis"], ["xq_axis"], axis=1),
    helper.make_node("QLinearConv", ["xq", "xs", "xz", "cw", "cws", "cwz", "ys", "yz", "cb"], ["cq"], pads=[1, 1, 1, 1]),
    helper.make_node("Reshape", ["cq", "mm_shape"], ["cq3"]),
    helper.make_node("QLinearMatMul", ["cq3", "ys", "yz", "mw", "mws", "mwz", "ms", "mz"], ["mq"]),
    helper.make_node("DequantizeLinear", ["mq", "ms", "mz"], ["y"]),
    helper.make_node("DequantizeLinear", ["xq_axis", "xs_axis", "xz_axis"], ["x_back"], axis=1),
], [vi("x", F, [2, 3, 8, 8])], [vi("xq", U8, [2, 3, 8, 8]), vi("xq_axis", I8, [2, 3, 8, 8]),
                                 vi("cq", U8, [2, 4, 8, 8]), vi("mq", U8, [2, 16, 12]), vi("y", F, [2, 16, 12]),
                                 vi("x_back", F, [2, 3, 8, 8])], [
    init("xs", np.array(0.02, np.float32)), init("xz", np.array(128, np.uint8)),
    init("xs_axis", np.array([0.01, 0.02, 0.03], np.float32)), init("xz_axis", np.array([-3, 0, 5], np.int8)),
    init("cw", cw), init("cws", rng.uniform(0.002, 0.01, 4).astype(np.float32)),
    init("cwz", np.zeros(4, np.int8)), init("cb", rng.integers(-2000, 2000, 4).astype(np.int32)),
    init("ys", np.array(0.05, np.float32)), init("yz", np.array(100, np.uint8)),
    init("mm_shape", np.array([2, 16, 16], np.int64)),
    init("mw", rng.integers(-127, 128, (16, 12), dtype=np.int8)),
    init("mws", np.array(0.01, np.float32)), init("mwz", np.array(0, np.int8)),
    init("ms", np.array(0.1, np.float32)), init("mz", np.array(120, np.uint8)),
]), {"x": rng.normal(0, 1, (2, 3, 8, 8)).astype(np.float32)}))

# Opset 21 blocked quantization: x [4, 10] in blocks of 4 along axis 1
# (scales [4, 3]), and int8 weights [6, 8] dequantized in blocks of 3 along
# axis 0 (scales [2, 8]); uint8 weights dequantized per axis and per tensor
# (a [1] scale). The constant weights are dequantized on the host.
MODELS.append((model("blocked", [
    helper.make_node("QuantizeLinear", ["x", "bs", "bz"], ["xq"], axis=1, block_size=4),
    helper.make_node("DequantizeLinear", ["xq", "bs", "bz"], ["xd"], axis=1, block_size=4),
    helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0, block_size=3),
    helper.make_node("DequantizeLinear", ["w2", "w2s", "w2z"], ["wd_axis"], axis=1),
    helper.make_node("DequantizeLinear", ["w2", "w2s1", "w2z1"], ["wd_tensor"]),
], [vi("x", F, [4, 10])], [vi("xq", I8, [4, 10]), vi("xd", F, [4, 10]), vi("wd", F, [6, 8]),
                           vi("wd_axis", F, [5, 7]), vi("wd_tensor", F, [5, 7])], [
    init("w2", rng.integers(0, 256, (5, 7), dtype=np.uint8)),
    init("w2s", rng.uniform(0.01, 0.1, 7).astype(np.float32)),
    init("w2z", rng.integers(0, 256, 7, dtype=np.uint8)),
    init("w2s1", np.array([0.037], np.float32)), init("w2z1", np.array([131], np.uint8)),
    init("bs", rng.uniform(0.005, 0.03, (4, 3)).astype(np.float32)),
    init("bz", rng.integers(-10, 10, (4, 3)).astype(np.int8)),
    init("w", rng.integers(-128, 128, (6, 8)).astype(np.int8)),
    init("ws", rng.uniform(0.01, 0.1, (2, 8)).astype(np.float32)),
    init("wz", rng.integers(-5, 5, (2, 8)).astype(np.int8)),
], opset=21), {"x": rng.normal(0, 1, (4, 10)).astype(np.float32)}))


def nbits_quantize(w, block, zero_points):
    """w [N, K] float32 -> MatMulNBits' B [N, k_blocks, block / 2] uint8,
    scales [N * k_blocks] float32 and (zero_points) packed uint8 zero points
    [N * ceil(k_blocks / 2)], as ONNX Runtime's contrib op defines them:
    element k of a row in byte k / 2, the low nibble for even k; a row's
    zero points packed the same way; without zero points every one is 8.
    K is padded with zeros to whole blocks."""
    n, k = w.shape
    kb = -(-k // block)
    wp = np.zeros((n, kb * block), np.float32)
    wp[:, :k] = w
    blocks = wp.reshape(n, kb, block)
    if zero_points:
        lo = np.minimum(blocks.min(2), 0)
        hi = np.maximum(blocks.max(2), 0)
        scale = ((hi - lo) / 15).astype(np.float32)
        scale[scale == 0] = 1
        zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    else:
        scale = (np.abs(blocks).max(2) / 7).astype(np.float32)
        scale[scale == 0] = 1
        zp = np.full((n, kb), 8, np.uint8)
    q = np.clip(np.round(blocks / scale[:, :, None]) + zp[:, :, None], 0, 15).astype(np.uint8)
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    zp_row = np.zeros((n, -(-kb // 2) * 2), np.uint8)
    zp_row[:, :kb] = zp
    zpacked = (zp_row[:, 0::2] | (zp_row[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    return packed, scale.reshape(-1), zpacked if zero_points else None


def nbits_linear(name, x, k, n, block, zero_points, bias=False):
    """MatMulNBits of x [.., k] with a random [n, k] weight; returns nodes,
    initializers, the output name."""
    b, s, z = nbits_quantize(rng.normal(0, 0.2, (n, k)).astype(np.float32), block, zero_points)
    inits = [init(name + "_b", b), init(name + "_s", s)]
    ins = [x, name + "_b", name + "_s"]
    if zero_points:
        inits.append(init(name + "_z", z))
        ins.append(name + "_z")
    if bias:
        ins += [""] * (5 - len(ins)) + [name + "_bias"]
        inits.append(init(name + "_bias", rng.normal(0, 0.1, n).astype(np.float32)))
    node = helper.make_node("MatMulNBits", ins, [name], domain="com.microsoft", K=k, N=n, bits=4, block_size=block)
    return [node], inits, name


SEQ, HID, HEADS, FF = 8, 64, 4, 80
blk_nodes, blk_inits = [], []


def add(part):
    nodes, inits, out = part
    blk_nodes.extend(nodes)
    blk_inits.extend(inits)
    return out


blk_inits += [init("ln1_g", rng.uniform(0.5, 1.5, HID).astype(np.float32)), init("ln1_b", rng.normal(0, 0.1, HID).astype(np.float32)),
              init("ln2_g", rng.uniform(0.5, 1.5, HID).astype(np.float32)), init("ln2_b", rng.normal(0, 0.1, HID).astype(np.float32)),
              init("heads_shape", np.array([1, SEQ, HEADS, HID // HEADS], np.int64)),
              init("hid_shape", np.array([1, SEQ, HID], np.int64)),
              init("att_scale", np.array(1 / np.sqrt(HID // HEADS), np.float32)),
              init("sqrt2", np.array(np.sqrt(2), np.float32)), init("one", np.array(1, np.float32)),
              init("half", np.array(0.5, np.float32))]
blk_nodes.append(helper.make_node("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["ln1"], axis=-1, epsilon=1e-5))
q = add(nbits_linear("q", "ln1", HID, HID, 64, True))     # one block a row, zero points
k = add(nbits_linear("k", "ln1", HID, HID, 16, False))    # four blocks, zero points 8
v = add(nbits_linear("v", "ln1", HID, HID, 32, True, bias=True))
blk_nodes += [
    helper.make_node("Reshape", [q, "heads_shape"], ["q4"]), helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
    helper.make_node("Reshape", [k, "heads_shape"], ["k4"]), helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
    helper.make_node("Reshape", [v, "heads_shape"], ["v4"]), helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
    helper.make_node("MatMul", ["qh", "kt"], ["scores"]), helper.make_node("Mul", ["scores", "att_scale"], ["scaled"]),
    helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1), helper.make_node("MatMul", ["probs", "vh"], ["ctx"]),
    helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]), helper.make_node("Reshape", ["ctx_t", "hid_shape"], ["ctx_h"]),
]
o = add(nbits_linear("o", "ctx_h", HID, HID, 16, True))
blk_nodes += [helper.make_node("Add", ["x", o], ["res1"]),
              helper.make_node("LayerNormalization", ["res1", "ln2_g", "ln2_b"], ["ln2"], axis=-1, epsilon=1e-5)]
up = add(nbits_linear("up", "ln2", HID, FF, 32, False, bias=True))
blk_nodes += [helper.make_node("Div", [up, "sqrt2"], ["g_div"]), helper.make_node("Erf", ["g_div"], ["g_erf"]),
              helper.make_node("Add", ["g_erf", "one"], ["g_add"]), helper.make_node("Mul", [up, "g_add"], ["g_mul"]),
              helper.make_node("Mul", ["g_mul", "half"], ["gelu"])]
down = add(nbits_linear("down", "gelu", FF, HID, 32, True))  # K 80: three blocks, the last half padding
blk_nodes.append(helper.make_node("Add", ["res1", down], ["y"]))
nbits_graph = helper.make_graph(blk_nodes, "nbits_block", [vi("x", F, [1, SEQ, HID])], [vi("y", F, [1, SEQ, HID]), vi("q", F, [1, SEQ, HID])],
                                initializer=blk_inits)
nbits_model = helper.make_model(nbits_graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
nbits_model.ir_version = 8
onnx.checker.check_model(nbits_model)
MODELS.append((nbits_model, {"x": rng.normal(0, 1, (1, SEQ, HID)).astype(np.float32)}))

# uint8 / int8 arithmetic over the whole range: sums, differences and
# products wrap around to 8 bits as ONNX Runtime's do; Div truncates, Mod
# (fmod 0) takes the divisor's sign; no divisor is 0.
def nonzero(a):
    a[a == 0] = 1
    return a


arith_nodes, arith_outs = [], []
for t, elem in (("u8", U8), ("i8", I8)):
    for op in ("Add", "Sub", "Mul", "Div", "Mod", "Max"):
        out = f"{op.lower()}_{t}"
        arith_nodes.append(helper.make_node(op, [f"a_{t}", f"b_{t}"], [out]))
        arith_outs.append(vi(out, elem, [4, 8]))
arith_nodes.append(helper.make_node("Add", ["a_u8", "k_u8"], ["addk_u8"]))  # a broadcast constant
arith_outs.append(vi("addk_u8", U8, [4, 8]))
MODELS.append((model("int8_arith", arith_nodes, [vi("a_u8", U8, [4, 8]), vi("b_u8", U8, [4, 8]), vi("a_i8", I8, [4, 8]),
                                                 vi("b_i8", I8, [4, 8])], arith_outs,
                     [init("k_u8", np.array([200], np.uint8))], opset=14),
               {"a_u8": rng.integers(0, 256, (4, 8), dtype=np.uint8), "b_u8": nonzero(rng.integers(0, 256, (4, 8), dtype=np.uint8)),
                "a_i8": rng.integers(-128, 128, (4, 8), dtype=np.int8), "b_i8": nonzero(rng.integers(-128, 128, (4, 8), dtype=np.int8))}))

# The QDQ form quantize_static writes for a MatMul: the activation through
# QuantizeLinear / DequantizeLinear, int8 weights [K, N] per column (and
# uint8 per tensor) through DequantizeLinear read by the MatMul alone (one
# fused kernel reading the 8-bit weights), a bias Add.
MODELS.append((model("qdq_matmul", [
    helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
    helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
    helper.make_node("DequantizeLinear", ["w1", "w1s", "w1z"], ["w1d"], axis=1),
    helper.make_node("MatMul", ["xd", "w1d"], ["h"]),
    helper.make_node("Add", ["h", "b1"], ["hb"]),
    helper.make_node("DequantizeLinear", ["w2", "w2s", "w2z"], ["w2d"]),
    helper.make_node("MatMul", ["hb", "w2d"], ["y"]),
], [vi("x", F, [2, 6, 40])], [vi("y", F, [2, 6, 9]), vi("hb", F, [2, 6, 30])], [
    init("xs", np.array(0.02, np.float32)), init("xz", np.array(3, np.uint8)),
    init("w1", rng.integers(-128, 128, (40, 30), dtype=np.int8)),
    init("w1s", rng.uniform(0.001, 0.01, 30).astype(np.float32)), init("w1z", np.zeros(30, np.int8)),
    init("b1", rng.normal(0, 0.1, 30).astype(np.float32)),
    init("w2", rng.integers(0, 256, (30, 9), dtype=np.uint8)),
    init("w2s", np.array(0.004, np.float32)), init("w2z", np.array(128, np.uint8)),
]), {"x": rng.normal(0, 1, (2, 6, 40)).astype(np.float32)}))

# Variants wgnn refuses: `wgnn run` must fail with Unsupported naming the
# node and what is missing (never a wrong number).
UNSUPPORTED = [
    (model("qlinear_matmul_y_per_column", [
        helper.make_node("QLinearMatMul", ["a", "s", "z", "b", "s", "z", "ys", "yz"], ["y"], name="qmm"),
    ], [vi("a", U8, [2, 3])], [vi("y", U8, [2, 4])], [
        init("b", rng.integers(0, 256, (3, 4), dtype=np.uint8)), init("s", np.array(0.1, np.float32)),
        init("z", np.array(3, np.uint8)), init("ys", np.full(4, 0.2, np.float32)), init("yz", np.zeros(4, np.uint8)),
    ], opset=10), {"a": rng.integers(0, 256, (2, 3), dtype=np.uint8)},
     "node 'qmm' (QLinearMatMul, opset 10): y_scale and y_zero_point must be one value each"),
    (model("conv_integer_x_zp_per_channel", [
        helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], name="ci"),
    ], [vi("x", U8, [1, 2, 4, 4])], [vi("y", I32, [1, 3, 2, 2])], [
        init("w", rng.integers(0, 256, (3, 2, 3, 3), dtype=np.uint8)), init("xz", np.array([1, 2], np.uint8)),
    ], opset=10), {"x": rng.integers(0, 256, (1, 2, 4, 4), dtype=np.uint8)},
     "node 'ci' (ConvInteger, opset 10): x_zero_point [2]: supported is one value (per tensor)"),
]
_b, _s, _ = nbits_quantize(rng.normal(0, 0.2, (4, 32)).astype(np.float32), 16, False)
_fz = helper.make_graph([helper.make_node("MatMulNBits", ["a", "b", "s", "z"], ["y"], name="mnb", domain="com.microsoft",
                                          K=32, N=4, bits=4, block_size=16)], "matmul_nbits_float_zero_points",
                        [vi("a", F, [2, 32])], [vi("y", F, [2, 4])],
                        [init("b", _b), init("s", _s), init("z", np.full(8, 8.0, np.float32))])
_fz = helper.make_model(_fz, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
_fz.ir_version = 8
UNSUPPORTED.append((_fz, {"a": rng.normal(0, 1, (2, 32)).astype(np.float32)},
                    "node 'mnb' (com.microsoft.MatMulNBits, opset 17): zero_points of dtype float32 (supported: uint8, packed 4-bit values)"))

# Every output must equal ORT's, floats included: dq_cnn's float output is
# the graph's own Cast / Mul / Add / Relu of exact integer sums (the same
# float32 operations in the same order), y and x_back are dequantized
# integers (one float32 multiply each). Measured exact on lavapipe.
# nbits_block is a float model: its products and softmax sum in another
# order than ONNX Runtime's, so it has a tolerance (measured on lavapipe:
# 6.0e-6 at most in y, 9.5e-7 in q); so is qdq_matmul (its products of
# dequantized values, 1.9e-6 at most).
TOL = {"dq_cnn": (0.0, 0.0), "qlinear": (0.0, 0.0), "blocked": (0.0, 0.0), "nbits_block": (2e-5, 1e-5),
       "int8_arith": (0.0, 0.0), "qdq_matmul": (1e-5, 1e-5)}

# ONNX Runtime's extended graph optimizations rewrite qdq_matmul's uint8
# per-tensor DequantizeLinear + MatMul into a kernel whose result is not the
# model's own float32 operations (measured: 4.8e-2 off them, while numpy,
# wgnn and ONNX Runtime's basic level agree within 1.2e-6):
# the reference runs at the basic level there.
ORT_OPTIMIZATION = {"qdq_matmul": "basic"}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


passed = failed = 0
os.environ["WGNN_ORT_MODULE"] = os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")
for m, feeds in MODELS:
    name = m.graph.name
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    specs = []
    for k, v in feeds.items():
        np.save(os.path.join(d, k + ".npy"), v)
        specs.append(f"{k}={os.path.join(d, k + '.npy')}")
    try:
        os.environ["WGNN_ORT_OPTIMIZATION"] = ORT_OPTIMIZATION.get(name, "all")
        run(["node", os.path.join(HERE, "..", "tools", "ort_reference.js"), path, os.path.join(d, "ort")] + specs)
        run([WGNN, "run", path, "--output-dir", os.path.join(d, "wgnn")] + sum([["--input", s] for s in specs], []))
        details = []
        for o in m.graph.output:
            want = np.load(os.path.join(d, "ort", o.name + ".npy"))
            got = np.load(os.path.join(d, "wgnn", o.name + ".npy"))
            r = closeness.check(got, want, *TOL[name])
            if not r.ok:
                raise RuntimeError(f"{o.name}: {r}")
            details.append(f"{o.name} {want.dtype}: {'exact' if r.max_abs == 0 else f'{r.max_abs:.1e}'}")
        print(f"PASS {name} ({'; '.join(details)})")
        passed += 1
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"FAIL {name}: {e}")
        failed += 1
for m, feeds, message in UNSUPPORTED:
    name = m.graph.name
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    args = []
    for k, v in feeds.items():
        np.save(os.path.join(d, k + ".npy"), v)
        args += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
    r = subprocess.run([WGNN, "run", path, "--output-dir", os.path.join(d, "wgnn")] + args,
                       capture_output=True, text=True)
    if r.returncode != 0 and message in r.stdout + r.stderr:
        print(f"PASS {name} (refused: {message})")
        passed += 1
    else:
        print(f"FAIL {name}: expected a failure saying {message!r}; exit {r.returncode}:\n{r.stdout}{r.stderr}")
        failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
