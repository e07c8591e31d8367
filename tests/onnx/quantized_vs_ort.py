"""Quantized ONNX models built with onnx.helper, run by `wgnn run` and by
ONNX Runtime's CPU provider on the same .npy inputs
(tests/tools/ort_reference.js). Integer outputs (uint8, int8, int32) must be
equal, and so must the float outputs here (TOL below; tests/tools/closeness.py).

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

# Every output must equal ORT's, floats included: dq_cnn's float output is
# the graph's own Cast / Mul / Add / Relu of exact integer sums (the same
# float32 operations in the same order), y and x_back are dequantized
# integers (one float32 multiply each). Measured exact on lavapipe.
TOL = {"dq_cnn": (0.0, 0.0), "qlinear": (0.0, 0.0), "blocked": (0.0, 0.0)}


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
