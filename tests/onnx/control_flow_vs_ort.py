"""Control flow and recurrent layers: models built with onnx.helper, run by
`wgnn run --verbose` and by ONNX Runtime's CPU provider on the same .npy
inputs (tests/tools/ort_reference.js), outputs compared with
tests/tools/closeness.py at TOL below.

- vad_like: a voice-activity-detector shape (as Silero VAD's export): If
  nested four deep on a graph input (`sr == 16000`, then `sr > 8000`, ...),
  every branch reading outer-scope values, an LSTM with its state (h, c)
  given as graph inputs and returned, inside the innermost branch. Run at
  sr 16000 and sr 8000 (other branches, another LSTM); the branch is picked
  at plan time (the summary must say so, with no readback).
- data_if: an If whose condition is computed on the GPU (the sum of the
  input > 0), a Loop whose condition is too (doubling until a limit): run
  with inputs that take each branch; the summary must report the readbacks.
  A Clip whose min is computed on the GPU rides along.
- rnn_bidir: GRU (linear_before_reset 0 and 1), RNN and LSTM (peepholes,
  input_forget, clip), bidirectional and reverse, with
  sequence_lens given as a graph input, initial states, and activations
  with activation_alpha / activation_beta. (ONNX Runtime's CPU provider
  refuses layout 1; the conformance cases *_batchwise check it.)

usage: control_flow_vs_ort.py WGNN ORT_MODULE_DIR WORKDIR
Prints one line per case and a last line "N passed, N failed".
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
import onnx

WGNN, ORT_DIR, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import closeness  # noqa: E402

rng = np.random.default_rng(23)
F, I64, I32, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, a):
    return numpy_helper.from_array(a, name)


def const(name, a):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(a), name + "_v"))


def model(name, nodes, inputs, outputs, inits=(), opset=14):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def weights(prefix, gates, d, hidden, inp, peep=False):
    s = 0.4
    w = [init(prefix + "W", rng.normal(0, s, (d, gates * hidden, inp)).astype(np.float32)),
         init(prefix + "R", rng.normal(0, s, (d, gates * hidden, hidden)).astype(np.float32)),
         init(prefix + "B", rng.normal(0, 0.2, (d, 2 * gates * hidden)).astype(np.float32))]
    if peep:
        w.append(init(prefix + "P", rng.normal(0, 0.3, (d, 3 * hidden)).astype(np.float32)))
    return w


CASES = []  # (model, feeds, what the summary must say or None)
T_, BATCH, IN, HID = 5, 1, 16, 8

# ---- vad_like -----------------------------------------------------------
# x [1, 5*16] is framed into [5, 1, 16]; the LSTM sees it; y = Y_h, states out.
lstm_a = weights("a_", 4, 1, HID, IN)
lstm_b = weights("b_", 4, 1, HID, IN)


def lstm_branch(tag, p):
    return [
        helper.make_node("Reshape", ["x", "frames_shape"], [tag + "frames"]),
        helper.make_node("LSTM", [tag + "frames", p + "W", p + "R", p + "B", "", "h", "c"],
                         [tag + "Y", tag + "hn", tag + "cn"], hidden_size=HID),
        helper.make_node("Squeeze", [tag + "hn", "axis0"], [tag + "h2"]),
        helper.make_node("MatMul", [tag + "h2", "head"], [tag + "logit"]),
        helper.make_node("Sigmoid", [tag + "logit"], [tag + "prob"]),
        helper.make_node("Identity", [tag + "hn"], [tag + "h_out"]),
        helper.make_node("Identity", [tag + "cn"], [tag + "c_out"]),
    ]


outs3 = [vi("prob", F, [1, 1]), vi("h_out", F, [1, 1, HID]), vi("c_out", F, [1, 1, HID])]


def wrap(tag, nodes):
    return branch(tag, nodes + [helper.make_node("Identity", [tag + k], [tag + "o_" + k]) for k in ("prob", "h_out", "c_out")],
                  [vi(tag + "o_" + k, F, None) for k in ("prob", "h_out", "c_out")])


# Innermost: If(sr < 20000) -> LSTM a, else LSTM b (never taken here).
lvl3_then = wrap("l3t_", lstm_branch("l3t_", "a_"))
lvl3_else = wrap("l3e_", lstm_branch("l3e_", "b_"))
lvl2_then = wrap("l2t_", [helper.make_node("Less", ["sr", "sr_max"], ["l2t_cond"]),
                          helper.make_node("If", ["l2t_cond"], ["l2t_prob", "l2t_h_out", "l2t_c_out"],
                                           then_branch=lvl3_then, else_branch=lvl3_else)])
lvl1_then = wrap("l1t_", [helper.make_node("Greater", ["sr", "sr_min"], ["l1t_cond"]),
                          helper.make_node("If", ["l1t_cond"], ["l1t_prob", "l1t_h_out", "l1t_c_out"],
                                           then_branch=lvl2_then, else_branch=lvl3_else)])
# sr != 16000: a scaled input through LSTM b (the 8 kHz path).
lvl1_else = wrap("l1e_", [helper.make_node("Mul", ["x", "half"], ["l1e_xs"]),
                          helper.make_node("Reshape", ["l1e_xs", "frames_shape"], ["l1e_frames"]),
                          helper.make_node("LSTM", ["l1e_frames", "b_W", "b_R", "b_B", "", "h", "c"],
                                           ["l1e_Y", "l1e_hn", "l1e_cn"], hidden_size=HID),
                          helper.make_node("Squeeze", ["l1e_hn", "axis0"], ["l1e_h2"]),
                          helper.make_node("MatMul", ["l1e_h2", "head"], ["l1e_logit"]),
                          helper.make_node("Sigmoid", ["l1e_logit"], ["l1e_prob"]),
                          helper.make_node("Identity", ["l1e_hn"], ["l1e_h_out"]),
                          helper.make_node("Identity", ["l1e_cn"], ["l1e_c_out"])])
vad_nodes = [
    helper.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
    helper.make_node("If", ["is16k"], ["prob", "h_out", "c_out"], then_branch=lvl1_then, else_branch=lvl1_else),
]
vad = model("vad_like", vad_nodes,
            [vi("x", F, [1, T_ * IN]), vi("sr", I64, []), vi("h", F, [1, 1, HID]), vi("c", F, [1, 1, HID])],
            outs3,
            lstm_a + lstm_b + [init("frames_shape", np.array([T_, 1, IN], np.int64)),
                               init("axis0", np.array([0], np.int64)),
                               init("head", rng.normal(0, 0.5, (HID, 1)).astype(np.float32)),
                               init("sr16k", np.array(16000, np.int64)), init("sr_min", np.array(8000, np.int64)),
                               init("sr_max", np.array(20000, np.int64)), init("half", np.array(0.5, np.float32))])
for sr in (16000, 8000):
    CASES.append((vad, {"x": rng.normal(0, 1, (1, T_ * IN)).astype(np.float32), "sr": np.array(sr, np.int64),
                        "h": rng.normal(0, 0.5, (1, 1, HID)).astype(np.float32),
                        "c": rng.normal(0, 0.5, (1, 1, HID)).astype(np.float32)},
                  f"sr={sr}", ["known at plan time", "0 decided by reading a GPU value back"]))

# ---- data_if --------------------------------------------------------------
gpu_then = branch("pos", [helper.make_node("Relu", ["x"], ["pos_r"]),
                          helper.make_node("MatMul", ["pos_r", "m"], ["pos_y"])], [vi("pos_y", F, None)])
gpu_else = branch("neg", [helper.make_node("Neg", ["x"], ["neg_n"]),
                          helper.make_node("Mul", ["neg_n", "k3"], ["neg_y"])], [vi("neg_y", F, None)])
# Loop: v = v * 2 while max(v) < 10, at most 20 times; counts the iterations.
body = helper.make_graph([
    helper.make_node("Mul", ["v_in", "two"], ["v_out"]),
    helper.make_node("ReduceMax", ["v_out"], ["v_max"], keepdims=0),
    helper.make_node("Less", ["v_max", "ten"], ["cond_out"]),
    helper.make_node("Identity", ["v_max"], ["scan_max"]),
], "double", [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [4])],
    [vi("cond_out", B, []), vi("v_out", F, [4]), vi("scan_max", F, [])])
data_if = model("data_if", [
    helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
    helper.make_node("Greater", ["s", "zero"], ["cond"]),
    helper.make_node("If", ["cond"], ["y"], then_branch=gpu_then, else_branch=gpu_else),
    helper.make_node("Abs", ["v0"], ["v_abs"]),
    helper.make_node("ReduceMax", ["v_abs"], ["v0max"], keepdims=0),
    helper.make_node("Less", ["v0max", "ten"], ["go"]),
    helper.make_node("Loop", ["trips", "go", "v_abs"], ["v_final", "maxes"], body=body),
    # Clip with a min computed on the GPU (a spectrogram front-end's floor).
    helper.make_node("ReduceMin", ["v0"], ["floor"], keepdims=0),
    helper.make_node("Clip", ["x", "floor", "k3"], ["clipped"]),
], [vi("x", F, [3, 4]), vi("v0", F, [4])], [vi("y", F, [3, None]), vi("v_final", F, [4]), vi("maxes", F, [None]),
                                            vi("clipped", F, [3, 4])],
    [init("m", rng.normal(0, 1, (4, 2)).astype(np.float32)), init("k3", np.array(3, np.float32)),
     init("zero", np.array(0, np.float32)), init("two", np.array(2, np.float32)),
     init("ten", np.array(10, np.float32)), init("trips", np.array(20, np.int64))], opset=13)
for sign, scale in ((1, 0.3), (-1, 2.0)):
    CASES.append((data_if, {"x": (sign * np.abs(rng.normal(0, 1, (3, 4)))).astype(np.float32),
                            "v0": (rng.uniform(0.1, 1, 4) * scale).astype(np.float32)},
                  f"sum {'>' if sign > 0 else '<'} 0", ["decided by reading a GPU value back"]))

# ---- rnn_bidir ------------------------------------------------------------
T2, B2, I2, H2 = 6, 3, 5, 7
rnn_inits = (weights("g0_", 3, 2, H2, I2) + weights("g1_", 3, 2, H2, I2) + weights("r_", 1, 2, H2, I2) +
             weights("l_", 4, 2, H2, I2, peep=True) + weights("lr_", 4, 1, H2, I2) + weights("ga_", 3, 1, H2, I2))
rnn_nodes = [
    helper.make_node("GRU", ["x", "g0_W", "g0_R", "g0_B", "lens", "h0"], ["gru0_y", "gru0_h"], hidden_size=H2,
                     direction="bidirectional"),
    helper.make_node("GRU", ["x", "g1_W", "g1_R", "g1_B", "lens", "h0"], ["gru1_y", "gru1_h"], hidden_size=H2,
                     direction="bidirectional", linear_before_reset=1),
    helper.make_node("RNN", ["x", "r_W", "r_R", "r_B", "lens", "h0"], ["rnn_y", "rnn_h"], hidden_size=H2,
                     direction="bidirectional", activations=["Relu", "LeakyRelu"], activation_alpha=[0.3]),
    helper.make_node("LSTM", ["x", "l_W", "l_R", "l_B", "lens", "h0", "c0", "l_P"], ["lstm_y", "lstm_h", "lstm_c"],
                     hidden_size=H2, direction="bidirectional", clip=0.5,
                     activations=["HardSigmoid", "ScaledTanh", "Softsign", "Sigmoid", "Tanh", "Affine"],
                     activation_alpha=[0.25, 0.9, 1.2], activation_beta=[0.45, 1.1, 0.05]),
    helper.make_node("Slice", ["h0", "s0", "s1", "s0"], ["h0f"]),
    helper.make_node("Slice", ["c0", "s0", "s1", "s0"], ["c0f"]),
    helper.make_node("LSTM", ["x", "lr_W", "lr_R", "lr_B", "lens", "h0f", "c0f"], ["lstmr_y", "lstmr_h", "lstmr_c"],
                     hidden_size=H2, direction="reverse", input_forget=1),
    helper.make_node("GRU", ["x", "ga_W", "ga_R", "ga_B"], ["gru_act_y"], hidden_size=H2,
                     activations=["HardSigmoid", "Elu"], activation_alpha=[0.3, 0.7], activation_beta=[0.6]),
]
rnn_outs = ["gru0_y", "gru0_h", "gru1_y", "gru1_h", "rnn_y", "rnn_h", "lstm_y", "lstm_h", "lstm_c", "lstmr_y",
            "lstmr_h", "lstmr_c", "gru_act_y"]
rnn_model = model("rnn_bidir", rnn_nodes,
                  [vi("x", F, [T2, B2, I2]), vi("lens", I32, [B2]), vi("h0", F, [2, B2, H2]), vi("c0", F, [2, B2, H2])],
                  [vi(n, F, [None] * (4 if n.endswith("_y") else 3)) for n in rnn_outs],
                  rnn_inits + [init("s0", np.array([0], np.int64)), init("s1", np.array([1], np.int64))])
CASES.append((rnn_model, {"x": rng.normal(0, 1, (T2, B2, I2)).astype(np.float32),
                          "lens": np.array([6, 2, 4], np.int32),
                          "h0": rng.normal(0, 0.5, (2, B2, H2)).astype(np.float32),
                          "c0": rng.normal(0, 0.5, (2, B2, H2)).astype(np.float32)}, "lens 6,2,4", []))

# Float32 products of 5..16 terms through 5..6 steps. Measured on lavapipe
# (2026-12-01): max error 1.2e-7 (vad_like), 5.1e-7 (rnn_bidir), 2.4e-7
# (data_if, a 4-term product; the rest exact).
TOL = {"vad_like": (1e-5, 1e-5), "data_if": (1e-5, 1e-5), "rnn_bidir": (1e-5, 1e-5)}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


passed = failed = 0
os.environ["WGNN_ORT_MODULE"] = os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")
for k, (m, feeds, label, must_say) in enumerate(CASES):
    name = m.graph.name
    d = os.path.join(WORK, f"{name}_{k}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    specs = []
    for n, v in feeds.items():
        np.save(os.path.join(d, n + ".npy"), v)
        specs.append(f"{n}={os.path.join(d, n + '.npy')}")
    try:
        run(["node", os.path.join(HERE, "..", "tools", "ort_reference.js"), path, os.path.join(d, "ort")] + specs)
        log = run([WGNN, "run", path, "--verbose", "--output-dir", os.path.join(d, "wgnn")] +
                  sum([["--input", s] for s in specs], []))
        for phrase in must_say:
            if phrase not in log:
                raise RuntimeError(f"the --verbose summary does not say {phrase!r}:\n{log}")
        worst = 0.0
        for o in m.graph.output:
            want = np.load(os.path.join(d, "ort", o.name + ".npy"))
            got = np.load(os.path.join(d, "wgnn", o.name + ".npy"))
            r = closeness.check(got, want, *TOL[name])
            if not r.ok:
                raise RuntimeError(f"{o.name}: {r}")
            worst = max(worst, r.max_abs)
        print(f"PASS {name} ({label}; {len(m.graph.output)} outputs, max error {worst:.1e})")
        passed += 1
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"FAIL {name} ({label}): {e}")
        failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
