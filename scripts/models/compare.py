"""Run an ONNX model with wgnn and with ONNX Runtime's CPU provider on the
same inputs and compare every output.

usage: compare.py --wgnn PATH_TO_wgnn MODEL.onnx --inputs DIR [--ort python|node]
                  [--ort-dir DIR] [--work DIR] [--label TEXT] [--fp16 [--fp16-emulated]]

DIR holds <input name>.npy for each model input (export.py writes them).
The reference is python's onnxruntime when importable (or --ort python),
else the repo's node reference (tests/tools/ort_reference.js with
onnxruntime-node from --ort-dir, default .deps/ort). An output passes when
it has ORT's dtype and shape and every element satisfies
    |wgnn - ort| <= atol + rtol * |ort|
(tests/tools/closeness.py: infinities exact, NaN only where ORT has NaN),
with (atol, rtol) from --tol, default F32_TOL below. With --fp16, wgnn runs
the model in float16 mode (`wgnn run --fp16`) against ORT in float32, with
FP16_TOL; --fp16-emulated also runs ORT on the model with its weights and
activations rounded to float16 (fp16_emulated_model) and holds wgnn to
--emulated-tol, default EMULATED_TOL, of that: float16's inherent error then
cancels and what remains is wgnn's own. tests/onnx/zoo_vs_ort.py holds the
tolerances measured per model. Prints one line:
    PASS|FAIL <label> max_abs_err E used U tol ATOL,RTOL [per output ...]
(U: the largest |err| / (atol + rtol * |ort|), 1 at the edge)
and exits 1 on a mismatch, 2 when wgnn or ORT fails (their error text is
printed: wgnn's lists every unsupported node).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
import closeness  # noqa: E402

# (atol, rtol) for a model without a measured pair of its own (the zoo's
# pairs, measured per model, are in tests/onnx/zoo_vs_ort.py): float32;
# float16 mode against ORT in float32; float16 mode against ORT on the
# float16-emulated model (--fp16-emulated).
F32_TOL = (1e-4, 1e-3)
FP16_TOL = (2e-2, 2e-2)
EMULATED_TOL = (5e-3, 5e-3)


def safe_name(s):
    # wgnn run and ort_reference.js write <name>.npy with other characters as '_'.
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in s) or "_"


def model_io(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [i.name for i in m.graph.input if i.name not in inits]
    return ins, [o.name for o in m.graph.output]


def fp16_emulated_model(src, dst):
    """Writes a float32 model that computes as wgnn's float16 mode stores:
    float32 initializers rounded to float16 (finite values beyond +-65504
    saturating, as wgnn converts them; not constant BatchNormalization
    parameters, which wgnn keeps float32), and every float32 graph input and
    node output rounded to float16 by a Cast pair (the graph's outputs
    excepted; Shape and Constant outputs too). ONNX Runtime runs it in
    float32, so comparing wgnn --fp16 with it separates wgnn's own error from
    float16's inherent one."""
    from onnx import TensorProto, helper, numpy_helper, shape_inference
    m = onnx.load(src)
    g = m.graph
    # wgnn keeps constant BatchNormalization parameters float32 (folded into a
    # float32 scale and shift per channel).
    inits = {t.name for t in g.initializer}
    exact = set()
    for n in g.node:
        params = list(n.input[1:5])
        if n.op_type == "BatchNormalization" and len(params) == 4 and all(p in inits for p in params):
            exact.update(params)
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT and t.name not in exact:
            a = numpy_helper.to_array(t)
            a = np.where(np.isfinite(a), np.clip(a, -65504, 65504), a).astype(np.float16).astype(np.float32)
            g.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
    inferred = shape_inference.infer_shapes(m).graph
    types = {v.name: v.type.tensor_type.elem_type
             for v in list(inferred.value_info) + list(inferred.input) + list(inferred.output)}
    outputs = {o.name for o in g.output}
    nodes, rename = [], {}

    def round_f16(name):
        nodes.extend([helper.make_node("Cast", [name], [name + "__f16"], to=TensorProto.FLOAT16),
                      helper.make_node("Cast", [name + "__f16"], [name + "__r16"], to=TensorProto.FLOAT)])
        rename[name] = name + "__r16"

    for v in g.input:
        if v.name not in inits and types.get(v.name) == TensorProto.FLOAT:
            round_f16(v.name)
    for n in g.node:
        for k, x in enumerate(n.input):
            if x in rename:
                n.input[k] = rename[x]
        nodes.append(n)
        if n.op_type in ("Shape", "Constant", "ConstantOfShape"):
            continue
        for o in n.output:
            if o and o not in outputs and types.get(o) == TensorProto.FLOAT:
                round_f16(o)
    del g.node[:]
    g.node.extend(nodes)
    onnx.save(m, dst)


def compare_outputs(outs, ref_dir, got_dir, tol):
    """(ok, the largest share of the tolerance used, the largest |err|,
    per-output texts) of
    wgnn's outputs in got_dir against the reference's in ref_dir, elementwise
    (closeness.check) with tol = (atol, rtol)."""
    ok, worst, max_abs, parts = True, 0.0, 0.0, []
    for n in outs:
        want = np.load(os.path.join(ref_dir, safe_name(n) + ".npy"))
        got_path = os.path.join(got_dir, safe_name(n) + ".npy")
        if not os.path.exists(got_path):
            ok = False
            worst = max_abs = float("inf")
            parts.append(f"{n}: missing from wgnn's outputs")
            continue
        r = closeness.check(np.load(got_path), want, *tol)
        ok &= r.ok
        worst, max_abs = max(worst, r.used), max(max_abs, r.max_abs)
        parts.append(f"{n}: {'' if r.ok else 'FAIL '}{r}")
    return ok, worst, max_abs, parts


def tol_pair(text):
    try:
        atol, rtol = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ATOL,RTOL, got '{text}'")
    return atol, rtol


def run_ort_python(path, feeds, outdir):
    import onnxruntime as ort
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    os.makedirs(outdir, exist_ok=True)
    for n, v in zip(names, s.run(names, feeds)):
        np.save(os.path.join(outdir, safe_name(n) + ".npy"), v)


def run_ort_node(path, specs, outdir, ort_dir):
    env = dict(os.environ, WGNN_ORT_MODULE=os.path.join(ort_dir, "node_modules", "onnxruntime-node"))
    cmd = ["node", os.path.join(ROOT, "tests", "tools", "ort_reference.js"), path, outdir] + specs
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"ONNX Runtime (node) failed:\n{r.stdout}{r.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wgnn", required=True, help="the wgnn binary")
    ap.add_argument("model")
    ap.add_argument("--inputs", required=True, help="folder with <input>.npy per model input")
    ap.add_argument("--ort", choices=["python", "node"], help="default: python when importable, else node")
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, ".deps", "ort"),
                    help="folder with node_modules/onnxruntime-node (for --ort node)")
    ap.add_argument("--work", help="where outputs go (default: a temporary folder)")
    ap.add_argument("--label", help="the name printed (default: the model's file name)")
    ap.add_argument("--wgnn-arg", action="append", default=[], help="extra argument for wgnn (repeatable)")
    ap.add_argument("--fp16", action="store_true",
                    help="run wgnn in float16 mode (wgnn run --fp16) and use the float16 tolerance")
    ap.add_argument("--fp16-emulated", action="store_true",
                    help="with --fp16: also compare with ONNX Runtime on the model with weights and activations "
                         "rounded to float16 (a tighter tolerance: wgnn's own error)")
    ap.add_argument("--tol", type=tol_pair, help="ATOL,RTOL for every output (default: F32_TOL, with --fp16 FP16_TOL)")
    ap.add_argument("--emulated-tol", type=tol_pair, default=EMULATED_TOL,
                    help="ATOL,RTOL against the float16-emulated model (default: EMULATED_TOL)")
    a = ap.parse_args()
    if a.fp16_emulated and not a.fp16:
        ap.error("--fp16-emulated needs --fp16")
    label = a.label or os.path.splitext(os.path.basename(a.model))[0]
    if a.fp16 and not a.label:
        label += "_fp16"
    tol = a.tol or (FP16_TOL if a.fp16 else F32_TOL)
    ort_kind = a.ort
    if ort_kind is None:
        try:
            import onnxruntime  # noqa: F401
            ort_kind = "python"
        except ImportError:
            ort_kind = "node"

    ins, outs = model_io(a.model)
    feeds, specs = {}, []
    for n in ins:
        f = os.path.join(a.inputs, safe_name(n) + ".npy")
        if not os.path.exists(f):
            print(f"ERROR {label}: no input file {f} for model input '{n}'")
            sys.exit(2)
        feeds[n] = np.load(f)
        specs.append(f"{n}={f}")

    work = a.work or tempfile.mkdtemp(prefix="wgnn_compare_")
    ort_out, wgnn_out = os.path.join(work, "ort"), os.path.join(work, "wgnn")
    t0 = time.time()
    try:
        if ort_kind == "python":
            run_ort_python(a.model, feeds, ort_out)
        else:
            run_ort_node(a.model, specs, ort_out, a.ort_dir)
    except Exception as e:  # noqa: BLE001
        print(f"ERROR {label}: ONNX Runtime ({ort_kind}) failed: {e}")
        sys.exit(2)
    t_ort = time.time() - t0
    t0 = time.time()
    cmd = [a.wgnn, "run", a.model, "--output-dir", wgnn_out] + sum([["--input", s] for s in specs], []) + a.wgnn_arg
    if a.fp16:
        cmd.append("--fp16")
    r = subprocess.run(cmd, capture_output=True, text=True)
    t_wgnn = time.time() - t0
    if r.returncode != 0:
        print(f"ERROR {label}: wgnn failed (exit {r.returncode}):\n{r.stdout}{r.stderr}".rstrip())
        sys.exit(2)

    ok, used, max_abs, parts = compare_outputs(outs, ort_out, wgnn_out, tol)
    emulated = ""
    if a.fp16_emulated:
        # wgnn --fp16 against ONNX Runtime on the float16-rounded model.
        emu_model, emu_out = os.path.join(work, "fp16_emulated.onnx"), os.path.join(work, "ort_fp16_emulated")
        try:
            fp16_emulated_model(a.model, emu_model)
            if ort_kind == "python":
                run_ort_python(emu_model, feeds, emu_out)
            else:
                run_ort_node(emu_model, specs, emu_out, a.ort_dir)
        except Exception as e:  # noqa: BLE001
            print(f"ERROR {label}: ONNX Runtime ({ort_kind}) on the float16-emulated model failed: {e}")
            sys.exit(2)
        e_ok, e_used, e_max, e_parts = compare_outputs(outs, emu_out, wgnn_out, a.emulated_tol)
        ok &= e_ok
        emulated = (f" emulated_fp16 {'PASS' if e_ok else 'FAIL'} max_abs_err {e_max:.3e} used {e_used:.2f} "
                    f"tol {a.emulated_tol[0]:g},{a.emulated_tol[1]:g} [{'; '.join(e_parts)}]")
    print(f"{'PASS' if ok else 'FAIL'} {label} max_abs_err {max_abs:.3e} used {used:.2f} tol {tol[0]:g},{tol[1]:g} "
          f"[{'; '.join(parts)}]{emulated} "
          f"(wgnn {t_wgnn:.1f} s, ort-{ort_kind} {t_ort:.1f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
