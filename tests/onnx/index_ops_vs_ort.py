"""Indexing and scan operators: models built with onnx.helper, run by
`wgnn run` and by ONNX Runtime's CPU provider on the same .npy inputs
(tests/tools/ort_reference.js), outputs compared with
tests/tools/closeness.py (integers equal, floats within TOL).

- TopK: a 50257-long row (a vocabulary) with ties, smallest along a middle
  axis, k computed from a shape (Shape -> Gather -> Div), k = the whole axis;
- GatherND (batch_dims 0 and 1), ScatterND (none, add, mul, max, min),
  ScatterElements (axis, negative indices, duplicates with add / mul / max
  / min), Scatter (opset 10);
- CumSum (exclusive, reverse, negative axis), ReverseSequence, BitShift,
  MaxUnpool (of MaxPool's indices);
- Einsum: matmul, batched matmul, transposes, sums, inner and outer
  products, three operands, "..." and the implicit output; a diagonal and
  a broadcast label must be refused with their reason;
- GridSample: bilinear / nearest / bicubic x zeros / border / reflection x
  align_corners, with grid points outside [-1, 1] (not bicubic with border
  padding, where ONNX Runtime departs from ONNX's definition: see below).

usage: index_ops_vs_ort.py WGNN ORT_MODULE_DIR WORKDIR
Prints one line per case and a last line "N passed, N failed".
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
F, I64, U8 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT8
ELEM = {np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.float32): F, np.dtype(np.int64): I64, np.dtype(np.uint8): U8, np.dtype(np.int32): TensorProto.INT32}

CASES = []  # (name, model, feeds, (atol, rtol))


def case(name, nodes, feeds, outputs, opset=18, inits=(), tol=(0.0, 0.0)):
    """outputs: [(name, elem)] with unknown shapes (ONNX Runtime fills them)."""
    ins = [helper.make_tensor_value_info(k, ELEM[v.dtype], list(v.shape)) for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(n, e, None) for n, e in outputs]
    g = helper.make_graph(nodes, name, ins, outs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    # (no onnx.checker: it wants output shapes, which ONNX Runtime infers)
    CASES.append((name, m, feeds, tol))


def i64(name, v):
    return numpy_helper.from_array(np.asarray(v, dtype=np.int64), name)


# ---- TopK -------------------------------------------------------------------
vocab = rng.integers(-300, 300, (2, 50257)).astype(np.float32) / 4  # many ties
case("topk_vocab", [helper.make_node("TopK", ["x", "k"], ["v", "i"])], {"x": vocab},
     [("v", F), ("i", I64)], inits=[i64("k", [50])])
mid = rng.integers(-20, 20, (3, 40, 5)).astype(np.float32)
case("topk_smallest_mid_axis", [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0)], {"x": mid},
     [("v", F), ("i", I64)], inits=[i64("k", [7])])
# k = x.shape[1] / 8, computed from the shape on the host.
case("topk_k_from_shape",
     [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["n"]),
      helper.make_node("Div", ["n", "eight"], ["k"]), helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-2)],
     {"x": np.transpose(mid, (0, 2, 1)).copy()}, [("v", F), ("i", I64)], inits=[i64("one", [1]), i64("eight", [8])])
case("topk_int64_full_axis", [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=0)],
     {"x": rng.integers(-5, 5, (9, 4)).astype(np.int64)}, [("v", I64), ("i", I64)], inits=[i64("k", [9])])
case("topk_opset9_attribute", [helper.make_node("TopK", ["x"], ["v", "i"], k=3)], {"x": mid}, [("v", F), ("i", I64)],
     opset=9)

# ---- GatherND / ScatterND / ScatterElements / Scatter ------------------------
data = rng.normal(0, 1, (4, 5, 6)).astype(np.float32)
case("gathernd_b0", [helper.make_node("GatherND", ["x", "i"], ["y"])], {"x": data},
     [("y", F)], inits=[i64("i", [[[1, -2]], [[3, 4]], [[0, 0]]])])
case("gathernd_b1", [helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
     {"x": data, "i": np.array([[[1, 2], [4, 5]], [[0, 0], [-1, -1]], [[2, 3], [2, 3]], [[3, 1], [0, 5]]], np.int64)},
     [("y", F)])
upd = rng.normal(0, 1, (3, 5, 6)).astype(np.float32)
for red in ["none", "add", "mul", "max", "min"]:
    idx = [[2], [0], [3]] if red == "none" else [[2], [0], [2]]  # duplicates only where they combine
    case(f"scatternd_{red}", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=red)],
         {"x": data, "u": upd}, [("y", F)], inits=[i64("i", idx)], tol=(1e-6, 1e-6))
case("scatternd_bool_mask", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
     {"x": np.zeros((4, 5), np.bool_), "u": rng.integers(0, 2, (2, 5)).astype(np.bool_)},
     [("y", TensorProto.BOOL)], inits=[i64("i", [[1], [-1]])])
se_idx = np.array([[0, 4, -1, 2], [1, 1, -5, 3], [2, 0, 2, -3]], np.int64)
se_upd = rng.normal(0, 1, (3, 4)).astype(np.float32)
for red in ["add", "mul", "max", "min"]:
    case(f"scatterelements_{red}",
         [helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=red)],
         {"x": rng.normal(0, 1, (3, 5)).astype(np.float32), "i": se_idx, "u": se_upd}, [("y", F)], tol=(1e-6, 1e-6))
case("scatterelements_axis0",
     [helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)],
     {"x": rng.normal(0, 1, (3, 5)).astype(np.float32), "i": np.array([[2, 0, -1, 1, 0], [0, 1, 1, -3, 2]], np.int64),
      "u": rng.normal(0, 1, (2, 5)).astype(np.float32)}, [("y", F)])
case("scatter_opset10", [helper.make_node("Scatter", ["x", "i", "u"], ["y"], axis=1)],
     {"x": rng.normal(0, 1, (3, 5)).astype(np.float32), "i": np.array([[4, 0], [1, 2], [3, 3]], np.int64),
      "u": np.array([[1, 2], [3, 4], [5, 6]], np.float32)}, [("y", F)], opset=10)

# ---- CumSum / ReverseSequence / BitShift --------------------------------------
cs = rng.normal(0, 1, (3, 300, 4)).astype(np.float32)
for ex in [0, 1]:
    for rev in [0, 1]:
        case(f"cumsum_ex{ex}_rev{rev}", [helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=ex, reverse=rev)],
             {"x": cs}, [("y", F)], inits=[numpy_helper.from_array(np.array(-2, np.int32), "a")], tol=(1e-5, 1e-5))
case("cumsum_int64", [helper.make_node("CumSum", ["x", "a"], ["y"])],
     {"x": rng.integers(-100, 100, (5, 7)).astype(np.int64)}, [("y", I64)], inits=[i64("a", 1)])
case("reversesequence",
     [helper.make_node("ReverseSequence", ["x", "l"], ["y"], time_axis=1, batch_axis=0)],
     {"x": rng.normal(0, 1, (4, 6, 3)).astype(np.float32), "l": np.array([1, 6, 3, 0], np.int64)}, [("y", F)])
for d in ["LEFT", "RIGHT"]:
    case(f"bitshift_{d.lower()}", [helper.make_node("BitShift", ["x", "s"], ["y"], direction=d)],
         {"x": rng.integers(0, 256, (4, 9)).astype(np.uint8), "s": rng.integers(0, 9, (1, 9)).astype(np.uint8)},
         [("y", U8)])

# MaxPool's indices back through MaxUnpool. Not with an output_shape
# larger than the unpooled shape: ONNX Runtime then reads the indices as
# flat positions in the output_shape tensor, while ONNX's definition (its
# reference implementation and the conformance case
# test_maxunpool_export_with_output_shape, which wgnn passes) puts the
# unpooled tensor at the output's beginning and zeros after it.
mp = rng.normal(0, 1, (2, 3, 8, 8)).astype(np.float32)
case("maxunpool", [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
                   helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
     {"x": mp}, [("y", F)], opset=11)

# ---- Einsum -------------------------------------------------------------------
def ein(name, eq, *shapes):
    feeds = {f"x{k}": rng.normal(0, 1, s).astype(np.float32) for k, s in enumerate(shapes)}
    case(f"einsum_{name}", [helper.make_node("Einsum", list(feeds), ["y"], equation=eq)], feeds, [("y", F)],
         tol=(1e-5, 1e-5))


ein("matmul", "ij,jk->ik", (5, 7), (7, 3))
ein("bmm", "bij,bjk->bik", (2, 5, 7), (2, 7, 3))
ein("attention", "bhqd,bhkd->bhqk", (2, 3, 4, 8), (2, 3, 5, 8))
ein("transpose", "ijk->kij", (2, 3, 4))
ein("sum", "ijk->j", (2, 3, 4))
ein("inner", "i,i", (11,), (11,))
ein("outer", "i,j->ij", (4,), (6,))
ein("three", "ij,jk,kl->il", (3, 4), (4, 5), (5, 2))
ein("ellipsis", "...ij,...jk->...ik", (2, 3, 4, 5), (2, 3, 5, 6))
ein("implicit", "ba,ca", (3, 4), (5, 4))
ein("own_sums", "ijk,jl->l", (2, 3, 4), (3, 5))

# ---- GridSample -----------------------------------------------------------------
img = rng.normal(0, 1, (2, 3, 5, 7)).astype(np.float32)
grid = rng.uniform(-1.3, 1.3, (2, 4, 6, 2)).astype(np.float32)
# Not bicubic with border padding: there ONNX Runtime (as PyTorch) clamps
# each of the 16 taps but not the sampling point itself, while ONNX's
# definition (its reference implementation, which the conformance data
# follows) first clamps a point outside the image to the border; wgnn
# follows ONNX (tests/ops/grid_sample_test.cpp checks it).
for mode in ["bilinear", "nearest", "bicubic"]:
    for pad in ["zeros", "border", "reflection"]:
        for ac in [0, 1]:
            if mode == "bicubic" and pad == "border":
                continue
            case(f"gridsample_{mode}_{pad}_ac{ac}",
                 [helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=pad, align_corners=ac)],
                 {"x": img, "g": grid}, [("y", F)], opset=16, tol=(1e-5, 1e-5))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


passed = failed = 0
os.environ["WGNN_ORT_MODULE"] = os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")
for name, m, feeds, tol in CASES:
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    specs = []
    for n, v in feeds.items():
        np.save(os.path.join(d, n + ".npy"), v)
        specs.append(f"{n}={os.path.join(d, n + '.npy')}")
    try:
        run(["node", os.path.join(HERE, "..", "tools", "ort_reference.js"), path, os.path.join(d, "ort")] + specs)
        run([WGNN, "run", path, "--output-dir", os.path.join(d, "wgnn")] + sum([["--input", s] for s in specs], []))
        worst = 0.0
        for o in m.graph.output:
            want = np.load(os.path.join(d, "ort", o.name + ".npy"))
            got = np.load(os.path.join(d, "wgnn", o.name + ".npy"))
            r = closeness.check(got, want, *tol)
            if not r.ok:
                raise RuntimeError(f"{o.name}: {r}")
            worst = max(worst, r.max_abs)
        print(f"PASS {name} (max error {worst:.1e})")
        passed += 1
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"FAIL {name}: {e}")
        failed += 1
# What the Einsum mapper does not decompose is refused when the model loads, saying why.
REFUSED = [("einsum_diagonal", "ii->i", [(4, 4)], "a label repeated within an operand (a diagonal)"),
           ("einsum_broadcast", "ij,jk->ik", [(3, 1), (4, 5)], "(broadcasting)")]
for name, eq, shapes, says in REFUSED:
    feeds = {f"x{k}": np.ones(s, np.float32) for k, s in enumerate(shapes)}
    ins = [helper.make_tensor_value_info(k, F, list(v.shape)) for k, v in feeds.items()]
    g = helper.make_graph([helper.make_node("Einsum", list(feeds), ["y"], equation=eq)], name, ins,
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    specs = []
    for n, v in feeds.items():
        np.save(os.path.join(d, n + ".npy"), v)
        specs += ["--input", f"{n}={os.path.join(d, n + '.npy')}"]
    r = subprocess.run([WGNN, "run", os.path.join(d, "model.onnx")] + specs, capture_output=True, text=True)
    if r.returncode != 0 and says in r.stdout + r.stderr:
        print(f"PASS {name} (refused: {says})")
        passed += 1
    else:
        print(f"FAIL {name}: exit {r.returncode}, expected a refusal saying {says!r}:\n{r.stdout}{r.stderr}")
        failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
