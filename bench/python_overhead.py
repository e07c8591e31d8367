"""What a call to wgnn.InferenceSession.run costs beyond the C++ API's
Session::run, on small models where the host side is most of a run.

For each model, N timed runs (after a warm-up) through Python (numpy in,
numpy out: the inputs copied in, the outputs handed to numpy without a
copy). Per call, the time inside the C++ API's Session::run (timed by the
binding) is taken from the wall time of wgnn.InferenceSession.run: the
median of that difference is the Python layer's cost per call, measured in
the same calls. `wgnn bench` (the C++ API in its own process, Session::run
into kept outputs) and ONNX Runtime's Python run on its CPU provider are
printed beside them, for scale. Numbers, no assertion.

usage: bench/python_overhead.py WGNN_CLI [--runs N] [--json OUT]
       (in the .venv that scripts/setup makes; the CLI: build/wgnn)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import wgnn


def add_model(shape):
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "add",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("a", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def median_us(fn, runs, warmup, inner=None):
    """(median, min) wall time of fn in us; with `inner` (the time of the
    call's C++ part, us) also the median of wall - inner."""
    for _ in range(warmup):
        fn()
    t, d = [], []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        t.append((time.perf_counter_ns() - t0) / 1000)
        if inner:
            d.append(t[-1] - inner())
    return float(np.median(t)), float(np.min(t)), (float(np.median(d)) if d else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args()
    info = wgnn.get_device_info()
    print(f"wgnn {wgnn.__version__} on {info['adapter']} ({info['backend']}); {a.runs} runs after {a.warmup} warm-up")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, shape in [("Add 1x4", [1, 4]), ("Add 1x3x224x224", [1, 3, 224, 224])]:
            path = os.path.join(tmp, "m.onnx")
            onnx.save(add_model(shape), path)
            rng = np.random.default_rng(0)
            feed = {n: rng.standard_normal(shape, dtype=np.float32) for n in ("a", "b")}
            for n, v in feed.items():
                np.save(os.path.join(tmp, n + ".npy"), v)
            s = wgnn.InferenceSession(path)
            py_med, py_min, overhead = median_us(lambda: s.run(None, feed), a.runs, a.warmup, s._s.last_run_us)
            r = subprocess.run([a.cli, "bench", path, "--runs", str(a.runs), "--warmup", str(a.warmup), "--json",
                                "--input", "a=" + os.path.join(tmp, "a.npy"), "--input",
                                "b=" + os.path.join(tmp, "b.npy")], capture_output=True, text=True, check=True)
            cpp = json.loads(r.stdout)
            row = {"model": label, "python_median_us": py_med, "python_min_us": py_min,
                   "cpp_median_us": cpp["median_ms"] * 1000, "cpp_min_us": cpp["min_ms"] * 1000}
            row["overhead_us"] = overhead  # per call, against the same call's Session::run
            try:
                import onnxruntime

                o = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
                row["onnxruntime_median_us"], _, _ = median_us(lambda: o.run(None, feed), a.runs, a.warmup)
            except ImportError:
                row["onnxruntime_median_us"] = None
            rows.append(row)
            del s
    print(f"{'model':18s} {'Python run':>11s} {'overhead':>9s} {'wgnn bench':>11s} {'ORT (CPU)':>10s}"
          "  (medians, us per run; overhead: Python run less its Session::run)")
    for r in rows:
        ort = f"{r['onnxruntime_median_us']:10.1f}" if r["onnxruntime_median_us"] is not None else f"{'-':>10s}"
        print(f"{r['model']:18s} {r['python_median_us']:11.1f} {r['overhead_us']:9.1f} {r['cpp_median_us']:11.1f} {ort}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"adapter": info["adapter"], "runs": a.runs, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
