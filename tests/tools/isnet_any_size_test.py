"""scripts/isnet_any_size.py on a small model with ISNet's pattern: Resize
sizes as Concat(Shape(x)[0:2], constant) traced at the declared size, the
result joining a skip connection through a Concat, or going to a Sigmoid.
After the rewrite the model computes the same at the declared size (ONNX
Runtime, CPU) and also runs at another size, where the original fails.

usage: isnet_any_size_test.py ORT_MODULE_DIR WORKDIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ORT_DIR, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.environ["WGNN_ORT_MODULE"] = os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def const(name, values):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.int64), name))


def upsample_like(src, hw, out, tag):
    """ISNet's traced _upsample_like: sizes = Concat(Shape(src)[0:2], hw)."""
    return [
        helper.make_node("Shape", [src], [tag + "_shape"]),
        const(tag + "_s0", [0]), const(tag + "_s2", [2]), const(tag + "_hw", hw),
        helper.make_node("Slice", [tag + "_shape", tag + "_s0", tag + "_s2"], [tag + "_nc"]),
        helper.make_node("Concat", [tag + "_nc", tag + "_hw"], [tag + "_sizes"], axis=0),
        helper.make_node("Resize", [src, "", "", tag + "_sizes"], [tag + "_r"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
        helper.make_node("Cast", [tag + "_r"], [out], to=F),
    ]


# x (64x64) -> down (32x32, every other pixel) -> relu -> up to 64 joins x;
# the joined map, averaged, -> down again -> up to the input size -> sigmoid.
nodes = [
    const("st", [0, 0]), const("en", [1 << 30, 1 << 30]), const("ax", [2, 3]), const("sp", [2, 2]),
    helper.make_node("Slice", ["input", "st", "en", "ax", "sp"], ["down"]),
    helper.make_node("Relu", ["down"], ["h"]),
    *upsample_like("h", [64, 64], "up", "a"),
    helper.make_node("Concat", ["up", "input"], ["joined"], axis=1),
    helper.make_node("ReduceMean", ["joined"], ["mean"], axes=[1], keepdims=1),
    helper.make_node("Slice", ["mean", "st", "en", "ax", "sp"], ["down2"]),
    *upsample_like("down2", [64, 64], "side", "b"),
    helper.make_node("Sigmoid", ["side"], ["output"]),
]
g = helper.make_graph(nodes, "mini_isnet", [helper.make_tensor_value_info("input", F, [1, 3, 64, 64])],
                      [helper.make_tensor_value_info("output", F, [1, 1, 64, 64]),
                       helper.make_tensor_value_info("joined", F, [1, 6, 64, 64])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
m.ir_version = 8
onnx.checker.check_model(m)
orig = os.path.join(WORK, "orig.onnx")
anys = os.path.join(WORK, "any.onnx")
onnx.save(m, orig)

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "isnet_any_size.py"), orig, anys],
                   capture_output=True, text=True)
check(r.returncode == 0 and "2 Resize nodes" in r.stdout, f"the script rewires both Resizes: {r.stdout}{r.stderr}")
a = onnx.load(anys)
dims = a.graph.input[0].type.tensor_type.shape.dim
check([d.dim_value for d in dims[:2]] == [1, 3] and [d.dim_param for d in dims[2:]] == ["height", "width"],
      "the declared input becomes 1x3 x height x width")
check({p.key: p.value for p in a.metadata_props}.get("wgnn.preprocess") == "isnet",
      "the metadata names ISNet's pre-processing")


def ort(model, x, tag):
    d = os.path.join(WORK, tag)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "input.npy"), x)
    p = subprocess.run(["node", os.path.join(HERE, "ort_reference.js"), model, d, f"input={d}/input.npy"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr
    return {o: np.load(os.path.join(d, o + ".npy")) for o in ("output", "joined")}, ""


def free_size(path, out):
    """The model with a free input height and width (ONNX Runtime checks declared dims)."""
    mm = onnx.load(path)
    for dim in mm.graph.input[0].type.tensor_type.shape.dim[2:]:
        dim.Clear()
        dim.dim_param = "hw"
    for o in mm.graph.output:
        for dim in o.type.tensor_type.shape.dim[2:]:
            dim.Clear()
    onnx.save(mm, out)
    return out


rng = np.random.default_rng(0)
x64 = rng.normal(0, 1, (1, 3, 64, 64)).astype(np.float32)
want, e1 = ort(orig, x64, "orig64")
got, e2 = ort(anys, x64, "any64")
check(want is not None and got is not None, f"both run at 64x64 {e1}{e2}")
if want is not None and got is not None:
    check(all(np.array_equal(want[k], got[k]) for k in want), "identical outputs at the declared size")

x32 = rng.normal(0, 1, (1, 3, 32, 32)).astype(np.float32)
bad, _ = ort(free_size(orig, os.path.join(WORK, "orig_free.onnx")), x32, "orig32")
check(bad is None, "the original fails at 32x32")
small, err = ort(free_size(anys, os.path.join(WORK, "any_free.onnx")), x32, "any32")
check(small is not None and small["output"].shape == (1, 1, 32, 32) and small["joined"].shape == (1, 6, 32, 32),
      f"the rewritten model runs at 32x32 {err}")

# A model without the pattern is refused, not silently changed.
g2 = helper.make_graph([helper.make_node("Resize", ["input", "", "sc"], ["output"], mode="linear")], "other",
                       [helper.make_tensor_value_info("input", F, [1, 3, 8, 8])],
                       [helper.make_tensor_value_info("output", F, [1, 3, 16, 16])],
                       initializer=[numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")])
m2 = helper.make_model(g2, opset_imports=[helper.make_opsetid("", 15)])
onnx.save(m2, os.path.join(WORK, "other.onnx"))
r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "isnet_any_size.py"),
                    os.path.join(WORK, "other.onnx"), os.path.join(WORK, "other_any.onnx")],
                   capture_output=True, text=True)
check(r.returncode != 0 and "not the ISNet export expected" in r.stderr,
      f"a model without traced Resize sizes is refused: rc {r.returncode} {r.stdout}{r.stderr}")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
