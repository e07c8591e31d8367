"""Run an ONNX model with wgnn and with ONNX Runtime's CPU provider on the
same inputs and compare every output.

usage: compare.py --wgnn PATH_TO_wgnn MODEL.onnx --inputs DIR [--ort python|node]
                  [--ort-dir DIR] [--work DIR] [--label TEXT]

DIR holds <input name>.npy for each model input (export.py writes them).
The reference is python's onnxruntime when importable (or --ort python),
else the repo's node reference (tests/tools/ort_reference.js with
onnxruntime-node from --ort-dir, default .deps/ort). An output passes when
    max |wgnn - ort| <= 1e-3 * max |ort| + 1e-4
and has ORT's dtype and shape. Prints one line:
    PASS|FAIL <label> max_abs_err E max_ref R tol T [per output ...]
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


def safe_name(s):
    # wgnn run and ort_reference.js write <name>.npy with other characters as '_'.
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in s) or "_"


def model_io(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [i.name for i in m.graph.input if i.name not in inits]
    return ins, [o.name for o in m.graph.output]


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
    a = ap.parse_args()
    label = a.label or os.path.splitext(os.path.basename(a.model))[0]
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
    r = subprocess.run(cmd, capture_output=True, text=True)
    t_wgnn = time.time() - t0
    if r.returncode != 0:
        print(f"ERROR {label}: wgnn failed (exit {r.returncode}):\n{r.stdout}{r.stderr}".rstrip())
        sys.exit(2)

    ok, worst_err, worst_ref, worst_tol, parts = True, 0.0, 0.0, 0.0, []
    for n in outs:
        want = np.load(os.path.join(ort_out, safe_name(n) + ".npy"))
        got_path = os.path.join(wgnn_out, safe_name(n) + ".npy")
        if not os.path.exists(got_path):
            ok = False
            parts.append(f"{n}: missing from wgnn's outputs")
            continue
        got = np.load(got_path)
        if got.shape != want.shape or got.dtype != want.dtype:
            ok = False
            parts.append(f"{n}: wgnn {got.dtype}{list(got.shape)} vs ORT {want.dtype}{list(want.shape)}")
            continue
        w = want.astype(np.float64)
        d = np.abs(got.astype(np.float64) - w)
        err = float(np.nanmax(d)) if d.size else 0.0
        if np.isnan(d).any() and not np.array_equal(np.isnan(got), np.isnan(want)):
            err = float("nan")
        ref = float(np.nanmax(np.abs(w))) if w.size else 0.0
        tol = 1e-3 * ref + 1e-4
        good = err <= tol  # NaN fails
        ok &= good
        if not good or err / tol > worst_err / max(worst_tol, 1e-30):
            worst_err, worst_ref, worst_tol = err, ref, tol
        parts.append(f"{n}: {err:.2e} (max_ref {ref:.3g}){'' if good else ' FAIL'}")
    print(f"{'PASS' if ok else 'FAIL'} {label} max_abs_err {worst_err:.3e} max_ref {worst_ref:.4g} "
          f"tol {worst_tol:.3e} [{'; '.join(parts)}] (wgnn {t_wgnn:.1f} s, ort-{ort_kind} {t_ort:.1f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
